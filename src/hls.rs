//! Serving the stream: `GET /hls/*` (playlists and segments), `/thumbnail.jpg` and `/preview.gif`.
//!
//! Owncast's rules: only `.m3u8`, `.ts`, `.m4s` and `.mp4` files are served (anything else is 404);
//! playlists are `application/x-mpegURL` with no-cache; segments are cacheable (their names are
//! never reused); CORS is open (the API's CORS layer covers `/hls/`). Paths are checked component by
//! component (letters, digits, `-`, `_`, `.`; no `..`, no empty or hidden parts), so nothing outside
//! `<data-dir>/hls` can be named. The thumbnail and preview are made by the transcoder
//! (`transcode::thumbnail`); this module only serves them.
//!
//! Every playlist fetch marks the viewer active and every request's CMCD keys are harvested, through
//! the metrics handle this feature was given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::http::{ApiError, Auth, Registry};
use crate::metrics::Metrics;

pub use crate::transcode::thumbnail::{PREVIEW_FILE, THUMBNAIL_FILE};

/// What the HLS routes need.
pub struct Hls {
    /// `<data-dir>/hls`.
    pub hls_dir: PathBuf,
    /// Where the thumbnail and preview are (the data dir).
    pub images_dir: PathBuf,
    pub metrics: Arc<Metrics>,
}

const GROUP: &str = "hls";
/// `Cache-Control` of segments.
pub const SEGMENT_CACHE: &str = "public, max-age=3600";
const NO_CACHE: &str = "no-cache, no-store, must-revalidate";

pub fn routes(reg: &mut Registry, state: Arc<Hls>) {
    let mut reg = reg.scope(state);
    reg.get("/hls/{*path}", GROUP, Auth::Public, "HLS playlists and segments", hls);
    reg.get("/thumbnail.jpg", GROUP, Auth::Public, "The stream's latest thumbnail (JPEG)", thumbnail_jpg);
    reg.get("/preview.gif", GROUP, Auth::Public, "The stream's animated preview (GIF)", preview_gif);
}

/// The file under `<data-dir>/hls` that `path` names, if it is a servable name.
pub fn safe_relative(path: &str) -> Option<(PathBuf, &'static str)> {
    let parts: Vec<&str> = path.split('/').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let mut rel = PathBuf::new();
    for p in &parts {
        let ok = !p.is_empty()
            && !p.starts_with('.')
            && p.len() <= 128
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            return None;
        }
        rel.push(p);
    }
    let name = parts.last()?;
    let kind = match name.rsplit_once('.')?.1 {
        "m3u8" => "application/x-mpegURL",
        "ts" => "video/mp2t",
        "m4s" => "video/iso.segment",
        "mp4" => "video/mp4",
        _ => return None,
    };
    Some((rel, kind))
}

async fn hls(
    State(hls): State<Arc<Hls>>,
    Path(path): Path<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::NotFound("no such file".into());
    let (rel, kind) = safe_relative(&path).ok_or_else(not_found)?;
    let file = hls.hls_dir.join(rel);
    let bytes = tokio::fs::read(&file).await.map_err(|_| not_found())?;
    let playlist = kind == "application/x-mpegURL";
    // Owncast marks the viewer active on each playlist fetch; players' CMCD keys on any HLS request
    // are request-mode playback data.
    if playlist {
        crate::metrics::viewers::touch_request(&hls.metrics, peer, &headers);
    }
    crate::metrics::cmcd::harvest_request(&hls.metrics, peer, &headers, query.as_deref());
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(if playlist { NO_CACHE } else { SEGMENT_CACHE }));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    Ok(resp)
}

async fn image(hls: &Hls, name: &str, kind: &'static str) -> Result<Response, ApiError> {
    let bytes = tokio::fs::read(hls.images_dir.join(name))
        .await
        .map_err(|_| ApiError::NotFound(format!("no {name} yet: the stream has not been live")))?;
    let mut resp = bytes.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(NO_CACHE));
    Ok(resp)
}

async fn thumbnail_jpg(State(hls): State<Arc<Hls>>) -> Result<Response, ApiError> {
    image(&hls, THUMBNAIL_FILE, "image/jpeg").await
}

async fn preview_gif(State(hls): State<Arc<Hls>>) -> Result<Response, ApiError> {
    image(&hls, PREVIEW_FILE, "image/gif").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_media_names_inside_hls() {
        assert!(safe_relative("stream.m3u8").is_some());
        assert!(safe_relative("0/stream-abc-12.ts").is_some());
        assert!(safe_relative("../castd.db").is_none());
        assert!(safe_relative("0/../../x.ts").is_none());
        assert!(safe_relative("0//x.ts").is_none());
        assert!(safe_relative(".hidden.ts").is_none());
        assert!(safe_relative("0/stream.m3u8.tmp").is_none());
        assert!(safe_relative("castd.db").is_none());
        assert!(safe_relative("a%2F..%2Fb.ts").is_none());
    }
}
