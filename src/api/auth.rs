//! Admin authentication: HTTP Basic with the user `admin` and the stored argon2 hash.
//!
//! A verified password is remembered by its SHA-256 (with the hash it verified against), so the
//! dashboard's polling does not pay for argon2 on every request; changing the password changes the
//! hash and so invalidates the cache. A browser `Origin` from another site is refused (403), as
//! Owncast does, so a page elsewhere cannot drive the admin API with cached credentials.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

use super::ApiError;
use crate::app::App;
use crate::password;

/// The user name Basic auth requires.
pub const ADMIN_USER: &str = "admin";

/// Middleware for admin routes.
pub async fn require_admin(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if !same_origin(&req) {
        return ApiError::Forbidden("forbidden: cross-origin admin request".into()).into_response();
    }
    let Some(password) = basic_password(&req) else {
        return ApiError::Unauthorized.into_response();
    };
    if !check_admin_password(&app, &password).await {
        return ApiError::Unauthorized.into_response();
    }
    next.run(req).await
}

/// The password of a Basic `admin:<password>` header, if that is what the request carries.
fn basic_password(req: &Request) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
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

/// Check `password` against the stored admin hash (argon2 off the async threads, cached on success).
pub async fn check_admin_password(app: &Arc<App>, password: &str) -> bool {
    let hash = app.settings.get().admin_password_hash.clone();
    if hash.is_empty() {
        return false;
    }
    let digest: [u8; 32] = Sha256::digest(password.as_bytes()).into();
    if let Some((cached_hash, cached_digest)) = app.admin_auth_cache.read().as_ref() {
        if *cached_hash == hash && *cached_digest == digest {
            return true;
        }
    }
    let (pw, h) = (password.to_string(), hash.clone());
    let ok = tokio::task::spawn_blocking(move || password::verify(&pw, &h)).await.unwrap_or(false);
    if ok {
        *app.admin_auth_cache.write() = Some((hash, digest));
    }
    ok
}
