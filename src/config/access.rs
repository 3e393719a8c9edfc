//! The viewer access section of the settings: who may watch a channel (its visibility), how long a
//! viewing pass lasts, the JWT issuer it trusts, the admission hook, and what federation posts while
//! it is not public. The `access` feature owns its setters and its part of the admin configuration
//! (`access::api`); `federation`, `channels`, `yp` and `storage` read the visibility.

use serde::{Deserialize, Serialize};

/// Who may watch a channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Anyone (Owncast's only behaviour).
    #[default]
    Public,
    /// Anyone with the link; not in `/api/channels`, the directory, nor public go-live posts.
    Unlisted,
    /// A viewing pass from one of the channel's passwords or invite links.
    Password,
    /// A viewing pass from a token (JWT) of the operator's own site, or an invite link.
    Token,
}

impl Visibility {
    pub const ALL: [Visibility; 4] =
        [Visibility::Public, Visibility::Unlisted, Visibility::Password, Visibility::Token];

    /// Password and token channels: every way out asks for a viewing pass.
    pub fn needs_pass(self) -> bool {
        matches!(self, Visibility::Password | Visibility::Token)
    }

    /// Listed in `/api/channels` and the directory, and announced in public posts.
    pub fn is_public(self) -> bool {
        self == Visibility::Public
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Unlisted => "unlisted",
            Visibility::Password => "password",
            Visibility::Token => "token",
        }
    }

    pub fn parse(s: &str) -> Option<Visibility> {
        Visibility::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// What a channel that is not public sends to the fediverse when it goes live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PrivatePosts {
    /// The go-live post goes to the followers only (not public, not in the public timeline).
    #[default]
    Followers,
    /// No go-live post.
    None,
}

/// The JWT issuer a channel trusts (its "token" visibility): HS256 with `secret`, or RS256/ES256 with
/// the keys at `jwks_url`. Empty `issuer`/`audience`: not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtSettings {
    /// HS256 shared secret (empty: none; at least 32 characters). Shown masked.
    #[schema(pattern = r"^(|\*{8}|[\s\S]{32,})$")]
    pub secret: String,
    /// A JWKS URL (RS256 / ES256 keys; empty: none).
    #[schema(pattern = r"^(|https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!-~]*)?)$")]
    pub jwks_url: String,
    /// The `iss` a token must carry (empty: any).
    #[schema(max_length = 512)]
    pub issuer: String,
    /// The `aud` a token must carry (empty: any).
    #[schema(max_length = 512)]
    pub audience: String,
    /// The claim that names the member in chat (empty: `name`).
    #[schema(max_length = 512)]
    pub name_claim: String,
    /// Where the viewer page sends a viewer without a token to get one (empty: nowhere).
    #[schema(pattern = r"^(|https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!-~]*)?)$")]
    pub login_url: String,
}

impl JwtSettings {
    /// Whether an issuer is configured at all.
    pub fn configured(&self) -> bool {
        !self.secret.is_empty() || !self.jwks_url.is_empty()
    }
}

/// The admission hook: an operator URL asked before a viewer plays or a publisher goes live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct HookSettings {
    /// The URL castd POSTs to (empty: no hook).
    #[schema(pattern = r"^(|https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!-~]*)?)$")]
    pub url: String,
    /// Signs each request (`X-Castd-Signature: sha256=<hex HMAC of the body>`). Shown masked.
    pub secret: String,
    /// Ask before a viewer plays.
    pub on_play: bool,
    /// Ask before a publisher (with a valid stream key) goes live.
    pub on_publish: bool,
    /// How long an answer is kept, seconds (0-3600).
    #[schema(maximum = 3600)]
    pub cache_seconds: u32,
}

impl Default for HookSettings {
    fn default() -> Self {
        Self { url: String::new(), secret: String::new(), on_play: true, on_publish: false, cache_seconds: 30 }
    }
}

/// Shortest and longest viewing pass, seconds.
pub const PASS_SECONDS: (u32, u32) = (10, 30 * 24 * 3600);

/// The viewer access settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AccessSettings {
    pub visibility: Visibility,
    /// How long a viewing pass lasts, seconds (a JWT's pass ends with the JWT, if sooner).
    pub viewer_pass_seconds: u32,
    /// Go-live posts of a channel that is not public.
    pub private_federation_posts: PrivatePosts,
    pub viewer_jwt: JwtSettings,
    pub admission_hook: HookSettings,
}

impl Default for AccessSettings {
    fn default() -> Self {
        Self {
            visibility: Visibility::Public,
            viewer_pass_seconds: 12 * 3600,
            private_federation_posts: PrivatePosts::Followers,
            viewer_jwt: JwtSettings::default(),
            admission_hook: HookSettings::default(),
        }
    }
}
