//! The transcode worker on its own (`castd worker --config …` with an FLV on stdin), over a ladder that
//! takes every path of the software pipeline at once: a 3:2 area step from the decoded frame, a 2:1 step
//! from that variant's picture, a libswscale size at half the frame rate scaled from a larger variant,
//! and a passthrough. ffprobe checks sizes, frame counts and that every segment starts on a keyframe.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

/// Make `secs` seconds of 960x540@30 testsrc2 + sine as FLV (H.264 + AAC, keyframe every second).
fn make_input(path: &Path, secs: u32) {
    make_input_with(path, secs, "960x540", &[]);
}

fn make_input_with(path: &Path, secs: u32, size: &str, x264: &[&str]) {
    let status = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=size={size}:rate=30:duration={secs}"))
        .args(["-f", "lavfi", "-i"])
        .arg(format!("sine=frequency=440:sample_rate=48000:duration={secs}"))
        .args(["-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-pix_fmt", "yuv420p"])
        .args(x264)
        .args(["-c:a", "aac", "-b:a", "96k", "-f", "flv"])
        .arg(path)
        .status()
        .expect("run ffmpeg");
    assert!(status.success(), "ffmpeg made the input");
}

/// Width, height, and per frame (key, pts seconds) of the concatenated segments of variant `n`.
fn probe_variant(hls: &Path, n: usize) -> (u64, u64, Vec<(bool, f64)>, Vec<f64>) {
    let dir = hls.join(n.to_string());
    let playlist = std::fs::read_to_string(dir.join("stream.m3u8")).expect("variant playlist");
    let segments: Vec<&str> = playlist.lines().filter(|l| l.ends_with(".ts")).collect();
    assert!(segments.len() >= 2, "variant {n} has segments: {playlist}");
    let mut frames = Vec::new();
    let mut starts = Vec::new();
    let (mut w, mut h) = (0, 0);
    for seg in &segments {
        let out = Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height"])
            .args(["-show_entries", "frame=key_frame,pts_time", "-of", "json"])
            .arg(dir.join(seg))
            .output()
            .expect("run ffprobe");
        let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
        w = v["streams"][0]["width"].as_u64().unwrap_or(0);
        h = v["streams"][0]["height"].as_u64().unwrap_or(0);
        let seg_frames: Vec<(bool, f64)> = v["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .map(|f| {
                let t = f["pts_time"].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
                (f["key_frame"].as_u64() == Some(1), t)
            })
            .collect();
        assert!(seg_frames.first().is_some_and(|f| f.0), "variant {n}: {seg} starts on a keyframe");
        starts.push(seg_frames[0].1);
        frames.extend(seg_frames);
    }
    (w, h, frames, starts)
}

#[test]
fn every_software_path_of_the_ladder_produces_aligned_variants() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let input = dir.join("in.flv");
    make_input(&input, 6);
    let hls = dir.join("hls");
    let config = json!({
        "hlsDir": hls, "segmentSeconds": 2, "listSize": 10, "encoder": "libx264", "append": false,
        "segmentId": "t",
        "variants": [
            // 3:2 area step from the decoded 960x540 frame.
            {"scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 800, "framerate": 30, "cpuUsageLevel": 0,
             "audioPassthrough": true},
            // 2:1 from the 640x360 picture.
            {"scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 300, "framerate": 30, "cpuUsageLevel": 0,
             "audioPassthrough": false, "audioBitrate": 64},
            // Not an exact step (libswscale), 15 fps, width from the aspect ratio.
            {"scaledWidth": 0, "scaledHeight": 240, "videoBitrate": 400, "framerate": 15, "cpuUsageLevel": 0,
             "audioPassthrough": true},
            {"videoPassthrough": true, "audioPassthrough": true}
        ]
    });
    let out = Command::new(common::BIN)
        .args(["--log-level", "warn", "worker", "--config", &config.to_string()])
        .stdin(Stdio::from(std::fs::File::open(&input).expect("open input")))
        .output()
        .expect("run the worker");
    let events = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "worker exit {:?}: {events}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(events.lines().any(|l| l.contains("\"finished\"") || l.contains("Finished")), "finished: {events}");

    let master = std::fs::read_to_string(hls.join("stream.m3u8")).expect("master playlist");
    for (n, res) in ["640x360", "320x180", "426x240", "960x540"].iter().enumerate() {
        assert!(master.contains(&format!("RESOLUTION={res}")), "master lists {res}: {master}");
        assert!(master.contains(&format!("{n}/stream.m3u8")), "master lists variant {n}");
    }

    let expect = [(640, 360, 30.0), (320, 180, 30.0), (426, 240, 15.0)];
    let mut all_starts = Vec::new();
    for (n, (w, h, fps)) in expect.iter().enumerate() {
        let (pw, ph, frames, starts) = probe_variant(&hls, n);
        assert_eq!((pw, ph), (*w, *h), "variant {n} size");
        let want = 6.0 * fps;
        assert!(
            (frames.len() as f64 - want).abs() <= 2.0,
            "variant {n}: {} frames, expected about {want}",
            frames.len()
        );
        // Frames advance by one output frame interval (no duplicates, no gaps).
        for pair in frames.windows(2) {
            let dt = pair[1].1 - pair[0].1;
            assert!((dt - 1.0 / fps).abs() < 0.01, "variant {n}: frame step {dt} at {}", pair[0].1);
        }
        all_starts.push(starts);
    }
    // Every encoded variant cuts its segments at the same instants.
    for n in 1..all_starts.len() {
        assert_eq!(all_starts[n].len(), all_starts[0].len(), "segment counts of variants 0 and {n}");
        for (a, b) in all_starts[0].iter().zip(&all_starts[n]) {
            assert!((a - b).abs() < 0.05, "segment starts {a} vs {b} (variant {n})");
        }
    }
    let (pw, ph, frames, _) = probe_variant(&hls, 3);
    assert_eq!((pw, ph), (960, 540), "passthrough keeps the source");
    assert!((frames.len() as f64 - 180.0).abs() <= 2.0, "passthrough has every frame: {}", frames.len());
}

/// Peak RSS (MiB) of a worker run over `input`, read from /proc while it runs.
fn worker_peak_rss(input: &Path, hls: &Path) -> u64 {
    let config = json!({
        "hlsDir": hls, "segmentSeconds": 2, "listSize": 5, "encoder": "libx264", "append": false, "segmentId": "m",
        "variants": [{"scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 300, "framerate": 30,
                      "cpuUsageLevel": 0, "audioPassthrough": true}]
    });
    let mut child = Command::new(common::BIN)
        .args(["--log-level", "warn", "worker", "--config", &config.to_string()])
        .stdin(Stdio::from(std::fs::File::open(input).expect("open input")))
        .stdout(Stdio::null())
        .spawn()
        .expect("start the worker");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text.lines().find(|l| l.starts_with("VmHWM:"));
            if let Some(kb) = hwm.and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()) {
                peak = peak.max(kb / 1024);
            }
        }
        if child.try_wait().expect("wait for the worker").is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    peak
}

#[test]
fn worker_memory_does_not_grow_with_the_input() {
    // Lossless 720p input (~20 Mbit/s): a worker that kept its input packets would grow by ~40 MB over the
    // 24 s input compared with the 4 s one.
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let (short, long) = (dir.join("short.flv"), dir.join("long.flv"));
    make_input_with(&short, 4, "1280x720", &["-qp", "0"]);
    make_input_with(&long, 24, "1280x720", &["-qp", "0"]);
    let long_bytes = std::fs::metadata(&long).expect("long input").len();
    assert!(long_bytes > 40 << 20, "the long input is large enough to show a leak: {long_bytes} bytes");
    let a = worker_peak_rss(&short, &dir.join("a"));
    let b = worker_peak_rss(&long, &dir.join("b"));
    assert!(a > 0 && b > 0, "peak RSS was read ({a} / {b} MiB)");
    assert!(b < a + 20, "peak RSS {b} MiB over 24 s of input vs {a} MiB over 4 s: the worker keeps what it read");
}

/// An MPEG-TS input (what SRT carries) with the worker told its container: it is read with the
/// mpegts demuxer and transcoded like FLV. The same bytes announced as FLV are refused, which shows the
/// worker opens the named container instead of probing.
#[test]
fn worker_reads_the_container_it_is_told() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let flv = dir.join("in.flv");
    make_input_with(&flv, 4, "320x180", &[]);
    let ts = dir.join("in.ts");
    let status = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-i"])
        .arg(&flv)
        .args(["-c", "copy", "-f", "mpegts"])
        .arg(&ts)
        .status()
        .expect("run ffmpeg");
    assert!(status.success(), "ffmpeg remuxed the input to MPEG-TS");
    let run = |container: &str, hls: &Path| {
        let config = json!({
            "hlsDir": hls, "segmentSeconds": 1, "listSize": 10, "encoder": "libx264", "append": false,
            "segmentId": "t", "container": container,
            "variants": [
                {"scaledWidth": 160, "scaledHeight": 90, "videoBitrate": 200, "framerate": 30, "cpuUsageLevel": 0,
                 "audioPassthrough": true}
            ]
        });
        Command::new(common::BIN)
            .args(["--log-level", "warn", "worker", "--config", &config.to_string()])
            .stdin(Stdio::from(std::fs::File::open(&ts).expect("open input")))
            .output()
            .expect("run the worker")
    };
    let hls = dir.join("hls-ts");
    let out = run("mpegts", &hls);
    assert!(
        out.status.success(),
        "worker exit {:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (w, h, frames, _) = probe_variant(&hls, 0);
    assert_eq!((w, h), (160, 90), "the TS input was transcoded");
    assert!((frames.len() as f64 - 120.0).abs() <= 3.0, "every frame of 4 s at 30 fps: {}", frames.len());

    let out = run("flv", &dir.join("hls-flv"));
    assert!(!out.status.success(), "MPEG-TS announced as FLV is not probed into working");
}

/// The x264 options a segment's encoder wrote into its SEI (`subme=…` and friends).
fn x264_options(segment: &Path) -> String {
    x264_sei(segment).expect("x264's SEI in the segment")
}

/// The x264 options in a segment, when an encoder started in it (x264 writes them on its first frame).
fn x264_sei(segment: &Path) -> Option<String> {
    let bytes = std::fs::read(segment).expect("read segment");
    let text = String::from_utf8_lossy(&bytes);
    let at = text.find("options: ")?;
    Some(text[at..].chars().take_while(|c| *c != '\0').take(2000).collect())
}

/// A worker restarted after the capacity policy stepped the ladder down (`ladderStep`) opens its x264
/// rungs at the stepped presets, not the configured ones: cpuUsageLevel 4 (`fast`, subme=6) two steps
/// down is `veryfast` (subme=2); a rung configured at `superfast` stops at `ultrafast` (subme=0).
#[test]
fn a_restarted_worker_continues_at_the_capacity_step() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let input = dir.join("in.flv");
    make_input_with(&input, 2, "640x360", &[]);
    let run = |hls: &Path, step: u32| {
        let config = json!({
            "hlsDir": hls, "segmentSeconds": 2, "listSize": 5, "encoder": "libx264", "append": false,
            "segmentId": "c", "ladderStep": step,
            "variants": [
                {"scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 800, "framerate": 30, "cpuUsageLevel": 4},
                {"scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 300, "framerate": 30, "cpuUsageLevel": 1}
            ]
        });
        let out = Command::new(common::BIN)
            .args(["--log-level", "warn", "worker", "--config", &config.to_string()])
            .stdin(Stdio::from(std::fs::File::open(&input).expect("open input")))
            .output()
            .expect("run the worker");
        assert!(out.status.success(), "worker: {}", String::from_utf8_lossy(&out.stderr));
        let first = |n: usize| {
            let playlist = std::fs::read_to_string(hls.join(n.to_string()).join("stream.m3u8")).expect("playlist");
            let seg = playlist.lines().find(|l| l.ends_with(".ts")).expect("a segment").to_string();
            x264_options(&hls.join(n.to_string()).join(seg))
        };
        (first(0), first(1))
    };
    let (fast, superfast) = run(&dir.join("as-configured"), 0);
    assert!(fast.contains(" subme=6 ") && superfast.contains(" subme=1 "), "{fast}\n{superfast}");
    let (stepped, floor) = run(&dir.join("stepped"), 2);
    assert!(stepped.contains(" subme=2 "), "fast two presets faster is veryfast: {stepped}");
    assert!(floor.contains(" subme=0 "), "superfast two presets faster stops at ultrafast: {floor}");
    let threads = |o: &str| o.split(' ').find(|w| w.starts_with("threads=")).map(str::to_string);
    assert_eq!(threads(&stepped), threads(&fast), "the stepped rung keeps its threads");
}

/// Concatenate variant `n`'s init segment (fMP4) and every listed segment into one file; ffprobe its
/// video frames: (key, pts seconds) each, what ffprobe said on stderr, the segments and the file.
fn probe_concatenated(hls: &Path, n: usize) -> (Vec<(bool, f64)>, String, Vec<PathBuf>, PathBuf) {
    let dir = hls.join(n.to_string());
    let playlist = std::fs::read_to_string(dir.join("stream.m3u8")).expect("variant playlist");
    let init = playlist.lines().find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\"")).map(|r| r.trim_end_matches('"'));
    let segments: Vec<PathBuf> =
        playlist.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(|l| dir.join(l)).collect();
    let mut bytes = init.map(|i| std::fs::read(dir.join(i)).expect("init segment")).unwrap_or_default();
    for s in &segments {
        bytes.extend(std::fs::read(s).expect("segment"));
    }
    let all = dir.join(if init.is_some() { "all.mp4" } else { "all.ts" });
    std::fs::write(&all, bytes).expect("write the concatenation");
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame,pts_time", "-of", "json"])
        .arg(&all)
        .output()
        .expect("run ffprobe");
    let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    let frames = v["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| {
            let t = f["pts_time"].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
            (f["key_frame"].as_u64() == Some(1), t)
        })
        .collect();
    (frames, String::from_utf8_lossy(&out.stderr).to_string(), segments, all)
}

/// The distinct SPS and PPS NAL units of an H.264 file's video (ffmpeg rewrites it as Annex B: the
/// parameter sets of an MP4's `avcC` before its first keyframe, and every one carried in band).
fn parameter_sets(file: &Path) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-i"])
        .arg(file)
        .args(["-map", "0:v:0", "-c", "copy", "-f", "h264", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(out.status.success(), "ffmpeg read {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let data = out.stdout;
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i..i + 3] == [0, 0, 1] {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let (mut sps, mut pps) = (Vec::new(), Vec::new());
    for (k, &s) in starts.iter().enumerate() {
        let mut end = starts.get(k + 1).map_or(data.len(), |n| n - 3);
        while end > s && data[end - 1] == 0 {
            end -= 1;
        }
        let nal = data[s..end].to_vec();
        let into = match nal.first().map(|b| b & 0x1f) {
            Some(7) => &mut sps,
            Some(8) => &mut pps,
            _ => continue,
        };
        if !into.contains(&nal) {
            into.push(nal);
        }
    }
    (sps, pps)
}

/// The capacity policy's preset switch in the middle of a stream (forced with `debugLadderStepAt`, as
/// the policy would decide it on an overloaded box): at the next segment boundary each x264 rung drains
/// its encoder and opens one at the new preset. In MPEG-TS (classic HLS) and in CMAF (LL-HLS) the output
/// stays one valid stream: every frame decodes, timestamps advance by one frame interval across the
/// switch, segments start on keyframes, and the segments after it carry the new preset's options in band
/// but the same SPS and PPS (the stepped preset keeps what the parameter sets say: the init segment and
/// the master playlist's CODECS stay true, and a player that decodes with the `avcC`'s sets, as `avc1`
/// allows, decodes the stepped segments right; `fast` to `ultrafast` would otherwise drop CABAC and 8x8
/// transforms, which the PPS says).
#[test]
fn a_preset_switch_mid_stream_keeps_every_output_valid() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let input = dir.join("in.flv");
    make_input_with(&input, 8, "640x360", &[]);
    for low_latency in [false, true] {
        let hls = dir.join(if low_latency { "ll" } else { "ts" });
        let config = json!({
            "hlsDir": hls, "segmentSeconds": 2, "listSize": 10, "encoder": "libx264", "append": false,
            "segmentId": "s", "lowLatency": low_latency, "debugLadderStepAt": [3.0, 4],
            "variants": [
                {"scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 800, "framerate": 30, "cpuUsageLevel": 4,
                 "audioPassthrough": true},
                {"scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 300, "framerate": 30, "cpuUsageLevel": 4,
                 "audioPassthrough": true}
            ]
        });
        let out = Command::new(common::BIN)
            .args(["--log-level", "warn", "worker", "--config", &config.to_string()])
            .stdin(Stdio::from(std::fs::File::open(&input).expect("open input")))
            .output()
            .expect("run the worker");
        let events = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "worker: {}", String::from_utf8_lossy(&out.stderr));
        let changed: Value = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["type"] == "ladderChanged")
            .unwrap_or_else(|| panic!("a ladderChanged event: {events}"));
        assert_eq!(changed["step"], 4);
        assert_eq!(changed["presets"], json!(["ultrafast", "ultrafast"]));
        assert_eq!(changed["configured"], json!(["fast", "fast"]));
        for n in 0..2 {
            let (frames, stderr, segments, all) = probe_concatenated(&hls, n);
            let what = format!("low latency {low_latency}, variant {n}");
            assert!(stderr.trim().is_empty(), "{what}: ffprobe says {stderr}");
            assert!((frames.len() as i64 - 240).abs() <= 2, "{what}: {} frames", frames.len());
            for pair in frames.windows(2) {
                let dt = pair[1].1 - pair[0].1;
                assert!((dt - 1.0 / 30.0).abs() < 0.005, "{what}: frame step {dt} at {}", pair[0].1);
            }
            let keys: Vec<f64> = frames.iter().filter(|f| f.0).map(|f| f.1 - frames[0].1).collect();
            assert!(keys.iter().all(|k| (k / 2.0 - (k / 2.0).round()).abs() < 0.01), "{what}: keyframes {keys:?}");
            let first = x264_options(&segments[0]);
            assert!(first.contains(" subme=6 "), "{what}: the first segment is at fast: {first}");
            // A new encoder starts (its options in band) in the segment from 4 s, the first boundary
            // after 3 s; the segments before have none.
            let started: Vec<usize> = (1..segments.len()).filter(|&k| x264_sei(&segments[k]).is_some()).collect();
            assert_eq!(started, [2], "{what}: one switch, at the segment from 4 s");
            let after = x264_options(&segments[2]);
            assert!(after.contains(" subme=0 "), "{what}: the segments from 4 s are at ultrafast: {after}");
            let (sps, pps) = parameter_sets(&all);
            assert_eq!((sps.len(), pps.len()), (1, 1), "{what}: one SPS and one PPS across the switch");
        }
    }
}
