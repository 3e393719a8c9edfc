//! What the replay, clip and download routes share (`api`, `clips`, `download` and `remote` use it; it
//! uses none of them): Owncast's empty 404, who may play a replay (`playable`), names that are safe as
//! a path segment, the `{id}` body of the delete routes, playlist answers with Owncast's headers,
//! where a playlist names a recorded file (the bucket once uploaded, unless the channel is gated), and
//! recorded files served with Range and ETag, from the disk or, for a replay in object storage, from
//! the bucket through castd.
//!
//! A replay uploaded while its channel was public keeps its files in the bucket. While the channel's
//! gate is closed (it needs a viewing pass, or the admission hook is asked on play: [`gated`]), its
//! playlists name castd's own URLs instead of the bucket's, and castd reads each file from the bucket
//! with the storage client (signed requests: the bucket need not be public) behind the gate, so the
//! pass goes only into castd's URLs and the answers are `private` (the gate marks them so). A public
//! channel's playlists keep naming the bucket (or CDN).

use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use super::db::{self, ReplayRow};
use super::Replays;
use crate::http::files::{respond, FileBody};
use crate::http::ApiError;
use crate::storage::uploader::REPLAYS_FOLDER;

pub const PLAYLIST_TYPE: &str = "application/x-mpegURL";
const NO_CACHE: &str = "no-cache, no-store, must-revalidate";
const FINISHED_CACHE: &str = "public, max-age=600";
/// Files read from the bucket at once (each is held in memory while it is served), for every channel.
const BUCKET_READS: usize = 8;
/// How long a request waits for a place among [`BUCKET_READS`] before a 503.
const BUCKET_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The largest file served from the bucket (a replay's segments are a few seconds of video).
const MAX_BUCKET_FILE: usize = 64 * 1024 * 1024;

static BUCKET_PLACES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(BUCKET_READS);

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

/// The channel's gate is closed: it needs a viewing pass, or the admission hook is asked before a
/// viewer plays (what `access::gate`'s `Gate::open` answers, read from the same settings).
pub fn gated(r: &Replays) -> bool {
    let s = r.settings.get();
    let a = &s.access;
    a.visibility.needs_pass() || (a.admission_hook.on_play && !a.admission_hook.url.is_empty())
}

/// Where a playlist names a recorded file: the bucket (or CDN) once the replay is in object storage
/// and the channel is not [`gated`], else castd's own URL under `local` (which ends with `/`).
pub fn segment_uri(r: &Replays, row: &ReplayRow, local: &str, variant: i64, file: &str) -> String {
    match &row.remote_base {
        Some(base) if !gated(r) => format!("{base}{variant}/{file}"),
        _ => format!("{local}{file}"),
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
    let body = match r.files.get(&key, content_type(file), cache, false).await {
        Some(body) => body,
        None => match from_bucket(r, id, variant, file, public).await {
            Ok(Some(body)) => Arc::new(body),
            Ok(None) => return not_found(),
            Err(e) => return e.into_response(),
        },
    };
    let mut resp = respond(headers, &body);
    resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    resp
}

/// A recorded file of a replay that is in object storage, read from the bucket (`None`: the replay is
/// not there, or the bucket has no such file). Private caching while the channel is [`gated`].
async fn from_bucket(
    r: &Replays,
    id: &str,
    variant: i64,
    file: &str,
    public: bool,
) -> Result<Option<FileBody>, ApiError> {
    let rid = id.to_string();
    let Some(row) = r.store.call(move |c| db::replay(c, &rid)).await? else { return Ok(None) };
    if row.remote_base.is_none() {
        return Ok(None);
    }
    let Some(target) = r.storage.bucket() else {
        tracing::warn!(replay = %id, "a replay in object storage cannot be served: object storage is off now");
        return Ok(None);
    };
    let Ok(Ok(_place)) = tokio::time::timeout(BUCKET_WAIT, BUCKET_PLACES.acquire()).await else {
        return Err(ApiError::Unavailable("too many replay files are being read at once; try again".into()));
    };
    let key = target.channel_key(&r.channel, &format!("{REPLAYS_FOLDER}{id}/{variant}/{file}"));
    let bytes = match target.client().get(&key).await {
        Ok(b) => b,
        Err(crate::storage::client::ClientError::Status { status: 404, .. }) => return Ok(None),
        Err(e) => {
            tracing::warn!(replay = %id, "cannot read {key} from object storage: {e}");
            return Err(ApiError::Unavailable("the replay's file cannot be read from object storage now".into()));
        }
    };
    if bytes.len() > MAX_BUCKET_FILE {
        tracing::warn!(replay = %id, "{key} is {} bytes, more than a replay file may be", bytes.len());
        return Ok(None);
    }
    let cache = if public && !gated(r) {
        "public, max-age=31536000, immutable"
    } else {
        "private, max-age=31536000, immutable"
    };
    let modified = row.end_time.map_or(std::time::UNIX_EPOCH, std::time::SystemTime::from);
    Ok(Some(FileBody::from_content(bytes, modified, content_type(file), cache)))
}
