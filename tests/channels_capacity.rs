//! Channels on one box: capacity and per-channel metrics.
//!
//! Capacity: with `server/maxlivechannels` 2, three channels publish over RTMP (each with its own key):
//! the third publisher is refused in the handshake with the reason (ffmpeg prints it; the same
//! channel's WHIP publisher gets 503 with it, its SRT publisher a handshake reject) and the third
//! channel's health says why; with `server/overcapacity` passthrough it is taken instead and served as
//! passthrough (its master lists one variant at the broadcaster's own size, its health says why). The
//! first two channels keep producing segments at the segment duration (±20 %) the whole time.
//!
//! Metrics: with two channels live, the root's `/api/admin/prometheus` is one valid exposition with
//! both channels' series (each family once, one series per `channel` label), a channel's own only its
//! own; each channel's `/api/admin/status` is its own, and its `/api/admin/hardwarestats` shows the
//! server's series with the channel's health.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::media::{publish, publish_to, text, wait_exit};
use common::sdp::{error_of, whip_offer};
use common::Server;
use serde_json::{json, Value};

/// Latency level 1: 2 s segments (the publishers' keyframe interval).
const SEGMENT_SECS: f64 = 2.0;

/// One small encoded rung (cheap on a shared box) at level 1.
fn ladder() -> Value {
    json!([{"name": "small", "videoPassthrough": false, "scaledWidth": 256, "scaledHeight": 144,
            "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}])
}

/// Create channel `slug` with the small ladder at level 1; returns its stream key.
fn channel(server: &Server, slug: &str) -> String {
    let r = server.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": slug, "name": slug.to_uppercase(), "adminPassword": format!("{slug}-admin-password")}),
    );
    assert_eq!(r.status(), 200, "create {slug}: {}", r.text().unwrap_or_default());
    for (setter, value) in [("video/streamoutputvariants", ladder()), ("video/streamlatencylevel", json!(1))] {
        let r = server.admin_post(&format!("/c/{slug}/api/admin/config/{setter}"), &json!({ "value": value }));
        assert_eq!(r.status(), 200, "{slug} {setter}: {}", r.text().unwrap_or_default());
    }
    server.admin_json(&format!("/c/{slug}/api/admin/serverconfig"))["streamKeys"][0]["key"]
        .as_str()
        .expect("the channel's generated stream key")
        .to_string()
}

fn online(server: &Server, slug: &str) -> bool {
    server.get_json(&format!("/c/{slug}/api/status"))["online"] == true
}

fn health(server: &Server, slug: &str) -> String {
    server.admin_json(&format!("/c/{slug}/api/admin/status"))["health"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Wait until channel `slug` is online and its variant 0 lists a segment.
fn wait_live(server: &Server, slug: &str) {
    let ok = server.wait_for(Duration::from_secs(60), || {
        (online(server, slug)
            && text(server, &format!("/c/{slug}/hls/0/stream.m3u8")).is_some_and(|p| p.contains("#EXTINF")))
        .then_some(())
    });
    assert!(ok.is_some(), "channel {slug} went live; log:\n{}", server.log_text());
}

/// What a variant playlist says: segments made so far (media sequence + listed) and each listed one's
/// duration by name.
fn produced(playlist: &str) -> (u64, Vec<(String, f64)>) {
    let seq = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let mut segs = Vec::new();
    let mut dur = None;
    for l in playlist.lines() {
        if let Some(d) = l.strip_prefix("#EXTINF:") {
            dur = d.trim_end_matches(',').split(',').next().and_then(|d| d.parse::<f64>().ok());
        } else if !l.is_empty() && !l.starts_with('#') {
            segs.push((l.to_string(), dur.take().unwrap_or(0.0)));
        }
    }
    (seq + segs.len() as u64, segs)
}

/// Follows the live channels' variant playlists from another thread: segments made, their durations,
/// and the longest wait for a new one.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<BTreeMap<String, Watched>>,
}

#[derive(Debug, Default)]
struct Watched {
    first: Option<(Instant, u64)>,
    last: Option<(Instant, u64)>,
    longest_wait: Duration,
    durations: BTreeMap<String, f64>,
}

impl Watch {
    fn start(server: &Server, slugs: &[&str]) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let (base, slugs) = (server.base.clone(), slugs.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
            let mut seen: BTreeMap<String, Watched> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                for slug in &slugs {
                    let url = format!("{base}/c/{slug}/hls/0/stream.m3u8");
                    let Some(body) = client.get(&url).send().ok().filter(|r| r.status().is_success()) else {
                        continue;
                    };
                    let (count, segs) = produced(&body.text().unwrap_or_default());
                    let now = Instant::now();
                    let w = seen.entry(slug.clone()).or_default();
                    w.first.get_or_insert((now, count));
                    match w.last {
                        Some((at, n)) if n == count => w.longest_wait = w.longest_wait.max(now - at),
                        _ => w.last = Some((now, count)),
                    }
                    w.durations.extend(segs);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            seen
        });
        Watch { stop, thread }
    }

    /// Stop, and check every watched channel kept making segments at the segment duration.
    fn check(self, slugs: &[&str]) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().expect("the watch thread");
        for slug in slugs {
            let w = seen.get(*slug).unwrap_or_else(|| panic!("{slug} was never seen"));
            let ((t0, n0), (t1, n1)) = (w.first.unwrap(), w.last.unwrap());
            let secs = (t1 - t0).as_secs_f64();
            assert!(secs > 20.0, "{slug}: watched for {secs:.1} s only");
            let rate = (n1 - n0) as f64 / secs;
            let want = 1.0 / SEGMENT_SECS;
            assert!(
                (rate - want).abs() <= want * 0.2,
                "{slug}: {} segments in {secs:.1} s ({rate:.3}/s, want {want:.3}/s ±20 %)",
                n1 - n0
            );
            // Every segment made while watched (the first few of the stream aside) is one segment long.
            let late: Vec<(&String, &f64)> = w.durations.iter().skip(2).collect();
            assert!(late.len() >= 8, "{slug}: {} segments", late.len());
            for (name, d) in &late {
                assert!((*d - SEGMENT_SECS).abs() <= SEGMENT_SECS * 0.2, "{slug}: segment {name} lasts {d} s");
            }
            // No stall: a new segment at least every two segment durations (plus the polling).
            assert!(
                w.longest_wait <= Duration::from_secs_f64(2.0 * SEGMENT_SECS + 0.6),
                "{slug}: waited {:?} for a segment",
                w.longest_wait
            );
        }
    }
}

fn ffmpeg_stderr(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    err
}

#[test]
fn beyond_maxlivechannels_the_third_publisher_is_refused_or_served_as_passthrough() {
    let srt_port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let server = Server::start_with_args(&["--srtport", &srt_port]);
    let keys: Vec<String> = ["a", "b", "c"].iter().map(|s| channel(&server, s)).collect();
    // Server-wide: the root's API sets it, a channel's has no such setter.
    let r = server.admin_post("/c/a/api/admin/config/server/maxlivechannels", &json!({"value": 5}));
    assert_eq!(r.status(), 404, "a server-wide setting on a channel's API");
    server.set("server/maxlivechannels", json!(2));
    let capacity = &server.admin_json("/api/admin/serverconfig")["capacity"];
    assert_eq!(capacity["maxLiveChannels"], 2, "{capacity}");
    assert_eq!(capacity["overCapacity"], "refuse");
    assert!(capacity["transcodeBudgetInForce"].as_u64().unwrap_or(0) > 0, "{capacity}");
    assert!(server.admin_json("/c/a/api/admin/serverconfig").get("capacity").is_none(), "not a channel's");

    let a = publish(&server, &keys[0], "320x240", 120);
    let b = publish(&server, &keys[1], "320x240", 120);
    wait_live(&server, "a");
    wait_live(&server, "b");
    // Let the first segments (the stream's start) pass, then watch the two to the end.
    std::thread::sleep(Duration::from_secs(3));
    let watch = Watch::start(&server, &["a", "b"]);

    // The third is refused in the handshake, with the reason; its channel's health says why.
    let mut c = publish(&server, &keys[2], "320x240", 60);
    let status = wait_exit(&mut c, Duration::from_secs(20));
    assert!(status.is_some_and(|s| !s.success()), "the third publisher was refused: {status:?}");
    let err = ffmpeg_stderr(&mut c);
    assert!(err.contains("over capacity") && err.contains("maxlivechannels"), "the publisher's error: {err}");
    assert!(!online(&server, "c"));
    let message = health(&server, "c");
    assert!(message.contains("refused") && message.contains("maxlivechannels 2"), "c's health: {message}");
    assert!(!health(&server, "a").contains("capacity"), "a's health is its own");
    // Over WHIP: 503 with the reason; over SRT: rejected in the handshake (the reason in castd's log).
    let whip = common::sdp::post(&server, "/c/c/whip", Some(&keys[2]), "application/sdp", whip_offer("H264"));
    let (status, message) = error_of(whip);
    assert_eq!(status, 503, "{message}");
    assert!(message.contains("over capacity") && message.contains("maxlivechannels"), "{message}");
    let port = server.srt_port.expect("the SRT port");
    let mut srt = publish_to(&format!("srt://127.0.0.1:{port}?streamid={}", keys[2]), "mpegts", "320x240", 5);
    let status = wait_exit(&mut srt, Duration::from_secs(30));
    assert!(status.is_some_and(|s| !s.success()), "the SRT publisher was refused: {status:?}");
    let err = ffmpeg_stderr(&mut srt);
    assert!(err.contains("reject"), "refused in the handshake, not timed out: {err}");
    assert!(!online(&server, "c"));

    // Passthrough instead: the third goes live with one variant, the broadcaster's own video.
    server.set("server/overcapacity", json!("passthrough"));
    let mut c = publish(&server, &keys[2], "320x240", 60);
    let master = server.wait_for(Duration::from_secs(60), || {
        text(&server, "/c/c/hls/stream.m3u8").filter(|m| m.contains("#EXT-X-STREAM-INF"))
    });
    let master = master.unwrap_or_else(|| panic!("c's master; log:\n{}", server.log_text()));
    let variants: Vec<&str> = master.lines().filter(|l| l.starts_with("#EXT-X-STREAM-INF")).collect();
    assert_eq!(variants.len(), 1, "one passthrough variant: {master}");
    assert!(variants[0].contains("RESOLUTION=320x240"), "the broadcaster's own size, not the 256x144 rung: {master}");
    assert!(online(&server, "c"));
    let message = health(&server, "c");
    assert!(message.contains("passthrough") && message.contains("maxlivechannels"), "c's health: {message}");
    let encoders = server.admin_json("/c/c/api/admin/status")["currentBroadcast"].clone();
    assert!(encoders.to_string().contains("copy"), "nothing is encoded: {encoders}");
    let a_master = text(&server, "/c/a/hls/stream.m3u8").unwrap_or_default();
    assert!(a_master.contains("RESOLUTION=256x144"), "a keeps its ladder: {a_master}");

    // Over 20 s of the first two, through the refusal and the passthrough broadcast.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(22) && online(&server, "c") {
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = c.kill();
    wait_exit(&mut c, Duration::from_secs(5));
    watch.check(&["a", "b"]);
    let cleared = server.wait_for(Duration::from_secs(30), || (!online(&server, "c")).then(|| health(&server, "c")));
    assert!(cleared.is_some_and(|m| !m.contains("passthrough")), "the notice goes with the broadcast");
    for mut p in [a, b] {
        let _ = p.kill();
        wait_exit(&mut p, Duration::from_secs(5));
    }
}

/// The samples of the scrape, by metric name, each with its labels.
fn samples(text: &str) -> Vec<prometheus_parse::Sample> {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("a valid exposition").samples
}

fn value(s: &prometheus_parse::Sample) -> f64 {
    match s.value {
        prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => f64::NAN,
    }
}

#[test]
fn prometheus_series_carry_their_channel_and_each_channel_has_its_own_status() {
    let server = Server::start();
    let keys: Vec<String> = ["one", "two"].iter().map(|s| channel(&server, s)).collect();
    let mut one = publish(&server, &keys[0], "320x240", 90);
    let mut two = publish(&server, &keys[1], "320x240", 90);
    wait_live(&server, "one");
    wait_live(&server, "two");
    // The test's own playlist polls (`wait_live`, from 127.0.0.1) are a viewer of each channel; one more
    // viewer, of channel two only.
    let r = server.client.get(server.url("/c/two/api/ping")).header("x-forwarded-for", "203.0.113.9").send();
    assert!(r.is_ok_and(|r| r.status().is_success()));

    // The root: one valid exposition, each family once, one series per channel.
    let root = server
        .wait_for(Duration::from_secs(30), || {
            let t = server.admin_get("/api/admin/prometheus").text().unwrap_or_default();
            (t.contains("castd_encode_speed{channel=\"one\"") && t.contains("castd_encode_speed{channel=\"two\""))
                .then_some(t)
        })
        .unwrap_or_else(|| {
            panic!("both channels' encoders: {}", server.admin_get("/api/admin/prometheus").text().unwrap_or_default())
        });
    for line in root.lines().filter(|l| l.starts_with("# HELP ")) {
        assert_eq!(root.lines().filter(|l| l == &line).count(), 1, "{line} once:\n{root}");
    }
    assert!(root.trim_end().ends_with("# EOF") && root.matches("# EOF").count() == 1);
    let scrape = samples(&root);
    let viewers: BTreeMap<String, f64> = scrape
        .iter()
        .filter(|s| s.metric == "owncast_instance_active_viewer_count")
        .map(|s| (s.labels.get("channel").unwrap_or_default().to_string(), value(s)))
        .collect();
    let want: BTreeMap<String, f64> =
        [("default", 0.0), ("one", 1.0), ("two", 2.0)].iter().map(|(c, v)| (c.to_string(), *v)).collect();
    assert_eq!(viewers, want, "one viewer series per channel:\n{root}");
    let cpu: Vec<_> = scrape.iter().filter(|s| s.metric == "owncast_instance_cpu_usage").collect();
    assert_eq!(cpu.len(), 1, "the CPU is the server's");
    assert!(cpu[0].labels.get("channel").is_none());
    let kbps: Vec<&str> = scrape
        .iter()
        .filter(|s| s.metric == "castd_ingest_bitrate_kbps")
        .filter_map(|s| s.labels.get("channel"))
        .collect();
    assert_eq!(kbps, ["default", "one", "two"]);

    // A channel's own: its series only, no server-wide ones.
    let own = server.admin_get("/c/two/api/admin/prometheus").text().unwrap_or_default();
    let own_samples = samples(&own);
    assert!(!own_samples.is_empty());
    assert!(own_samples.iter().all(|s| s.labels.get("channel") == Some("two")), "only channel two's:\n{own}");
    assert!(!own.contains("owncast_instance_cpu_usage"), "{own}");
    let r =
        server.client.get(server.url("/c/one/api/admin/prometheus")).basic_auth("admin", Some("two-admin-password"));
    assert_eq!(r.send().unwrap().status(), 401, "another channel's admin");
    let r =
        server.client.get(server.url("/c/two/api/admin/prometheus")).basic_auth("admin", Some("two-admin-password"));
    assert_eq!(r.send().unwrap().status(), 200, "the channel's admin");

    // Each channel's admin status is its own.
    let _ = one.kill();
    wait_exit(&mut one, Duration::from_secs(5));
    let offline = server.wait_for(Duration::from_secs(30), || (!online(&server, "one")).then_some(()));
    assert!(offline.is_some());
    let status = |slug: &str| server.admin_json(&format!("/c/{slug}/api/admin/status"));
    assert_eq!(status("one")["online"], false);
    assert_eq!(status("two")["online"], true);
    assert_eq!(server.admin_json("/api/admin/status")["online"], false, "the default channel");
    assert!(status("two")["broadcaster"].is_object(), "{}", status("two"));
    assert!(status("one")["broadcaster"].is_null(), "{}", status("one"));

    // Hardware stats: the server's series on the root and, with the channel's health, on a channel.
    let root_hw = server.admin_json("/api/admin/hardwarestats");
    let r =
        server.client.get(server.url("/c/two/api/admin/hardwarestats")).basic_auth("admin", Some("two-admin-password"));
    let r = r.send().unwrap();
    assert_eq!(r.status(), 200);
    let hw: Value = r.json().unwrap();
    assert!(hw["cpu"].is_array() && hw["memory"].is_array(), "{hw}");
    assert!(root_hw["cpu"].is_array());
    assert_eq!(hw["message"], status("two")["health"]["message"], "the channel's health");
    let _ = two.kill();
    wait_exit(&mut two, Duration::from_secs(5));
}
