//! Encoders and hardware health against the real daemon and the real libavcodec: `castd encoders`,
//! the background probe, `video/codec` selection, `supportedCodecs`, the encoder admin routes and
//! `/api/admin/hardwarestats`.
//!
//! The hardware expectations hold on a machine without GPU (as CI has); on a machine with a device node
//! for a vendor, that vendor's "unavailable" assertions are skipped (its encoder may work there).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, BIN};
use serde_json::{json, Value};

const HW_ENCODERS: [&str; 3] = ["h264_nvenc", "h264_vaapi", "h264_qsv"];

/// Whether this box could possibly run `encoder` (a device node for its vendor exists).
fn device_present(encoder: &str) -> bool {
    match encoder {
        "h264_nvenc" => Path::new("/dev/nvidia0").exists(),
        _ => Path::new("/dev/dri").exists(),
    }
}

fn encoders_json(args: &[&str]) -> Vec<Value> {
    let out = Command::new(BIN).arg("encoders").arg("--json").args(args).output().expect("run castd encoders");
    assert!(out.status.success(), "castd encoders failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("castd encoders --json prints a JSON array")
}

fn entries<'a>(list: &'a [Value], name: &str) -> Vec<&'a Value> {
    list.iter().filter(|e| e["name"] == name).collect()
}

#[test]
fn encoders_json_lists_software_available_and_hardware_unavailable_with_the_drivers_reason() {
    let started = Instant::now();
    let list = encoders_json(&[]);
    assert!(started.elapsed() < Duration::from_secs(45), "the probe is bounded in time");
    for e in &list {
        for key in ["name", "kind", "available", "device", "reason"] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
    }
    let x264: Vec<&Value> = entries(&list, "libx264").into_iter().filter(|e| e.get("decode").is_none()).collect();
    assert_eq!(x264.len(), 1, "{list:?}");
    assert_eq!(x264[0]["available"], true, "{}", x264[0]);
    assert_eq!(x264[0]["kind"], "software");
    assert_eq!(x264[0]["reason"], "");

    for name in HW_ENCODERS {
        let found = entries(&list, name);
        assert!(!found.is_empty(), "{name} is not listed: {list:?}");
        let kind = &found[0]["kind"];
        assert_eq!(kind, name.trim_start_matches("h264_"), "{name}");
        if device_present(name) {
            continue;
        }
        for e in found {
            assert_eq!(e["available"], false, "{e}");
            let reason = e["reason"].as_str().unwrap_or_default();
            assert!(!reason.is_empty(), "{name} is unavailable without a reason");
        }
    }
    if !device_present("h264_nvenc") {
        // The reason is libav's own: the CUDA device cannot be created without the driver's libcuda.
        let reason = entries(&list, "h264_nvenc")[0]["reason"].as_str().unwrap_or_default().to_string();
        assert!(reason.contains("CUDA"), "{reason}");
    }
    // The decode paths (libx264 on pictures decoded and scaled on a GPU) are listed too, each with the
    // driver's reason where there is no such device.
    for decode in ["cuda", "vaapi"] {
        let found: Vec<&Value> = list.iter().filter(|e| e["decode"] == decode).collect();
        assert!(!found.is_empty(), "the {decode} decode path is listed: {list:?}");
        for e in found {
            assert_eq!((e["name"].as_str(), e["kind"].as_str()), (Some("libx264"), Some("software")), "{e}");
            let present = if decode == "cuda" { device_present("h264_nvenc") } else { device_present("h264_vaapi") };
            if !present {
                assert_eq!(e["available"], false, "{e}");
                assert!(!e["reason"].as_str().unwrap_or_default().is_empty(), "{e}");
            }
        }
    }
    if !device_present("h264_nvenc") {
        let cuda = list.iter().find(|e| e["decode"] == "cuda").map(|e| e["reason"].to_string()).unwrap_or_default();
        assert!(cuda.contains("CUDA"), "the driver's words: {cuda}");
    }
    // Preference order: hardware first, software last.
    assert_eq!(list.last().map(|e| (e["name"].clone(), e.get("decode").is_none())), Some((json!("libx264"), true)));
}

#[test]
fn encoders_table_and_single_encoder_probe() {
    let out = Command::new(BIN).arg("encoders").output().expect("run castd encoders");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap_or_default();
    for col in ["ENCODER", "KIND", "AVAILABLE", "DEVICE", "REASON"] {
        assert!(header.contains(col), "{header}");
    }
    let x264 = text.lines().find(|l| l.starts_with("libx264") && l.contains(" software ")).expect("libx264 row");
    assert!(x264.contains("yes"), "{x264}");
    let cuda =
        text.lines().find(|l| l.starts_with("libx264") && l.contains("decode+cuda")).expect("CUDA decode path row");
    if !device_present("h264_nvenc") {
        assert!(cuda.contains(" no ") && cuda.contains("CUDA"), "{cuda}");
    }
    assert!(text.contains("video codec 'auto' would use:"), "{text}");

    let one = encoders_json(&["--only", "h264_nvenc"]);
    assert!(!one.is_empty() && one.iter().all(|e| e["name"] == "h264_nvenc"), "{one:?}");
    let decode = encoders_json(&["--only", "decode:cuda"]);
    assert!(!decode.is_empty() && decode.iter().all(|e| e["name"] == "libx264" && e["decode"] == "cuda"), "{decode:?}");
    let unknown = encoders_json(&["--only", "h264_bogus"]);
    assert_eq!(unknown[0]["available"], false);
    assert!(unknown[0]["reason"].as_str().unwrap_or_default().contains("does not know"));
}

/// Wait until the start-up probe has filled the list.
fn probed(server: &Server) -> Value {
    server
        .wait_for(Duration::from_secs(30), || {
            let v = server.admin_json("/api/admin/encoders");
            (!v["probedAt"].is_null()).then_some(v)
        })
        .expect("the start-up probe finished within 30 s")
}

#[test]
fn daemon_probes_at_start_and_selection_follows_the_probe() {
    let server = Server::start();
    let v = probed(&server);
    let list = v["encoders"].as_array().cloned().unwrap_or_default();
    for name in ["libx264", "h264_nvenc", "h264_vaapi", "h264_qsv"] {
        assert!(!entries(&list, name).is_empty(), "{name} not in {v}");
    }
    assert_eq!(v["videoCodec"], "auto");
    let log = server.log_text();
    assert!(log.contains("encoder libx264: available"), "{log}");

    let cfg = server.admin_json("/api/admin/serverconfig");
    let supported: Vec<String> = serde_json::from_value(cfg["supportedCodecs"].clone()).unwrap();
    assert!(supported.contains(&"libx264".to_string()), "{supported:?}");
    let available: Vec<String> = list
        .iter()
        .filter(|e| e["available"] == true)
        .map(|e| e["name"].as_str().unwrap_or_default().to_string())
        .collect();
    for name in &supported {
        assert!(available.contains(name), "{name} is listed as supported but the probe found it unavailable");
    }

    if !device_present("h264_nvenc") {
        assert!(!supported.contains(&"h264_nvenc".to_string()));
        assert_eq!(v["selected"], "libx264", "auto picks software on a box without GPU");
        let r = server.admin_post("/api/admin/config/video/codec", &json!({ "value": "h264_nvenc" }));
        assert_eq!(r.status().as_u16(), 400);
        let body: Value = r.json().unwrap();
        assert_eq!(body["success"], false);
        let msg = body["message"].as_str().unwrap_or_default();
        assert!(msg.contains("h264_nvenc") && msg.contains("libx264"), "the message names the available ones: {msg}");
        assert_eq!(server.admin_json("/api/admin/serverconfig")["videoCodec"], "auto", "the refused value is not kept");
    }
    server.set("video/codec", json!("libx264"));
    assert_eq!(server.admin_json("/api/admin/encoders")["selected"], "libx264");
    server.set("video/codec", json!("auto"));
}

#[test]
fn reprobe_on_demand() {
    let server = Server::start();
    let first = probed(&server)["probedAt"].as_str().unwrap_or_default().to_string();
    let r = server.admin_post("/api/admin/encoders/probe", &json!({}));
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().unwrap();
    let second = v["probedAt"].as_str().unwrap_or_default().to_string();
    assert!(second > first, "probedAt moves on: {first} -> {second}");
    assert!(v["encoders"]
        .as_array()
        .is_some_and(|l| l.iter().any(|e| e["name"] == "libx264" && e["available"] == true)));
}

#[test]
fn hardware_and_encoder_admin_routes_need_auth() {
    let server = Server::start();
    for path in ["/api/admin/hardwarestats", "/api/admin/encoders"] {
        assert_eq!(server.get(path).status().as_u16(), 401, "{path}");
        let wrong = server.client.get(server.url(path)).basic_auth("admin", Some("wrong")).send().unwrap();
        assert_eq!(wrong.status().as_u16(), 401, "{path}");
    }
    assert_eq!(server.post_json("/api/admin/encoders/probe", &json!({})).status().as_u16(), 401);
}

#[test]
fn hardwarestats_has_points_within_15_seconds() {
    let server = Server::start();
    let started = Instant::now();
    let stats = server
        .wait_for(Duration::from_secs(15), || {
            let v = server.admin_json("/api/admin/hardwarestats");
            let ready = ["cpu", "memory", "disk"].iter().all(|k| v[k].as_array().is_some_and(|a| !a.is_empty()));
            ready.then_some(v)
        })
        .expect("cpu, memory and disk points within 15 s of start");
    assert!(started.elapsed() <= Duration::from_secs(15));
    for key in ["cpu", "memory", "disk"] {
        for p in stats[key].as_array().unwrap() {
            let value = p["value"].as_f64().expect("numeric value");
            assert!((0.0..=100.0).contains(&value), "{key}: {value}");
            let time = p["time"].as_str().expect("time");
            assert!(chrono_like(time), "{key} time {time}");
        }
    }
    assert!(stats["memory"][0]["value"].as_f64().unwrap_or(0.0) > 0.0, "some memory is in use");
    assert!(stats["disk"][0]["value"].as_f64().unwrap_or(0.0) > 0.0, "the data dir's filesystem holds something");
    assert!(stats["message"].is_string());
    assert!(stats["healthPercentage"].is_u64());
    assert!(stats["representation"].is_u64());
    assert!(stats["healthy"].is_boolean());
    if !device_present("h264_nvenc") {
        assert!(stats.get("gpu").is_none(), "no GPU series without an NVIDIA driver: {}", stats["gpu"]);
        assert!(!server.log_text().to_lowercase().contains("nvml"), "no NVML noise in the log at info level");
    }
}

/// An RFC 3339 timestamp, as Owncast sends (`2024-01-01T00:00:00.123Z`).
fn chrono_like(s: &str) -> bool {
    s.len() >= 20 && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b'T'
}

// ---- Live-stream parts: the transcode pipeline with the encoder plan and the fallback. ----
//
// They publish the ffmpeg CLI's test pattern over RTMP. The contract:
// * `GET /hls/0/stream.m3u8` lists segments once the stream is live;
// * the supervisor fills `App.stream.encoders` with the per-variant encoders (admin status shows them in
//   `currentBroadcast.videoCodec` / `currentBroadcast.encoders`);
// * the hidden flag `--debug-encoder-fault SECONDS` (env `CASTD_DEBUG_ENCODER_FAULT`) makes the worker's
//   encoder fail once, SECONDS after the stream starts, as a driver error would. The supervisor leaves the
//   failed encoder: a hardware one for libx264, libx264 itself for passthrough (the broadcaster's own
//   video), and says so (`transcode::encoders::report_fallback`).

/// Publish 60 s of test pattern to the server; the child is killed on drop by the caller.
/// Publish 60 s of 640x360 test pattern with the server's first stream key.
fn publish(server: &Server) -> std::process::Child {
    let key = server.admin_json("/api/admin/serverconfig")["streamKeys"][0]["key"].as_str().unwrap().to_string();
    common::media::publish(server, &key, "640x360", 60)
}

fn segment_count(server: &Server) -> usize {
    segments(server).len()
}

/// Segment names in the first variant's playlist (a sliding window).
fn segments(server: &Server) -> Vec<String> {
    let r = server.get("/hls/0/stream.m3u8");
    if !r.status().is_success() {
        return Vec::new();
    }
    r.text().unwrap_or_default().lines().filter(|l| l.ends_with(".ts")).map(str::to_string).collect()
}

#[test]
fn auto_streams_on_libx264_and_admin_status_says_so() {
    let server = Server::start();
    probed(&server);
    let mut ffmpeg = publish(&server);
    let status = server
        .wait_for(Duration::from_secs(30), || {
            let s = server.admin_json("/api/admin/status");
            (s["online"] == true && !s["currentBroadcast"]["videoCodec"].as_str().unwrap_or("").is_empty()).then_some(s)
        })
        .expect("online with an encoder within 30 s");
    assert_eq!(status["currentBroadcast"]["videoCodec"], "libx264");
    assert!(status["currentBroadcast"]["encoders"].as_array().is_some_and(|a| a.iter().all(|e| e == "libx264")));
    assert!(server.wait_for(Duration::from_secs(30), || (segment_count(&server) >= 2).then_some(())).is_some());
    assert_eq!(server.admin_json("/api/admin/encoders")["inUse"][0], "libx264");
    let _ = ffmpeg.kill();
    let _ = ffmpeg.wait();
}

#[test]
fn encoder_failure_mid_stream_falls_back_and_segments_keep_coming() {
    let server = Server::start_with_args(&["--debug-encoder-fault", "6"]);
    probed(&server);
    let mut ffmpeg = publish(&server);
    // Before the fault: the ladder is encoded, on the encoder `auto` chose (libx264 without a GPU).
    let before = server
        .wait_for(Duration::from_secs(30), || {
            let s = server.admin_json("/api/admin/status");
            let enc = s["currentBroadcast"]["encoders"].as_array().cloned().unwrap_or_default();
            (s["online"] == true && !enc.is_empty() && segment_count(&server) >= 1).then_some((enc, s))
        })
        .expect("online and encoding within 30 s");
    let (encoders_before, status_before) = before;
    let chosen = status_before["currentBroadcast"]["videoCodec"].as_str().unwrap_or_default().to_string();
    assert!(encoders_before.iter().all(|e| *e == json!(chosen)), "{encoders_before:?}");
    let pid_before = status_before["currentBroadcast"]["workerPid"].clone();
    // After it: another encoder serves every variant, and the health message says which and why.
    let expected_after = if chosen == "libx264" { "copy" } else { "libx264" };
    let status = server
        .wait_for(Duration::from_secs(30), || {
            let s = server.admin_json("/api/admin/status");
            let enc = s["currentBroadcast"]["encoders"].as_array().cloned().unwrap_or_default();
            (!enc.is_empty() && enc.iter().all(|e| *e == json!(expected_after))).then_some(s)
        })
        .unwrap_or_else(|| panic!("the ladder moved from {chosen} to {expected_after}: {}", server.log_text()));
    let after = status["currentBroadcast"]["encoders"].as_array().cloned().unwrap_or_default();
    assert_ne!(encoders_before, after, "the encoder before the fault differs from the one after it");
    assert_ne!(status["currentBroadcast"]["workerPid"], pid_before, "a new worker runs");
    let msg = status["health"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(&format!("encoder {chosen} failed")) && msg.contains("continues"), "{msg}");
    let log = server.log_text();
    assert!(log.contains("simulated encoder fault"), "the worker reported the encoder failure: {log}");
    assert_eq!(status["online"], true, "viewers keep the stream");
    // Segments keep coming after the fallback: two new names appear in the sliding playlist.
    let before = segments(&server);
    let after = server.wait_for(Duration::from_secs(20), || {
        let new = segments(&server).into_iter().filter(|s| !before.contains(s)).count();
        (new >= 2).then_some(new)
    });
    assert!(after.is_some(), "segments stopped after the fallback (had {before:?})");
    let _ = ffmpeg.kill();
    let _ = ffmpeg.wait();
}
