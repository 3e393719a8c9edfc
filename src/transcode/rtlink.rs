//! The real-time link between the worker and the daemon: a Unix socket the supervisor listens on
//! (`WorkerConfig::realtime`). The worker writes the real-time variant's encoded video and the Opus
//! audio as frames (`HEADER` bytes: kind, flags, pts in microseconds, length; then the payload); the
//! daemon writes one byte (`KEYFRAME_REQUEST`) for each coalesced keyframe request.
//!
//! Daemon side (`start`): one listener per worker run, in the system's temporary directory; the task
//! accepts the worker's connection (or gives up after `ACCEPT_TIMEOUT`), publishes what it reads into
//! `media::realtime` (which never waits) and forwards keyframe requests, until the worker closes it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tracing::{debug, warn};

use crate::media::realtime::{Realtime, RtFrame};
use crate::tasks::{Stage, Tasks};

/// How long the daemon waits for the worker to connect.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(60);

/// The socket path for a worker run (`id`: the run's segment id).
pub fn socket_path(id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("castd-rt-{}-{id}.sock", std::process::id()))
}

/// Listen on `path` and serve the worker's connection into `realtime` (a `Stream` stage task).
pub fn start(path: &Path, realtime: Arc<Realtime>, tasks: &Tasks) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    let path = path.to_path_buf();
    let stop = tasks.token(Stage::Stream);
    tasks.spawn(Stage::Stream, "realtime link", async move {
        let accepted = tokio::select! {
            r = tokio::time::timeout(ACCEPT_TIMEOUT, listener.accept()) => r,
            _ = stop.cancelled() => { let _ = std::fs::remove_file(&path); return; }
        };
        let _ = std::fs::remove_file(&path);
        let stream = match accepted {
            Ok(Ok((s, _))) => s,
            Ok(Err(e)) => return warn!("realtime link: accept: {e}"),
            Err(_) => return debug!("realtime link: the worker did not connect"),
        };
        let (mut rd, mut wr) = stream.into_split();
        let reader = async {
            let mut h = [0u8; HEADER];
            loop {
                if rd.read_exact(&mut h).await.is_err() {
                    return;
                }
                let (kind, key, pts_us, len) = parse(&h);
                if len > MAX_PAYLOAD {
                    return warn!("realtime link: a frame of {len} bytes; closing");
                }
                let mut data = vec![0u8; len];
                if rd.read_exact(&mut data).await.is_err() {
                    return;
                }
                let video = kind == VIDEO;
                realtime.publish(RtFrame { video, keyframe: key, pts_us, at: Instant::now(), data: Bytes::from(data) });
            }
        };
        let writer = async {
            loop {
                realtime.keyframe_requested().await;
                if wr.write_all(&[KEYFRAME_REQUEST]).await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            _ = reader => {}
            _ = writer => {}
            _ = stop.cancelled() => {}
        }
    });
    Ok(())
}

/// Frame header: kind (1 byte), flags (1 byte), pts in µs (8 bytes, big-endian), length (4 bytes).
pub const HEADER: usize = 14;
/// Kind: an H.264 access unit (Annex B).
pub const VIDEO: u8 = 1;
/// Kind: one Opus packet (48 kHz, 20 ms).
pub const AUDIO: u8 = 2;
/// Flag: a keyframe.
pub const KEY: u8 = 1;
/// The byte the daemon sends to ask for a keyframe.
pub const KEYFRAME_REQUEST: u8 = b'K';
/// Largest payload accepted (a 4K keyframe fits many times).
pub const MAX_PAYLOAD: usize = 8 << 20;

/// A frame's header.
pub fn header(kind: u8, key: bool, pts_us: u64, len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0] = kind;
    h[1] = if key { KEY } else { 0 };
    h[2..10].copy_from_slice(&pts_us.to_be_bytes());
    h[10..14].copy_from_slice(&(len as u32).to_be_bytes());
    h
}

/// (kind, keyframe, pts in µs, payload length) of a header.
pub fn parse(h: &[u8; HEADER]) -> (u8, bool, u64, usize) {
    let mut pts = [0u8; 8];
    pts.copy_from_slice(&h[2..10]);
    let mut len = [0u8; 4];
    len.copy_from_slice(&h[10..14]);
    (h[0], h[1] & KEY != 0, u64::from_be_bytes(pts), u32::from_be_bytes(len) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        assert_eq!(parse(&header(VIDEO, true, 123_456_789, 4242)), (VIDEO, true, 123_456_789, 4242));
        assert_eq!(parse(&header(AUDIO, false, 0, 3)), (AUDIO, false, 0, 3));
    }
}
