//! What a publish should produce on castd: online in `/api/status`, HLS variant playlists with segments
//! that ffprobe reads, and offline again once the publisher stops.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::Server;

pub use crate::common::media::{online, segments, text};

/// One stream of a segment as ffprobe sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub codec_type: String,
    pub codec_name: String,
    pub width: u64,
    pub height: u64,
}

/// ffprobe's streams of a segment fetched over HTTP (fails the test when ffprobe cannot read it).
pub fn probe(server: &Server, path: &str) -> Vec<Probed> {
    let bytes = server.get(path).bytes().expect("segment body");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-show_entries", "stream=codec_type,codec_name,width,height", "-of", "json"])
        .arg(file.path())
        .output()
        .expect("run ffprobe");
    assert!(
        out.status.success(),
        "ffprobe cannot read {path} ({} bytes): {}",
        bytes.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    v["streams"]
        .as_array()
        .map(|streams| {
            streams
                .iter()
                .map(|s| Probed {
                    codec_type: s["codec_type"].as_str().unwrap_or_default().to_string(),
                    codec_name: s["codec_name"].as_str().unwrap_or_default().to_string(),
                    width: s["width"].as_u64().unwrap_or(0),
                    height: s["height"].as_u64().unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Wait until `/hls/<n>/stream.m3u8` lists at least `count` segments not in `seen`; returns them.
pub fn wait_new_segments(
    server: &Server,
    variant: usize,
    count: usize,
    seen: &[String],
    timeout: Duration,
    diag: &dyn Fn() -> String,
) -> Vec<String> {
    let path = format!("/hls/{variant}/stream.m3u8");
    server
        .wait_for(timeout, || {
            let fresh: Vec<String> =
                segments(&text(server, &path)?).into_iter().filter(|s| !seen.contains(s)).collect();
            (fresh.len() >= count).then_some(fresh)
        })
        .unwrap_or_else(|| {
            panic!(
                "variant {variant}: fewer than {count} new segments within {timeout:?}; playlist:\n{}\n{}",
                text(server, &path).unwrap_or_else(|| "(none)".into()),
                diag()
            )
        })
}

/// The newest segment of variant `n` has an H.264 video stream `height` lines high and an AAC audio
/// stream.
pub fn check_newest_segment(server: &Server, variant: usize, height: u64) -> Vec<Probed> {
    let playlist = text(server, &format!("/hls/{variant}/stream.m3u8")).expect("variant playlist");
    let newest = segments(&playlist).last().cloned().expect("a segment");
    let streams = probe(server, &format!("/hls/{variant}/{newest}"));
    let video = streams.iter().find(|s| s.codec_type == "video");
    let audio = streams.iter().find(|s| s.codec_type == "audio");
    assert!(
        matches!(video, Some(v) if v.codec_name == "h264" && v.height == height),
        "variant {variant} segment {newest}: expected h264 with {height} lines, got {streams:?}"
    );
    assert!(
        matches!(audio, Some(a) if a.codec_name == "aac"),
        "variant {variant} segment {newest}: no AAC audio: {streams:?}"
    );
    streams
}

/// Wait until castd reports the stream offline and every variant playlist has ended.
pub fn wait_offline(server: &Server, variants: usize, timeout: Duration, diag: &dyn Fn() -> String) -> Duration {
    let started = std::time::Instant::now();
    server
        .wait_for(timeout, || (!online(server)).then_some(()))
        .unwrap_or_else(|| panic!("still online {timeout:?} after the publisher stopped\n{}", diag()));
    let took = started.elapsed();
    for n in 0..variants {
        let p = text(server, &format!("/hls/{n}/stream.m3u8")).unwrap_or_default();
        assert!(p.trim_end().ends_with("#EXT-X-ENDLIST"), "variant {n} playlist not ended after going offline: {p}");
    }
    took
}
