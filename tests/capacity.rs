//! Capacity-aware ladders on the real daemon (issue 43): a 1080p60 publish into a ladder this box
//! cannot encode in real time steps the x264 rungs down to faster presets within 10 s (TRANSCODE_DEGRADED,
//! the health message, the presets in admin status), after which the HLS segments keep arriving at the
//! segment duration; when the load goes away castd steps back up.
//!
//! The load: the publisher sends (`-re -c copy`, so it costs almost nothing) a pre-encoded 1080p60
//! H.264 clip whose first part is a test pattern under heavy temporal noise — every pixel changes every
//! frame, which libx264 at preset `fast` (cpuUsageLevel 4) cannot encode for the 900p, 576p and 360p
//! rungs at 60 fps in real time on two cores (about 3 cores' worth), while `ultrafast` takes well under
//! one — and whose second part is still colour bars, which costs
//! next to nothing at any preset: the load goes away, and the predicted headroom at the slower preset
//! returns. Noise against still bars keeps the margins wide on a box that other builds share.
//!
//! **This test needs real time**, and what a shared box can do in real time changes by the minute (a
//! build or another encode beside it). So it measures the box first: on a daemon of its own it publishes
//! the noise into the same ladder at `ultrafast` (the floor a step down reaches, `cpuUsageLevel` 0) and
//! reads the headroom castd measures (`castd_transcode_headroom`). The scenario then runs at the
//! highest rung frame rate (60, 30 or 20 fps) at which that floor, at the stepped preset's cost
//! (`X264_FLOOR_COST`), leaves `FLOOR_LOAD` room, so that the ladder can be back at real time after the
//! step down, while `fast` at that rate is still several times what the box can do. A box that cannot
//! run even the 20 fps floor skips the scenario, saying so loudly (`SKIPPED`) with what it measured.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::media::{online, segments, text};
use common::receiver::Receiver;
use common::Server;
use serde_json::{json, Value};

const KEY: &str = "capacity-stream-key";
/// Seconds of noise, then of still bars, in the published clip (4-second files, repeated).
const NOISE_SECONDS: u32 = 44;
const BARS_SECONDS: u32 = 48;
const SEGMENT: f64 = 2.0;
/// The rung frame rates the scenario may run at, the first that the box's floor allows.
const FRAME_RATES: [u32; 3] = [60, 30, 20];
/// `ultrafast` as a step reaches it costs this many times plain `ultrafast` (the measured floor):
/// `transcode::capacity::X264_COST[0]`.
const X264_FLOOR_COST: f64 = 1.3;
/// The most load the stepped floor may be predicted at for the scenario to run: it must work off the
/// lag built before the step down, and the box's neighbours come and go.
const FLOOR_LOAD: f64 = 0.75;

/// Make a 4-second 1080p60 H.264 + AAC FLV of `source` (an lavfi video source chain).
fn make_piece(path: &Path, source: &str) {
    if path.exists() {
        return;
    }
    let tmp = path.with_extension("tmp.flv");
    let status = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i"])
        .arg(source)
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4"])
        .args(["-t", "4", "-c:v", "libx264", "-preset", "ultrafast", "-g", "120", "-keyint_min", "120"])
        .args(["-b:v", "8M", "-maxrate", "8M", "-bufsize", "8M", "-pix_fmt", "yuv420p"])
        .args(["-c:a", "aac", "-b:a", "96k", "-f", "flv"])
        .arg(&tmp)
        .status()
        .expect("run ffmpeg");
    assert!(status.success(), "ffmpeg made {}", path.display());
    std::fs::rename(&tmp, path).expect("rename the piece");
}

/// The clip as an ffconcat list: `noise_seconds` of noise, then `bars_seconds` of still bars, named
/// `name`. The two pieces are made once per machine (in the temp dir) and reused.
fn clip(name: &str, noise_seconds: u32, bars_seconds: u32) -> PathBuf {
    let dir = std::env::temp_dir().join("castd-capacity-v1");
    std::fs::create_dir_all(&dir).expect("clip dir");
    let noise = dir.join("noise.flv");
    let bars = dir.join("bars.flv");
    make_piece(&noise, "testsrc2=size=1920x1080:rate=60:duration=4,noise=alls=40:allf=t+u");
    make_piece(&bars, "smptehdbars=size=1920x1080:rate=60:duration=4");
    let mut list = String::from("ffconcat version 1.0\n");
    for _ in 0..noise_seconds / 4 {
        list.push_str(&format!("file '{}'\n", noise.display()));
    }
    for _ in 0..bars_seconds / 4 {
        list.push_str(&format!("file '{}'\n", bars.display()));
    }
    let path = dir.join(format!("{name}-{}.ffconcat", std::process::id()));
    std::fs::write(&path, list).expect("write the list");
    path
}

/// The ladder of the scenario: 900p, 576p and 360p at `fps`, every rung at `cpu_usage_level`.
fn ladder(fps: u32, cpu_usage_level: u32) -> Value {
    let rung = |name: &str, w: u32, h: u32, kbps: u32| {
        json!({"name": name, "scaledWidth": w, "scaledHeight": h, "videoBitrate": kbps, "framerate": fps,
               "cpuUsageLevel": cpu_usage_level, "audioPassthrough": true})
    };
    // No exact 2:1 or 3:2 steps: every rung is scaled by libswscale (the same in debug and release).
    json!([rung("900p", 1600, 900, 5000), rung("576p", 1024, 576, 2500), rung("360p", 640, 360, 1000)])
}

/// The headroom castd measures for the noise through `ladder(fps, 0)` (all `ultrafast`), on a daemon
/// of its own: the median of `castd_transcode_headroom` over 6 s, from 3 s after going live.
fn floor_headroom(list: &Path, fps: u32) -> Option<f64> {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set("video/streamoutputvariants", ladder(fps, 0));
    server.set("video/streamlatencylevel", json!(1));
    let _publisher = Publisher(publish(&server, list));
    server.wait_for(Duration::from_secs(15), || online(&server).then_some(()))?;
    std::thread::sleep(Duration::from_secs(3));
    let mut samples = Vec::new();
    let end = Instant::now() + Duration::from_secs(6);
    while Instant::now() < end {
        let prom = server.admin_get("/api/admin/prometheus").text().unwrap_or_default();
        let value = prom
            .lines()
            .find(|l| l.starts_with("castd_transcode_headroom{"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        samples.extend(value);
        std::thread::sleep(Duration::from_millis(500));
    }
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied()
}

/// Measure the box (see the module doc): the highest of `FRAME_RATES` whose stepped floor fits
/// `FLOOR_LOAD`, or None when not even the lowest does.
fn frame_rate_for_this_box() -> Option<u32> {
    let list = clip("calibration", 16, 0);
    let mut chosen = None;
    for fps in FRAME_RATES {
        let headroom = floor_headroom(&list, fps);
        let floor = headroom.map(|h| (1.0 - h) * X264_FLOOR_COST);
        eprintln!(
            "measuring the box: the noise at ultrafast, {fps} fps: headroom {headroom:.2?}, so the stepped floor \
             would load it {floor:.2?} (the scenario needs at most {FLOOR_LOAD})"
        );
        if floor.is_some_and(|f| f <= FLOOR_LOAD) {
            chosen = Some(fps);
            break;
        }
    }
    let _ = std::fs::remove_file(&list);
    chosen
}

/// Publish the clip in real time, copying the pre-encoded streams.
fn publish(server: &Server, list: &Path) -> Child {
    let url = format!("rtmp://127.0.0.1:{}/live/{KEY}", server.rtmp_port.expect("rtmp port"));
    Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-re", "-f", "concat", "-safe", "0", "-i"])
        .arg(list)
        .args(["-c", "copy", "-f", "flv"])
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run ffmpeg")
}

/// Kills the publisher however the test ends.
struct Publisher(Child);

impl Drop for Publisher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The TRANSCODE_DEGRADED payloads received so far, with when each arrived.
fn degraded_events(hook: &Receiver) -> Vec<Value> {
    hook.all()
        .iter()
        .map(|r| r.json())
        .filter(|j| j["type"] == "TRANSCODE_DEGRADED")
        .map(|j| j["eventData"].clone())
        .collect()
}

/// Segment names of variant `n`'s media playlist.
fn playlist_segments(server: &Server, n: usize) -> Vec<String> {
    text(server, &format!("/hls/{n}/stream.m3u8")).map(|p| segments(&p)).unwrap_or_default()
}

/// Watch the media playlists for `span`: the arrival time of every new segment, per variant.
fn segment_arrivals(server: &Server, variants: usize, span: Duration) -> Vec<Vec<Instant>> {
    let mut seen: Vec<Vec<String>> = (0..variants).map(|n| playlist_segments(server, n)).collect();
    let mut arrivals = vec![Vec::new(); variants];
    let end = Instant::now() + span;
    while Instant::now() < end {
        for n in 0..variants {
            let now = playlist_segments(server, n);
            for s in &now {
                if !seen[n].contains(s) {
                    arrivals[n].push(Instant::now());
                    seen[n].push(s.clone());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    arrivals
}

/// ffprobe every segment of variant `n` on disk: each decodes without error and starts on a keyframe.
fn probe_variant(dir: &Path, n: usize, fps: u32) -> usize {
    let vdir = dir.join(n.to_string());
    let playlist = std::fs::read_to_string(vdir.join("stream.m3u8")).expect("variant playlist");
    let names: Vec<&str> = playlist.lines().filter(|l| l.ends_with(".ts")).collect();
    for name in &names {
        let out = Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame", "-of", "csv=p=0"])
            .arg(vdir.join(name))
            .output()
            .expect("run ffprobe");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.trim().is_empty(), "variant {n} {name}: {stderr}");
        let frames = String::from_utf8_lossy(&out.stdout);
        let first = frames.lines().next().and_then(|l| l.split(',').next()).map(str::trim);
        assert_eq!(first, Some("1"), "variant {n} {name} starts on a keyframe");
        // At least half a segment's frames.
        let least = (f64::from(fps) * SEGMENT / 2.0) as usize;
        assert!(frames.lines().count() >= least, "variant {n} {name}: {} frames", frames.lines().count());
    }
    names.len()
}

#[test]
fn a_ladder_the_box_cannot_keep_up_with_steps_down_and_back_up() {
    // This test needs real time: measure what the box can do now first.
    let Some(fps) = frame_rate_for_this_box() else {
        eprintln!(
            "SKIPPED a_ladder_the_box_cannot_keep_up_with_steps_down_and_back_up: this box is too busy right now \
             to encode even the ladder's floor (ultrafast) at {} fps in real time (see the measurements above); \
             run it again on a quieter box",
            FRAME_RATES[FRAME_RATES.len() - 1]
        );
        return;
    };
    eprintln!("the scenario runs its rungs at {fps} fps");
    let list = clip("clip", NOISE_SECONDS, BARS_SECONDS);
    let hook = Receiver::start(&[]);
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set("video/streamoutputvariants", ladder(fps, 4));
    server.set("video/streamlatencylevel", json!(1));
    let r =
        server.admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": ["TRANSCODE_DEGRADED"]}));
    assert!(r.status().is_success(), "TRANSCODE_DEGRADED is a webhook event: {:?}", r.text());

    let published = Instant::now();
    let _publisher = Publisher(publish(&server, &list));
    server
        .wait_for(Duration::from_secs(15), || online(&server).then_some(()))
        .unwrap_or_else(|| panic!("not online within 15 s; log:\n{}", server.log_text()));
    let live = Instant::now();

    // 1. Behind real time: castd steps the x264 rungs down within 10 s.
    let down = hook
        .wait_for(Duration::from_secs(10), |r| r.json()["type"] == "TRANSCODE_DEGRADED")
        .unwrap_or_else(|| panic!("no TRANSCODE_DEGRADED within 10 s of going live; log:\n{}", server.log_text()))
        .json()["eventData"]
        .clone();
    let step_down = live.elapsed();
    eprintln!("stepped down {step_down:.1?} after going live: {down}");
    assert_eq!(down["degraded"], true);
    assert_eq!(down["reason"], "behind");
    assert!(down["step"].as_u64().unwrap_or(0) >= 1);
    assert!(down["speed"].as_f64().unwrap_or(9.0) < 1.0, "it was behind: {down}");
    let preset = down["variants"][0]["preset"].as_str().unwrap_or_default().to_string();
    assert!(["ultrafast", "superfast", "veryfast", "faster"].contains(&preset.as_str()), "{down}");
    assert!(down["variants"].as_array().unwrap().iter().all(|v| v["configuredPreset"] == "fast"), "{down}");
    let health = server.admin_json("/api/admin/status")["health"]["message"].as_str().unwrap_or_default().to_string();
    assert!(health.contains("fell behind real time"), "health says so: {health}");
    assert!(health.contains(&format!("x264 preset {preset} instead of fast")), "{health}");
    assert!(health.contains("900p, 576p and 360p"), "it names the rungs: {health}");

    // 2. The stages switch at their next segment boundary; once the backlog is worked off, segments
    // arrive every segment duration.
    let switched = server.wait_for(Duration::from_secs(10), || {
        let st = server.admin_json("/api/admin/status");
        let t = st["currentBroadcast"]["transcode"].as_array().cloned().unwrap_or_default();
        (t.len() == 3 && t.iter().all(|v| v["preset"].as_str() != Some("fast"))).then_some(t)
    });
    let switched = switched.unwrap_or_else(|| panic!("the stages did not switch presets; log:\n{}", server.log_text()));
    eprintln!("admin status after the switch: {}", Value::Array(switched));
    // The lag built up before the switch is worked off (segments come faster meanwhile; nobody
    // stalls; castd aims to be done within 20 s): the rungs are at the live edge again.
    let mut steady = 0;
    let caught_up = server.wait_for(Duration::from_secs(35), || {
        let st = server.admin_json("/api/admin/status");
        let t = st["currentBroadcast"]["transcode"].as_array().cloned().unwrap_or_default();
        let live_edge = t.iter().all(|v| v["lag"].as_f64().unwrap_or(9.0) < 0.5);
        steady = if live_edge && !t.is_empty() { steady + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(800));
        (steady >= 3).then_some(())
    });
    caught_up.unwrap_or_else(|| panic!("the ladder never ran at real time again; log:\n{}", server.log_text()));
    eprintln!("caught up {:.1?} after going live", live.elapsed());
    let span = Duration::from_secs(20);
    let arrivals = segment_arrivals(&server, 3, span);
    let mut all_gaps = Vec::new();
    for (n, times) in arrivals.iter().enumerate() {
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        eprintln!("variant {n}: {} new segments in {span:?}, gaps {gaps:.2?}", times.len());
        assert!(times.len() >= 8, "variant {n} kept getting segments: {} in {span:?}", times.len());
        let mean = (times[times.len() - 1] - times[0]).as_secs_f64() / (times.len() - 1) as f64;
        assert!((mean - SEGMENT).abs() <= 0.2 * SEGMENT, "variant {n}: a segment every {mean:.2} s, not {SEGMENT}");
        all_gaps.extend(gaps);
    }
    all_gaps.sort_by(f64::total_cmp);
    let within = all_gaps.iter().filter(|g| (*g - SEGMENT).abs() <= 0.2 * SEGMENT).count();
    eprintln!(
        "segment gaps: {} in all, min {:.2} s, median {:.2} s, max {:.2} s, {within} within ±20 %",
        all_gaps.len(),
        all_gaps[0],
        all_gaps[all_gaps.len() / 2],
        all_gaps[all_gaps.len() - 1]
    );
    assert!(within * 10 >= all_gaps.len() * 8, "at least 80 % of the gaps within ±20 %: {all_gaps:.2?}");
    assert!(all_gaps[all_gaps.len() - 1] <= 2.0 * SEGMENT, "no stall: {all_gaps:.2?}");
    let prom = server.admin_get("/api/admin/prometheus").text().unwrap_or_default();
    assert!(prom.contains("castd_transcode_speed{channel=\"default\",variant=\"0\"}"), "{prom}");
    assert!(prom.contains("castd_transcode_headroom{channel=\"default\"}"), "{prom}");

    // 3. The noise ends (the load goes away): castd steps back up.
    let calm_at = published + Duration::from_secs(u64::from(NOISE_SECONDS));
    std::thread::sleep(calm_at.saturating_duration_since(Instant::now()));
    let before = degraded_events(&hook);
    assert!(before.last().and_then(|e| e["step"].as_u64()).unwrap_or(0) >= 1, "stepped down while the noise lasts");
    let (prev, up) = server
        .wait_for(Duration::from_secs(45), || {
            let events = degraded_events(&hook);
            let k = (before.len()..events.len()).find(|&k| events[k]["reason"] == "headroom")?;
            Some((events[k - 1].clone(), events[k].clone()))
        })
        .unwrap_or_else(|| panic!("no step back up; events {:?}; log:\n{}", degraded_events(&hook), server.log_text()));
    let step_up = Instant::now().saturating_duration_since(calm_at);
    eprintln!("stepped up {step_up:.1?} after the noise ended: {up}");
    let prev_step = prev["step"].as_u64().unwrap_or(0);
    assert_eq!(up["step"].as_u64(), Some(prev_step.saturating_sub(1)), "one preset slower than {prev}: {up}");
    let health = server.admin_json("/api/admin/status")["health"]["message"].as_str().unwrap_or_default().to_string();
    assert!(health.contains("stepping back up"), "{health}");
    assert!(up["headroom"].as_f64().unwrap_or(-1.0) > 0.0, "{up}");

    // Every segment written across the preset changes is valid H.264 that starts on a keyframe.
    let hls = server.data_dir.join("hls");
    for n in 0..3 {
        let count = probe_variant(&hls, n, fps);
        eprintln!("variant {n}: {count} segments probed");
    }
    eprintln!("events: {:?}", degraded_events(&hook));
    let _ = std::fs::remove_file(&list);
}
