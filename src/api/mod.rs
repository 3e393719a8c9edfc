//! The HTTP API: one router built from a `Registry`, with Owncast's paths and JSON field names.
//!
//! Every route is added through `Registry`, which records its method, path, group, auth and summary
//! next to the axum handler. The same records produce the OpenAPI document at `/api/openapi.json`, so
//! the document cannot drift from what the router serves. Groups live in submodules (`public`,
//! `admin`, `setters`); later modules (chat, ingest, ...) add theirs through `Registry` too.
//!
//! Errors: handlers return `ApiError`, which answers `{"success":false,"message":...}` with a 4xx for
//! bad input; `JsonBody` turns unreadable JSON into a 400 instead of axum's plain-text rejections.

pub mod admin;
pub mod auth;
pub mod integrations;
pub mod openapi;
pub mod public;
pub mod setters;

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpListener;

use crate::app::App;

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
    #[error("unauthorized")]
    Unauthorized,
    #[error("unauthorized")]
    UnauthorizedToken,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("request body is too large")]
    TooLarge,
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn bad(msg: impl Into<String>) -> Self {
        ApiError::BadRequest(msg.into())
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
            ApiError::Unauthorized | ApiError::UnauthorizedToken => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
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
    /// A named schema from `openapi::components`.
    Schema(&'static str),
    /// `{"value": ...}` wrapping the given value shape.
    Value(ValueDoc),
    /// A multipart form upload.
    Multipart,
}

/// Shape of the `value` of a setter.
#[derive(Debug, Clone, Copy)]
pub enum ValueDoc {
    String,
    Boolean,
    Integer,
    StringList,
    StringMap,
    Schema(&'static str),
    SchemaList(&'static str),
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
}

/// Builds the router and records every route for the OpenAPI document.
pub struct Registry {
    app: Arc<App>,
    router: Router<Arc<App>>,
    docs: Vec<RouteDoc>,
}

impl Registry {
    pub fn new(app: Arc<App>) -> Self {
        Self { app, router: Router::new(), docs: Vec::new() }
    }

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
    ) where
        H: Handler<T, Arc<App>>,
        T: 'static,
    {
        let filter = match method {
            Method::GET => MethodFilter::GET,
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
            mr = mr.route_layer(middleware::from_fn_with_state(self.app.clone(), auth::require_admin));
        }
        self.router = std::mem::take(&mut self.router).route(path, mr);
        self.docs.push(RouteDoc { method, path: path.to_string(), group, auth, summary, body });
    }

    /// Shorthand for a GET route without a body.
    pub fn get<H, T>(&mut self, path: &str, group: &'static str, auth: Auth, summary: &'static str, handler: H)
    where
        H: Handler<T, Arc<App>>,
        T: 'static,
    {
        self.route(Method::GET, path, group, auth, summary, BodyDoc::None, handler);
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
    ) where
        H: Handler<T, Arc<App>>,
        T: 'static,
    {
        self.route(Method::POST, path, group, auth, summary, body, handler);
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    pub fn docs(&self) -> &[RouteDoc] {
        &self.docs
    }
}

/// Build every route of the daemon.
pub fn registry(app: Arc<App>) -> Registry {
    let mut reg = Registry::new(app);
    public::register(&mut reg);
    admin::register(&mut reg);
    setters::register(&mut reg);
    integrations::register(&mut reg);
    crate::metrics::api::register(&mut reg);
    openapi::register(&mut reg);
    crate::hardware::api::register(&mut reg);
    crate::web::register(&mut reg);
    crate::tokens::register(&mut reg);
    crate::webhooks::register(&mut reg);
    crate::chat::api::register(&mut reg);
    crate::chat::integrations::register(&mut reg);
    crate::notifications::register(&mut reg);
    crate::ingest::register(&mut reg);
    crate::hls::register(&mut reg);
    reg
}

/// The complete axum application.
pub fn router(app: Arc<App>) -> Router {
    let reg = registry(app.clone());
    let doc = Arc::new(openapi::document(reg.docs()));
    reg.router
        .fallback(not_found)
        .layer(axum::Extension(doc))
        .layer(middleware::from_fn(preflight_and_cors))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no such route: {method} {}", uri.path()))
}

/// CORS as Owncast does it: preflight `OPTIONS` on the API answers 204 with the allowed methods and
/// headers; public API answers carry `Access-Control-Allow-Origin: *`.
async fn preflight_and_cors(req: Request, next: Next) -> Response {
    let is_api = req.uri().path().starts_with("/api/") || req.uri().path().starts_with("/hls/");
    if req.method() == Method::OPTIONS && is_api {
        let mut resp = StatusCode::NO_CONTENT.into_response();
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"));
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type, Authorization, X-Forwarded-User, X-Owncast-CSRF-Protection"),
        );
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
        return resp;
    }
    let admin = req.uri().path().starts_with("/api/admin/");
    let mut resp = next.run(req).await;
    if is_api && !admin && !resp.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
        resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    resp
}

/// Serve `app` on an already-bound listener until `shutdown` resolves; open requests finish first.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = router(app);
    axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(shutdown)
        .await
}
