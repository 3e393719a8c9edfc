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

/// ffprobe's stream types of `url` (`video`, `audio`), as a player reading it would find them.
fn probe_streams(url: &str) -> Vec<String> {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-rw_timeout", "10000000", "-show_entries", "stream=codec_type", "-of", "csv=p=0"])
        .arg(url)
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).lines().map(|l| l.trim().to_string()).collect()).unwrap_or_default()
}

/// Issue 53: every channel's live HLS goes to the bucket, each channel under its own folder
/// (`<prefix>c/{slug}/hls/`, the default channel's where it always was, `<prefix>hls/`): the leftover
/// clean-up of each removes only its own; a channel's playlist served by castd names the bucket (the
/// `videoServingEndpoint`) and ffprobe plays it from there while the default channel is live too, each
/// channel's objects apart and counted in the server's figures; a private channel uploads nothing and its
/// playlists never name the bucket; a deleted channel's live objects leave the bucket; a channel's API
/// cannot change the storage settings.
#[test]
fn every_channel_is_offloaded_under_its_own_folder() {
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(dir.path());
    let public = s3.public();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    // Leftovers of an earlier run: the default channel's, channel c1's, and those of a channel that is
    // not open (no clean-up may touch another channel's folder).
    let root = dir.path().join(BUCKET).join(PREFIX);
    for (folder, file) in [("hls/7", "stream-old-1.ts"), ("c/c1/hls/7", "old-c1.ts"), ("c/c10/hls/7", "old-c10.ts")] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
        std::fs::write(root.join(folder).join(file), b"old").unwrap();
    }
    assert_eq!(public.list(&client, PREFIX).len(), 3);

    let server = Server::start_with_args(&["--streamkey", KEY]);
    let ladder = json!([{"name": "low", "scaledWidth": 320, "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}]);
    let (default, channel) = (server.default_channel(), server.channel("c1"));
    for t in [&default, &channel] {
        t.set("video/streamoutputvariants", ladder.clone());
        t.set("video/streamlatencylevel", json!(1));
    }
    // The storage settings are the server admin's: a channel's API has no setter for them.
    let r = channel.admin_post("/api/admin/config/s3", &json!({"value": s3_settings(&s3, SECRET_KEY)}));
    assert!(matches!(r.status().as_u16(), 403 | 404), "a channel cannot set s3: {}", r.status());
    server.set("s3", s3_settings(&s3, SECRET_KEY));
    // Players read the bucket through the anonymous instance.
    server.set("videoservingendpoint", json!(format!("{}/{BUCKET}", public.endpoint())));
    let other = format!("{PREFIX}/c/c10/hls/7/old-c10.ts");
    server
        .wait_for(Duration::from_secs(10), || (public.list(&client, PREFIX) == [other.clone()]).then_some(()))
        .unwrap_or_else(|| panic!("each channel's leftovers, and only those: {:?}", public.list(&client, PREFIX)));

    // The server's figures count every channel's objects (the leftovers: one of each channel).
    assert!(prom(&server, "castd_storage_deletes_total") >= 2.0, "both clean-ups are counted");
    let mut ff_channel = publish(&server, &channel.stream_key(), "640x360", 60);
    let bucket = format!("{}/{BUCKET}/{PREFIX}", public.endpoint());
    let served = |t: &common::Target, folder: &str| {
        let base = format!("{bucket}/{folder}hls/0/");
        t.wait_for(Duration::from_secs(40), || {
            text(&server, &t.path("/hls/0/stream.m3u8"))
                .filter(|p| uris(p).len() >= 2 && uris(p).iter().all(|u| u.starts_with(&base)))
        })
        .unwrap_or_else(|| panic!("{}: no playlist naming {base}; log:\n{}", t.name(), server.log_text()))
    };
    let channel_playlist = served(&channel, "c/c1/");
    // (The default channel is not live yet: these are the channel's.)
    assert!(prom(&server, "castd_storage_uploads_total") >= 3.0, "the channel's uploads are counted");
    // Both live at once.
    let mut ff_default = publish(&server, KEY, "640x360", 60);
    let default_playlist = served(&default, "");
    // Each channel's objects are in its own folder; none is in the other's.
    let keys = public.list(&client, PREFIX);
    let in_folder = |folder: &str| -> Vec<String> {
        keys.iter().filter_map(|k| k.strip_prefix(&format!("{PREFIX}/{folder}"))).map(str::to_string).collect()
    };
    let (channel_keys, default_keys) = (in_folder("c/c1/hls/"), in_folder("hls/"));
    for (playlist, own, theirs) in
        [(&channel_playlist, &channel_keys, &default_keys), (&default_playlist, &default_keys, &channel_keys)]
    {
        for u in uris(playlist) {
            let name = u.rsplit('/').next().unwrap();
            assert!(own.contains(&format!("0/{name}")), "{name} is in its channel's folder: {keys:?}");
            assert!(!theirs.contains(&format!("0/{name}")), "{name} is not in the other's: {keys:?}");
        }
    }
    assert!(channel_keys.contains(&"stream.m3u8".to_string()) && channel_keys.contains(&"0/stream.m3u8".to_string()));
    // The channel's stream plays from the bucket: castd's master, its variant naming bucket segments.
    let streams = probe_streams(&server.url("/c/c1/hls/stream.m3u8"));
    assert!(streams.iter().any(|s| s == "video"), "ffprobe plays the channel's stream: {streams:?}");
    let seg = uris(&channel_playlist)[0].clone();
    let r = client.get(&seg).send().unwrap();
    assert_eq!(r.status(), 200, "{seg}");
    assert_eq!(r.headers()["content-type"], "video/mp2t");
    let _ = ff_default.kill();
    let _ = ff_channel.kill();
    let _ = wait_exit(&mut ff_default, Duration::from_secs(5));
    let _ = wait_exit(&mut ff_channel, Duration::from_secs(5));

    // A private channel uploads nothing, and its playlists name castd's own segments.
    let private = server.channel("p1");
    private.set("video/streamoutputvariants", ladder);
    private.set("video/streamlatencylevel", json!(1));
    let r = private.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "p1 friends", "comment": ""}));
    assert_eq!(r.status().as_u16(), 200);
    private.set("visibility", json!("password"));
    let r = private.post_json("/api/viewer/unlock", &json!({"password": "p1 friends"}));
    let pass = r.json::<Value>().unwrap()["pass"].as_str().expect("a pass").to_string();
    let mut ff_private = publish(&server, &private.stream_key(), "640x360", 60);
    let playlist = private
        .wait_for(Duration::from_secs(40), || {
            text(&server, &private.path(&format!("/hls/0/stream.m3u8?pass={pass}"))).filter(|p| uris(p).len() >= 3)
        })
        .unwrap_or_else(|| panic!("the private channel is live; log:\n{}", server.log_text()));
    assert!(!playlist.contains(&public.endpoint()) && !playlist.contains(BUCKET), "{playlist}");
    // (By now a public channel's first segments and playlist are in the bucket.)
    let mut ff_public = publish(&server, &channel.stream_key(), "640x360", 60);
    served(&channel, "c/c1/");
    let keys = public.list(&client, &format!("{PREFIX}/c/p1/"));
    assert!(keys.is_empty(), "a private channel uploads nothing: {keys:?}");
    let _ = ff_private.kill();
    let _ = ff_public.kill();
    let _ = wait_exit(&mut ff_private, Duration::from_secs(5));
    let _ = wait_exit(&mut ff_public, Duration::from_secs(5));

    // Deleting channel c1 (offline) removes its live objects; its replays' stay with its files (moved
    // aside, restorable); the default's and c10's stay.
    channel
        .wait_for(Duration::from_secs(20), || (!common::media::online(&channel)).then_some(()))
        .expect("c1 goes offline");
    assert!(!public.list(&client, &format!("{PREFIX}/c/c1/hls/")).is_empty());
    let delete = |slug: &str, purge: bool| {
        // (Refused with 409 until the media plane has let go of its broadcast.)
        server
            .wait_for(Duration::from_secs(20), || {
                let r = server.admin_post("/api/admin/channels/delete", &json!({"slug": slug, "purge": purge}));
                (r.status().as_u16() != 409)
                    .then(|| assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default()))
            })
            .unwrap_or_else(|| panic!("{slug} is deleted"))
    };
    delete("c1", false);
    let left = public.list(&client, &format!("{PREFIX}/c/c1/hls/"));
    assert!(left.is_empty(), "a deleted channel's live objects leave the bucket: {left:?}");
    let replays = public.list(&client, &format!("{PREFIX}/c/c1/replays/"));
    assert!(!replays.is_empty(), "its replays stay with its files");
    assert!(public.list(&client, &other).contains(&other));
    assert!(!public.list(&client, &format!("{PREFIX}/hls/")).is_empty(), "the default channel's stay");
    // A channel deleted with its files (purge): every object of its folder goes (its replays' too:
    // nothing names them any more), and only its folder's.
    let c2 = root.join("c/c2/replays/x/0");
    std::fs::create_dir_all(&c2).unwrap();
    std::fs::write(c2.join("a.ts"), b"c2's replay").unwrap();
    server.channel("c2");
    delete("c2", true);
    server
        .wait_for(Duration::from_secs(10), || public.list(&client, &format!("{PREFIX}/c/c2/")).is_empty().then_some(()))
        .unwrap_or_else(|| panic!("the purged channel's objects: {:?}", public.list(&client, PREFIX)));
    let kept = public.list(&client, &format!("{PREFIX}/c/c1/replays/"));
    assert!(replays.iter().all(|k| kept.contains(k)), "not another channel's: {kept:?}");
    assert!(public.list(&client, &other).contains(&other));
}

/// Issue 53: at shutdown (SIGTERM) a channel's uploader uploads its stream's last segments and final
/// playlist (`ChannelStorage::drain`): the bucket copy ends with `#EXT-X-ENDLIST` and names only
/// segments that are in the bucket.
#[test]
fn a_channels_last_segments_are_uploaded_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(dir.path());
    let public = s3.public();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let mut server = Server::start();
    let channel = server.channel("c1");
    channel.set(
        "video/streamoutputvariants",
        json!([{"name": "low", "scaledWidth": 320, "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    channel.set("video/streamlatencylevel", json!(1));
    let key = channel.stream_key();
    drop(channel);
    server.set("s3", s3_settings(&s3, SECRET_KEY));
    let mut ff = publish(&server, &key, "640x360", 60);
    let base = format!("{}/{BUCKET}/{PREFIX}/c/c1/hls/0/", s3.endpoint());
    server
        .wait_for(Duration::from_secs(40), || {
            text(&server, "/c/c1/hls/0/stream.m3u8").filter(|p| uris(p).len() >= 2 && uris(p)[0].starts_with(&base))
        })
        .unwrap_or_else(|| panic!("the channel's playlist names the bucket; log:\n{}", server.log_text()));
    assert_eq!(server.stop(), Some(0));
    let _ = ff.kill();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
    let url = format!("{}/{BUCKET}/{PREFIX}/c/c1/hls/0/stream.m3u8", public.endpoint());
    let last = client.get(url).send().unwrap().text().unwrap();
    assert!(last.contains("#EXT-X-ENDLIST"), "the final playlist is in the bucket: {last}");
    let keys = public.list(&client, &format!("{PREFIX}/c/c1/hls/0/"));
    for s in uris(&last) {
        assert!(keys.contains(&format!("{PREFIX}/c/c1/hls/0/{s}")), "{s} is in the bucket: {keys:?}");
    }
}
