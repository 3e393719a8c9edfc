//! A channel admin never reaches the operator's network (issue 52, design risk 1): the URLs a channel's
//! admin sets (webhooks, the admission hook, the JWKS URL, the Discord webhook, simulcast targets) go
//! only to public addresses unless the server admin's `allowprivatetargets` lets them reach loopback and
//! private ones; the default channel's (the server admin's own) go anywhere. Each receiver is a real
//! listener on 127.0.0.1 that counts connections; a refusal is awaited through the daemon's log line or
//! the setter's answer, never through a pause. Literal private addresses (10.255.255.1,
//! 169.254.169.254) are only ever refused before anything is sent: no test traffic leaves 127.0.0.1.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use common::Server;
use serde_json::{json, Value};

/// A listener on 127.0.0.1 that counts the connections it accepts and answers each with `200 OK`.
struct Counter {
    port: u16,
    count: Arc<AtomicUsize>,
}

impl Counter {
    fn start() -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buf = vec![0u8; 65536];
                    let mut seen = Vec::new();
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        if seen.windows(4).any(|w| w == b"\r\n\r\n") || seen.len() > 65536 {
                            break;
                        }
                    }
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                });
            }
        });
        Counter { port, count }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// A JWT signed with RS256 in its header: enough for castd to fetch the issuer's keys (its signature is
/// judged only once keys are there).
fn rs256_token() -> String {
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.{}",
        b64(&json!({"alg": "RS256", "kid": "k1", "typ": "JWT"})),
        b64(&json!({"sub": "m1", "iss": "https://shop.example", "aud": "castd", "exp": 4_102_444_800u64})),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([7u8; 256])
    )
}

/// The answer's status and message.
fn answer(r: reqwest::blocking::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let body: Value = r.json().unwrap_or(Value::Null);
    (status, body["message"].as_str().unwrap_or_default().to_string())
}

fn set_private_targets(server: &Server, on: bool) {
    server.set("allowprivatetargets", json!(on));
    assert_eq!(server.admin_json("/api/admin/serverconfig")["allowPrivateTargets"], json!(on));
}

#[test]
fn only_the_server_admin_sets_allowprivatetargets() {
    let server = Server::start_with_default_targets(&[]);
    assert_eq!(server.admin_json("/api/admin/serverconfig")["allowPrivateTargets"], json!(false), "off by default");
    let channel = server.channel("c1");
    // A channel's API has no such setter, whoever calls: the channel's admin, the server admin there.
    let (status, msg) = answer(channel.admin_post("/api/admin/config/allowprivatetargets", &json!({"value": true})));
    assert_eq!(status, 404, "{msg}");
    let r = server.admin_post("/c/c1/api/admin/config/allowprivatetargets", &json!({"value": true}));
    assert_eq!(r.status().as_u16(), 404);
    // Nobody but the server admin on the root.
    let r = server.post_json("/api/admin/config/allowprivatetargets", &json!({"value": true}));
    assert_eq!(r.status().as_u16(), 401);
    let r = server
        .client
        .post(server.url("/api/admin/config/allowprivatetargets"))
        .basic_auth("admin", Some(&channel.admin_password))
        .json(&json!({"value": true}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "a channel's password is not the server admin's");
    assert_eq!(server.admin_json("/api/admin/serverconfig")["allowPrivateTargets"], json!(false));
    // The channel's configuration does not show it; the server admin's switch is kept across a restart.
    assert!(channel.admin_json("/api/admin/serverconfig").get("allowPrivateTargets").is_none());
    set_private_targets(&server, true);
    let server = server.restart();
    assert_eq!(server.admin_json("/api/admin/serverconfig")["allowPrivateTargets"], json!(true));
}

#[test]
fn a_channels_private_literal_urls_are_refused_when_saved() {
    let server = Server::start_with_default_targets(&[]);
    let counter = Counter::start();
    let channel = server.channel("c1");
    let loopback = counter.url("/x");
    for host in ["10.255.255.1", "169.254.169.254", "127.0.0.1", "[::1]", "localhost", "0.0.0.0"] {
        let url = if host == "127.0.0.1" { loopback.clone() } else { format!("http://{host}/x") };
        let (status, msg) = answer(
            channel.admin_post("/api/admin/webhooks/create", &json!({"url": url, "events": ["STREAM_TITLE_UPDATED"]})),
        );
        assert_eq!(status, 400, "webhook at {url}: {msg}");
        assert!(msg.contains("only reach public addresses"), "{msg}");
        for (setter, value) in [
            ("viewer/admissionhook", json!({"url": url, "onPlay": true, "cacheSeconds": 0})),
            ("viewer/jwt", json!({"jwksUrl": url, "issuer": "https://shop.example", "audience": "castd"})),
            ("notifications/discord", json!({"enabled": true, "webhook": url, "goLiveMessage": "live"})),
            (
                "simulcast/targets",
                json!([{"id": "t", "name": "t", "url": url.replace("http://", "rtmp://"), "streamKey": "k",
                        "enabled": true}]),
            ),
        ] {
            let (status, msg) =
                answer(channel.admin_post(&format!("/api/admin/config/{setter}"), &json!({"value": value})));
            assert_eq!(status, 400, "{setter} at {url}: {msg}");
            assert!(msg.contains("only reach public addresses"), "{setter}: {msg}");
        }
    }
    // The server admin's switch lets loopback and private addresses be saved; link-local never.
    set_private_targets(&server, true);
    for url in [loopback.as_str(), "http://10.255.255.1/x"] {
        let r = channel.admin_post("/api/admin/webhooks/create", &json!({"url": url, "events": ["PING"]}));
        assert!(r.status().is_success(), "{url}: {}", r.status());
    }
    let (status, _) = answer(
        channel
            .admin_post("/api/admin/webhooks/create", &json!({"url": "http://169.254.169.254/x", "events": ["PING"]})),
    );
    assert_eq!(status, 400, "link-local stays refused");
    // The default channel's admin (the server admin) may point anywhere (Owncast's behaviour).
    server.set("allowprivatetargets", json!(false));
    let r = server.admin_post("/api/admin/webhooks/create", &json!({"url": loopback, "events": ["PING"]}));
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(counter.seen(), 0, "saving sends nothing");
}

#[test]
fn a_channels_webhook_hook_and_jwks_reach_loopback_only_when_the_server_admin_allows() {
    let server = Server::start_with_default_targets(&[]);
    let channel = server.channel("c1");
    let (webhook, hook, jwks) = (Counter::start(), Counter::start(), Counter::start());
    // Saved while allowed, then the server admin turns the switch off: every fetch is judged when made.
    set_private_targets(&server, true);
    let r = channel.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": webhook.url("/hook"), "events": ["STREAM_TITLE_UPDATED"]}),
    );
    assert!(r.status().is_success());
    channel.set("viewer/admissionhook", json!({"url": hook.url("/hook"), "onPlay": true, "cacheSeconds": 0}));
    channel.set(
        "viewer/jwt",
        json!({"jwksUrl": jwks.url("/jwks"), "issuer": "https://shop.example", "audience": "castd"}),
    );
    set_private_targets(&server, false);

    // The webhook: the delivery is given up at once, nothing sent.
    channel.set("streamtitle", json!("first title"));
    let gave_up = channel.wait_for(Duration::from_secs(15), || {
        channel
            .log_text()
            .lines()
            .any(|l| l.contains("gave up delivering a webhook") && l.contains("not allowed"))
            .then_some(())
    });
    assert!(gave_up.is_some(), "no refusal logged; log:\n{}", channel.log_text());
    // The admission hook: unreachable (a public channel's viewer is let through), nothing sent.
    let r = channel.get("/hls/stream.m3u8");
    assert_ne!(r.status().as_u16(), 503);
    assert!(channel.log_text().contains("the admission hook's address is not allowed"), "{}", channel.log_text());
    // The JWKS: no keys, so the token is not taken, nothing fetched.
    let r = channel.post_json("/api/viewer/token", &json!({"jwt": rs256_token()}));
    assert_eq!(r.status().as_u16(), 503, "{}", r.text().unwrap_or_default());
    assert!(channel.log_text().contains("the JWKS URL's address is not allowed"), "{}", channel.log_text());
    assert_eq!((webhook.seen(), hook.seen(), jwks.seen()), (0, 0, 0), "a refused target is never contacted");

    // The default channel's own URLs (the server admin's) reach the same listeners.
    let r = server.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": webhook.url("/hook"), "events": ["STREAM_TITLE_UPDATED"]}),
    );
    assert!(r.status().is_success());
    server.set("viewer/admissionhook", json!({"url": hook.url("/hook"), "onPlay": true, "cacheSeconds": 0}));
    server.set(
        "viewer/jwt",
        json!({"jwksUrl": jwks.url("/jwks"), "issuer": "https://shop.example", "audience": "castd"}),
    );
    server.set("streamtitle", json!("the server's title"));
    let _ = server.get("/hls/stream.m3u8");
    let _ = server.post_json("/api/viewer/token", &json!({"jwt": rs256_token()}));
    let reached = server
        .wait_for(Duration::from_secs(15), || (webhook.seen() > 0 && hook.seen() > 0 && jwks.seen() > 0).then_some(()));
    assert!(reached.is_some(), "the default channel's targets: {} {} {}", webhook.seen(), hook.seen(), jwks.seen());

    // Once the server admin allows private targets, the channel's loopback webhook and hook are contacted.
    let before = (webhook.seen(), hook.seen());
    set_private_targets(&server, true);
    channel.set("streamtitle", json!("second title"));
    let _ = channel.get("/hls/stream.m3u8");
    let reached = channel
        .wait_for(Duration::from_secs(15), || (webhook.seen() > before.0 && hook.seen() > before.1).then_some(()));
    assert!(reached.is_some(), "the channel's targets once allowed; log:\n{}", channel.log_text());
}

#[test]
fn a_channels_discord_simulcast_and_publish_hook_reach_loopback_only_when_allowed() {
    let server = Server::start_with_default_targets(&[]);
    let channel = server.channel("c1");
    let (discord, rtmp, hook) = (Counter::start(), Counter::start(), Counter::start());
    set_private_targets(&server, true);
    channel.set(
        "video/streamoutputvariants",
        json!([{"videoBitrate": 300, "scaledWidth": 320, "scaledHeight": 240, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    channel.set(
        "notifications/discord",
        json!({"enabled": true, "webhook": discord.url("/discord"), "goLiveMessage": "live"}),
    );
    channel.set(
        "simulcast/targets",
        json!([{"id": "t", "name": "loopback", "url": format!("rtmp://127.0.0.1:{}/live", rtmp.port),
                "streamKey": "k", "enabled": true}]),
    );
    channel.set("viewer/admissionhook", json!({"url": hook.url("/hook"), "onPublish": true, "cacheSeconds": 0}));
    set_private_targets(&server, false);

    let key = channel.stream_key();
    let mut ff = common::media::publish(&server, &key, "320x240", 60);
    let refused = |what: &str| {
        channel.wait_for(Duration::from_secs(30), || channel.log_text().contains(what).then_some(())).is_some()
    };
    assert!(refused("the admission hook's address is not allowed"), "publish hook; log:\n{}", channel.log_text());
    assert!(refused("the Discord webhook's address is not allowed"), "Discord; log:\n{}", channel.log_text());
    assert!(refused("simulcast target refused"), "simulcast; log:\n{}", channel.log_text());
    let status = channel.admin_json("/api/admin/simulcast/status");
    assert!(status.to_string().contains("not an address this channel may reach"), "{status}");
    assert_eq!((discord.seen(), rtmp.seen(), hook.seen()), (0, 0, 0), "a refused target is never contacted");
    let _ = ff.kill();
    let _ = ff.wait();
    let offline = channel.wait_for(Duration::from_secs(30), || (!common::media::online(&channel)).then_some(()));
    assert!(offline.is_some(), "the stream did not end");

    // Allowed: the next broadcast reaches all three.
    set_private_targets(&server, true);
    let mut ff = common::media::publish(&server, &key, "320x240", 60);
    let reached = channel
        .wait_for(Duration::from_secs(40), || (discord.seen() > 0 && rtmp.seen() > 0 && hook.seen() > 0).then_some(()));
    let _ = ff.kill();
    let _ = ff.wait();
    assert!(
        reached.is_some(),
        "discord {} simulcast {} hook {}; log:\n{}",
        discord.seen(),
        rtmp.seen(),
        hook.seen(),
        channel.log_text()
    );
}
