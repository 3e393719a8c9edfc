//! Issue 41: three channels live at once, each published its own way and with its own ladder. Channel
//! `rtmp` gets an RTMP publish (ffmpeg), channel `srt` an SRT publish (ffmpeg's libsrt, MPEG-TS), channel
//! `third` another RTMP publish on its own stream key (WHIP needs a browser publisher: RTMP, SRT and WHIP
//! at once are tests/web/channels-live.test.mjs); each channel's HLS variants probe with ffprobe at that
//! channel's own sizes; stopping one publisher leaves the other two live. The ladders are tiny (the
//! machine has two cores).

mod common;

use std::net::UdpSocket;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::media::{online, publish_to, segments, text};
use common::{Server, Target};
use serde_json::{json, Value};

/// A UDP port nobody uses right now.
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A ladder of transcoded rungs `(width, height)`, tiny and fast.
fn ladder(sizes: &[(u32, u32)]) -> Value {
    Value::Array(
        sizes
            .iter()
            .map(|(w, h)| {
                json!({"name": format!("{h}p"), "scaledWidth": w, "scaledHeight": h, "videoBitrate": 200,
                       "framerate": 15, "cpuUsageLevel": 0, "audioPassthrough": true})
            })
            .collect(),
    )
}

/// ffprobe's (width, height) of the first video stream of the newest segment of variant `v`.
fn probe_variant(t: &Target, v: usize) -> Option<(u64, u64)> {
    let playlist = text(t, &format!("/hls/{v}/stream.m3u8"))?;
    let newest = segments(&playlist).pop()?;
    let mut bytes = Vec::new();
    if let Some(init) =
        playlist.lines().find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\"")).and_then(|rest| rest.split('"').next())
    {
        bytes.extend_from_slice(&t.get(&format!("/hls/{v}/{init}")).bytes().ok()?);
    }
    let seg = t.get(&format!("/hls/{v}/{newest}"));
    if !seg.status().is_success() {
        return None;
    }
    bytes.extend_from_slice(&seg.bytes().ok()?);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "json"])
        .arg(file.path())
        .output()
        .expect("ffprobe");
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let s = &v["streams"][0];
    Some((s["width"].as_u64()?, s["height"].as_u64()?))
}

/// Wait until every variant of `t` probes at its ladder's size.
fn assert_ladder_served(t: &Target, sizes: &[(u32, u32)]) {
    let master = t
        .wait_for(Duration::from_secs(60), || text(t, "/hls/stream.m3u8"))
        .unwrap_or_else(|| panic!("{}: no master playlist; log:\n{}", t.name(), t.log_text()));
    let variants = master.lines().filter(|l| l.starts_with("#EXT-X-STREAM-INF")).count();
    assert_eq!(variants, sizes.len(), "{}: one variant per rung: {master}", t.name());
    for (i, (w, h)) in sizes.iter().enumerate() {
        let got = t.wait_for(Duration::from_secs(60), || probe_variant(t, i));
        assert_eq!(got, Some((*w as u64, *h as u64)), "{}: variant {i} probes at its size", t.name());
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn three_channels_live_at_once_each_with_its_ladder() {
    let srt_port = free_udp_port().to_string();
    let server = Server::start_with_args(&["--srtport", &srt_port]);
    let rtmp_port = server.rtmp_port.expect("rtmp port in the log");
    let srt_port = server.srt_port.expect("srt port in the log");
    let a = server.channel("rtmp");
    let b = server.channel("srt");
    let c = server.channel("third");
    let sizes_a: &[(u32, u32)] = &[(256, 144), (128, 72)];
    let sizes_b: &[(u32, u32)] = &[(192, 108)];
    let sizes_c: &[(u32, u32)] = &[(160, 96), (96, 64)];
    for (t, sizes) in [(&a, sizes_a), (&b, sizes_b), (&c, sizes_c)] {
        t.set("video/streamoutputvariants", ladder(sizes));
        t.set("video/streamlatencylevel", json!(3));
    }
    let (key_a, key_b, key_c) = (a.stream_key(), b.stream_key(), c.stream_key());
    assert!(key_a != key_b && key_b != key_c && key_a != key_c, "stream keys are unique across the server");

    let pub_a = publish_to(&format!("rtmp://127.0.0.1:{rtmp_port}/live/{key_a}"), "flv", "320x180", 180);
    let pub_b = publish_to(&format!("srt://127.0.0.1:{srt_port}?streamid={key_b}"), "mpegts", "320x180", 180);
    let pub_c = publish_to(&format!("rtmp://127.0.0.1:{rtmp_port}/live/{key_c}"), "flv", "320x180", 180);

    for t in [&a, &b, &c] {
        t.wait_for(Duration::from_secs(30), || online(t).then_some(()))
            .unwrap_or_else(|| panic!("{} goes live; log:\n{}", t.name(), t.log_text()));
    }
    // the default channel is not live: each publish went to its key's channel
    assert!(!online(&server.default_channel()), "the default channel stays offline");
    assert_ladder_served(&a, sizes_a);
    assert_ladder_served(&b, sizes_b);
    assert_ladder_served(&c, sizes_c);

    // stopping the SRT publisher ends that channel's stream only
    stop(pub_b);
    b.wait_for(Duration::from_secs(30), || (!online(&b)).then_some(()))
        .unwrap_or_else(|| panic!("srt channel goes offline; log:\n{}", b.log_text()));
    for t in [&a, &c] {
        assert!(online(t), "{} stays live", t.name());
        // and keeps making new segments
        let before = text(t, "/hls/0/stream.m3u8").map(|p| segments(&p)).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(20);
        let moved = loop {
            let now = text(t, "/hls/0/stream.m3u8").map(|p| segments(&p)).unwrap_or_default();
            if now.last() != before.last() && !now.is_empty() {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        assert!(moved, "{}: new segments after another channel stopped", t.name());
    }
    stop(pub_a);
    stop(pub_c);
}
