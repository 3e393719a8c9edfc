//! The replay routes: `GET /api/admin/replays`, `POST /api/admin/replays/delete` (Owncast),
//! `POST /api/admin/replays/update` and the public `GET /api/replays` (castd), and playback:
//! `/replay/{streamId}` (master), `/replay/{streamId}/{variant}` (media playlist) and the recorded
//! files under `/replay/{streamId}/{variant}/{file}` (Range, ETag). Replays are admin-only unless the
//! owner made one public. Every route answers 404 while replay features are off. (The replay's
//! `download.mp4` is `download`'s; what these routes share with the clip routes is `serve`'s.)

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::db::{self, ReplayRow};
use super::serve::{not_found, playable, playlist_response, read_id, segment_uri, serve_file, IdBody};
use super::{playlist, Replays, ReplaysError};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, Registry, StatusResponse, ValueDoc};

const GROUP: &str = "replays";

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
