//! HTTP plumbing shared by every feature: the error type and `StatusResponse`, JSON body and client-IP
//! extractors, the auth kinds and the admin Basic-auth check, and the route `Registry` that records each
//! route for the OpenAPI document while building the router.
//!
//! This is the bottom layer of the web server: it imports no feature module. Features add their routes
//! through `Registry::scope(state)`, each with its own narrow state; `Registry::into_router` adds the
//! fallback, CORS, the security headers (`headers`: CSP, framing, nosniff, Referrer-Policy) and the
//! body limit and produces the one `Router`; `Registry::into_service` adds the fast lanes (`lanes`) to
//! it, which is what the composition root serves. The client address (`client_ip`, `ClientIp`) is
//! read through the trusted proxies (`headers::TrustedProxies`, `--trusted-proxies`).
//!
//! Errors: handlers return `ApiError`, which answers `{"success":false,"message":...}` with a 4xx for
//! bad input; `JsonBody` turns unreadable JSON into a 400 instead of axum's plain-text rejections.
//! Every other rejection is made a StatusResponse too: the `conventions` middleware rewrites any
//! plain-text (or empty) 4xx answer — axum's extractor rejections (wrong content type, multipart
//! errors, missing fields, bad path or query parameters) and 405 — into `{"success":false,
//! "message":...}`, with 415 and 422 answered as 400, as Owncast answers bad input.

pub mod auth;
pub mod diskcache;
pub mod files;
pub mod gate;
pub mod headers;
pub mod lanes;
pub mod openapi;
pub mod setters;
pub mod urls;
pub mod zerocopy;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequest, FromRequestParts, Request};
use axum::handler::Handler;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Serialize;
use utoipa::openapi::{RefOr, Schema};

pub use auth::{AdminAuth, SignIn, UserTokens};

/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api/openapi.json";

/// Largest request body accepted anywhere (uploads are base64 JSON).
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// `{success, message}`: the answer of every mutating call.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatusResponse {
    pub success: bool,
    pub message: String,
}

impl StatusResponse {
    pub fn ok(message: impl Into<String>) -> Json<StatusResponse> {
        Json(StatusResponse { success: true, message: message.into() })
    }
}

/// An error answered to an API client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    /// 401 with a Basic challenge; the message is Owncast's `Unauthorized` (its clients match the text).
    #[error("Unauthorized")]
    Unauthorized,
    /// 401 of a missing or unknown chat user or integration token, without a challenge.
    #[error("Unauthorized")]
    UnauthorizedToken,
    /// 401 with its own message and no challenge: a viewing pass is needed, or the secret given for
    /// one was wrong (`access`).
    #[error("{0}")]
    NeedsPass(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("request body is too large")]
    TooLarge,
    /// 429 with `Retry-After`: a rate limit or backoff (see `throttle`).
    #[error("{0}")]
    TooManyRequests(crate::throttle::Limited),
    /// 503: a server-wide capacity limit (downloads, workers) is reached; try again later.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn bad(msg: impl Into<String>) -> Self {
        ApiError::BadRequest(msg.into())
    }
}

impl From<crate::throttle::Limited> for ApiError {
    fn from(l: crate::throttle::Limited) -> Self {
        ApiError::TooManyRequests(l)
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

impl From<crate::config::validate::ValidationError> for ApiError {
    fn from(e: crate::config::validate::ValidationError) -> Self {
        ApiError::BadRequest(e.0)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized | ApiError::UnauthorizedToken | ApiError::NeedsPass(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(detail) => {
                tracing::error!(%detail, "internal error answering a request");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let body = Json(StatusResponse { success: false, message: self.to_string() });
        let mut resp = (status, body).into_response();
        if matches!(self, ApiError::Unauthorized) {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"castd Authenticated Request\""),
            );
        }
        if let ApiError::TooManyRequests(limited) = &self {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(limited.retry_after_secs()));
        }
        resp
    }
}

/// A JSON request body; unreadable or mistyped JSON is a 400 that says what was wrong. The
/// Content-Type is not required, as Owncast's clients do not always send it.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge
            } else {
                ApiError::bad(format!("could not read the request body: {e}"))
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parse a JSON request body read as bytes (for handlers that must check auth before the body).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad("a JSON request body is required"));
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))
}

/// The value of a setter's `{"value": ...}` body (every `/api/admin/config/*` setter takes one).
pub fn setter_value(bytes: &[u8]) -> Result<serde_json::Value, ApiError> {
    #[derive(serde::Deserialize)]
    struct ValueBody {
        value: Option<serde_json::Value>,
    }
    let body: ValueBody = parse_json(bytes)?;
    body.value.ok_or_else(|| ApiError::bad("the request body must be {\"value\": ...}"))
}

/// The address of a request: the peer, or the `X-Forwarded-For` entry the outermost trusted proxy
/// wrote (`headers::TrustedProxies`, `--trusted-proxies`; by default one proxy on this machine).
/// IPv4-mapped IPv6 addresses are given as IPv4, so one client always has one address (viewer IDs,
/// bans). The port is never part of it.
pub fn client_ip(peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
    headers::client_ip_with(peer, headers, headers::trusted_proxies())
}

/// The client address of a request (see `client_ip`); `None` without connection info.
pub struct ClientIp(pub Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
        Ok(ClientIp(peer.map(|p| client_ip(p, &parts.headers))))
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Anyone.
    Public,
    /// HTTP Basic, user `admin` (the registry adds the check).
    Admin,
    /// A chat user's `?accessToken=` (checked by the handler's extractor).
    User,
    /// A moderator's `?accessToken=` (checked by the handler's extractor).
    Moderator,
    /// `Authorization: Bearer` with the named scope (checked by the handler's extractor).
    Integration(&'static str),
}

/// Shape of a documented JSON request body.
#[derive(Debug, Clone, Copy)]
pub enum BodyDoc {
    None,
    /// A named schema registered with `Registry::schema`.
    Schema(&'static str),
    /// `{"value": ...}` wrapping the given value shape.
    Value(ValueDoc),
    /// A JSON body written out as a JSON Schema (for bodies with constraints a derive cannot state).
    Json(&'static str),
    /// An `application/x-www-form-urlencoded` form, its fields written out as a JSON Schema.
    Form(&'static str),
    /// A multipart form upload.
    Multipart,
    /// A multipart form upload of one file in the named field.
    MultipartFile(&'static str),
    /// A body of this media type that is not JSON (an SDP offer), documented as a string.
    Content(&'static str),
}

/// Shape of the `value` of a setter (or of a query parameter).
#[derive(Debug, Clone, Copy)]
pub enum ValueDoc {
    String,
    Boolean,
    Integer,
    StringList,
    StringMap,
    Schema(&'static str),
    SchemaList(&'static str),
    /// A JSON Schema written out, for values with real constraints (`maxLength`, `enum`, ranges,
    /// patterns). `tests` in `openapi` check that every one parses.
    Json(&'static str),
}

/// The success answer of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseDoc {
    /// 200 without a described body (pages, redirects to files).
    Any,
    /// 200 with a JSON body of the named schema.
    Json(&'static str),
    /// 200 with a JSON array of the named schema.
    JsonList(&'static str),
    /// 200 with a JSON body of the named schema (second) served as another JSON media type (first),
    /// such as `application/activity+json` or `application/jrd+json`.
    JsonAs(&'static str, &'static str),
    /// 200 with a JSON body written out as a JSON Schema.
    JsonSchema(&'static str),
    /// 200 with a body of this content type (files, images, text), documented as a string.
    Content(&'static str),
    /// 204 without a body.
    NoContent,
    /// 201 Created with a body of this content type (an SDP answer) and a `Location`.
    Created(&'static str),
    /// A redirect (this 3xx status, a `Location` and no body), with where it goes.
    Redirect(u16, &'static str),
    /// 101 Switching Protocols: a websocket handshake, with what the socket carries.
    Upgrade(&'static str),
}

/// One documented query parameter.
#[derive(Debug, Clone, Copy)]
pub struct ParamDoc {
    pub name: &'static str,
    pub required: bool,
    pub schema: ValueDoc,
}

/// One documented route.
#[derive(Debug, Clone)]
pub struct RouteDoc {
    pub method: Method,
    pub path: String,
    pub group: &'static str,
    pub auth: Auth,
    pub summary: &'static str,
    pub body: BodyDoc,
    /// Whether the body may be left out (it is required unless the route says so).
    pub body_optional: bool,
    /// The success answer (`StatusResponse` for every mutating route unless it says otherwise).
    pub response: ResponseDoc,
    /// Error statuses besides those the route's shape implies (see `openapi::error_statuses`), each
    /// answered with a `StatusResponse`, with when it happens.
    pub errors: Vec<(u16, &'static str)>,
    /// Redirects answered besides the success answer (status, where to), e.g. a browser sent to a
    /// page where a client asking for JSON gets the document.
    pub redirects: Vec<(u16, &'static str)>,
    pub query: Vec<ParamDoc>,
    /// Path parameters whose values are narrower than "a non-empty string" (name, schema).
    pub path_params: Vec<(&'static str, ValueDoc)>,
    /// What the registry's gate may answer in front of the route (`gate::Gate::guards`), filled in
    /// when the document is built (`Registry::document`): its 401/403 are documented from it.
    pub gated: gate::Guarded,
}

/// The documentation of a route just added: say what it answers besides the defaults.
pub struct RouteMut<'r> {
    doc: &'r mut RouteDoc,
    schemas: &'r mut Vec<(String, RefOr<Schema>)>,
}

impl RouteMut<'_> {
    /// A 200 JSON body of type `T` (its schema is registered).
    pub fn returns<T: utoipa::ToSchema>(self) -> Self {
        add_schema::<T>(self.schemas);
        self.doc.response = ResponseDoc::Json(leak_name::<T>());
        self
    }

    /// A 200 JSON array of `T`.
    pub fn returns_list<T: utoipa::ToSchema>(self) -> Self {
        add_schema::<T>(self.schemas);
        self.doc.response = ResponseDoc::JsonList(leak_name::<T>());
        self
    }

    /// A 200 JSON body of type `T` served with the JSON media type `content_type`.
    pub fn returns_as<T: utoipa::ToSchema>(self, content_type: &'static str) -> Self {
        add_schema::<T>(self.schemas);
        self.doc.response = ResponseDoc::JsonAs(content_type, leak_name::<T>());
        self
    }

    /// A redirect the route answers besides its success answer (for instance to a browser).
    pub fn redirects(self, status: u16, to: &'static str) -> Self {
        if !self.doc.redirects.iter().any(|(s, _)| *s == status) {
            self.doc.redirects.push((status, to));
        }
        self
    }

    /// Any other success answer (a content type, 204, a written-out schema).
    pub fn answers(self, response: ResponseDoc) -> Self {
        self.doc.response = response;
        self
    }

    /// An error status the route answers (with a StatusResponse) besides the implied ones.
    pub fn error(self, status: u16, when: &'static str) -> Self {
        if !self.doc.errors.iter().any(|(s, _)| *s == status) {
            self.doc.errors.push((status, when));
        }
        self
    }

    /// The request body may be left out.
    pub fn optional_body(self) -> Self {
        self.doc.body_optional = true;
        self
    }

    /// What a path parameter takes, when narrower than a non-empty string (a number, a pattern).
    pub fn path_param(self, name: &'static str, schema: ValueDoc) -> Self {
        self.doc.path_params.push((name, schema));
        self
    }

    /// A query parameter.
    pub fn query(self, name: &'static str, required: bool, schema: ValueDoc) -> Self {
        self.doc.query.push(ParamDoc { name, required, schema });
        self
    }
}

/// The documentation of an action's two routes (`Scope::action`: its POST and its GET for tools).
pub struct ActionMut<'r> {
    docs: &'r mut [RouteDoc],
    schemas: &'r mut Vec<(String, RefOr<Schema>)>,
}

impl ActionMut<'_> {
    /// A 200 JSON body of type `T` on both routes.
    pub fn returns<T: utoipa::ToSchema>(self) -> Self {
        add_schema::<T>(self.schemas);
        for doc in self.docs.iter_mut() {
            doc.response = ResponseDoc::Json(leak_name::<T>());
        }
        self
    }

    /// An error status both routes answer (with a StatusResponse) besides the implied ones.
    pub fn error(self, status: u16, when: &'static str) -> Self {
        for doc in self.docs.iter_mut() {
            if !doc.errors.iter().any(|(s, _)| *s == status) {
                doc.errors.push((status, when));
            }
        }
        self
    }
}

/// Record `T`'s schema and, recursively, those of the types its fields name (`ToSchema::schemas`), so
/// every `$ref` of the document resolves.
fn add_schema<T: utoipa::ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    let mut found = vec![(T::name().to_string(), T::schema())];
    T::schemas(&mut found);
    for (name, schema) in found {
        if !schemas.iter().any(|(n, _)| *n == name) {
            schemas.push((name, schema));
        }
    }
}

/// `ToSchema::name` is a `Cow`; the document needs `&'static str` names (a handful, once at start).
fn leak_name<T: utoipa::ToSchema>() -> &'static str {
    match T::name() {
        std::borrow::Cow::Borrowed(s) => s,
        std::borrow::Cow::Owned(s) => Box::leak(s.into_boxed_str()),
    }
}

/// Builds the router and records every route (and the schemas the routes name) for the OpenAPI
/// document.
pub struct Registry {
    admin: AdminAuth,
    router: Router,
    docs: Vec<RouteDoc>,
    schemas: Vec<(String, RefOr<Schema>)>,
    lanes: Vec<(&'static str, Arc<dyn lanes::Lane>)>,
    gate: Option<Arc<dyn gate::Gate>>,
}

impl Registry {
    pub fn new(admin: AdminAuth) -> Self {
        let mut reg =
            Self { admin, router: Router::new(), docs: Vec::new(), schemas: Vec::new(), lanes: Vec::new(), gate: None };
        reg.schema::<StatusResponse>();
        // Served by `into_router`; documented from the start so every document lists it.
        reg.docs.push(RouteDoc {
            method: Method::GET,
            path: OPENAPI_PATH.into(),
            group: "public",
            auth: Auth::Public,
            summary: "This OpenAPI document",
            body: BodyDoc::None,
            body_optional: false,
            response: ResponseDoc::JsonSchema(r#"{"type":"object","required":["openapi","info","paths"]}"#),
            errors: Vec::new(),
            redirects: Vec::new(),
            query: Vec::new(),
            path_params: Vec::new(),
            gated: gate::Guarded::No,
        });
        reg
    }

    /// Routes added through the returned scope get `state` as their axum `State`.
    pub fn scope<S: Clone + Send + Sync + 'static>(&mut self, state: S) -> Scope<'_, S> {
        Scope { reg: self, state }
    }

    /// Add routes that are not the API's own (a dispatcher to other routers: `channels`), undocumented.
    pub fn merge(&mut self, router: Router) {
        self.router = std::mem::take(&mut self.router).merge(router);
    }

    /// Serve `GET`/`HEAD` under `prefix` with `lane`, ahead of the router (see `lanes`). The route the
    /// lane speeds up must be registered too, and answer the same.
    pub fn lane(&mut self, prefix: &'static str, lane: Arc<dyn lanes::Lane>) {
        self.lanes.push((prefix, lane));
    }

    /// Put `gate` in front of every route and lane (a channel's viewer gate: `http::gate`).
    pub fn gate(&mut self, gate: Arc<dyn gate::Gate>) {
        self.gate = Some(gate);
    }

    /// Record a request or response schema under its type name for the OpenAPI components.
    pub fn schema<T: utoipa::ToSchema>(&mut self) {
        add_schema::<T>(&mut self.schemas);
    }

    pub fn docs(&self) -> &[RouteDoc] {
        &self.docs
    }

    pub fn schemas(&self) -> &[(String, RefOr<Schema>)] {
        &self.schemas
    }

    /// The OpenAPI document of every route added so far, with what the gate answers in front of each
    /// (every route is behind it: `into_service_parts`).
    pub fn document(&self) -> utoipa::openapi::OpenApi {
        let mut docs = self.docs.clone();
        if let Some(g) = &self.gate {
            // A preflight is answered by `conventions`, in front of the gate.
            for d in docs.iter_mut().filter(|d| !is_preflight(&d.method, &d.path)) {
                d.gated = g.guards(&d.method, &d.path);
            }
        }
        openapi::document(&docs, &self.schemas)
    }

    /// The complete router: every route, `/api/openapi.json`, the JSON 404 fallback, CORS and the
    /// body limit.
    pub fn into_router(self) -> Router {
        self.into_service_parts().0
    }

    /// The router with the fast lanes: what the web server serves.
    pub fn into_service(self) -> lanes::WebService {
        let (router, lanes) = self.into_service_parts();
        lanes::WebService::new(router, lanes)
    }

    /// The service with `front` ahead of everything (no fast lanes): `front` decides, and hands what it
    /// serves locally to the router it is given (a cluster edge, `cluster::proxy`).
    pub fn into_service_behind(self, front: impl FnOnce(Router) -> Router) -> lanes::WebService {
        let (router, _lanes) = self.into_service_parts();
        lanes::WebService::new(front(router).layer(middleware::from_fn(security_headers)), Vec::new())
    }

    /// The complete router and the fast lanes, each behind the gate (a channel's: its dispatcher serves
    /// the router, the channels' lane its lanes).
    pub fn into_service_parts(self) -> (Router, lanes::Lanes) {
        let doc = Arc::new(self.document());
        let mut router =
            self.router.route(OPENAPI_PATH, axum::routing::get(openapi::serve).with_state(doc)).fallback(not_found);
        let mut lanes = self.lanes;
        if let Some(g) = self.gate {
            router = router.layer(middleware::from_fn_with_state(g.clone(), gate::middleware));
            lanes = lanes
                .into_iter()
                .map(|(prefix, lane)| {
                    let gated: Arc<dyn lanes::Lane> = Arc::new(gate::GatedLane { gate: g.clone(), lane });
                    (prefix, gated)
                })
                .collect();
        }
        let router = router.layer(middleware::from_fn(conventions)).layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
        (router, lanes)
    }
}

/// A `Registry` view whose routes share one feature state.
pub struct Scope<'r, S> {
    reg: &'r mut Registry,
    state: S,
}

impl<S: Clone + Send + Sync + 'static> Scope<'_, S> {
    /// Add `handler` for `method path`. Admin routes get the Basic-auth check here; other auth kinds
    /// are enforced by the handler's extractors and only documented.
    #[allow(clippy::too_many_arguments)] // each is one column of the route table; a builder would hide that
    pub fn route<H, T>(
        &mut self,
        method: Method,
        path: &str,
        group: &'static str,
        auth: Auth,
        summary: &'static str,
        body: BodyDoc,
        handler: H,
    ) -> RouteMut<'_>
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.route_for(method, path, group, auth, summary, body, handler, false)
    }

    /// [`Scope::route`], and with `tools_only` a GET a browser's request is refused
    /// (`auth::refuse_browser_get`, before any credential is looked at).
    #[allow(clippy::too_many_arguments)]
    fn route_for<H, T>(
        &mut self,
        method: Method,
        path: &str,
        group: &'static str,
        auth: Auth,
        summary: &'static str,
        body: BodyDoc,
        handler: H,
        tools_only: bool,
    ) -> RouteMut<'_>
    where
        H: Handler<T, S>,
        T: 'static,
    {
        let filter = match method {
            Method::POST => MethodFilter::POST,
            Method::PUT => MethodFilter::PUT,
            Method::DELETE => MethodFilter::DELETE,
            Method::PATCH => MethodFilter::PATCH,
            Method::OPTIONS => MethodFilter::OPTIONS,
            Method::HEAD => MethodFilter::HEAD,
            _ => MethodFilter::GET,
        };
        let mut mr = on(filter, handler);
        if auth == Auth::Admin {
            mr = mr.route_layer(middleware::from_fn_with_state(self.reg.admin.clone(), auth::require_admin));
        }
        if tools_only {
            mr = mr.route_layer(middleware::from_fn(auth::refuse_browser_get));
        }
        let reg = &mut *self.reg;
        reg.router = std::mem::take(&mut reg.router).route(path, mr.with_state(self.state.clone()));
        let response = if method == Method::GET { ResponseDoc::Any } else { ResponseDoc::Json("StatusResponse") };
        reg.docs.push(RouteDoc {
            method,
            path: path.to_string(),
            group,
            auth,
            summary,
            body,
            body_optional: false,
            response,
            errors: Vec::new(),
            redirects: Vec::new(),
            query: Vec::new(),
            path_params: Vec::new(),
            gated: gate::Guarded::No,
        });
        let Registry { docs, schemas, .. } = reg;
        let n = docs.len() - 1;
        RouteMut { doc: &mut docs[n], schemas }
    }

    /// Shorthand for a GET route without a body.
    pub fn get<H, T>(
        &mut self,
        path: &str,
        group: &'static str,
        auth: Auth,
        summary: &'static str,
        handler: H,
    ) -> RouteMut<'_>
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.route(Method::GET, path, group, auth, summary, BodyDoc::None, handler)
    }

    /// An action (a change of state) that Owncast serves as GET, served twice: as POST without a body
    /// (what the web UI uses; an admin route's POST gets the `Origin` check every admin route gets),
    /// and as GET for Owncast's own tools only. A GET that carries any of a browser's marks
    /// (`Sec-Fetch-Site`/`-Mode`/`-Dest`, `Origin`, `Referer`, `Cookie`) is refused with 405 and a
    /// StatusResponse saying to use POST, so neither an `<img>` nor a link can make a signed-in browser
    /// act. Both routes are returned in one [`ActionMut`] to be documented alike.
    pub fn action<H, T>(
        &mut self,
        path: &str,
        group: &'static str,
        auth: Auth,
        summary: &'static str,
        handler: H,
    ) -> ActionMut<'_>
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.route_for(Method::POST, path, group, auth, summary, BodyDoc::None, handler.clone(), false);
        self.route_for(Method::GET, path, group, auth, summary, BodyDoc::None, handler, true)
            .error(405, auth::BROWSER_GET_REFUSED);
        let Registry { docs, schemas, .. } = &mut *self.reg;
        let n = docs.len();
        ActionMut { docs: &mut docs[n - 2..], schemas }
    }

    /// A GET that changes state (or costs the box work) and is served to tools only, as an action's GET
    /// is ([`Scope::action`]); its POST form is registered on its own (it takes a body).
    pub fn get_for_tools<H, T>(
        &mut self,
        path: &str,
        group: &'static str,
        auth: Auth,
        summary: &'static str,
        handler: H,
    ) -> RouteMut<'_>
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.route_for(Method::GET, path, group, auth, summary, BodyDoc::None, handler, true)
            .error(405, auth::BROWSER_GET_REFUSED)
    }

    /// Shorthand for a POST route.
    #[allow(clippy::too_many_arguments)]
    pub fn post<H, T>(
        &mut self,
        path: &str,
        group: &'static str,
        auth: Auth,
        summary: &'static str,
        body: BodyDoc,
        handler: H,
    ) -> RouteMut<'_>
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.route(Method::POST, path, group, auth, summary, body, handler)
    }

    /// See `Registry::schema`.
    pub fn schema<T: utoipa::ToSchema>(&mut self) {
        self.reg.schema::<T>();
    }
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no such route: {method} {}", uri.path()))
}

/// Largest plain-text rejection body read back to become a message.
const MAX_REJECTION_BODY: usize = 16 * 1024;

/// The conventions every answer follows, in one middleware (one per request, not one per rule):
/// CORS as Owncast does it (preflight `OPTIONS` on the API answers 204 with the allowed methods and
/// headers; public API answers carry `Access-Control-Allow-Origin: *`), JSON rejections and the
/// security headers (`headers::secure`).
/// A request header with which a 401 comes without its `WWW-Authenticate` challenge: the web UI's
/// probes (may this browser's credentials use the server admin's routes?) must not make the browser ask
/// for a password.
pub const NO_CHALLENGE: &str = "x-castd-no-challenge";

/// Whether `conventions` answers `method path` itself: a CORS preflight on the API or HLS.
fn is_preflight(method: &Method, path: &str) -> bool {
    method == Method::OPTIONS && is_api_path(path)
}

fn is_api_path(path: &str) -> bool {
    path.starts_with("/api/") || path.starts_with("/hls/")
}

async fn conventions(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let is_api = is_api_path(path);
    let kind = headers::PathKind::of(path);
    if is_preflight(req.method(), path) {
        let mut resp = preflight();
        headers::secure(kind, &mut resp);
        return resp;
    }
    let admin = path.starts_with("/api/admin/");
    let quiet = req.headers().contains_key(NO_CHALLENGE);
    let mut resp = next.run(req).await;
    if resp.status().is_client_error() {
        resp = json_rejection(resp).await;
    }
    if quiet && resp.status() == StatusCode::UNAUTHORIZED {
        resp.headers_mut().remove(header::WWW_AUTHENTICATE);
    }
    if is_api && !admin && !resp.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
        resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    headers::secure(kind, &mut resp);
    resp
}

/// The security headers alone (`headers::secure`), for a service that is not the router (a cluster
/// edge's front, whose local answers already have them).
async fn security_headers(req: Request, next: Next) -> Response {
    let kind = headers::PathKind::of(req.uri().path());
    let mut resp = next.run(req).await;
    headers::secure(kind, &mut resp);
    resp
}

/// Rewrite a plain-text or empty 4xx answer as StatusResponse JSON (see the module doc).
async fn json_rejection(resp: Response) -> Response {
    let status = resp.status();
    if !status.is_client_error() {
        return resp;
    }
    let ctype = resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !(ctype.is_empty() || ctype.starts_with("text/plain")) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_REJECTION_BODY).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let message =
        if text.is_empty() { status.canonical_reason().unwrap_or("bad request").to_ascii_lowercase() } else { text };
    if matches!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE | StatusCode::UNPROCESSABLE_ENTITY) {
        parts.status = StatusCode::BAD_REQUEST;
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let json = serde_json::to_vec(&StatusResponse { success: false, message }).unwrap_or_default();
    Response::from_parts(parts, axum::body::Body::from(json))
}

fn preflight() -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type, Authorization, X-Forwarded-User, X-Owncast-CSRF-Protection"),
    );
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    resp
}
