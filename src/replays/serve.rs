//! What the replay, clip and download routes share (`api`, `clips`, `download` and `remote` use it; it
//! uses none of them): Owncast's empty 404, who may play a replay (`playable`), names that are safe as
//! a path segment, the `{id}` body of the delete routes, playlist answers with Owncast's headers,
//! where a playlist names a recorded file (the bucket once uploaded), and recorded files served with
//! Range and ETag.

use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use super::db::{self, ReplayRow};
use super::Replays;
use crate::http::files::respond;
use crate::http::ApiError;

pub const PLAYLIST_TYPE: &str = "application/x-mpegURL";
const NO_CACHE: &str = "no-cache, no-store, must-revalidate";
const FINISHED_CACHE: &str = "public, max-age=600";

/// `{id}`: the body of the delete routes.
#[derive(Debug, Deserialize, ToSchema)]
pub struct IdBody {
    #[serde(default)]
    pub id: String,
}

/// 404 with an empty body: replay features are off, or a playback path names nothing.
pub fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

/// A name that can be a path segment of a replay's folder.
pub fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Owncast's reading of an `{id}` body: unreadable → "unable to read request", no id → "an id is
/// required".
pub fn read_id(body: &[u8]) -> Result<String, ApiError> {
    let b: IdBody = serde_json::from_slice(body).map_err(|_| ApiError::bad("unable to read request"))?;
    if b.id.trim().is_empty() {
        return Err(ApiError::bad("an id is required"));
    }
    Ok(b.id)
}

/// The replay `id` if the request may play it (public, or the admin's credentials); `None` → 404 (a
/// private replay is not revealed), `Err` → 401 (or 429/503 from the admin password check).
pub async fn playable(
    r: &Arc<Replays>,
    id: &str,
    ip: Option<std::net::IpAddr>,
    headers: &HeaderMap,
) -> Result<Option<ReplayRow>, ApiError> {
    if !r.enabled() || !safe_name(id) {
        return Ok(None);
    }
    let rid = id.to_string();
    let Some(row) = r.store.call(move |c| db::replay(c, &rid)).await? else { return Ok(None) };
    if row.public || r.admin.is_admin(ip, headers).await? {
        Ok(Some(row))
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// A playlist answer with Owncast's headers.
pub fn playlist_response(body: String, finished: bool) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(PLAYLIST_TYPE));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(if finished { FINISHED_CACHE } else { NO_CACHE }));
    resp
}

/// Where a playlist names a recorded file: the bucket (or CDN) once the replay is in object storage,
/// else under `local` (which ends with `/`).
pub fn segment_uri(row: &ReplayRow, local: &str, variant: i64, file: &str) -> String {
    match &row.remote_base {
        Some(base) => format!("{base}{variant}/{file}"),
        None => format!("{local}{file}"),
    }
}

/// The Content-Type of a recorded file.
pub fn content_type(file: &str) -> &'static str {
    if file.ends_with(".ts") {
        "video/mp2t"
    } else if file.ends_with(".jpg") {
        "image/jpeg"
    } else {
        "video/mp4"
    }
}

/// Serve `<replays>/<id>/<variant>/<file>` (Range, ETag); `public` chooses the caching.
pub async fn serve_file(
    r: &Replays,
    id: &str,
    variant: i64,
    file: &str,
    public: bool,
    headers: &HeaderMap,
) -> Response {
    if !safe_name(file) || variant < 0 {
        return not_found();
    }
    if !safe_name(id) {
        return not_found();
    }
    let cache = if public { "public, max-age=31536000, immutable" } else { "private, max-age=31536000, immutable" };
    // A replay made private is answered with private caching at once (the cache reloads an entry
    // made for other headers).
    let key = format!("{id}/{variant}/{file}");
    let Some(body) = r.files.get(&key, content_type(file), cache, false).await else { return not_found() };
    let mut resp = respond(headers, &body);
    resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    resp
}
