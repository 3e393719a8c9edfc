//! `GET /replay/{streamId}/download.mp4` and `GET /clip/{clipId}/download.mp4` (castd): the recording
//! remuxed to MP4 without re-encoding, streamed while it is made.
//!
//! A child `ffmpeg` reads a playlist of the recorded files (the best variant; a clip's segments with
//! its window cut at keyframes) and writes a fragmented MP4 with an empty `moov` first
//! (`-movflags frag_keyframe+empty_moov+default_base_moof`): the `moov` comes before any `mdat`, so the
//! file plays from its first bytes, and nothing has to be seeked back to, so it streams from stdout.
//! The child is killed when the client goes away (the body's stream owns it).
//!
//! Each download is a child process, so they are capped ([`Replays::downloads`], a `throttle::Caps`):
//! at most [`DOWNLOADS_PER_ADDRESS`] at once from one client address (429 beyond it) and
//! [`DOWNLOADS_TOTAL`] in all (503 beyond it). The place is taken before anything else is done and
//! held until the response body is dropped; a client that stops reading for [`STALL`] loses its
//! download (the child is killed, the place given back), so idle connections cannot hold every place.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use parking_lot::Mutex;
use tokio::io::AsyncReadExt;

use super::db::{self, ReplayRow, SegmentRow};
use super::playlist::{self, best_variant};
use super::serve::{not_found, playable, safe_name};
use super::Replays;
use crate::http::{ApiError, Auth, ClientIp, Registry, StatusResponse, ValueDoc};
use crate::throttle::{CapPermit, CapRefused, Caps};

/// Downloads (ffmpeg children) running at once in all; beyond it a download is answered 503.
pub const DOWNLOADS_TOTAL: usize = 4;
/// Downloads one client address (an IPv6 /64) may run at once; beyond it, 429.
pub const DOWNLOADS_PER_ADDRESS: usize = 2;
/// A download whose client has read nothing for this long is ended and gives its place back.
pub const STALL: Duration = Duration::from_secs(60);
/// `Retry-After` of a refused download.
const RETRY_AFTER_SECS: u64 = 10;

/// The caps of the downloads (see the module doc).
pub fn caps() -> Caps {
    Caps::new(DOWNLOADS_PER_ADDRESS, DOWNLOADS_TOTAL)
}

/// Take a download place for `ip`.
fn admit(r: &Replays, ip: Option<IpAddr>) -> Result<CapPermit, CapRefused> {
    r.downloads.try_acquire(ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)))
}

/// The answer to a download refused its place: 429 (this address) or 503 (the server), with `Retry-After`.
fn refused(refused: CapRefused) -> Response {
    let (status, message) = match refused {
        CapRefused::PerAddress(n) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!("at most {n} downloads at once from one address; try again when one has finished"),
        ),
        CapRefused::Total(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "the server is busy with other downloads; try again later".into())
        }
    };
    let mut resp = (status, Json(StatusResponse { success: false, message })).into_response();
    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    resp
}

/// The temporary playlist, the child and the download's place: all go when the response body is
/// dropped, or when the watchdog finds the client stalled.
struct Running {
    _child: tokio::process::Child,
    playlist: PathBuf,
    _permit: CapPermit,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.playlist);
    }
}

/// A download in progress: what it holds and when its client last took a chunk.
struct Download {
    running: Mutex<Option<Running>>,
    last_read: Mutex<Instant>,
}

/// End `download` once its client has read nothing for [`STALL`]; stops when the body is dropped.
async fn watchdog(download: Weak<Download>) {
    loop {
        tokio::time::sleep(STALL / 4).await;
        let Some(d) = download.upgrade() else { return };
        if d.last_read.lock().elapsed() >= STALL {
            tracing::info!("a download's client stopped reading; the download is ended");
            drop(d.running.lock().take());
            return;
        }
    }
}

/// A file name for `Content-Disposition` from a title: letters, digits, `-` and `_` only.
pub fn file_name(title: &str, fallback: &str) -> String {
    let cleaned: String = title
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let base = if cleaned.is_empty() { fallback.to_string() } else { cleaned.chars().take(80).collect() };
    format!("{base}.mp4")
}

/// Spawn the remux of `segs` (files of `variant` of replay `row`); `cut` is (seek into the first
/// segment, duration) for a clip.
async fn remux(
    r: &Arc<Replays>,
    row: &ReplayRow,
    variant: i64,
    segs: &[SegmentRow],
    cut: Option<(f64, f64)>,
    name: String,
    permit: CapPermit,
) -> Result<Response, ApiError> {
    let dir = r.variant_dir(&row.id, variant as usize);
    let text = playlist::media(segs, true, |f| match &row.remote_base {
        Some(base) => format!("{base}{variant}/{f}"),
        None => f.to_string(),
    });
    let list = dir.join(format!(".download-{}.m3u8", crate::password::random_token(8)));
    tokio::fs::create_dir_all(&dir).await.map_err(|e| ApiError::Internal(e.to_string()))?;
    tokio::fs::write(&list, text).await.map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut cmd = tokio::process::Command::new("ffmpeg");
    cmd.args(["-hide_banner", "-loglevel", "error", "-nostdin"]);
    cmd.args(["-protocol_whitelist", "file,http,https,tcp,tls,crypto", "-allowed_extensions", "ALL"]);
    if let Some((seek, _)) = cut {
        cmd.args(["-ss", &format!("{seek:.3}")]);
    }
    cmd.arg("-i").arg(&list);
    if let Some((_, len)) = cut {
        cmd.args(["-t", &format!("{len:.3}")]);
    }
    cmd.args([
        "-map",
        "0:v?",
        "-map",
        "0:a?",
        "-c",
        "copy",
        "-bsf:a",
        "aac_adtstoasc",
        "-movflags",
        "frag_keyframe+empty_moov+default_base_moof",
    ]);
    cmd.args(["-f", "mp4", "pipe:1"]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = tokio::fs::remove_file(&list).await;
            return Err(ApiError::Internal(format!("cannot start ffmpeg: {e}")));
        }
    };
    let Some(stdout) = child.stdout.take() else {
        let _ = tokio::fs::remove_file(&list).await;
        return Err(ApiError::Internal("ffmpeg has no stdout".into()));
    };
    let download = Arc::new(Download {
        running: Mutex::new(Some(Running { _child: child, playlist: list, _permit: permit })),
        last_read: Mutex::new(Instant::now()),
    });
    r.tasks.spawn_until_stopped(
        crate::tasks::Stage::Background,
        "download watchdog",
        watchdog(Arc::downgrade(&download)),
    );
    let stream = futures_util::stream::unfold((stdout, download), |(mut out, download)| async move {
        // Asked for the next chunk: the client took the last one.
        *download.last_read.lock() = Instant::now();
        let mut buf = vec![0u8; 256 * 1024];
        match out.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(axum::body::Bytes::from(buf)), (out, download)))
            }
            Err(e) => Some((Err(e), (out, download))),
        }
    });
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

/// The download routes: `/replay/{streamId}/download.mp4` and `/clip/{clipId}/download.mp4`.
pub fn routes(reg: &mut Registry, r: Arc<Replays>) {
    let mut reg = reg.scope(r);
    reg.get(
        "/replay/{stream_id}/download.mp4",
        "replays",
        Auth::Public,
        "castd: the replay as an MP4 file (remuxed, streamed while it is made)",
        replay,
    )
    .path_param("stream_id", ValueDoc::String)
    .error(404, "no such replay");
    reg.get(
        "/clip/{clip_id}/download.mp4",
        "clips",
        Auth::Public,
        "castd: the clip as an MP4 file (remuxed, streamed while it is made)",
        clip,
    )
    .path_param("clip_id", ValueDoc::String)
    .error(404, "no such clip");
}

async fn replay(
    State(r): State<Arc<Replays>>,
    ClientIp(ip): ClientIp,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(row) = playable(&r, &id, ip, &headers).await? else { return Ok(not_found()) };
    let permit = match admit(&r, ip) {
        Ok(p) => p,
        Err(no) => return Ok(refused(no)),
    };
    let rid = id.clone();
    let variants = r.store.call(move |c| db::variants(c, &rid)).await?;
    let Some(v) = best_variant(&row.master, &variants) else { return Ok(not_found()) };
    let rid = id.clone();
    let segs = r.store.call(move |c| db::segments(c, &rid, v)).await?;
    if segs.is_empty() {
        return Ok(not_found());
    }
    let title = if row.title.is_empty() { row.stream_title.clone() } else { row.title.clone() };
    let name = file_name(&title, &format!("replay-{id}"));
    remux(&r, &row, v, &segs, None, name, permit).await
}

async fn clip(
    State(r): State<Arc<Replays>>,
    ClientIp(ip): ClientIp,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if !r.enabled() || !safe_name(&id) {
        return Ok(not_found());
    }
    let permit = match admit(&r, ip) {
        Ok(p) => p,
        Err(no) => return Ok(refused(no)),
    };
    let cid = id.clone();
    let Some(c) = r.store.call(move |conn| db::clip(conn, &cid)).await? else { return Ok(not_found()) };
    let sid = c.stream_id.clone();
    let (row, variants) = r.store.call(move |conn| Ok((db::replay(conn, &sid)?, db::variants(conn, &sid)?))).await?;
    let Some(row) = row else { return Ok(not_found()) };
    let Some(v) = best_variant(&row.master, &variants) else { return Ok(not_found()) };
    let sid = c.stream_id.clone();
    let segs = r.store.call(move |conn| db::segments(conn, &sid, v)).await?;
    let segs = playlist::window(&segs, c.start, c.end);
    let Some(first) = segs.first() else { return Ok(not_found()) };
    let cut = ((c.start - first.media_offset).max(0.0), c.end - c.start);
    let title = if c.title.is_empty() { format!("clip-{}", c.id) } else { c.title.clone() };
    let name = file_name(&title, &format!("clip-{id}"));
    remux(&r, &row, v, &segs, Some(cut), name, permit).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_file_names() {
        assert_eq!(file_name("My \"great\" show / part 2", "x"), "My-great-show-part-2.mp4");
        assert_eq!(file_name("", "replay-abc"), "replay-abc.mp4");
        assert_eq!(file_name("日本", "clip-1"), "clip-1.mp4");
    }
}
