//! Serving the stream: `GET /hls/*` (playlists and segments), `/thumbnail.jpg` and `/preview.gif`.
//!
//! Owncast's rules: only `.m3u8`, `.ts`, `.m4s` and `.mp4` files are served (anything else is 404);
//! playlists are `application/x-mpegURL`; segments are immutable (their names are never reused); CORS is open (the API's CORS layer covers `/hls/`). Paths are checked component by
//! component (letters, digits, `-`, `_`, `.`; no `..`, no empty or hidden parts), so nothing outside
//! `<data-dir>/hls` can be named. The thumbnail and preview are made by the transcoder
//! (`transcode::thumbnail`); this module only serves them.
//!
//! While live, the live window is served from memory (`LiveFiles`), kept in step with the broadcast's
//! feed (this module reads each of its channel's broadcasts, `media::Attached`):
//! `Started` empties it, each `SegmentWritten` maps the new segment, the `PlaylistWritten` after it loads the playlist,
//! `SegmentRetired` drops what left the window, so memory holds exactly the live window and a player
//! never sees a playlist naming a segment memory does not have; a lagged feed resyncs from the
//! retention window. Nothing here reads a playlist to learn what is new. Segments are the segment files mapped (`http::zerocopy`), so
//! the web server sends them with `sendfile` instead of copying them into each socket. Disk stays the
//! durable copy: anything not in memory (after a restart, after the stream ends) comes from disk
//! through `http::diskcache` (each file opened once, segments mapped and sent with `sendfile`). Every answer has `ETag`, `Last-Modified`, Range
//! and conditional-request support (`http::files`).
//!
//! While the stream is live in low-latency mode, `llhls` answers the variant playlists, parts and
//! segments first (blocking reload); everything it does not hold comes from here.
//!
//! Every playlist fetch marks the viewer active and every request's CMCD keys are harvested, through
//! the metrics handle this feature was given.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use parking_lot::RwLock;

use crate::http::diskcache::DiskCache;
use crate::http::files::{respond, FileBody};
use crate::http::lanes::{Lane, LaneFuture};
use crate::http::zerocopy::MappedFile;
use crate::http::{ApiError, Auth, Registry, ResponseDoc};
use crate::media::{Attached, Broadcast, ChannelId, Delivery, MediaEvent, MediaPlane, Retention, Subscription};
use crate::metrics::Metrics;
use crate::tasks::{Stage, Tasks};

pub use crate::transcode::thumbnail::{PREVIEW_FILE, THUMBNAIL_FILE};

/// The header a cluster edge adds to the requests it passes on to the origin (`cluster::proxy`): the
/// edge counts the viewers behind them itself, so the origin does not count them a second time. Only
/// the cluster's edge mark (`Hls::edge_mark`) is honoured, so a client cannot use it to hide.
pub const FROM_EDGE_HEADER: &str = crate::http::headers::EDGE_MARK_HEADER;

/// Whether `headers` carry this origin's edge mark (compared in constant time).
fn from_edge(mark: Option<&str>, headers: &HeaderMap) -> bool {
    let (Some(mark), Some(given)) = (mark, headers.get(FROM_EDGE_HEADER)) else {
        return false;
    };
    crate::password::same_secret(given.as_bytes(), mark.as_bytes())
}

/// What the HLS routes need.
pub struct Hls {
    /// The channel served here (each channel has its own `Hls`).
    pub channel: ChannelId,
    /// The channel's HLS folder (`<data-dir>/hls` for the default channel).
    pub hls_dir: PathBuf,
    /// Where the thumbnail and preview are (the data dir).
    pub images_dir: PathBuf,
    pub metrics: Arc<Metrics>,
    /// The live window in memory.
    pub live: Arc<LiveFiles>,
    /// Everything else (the stream that ended, segments that left the window), opened once.
    pub disk: Arc<DiskCache>,
    /// Low-latency HLS (parts, blocking reload) while the stream is live at the LL latency level.
    pub ll: Arc<crate::llhls::LlHls>,
    /// Playlists served instead of the local ones when present (object storage: segment URIs on the
    /// bucket or CDN).
    pub remote: Option<Arc<dyn PlaylistOverride>>,
    /// On a cluster origin, the `X-Castd-Edge` value its edges send (`ClusterConfig::edge_mark`): a
    /// playlist request carrying it is a viewer the edge already counted. `None` elsewhere: the header
    /// is ignored and every viewer counts.
    pub edge_mark: Option<String>,
}

/// A source of variant playlists that point elsewhere (object storage); asked before the live window.
/// `None` serves the local playlist (storage off, behind or failing).
pub trait PlaylistOverride: Send + Sync {
    fn playlist(&self, rel: &str) -> Option<FileBody>;
}

/// The live window held in memory, by path under the HLS directory (`0/stream.m3u8`, `0/x-1.ts`).
#[derive(Default)]
pub struct LiveFiles {
    files: RwLock<HashMap<String, Arc<FileBody>>>,
}

impl LiveFiles {
    pub fn get(&self, rel: &str) -> Option<Arc<FileBody>> {
        self.files.read().get(rel).cloned()
    }

    pub fn len(&self) -> usize {
        self.files.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        self.files.write().clear();
    }

    /// A file of the live window: segments are mapped from their files, which the web server can
    /// `sendfile` from (`http::zerocopy`), playlists onto the heap.
    fn load(path: &FsPath, content_type: &'static str, cache: &'static str) -> std::io::Result<FileBody> {
        let bytes =
            if content_type == PLAYLIST_TYPE { Bytes::from(std::fs::read(path)?) } else { MappedFile::load(path)? };
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).unwrap_or_else(|_| SystemTime::now());
        Ok(FileBody::from_content(bytes, modified, content_type, cache))
    }

    /// A segment the worker wrote (blocking I/O: the file is mapped). Added before its playlist is, so a
    /// player never sees a playlist naming a segment memory does not have.
    pub fn add_segment(&self, hls_dir: &FsPath, variant: usize, file: &str) -> std::io::Result<()> {
        let key = format!("{variant}/{file}");
        let Some((_, kind)) = safe_relative(&key) else { return Ok(()) };
        if self.files.read().contains_key(&key) {
            return Ok(());
        }
        let body = Self::load(&hls_dir.join(&key), kind, SEGMENT_CACHE)?;
        self.files.write().insert(key, Arc::new(body));
        Ok(())
    }

    /// A segment left the window: memory lets it go (disk still serves it until retention deletes it).
    pub fn retire(&self, variant: usize, file: &str) {
        self.files.write().remove(&format!("{variant}/{file}"));
    }

    /// Variant `n`'s playlist (or the master's, `None`) as the worker just wrote it, to serve.
    pub fn refresh_playlist(&self, hls_dir: &FsPath, variant: Option<usize>) -> std::io::Result<()> {
        let rel = match variant {
            Some(n) => format!("{n}/stream.m3u8"),
            None => "stream.m3u8".to_string(),
        };
        let body = Self::load(&hls_dir.join(&rel), PLAYLIST_TYPE, PLAYLIST_CACHE)?;
        self.files.write().insert(rel, Arc::new(body));
        Ok(())
    }

    /// After missing feed events: memory holds exactly the live window again (`retention`), and the
    /// playlists are reloaded.
    pub fn resync(&self, hls_dir: &FsPath, retention: &Retention) {
        let variants = retention.variants();
        let mut wanted: HashSet<String> = HashSet::new();
        for n in &variants {
            for seg in retention.window(*n) {
                if let Err(e) = self.add_segment(hls_dir, *n, &seg.file) {
                    tracing::debug!("live window: {n}/{}: {e}", seg.file);
                }
                wanted.insert(format!("{n}/{}", seg.file));
            }
        }
        self.files.write().retain(|k, _| k.ends_with(".m3u8") || wanted.contains(k));
        for n in variants.into_iter().map(Some).chain([None]) {
            if let Err(e) = self.refresh_playlist(hls_dir, n) {
                tracing::debug!("live window: playlist {n:?}: {e}");
            }
        }
    }
}

/// Keep the channel's live window in step with what the transcoder writes (each of its broadcasts'
/// feed) until the broadcast ends; `Started` starts from an empty window.
pub fn start(hls: Arc<Hls>, media: &MediaPlane, tasks: &Tasks) {
    let mut reader = media.reader_for(&hls.channel, "hls-live-window");
    let spawner = tasks.clone();
    tasks.spawn_until_stopped(Stage::Outputs, "hls: live windows", async move {
        while let Some(Attached { broadcast, feed }) = reader.next().await {
            let follow = follow(hls.live.clone(), hls.disk.clone(), broadcast, feed);
            spawner.spawn(Stage::Outputs, "hls: live window", follow);
        }
    });
}

/// Follow one broadcast's feed into its channel's live window.
async fn follow(live: Arc<LiveFiles>, disk: Arc<DiskCache>, b: Arc<Broadcast>, mut feed: Subscription) {
    while let Some(delivery) = feed.recv().await {
        // Parts and init segments are llhls's; no blocking task for them (several a second).
        if let Delivery::Event(ev) = &delivery {
            if matches!(**ev, MediaEvent::PartWritten(_) | MediaEvent::InitWritten { .. }) {
                continue;
            }
        }
        let (live, disk, b) = (live.clone(), disk.clone(), b.clone());
        let done = tokio::task::spawn_blocking(move || match delivery {
            Delivery::Event(ev) => match &*ev {
                // A new broadcast starts from an empty folder.
                MediaEvent::Started(_) => {
                    live.clear();
                    disk.clear();
                    Ok(())
                }
                MediaEvent::SegmentWritten(seg) => live.add_segment(&b.dir, seg.variant, &seg.file),
                MediaEvent::PlaylistWritten { variant } => live.refresh_playlist(&b.dir, *variant),
                MediaEvent::SegmentRetired { variant, file } => {
                    live.retire(*variant, file);
                    Ok(())
                }
                // A finished stream is served from disk (its playlists end with ENDLIST there).
                MediaEvent::StreamEnded => {
                    live.clear();
                    disk.clear();
                    Ok(())
                }
                MediaEvent::PartWritten(_) | MediaEvent::InitWritten { .. } => Ok(()),
            },
            Delivery::Lagged => {
                live.resync(&b.dir, &b.retention);
                Ok(())
            }
        })
        .await;
        if let Ok(Err(e)) = done {
            tracing::warn!("live window: {e}");
        }
    }
}

const PLAYLIST_TYPE: &str = "application/x-mpegURL";

const GROUP: &str = "hls";
/// `Cache-Control` of segments: their names are never reused.
pub const SEGMENT_CACHE: &str = "public, max-age=31536000, immutable";
/// `Cache-Control` of playlists (master and media): a shared cache (nginx `proxy_cache`, a CDN, a
/// castd edge) may keep one for a second, half the shortest target duration castd makes (2 s), as
/// Apple's authoring rules and AWS MediaPackage do; players reload every target duration. LL-HLS
/// playlists have their own rules (`llhls`).
pub const PLAYLIST_CACHE: &str = "public, max-age=1";
const NO_CACHE: &str = "no-cache, no-store, must-revalidate";

pub fn routes(reg: &mut Registry, state: Arc<Hls>) {
    // Every viewer fetches a playlist and a segment every few seconds: these skip the router.
    reg.lane("/hls/", Arc::new(HlsLane(state.clone())));
    let mut reg = reg.scope(state);
    // Playlists (application/x-mpegURL) and segments (video/mp2t, video/iso.segment, video/mp4).
    reg.get("/hls/{*path}", GROUP, Auth::Public, "HLS playlists and segments", hls)
        .answers(ResponseDoc::Content("*/*"))
        .error(404, "No such playlist or segment");
    reg.get("/thumbnail.jpg", GROUP, Auth::Public, "The stream's latest thumbnail (JPEG)", thumbnail_jpg)
        .answers(ResponseDoc::Content("image/jpeg"))
        .error(404, "The stream has not been live yet");
    reg.get("/preview.gif", GROUP, Auth::Public, "The stream's animated preview (GIF)", preview_gif)
        .answers(ResponseDoc::Content("image/gif"))
        .error(404, "The stream has not been live yet");
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

/// `GET /hls/{*path}` as the bare router serves it; the daemon's connections take the fast lane (`HlsLane`).
async fn hls(State(hls): State<Arc<Hls>>, req: Request) -> Result<Response, ApiError> {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0);
    serve(&hls, req, peer).await
}

/// The same, as the web server's fast lane for `/hls/` (`http::lanes`).
struct HlsLane(Arc<Hls>);

impl Lane for HlsLane {
    fn takes(&self, _path: &str) -> bool {
        true
    }

    fn serve(&self, req: Request, peer: SocketAddr) -> LaneFuture {
        let hls = self.0.clone();
        Box::pin(async move { serve(&hls, req, peer).await.unwrap_or_else(IntoResponse::into_response) })
    }
}

/// Answer an HLS request. Takes the request whole rather than `Path`/`HeaderMap`/`RawQuery`
/// extractors: those copy the header map and allocate per request, and this is the hottest route
/// castd has.
async fn serve(hls: &Hls, req: Request, peer: SocketAddr) -> Result<Response, ApiError> {
    let not_found = || ApiError::NotFound("no such file".into());
    let (req, _) = req.into_parts(); // the body is not `Sync`; nothing here reads it
    let raw = req.uri.path().strip_prefix("/hls/").unwrap_or_default();
    let decoded;
    let path = if raw.contains('%') {
        decoded = percent_encoding::percent_decode_str(raw).decode_utf8().map_err(|_| not_found())?;
        &*decoded
    } else {
        raw
    };
    let headers = &req.headers;
    // Owncast marks the viewer active on each playlist fetch; players' CMCD keys on any HLS request
    // are request-mode playback data.
    let bookkeeping = |playlist: bool| {
        // A cluster edge counts the viewers it serves itself (presence adds the nodes up).
        if playlist && !from_edge(hls.edge_mark.as_deref(), headers) {
            hls.metrics.viewers.mark_request(peer, headers);
        }
        crate::metrics::playback::harvest_request(&hls.metrics.playback, peer, headers, req.uri.query());
    };
    if let Some(answer) = hls.ll.serve(path, req.uri.query(), headers).await {
        bookkeeping(path.ends_with(".m3u8"));
        return answer;
    }
    // The memory window is keyed by the names the transcoder wrote, so a hit needs no path checks.
    let remote = if path.ends_with(".m3u8") { hls.remote.as_ref().and_then(|r| r.playlist(path)) } else { None };
    let file = match remote.map(Arc::new).or_else(|| hls.live.get(path)) {
        Some(f) => f,
        None => {
            // Checked before the disk is asked: the name is the cache's key and the file's path.
            let (_, kind) = safe_relative(path).ok_or_else(not_found)?;
            let playlist = kind == PLAYLIST_TYPE;
            let cache = if playlist { PLAYLIST_CACHE } else { SEGMENT_CACHE };
            hls.disk.get(path, kind, cache, playlist).await.ok_or_else(not_found)?
        }
    };
    bookkeeping(file.content_type == PLAYLIST_TYPE);
    Ok(respond(headers, &file))
}

async fn from_disk(path: &FsPath, kind: &'static str, cache: &'static str) -> Option<FileBody> {
    let bytes = tokio::fs::read(path).await.ok()?;
    let modified = tokio::fs::metadata(path).await.and_then(|m| m.modified()).unwrap_or_else(|_| SystemTime::now());
    Some(FileBody::from_disk(Bytes::from(bytes), modified, kind, cache))
}

async fn image(hls: &Hls, headers: &HeaderMap, name: &str, kind: &'static str) -> Result<Response, ApiError> {
    let file = from_disk(&hls.images_dir.join(name), kind, NO_CACHE)
        .await
        .ok_or_else(|| ApiError::NotFound(format!("no {name} yet: the stream has not been live")))?;
    Ok(respond(headers, &file))
}

async fn thumbnail_jpg(State(hls): State<Arc<Hls>>, headers: HeaderMap) -> Result<Response, ApiError> {
    image(&hls, &headers, THUMBNAIL_FILE, "image/jpeg").await
}

async fn preview_gif(State(hls): State<Arc<Hls>>, headers: HeaderMap) -> Result<Response, ApiError> {
    image(&hls, &headers, PREVIEW_FILE, "image/gif").await
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
