//! Simulcast end to end, all on loopback, in one publish to keep the wall time low: castd A (the source,
//! publishing ffmpeg's test pattern) forwards to
//! - a second castd B over plain RTMP (B goes live with the source's codecs and size: ffprobe on B's HLS),
//!   then, switched while live, over RTMPS through `stunnel4` in front of B's RTMP port (a test CA made
//!   with openssl; A trusts it through `CASTD_SIMULCAST_CA_FILE`, the documented test-only switch);
//! - an RTMP sink in this file (rml_rtmp's server session; refuses every key but its own, in castd's
//!   words) with a wrong key: `retrying`/`failed` with the remote's error, live once the key is fixed;
//! - a port nothing listens on: `retrying` (connection refused), `failed` after `CASTD_SIMULCAST_FAIL_SECS`
//!   with a health message, live once a sink listens there (the health message goes);
//! - a TCP proxy in this file that drops every connection after 10 s: live, `retrying` with
//!   `reconnects` counting, live again; steady once it stops dropping;
//! - the sink again as a `variant` target (variant 0's HLS segments remuxed to FLV, no encode): live, sending;
//! - a third castd C over SRT (variant 0's MPEG-TS segments as they are): C goes live with the same codecs and size;
//!
//! while A's own HLS keeps producing segments with no gap and no discontinuity. At the end of the stream
//! every live target unpublishes (`deleteStream`) and goes `off`; SIMULCAST_STATE_CHANGED webhooks arrive.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::media::{online, publish, segments, text, wait_exit};
use common::receiver::Receiver;
use common::Server;
use rml_rtmp::handshake::{Handshake, HandshakeProcessResult, PeerType};
use rml_rtmp::sessions::{ServerSession, ServerSessionConfig, ServerSessionEvent, ServerSessionResult};
use serde_json::{json, Value};

const KEY_A: &str = "source-key-123";
const KEY_B: &str = "target-key-456";
const SINK_KEY: &str = "sink-key-789";
const KEY_C: &str = "srt-target-key-0";

/// What a sink saw.
#[derive(Default)]
struct SinkStats {
    publishes: AtomicU64,
    refused: AtomicU64,
    finished: AtomicU64,
    media_bytes: AtomicU64,
    /// On application `var`: AVC sequence headers and keyframes received.
    var_setups: AtomicU64,
    var_keyframes: AtomicU64,
}

/// An RTMP server that accepts publishes with `SINK_KEY` (any number at once) and counts what arrives.
struct Sink {
    port: u16,
    stats: Arc<SinkStats>,
}

impl Sink {
    fn start(listener: TcpListener) -> Sink {
        let port = listener.local_addr().unwrap().port();
        let stats = Arc::new(SinkStats::default());
        let s = stats.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().map_while(Result::ok) {
                let s = s.clone();
                std::thread::spawn(move || {
                    let _ = sink_conn(conn, &s);
                });
            }
        });
        Sink { port, stats }
    }
}

fn sink_conn(mut sock: TcpStream, stats: &SinkStats) -> std::io::Result<()> {
    let mut hs = Handshake::new(PeerType::Server);
    let mut buf = vec![0u8; 64 * 1024];
    let leftover = loop {
        let n = sock.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        match hs.process_bytes(&buf[..n]).map_err(|e| std::io::Error::other(format!("{e:?}")))? {
            HandshakeProcessResult::InProgress { response_bytes } => sock.write_all(&response_bytes)?,
            HandshakeProcessResult::Completed { response_bytes, remaining_bytes } => {
                sock.write_all(&response_bytes)?;
                break remaining_bytes;
            }
        }
    };
    let (mut session, initial) = ServerSession::new(ServerSessionConfig::new()).unwrap();
    let mut pending = initial;
    let mut input = leftover;
    loop {
        if !input.is_empty() {
            pending.extend(session.handle_input(&input).map_err(|e| std::io::Error::other(format!("{e:?}")))?);
            input.clear();
        }
        while !pending.is_empty() {
            let mut next = Vec::new();
            for r in pending.drain(..) {
                match r {
                    ServerSessionResult::OutboundResponse(p) => sock.write_all(&p.bytes)?,
                    ServerSessionResult::RaisedEvent(e) => match e {
                        ServerSessionEvent::ConnectionRequested { request_id, .. } => {
                            next.extend(session.accept_request(request_id).unwrap());
                        }
                        ServerSessionEvent::PublishStreamRequested { request_id, stream_key, .. } => {
                            if stream_key == SINK_KEY {
                                stats.publishes.fetch_add(1, Ordering::SeqCst);
                                next.extend(session.accept_request(request_id).unwrap());
                            } else {
                                stats.refused.fetch_add(1, Ordering::SeqCst);
                                let r = session
                                    .reject_request(request_id, "NetStream.Publish.BadName", "invalid stream key")
                                    .unwrap();
                                for p in r {
                                    if let ServerSessionResult::OutboundResponse(p) = p {
                                        sock.write_all(&p.bytes)?;
                                    }
                                }
                                return Ok(());
                            }
                        }
                        ServerSessionEvent::VideoDataReceived { data, app_name, .. } => {
                            stats.media_bytes.fetch_add(data.len() as u64, Ordering::SeqCst);
                            if app_name == "var" && data.len() > 1 && data[0] == 0x17 {
                                let n = if data[1] == 0 { &stats.var_setups } else { &stats.var_keyframes };
                                n.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        ServerSessionEvent::AudioDataReceived { data, .. } => {
                            stats.media_bytes.fetch_add(data.len() as u64, Ordering::SeqCst);
                        }
                        ServerSessionEvent::PublishStreamFinished { .. } => {
                            stats.finished.fetch_add(1, Ordering::SeqCst);
                        }
                        _ => {}
                    },
                    ServerSessionResult::UnhandleableMessageReceived(_) => {}
                }
            }
            pending = next;
        }
        let n = sock.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        input.extend_from_slice(&buf[..n]);
    }
}

/// A TCP proxy to `upstream` that, while `dropping`, closes every connection 10 s after it opened.
struct Dropper {
    port: u16,
    dropping: Arc<AtomicBool>,
    drops: Arc<AtomicU64>,
}

impl Dropper {
    fn start(upstream: u16) -> Dropper {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dropping = Arc::new(AtomicBool::new(true));
        let drops = Arc::new(AtomicU64::new(0));
        let (d, n) = (dropping.clone(), drops.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                let pipe = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                    })
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
                let (d, n) = (d.clone(), n.clone());
                std::thread::spawn(move || {
                    let opened = Instant::now();
                    loop {
                        std::thread::sleep(Duration::from_millis(100));
                        if d.load(Ordering::SeqCst) && opened.elapsed() >= Duration::from_secs(10) {
                            n.fetch_add(1, Ordering::SeqCst);
                            let _ = c2.shutdown(Shutdown::Both);
                            let _ = s2.shutdown(Shutdown::Both);
                            return;
                        }
                        // The pipe closed on its own.
                        if c2.peer_addr().is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Dropper { port, dropping, drops }
    }
}

/// A test CA and a certificate for 127.0.0.1 signed by it, in `dir`: (ca.pem, cert.pem, key.pem).
fn make_certs(dir: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=castd test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    run(&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.csr", "-subj", "/CN=127.0.0.1"]);
    std::fs::write(
        dir.join("ext.cnf"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "cert.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
}

/// stunnel4 terminating TLS on a free port in front of `upstream`.
fn stunnel(dir: &Path, upstream: u16) -> (Child, u16) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let conf = dir.join("stunnel.conf");
    std::fs::write(
        &conf,
        format!(
            "foreground = yes\npid =\ndebug = 3\n[rtmps]\naccept = 127.0.0.1:{port}\nconnect = 127.0.0.1:{upstream}\n\
             cert = {}\nkey = {}\n",
            dir.join("cert.pem").display(),
            dir.join("key.pem").display()
        ),
    )
    .unwrap();
    let bin = if Path::new("/usr/bin/stunnel4").exists() { "stunnel4" } else { "stunnel" };
    let child = Command::new(bin)
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("stunnel4 (packaging/deps.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "stunnel did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, port)
}

fn statuses(a: &Server) -> Vec<Value> {
    a.admin_json("/api/admin/simulcast/status").as_array().cloned().unwrap_or_default()
}

fn status_of(a: &Server, id: &str) -> Value {
    statuses(a).into_iter().find(|s| s["id"] == id).unwrap_or(Value::Null)
}

/// Wait until target `id` satisfies `f`; panics with the statuses and the log otherwise.
fn wait_target(a: &Server, id: &str, secs: u64, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    a.wait_for(Duration::from_secs(secs), || Some(status_of(a, id)).filter(&f)).unwrap_or_else(|| {
        panic!("target {id}: not {what} within {secs} s; status: {:#}\nlog:\n{}", json!(statuses(a)), a.log_text())
    })
}

fn state_is(s: &Value, state: &str) -> bool {
    s["state"] == state
}

/// ffprobe's streams (codec, width, height) of the newest segment (with its init segment) of `server`'s
/// first variant.
fn probe(server: &Server) -> Vec<(String, u64, u64)> {
    let playlist = text(server, "/hls/0/stream.m3u8").unwrap_or_default();
    let newest = segments(&playlist).last().cloned().expect("a segment");
    let mut bytes = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\""))
        .and_then(|rest| rest.split('"').next())
        .map(|name| server.get(&format!("/hls/0/{name}")).bytes().unwrap().to_vec())
        .unwrap_or_default();
    bytes.extend_from_slice(&server.get(&format!("/hls/0/{newest}")).bytes().unwrap());
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "json"])
        .arg(file.path())
        .output()
        .expect("ffprobe");
    let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    v["streams"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["codec_name"].as_str().unwrap_or_default().to_string(),
                s["width"].as_u64().unwrap_or(0),
                s["height"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Polls A's first variant playlist; records every segment's media sequence number and whether a
/// discontinuity was ever listed.
struct HlsWatch {
    seen: Arc<Mutex<std::collections::BTreeMap<u64, f64>>>,
    discontinuity: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl HlsWatch {
    fn start(base: String) -> HlsWatch {
        let seen = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
        let discontinuity = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, d, st) = (seen.clone(), discontinuity.clone(), stop.clone());
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            while !st.load(Ordering::SeqCst) {
                if let Ok(body) = client.get(format!("{base}/hls/0/stream.m3u8")).send().and_then(|r| r.text()) {
                    let mut seq = None;
                    let mut duration = 0.0;
                    for line in body.lines() {
                        if let Some(v) = line.strip_prefix("#EXT-X-MEDIA-SEQUENCE:") {
                            seq = v.trim().parse::<u64>().ok();
                        } else if line.starts_with("#EXT-X-DISCONTINUITY") && !line.contains("SEQUENCE") {
                            d.store(true, Ordering::SeqCst);
                        } else if let Some(v) = line.strip_prefix("#EXTINF:") {
                            duration = v.split(',').next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                        } else if !line.is_empty() && !line.starts_with('#') {
                            if let Some(n) = seq.as_mut() {
                                s.lock().unwrap().insert(*n, duration);
                                *n += 1;
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(400));
            }
        });
        HlsWatch { seen, discontinuity, stop }
    }
}

#[test]
fn forwards_to_a_second_castd_and_every_target_keeps_its_own_state() {
    let tmp = tempfile::tempdir().unwrap();
    make_certs(tmp.path());
    let ca = tmp.path().join("ca.pem");
    let a = Server::start_with_env(
        &["--streamkey", KEY_A],
        &[("CASTD_SIMULCAST_CA_FILE", ca.to_str().unwrap()), ("CASTD_SIMULCAST_FAIL_SECS", "6")],
    );
    let b = Server::start_with_args(&["--streamkey", KEY_B]);
    let srt_port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let c = Server::start_with_args(&["--streamkey", KEY_C, "--srtport", &srt_port]);
    let c_srt = c.srt_port.expect("C's SRT port");
    // Both pass the broadcaster's video and audio through: B's output is what A forwarded.
    let passthrough = json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]);
    a.set("video/streamoutputvariants", passthrough.clone());
    b.set("video/streamoutputvariants", passthrough.clone());
    c.set("video/streamoutputvariants", passthrough);
    let b_rtmp = b.rtmp_port.expect("B's rtmp port");
    let (mut tunnel, tls_port) = stunnel(tmp.path(), b_rtmp);
    let sink = Sink::start(TcpListener::bind("127.0.0.1:0").unwrap());
    let dropper = Dropper::start(sink.port);
    let down_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let down_port = down_listener.local_addr().unwrap().port();
    drop(down_listener);
    let hook = Receiver::start(&[]);
    let r =
        a.admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": ["SIMULCAST_STATE_CHANGED"]}));
    assert!(r.status().is_success(), "SIMULCAST_STATE_CHANGED is subscribable");

    let targets = |fixed: bool| {
        json!([
            {"id": "b", "name": "castd B", "url": format!("rtmp://127.0.0.1:{b_rtmp}/live"), "streamKey": KEY_B,
             "enabled": !fixed},
            {"id": "tls", "name": "castd B over TLS", "url": format!("rtmps://127.0.0.1:{tls_port}/live"),
             "streamKey": KEY_B, "enabled": fixed},
            {"id": "refuse", "name": "Wrong key", "url": format!("rtmp://127.0.0.1:{}/app", sink.port),
             "streamKey": if fixed { SINK_KEY } else { "not-the-key" }, "enabled": true},
            {"id": "down", "name": "Down", "url": format!("rtmp://127.0.0.1:{down_port}/app"), "streamKey": SINK_KEY,
             "enabled": true},
            {"id": "drop", "name": "Drops", "url": format!("rtmp://127.0.0.1:{}/app", dropper.port),
             "streamKey": SINK_KEY, "enabled": true},
            {"id": "var", "name": "Variant 0", "url": format!("rtmp://127.0.0.1:{}/var", sink.port),
             "streamKey": SINK_KEY, "enabled": true, "variant": 0},
            {"id": "srt", "name": "castd C over SRT", "url": format!("srt://127.0.0.1:{c_srt}"),
             "streamKey": KEY_C, "enabled": true, "variant": 0},
        ])
    };
    a.set("simulcast/targets", targets(false));
    // The keys are write-only.
    let config = a.admin_json("/api/admin/serverconfig");
    let shown = config["simulcastTargets"].as_array().cloned().unwrap_or_default();
    assert_eq!(shown.len(), 7, "{config:#}");
    assert_eq!(shown[5]["variant"], 0);
    assert_eq!(shown[0]["streamKey"], "********");
    assert!(!config.to_string().contains(KEY_B), "a stream key is never shown");
    assert!(statuses(&a).iter().all(|s| state_is(s, "off")), "off until the stream is live");

    let watch = HlsWatch::start(a.base.clone());
    let mut ff = publish(&a, KEY_A, "640x360", 45);
    let live_at = Instant::now();
    a.wait_for(Duration::from_secs(20), || online(&a).then_some(())).expect("A online");

    // B goes live with the source's codecs and size.
    wait_target(&a, "b", 20, "live", |s| state_is(s, "live"));
    b.wait_for(Duration::from_secs(20), || text(&b, "/hls/0/stream.m3u8").filter(|p| !segments(p).is_empty()))
        .unwrap_or_else(|| panic!("B has no segment; B's log:\n{}", b.log_text()));
    let streams = probe(&b);
    assert!(streams.contains(&("h264".to_string(), 640, 360)), "{streams:?}");
    assert!(streams.iter().any(|s| s.0 == "aac"), "{streams:?}");

    // The variant target: the transcoder's segments of variant 0, remuxed, no encode.
    wait_target(&a, "var", 30, "live and sending", |s| {
        state_is(s, "live") && s["bytesSent"].as_u64().unwrap_or(0) > 50_000
    });
    a.wait_for(Duration::from_secs(15), || (sink.stats.var_keyframes.load(Ordering::SeqCst) >= 1).then_some(()))
        .expect("keyframes from the variant target");
    assert!(sink.stats.var_setups.load(Ordering::SeqCst) >= 1, "the AVC sequence header comes first");
    // The SRT target (variant 0's MPEG-TS as it is): C goes live with the source's codecs and size.
    wait_target(&a, "srt", 30, "live over SRT", |s| state_is(s, "live"));
    c.wait_for(Duration::from_secs(40), || text(&c, "/hls/0/stream.m3u8").filter(|p| !segments(p).is_empty()))
        .unwrap_or_else(|| panic!("C has no segment; C's log:\n{}", c.log_text()));
    let streams = probe(&c);
    assert!(streams.contains(&("h264".to_string(), 640, 360)), "C: {streams:?}");

    // The wrong key: the remote's own words; the port nothing listens on: refused, then failed, with a
    // health message; the dropping proxy: live.
    let refused = wait_target(&a, "refuse", 15, "refused", |s| {
        s["lastError"].as_str().is_some_and(|e| e.contains("invalid stream key"))
    });
    assert!(["retrying", "failed"].contains(&refused["state"].as_str().unwrap_or_default()), "{refused}");
    let down = wait_target(&a, "down", 20, "failed", |s| state_is(s, "failed"));
    assert!(down["lastError"].as_str().unwrap_or_default().to_lowercase().contains("refused"), "{down}");
    assert!(down["reconnects"].as_u64().unwrap_or(0) >= 2, "{down}");
    let health = a.admin_json("/api/admin/status")["health"]["message"].as_str().unwrap_or_default().to_string();
    // A hardware alert (this shared machine's disk) outranks the notice; the log has it then.
    if health.contains("utilization") {
        assert!(a.log_text().contains("simulcast target has failed"), "health: {health}");
    } else {
        assert!(health.contains("Simulcast to"), "health: {health}");
    }
    wait_target(&a, "drop", 15, "live", |s| state_is(s, "live"));
    // Dropped after 10 s: retrying, then live again.
    wait_target(&a, "drop", 20, "reconnected", |s| state_is(s, "live") && s["reconnects"].as_u64() >= Some(1));
    assert!(dropper.drops.load(Ordering::SeqCst) >= 1);
    assert!(state_is(&status_of(&a, "b"), "live"), "the other targets are not affected");

    // Fix them all, and switch B to RTMPS while live.
    dropper.dropping.store(false, Ordering::SeqCst);
    let _down_sink = Sink::start(TcpListener::bind(("127.0.0.1", down_port)).expect("the down port again"));
    a.set("simulcast/targets", targets(true));
    wait_target(&a, "refuse", 15, "live after the key was fixed", |s| state_is(s, "live"));
    wait_target(&a, "tls", 20, "live over RTMPS", |s| state_is(s, "live"));
    wait_target(&a, "down", 25, "live once listened to", |s| state_is(s, "live"));
    b.wait_for(Duration::from_secs(15), || online(&b).then_some(())).expect("B online again, over TLS");
    let health = a.admin_json("/api/admin/status")["health"]["message"].as_str().unwrap_or_default().to_string();
    assert!(!health.contains("Simulcast"), "the health message goes once the target is live: {health}");
    wait_target(&a, "drop", 5, "live", |s| state_is(s, "live"));
    assert!(status_of(&a, "b")["state"] == "off", "the disabled target stopped");
    let tls = status_of(&a, "tls");
    assert!(tls["bytesSent"].as_u64().unwrap_or(0) > 0, "{tls}");
    let drop_reconnects = status_of(&a, "drop")["reconnects"].as_u64().unwrap_or(0);

    // The stream ends: every target unpublishes and goes off.
    let status = wait_exit(&mut ff, Duration::from_secs(60)).expect("ffmpeg ends");
    assert!(status.success(), "ffmpeg");
    let elapsed = live_at.elapsed();
    a.wait_for(Duration::from_secs(20), || statuses(&a).iter().all(|s| state_is(s, "off")).then_some(()))
        .unwrap_or_else(|| panic!("targets still on: {:#}", json!(statuses(&a))));
    assert_eq!(status_of(&a, "drop")["reconnects"].as_u64().unwrap_or(0), drop_reconnects, "steady once fixed");
    assert!(
        sink.stats.finished.load(Ordering::SeqCst) >= 3,
        "deleteStream at the end (refuse, drop, var): {}",
        sink.stats.finished.load(Ordering::SeqCst)
    );
    assert!(sink.stats.refused.load(Ordering::SeqCst) >= 1 && sink.stats.media_bytes.load(Ordering::SeqCst) > 0);
    b.wait_for(Duration::from_secs(20), || (!online(&b)).then_some(())).expect("B offline after the stream");
    c.wait_for(Duration::from_secs(40), || (!online(&c)).then_some(())).expect("C offline after the stream");

    // A's own HLS: every segment from the first to the last, none missing, no discontinuity.
    std::thread::sleep(Duration::from_secs(1));
    watch.stop.store(true, Ordering::SeqCst);
    let seen = watch.seen.lock().unwrap().clone();
    let (first, last) = (*seen.keys().next().expect("segments"), *seen.keys().last().unwrap());
    let missing: Vec<u64> = (first..=last).filter(|n| !seen.contains_key(n)).collect();
    assert!(missing.is_empty(), "A's segments missing: {missing:?}");
    assert!(!watch.discontinuity.load(Ordering::SeqCst), "A's playlist had a discontinuity");
    let total: f64 = seen.values().sum();
    assert!(total >= elapsed.as_secs_f64() - 15.0, "A's segments cover {total:.1} s of {elapsed:?}");

    // SIMULCAST_STATE_CHANGED webhooks: B's target went live and off again.
    hook.wait_for(Duration::from_secs(10), |r| {
        let v = r.json();
        v["type"] == "SIMULCAST_STATE_CHANGED" && v["eventData"]["id"] == "tls" && v["eventData"]["state"] == "off"
    })
    .expect("a SIMULCAST_STATE_CHANGED webhook for the RTMPS target going off");
    let _ = tunnel.kill();
    let _ = tunnel.wait();
}
