//! Real broadcasters against the real daemon, three independent RTMP client implementations:
//!
//! - OBS Studio (Debian's `obs-studio`, libobs' own RTMP output) under Xvfb, in a network namespace
//!   with only a loopback device, bridged to castd through Unix sockets (`publishers/obs.rs`): castd
//!   reports OBS as the broadcaster, the HLS variants are readable by ffprobe, the viewer page plays
//!   the stream in Chromium, killing OBS takes the stream offline, a new OBS brings it back, and
//!   "Stop Streaming" (over obs-websocket) takes it offline again. And OBS over SRT (its MPEG-TS/SRT
//!   output, libsrt, bridged as UDP datagrams): live with readable HLS and the codecs in the
//!   broadcaster details; "Stop Streaming" takes it offline.
//! - GStreamer's `rtmp2sink` and
//! - GStreamer's `rtmpsink` (librtmp): a wrong key is refused, a publish goes live with readable HLS,
//!   and the stream goes offline when the pipeline ends.
//!
//! These tests fail (never skip) when a tool is missing or OBS cannot start; the failure carries OBS's
//! own log. They run one at a time. With `CASTD_SCREENSHOT_DIR` set, the OBS test also writes
//! `obs-settings.png` (Settings > Stream and > Output) there: `CASTD_SCREENSHOT_DIR=docs/screenshots
//! cargo test --test obs obs_studio` refreshes the README's screenshot.

mod common;
#[path = "publishers/mod.rs"]
mod publishers;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::Server;
use publishers::gst::{self, Sink};
use publishers::hls::{check_newest_segment, online, segments, text, wait_new_segments, wait_offline};
use publishers::obs::Obs;
use publishers::viewer::play_viewer_page;
use serde_json::{json, Value};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const OBS_KEY: &str = "obs-studio-key-1";
const GST_KEY: &str = "gstreamer-key-1";

/// 2 s segments (latency level 1), as the broadcaster's 2 s keyframe interval gives.
fn configure(server: &Server, variants: Value) {
    server.set("video/streamoutputvariants", variants);
    server.set("video/streamlatencylevel", json!(1));
}

fn details(server: &Server) -> Value {
    server.admin_json("/api/admin/status")["broadcaster"]["streamDetails"].clone()
}

fn castd_tail(server: &Server) -> String {
    let log = server.log_text();
    let lines: Vec<&str> = log.lines().collect();
    format!("--- castd log (last 40 lines)\n{}", lines[lines.len().saturating_sub(40)..].join("\n"))
}

/// Wait until castd is online with `variants` variant playlists in the master playlist, failing early
/// (with OBS's log) when OBS exits.
fn wait_online_obs(server: &Server, obs: &mut Obs, variants: usize, timeout: Duration) -> Duration {
    let started = Instant::now();
    loop {
        obs.assert_running();
        let master = text(server, "/hls/stream.m3u8").unwrap_or_default();
        if online(server) && (0..variants).all(|n| master.contains(&format!("{n}/stream.m3u8"))) {
            return started.elapsed();
        }
        if started.elapsed() > timeout {
            panic!(
                "castd is not online with OBS's stream {timeout:?} after OBS started\n{}\n{}",
                obs.diag(),
                castd_tail(server)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn obs_studio_broadcasts_plays_and_reconnects() {
    let _g = lock();
    let t0 = Instant::now();
    let server = Server::start_with_args(&["--streamkey", OBS_KEY]);
    let rtmp_port = server.rtmp_port.expect("castd logs its RTMP port");
    // OBS's own stream as it is, and a 360p transcode of it.
    configure(
        &server,
        json!([
            {"name": "source", "videoPassthrough": true, "audioPassthrough": true},
            {"name": "360p", "scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 600, "framerate": 30,
             "cpuUsageLevel": 0, "audioPassthrough": true}
        ]),
    );
    let dir = tempfile::Builder::new().prefix("castd-obs-").tempdir().unwrap();
    let mut obs = Obs::new(dir.path(), rtmp_port, OBS_KEY);

    // 1. OBS starts streaming from the command line.
    obs.start(true);
    let took = wait_online_obs(&server, &mut obs, 2, Duration::from_secs(60));
    eprintln!("obs: OBS start to castd online with both variants: {took:?}");
    let d = details(&server);
    let encoder = d["encoder"].as_str().unwrap_or_default().to_string();
    assert!(encoder.starts_with("obs-output module (libobs version "), "encoder in admin status: {d}");
    eprintln!("obs: broadcaster encoder {encoder:?}");
    assert_eq!((d["width"].as_u64(), d["height"].as_u64()), (Some(1280), Some(720)), "{d}");
    assert_eq!(d["framerate"].as_f64(), Some(30.0), "{d}");
    assert_eq!(d["videoCodec"], "H.264", "{d}");
    assert_eq!(d["audioCodec"], "AAC", "{d}");
    let master = text(&server, "/hls/stream.m3u8").unwrap();
    assert!(master.contains("RESOLUTION=1280x720") && master.contains("RESOLUTION=640x360"), "{master}");

    let diag = |obs: &Obs| format!("{}\n{}", obs.diag(), castd_tail(&server));
    for n in 0..2 {
        wait_new_segments(&server, n, 2, &[], Duration::from_secs(30), &|| diag(&obs));
    }
    check_newest_segment(&server, 0, 720);
    check_newest_segment(&server, 1, 360);

    // 2. The viewer page plays it in Chromium.
    let (from, state) = play_viewer_page(dir.path(), &server.url("/"), 3.0, Duration::from_secs(60));
    assert!(!state.paused, "{state:?}");
    assert!(state.src.starts_with("blob:"), "played through hls.js (MSE): {state:?}");
    assert!(
        [(1280, 720), (640, 360)].contains(&(state.width, state.height)),
        "the picture has a variant's size: {state:?}"
    );
    eprintln!(
        "obs: the viewer page played from {from:.1} s to {:.1} s ({}x{})",
        state.current_time, state.width, state.height
    );

    // 3. OBS is killed: the stream goes offline and the playlists end.
    let before: Vec<Vec<String>> =
        (0..2).map(|n| segments(&text(&server, &format!("/hls/{n}/stream.m3u8")).unwrap())).collect();
    let first_connect = server.get_json("/api/status")["lastConnectTime"].clone();
    obs.stop_process();
    let took = wait_offline(&server, 2, Duration::from_secs(30), &|| diag(&obs));
    eprintln!("obs: OBS killed to castd offline: {took:?}");

    // 4. OBS again: the stream comes back (a reconnect from castd's point of view).
    obs.start(true);
    let took = wait_online_obs(&server, &mut obs, 2, Duration::from_secs(60));
    eprintln!("obs: second OBS start to castd online: {took:?}");
    let status = server.get_json("/api/status");
    assert_ne!(status["lastConnectTime"], first_connect, "a new connection: {status}");
    assert!(details(&server)["encoder"].as_str().unwrap_or_default().starts_with("obs-output module"));
    // The new broadcast's segments (castd names each broadcast's segments apart).
    for (n, seen) in before.iter().enumerate() {
        wait_new_segments(&server, n, 1, seen, Duration::from_secs(30), &|| diag(&obs));
    }
    check_newest_segment(&server, 0, 720);
    check_newest_segment(&server, 1, 360);

    // 5. "Stop Streaming" (obs-websocket's StopStream): OBS unpublishes, castd goes offline.
    let mut ws = obs.websocket();
    let status = ws.request("GetStreamStatus", json!({}));
    assert_eq!(status["outputActive"], true, "OBS says it is streaming: {status}");
    ws.request("StopStream", json!({}));
    let took = wait_offline(&server, 2, Duration::from_secs(30), &|| diag(&obs));
    eprintln!("obs: Stop Streaming to castd offline: {took:?}");
    let st = poll_stream_inactive(&mut ws);
    assert_eq!(st["outputActive"], false, "{st}");
    obs.assert_running();
    let log = obs.log();
    assert!(log.contains("Connection to rtmp://127.0.0.1:") && log.contains("successful"), "OBS log:\n{log}");

    // README screenshot, on request, while OBS is idle (its settings are greyed out while it streams).
    if let Some(out) = std::env::var_os("CASTD_SCREENSHOT_DIR") {
        let out = std::path::PathBuf::from(out);
        std::fs::create_dir_all(&out).unwrap();
        let path = out.join("obs-settings.png");
        obs.screenshot_settings(&path);
        eprintln!("obs: wrote {}", path.display());
    }
    drop(ws);
    drop(obs);
    eprintln!("obs: whole test {:?}", t0.elapsed());
}

/// OBS's stream output stays active for a moment after StopStream returns.
fn poll_stream_inactive(ws: &mut publishers::obs::ObsWebSocket) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = ws.request("GetStreamStatus", json!({}));
        if st["outputActive"] == false || Instant::now() > deadline {
            return st;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn obs_studio_broadcasts_over_srt() {
    let _g = lock();
    let t0 = Instant::now();
    let srt_port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = Server::start_with_args(&["--streamkey", OBS_KEY, "--srtport", &srt_port.to_string()]);
    assert_eq!(server.srt_port, Some(srt_port), "castd logs its SRT port");
    let rtmp_port = server.rtmp_port.expect("castd logs its RTMP port");
    configure(
        &server,
        json!([{"name": "360p", "scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 600, "framerate": 30,
                "cpuUsageLevel": 0}]),
    );
    let dir = tempfile::Builder::new().prefix("castd-obs-srt-").tempdir().unwrap();
    let mut obs = Obs::new_srt(dir.path(), rtmp_port, srt_port, OBS_KEY);
    obs.start(true);
    let took = wait_online_obs(&server, &mut obs, 1, Duration::from_secs(60));
    eprintln!("obs over srt: OBS start to castd online: {took:?}");
    let diag = |obs: &Obs| format!("{}\n{}", obs.diag(), castd_tail(&server));
    wait_new_segments(&server, 0, 2, &[], Duration::from_secs(30), &|| diag(&obs));
    check_newest_segment(&server, 0, 360);
    let d = details(&server);
    assert_eq!(d["videoCodec"], "H.264", "{d}");
    assert_eq!(d["audioCodec"], "AAC", "{d}");
    let st = server.admin_json("/api/admin/status");
    assert!(st["broadcaster"]["remoteAddr"].as_str().unwrap_or_default().starts_with("127.0.0.1"), "{st}");
    eprintln!("obs over srt: broadcaster encoder {:?}", d["encoder"]);

    let mut ws = obs.websocket();
    ws.request("StopStream", json!({}));
    let took = wait_offline(&server, 1, Duration::from_secs(30), &|| diag(&obs));
    eprintln!("obs over srt: Stop Streaming to castd offline: {took:?}");
    // README screenshot of the SRT settings, on request, while OBS is idle.
    if let Some(out) = std::env::var_os("CASTD_SCREENSHOT_DIR") {
        let out = std::path::PathBuf::from(out);
        std::fs::create_dir_all(&out).unwrap();
        let path = out.join("obs-settings-srt.png");
        obs.screenshot_settings(&path);
        eprintln!("obs over srt: wrote {}", path.display());
    }
    drop(ws);
    drop(obs);
    eprintln!("obs over srt: whole test {:?}", t0.elapsed());
}

/// One GStreamer RTMP sink end to end: a wrong key is refused, a 12 s publish goes live with HLS
/// that ffprobe reads, and the stream goes offline when the pipeline ends.
fn gstreamer_publish(sink: Sink) {
    let _g = lock();
    let t0 = Instant::now();
    gst::require_elements(sink);
    let server = Server::start_with_args(&["--streamkey", GST_KEY]);
    let port = server.rtmp_port.expect("castd logs its RTMP port");
    configure(
        &server,
        json!([{"name": "360p", "videoBitrate": 600, "framerate": 30, "cpuUsageLevel": 0, "audioPassthrough": true}]),
    );
    let dir = tempfile::Builder::new().prefix("castd-gst-").tempdir().unwrap();
    let el = sink.element();

    // A wrong key: castd refuses, the pipeline fails.
    let mut bad = gst::publish(sink, &format!("rtmp://127.0.0.1:{port}/live/not-the-key"), 5, dir.path(), "refused");
    let status =
        bad.wait_timeout(Duration::from_secs(20)).unwrap_or_else(|| panic!("{el}: a refused publish must end"));
    assert!(!status.success(), "{el}: a publish with a wrong key must fail; gst-launch said:\n{}", bad.output_text());
    assert!(!online(&server), "{el}: a wrong key must not go online");
    assert!(server.log_text().contains("invalid stream key"), "{}", castd_tail(&server));

    let mut publisher = gst::publish(sink, &format!("rtmp://127.0.0.1:{port}/live/{GST_KEY}"), 12, dir.path(), el);
    let diag = |p: &publishers::procs::Proc| {
        format!("--- gst-launch-1.0 ({el})\n{}\n{}", p.output_text(), castd_tail(&server))
    };
    let started = Instant::now();
    server
        .wait_for(Duration::from_secs(20), || {
            (online(&server) && text(&server, "/hls/stream.m3u8").is_some()).then_some(())
        })
        .unwrap_or_else(|| panic!("{el}: not online within 20 s\n{}", diag(&publisher)));
    eprintln!("{el}: publish to castd online: {:?}", started.elapsed());
    let d = details(&server);
    assert!(d["encoder"].as_str().unwrap_or_default().starts_with("GStreamer"), "{el}: {d}");
    assert_eq!((d["width"].as_u64(), d["height"].as_u64()), (Some(640), Some(360)), "{el}: {d}");
    assert_eq!(d["audioCodec"], "AAC", "{el}: {d}");
    wait_new_segments(&server, 0, 2, &[], Duration::from_secs(20), &|| diag(&publisher));
    check_newest_segment(&server, 0, 360);

    // The pipeline ends (EOS after 12 s): the sink unpublishes and castd goes offline.
    let status = publisher
        .wait_timeout(Duration::from_secs(40))
        .unwrap_or_else(|| panic!("{el}: gst-launch did not end after its 12 s\n{}", diag(&publisher)));
    assert!(status.success(), "{el}: gst-launch failed ({status})\n{}", diag(&publisher));
    let took = wait_offline(&server, 1, Duration::from_secs(30), &|| diag(&publisher));
    eprintln!("{el}: pipeline end to castd offline: {took:?}; whole test {:?}", t0.elapsed());
}

#[test]
fn gstreamer_rtmp2sink_publishes_and_goes_offline() {
    gstreamer_publish(Sink::Rtmp2);
}

#[test]
fn gstreamer_librtmp_rtmpsink_publishes_and_goes_offline() {
    gstreamer_publish(Sink::LibRtmp);
}
