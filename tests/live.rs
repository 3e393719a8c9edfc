//! The live pipeline end to end: the ffmpeg CLI publishes RTMP to the real daemon, which transcodes
//! to HLS; ffprobe checks the output. Live tests run one at a time (the machine has two cores).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::media::{online, publish, segments, text, wait_exit};
use common::Server;
use serde_json::{json, Value};

static LIVE: Mutex<()> = Mutex::new(());

const KEY: &str = "test-stream-key-1";

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn configure(server: &Server, variants: Value) {
    server.set("video/streamoutputvariants", variants);
    server.set("video/streamlatencylevel", json!(0));
}

/// ffprobe's (codec, width, height) of the first video stream of a segment fetched over HTTP (after its
/// playlist's `EXT-X-MAP` init segment, for fMP4 segments: level 0 is LL-HLS).
fn probe_segment(server: &Server, path: &str) -> (String, u64, u64) {
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let playlist = text(server, &format!("{dir}/stream.m3u8")).unwrap_or_default();
    let init = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\""))
        .and_then(|rest| rest.split('"').next())
        .map(|name| server.get(&format!("{dir}/{name}")).bytes().expect("init segment").to_vec());
    let mut bytes = init.unwrap_or_default();
    bytes.extend_from_slice(&server.get(path).bytes().expect("segment body"));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=codec_name,width,height",
            "-of",
            "json",
        ])
        .arg(file.path())
        .output()
        .expect("ffprobe");
    let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    let s = &v["streams"][0];
    (
        s["codec_name"].as_str().unwrap_or_default().to_string(),
        s["width"].as_u64().unwrap_or(0),
        s["height"].as_u64().unwrap_or(0),
    )
}

#[test]
fn publish_transcode_serve_and_go_offline() {
    let _g = lock();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    configure(
        &server,
        json!([
            {"name": "720p", "videoBitrate": 1200, "framerate": 30, "cpuUsageLevel": 0, "audioPassthrough": true},
            {"name": "360p", "scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 500, "framerate": 30,
             "cpuUsageLevel": 0, "audioPassthrough": true}
        ]),
    );

    // A wrong key is refused (the client fails) and the stream never goes online.
    let mut bad = publish(&server, "not-the-key", "320x240", 3);
    let status = wait_exit(&mut bad, Duration::from_secs(20)).expect("the refused client exits");
    assert!(!status.success(), "a publish with a wrong key must fail");
    assert!(!online(&server), "a wrong key must not go online");
    assert!(server.log_text().contains("invalid stream key"));

    let started = Instant::now();
    let mut ff = publish(&server, KEY, "1280x720", 30);
    let master = server
        .wait_for(Duration::from_secs(15), || {
            let m = text(&server, "/hls/stream.m3u8")?;
            (online(&server) && m.contains("0/stream.m3u8") && m.contains("1/stream.m3u8")).then_some(m)
        })
        .unwrap_or_else(|| panic!("not online with both variants within 15 s; log:\n{}", server.log_text()));
    eprintln!("publish to playable master: {:?}", started.elapsed());
    assert!(master.contains("RESOLUTION=1280x720"), "{master}");
    assert!(master.contains("RESOLUTION=640x360"), "{master}");
    assert!(master.contains("BANDWIDTH=") && master.contains("CODECS=\"avc1.") && master.contains("FRAME-RATE=30"));

    // Each variant playlist gets at least two segments.
    for n in 0..2 {
        let path = format!("/hls/{n}/stream.m3u8");
        server
            .wait_for(Duration::from_secs(20), || text(&server, &path).filter(|p| segments(p).len() >= 2))
            .unwrap_or_else(|| panic!("variant {n} has fewer than 2 segments"));
    }
    // Newest segment of each variant: h264 at 720 and 360 lines.
    for (n, height) in [(0, 720), (1, 360)] {
        let playlist = text(&server, &format!("/hls/{n}/stream.m3u8")).unwrap();
        let newest = segments(&playlist).last().cloned().unwrap();
        let (codec, _w, h) = probe_segment(&server, &format!("/hls/{n}/{newest}"));
        assert_eq!(codec, "h264", "variant {n}");
        assert_eq!(h, height, "variant {n}");
    }

    // Owncast's serving rules.
    let r = server.get("/hls/0/stream.m3u8");
    assert_eq!(r.headers()["content-type"], "application/x-mpegURL");
    // Behind a shared cache (nginx, a CDN, a castd edge): playlists a second, segments for good.
    assert_eq!(r.headers()["cache-control"], "public, max-age=1");
    assert!(!r.headers().contains_key("vary"), "nothing to vary on");
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    let seg = segments(&r.text().unwrap()).last().cloned().unwrap();
    let r = server.get(&format!("/hls/0/{seg}"));
    assert!(r.status().is_success());
    assert_eq!(r.headers()["cache-control"], "public, max-age=31536000, immutable");
    assert!(!r.headers().contains_key("vary"));
    let master = server.get("/hls/stream.m3u8");
    assert_eq!(master.headers()["cache-control"], "public, max-age=1");
    for bad in
        ["/hls/../castd.db", "/hls/%2e%2e/castd.db", "/hls/0/..%2F..%2Fcastd.db", "/hls/castd.db", "/hls/0/x.txt"]
    {
        assert_eq!(server.get(bad).status(), 404, "{bad}");
    }

    // The thumbnail appears as soon as there is a segment.
    let jpeg = server
        .wait_for(Duration::from_secs(15), || {
            let r = server.get("/thumbnail.jpg");
            r.status().is_success().then(|| r.bytes().unwrap().to_vec())
        })
        .expect("thumbnail.jpg");
    assert_eq!(&jpeg[..2], &[0xFF, 0xD8], "a JPEG");
    let gif = server.get("/preview.gif").bytes().unwrap();
    assert_eq!(&gif[..3], b"GIF");

    // Admin status shows the broadcaster and the transcoder.
    let st = server.admin_json("/api/admin/status");
    let details = &st["broadcaster"]["streamDetails"];
    assert_eq!(details["width"], 1280, "{st}");
    assert_eq!(details["height"], 720, "{st}");
    assert_eq!(details["videoCodec"], "H.264");
    assert!(st["broadcaster"]["remoteAddr"].as_str().unwrap().starts_with("127.0.0.1"));
    assert!(st["currentBroadcast"]["workerPid"].as_u64().is_some());

    // A second publisher while one is live is refused.
    let mut second = publish(&server, KEY, "320x240", 3);
    let status = wait_exit(&mut second, Duration::from_secs(20)).expect("the second publisher exits");
    assert!(!status.success(), "a second publisher must be refused");
    assert!(online(&server));

    // After the publisher stops, the stream goes offline within 30 s and playlists end.
    wait_exit(&mut ff, Duration::from_secs(60)).expect("ffmpeg finishes");
    server
        .wait_for(Duration::from_secs(30), || (!online(&server)).then_some(()))
        .expect("offline within 30 s after the publisher stopped");
    let status = server.get_json("/api/status");
    assert!(status["lastDisconnectTime"].is_string(), "{status}");
    for n in 0..2 {
        let p = text(&server, &format!("/hls/{n}/stream.m3u8")).unwrap();
        assert!(p.trim_end().ends_with("#EXT-X-ENDLIST"), "variant {n}: {p}");
    }
    assert_eq!(server.admin_get("/api/admin/disconnect").status(), 400, "nothing to disconnect");
}

#[test]
fn killed_worker_is_restarted_and_segments_keep_coming() {
    let _g = lock();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    configure(
        &server,
        json!([{"name": "low", "scaledWidth": 320, "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    let mut ff = publish(&server, KEY, "640x360", 40);
    server
        .wait_for(Duration::from_secs(20), || text(&server, "/hls/0/stream.m3u8").filter(|p| segments(p).len() >= 2))
        .unwrap_or_else(|| panic!("no segments; log:\n{}", server.log_text()));
    let pid = server.admin_json("/api/admin/status")["currentBroadcast"]["workerPid"].as_u64().expect("worker pid");
    common::unsafe_kill(pid as u32, 9);
    let before = segments(&text(&server, "/hls/0/stream.m3u8").unwrap());

    let new_pid = server
        .wait_for(Duration::from_secs(20), || {
            let p = server.admin_json("/api/admin/status")["currentBroadcast"]["workerPid"].as_u64()?;
            (p != pid).then_some(p)
        })
        .expect("a new worker");
    assert_ne!(new_pid, pid);
    // New segments (from the new worker) appear after a discontinuity, and the old ones stay listed.
    let after = server
        .wait_for(Duration::from_secs(25), || {
            let p = text(&server, "/hls/0/stream.m3u8")?;
            let segs = segments(&p);
            let fresh = segs.iter().filter(|s| !before.contains(s)).count();
            (fresh >= 2 && p.contains("#EXT-X-DISCONTINUITY")).then_some(p)
        })
        .unwrap_or_else(|| panic!("segments stopped after the worker was killed; log:\n{}", server.log_text()));
    assert!(segments(&after).contains(&before[0]), "old segments stay listed: {after}");
    assert!(online(&server));
    assert!(server.log_text().contains("restarting"), "the restart and its reason are logged");

    // The admin can drop the broadcaster.
    let r = server.admin_get("/api/admin/disconnect");
    assert!(r.status().is_success());
    server.wait_for(Duration::from_secs(30), || (!online(&server)).then_some(())).expect("offline after disconnect");
    let status = wait_exit(&mut ff, Duration::from_secs(30)).expect("publisher ends after the disconnect");
    assert!(!status.success(), "the dropped publisher sees an error");
}

#[test]
fn garbage_and_half_handshakes_leave_the_daemon_serving() {
    let _g = lock();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let addr = format!("127.0.0.1:{}", server.rtmp_port.unwrap());

    // Random bytes.
    let mut junk = TcpStream::connect(&addr).unwrap();
    let mut x: u32 = 0x1234_5678;
    let bytes: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let _ = junk.write_all(&bytes);

    // Half a handshake (C0 and part of C1), then silence.
    let mut half = TcpStream::connect(&addr).unwrap();
    half.write_all(&[3u8]).unwrap();
    half.write_all(&[0u8; 700]).unwrap();

    assert!(server.get("/api/status").status().is_success());

    // The stalled socket is closed by the server after its timeout.
    half.set_read_timeout(Some(Duration::from_secs(25))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match half.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                panic!("the half handshake was not closed after {:?}", started.elapsed())
            }
            Err(_) => break,
        }
    }
    assert!(started.elapsed() < Duration::from_secs(25));

    // Still serving HTTP, and the RTMP server still answers a client properly.
    assert!(server.get("/api/status").status().is_success());
    assert!(!online(&server));
    let mut c = publish(&server, "wrong", "320x240", 2);
    let status = wait_exit(&mut c, Duration::from_secs(20)).expect("client exits");
    assert!(!status.success());
    assert!(server.log_text().contains("invalid stream key"), "the RTMP server still handles clients");
}

/// SIGTERM while a broadcaster is live: the stream ends the normal way before castd exits — the last
/// playlists carry `#EXT-X-ENDLIST`, STREAM_STOPPED reaches a webhook receiver, chat sockets get a close
/// frame — and the process exits 0 within 10 s (systemd's stop timeout is longer).
#[test]
fn sigterm_while_live_finishes_the_stream_and_exits_cleanly() {
    let _guard = lock();
    let mut server = Server::start_with_args(&["--streamkey", KEY]);
    configure(
        &server,
        json!([{"name": "low", "videoBitrate": 400, "scaledWidth": 320, "scaledHeight": 180, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    let rx = common::receiver::Receiver::start(&[]);
    let r = server.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": format!("{}/hook", rx.url), "events": ["STREAM_STARTED", "STREAM_STOPPED"]}),
    );
    assert_eq!(r.status().as_u16(), 200);
    let mut chatter = common::chatclient::join(&server, "watcher");
    let mut ffmpeg = publish(&server, KEY, "640x360", 60);
    server
        .wait_for(Duration::from_secs(40), || {
            text(&server, "/hls/0/stream.m3u8").filter(|p| segments(p).len() >= 2).map(|_| ())
        })
        .expect("two segments within 40 s");
    rx.wait_for(Duration::from_secs(10), |r| r.json()["type"] == "STREAM_STARTED").expect("STREAM_STARTED delivered");
    let playlist = server.data_dir.join("hls").join("0").join("stream.m3u8");
    assert!(!std::fs::read_to_string(&playlist).unwrap().contains("#EXT-X-ENDLIST"), "live playlist is open");

    let started = Instant::now();
    let code = server.stop();
    let took = started.elapsed();
    assert_eq!(code, Some(0), "exit status after SIGTERM");
    assert!(took < Duration::from_secs(10), "SIGTERM to exit took {took:?}");
    let text = std::fs::read_to_string(&playlist).unwrap();
    assert!(text.trim_end().ends_with("#EXT-X-ENDLIST"), "the last playlist is finished: {text}");
    assert!(!segments(&text).is_empty());
    let stopped = rx
        .wait_for(Duration::from_secs(2), |r| r.json()["type"] == "STREAM_STOPPED")
        .expect("STREAM_STOPPED was delivered before castd exited");
    assert_eq!(stopped.json()["eventData"]["status"]["online"], json!(false));
    // the chat socket was closed by the server with a close frame, not dropped
    let mut closed = false;
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match chatter.ws.read() {
            Ok(tungstenite::Message::Close(_)) => {
                closed = true;
                break;
            }
            Ok(_) => continue,
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(_) => break,
        }
    }
    assert!(closed, "the chat socket got a close frame");
    let _ = ffmpeg.kill();
    let _ = wait_exit(&mut ffmpeg, Duration::from_secs(5));
}

/// HLS over HTTP: Range (206 with Content-Range), HEAD, ETag + If-None-Match (304), Last-Modified +
/// If-Modified-Since (304); while live a segment is served from memory (it survives its file being
/// removed from disk), and after a restart the files on disk are served.
#[test]
fn hls_is_served_from_memory_while_live_with_http_caching_semantics() {
    let _guard = lock();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    configure(
        &server,
        json!([{"name": "low", "videoBitrate": 400, "scaledWidth": 320, "scaledHeight": 180, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    let mut ffmpeg = publish(&server, KEY, "640x360", 60);
    let listed = server
        .wait_for(Duration::from_secs(40), || {
            text(&server, "/hls/0/stream.m3u8").map(|p| segments(&p)).filter(|s| s.len() >= 3)
        })
        .expect("three segments within 40 s");
    // ffmpeg's onMetaData carries no data rate: the inbound bitrate shown is measured from the bytes
    // received (the input is x264 at about 1 Mbit/s; anything above 100 kbps proves a measurement).
    let kbps = server
        .wait_for(Duration::from_secs(10), || {
            let d = server.admin_json("/api/admin/status")["broadcaster"]["streamDetails"].clone();
            d["videoBitrate"].as_u64().filter(|k| *k > 100)
        })
        .expect("a measured inbound video bitrate in admin status");
    assert!(kbps < 20_000, "{kbps} kbps");
    let name = listed[0].clone();
    let path = format!("/hls/0/{name}");
    let full = server.get(&path);
    assert_eq!(full.status().as_u16(), 200);
    let h = full.headers().clone();
    let etag = h["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "strong ETag: {etag}");
    assert_eq!(h["accept-ranges"], "bytes");
    assert!(h["cache-control"].to_str().unwrap().contains("immutable"));
    let last_modified = h["last-modified"].to_str().unwrap().to_string();
    let body = full.bytes().unwrap();
    assert!(body.len() > 1000);
    assert_eq!(h["content-length"].to_str().unwrap(), body.len().to_string());

    let head = server.client.head(server.url(&path)).send().unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-length"].to_str().unwrap(), body.len().to_string());
    assert_eq!(head.headers()["etag"].to_str().unwrap(), etag);
    assert!(head.bytes().unwrap().is_empty(), "HEAD has no body");

    let r = server.client.get(server.url(&path)).header("If-None-Match", &etag).send().unwrap();
    assert_eq!(r.status().as_u16(), 304);
    let r = server.client.get(server.url(&path)).header("If-Modified-Since", &last_modified).send().unwrap();
    assert_eq!(r.status().as_u16(), 304);

    let r = server.client.get(server.url(&path)).header("Range", "bytes=0-187").send().unwrap();
    assert_eq!(r.status().as_u16(), 206);
    assert_eq!(r.headers()["content-range"].to_str().unwrap(), format!("bytes 0-187/{}", body.len()));
    assert_eq!(&r.bytes().unwrap()[..], &body[..188]);
    let r = server.client.get(server.url(&path)).header("Range", "bytes=-100").send().unwrap();
    assert_eq!(r.status().as_u16(), 206);
    assert_eq!(&r.bytes().unwrap()[..], &body[body.len() - 100..]);
    let r = server.client.get(server.url(&path)).header("Range", format!("bytes={}-", body.len())).send().unwrap();
    assert_eq!(r.status().as_u16(), 416);
    assert_eq!(r.headers()["content-range"].to_str().unwrap(), format!("bytes */{}", body.len()));

    // Served from memory: the file can go from disk while the segment is in the live window.
    std::fs::remove_file(server.data_dir.join("hls").join("0").join(&name)).unwrap();
    let again = server.get(&path);
    assert_eq!(again.status().as_u16(), 200, "a live segment is served from memory");
    assert_eq!(again.bytes().unwrap(), body);
    // The playlist is in memory too, with its own validator.
    let pl = server.get("/hls/0/stream.m3u8");
    assert_eq!(pl.headers()["cache-control"].to_str().unwrap(), "public, max-age=1");
    assert!(pl.headers().contains_key("etag"));

    let _ = ffmpeg.kill();
    let _ = wait_exit(&mut ffmpeg, Duration::from_secs(5));
    server.wait_for(Duration::from_secs(30), || (!online(&server)).then_some(())).expect("offline");
    // After a restart nothing is in memory: what is on disk is served, the deleted file is gone.
    let server = server.restart();
    let on_disk = listed[1].clone();
    let r = server.get(&format!("/hls/0/{on_disk}"));
    assert_eq!(r.status().as_u16(), 200, "a segment on disk is served after a restart");
    assert!(r.headers().contains_key("etag"));
    assert_eq!(server.get(&path).status().as_u16(), 404);
    let pl = text(&server, "/hls/0/stream.m3u8").expect("the finished playlist");
    assert!(pl.contains("#EXT-X-ENDLIST"));
}
