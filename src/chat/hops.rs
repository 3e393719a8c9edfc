//! Per-hop timestamps of chat messages, for measuring where a message's time goes (issue 44,
//! `bench/cluster`). Off unless `CASTD_DEBUG_CHAT_HOPS` names a file when the first mark is made (read
//! once); off, a mark is one load and one branch. On, every mark appends a line
//! `<unix µs>\t<hop>\t<message id>\t<extra>` to that file: the hops of a CHAT are `recv` (the node
//! read it from its client; extra: the start of the body, where bench/chat's stamp is), on an edge
//! `edge_added` (Redis took the forward), on the origin `origin_read` (its read of the inbound stream
//! returned), `origin_handle` (its handling began), then `stored`, `broadcast` (the local fan-out and,
//! on the origin, the queue for the other nodes got it), `written` (origin: in the outbound stream),
//! `acked` (origin: the inbound entry acknowledged), on every other node `node_read` (its read of the
//! outbound stream returned) and `node_fanout` (handed to the local fan-out), and on every node
//! `sent` (one line per fan-out thread, once it offered the frame to each of its clients).
//! `bench/cluster/hops.py` joins the lines of every node by message id.

use std::fs::File;
use std::io::Write;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

static FILE: OnceLock<Option<Mutex<File>>> = OnceLock::new();

fn file() -> Option<&'static Mutex<File>> {
    FILE.get_or_init(|| {
        let path = std::env::var_os("CASTD_DEBUG_CHAT_HOPS").filter(|p| !p.is_empty())?;
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => {
                tracing::warn!(path = %path.to_string_lossy(), "CASTD_DEBUG_CHAT_HOPS: writing every chat message's hops (a debug switch)");
                Some(Mutex::new(f))
            }
            Err(e) => {
                tracing::warn!("CASTD_DEBUG_CHAT_HOPS: cannot open {}: {e}", path.to_string_lossy());
                None
            }
        }
    })
    .as_ref()
}

/// Whether hops are being written.
pub fn on() -> bool {
    file().is_some()
}

/// Now, in µs since the Unix epoch (the clock bench/chat stamps its messages with).
pub fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Message `id` passed `hop` now.
pub fn mark(hop: &str, id: &str) {
    if let Some(f) = file() {
        write(f, now_us(), hop, id, "");
    }
}

/// Message `id` passed `hop` at `at` (µs, `now_us`).
pub fn mark_at(at: u64, hop: &str, id: &str) {
    if let Some(f) = file() {
        write(f, at, hop, id, "");
    }
}

/// Message `id` with `body` was read from its client.
pub fn mark_recv(id: &str, body: &str) {
    if let Some(f) = file() {
        let extra: String = body.chars().take(64).map(|c| if c.is_control() { ' ' } else { c }).collect();
        write(f, now_us(), "recv", id, &extra);
    }
}

/// Every CHAT event in `frames` (one or more JSON frames, raw or websocket-framed) passed `hop` at `at`.
pub fn mark_frames(at: u64, hop: &str, frames: &[u8]) {
    if let Some(f) = file() {
        for id in chat_ids(frames) {
            write(f, at, hop, id, "");
        }
    }
}

/// The ids of the CHAT events in `frames` (`{"type":"CHAT","id":"…",…}`, as `protocol` writes them).
fn chat_ids(frames: &[u8]) -> Vec<&str> {
    const CHAT: &[u8] = br#""type":"CHAT","id":""#;
    let mut out = Vec::new();
    let mut rest = frames;
    while let Some(i) = rest.windows(CHAT.len()).position(|w| w == CHAT) {
        rest = &rest[i + CHAT.len()..];
        let end = rest.iter().position(|b| *b == b'"').unwrap_or(rest.len());
        if let Ok(id) = std::str::from_utf8(&rest[..end]) {
            out.push(id);
        }
        rest = &rest[end..];
    }
    out
}

fn write(f: &Mutex<File>, at: u64, hop: &str, id: &str, extra: &str) {
    let line = format!("{at}\t{hop}\t{id}\t{extra}\n");
    let _ = f.lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids_are_found_in_one_frame_or_several() {
        let one = br#"{"type":"CHAT","id":"abc","timestamp":"t","body":"x","user":{"id":"u1"}}"#;
        assert_eq!(chat_ids(one), vec!["abc"]);
        let mut two = vec![0x81, 5];
        two.extend_from_slice(one);
        two.extend_from_slice(br#"{"type":"USER_JOINED","id":"j"}{"type":"CHAT","id":"def","user":{"id":"u"}}"#);
        assert_eq!(chat_ids(&two), vec!["abc", "def"]);
        assert!(chat_ids(b"{}").is_empty());
    }
}
