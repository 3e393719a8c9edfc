//! The admission hook on publish (#42): a real daemon asks the hook of the channel a right stream key
//! belongs to (`admissionHook.onPublish`) before a real ffmpeg RTMP publisher goes live. The hook is a
//! local receiver (axum on loopback) that allows one key's comment and denies another's with a reason:
//! the denied publisher is refused in the handshake with that reason, the allowed one goes live; each
//! request is signed (`X-Castd-Signature`) with the hook's secret and carries the key's comment, never
//! the key. A channel's own hook is asked for its keys, and a hook that does not answer lets a valid
//! key in (fail open), with a warning in the log. WHIP is refused with a 403 and the reason.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::media::{publish, wait_exit};
use common::sdp::{error_of, whip_offer};
use common::Server;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

const SECRET: &str = "hook-secret-for-the-test";
const CLUB_SECRET: &str = "the-club-hook-secret";
const ALICE_KEY: &str = "alice-stream-key-0123456789";
const MALLORY_KEY: &str = "mallory-stream-key-0123456789";

/// What the hook received: (path, signature header, body).
type Seen = Arc<Mutex<Vec<(String, Option<String>, Vec<u8>)>>>;

/// The hook: `/hook` allows the subject "alice" and denies everyone else with a JSON reason; `/club`
/// denies everyone ("the club is closed").
fn hook(rt: &tokio::runtime::Runtime) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let record = |path: &'static str, seen: Seen| {
        move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let sig = headers.get("x-castd-signature").and_then(|v| v.to_str().ok()).map(str::to_string);
            seen.lock().unwrap().push((path.to_string(), sig, body.to_vec()));
            let v: Value = serde_json::from_slice(&body).unwrap_or_default();
            async move {
                use axum::http::StatusCode;
                match (path, v["subject"].as_str()) {
                    ("/hook", Some("alice")) => (StatusCode::NO_CONTENT, String::new()),
                    ("/hook", _) => {
                        (StatusCode::FORBIDDEN, json!({"message": "no ticket for this stream"}).to_string())
                    }
                    _ => (StatusCode::PAYMENT_REQUIRED, "the club is closed".to_string()),
                }
            }
        }
    };
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(record("/hook", seen.clone())))
        .route("/club", axum::routing::post(record("/club", seen.clone())));
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

fn signed(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn online(server: &Server, base: &str) -> bool {
    server.get_json(&format!("{base}/api/status"))["online"] == true
}

fn wait_online(server: &Server, base: &str) {
    let live = server.wait_for(Duration::from_secs(60), || online(server, base).then_some(()));
    assert!(live.is_some(), "{base} went live; log:\n{}", server.log_text());
}

fn stderr_of(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    err
}

/// A publisher the hook refuses: ffmpeg fails, the channel stays offline.
fn refused(server: &Server, key: &str, base: &str) -> String {
    let mut p = publish(server, key, "320x240", 30);
    let status = wait_exit(&mut p, Duration::from_secs(20));
    assert!(status.is_some_and(|s| !s.success()), "the publisher was refused: {status:?}");
    assert!(!online(server, base), "{base} stayed offline");
    stderr_of(&mut p)
}

fn set_hook(server: &Server, base: &str, url: &str, secret: &str) {
    let value = json!({"url": url, "secret": secret, "onPlay": false, "onPublish": true, "cacheSeconds": 0});
    let r = server.admin_post(&format!("{base}/api/admin/config/viewer/admissionhook"), &json!({ "value": value }));
    assert_eq!(r.status(), 200, "the admission hook setter: {}", r.text().unwrap_or_default());
}

#[test]
fn the_publish_hook_allows_one_key_and_refuses_another_and_fails_open() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (hook_url, seen) = hook(&rt);
    let server = Server::start();
    let ladder = json!([{"name": "small", "videoPassthrough": false, "scaledWidth": 256, "scaledHeight": 144,
                         "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}]);
    server.set("video/streamoutputvariants", ladder.clone());
    server
        .set("streamkeys", json!([{"key": ALICE_KEY, "comment": "alice"}, {"key": MALLORY_KEY, "comment": "mallory"}]));
    set_hook(&server, "", &format!("{hook_url}/hook"), SECRET);

    // A channel with a hook of its own, which refuses everyone.
    let r = server.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": "club", "name": "Club", "adminPassword": "club-admin-password-1"}),
    );
    assert_eq!(r.status(), 200, "create club: {}", r.text().unwrap_or_default());
    let club_key = "club-stream-key-0123456789";
    for (setter, value) in
        [("streamkeys", json!([{"key": club_key, "comment": "club encoder"}])), ("video/streamoutputvariants", ladder)]
    {
        let r = server.admin_post(&format!("/c/club/api/admin/config/{setter}"), &json!({ "value": value }));
        assert_eq!(r.status(), 200, "club {setter}: {}", r.text().unwrap_or_default());
    }
    set_hook(&server, "/c/club", &format!("{hook_url}/club"), CLUB_SECRET);

    // Mallory's key is right, but the hook denies it: refused in the handshake with the hook's reason.
    let err = refused(&server, MALLORY_KEY, "");
    assert!(err.contains("no ticket for this stream") || err.contains("Rejected"), "ffmpeg's error: {err}");
    assert!(
        server.log_text().contains("refused by the admission hook: no ticket for this stream"),
        "the reason is logged:\n{}",
        server.log_text()
    );
    // Over WHIP too: a 403 with the hook's reason.
    let whip = common::sdp::post(&server, "/whip", Some(MALLORY_KEY), "application/sdp", whip_offer("H264"));
    assert_eq!(error_of(whip), (403, "no ticket for this stream".to_string()));
    // The club's key: the club's own hook is asked (and refuses).
    refused(&server, club_key, "/c/club");
    assert!(server.log_text().contains("the club is closed"), "{}", server.log_text());

    // A hook that does not answer lets a valid key in, with a warning.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/club", dead.local_addr().unwrap());
    drop(dead);
    set_hook(&server, "/c/club", &dead_url, CLUB_SECRET);
    let mut club = publish(&server, club_key, "320x240", 60);
    wait_online(&server, "/c/club");
    assert!(server.log_text().contains("admission hook unreachable"), "{}", server.log_text());
    let _ = club.kill();
    let _ = club.wait();

    // Alice's key: allowed, live.
    let mut alice = publish(&server, ALICE_KEY, "320x240", 60);
    wait_online(&server, "");
    let _ = alice.kill();
    let _ = alice.wait();

    // What the hook saw: every request signed with its channel's hook secret, the key's comment as
    // the subject, never the key.
    let seen = seen.lock().unwrap().clone();
    let subjects: Vec<(String, String)> = seen
        .iter()
        .map(|(path, sig, body)| {
            let secret = if path == "/hook" { SECRET } else { CLUB_SECRET };
            assert_eq!(sig.as_deref(), Some(signed(secret, body).as_str()), "{path} signed");
            let text = String::from_utf8_lossy(body);
            for key in [ALICE_KEY, MALLORY_KEY, club_key] {
                assert!(!text.contains(key), "the key is never sent: {text}");
            }
            let v: Value = serde_json::from_slice(body).unwrap();
            assert_eq!(v["action"], "publish", "{v}");
            assert_eq!(v["address"], "127.0.0.1", "{v}");
            assert!(v["time"].is_string(), "{v}");
            let channel = v["channel"].as_str().unwrap_or_default().to_string();
            (channel, v["subject"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    let want = [("default", "mallory"), ("default", "mallory"), ("club", "club encoder"), ("default", "alice")];
    let want: Vec<(String, String)> = want.iter().map(|(c, s)| (c.to_string(), s.to_string())).collect();
    assert_eq!(subjects, want);
}
