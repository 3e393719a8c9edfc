//! The broadcast owns what is running: an admin who changes the video settings mid-stream (the ladder,
//! the latency level, the real-time variant) changes the *next* broadcast; everything castd reports about
//! the live one — `/api/admin/status` `currentBroadcast`, the master playlist it serves,
//! `/api/video/variants`, the video metrics, the WHEP answer, what a simulcast variant target may
//! forward — keeps describing the broadcast it is serving, polled at every moment through the change.
//! The next broadcast runs the new settings.

mod common;

use std::time::{Duration, Instant};

use common::media::{online, publish, text, wait_exit};
use common::sdp::{client, whep_offer};
use common::Server;
use serde_json::{json, Value};

const KEY: &str = "broadcast-test-key-1";

/// Two encoded rungs at level 2 (4 s segments, 4 listed), real-time on the second.
fn ladder_before() -> Value {
    json!([
        {"name": "small", "videoPassthrough": false, "scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 400,
         "audioBitrate": 64, "framerate": 30, "cpuUsageLevel": 0},
        {"name": "tiny", "videoPassthrough": false, "scaledWidth": 160, "scaledHeight": 90, "videoBitrate": 200,
         "audioBitrate": 64, "framerate": 30, "cpuUsageLevel": 0}
    ])
}

fn master_variants(server: &Server) -> Option<usize> {
    text(server, "/hls/stream.m3u8").map(|m| m.lines().filter(|l| l.starts_with("#EXT-X-STREAM-INF")).count())
}

fn whep_status(server: &Server) -> u16 {
    let r = client()
        .post(server.url("/whep"))
        .header("content-type", "application/sdp")
        .body(whep_offer())
        .send()
        .expect("POST /whep");
    let status = r.status().as_u16();
    if status == 201 {
        if let Some(loc) = r.headers().get("location").and_then(|l| l.to_str().ok()) {
            let _ = client().delete(server.url(loc)).send();
        }
    }
    status
}

/// What castd reports about the live broadcast, in one look.
#[derive(Debug, PartialEq)]
struct Reported {
    output_settings: usize,
    first_width: u64,
    latency_level: u64,
    segment_seconds: u64,
    master_variants: Option<usize>,
    public_variants: usize,
    video_metrics_bitrates: usize,
    video_metrics_segment: u64,
    whep: u16,
}

fn reported(server: &Server) -> Reported {
    let status = server.admin_json("/api/admin/status");
    let cb = &status["currentBroadcast"];
    let metrics = server.admin_json("/api/admin/metrics/video");
    Reported {
        output_settings: cb["outputSettings"].as_array().map_or(0, Vec::len),
        first_width: cb["outputSettings"][0]["scaledWidth"].as_u64().unwrap_or(0),
        latency_level: cb["latencyLevel"]["level"].as_u64().unwrap_or(99),
        segment_seconds: cb["latencyLevel"]["secondsPerSegment"].as_u64().unwrap_or(0),
        master_variants: master_variants(server),
        public_variants: server.get_json("/api/video/variants").as_array().map_or(0, Vec::len),
        video_metrics_bitrates: metrics["availableBitrates"].as_array().map_or(0, Vec::len),
        video_metrics_segment: metrics["segmentLength"].as_u64().unwrap_or(0),
        whep: whep_status(server),
    }
}

/// The simulcast target's status, once it has one.
fn target_status(server: &Server) -> Value {
    server.admin_json("/api/admin/simulcast/status").as_array().and_then(|a| a.first().cloned()).unwrap_or_default()
}

#[test]
fn what_castd_reports_is_the_broadcast_it_serves_through_a_mid_stream_settings_change() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set("video/streamoutputvariants", ladder_before());
    server.set("video/streamlatencylevel", json!(2));
    server.set("webrtc/variant", json!(1));

    let mut ffmpeg = publish(&server, KEY, "640x360", 90);
    let playable = server
        .wait_for(Duration::from_secs(40), || (online(&server) && master_variants(&server) == Some(2)).then_some(()));
    assert!(playable.is_some(), "the stream went live with its two variants");
    let before = reported(&server);
    assert_eq!(
        before,
        Reported {
            output_settings: 2,
            first_width: 320,
            latency_level: 2,
            segment_seconds: before.segment_seconds,
            master_variants: Some(2),
            public_variants: 2,
            video_metrics_bitrates: 2,
            video_metrics_segment: before.segment_seconds,
            whep: 201,
        },
        "what is reported before the change"
    );
    assert!(before.segment_seconds > 0);

    // Mid-stream: one passthrough variant (no real-time feed would be possible), the lowest latency
    // level, and a real-time variant that does not exist in the new ladder.
    server.set("video/streamoutputvariants", json!([{"name": "source", "videoPassthrough": true}]));
    server.set("video/streamlatencylevel", json!(0));
    server.set("webrtc/variant", json!(5));
    // A simulcast target forwarding variant 1: the new ladder has no variant 1, the running one has.
    server.set(
        "simulcast/targets",
        json!([{"id": "t1", "name": "Nowhere", "url": "rtmp://127.0.0.1:9/live", "streamKey": "k", "enabled": true,
                "variant": 1}]),
    );
    let saved = server.admin_json("/api/admin/serverconfig");
    assert_eq!(saved["videoSettings"]["videoQualityVariants"].as_array().map(Vec::len), Some(1), "settings changed");

    // Poll through the change: every look reports the broadcast being served.
    let until = Instant::now() + Duration::from_secs(12);
    let mut looks = 0;
    while Instant::now() < until {
        let now = reported(&server);
        assert_eq!(now, before, "look {looks}: castd reports a broadcast it is not serving");
        let t = target_status(&server);
        let error = t["lastError"].as_str().unwrap_or_default();
        assert!(!error.contains("does not exist"), "the variant target judged by the new settings: {t}");
        looks += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(looks >= 10, "{looks} looks");
    // The target tried to forward variant 1 of the running broadcast (nothing listens there, so it retries).
    let t = server.wait_for(Duration::from_secs(10), || {
        let t = target_status(&server);
        matches!(t["state"].as_str(), Some("connecting" | "retrying" | "live")).then_some(t)
    });
    assert!(t.is_some(), "the variant target works on the running ladder: {}", target_status(&server));

    // The next broadcast runs the new settings.
    let _ = ffmpeg.kill();
    wait_exit(&mut ffmpeg, Duration::from_secs(5));
    assert!(server.wait_for(Duration::from_secs(30), || (!online(&server)).then_some(())).is_some(), "offline");
    let mut ffmpeg = publish(&server, KEY, "640x360", 60);
    let next = server.wait_for(Duration::from_secs(40), || {
        let cb = server.admin_json("/api/admin/status")["currentBroadcast"].clone();
        (cb["outputSettings"].as_array().map(Vec::len) == Some(1)).then_some(cb)
    });
    let next = next.expect("the next broadcast runs the new ladder");
    assert_eq!(next["outputSettings"][0]["videoPassthrough"], true);
    assert_eq!(next["latencyLevel"]["level"], 0);
    let master = server.wait_for(Duration::from_secs(30), || master_variants(&server).filter(|n| *n == 1));
    assert_eq!(master, Some(1), "its master playlist lists the one variant");
    assert_eq!(whep_status(&server), 503, "no real-time feed from a passthrough-only ladder");
    let _ = ffmpeg.kill();
    wait_exit(&mut ffmpeg, Duration::from_secs(5));
}
