//! Object storage against a real S3 server (s3s-fs on loopback, SigV4 checked): the admin "Test
//! connection" route, and a live stream offloaded to the bucket: objects with their content types and
//! cache policies, castd's playlists naming the bucket URLs, expired segments and leftovers deleted,
//! the store killed and restarted mid-stream (castd falls back to local serving and recovers on its
//! own), wrong credentials mid-stream (a clear health message, local serving continues).

mod common;

use std::time::Duration;

use common::media::{publish, wait_exit};
use common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
use common::Server;
use serde_json::{json, Value};

const KEY: &str = "storage-test-stream-key";
const PREFIX: &str = "live";

fn s3_settings(s3: &S3Server, secret: &str) -> Value {
    json!({
        "enabled": true,
        "endpoint": s3.endpoint(),
        "accessKey": ACCESS_KEY,
        "secret": secret,
        "bucket": BUCKET,
        "region": "us-east-1",
        "acl": "public-read",
        "pathPrefix": format!("/{PREFIX}/"),
        "forcePathStyle": true,
    })
}

fn text(server: &Server, path: &str) -> Option<String> {
    let r = server.get(path);
    r.status().is_success().then(|| r.text().unwrap_or_default())
}

fn uris(playlist: &str) -> Vec<String> {
    playlist.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect()
}

fn health_message(server: &Server) -> String {
    server.admin_json("/api/admin/status")["health"]["message"].as_str().unwrap_or_default().to_string()
}

fn test_connection(server: &Server, body: &Value) -> (u16, Value) {
    let r = server.admin_post("/api/admin/storage/test", body);
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

/// A Prometheus counter or gauge value (0 when absent).
fn prom(server: &Server, name: &str) -> f64 {
    let t = server.admin_get("/api/admin/prometheus").text().unwrap_or_default();
    t.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0.0)
}

#[test]
fn test_connection_reports_the_stores_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(dir.path());
    let server = Server::start();
    // Nothing saved and no body: a clear 400, not a 500.
    let (status, body) = test_connection(&server, &json!(null));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["success"], false);

    let (status, body) = test_connection(&server, &s3_settings(&s3, SECRET_KEY));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    assert!(body["message"].as_str().unwrap().contains("PUT, GET and DELETE"), "{body}");
    // The probe is gone again.
    let public = s3.public();
    assert!(public.list(&server.client, PREFIX).is_empty());

    let (status, body) = test_connection(&server, &s3_settings(&s3, "not-the-secret"));
    assert_eq!(status, 400, "{body}");
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(msg.contains("PUT") && msg.contains("403") && msg.contains("Signature"), "the store's own words: {msg}");
    assert!(!msg.contains("not-the-secret") && !msg.contains("X-Amz-Credential"), "no credentials: {msg}");

    // Saved settings with the masked secret test the saved secret.
    server.set("s3", s3_settings(&s3, SECRET_KEY));
    let config = server.admin_json("/api/admin/serverconfig");
    assert_ne!(config["s3"]["secret"], SECRET_KEY, "the secret is masked in the admin config");
    let masked = json!({ "value": config["s3"] });
    let (status, body) = test_connection(&server, &masked);
    assert_eq!(status, 200, "{body}");
    let public_config = server.get_json("/api/config").to_string();
    assert!(!public_config.contains(SECRET_KEY) && !public_config.contains(ACCESS_KEY));

    // A store that is down: the transport error, quickly.
    drop(public);
    let mut s3 = s3;
    s3.kill();
    let (status, body) = test_connection(&server, &json!({}));
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("cannot reach the storage"), "{body}");
    assert!(!server.log_text().contains(SECRET_KEY), "the secret is never logged");
}

#[test]
fn a_live_stream_is_offloaded_and_survives_the_store_failing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s3 = S3Server::start(dir.path());
    let public = s3.public();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    // A leftover of an earlier run under the prefix.
    let leftover = dir.path().join(BUCKET).join(PREFIX).join("hls/7");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("stream-old-1.ts"), b"old").unwrap();
    assert_eq!(public.list(&client, PREFIX).len(), 1);

    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set(
        "video/streamoutputvariants",
        json!([{"name": "low", "scaledWidth": 320, "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    server.set("video/streamlatencylevel", json!(1));
    server.set("s3", s3_settings(&s3, SECRET_KEY));
    server
        .wait_for(Duration::from_secs(10), || public.list(&client, PREFIX).is_empty().then_some(()))
        .expect("leftovers under the prefix are removed");

    let mut ff = publish(&server, KEY, "640x360", 75);
    let bucket_base = format!("{}/{BUCKET}/{PREFIX}/hls/0/", s3.endpoint());
    // castd's playlist names the segments by their bucket URL.
    let playlist = server
        .wait_for(Duration::from_secs(30), || {
            text(&server, "/hls/0/stream.m3u8").filter(|p| uris(p).len() >= 2 && uris(p)[0].starts_with(&bucket_base))
        })
        .unwrap_or_else(|| panic!("no playlist naming the bucket; log:\n{}", server.log_text()));
    assert!(uris(&playlist).iter().all(|u| u.starts_with(&bucket_base)), "{playlist}");

    // Every named object is in the bucket with its content type and cache policy.
    let public_base = format!("{}/{BUCKET}/{PREFIX}/hls/", public.endpoint());
    let seg = uris(&playlist)[0].rsplit('/').next().unwrap().to_string();
    let r = client.get(format!("{public_base}0/{seg}")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "video/mp2t");
    assert!(r.headers()["cache-control"].to_str().unwrap().contains("immutable"));
    assert!(r.bytes().unwrap().starts_with(&[0x47]), "an MPEG-TS segment");
    for path in ["stream.m3u8", "0/stream.m3u8"] {
        let r = client.get(format!("{public_base}{path}")).send().unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], "application/x-mpegURL", "{path}");
        assert_eq!(r.headers()["cache-control"], "public, max-age=1", "{path}: a cache keeps it a second");
        let body = r.text().unwrap();
        // The bucket's copies keep relative URIs: they play from the bucket (or a CDN) alone.
        assert!(!body.contains("http://"), "{path}: {body}");
    }
    // The playlist only ever names uploaded segments (segments go first).
    let bucket_playlist = client.get(format!("{public_base}0/stream.m3u8")).send().unwrap().text().unwrap();
    let keys = public.list(&client, PREFIX);
    for s in uris(&bucket_playlist) {
        assert!(keys.contains(&format!("{PREFIX}/hls/0/{s}")), "{s} listed before upload: {keys:?}");
    }

    // The store dies: castd keeps serving, from itself, and says so.
    s3.kill();
    let local = server
        .wait_for(Duration::from_secs(15), || {
            text(&server, "/hls/0/stream.m3u8").filter(|p| uris(p).iter().any(|u| !u.starts_with("http")))
        })
        .unwrap_or_else(|| panic!("no local fallback; log:\n{}", server.log_text()));
    let local_seg = uris(&local).into_iter().rfind(|u| !u.starts_with("http")).unwrap();
    let r = server.get(&format!("/hls/0/{local_seg}"));
    assert_eq!(r.status(), 200, "the segment castd names is served locally");
    let msg = server
        .wait_for(Duration::from_secs(20), || Some(health_message(&server)).filter(|m| m.contains("Object storage")))
        .expect("health names the storage");
    assert!(msg.contains("cannot reach"), "{msg}");
    assert!(prom(&server, "castd_storage_failures_total") >= 1.0);

    // It comes back: castd catches up without a restart.
    s3.restart();
    let after = server
        .wait_for(Duration::from_secs(30), || {
            text(&server, "/hls/0/stream.m3u8")
                .filter(|p| uris(p).iter().all(|u| u.starts_with(&bucket_base)) && !p.contains(&local_seg))
        })
        .unwrap_or_else(|| panic!("no recovery; log:\n{}", server.log_text()));
    assert!(!uris(&after).is_empty());
    server
        .wait_for(Duration::from_secs(10), || (!health_message(&server).contains("Object storage")).then_some(()))
        .expect("the storage notice clears");

    // Only the live window (and one revision of grace) stays in the bucket, after segments expired.
    std::thread::sleep(Duration::from_secs(3));
    let bucket_playlist = client.get(format!("{public_base}0/stream.m3u8")).send().unwrap().text().unwrap();
    let window = uris(&bucket_playlist);
    let segs: Vec<String> = public.list(&client, PREFIX).into_iter().filter(|k| k.ends_with(".ts")).collect();
    assert!(!segs.contains(&format!("{PREFIX}/hls/0/{seg}")), "the first segment expired: {segs:?}");
    let extra: Vec<&String> = segs.iter().filter(|k| !window.iter().any(|w| k.ends_with(&format!("/{w}")))).collect();
    assert!(extra.len() <= 3, "segments outside the window: {extra:?} (window {window:?})");
    assert!(segs.len() <= window.len() + 3, "{} segments for a window of {}", segs.len(), window.len());
    assert!(prom(&server, "castd_storage_uploads_total") >= 5.0);
    assert!(prom(&server, "castd_storage_deletes_total") >= 1.0);
    let t = server.admin_get("/api/admin/prometheus").text().unwrap();
    assert!(t.contains("castd_storage_upload_latency_seconds_count"), "{t}");
    assert!(t.contains("castd_storage_queue_depth"), "{t}");

    // Wrong credentials mid-stream: a clear health message, and viewers get castd's own playlist.
    server.set("s3", s3_settings(&s3, "a-wrong-secret"));
    let msg = server
        .wait_for(Duration::from_secs(15), || Some(health_message(&server)).filter(|m| m.contains("Object storage")))
        .unwrap_or_else(|| panic!("health: {}; log:\n{}", health_message(&server), server.log_text()));
    assert!(msg.contains("403") && msg.contains("Signature"), "{msg}");
    server
        .wait_for(Duration::from_secs(10), || {
            text(&server, "/hls/0/stream.m3u8").filter(|p| uris(p).iter().all(|u| !u.starts_with("http")))
        })
        .expect("local serving continues");
    assert!(!server.log_text().contains(SECRET_KEY) && !server.log_text().contains("a-wrong-secret"));
    let _ = ff.kill();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
}
