//! The access routes: the viewer's (`/api/viewer/*`: what the page must ask, unlock with a password,
//! redeem an invite or a token, sign out), the channel admin's (viewer passwords, invite links, the
//! signing key) and the access setters (`visibility`, `viewer/*`) with the `access` part of the admin
//! server configuration.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::db::{self, rfc3339};
use super::{Access, Issued};
use crate::config::access::PASS_SECONDS;
use crate::config::validate::{self, ValidationError};
use crate::config::{HookSettings, JwtSettings, PrivatePosts, Settings, Visibility, MASKED};
use crate::http::gate::ViewerPass;
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, JsonBody, Registry, StatusResponse, ValueDoc};
use crate::store::settings::SettingsStore;

const GROUP: &str = "access";

/// `GET /api/viewer/access`: what the viewer page needs before it shows anything of the stream.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessInfo {
    pub visibility: Visibility,
    /// The viewer may watch (a public or unlisted channel, or a valid pass).
    pub unlocked: bool,
    /// The pass' expiry (RFC 3339), while unlocked by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The chat name the pass carries (a member's token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How a viewer may unlock the channel: `password`, `invite`, `token`.
    #[schema(schema_with = methods_schema)]
    pub methods: Vec<&'static str>,
    /// Where a viewer gets a token (token channels), if the channel says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_url: Option<String>,
    pub online: bool,
    /// The channel's name (shown on the prompt).
    pub channel_name: String,
}

/// `AccessInfo::methods`: the ways in `get_access` lists.
fn methods_schema() -> utoipa::openapi::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["password", "invite", "token"])))
        .description(Some("How a viewer may unlock the channel: `password`, `invite`, `token`."))
        .build()
}

/// A viewing pass just issued (also set as the channel's cookie).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PassAnswer {
    pub pass: String,
    /// RFC 3339.
    pub expires_at: String,
}

fn answer(issued: Issued) -> Response {
    let mut resp = Json(PassAnswer { pass: issued.pass, expires_at: rfc3339(issued.expires_at) }).into_response();
    resp.headers_mut().append(header::SET_COOKIE, issued.cookie);
    resp.headers_mut().insert(header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    resp
}

fn user_agent(h: &HeaderMap) -> Option<&str> {
    h.get(header::USER_AGENT).and_then(|v| v.to_str().ok())
}

#[derive(Deserialize, ToSchema)]
pub struct UnlockBody {
    pub password: String,
}

#[derive(Deserialize, ToSchema)]
pub struct InviteBody {
    pub invite: String,
}

#[derive(Deserialize, ToSchema)]
pub struct TokenBody {
    pub jwt: String,
}

async fn get_access(State(a): State<Arc<Access>>, pass: Option<Extension<ViewerPass>>) -> Json<AccessInfo> {
    let s = a.settings.get();
    let vis = s.access.visibility;
    let pass = pass.map(|Extension(p)| p).filter(|p| !p.revoked.is_cancelled());
    let mut methods = Vec::new();
    if vis == Visibility::Password {
        methods.push("password");
    }
    if vis.needs_pass() {
        methods.push("invite");
    }
    if vis == Visibility::Token && s.access.viewer_jwt.configured() {
        methods.push("token");
    }
    let login = &s.access.viewer_jwt.login_url;
    Json(AccessInfo {
        visibility: vis,
        unlocked: !vis.needs_pass() || pass.is_some(),
        expires_at: pass.as_ref().map(|p| rfc3339(p.expires_at)),
        name: pass.as_ref().and_then(|p| p.name.clone()),
        methods,
        login_url: (vis == Visibility::Token && !login.is_empty()).then(|| login.clone()),
        online: a.online(),
        channel_name: s.instance.name.clone(),
    })
}

async fn unlock(
    State(a): State<Arc<Access>>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(b): JsonBody<UnlockBody>,
) -> Result<Response, ApiError> {
    if b.password.is_empty() || b.password.len() > crate::password::MAX_PASSWORD_BYTES {
        return Err(ApiError::NeedsPass("wrong password".into()));
    }
    Ok(answer(a.unlock(&b.password, ip, user_agent(&headers)).await?))
}

async fn invite(
    State(a): State<Arc<Access>>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(b): JsonBody<InviteBody>,
) -> Result<Response, ApiError> {
    if !a.visibility().needs_pass() {
        return Err(ApiError::Conflict("this channel is open to everyone: no invite is needed".into()));
    }
    if b.invite.is_empty() || b.invite.len() > 256 {
        return Err(ApiError::NeedsPass("this invite link is not valid (expired, used up or revoked)".into()));
    }
    Ok(answer(a.redeem(&b.invite, ip, user_agent(&headers)).await?))
}

async fn token(
    State(a): State<Arc<Access>>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    JsonBody(b): JsonBody<TokenBody>,
) -> Result<Response, ApiError> {
    if b.jwt.is_empty() || b.jwt.len() > 8192 {
        return Err(ApiError::NeedsPass("the token is not accepted".into()));
    }
    Ok(answer(a.exchange(&b.jwt, ip, user_agent(&headers)).await?))
}

async fn lock(State(a): State<Arc<Access>>) -> Response {
    let mut resp = StatusResponse::ok("signed out of the channel").into_response();
    resp.headers_mut().append(header::SET_COOKIE, a.cookie("", 0));
    resp
}

#[derive(Deserialize, ToSchema)]
pub struct NewPassword {
    /// 1 to 72 bytes (bcrypt's limit), not only spaces.
    #[schema(min_length = 1, max_length = 72, pattern = r"\S")]
    pub password: String,
    #[serde(default)]
    #[schema(max_length = 200)]
    pub comment: String,
}

#[derive(Deserialize, ToSchema)]
pub struct ById {
    /// The id (a JSON number with no fraction).
    #[schema(value_type = i64)]
    pub id: f64,
}

impl ById {
    fn id(&self) -> Result<i64, ApiError> {
        if self.id.fract() != 0.0 || !self.id.is_finite() {
            return Err(ApiError::bad("id is an integer"));
        }
        // Saturating: an id beyond i64 is no row's id (404).
        Ok(self.id as i64)
    }
}

#[derive(Serialize, ToSchema)]
pub struct Created {
    pub id: i64,
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewInvite {
    #[serde(default)]
    #[schema(max_length = 200)]
    pub comment: String,
    /// How long the link works, seconds (up to a year; 0: until it is revoked; default 7 days).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 31622400)]
    pub expires_in_seconds: Option<i64>,
    /// Uses allowed (0 or absent: any number).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_uses: Option<i64>,
}

/// A new invite link (its secret is shown only here).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedInvite {
    pub id: i64,
    pub invite: String,
    /// The link to hand out (absolute when the server URL is set).
    pub url: String,
    /// RFC 3339.
    pub expires_at: String,
}

/// The expiry of an invite link that works until it is revoked (9999-12-31T23:59:59Z).
const NEVER: i64 = 253_402_300_799;

fn comment(c: &str) -> Result<String, ApiError> {
    let c: String = c.trim().chars().filter(|ch| !ch.is_control()).collect();
    if c.chars().count() > 200 {
        return Err(ApiError::bad("the comment is longer than 200 characters"));
    }
    Ok(c)
}

async fn list_passwords(State(a): State<Arc<Access>>) -> Result<Json<Vec<db::PasswordRow>>, ApiError> {
    Ok(Json(a.passwords().await?))
}

async fn create_password(
    State(a): State<Arc<Access>>,
    JsonBody(b): JsonBody<NewPassword>,
) -> Result<Json<Created>, ApiError> {
    let len = b.password.len();
    if !(1..=crate::password::MAX_PASSWORD_BYTES).contains(&len) || b.password.trim().is_empty() {
        return Err(ApiError::bad("a viewer password has 1 to 72 bytes"));
    }
    let id = a.add_password(b.password, comment(&b.comment)?).await?;
    Ok(Json(Created { id }))
}

async fn delete_password(
    State(a): State<Arc<Access>>,
    JsonBody(b): JsonBody<ById>,
) -> Result<Json<StatusResponse>, ApiError> {
    let id = b.id()?;
    match a.delete_password(id).await? {
        true => Ok(StatusResponse::ok("password deleted; the passes it gave have ended")),
        false => Err(ApiError::NotFound(format!("no viewer password {id}"))),
    }
}

async fn list_invites(State(a): State<Arc<Access>>) -> Result<Json<Vec<db::InviteRow>>, ApiError> {
    Ok(Json(a.invites().await?))
}

async fn create_invite(
    State(a): State<Arc<Access>>,
    JsonBody(b): JsonBody<NewInvite>,
) -> Result<Json<CreatedInvite>, ApiError> {
    let secs = b.expires_in_seconds.unwrap_or(7 * 24 * 3600);
    if !(0..=366 * 24 * 3600).contains(&secs) {
        return Err(ApiError::bad("expiresInSeconds is 0 (until revoked) to 31622400"));
    }
    let max_uses = b.max_uses.unwrap_or(0);
    if !(0..=1_000_000).contains(&max_uses) {
        return Err(ApiError::bad("maxUses is 0 (any number) to 1000000"));
    }
    // "Until revoked": the end of the year 9999 (a date every client can show).
    let expires_at = if secs == 0 { NEVER } else { chrono::Utc::now().timestamp() + secs };
    let (id, secret) = a.add_invite(comment(&b.comment)?, expires_at, max_uses).await?;
    let server = a.settings.get().server.server_url.trim_end_matches('/').to_string();
    // A channel's server URL already ends with its prefix.
    let page = if server.is_empty() { format!("{}/", a.base) } else { format!("{server}/") };
    Ok(Json(CreatedInvite {
        id,
        url: format!("{page}?invite={secret}"),
        invite: secret,
        expires_at: rfc3339(expires_at),
    }))
}

async fn delete_invite(
    State(a): State<Arc<Access>>,
    JsonBody(b): JsonBody<ById>,
) -> Result<Json<StatusResponse>, ApiError> {
    let id = b.id()?;
    match a.delete_invite(id).await? {
        true => Ok(StatusResponse::ok("invite link revoked; the passes it gave have ended")),
        false => Err(ApiError::NotFound(format!("no invite link {id}"))),
    }
}

async fn admin_pass(State(a): State<Arc<Access>>) -> Response {
    // Bound to the admin credentials (a changed admin password ends it) and short-lived.
    let until = chrono::Utc::now().timestamp() + super::ADMIN_PASS_SECONDS;
    let issued = a.issue(a.admin_grant(), "admin".into(), None, Some(until));
    answer(issued)
}

async fn rotate_key(State(a): State<Arc<Access>>) -> Result<Json<StatusResponse>, ApiError> {
    a.rotate_key().await?;
    Ok(StatusResponse::ok("a new signing key: every viewing pass has ended"))
}

/// The access setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Access>] = &[
    Setter::new(
        "visibility",
        "Who may watch: public, unlisted, password or token",
        ValueDoc::Json(r#"{"type":"string","enum":["public","unlisted","password","token"]}"#),
        |_, v, s| set(&mut s.access.visibility, visibility(v)),
    ),
    Setter::new(
        "viewer/passlifetime",
        "How long a viewing pass lasts, seconds (10 to 2592000; a channel's at most 604800)",
        ValueDoc::Json(r#"{"type":"integer","minimum":10,"maximum":2592000}"#),
        |a, v, s| {
            let (lo, hi) = PASS_SECONDS;
            let n = validate::integer(v, lo.into(), hi.into())?;
            let max = super::CHANNEL_PASS_SECONDS_MAX;
            if a.is_channel() && n > i64::from(max) {
                return Err(validate::ValidationError(format!(
                    "a channel's viewing pass may last at most {max} seconds (7 days), the server's limit"
                )));
            }
            set(&mut s.access.viewer_pass_seconds, Ok(n as u32))
        },
    ),
    Setter::new(
        "viewer/federationposts",
        "Go-live posts of a channel that is not public: followers or none",
        ValueDoc::Json(r#"{"type":"string","enum":["followers","none"]}"#),
        |_, v, s| set(&mut s.access.private_federation_posts, validate::typed::<PrivatePosts>(v, "federation posts")),
    ),
    Setter::new(
        "viewer/jwt",
        "The JWT issuer the channel trusts (HS256 secret or JWKS URL, issuer, audience, name claim, login URL)",
        ValueDoc::Schema("JwtSettings"),
        |a, v, s| {
            let next = jwt_settings(v, &s.access.viewer_jwt)?;
            a.reach.check_saved("the JWKS URL", &next.jwks_url).map_err(ValidationError)?;
            s.access.viewer_jwt = next;
            Ok(())
        },
    ),
    Setter::new(
        "viewer/admissionhook",
        "The admission hook (URL, secret, on play, on publish, cache seconds)",
        ValueDoc::Schema("HookSettings"),
        |a, v, s| {
            let next = hook_settings(v, &s.access.admission_hook)?;
            a.reach.check_saved("the admission hook URL", &next.url).map_err(ValidationError)?;
            s.access.admission_hook = next;
            Ok(())
        },
    ),
];

fn visibility(v: &Value) -> Result<Visibility, ValidationError> {
    v.as_str()
        .and_then(Visibility::parse)
        .ok_or_else(|| ValidationError("visibility is one of public, unlisted, password, token".into()))
}

fn jwt_settings(v: &Value, old: &JwtSettings) -> Result<JwtSettings, ValidationError> {
    let mut next: JwtSettings = validate::typed(v, "JWT settings")?;
    if next.secret == MASKED {
        next.secret = old.secret.clone();
    }
    if !next.secret.is_empty() && next.secret.len() < 32 {
        return Err(ValidationError("an HS256 secret has at least 32 characters".into()));
    }
    next.jwks_url = validate::url(&Value::String(next.jwks_url), true)?;
    next.login_url = validate::url(&Value::String(next.login_url), true)?;
    for (what, s) in [("issuer", &next.issuer), ("audience", &next.audience), ("nameClaim", &next.name_claim)] {
        if s.len() > 512 {
            return Err(ValidationError(format!("{what} is longer than 512 characters")));
        }
    }
    Ok(next)
}

fn hook_settings(v: &Value, old: &HookSettings) -> Result<HookSettings, ValidationError> {
    let mut next: HookSettings = validate::typed(v, "admission hook settings")?;
    if next.secret == MASKED {
        next.secret = old.secret.clone();
    }
    next.url = validate::url(&Value::String(next.url), true)?;
    if next.cache_seconds > 3600 {
        return Err(ValidationError("cacheSeconds is 0 to 3600".into()));
    }
    Ok(next)
}

impl SettingsHost for Access {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }

    fn is_channel(&self) -> bool {
        !self.channel.is_default()
    }
}

/// The access settings as the admin configuration shows them (secrets masked).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessConfig {
    pub visibility: Visibility,
    pub viewer_pass_seconds: u32,
    pub private_federation_posts: PrivatePosts,
    pub viewer_jwt: JwtSettings,
    pub admission_hook: HookSettings,
}

/// The access feature's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct AccessConfigPart {
    /// Who may watch the channel, and how (`visibility`, passes, JWT issuer, admission hook).
    pub access: AccessConfig,
}

fn masked(secret: &str) -> String {
    if secret.is_empty() {
        String::new()
    } else {
        MASKED.to_string()
    }
}

/// The access feature's part of the server configuration.
pub fn server_config(s: &Settings) -> AccessConfigPart {
    let a = &s.access;
    AccessConfigPart {
        access: AccessConfig {
            visibility: a.visibility,
            viewer_pass_seconds: a.viewer_pass_seconds,
            private_federation_posts: a.private_federation_posts,
            viewer_jwt: JwtSettings { secret: masked(&a.viewer_jwt.secret), ..a.viewer_jwt.clone() },
            admission_hook: HookSettings { secret: masked(&a.admission_hook.secret), ..a.admission_hook.clone() },
        },
    }
}

/// The access routes and setters.
pub fn routes(reg: &mut Registry, access: Arc<Access>) {
    setters::register(reg, access.clone(), SETTERS);
    reg.schema::<JwtSettings>();
    reg.schema::<HookSettings>();
    let mut r = reg.scope(access);
    r.get("/api/viewer/access", GROUP, Auth::Public, "Whether this viewer may watch, and how to unlock", get_access)
        .returns::<AccessInfo>();
    r.post(
        "/api/viewer/unlock",
        GROUP,
        Auth::Public,
        "A viewing pass for a password",
        BodyDoc::Schema("UnlockBody"),
        unlock,
    )
    .returns::<PassAnswer>()
    .error(401, "Wrong password")
    .error(409, "The channel does not take a password")
    .error(403, "Denied by the admission hook")
    .error(429, "Too many wrong passwords");
    r.schema::<UnlockBody>();
    r.post(
        "/api/viewer/invite",
        GROUP,
        Auth::Public,
        "A viewing pass for an invite link",
        BodyDoc::Schema("InviteBody"),
        invite,
    )
    .returns::<PassAnswer>()
    .error(401, "Not a valid invite")
    .error(409, "The channel is public: no invite is needed")
    .error(403, "Denied by the admission hook")
    .error(429, "Too many wrong invites");
    r.schema::<InviteBody>();
    r.post(
        "/api/viewer/token",
        GROUP,
        Auth::Public,
        "A viewing pass for a token (JWT)",
        BodyDoc::Schema("TokenBody"),
        token,
    )
    .returns::<PassAnswer>()
    .error(401, "The token is not accepted")
    .error(409, "The channel takes no tokens")
    .error(403, "Denied by the admission hook")
    .error(429, "Too many wrong tokens");
    r.schema::<TokenBody>();
    r.post(
        "/api/viewer/lock",
        GROUP,
        Auth::Public,
        "Sign out of the channel (clears the pass cookie)",
        BodyDoc::None,
        lock,
    );
    r.get("/api/admin/viewer/passwords", GROUP, Auth::Admin, "The viewer passwords", list_passwords)
        .returns_list::<db::PasswordRow>();
    r.post(
        "/api/admin/viewer/passwords/create",
        GROUP,
        Auth::Admin,
        "Add a viewer password",
        BodyDoc::Schema("NewPassword"),
        create_password,
    )
    .returns::<Created>()
    .error(409, "Too many passwords");
    r.schema::<NewPassword>();
    r.post(
        "/api/admin/viewer/passwords/delete",
        GROUP,
        Auth::Admin,
        "Delete a viewer password (its passes end)",
        BodyDoc::Schema("ById"),
        delete_password,
    )
    .error(404, "No such password");
    r.schema::<ById>();
    r.get("/api/admin/viewer/invites", GROUP, Auth::Admin, "The invite links", list_invites)
        .returns_list::<db::InviteRow>();
    r.post(
        "/api/admin/viewer/invites/create",
        GROUP,
        Auth::Admin,
        "Create an invite link",
        BodyDoc::Schema("NewInvite"),
        create_invite,
    )
    .returns::<CreatedInvite>()
    .error(409, "Too many invite links");
    r.schema::<NewInvite>();
    r.post(
        "/api/admin/viewer/invites/delete",
        GROUP,
        Auth::Admin,
        "Revoke an invite link (its passes end)",
        BodyDoc::Schema("ById"),
        delete_invite,
    )
    .error(404, "No such invite link");
    r.post(
        "/api/admin/viewer/pass",
        GROUP,
        Auth::Admin,
        "A viewing pass for the admin (the dashboard's player; also set as the cookie)",
        BodyDoc::None,
        admin_pass,
    )
    .returns::<PassAnswer>();
    r.post(
        "/api/admin/viewer/rotatekey",
        GROUP,
        Auth::Admin,
        "A new signing key (every viewing pass ends)",
        BodyDoc::None,
        rotate_key,
    );
}
