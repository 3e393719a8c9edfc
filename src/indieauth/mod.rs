//! IndieAuth: chat sign-in with your own website ([`client`]), and castd as the streamer's IndieAuth
//! server ([`server`]); [`discovery`] is the guarded fetcher both use to read other sites.
//!
//! Routes (Owncast's paths):
//! - `POST /api/auth/indieauth?accessToken=` `{authHost}` → `{redirect}`: start a chat sign-in.
//! - `GET /api/auth/indieauth/callback`: where the user's authorization endpoint sends the browser
//!   back; redirects to the viewer page (`/?indieauth=signedin` or `/?indieauthError=<error>`), or
//!   answers the IndieAuth result as JSON when the request accepts `application/json` only.
//! - `GET /api/auth/provider/indieauth` (admin): an authorization request, shown as an approval page;
//!   `POST /api/auth/provider/indieauth/approve` (admin, form `request`, `decision`) decides it.
//! - `POST /api/auth/provider/indieauth` (form or JSON): code redemption → `{me, profile}`.
//! - `GET /.well-known/oauth-authorization-server`: the server's IndieAuth metadata (issuer, endpoint);
//!   the viewer page links it as `indieauth-metadata`.
//!
//! Errors carry the IndieAuth result's `error` and `errorDescription` (and OAuth's
//! `error_description`), beside the usual `success:false, message`. Everything lives in memory: a
//! restart only cancels sign-ins in progress. [`start`] prunes expired flows and codes every minute.
//!
//! Switches (environment): `CASTD_INDIEAUTH_ALLOW_LOOPBACK=1` lets discovery fetch loopback addresses
//! (development and tests only); `CASTD_INDIEAUTH_CODE_SECS` shortens the code lifetime (tests).

pub mod client;
pub mod discovery;
pub mod server;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::http::auth::TokenQuery;
use crate::http::headers::{Framing, Page};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, JsonBody, Registry, ResponseDoc, SignIn, UserTokens};
use crate::store::settings::SettingsStore;
use crate::tasks::{Stage, Tasks};

const GROUP: &str = "indieauth";
/// Where this server's IndieAuth metadata is served.
pub const METADATA_PATH: &str = "/.well-known/oauth-authorization-server";
/// The authorization endpoint of this server (also its code redemption endpoint).
pub const PROVIDER_PATH: &str = "/api/auth/provider/indieauth";

/// A refused IndieAuth step: the OAuth/IndieAuth `error` code and a readable description.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{description}")]
pub struct Refused {
    pub error: &'static str,
    pub description: String,
}

impl Refused {
    pub fn new(error: &'static str, description: impl Into<String>) -> Self {
        Self { error, description: description.into() }
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let body = json!({
            "success": false,
            "message": self.description,
            "error": self.error,
            "errorDescription": self.description,
            "error_description": self.description,
        });
        (StatusCode::BAD_REQUEST, Json(body)).into_response()
    }
}

/// The profile in an IndieAuth result.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Profile {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub photo: Option<String>,
}

/// The IndieAuth result (interface.md): `me` and `profile` on success, `error` and
/// `errorDescription` on failure.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct IndieAuthResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub me: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(rename = "errorDescription", skip_serializing_if = "Option::is_none")]
    pub error_description: Option<String>,
}

/// `{authHost}`: the website a chat user signs in with.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct StartIndieAuth {
    /// The user's website, e.g. `https://example.com/` (`https://` is assumed when missing).
    #[serde(rename = "authHost")]
    #[schema(max_length = 2048)]
    pub auth_host: Option<String>,
}

/// `{redirect}`: where to send the browser.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct StartIndieAuthResponse {
    pub redirect: String,
}

/// The feature's switches (see the module doc).
#[derive(Debug, Clone)]
pub struct IndieAuthConfig {
    /// Let discovery fetch loopback addresses (development switch).
    pub allow_loopback: bool,
    /// Lifetime of a code this server issues (at most 10 minutes).
    pub code_ttl: Duration,
}

impl Default for IndieAuthConfig {
    fn default() -> Self {
        Self { allow_loopback: false, code_ttl: server::MAX_CODE_TTL }
    }
}

impl IndieAuthConfig {
    pub fn from_env() -> Self {
        let on = |v: String| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on");
        let allow_loopback = std::env::var("CASTD_INDIEAUTH_ALLOW_LOOPBACK").ok().is_some_and(on);
        let code_ttl = std::env::var("CASTD_INDIEAUTH_CODE_SECS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.clamp(1, server::MAX_CODE_TTL.as_secs())))
            .unwrap_or(server::MAX_CODE_TTL);
        Self { allow_loopback, code_ttl }
    }
}

/// Errors building the feature.
#[derive(Debug, thiserror::Error)]
pub enum IndieAuthError {
    #[error("HTTP client: {0}")]
    Client(#[from] crate::outbound::OutboundError),
}

/// The feature's state: both sides' pending state, the fetcher, and the handles it is given.
pub struct IndieAuth {
    config: IndieAuthConfig,
    fetcher: discovery::Fetcher,
    flows: client::Flows,
    provider: server::Provider,
    settings: SettingsStore,
    /// Checks chat users' tokens and records their sign-in.
    users: Arc<dyn UserTokens>,
}

impl IndieAuth {
    pub fn new(
        config: IndieAuthConfig,
        settings: SettingsStore,
        users: Arc<dyn UserTokens>,
    ) -> Result<Arc<Self>, IndieAuthError> {
        if config.allow_loopback {
            tracing::warn!("IndieAuth may fetch loopback addresses (CASTD_INDIEAUTH_ALLOW_LOOPBACK): development only");
        }
        let fetcher = discovery::Fetcher::new(config.allow_loopback)?;
        Ok(Arc::new(Self {
            config,
            fetcher,
            flows: client::Flows::default(),
            provider: server::Provider::default(),
            settings,
            users,
        }))
    }

    /// This server's identity: the server URL with a trailing slash, if set.
    fn me(&self) -> Option<String> {
        let s = self.settings.get();
        let base = s.server.server_url.trim().trim_end_matches('/');
        (!base.is_empty()).then(|| format!("{base}/"))
    }

    fn profile(&self) -> Profile {
        let s = self.settings.get();
        let base = s.server.server_url.trim().trim_end_matches('/').to_string();
        Profile {
            name: Some(s.instance.name.clone()),
            photo: (!base.is_empty()).then(|| format!("{base}/logo")),
            url: self.me(),
        }
    }
}

pub fn routes(reg: &mut Registry, state: Arc<IndieAuth>) {
    let mut reg = reg.scope(state);
    reg.schema::<StartIndieAuth>();
    reg.schema::<StartIndieAuthResponse>();
    reg.schema::<IndieAuthResult>();
    reg.schema::<Profile>();
    reg.schema::<server::Redeem>();
    reg.post(
        "/api/auth/indieauth",
        GROUP,
        Auth::User,
        "Start a chat sign-in with IndieAuth {authHost}; answers {redirect}, the URL to send the browser to",
        BodyDoc::Schema("StartIndieAuth"),
        start_flow,
    )
    .error(400, "The server URL is not set, or the website cannot be used to sign in");
    reg.get(
        client::CALLBACK_PATH,
        GROUP,
        Auth::Public,
        "IndieAuth redirect target (code, state, iss): signs the chat user in and redirects to the viewer page (JSON IndieAuth result with Accept: application/json)",
        callback,
    )
    .returns::<IndieAuthResult>()
    .redirects(302, "A browser is sent to the viewer page (?indieauth=signedin or ?indieauthError=<error>)");
    reg.get(
        PROVIDER_PATH,
        GROUP,
        Auth::Admin,
        "IndieAuth authorization request (response_type, client_id, redirect_uri, state, code_challenge, code_challenge_method=S256, me): the admin's approval page",
        authorize,
    )
    .answers(ResponseDoc::Content("text/html"))
    .error(400, "The server URL is not set, or the request is not a valid IndieAuth authorization request");
    reg.post(
        "/api/auth/provider/indieauth/approve",
        GROUP,
        Auth::Admin,
        "Approve or deny an authorization request (form: request, decision=approve|deny); redirects (303) to the client",
        BodyDoc::Form(
            r#"{"type":"object","required":["request","decision"],"properties":{"request":{"type":"string","description":"The id of the pending request (from the approval page)"},"decision":{"type":"string","enum":["approve","deny"]}}}"#,
        ),
        approve,
    )
    .answers(ResponseDoc::Redirect(303, "Back to the client's redirect_uri"))
    .error(400, "No such pending request, or no decision");
    reg.get(
        METADATA_PATH,
        GROUP,
        Auth::Public,
        "IndieAuth server metadata (issuer, authorization_endpoint, S256); 404 until the server URL is set",
        metadata,
    )
    .returns::<IndieAuthMetadata>()
    .error(404, "The server URL is not set");
    reg.post(
        PROVIDER_PATH,
        GROUP,
        Auth::Public,
        "IndieAuth code redemption (form or JSON: code, client_id, redirect_uri, code_verifier); answers the IndieAuth result",
        BodyDoc::Schema("Redeem"),
        redeem,
    )
    .returns::<IndieAuthResult>()
    .error(400, "The code is not one this server issued for that client, redirect_uri and verifier");
}

/// Prune expired flows, requests and codes every minute.
pub fn start(state: Arc<IndieAuth>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "indieauth: prune", async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tick.tick().await;
            state.flows.prune(client::FLOW_TTL);
            state.provider.prune(state.config.code_ttl);
        }
    });
}

async fn start_flow(
    State(state): State<Arc<IndieAuth>>,
    ClientIp(ip): ClientIp,
    Query(q): Query<TokenQuery>,
    JsonBody(req): JsonBody<StartIndieAuth>,
) -> Result<Json<StartIndieAuthResponse>, Response> {
    let token = q.access_token.unwrap_or_default();
    let Some(user_id) = (if token.is_empty() { None } else { state.users.user_id(&token, ip).await }) else {
        return Err(ApiError::UnauthorizedToken.into_response());
    };
    let server_url = state.settings.get().server.server_url.clone();
    let redirect = state
        .flows
        .start(&state.fetcher, &server_url, &user_id, req.auth_host.as_deref().unwrap_or_default(), client::FLOW_TTL)
        .await
        .map_err(|e| {
            tracing::info!(error = e.error, "IndieAuth sign-in not started: {}", e.description);
            e.into_response()
        })?;
    Ok(Json(StartIndieAuthResponse { redirect }))
}

/// Whether the caller wants JSON rather than a page (an API client, not a browser).
fn wants_json(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    accept.contains("application/json") && !accept.contains("text/html")
}

async fn callback(
    State(state): State<Arc<IndieAuth>>,
    headers: HeaderMap,
    Query(cb): Query<client::Callback>,
) -> Response {
    let outcome = match state.flows.finish(&state.fetcher, &cb, client::FLOW_TTL).await {
        Ok(v) => {
            let sign_in = SignIn {
                provider: "indieauth".into(),
                identity: v.me.clone(),
                display_name: v.profile.as_ref().and_then(|p| p.name.clone()),
            };
            match state.users.sign_in(&v.user_id, sign_in).await {
                Some(name) => {
                    tracing::info!(user = %v.user_id, me = %v.me, "chat user signed in with IndieAuth as {name}");
                    Ok(IndieAuthResult { me: Some(v.me), profile: v.profile, ..Default::default() })
                }
                None => Err(Refused::new("invalid_user", "the chat user is unknown or disabled")),
            }
        }
        Err(e) => Err(e),
    };
    if let Err(e) = &outcome {
        tracing::info!(error = e.error, "IndieAuth sign-in refused: {}", e.description);
    }
    if wants_json(&headers) {
        return match outcome {
            Ok(result) => Json(result).into_response(),
            Err(e) => e.into_response(),
        };
    }
    // Back to this channel's viewer page (`/c/{slug}/` on a channel, `/` on the default channel).
    let page = crate::http::urls::local_redirect(&viewer_page(&state.settings.get().server.server_url));
    let location = match outcome {
        Ok(_) => format!("{page}?indieauth=signedin"),
        Err(e) => format!("{page}?indieauthError={}", e.error),
    };
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

/// The viewer page a sign-in returns to: `/` on the default channel, the channel's `/c/{slug}/` on another
/// (whose server URL is the server's + `/c/{slug}`).
fn viewer_page(server_url: &str) -> String {
    let trimmed = server_url.trim().trim_end_matches('/');
    let path = trimmed
        .find("://")
        .map_or("", |scheme| trimmed[scheme + 3..].find('/').map_or("", |at| &trimmed[scheme + 3 + at..]));
    match path.rfind("/c/") {
        Some(at) if !path[at + 3..].is_empty() && !path[at + 3..].contains('/') => format!("{}/", &path[at..]),
        _ => "/".to_string(),
    }
}

/// The IndieAuth server metadata (RFC 8414 fields IndieAuth uses).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct IndieAuthMetadata {
    /// The server URL.
    pub issuer: String,
    pub authorization_endpoint: String,
    pub response_types_supported: Vec<&'static str>,
    pub grant_types_supported: Vec<&'static str>,
    pub code_challenge_methods_supported: Vec<&'static str>,
    pub authorization_response_iss_parameter_supported: bool,
    /// None: castd grants identity only.
    pub scopes_supported: Vec<&'static str>,
}

async fn metadata(State(state): State<Arc<IndieAuth>>) -> Response {
    let Some(me) = state.me() else {
        return ApiError::NotFound("IndieAuth is not available until the server URL (serverurl) is set".into())
            .into_response();
    };
    let endpoint = format!("{}{PROVIDER_PATH}", me.trim_end_matches('/'));
    Json(IndieAuthMetadata {
        issuer: me.to_string(),
        authorization_endpoint: endpoint,
        response_types_supported: vec!["code"],
        grant_types_supported: vec!["authorization_code"],
        code_challenge_methods_supported: vec!["S256"],
        authorization_response_iss_parameter_supported: true,
        scopes_supported: Vec::new(),
    })
    .into_response()
}

async fn authorize(State(state): State<Arc<IndieAuth>>, Query(req): Query<server::AuthRequest>) -> Response {
    let Some(me) = state.me() else {
        return Refused::new("server_error", "set this server's URL (serverurl) before signing in with it")
            .into_response();
    };
    if let Some(asked) = req.me.as_deref().filter(|m| !m.is_empty()) {
        if asked.trim_end_matches('/') != me.trim_end_matches('/') {
            tracing::warn!("an IndieAuth client asked for {asked}; this server signs in as {me}");
        }
    }
    match state.provider.request(&state.fetcher, &req).await {
        Ok((id, pending)) => {
            let mut resp =
                Html(server::approval_page(&id, &pending, &me, &state.settings.get().instance.name)).into_response();
            // Not framable (clickjacking "Approve"); the form's redirect goes to the client.
            Page::new(Framing::Nobody).form_target(&pending.redirect_uri).apply(&mut resp);
            resp
        }
        Err(e) => e.into_response(),
    }
}

/// The form fields of a body (`application/x-www-form-urlencoded`).
fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

async fn approve(State(state): State<Arc<IndieAuth>>, body: Bytes) -> Response {
    let fields = form_fields(&body);
    let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or_default();
    let approve = match get("decision") {
        "approve" => true,
        "deny" => false,
        _ => return Refused::new("invalid_request", "decision must be approve or deny").into_response(),
    };
    let issuer = state.me().unwrap_or_default();
    match state.provider.decide(get("request"), approve, &issuer, state.config.code_ttl) {
        Ok(back) => (StatusCode::SEE_OTHER, [(header::LOCATION, back.to_string())]).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn redeem(State(state): State<Arc<IndieAuth>>, headers: HeaderMap, body: Bytes) -> Response {
    let ctype = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let trimmed = body.iter().position(|b| !b.is_ascii_whitespace()).map(|i| body[i]);
    let parsed: Result<server::Redeem, Refused> = if ctype.contains("json") || trimmed == Some(b'{') {
        serde_json::from_slice(&body).map_err(|e| Refused::new("invalid_request", format!("invalid JSON body: {e}")))
    } else {
        let fields = form_fields(&body);
        let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Ok(server::Redeem {
            grant_type: get("grant_type"),
            code: get("code"),
            client_id: get("client_id"),
            redirect_uri: get("redirect_uri"),
            code_verifier: get("code_verifier"),
            code_verifier_camel: get("codeVerifier"),
        })
    };
    let result = parsed.and_then(|r| state.provider.redeem(&r, state.config.code_ttl));
    match result {
        Ok(()) => match state.me() {
            Some(me) => Json(IndieAuthResult { me: Some(me), profile: Some(state.profile()), ..Default::default() })
                .into_response(),
            None => Refused::new("server_error", "this server's URL (serverurl) is not set").into_response(),
        },
        Err(e) => {
            tracing::info!(error = e.error, "IndieAuth code redemption refused: {}", e.description);
            e.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::viewer_page;

    #[test]
    fn a_sign_in_returns_to_its_channels_viewer_page() {
        assert_eq!(viewer_page(""), "/");
        assert_eq!(viewer_page("https://live.example.com"), "/");
        assert_eq!(viewer_page("https://live.example.com/"), "/");
        assert_eq!(viewer_page("https://live.example.com/c/music"), "/c/music/");
        assert_eq!(viewer_page("http://127.0.0.1:8080/c/music/"), "/c/music/");
        assert_eq!(viewer_page("https://live.example.com/c/"), "/");
        assert_eq!(viewer_page("https://live.example.com/c/a/b"), "/");
    }
}
