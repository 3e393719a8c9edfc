//! The replay routes: `GET /api/admin/replays`, `POST /api/admin/replays/delete` (Owncast),
//! `POST /api/admin/replays/update` and the public `GET /api/replays` (castd), and playback:
//! `/replay/{streamId}` (master), `/replay/{streamId}/{variant}` (media playlist) and the recorded
//! files under `/replay/{streamId}/{variant}/{file}` (Range, ETag). Replays are admin-only unless the
//! owner made one public. Every route answers 404 while replay features are off.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::db::{self, ReplayRow};
use super::{playlist, Replays, ReplaysError};
use crate::http::files::{respond, FileBody};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, Registry, StatusResponse, ValueDoc};

const GROUP: &str = "replays";
pub const PLAYLIST_TYPE: &str = "application/x-mpegURL";
const NO_CACHE: &str = "no-cache, no-store, must-revalidate";
const FINISHED_CACHE: &str = "public, max-age=600";

pub use crate::events::replays::Replay;

impl From<ReplayRow> for Replay {
    fn from(r: ReplayRow) -> Self {
        Replay {
            manifest: format!("/replay/{}", r.id),
            download: format!("/replay/{}/download.mp4", r.id),
            title: if r.title.is_empty() { r.stream_title.clone() } else { r.title },
            in_progress: r.status == db::RECORDING,
            id: r.id,
            start_time: r.start_time,
            end_time: r.end_time,
            duration_seconds: r.duration,
            total_bytes: r.bytes,
            clip_count: r.clip_count,
            status: r.status,
            stream_title: r.stream_title,
            public: r.public,
            pinned: r.pinned,
        }
    }
}

/// `{id}`: the body of the delete routes.
#[derive(Debug, Deserialize, ToSchema)]
pub struct IdBody {
    #[serde(default)]
    pub id: String,
}

/// castd: `POST /api/admin/replays/update`; fields left out are unchanged.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ReplayUpdate {
    pub id: String,
    pub title: Option<String>,
    pub public: Option<bool>,
    pub pinned: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Page {
    limit: Option<i64>,
    offset: Option<i64>,
}

pub fn routes(reg: &mut Registry, r: Arc<Replays>) {
    let mut reg = reg.scope(r);
    reg.schema::<Replay>();
    reg.schema::<IdBody>();
    reg.schema::<ReplayUpdate>();
    reg.get("/api/admin/replays", GROUP, Auth::Admin, "Every replay (recorded broadcast), newest first", admin_list)
        .returns_list::<Replay>()
        .error(404, "replay features are off (Owncast answers 404)");
    reg.post(
        "/api/admin/replays/delete",
        GROUP,
        Auth::Admin,
        "Delete a replay with its clips, files and object-storage copies",
        BodyDoc::Schema("IdBody"),
        delete,
    )
    .error(404, "replay not found");
    reg.post(
        "/api/admin/replays/update",
        GROUP,
        Auth::Admin,
        "castd: rename, pin or make a replay public",
        BodyDoc::Schema("ReplayUpdate"),
        update,
    )
    .error(404, "replay not found");
    reg.get("/api/replays", GROUP, Auth::Public, "castd: the public replays, newest first (paged)", public_list)
        .query("limit", false, ValueDoc::Json(r#"{"type":"integer","minimum":1,"maximum":100}"#))
        .query("offset", false, ValueDoc::Json(r#"{"type":"integer","minimum":0,"maximum":1000000000}"#))
        .returns_list::<Replay>()
        .error(404, "replay features are off");
    reg.get(
        "/replay/{stream_id}",
        GROUP,
        Auth::Public,
        "A replay's master playlist (admin, or anyone for a public replay)",
        master,
    )
    .path_param("stream_id", ValueDoc::String)
    .error(404, "no such replay");
    reg.get(
        "/replay/{stream_id}/{variant}",
        GROUP,
        Auth::Public,
        "A replay's media playlist (EVENT while live, VOD when finished)",
        media,
    )
    .path_param("stream_id", ValueDoc::String)
    .path_param("variant", ValueDoc::String)
    .error(404, "no such replay or variant");
    reg.get("/replay/{stream_id}/{variant}/{file}", GROUP, Auth::Public, "A recorded segment (Range, ETag)", file)
        .path_param("stream_id", ValueDoc::String)
        .path_param("variant", ValueDoc::String)
        .path_param("file", ValueDoc::String)
        .error(404, "no such file");
    reg.get(
        "/replay/{stream_id}/download.mp4",
        GROUP,
        Auth::Public,
        "castd: the replay as an MP4 file (remuxed, streamed while it is made)",
        super::download::replay,
    )
    .path_param("stream_id", ValueDoc::String)
    .error(404, "no such replay");
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

impl From<ReplaysError> for ApiError {
    fn from(e: ReplaysError) -> Self {
        match e {
            ReplaysError::Refused(m) => ApiError::bad(m),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

async fn admin_list(State(r): State<Arc<Replays>>) -> Result<Response, ApiError> {
    if !r.enabled() {
        return Ok(not_found());
    }
    let rows = r.store.call(|c| db::replays(c, false, i64::MAX, 0)).await?;
    Ok(Json(rows.into_iter().map(Replay::from).collect::<Vec<_>>()).into_response())
}

async fn public_list(State(r): State<Arc<Replays>>, Query(p): Query<Page>) -> Result<Response, ApiError> {
    if !r.enabled() {
        return Ok(not_found());
    }
    let limit = p.limit.unwrap_or(20).clamp(1, 100);
    let offset = p.offset.unwrap_or(0).max(0);
    let rows = r.store.call(move |c| db::replays(c, true, limit, offset)).await?;
    Ok(Json(rows.into_iter().map(Replay::from).collect::<Vec<_>>()).into_response())
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

async fn delete(State(r): State<Arc<Replays>>, body: Bytes) -> Result<Response, ApiError> {
    if !r.enabled() {
        return Ok(not_found());
    }
    let id = read_id(&body)?;
    if !r.delete_replay(&id).await? {
        return Err(ApiError::NotFound("replay not found".into()));
    }
    Ok(StatusResponse::ok("replay deleted").into_response())
}

async fn update(State(r): State<Arc<Replays>>, body: Bytes) -> Result<Response, ApiError> {
    if !r.enabled() {
        return Ok(not_found());
    }
    let u: ReplayUpdate = serde_json::from_slice(&body).map_err(|_| ApiError::bad("unable to read request"))?;
    if u.id.trim().is_empty() {
        return Err(ApiError::bad("an id is required"));
    }
    if u.title.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return Err(ApiError::bad("the title may be at most 200 characters"));
    }
    let ReplayUpdate { id, title, public, pinned } = u;
    let found =
        r.store.call(move |c| db::update_replay(c, &id, title.as_deref().map(str::trim), public, pinned)).await?;
    if !found {
        return Err(ApiError::NotFound("replay not found".into()));
    }
    Ok(StatusResponse::ok("replay updated").into_response())
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

async fn master(
    State(r): State<Arc<Replays>>,
    Path(id): Path<String>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(row) = playable(&r, &id, ip, &headers).await? else { return Ok(not_found()) };
    let rid = id.clone();
    let variants = r.store.call(move |c| db::variants(c, &rid)).await?;
    if variants.is_empty() {
        return Ok(not_found());
    }
    let body = playlist::master(&row.master, &variants, |v| format!("/replay/{id}/{v}"));
    Ok(playlist_response(body, row.status != db::RECORDING))
}

async fn media(
    State(r): State<Arc<Replays>>,
    Path((id, variant)): Path<(String, String)>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(row) = playable(&r, &id, ip, &headers).await? else { return Ok(not_found()) };
    let Ok(v) = variant.parse::<i64>() else { return Ok(not_found()) };
    let rid = id.clone();
    let segs = r.store.call(move |c| db::segments(c, &rid, v)).await?;
    if segs.is_empty() {
        return Ok(not_found());
    }
    let finished = row.status != db::RECORDING;
    let body = playlist::media(&segs, finished, |f| segment_uri(&row, &format!("/replay/{id}/{v}/"), v, f));
    Ok(playlist_response(body, finished))
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
    let path = r.replay_dir(id).join(variant.to_string()).join(file);
    let Ok(meta) = tokio::fs::metadata(&path).await else { return not_found() };
    let Ok(bytes) = tokio::fs::read(&path).await else { return not_found() };
    let modified = meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
    let cache = if public { "public, max-age=31536000, immutable" } else { "private, max-age=31536000, immutable" };
    let body = FileBody::from_disk(Bytes::from(bytes), modified, content_type(file), cache);
    let mut resp = respond(headers, &body);
    resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    resp
}

async fn file(
    State(r): State<Arc<Replays>>,
    Path((id, variant, file)): Path<(String, String, String)>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(row) = playable(&r, &id, ip, &headers).await? else { return Ok(not_found()) };
    let Ok(v) = variant.parse::<i64>() else { return Ok(not_found()) };
    Ok(serve_file(&r, &id, v, &file, row.public, &headers).await)
}
