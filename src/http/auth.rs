//! Authentication shared by the features: the admin check (HTTP Basic with the user `admin` and the
//! stored password hash) and the `UserTokens` handle through which routes outside chat check a chat
//! user's `?accessToken=`.
//!
//! A verified admin password is remembered by its SHA-256 (with the hash it verified against), so the
//! dashboard's polling does not pay for the slow hash on every request; changing the password changes
//! the hash and so invalidates the cache.
//!
//! Guessing is limited per client address (`throttle::Backoff`, [`BackoffConfig::SECRETS`]: 5 free
//! failures, then a wait that doubles with each further one, up to 5 minutes). An address that must
//! wait gets 429 with `Retry-After` before anything is checked: no bcrypt, and not even the cached
//! password. That last part is deliberate: were the cached (right) password let in while wrong ones
//! are refused, the refusals themselves would answer "wrong" at network speed, an unlimited oracle
//! for guessing. So an admin who shares an address with someone guessing (the same NAT) waits too;
//! an admin elsewhere is not affected. Each attempt that reaches bcrypt is counted before it runs
//! (concurrent guesses cannot slip through together), and only a password bcrypt accepts clears
//! the address (a cached one does not, so an admin's polling cannot keep resetting a guesser's count).
//! bcrypt runs on the password pool (`password::verify_pooled`), never on tokio's blocking pool that
//! SQLite shares; when that pool is full the answer is 503 at once. Every check of the admin password
//! goes through [`AdminAuth::check`]: the admin routes' middleware and [`AdminAuth::is_admin`].
//!
//! Upgrades: a stored argon2 hash of an earlier version is replaced by a bcrypt hash (Owncast's format)
//! after the first successful login, and the stored "weak password" flag follows the password that
//! last logged in; either change is saved to the settings, whose store announces it (so the security
//! warnings are re-evaluated). A browser `Origin` from another site is refused (403), as
//! Owncast does, so a page elsewhere cannot drive the admin API with cached credentials.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use chrono::{DateTime, Utc};
use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use super::ApiError;
use crate::password;
use crate::store::settings::SettingsStore;
use crate::throttle::{Backoff, BackoffConfig};

/// The user name Basic auth requires.
pub const ADMIN_USER: &str = "admin";

/// The stored hash a password verified against, and the password's SHA-256.
type Verified = Option<(String, [u8; 32])>;

/// The admin credentials check, handed to the registry (and to whoever must verify the password).
#[derive(Clone)]
pub struct AdminAuth {
    settings: SettingsStore,
    cache: Arc<RwLock<Verified>>,
    /// Failed passwords per client address (one table for the server and every channel).
    backoff: Backoff,
    /// A channel's check: the server admin's settings, whose password works here too.
    server: Option<SettingsStore>,
}

impl AdminAuth {
    pub fn new(settings: SettingsStore) -> Self {
        Self { settings, cache: Arc::default(), backoff: Backoff::new(BackoffConfig::SECRETS), server: None }
    }

    /// A channel's admin check: the channel's own admin password (in `settings`) or the server
    /// admin's (`server`'s), with the server's backoff table (a guess at any admin password counts
    /// against the address everywhere).
    pub fn for_channel(settings: SettingsStore, server: &AdminAuth) -> Self {
        Self { settings, cache: Arc::default(), backoff: server.backoff.clone(), server: Some(server.settings.clone()) }
    }

    /// A digest of the stored hashes of the passwords this check takes (this admin's, and for a
    /// channel the server admin's): it changes with either password, so what is bound to it (the
    /// admin's viewing pass, `access`) ends when an admin password is changed.
    pub fn credential_digest(&self) -> [u8; 32] {
        let mut d = Sha256::new();
        d.update(b"castd admin credential\0");
        d.update(self.settings.get().server.admin_password_hash.as_bytes());
        d.update(b"\0");
        if let Some(server) = &self.server {
            d.update(server.get().server.admin_password_hash.as_bytes());
        }
        d.finalize().into()
    }

    /// Whether a request from `ip` carries the admin's Basic credentials (for routes that are public
    /// in part, such as a replay the owner made public). `Err` when `ip` must wait (429) or the
    /// password pool is full (503): the caller answers that rather than "not the admin".
    pub async fn is_admin(&self, ip: Option<IpAddr>, headers: &axum::http::HeaderMap) -> Result<bool, ApiError> {
        match basic_password(headers) {
            Some(p) => self.check(ip, &p).await,
            None => Ok(false),
        }
    }

    /// Check `password`, sent from `ip`, against the stored admin hash (see the module doc): `Ok(true)`
    /// for the admin's password, `Ok(false)` for a wrong one, `Err` (429, 503) when it was not
    /// checked. `ip` is `None` only without connection info; such requests share one address.
    pub async fn check(&self, ip: Option<IpAddr>, password: &str) -> Result<bool, ApiError> {
        let ip = ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let own = self.settings.get().server.admin_password_hash.clone();
        let server = self.server.as_ref().map(|s| s.get().server.admin_password_hash.clone());
        // The hashes a password may match: this admin's, then (for a channel) the server admin's.
        let hashes: Vec<String> = [Some(own.clone()), server].into_iter().flatten().filter(|h| !h.is_empty()).collect();
        if hashes.is_empty() {
            return Ok(false);
        }
        self.backoff.check(ip)?;
        let digest: [u8; 32] = Sha256::digest(password.as_bytes()).into();
        if let Some((cached_hash, cached_digest)) = self.cache.read().as_ref() {
            if hashes.contains(cached_hash) && password::same_secret(&digest, cached_digest) {
                return Ok(true);
            }
        }
        self.backoff.attempt(ip)?;
        let mut matched = None;
        for hash in &hashes {
            let ok = password::verify_pooled(password, hash)
                .await
                .map_err(|busy| ApiError::Unavailable(busy.to_string()))?;
            if ok {
                matched = Some(hash.clone());
                break;
            }
        }
        match matched {
            Some(hash) => {
                self.backoff.succeeded(ip);
                *self.cache.write() = Some((hash.clone(), digest));
                // The re-hash and weak flag are this admin's own password's (the server admin's are kept
                // by the server's check).
                if hash == own {
                    self.after_login(password, &hash).await;
                }
                Ok(true)
            }
            None => {
                tracing::info!(%ip, "a wrong admin password");
                Ok(false)
            }
        }
    }

    /// After a verified login: re-hash an old argon2 hash with bcrypt and keep the weak flag current.
    async fn after_login(&self, password: &str, verified_hash: &str) {
        let weak = password::is_weak(password);
        let rehash = password::needs_rehash(verified_hash) && password.len() <= password::MAX_PASSWORD_BYTES;
        if !rehash && weak == self.settings.get().server.admin_password_weak {
            return;
        }
        let new_hash = if rehash {
            match password::hash_pooled(password).await {
                Ok(Ok(h)) => Some(h),
                Ok(Err(e)) => {
                    tracing::warn!("could not re-hash the admin password with bcrypt: {e}");
                    None
                }
                // Done at a later login.
                Err(busy) => {
                    tracing::info!("the admin password hash was not upgraded now: {busy}");
                    None
                }
            }
        } else {
            None
        };
        let expected = verified_hash.to_string();
        let saved = self
            .settings
            .update::<crate::store::StoreError, _>(|s| {
                // Only if the password was not changed meanwhile.
                if s.server.admin_password_hash == expected {
                    if let Some(h) = new_hash {
                        s.server.admin_password_hash = h;
                    }
                    s.server.admin_password_weak = weak;
                }
                Ok(())
            })
            .await;
        match saved {
            Ok(()) if rehash => tracing::info!("the admin password hash was upgraded to bcrypt"),
            Ok(()) => {}
            Err(e) => tracing::warn!("could not save the admin password hash: {e}"),
        }
    }
}

/// Why a GET of an action is refused to a browser (`Scope::action`); also its documented 405.
pub const BROWSER_GET_REFUSED: &str =
    "this GET changes state and is answered only to tools, not to a browser: send it as POST";

/// The request headers only a browser sends: with any of them a GET of an action is refused.
const BROWSER_MARKS: [&str; 6] = ["sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "origin", "referer", "cookie"];

/// Whether `headers` carry any of a browser's marks ([`BROWSER_MARKS`]).
pub fn from_a_browser(headers: &axum::http::HeaderMap) -> bool {
    BROWSER_MARKS.iter().any(|h| headers.contains_key(*h))
}

/// Middleware of an action's GET (`Scope::action`): 405 with `Allow: POST` and a StatusResponse for a
/// request with a browser's marks, before any credential is checked; a tool's GET (none of them, as
/// Owncast's own tools send it) goes on.
pub async fn refuse_browser_get(req: Request, next: Next) -> Response {
    if !from_a_browser(req.headers()) {
        return next.run(req).await;
    }
    let body = super::StatusResponse { success: false, message: BROWSER_GET_REFUSED.to_string() };
    let mut resp = (axum::http::StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response();
    resp.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    resp.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    resp
}

/// Middleware for admin routes.
pub async fn require_admin(State(auth): State<AdminAuth>, req: Request, next: Next) -> Response {
    if !same_origin(&req) {
        return ApiError::Forbidden("forbidden: cross-origin admin request".into()).into_response();
    }
    let Some(password) = basic_password(req.headers()) else {
        return ApiError::Unauthorized.into_response();
    };
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let ip = peer.map(|p| super::client_ip(p, req.headers()));
    match auth.check(ip, &password).await {
        Ok(true) => next.run(req).await,
        Ok(false) => ApiError::Unauthorized.into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// The password of a Basic `admin:<password>` header, if that is what the request carries.
fn basic_password(headers: &axum::http::HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, pass) = decoded.split_once(':')?;
    (user == ADMIN_USER).then(|| pass.to_string())
}

/// An `Origin` header, when present, must name this host.
fn same_origin(req: &Request) -> bool {
    let Some(origin) = req.headers().get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return true;
    };
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    match url::Url::parse(origin) {
        Ok(u) => {
            let origin_host = match u.port() {
                Some(p) => format!("{}:{p}", u.host_str().unwrap_or_default()),
                None => u.host_str().unwrap_or_default().to_string(),
            };
            origin_host.eq_ignore_ascii_case(host)
        }
        Err(_) => false,
    }
}

/// `?accessToken=`: how chat users authenticate on the HTTP routes (Owncast's query parameter).
#[derive(Debug, Default, serde::Deserialize)]
pub struct TokenQuery {
    #[serde(rename = "accessToken")]
    pub access_token: Option<String>,
}

/// The future `UserTokens::user_id` returns.
pub type UserLookup<'a> = Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;

/// An external sign-in of a chat user (IndieAuth, Fediverse): who vouched for them and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    /// `"indieauth"` or `"fediverse"`.
    pub provider: String,
    /// The identity proven: the `me` URL (IndieAuth) or `user@host` (Fediverse).
    pub identity: String,
    /// A display name to take over (from the profile), if any.
    pub display_name: Option<String>,
}

/// The future `UserTokens::sign_in` returns: the user's new display name, or `None` when there is no
/// such (enabled) user.
pub type SignInResult<'a> = Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;

/// Checks a chat user's access token for routes that live outside the chat feature, records external
/// sign-ins, and hands over the stored messages of a time window (a replay's chat); chat implements it,
/// the composition root hands it over.
pub trait UserTokens: Send + Sync {
    /// The id of the enabled user holding `token`, unless `ip` is banned.
    fn user_id<'a>(&'a self, token: &'a str, ip: Option<IpAddr>) -> UserLookup<'a>;
    /// Mark `user_id` authenticated (the flag "require authentication" admits), record the provider
    /// and identity, take over the display name if one is given (unless an authenticated user has
    /// it), and tell the user's open chat sockets.
    fn sign_in<'a>(&'a self, user_id: &'a str, sign_in: SignIn) -> SignInResult<'a>;
    /// The user holding `token`, enabled or not (clip permissions tell a disabled user apart).
    fn user<'a>(&'a self, token: &'a str) -> UserFetch<'a>;
    /// The messages viewers may see (visible, not of a disabled user) stamped in `[from, to)`, oldest
    /// first, at most `limit` (a replay's chat).
    fn chat_between(&self, from: DateTime<Utc>, to: DateTime<Utc>, limit: u32) -> ChatLines<'_>;
}

/// The future `UserTokens::chat_between` returns (`Err`: the store failed, in words).
pub type ChatLines<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<crate::events::chat::StoredLine>, String>> + Send + 'a>>;

/// The future `UserTokens::user` returns.
pub type UserFetch<'a> = Pin<Box<dyn Future<Output = Option<crate::events::chat::User>> + Send + 'a>>;
