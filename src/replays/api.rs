//! The replay routes: `GET /api/admin/replays`, `POST /api/admin/replays/delete` (Owncast),
//! `POST /api/admin/replays/update`, the public `GET /api/replays` and `GET /api/replays/{id}` (castd: one
//! replay, by the replay's own rules, for a link to it), a replay's chat
//! (`GET /api/replays/{id}/chat?from=&to=`, castd: the broadcast's chat placed on the replay's media
//! time, for players that show it in time with the video), and playback:
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
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::db::{self, ReplayRow};
use super::serve::{not_found, playable, playlist_response, read_id, segment_uri, serve_file, IdBody};
use super::{playlist, Replays, ReplaysError};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, Registry, StatusResponse, ValueDoc};

const GROUP: &str = "replays";

pub use crate::events::replays::Replay;

impl Replays {
    /// A replay's JSON; its `manifest` and `download` are absolute paths under this channel's base
    /// path (the default channel's: `/replay/{id}`, as Owncast's).
    pub fn replay_json(&self, r: ReplayRow) -> Replay {
        let base = &self.base_path;
        Replay {
            manifest: format!("{base}/replay/{}", r.id),
            download: format!("{base}/replay/{}/download.mp4", r.id),
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

/// The most messages one `GET /api/replays/{id}/chat` answers (`truncated` says there are more: ask
/// again from the last one's offset).
pub const CHAT_PAGE: u32 = 500;
/// The largest `from`/`to` taken (seconds; about 31 years).
const MAX_OFFSET: f64 = 1e9;

/// castd: one message of a replay's chat (visible, of a user not disabled, or the system's).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayChatMessage {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    /// `CHAT`, `SYSTEM`, `CHAT_ACTION`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub user: Option<crate::events::chat::User>,
    /// Seconds from the replay's start (its media time: where the playhead is when it was sent).
    pub offset: f64,
}

/// castd: `GET /api/replays/{id}/chat`: the messages of a window of the replay, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayChat {
    pub messages: Vec<ReplayChatMessage>,
    /// The window holds more than `CHAT_PAGE` (500) messages: ask again from the last one's offset.
    pub truncated: bool,
}

#[derive(Debug, Deserialize)]
struct ChatWindow {
    from: Option<String>,
    to: Option<String>,
}

/// A window bound: seconds from the replay's start, finite, 0 to `MAX_OFFSET`.
fn window_bound(v: Option<&str>, name: &str) -> Result<Option<f64>, ApiError> {
    let Some(v) = v else { return Ok(None) };
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=MAX_OFFSET).contains(&x) => Ok(Some(x)),
        _ => Err(ApiError::bad(format!("{name} must be a number of seconds from 0 to {MAX_OFFSET}"))),
    }
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
        "/api/replays/{stream_id}",
        GROUP,
        Auth::Public,
        "castd: one replay (admin, or anyone for a public replay; a viewing pass on a private channel), as a \
         link to it opens it",
        one,
    )
    .path_param("stream_id", ValueDoc::String)
    .returns::<Replay>()
    .error(401, "the replay is not public and the admin's credentials are missing")
    .error(404, "no such replay, or replay features are off");
    reg.get(
        "/api/replays/{stream_id}/chat",
        GROUP,
        Auth::Public,
        "castd: a replay's chat in a window (seconds from its start), each message with its offset; \
         hidden messages and disabled users' left out (admin, or anyone for a public replay)",
        chat,
    )
    .path_param("stream_id", ValueDoc::String)
    .query("from", false, ValueDoc::Json(r#"{"type":"number","minimum":0,"maximum":1000000000}"#))
    .query("to", false, ValueDoc::Json(r#"{"type":"number","minimum":0,"maximum":1000000000}"#))
    .returns::<ReplayChat>()
    .error(400, "from or to is not a number of seconds from 0 to 1e9 (to before from: an empty window)")
    .error(401, "the replay is not public and the admin's credentials are missing")
    .error(404, "no such replay, or replay features are off");
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
        "A replay's media playlist (EVENT while live, VOD when finished). A replay in object storage names \
         the bucket's URLs, or castd's own while the channel needs a viewing pass or asks its admission hook",
        media,
    )
    .path_param("stream_id", ValueDoc::String)
    .path_param("variant", ValueDoc::String)
    .error(404, "no such replay or variant");
    reg.get(
        "/replay/{stream_id}/{variant}/{file}",
        GROUP,
        Auth::Public,
        "A recorded segment (Range, ETag): from the disk, or read from the bucket by castd for a replay in \
         object storage",
        file,
    )
    .path_param("stream_id", ValueDoc::String)
    .path_param("variant", ValueDoc::String)
    .path_param("file", ValueDoc::String)
    .error(404, "no such file")
    .error(503, "the file cannot be read from object storage now, or too many are being read at once");
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
    Ok(Json(rows.into_iter().map(|row| r.replay_json(row)).collect::<Vec<_>>()).into_response())
}

async fn public_list(State(r): State<Arc<Replays>>, Query(p): Query<Page>) -> Result<Response, ApiError> {
    if !r.enabled() {
        return Ok(not_found());
    }
    let limit = p.limit.unwrap_or(20).clamp(1, 100);
    let offset = p.offset.unwrap_or(0).max(0);
    let rows = r.store.call(move |c| db::replays(c, true, limit, offset)).await?;
    Ok(Json(rows.into_iter().map(|row| r.replay_json(row)).collect::<Vec<_>>()).into_response())
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
    let base = &r.base_path;
    let body = playlist::master(&row.master, &variants, |v| format!("{base}/replay/{id}/{v}"));
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
    let local = format!("{}/replay/{id}/{v}/", r.base_path);
    let body = playlist::media(&segs, finished, |f| segment_uri(&r, &row, &local, v, f));
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

async fn one(
    State(r): State<Arc<Replays>>,
    Path(id): Path<String>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(row) = playable(&r, &id, ip, &headers).await? else { return Ok(not_found()) };
    Ok(Json(r.replay_json(row)).into_response())
}

async fn chat(
    State(r): State<Arc<Replays>>,
    Path(id): Path<String>,
    Query(w): Query<ChatWindow>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let from = window_bound(w.from.as_deref(), "from")?.unwrap_or(0.0);
    // `to` before `from` is an empty window (answered as one, so any schema-valid pair is taken).
    let to = window_bound(w.to.as_deref(), "to")?;
    let Some(row) = playable(&r, &id, ip, &headers).await? else { return Ok(not_found()) };
    let messages = chat_window(&r, &row, from, to, CHAT_PAGE + 1).await?;
    let truncated = messages.len() > CHAT_PAGE as usize;
    let messages = messages.into_iter().take(CHAT_PAGE as usize).collect();
    Ok(Json(ReplayChat { messages, truncated }).into_response())
}

/// The chat of `row` from `from` to `to` seconds of its media time (`to`: the end of the replay when
/// `None`; never past its end, or now while it records), at most `limit` messages.
pub async fn chat_window(
    r: &Arc<Replays>,
    row: &ReplayRow,
    from: f64,
    to: Option<f64>,
    limit: u32,
) -> Result<Vec<ReplayChatMessage>, ApiError> {
    let (rid, start) = (row.id.clone(), row.start_time);
    let Some(epoch_ms) = r.store.call(move |c| db::media_epoch_ms(c, &rid, start)).await? else {
        return Ok(Vec::new());
    };
    let at = |secs: f64| {
        let ms = epoch_ms.saturating_add((secs * 1000.0).round() as i64);
        DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
    };
    let end = row.end_time.unwrap_or_else(Utc::now) + chrono::Duration::milliseconds(1);
    let from_t = at(from);
    let to_t = to.map(at).map_or(end, |t| t.min(end));
    if to_t <= from_t {
        return Ok(Vec::new());
    }
    let lines = r.users.chat_between(from_t, to_t, limit).await.map_err(ApiError::Internal)?;
    Ok(lines
        .into_iter()
        .map(|l| ReplayChatMessage {
            offset: ((l.timestamp.timestamp_millis() - epoch_ms) as f64 / 1000.0).max(0.0),
            id: l.id,
            timestamp: l.timestamp,
            kind: l.kind,
            body: l.body,
            user: l.user,
        })
        .collect())
}
