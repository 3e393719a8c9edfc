//! The admission hook on play (#42): before a pass is issued and when a viewer starts watching (the
//! master playlist, a WHEP offer, the chat socket), castd asks the channel's hook about the pass's
//! subject; a denial is answered 403 with the hook's reason (what the viewer page shows), a hook that
//! cannot be reached refuses viewers of a password channel (fails closed, 503) and lets viewers of a
//! public channel through (fails open). The hook is a local receiver on loopback.
//!
//! Issue 52: the hook's "no" holds on every way out, not only the start of watching (a variant
//! playlist or a segment fetched directly is refused too), and every answer of a way out of a channel
//! that is not public is private to shared caches, whoever was admitted (the admin's Basic
//! credentials included).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::media::{publish, segments, wait_exit};
use common::Server;
use serde_json::{json, Value};

/// The hook: `/allow-one` allows the subject `password:1` and denies everyone else ("Tickets are sold
/// out"); `/deny` denies everyone ("The show is over"). Every request's JSON body is kept.
fn hook(rt: &tokio::runtime::Runtime) -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let s1 = seen.clone();
    let s2 = seen.clone();
    let app = axum::Router::new()
        .route(
            "/allow-one",
            axum::routing::post(move |body: axum::body::Bytes| {
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                s1.lock().unwrap().push(v.clone());
                async move {
                    use axum::http::StatusCode;
                    if v["subject"] == "password:1" {
                        (StatusCode::OK, "{}".to_string())
                    } else {
                        (StatusCode::FORBIDDEN, json!({"message": "Tickets are sold out"}).to_string())
                    }
                }
            }),
        )
        .route(
            "/deny",
            axum::routing::post(move |body: axum::body::Bytes| {
                s2.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or_default());
                async { (axum::http::StatusCode::PAYMENT_REQUIRED, "The show is over".to_string()) }
            }),
        );
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

fn message(r: reqwest::blocking::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let v: Value = r.json().unwrap_or_default();
    (status, v["message"].as_str().unwrap_or_default().to_string())
}

#[test]
fn the_play_hook_admits_one_viewer_and_shows_another_the_reason() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (base, seen) = hook(&rt);
    let server = Server::start();
    for (pw, comment) in [("first-password", "paid"), ("second-password", "unpaid")] {
        let r = server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": pw, "comment": comment}));
        assert_eq!(r.json::<Value>().unwrap()["id"], if comment == "paid" { 1 } else { 2 });
    }
    server.set("visibility", json!("password"));
    let hook_at = |path: &str, cache: u32| {
        server.set(
            "viewer/admissionhook",
            json!({"url": format!("{base}{path}"), "secret": "s", "onPlay": true, "cacheSeconds": cache}),
        );
    };
    hook_at("/allow-one", 0);

    // The hook denies the second audience when it unlocks, with its reason.
    let denied = server.post_json("/api/viewer/unlock", &json!({"password": "second-password"}));
    assert_eq!(message(denied), (403, "Tickets are sold out".to_string()));
    // It admits the first; playing asks again (the master playlist; 404 while offline is past the gate).
    let r = server.post_json("/api/viewer/unlock", &json!({"password": "first-password"}));
    assert_eq!(r.status().as_u16(), 200);
    let pass = r.json::<Value>().unwrap()["pass"].as_str().unwrap().to_string();
    let play = |pass: &str| server.client.get(server.url(&format!("/hls/stream.m3u8?pass={pass}"))).send().unwrap();
    assert_ne!(play(&pass).status().as_u16(), 403);
    let asked = seen.lock().unwrap().clone();
    assert!(asked.len() >= 3, "{asked:?}");
    let last = asked.last().unwrap();
    assert_eq!((last["action"].as_str(), last["subject"].as_str()), (Some("play"), Some("password:1")));
    assert_eq!(last["channel"], "default");
    assert_eq!(last["address"], "127.0.0.1");
    // A variant playlist takes the verdict given at the start of watching (not asked again).
    let n = seen.lock().unwrap().len();
    let _ = server.client.get(server.url(&format!("/hls/0/stream.m3u8?pass={pass}"))).send().unwrap();
    assert_eq!(seen.lock().unwrap().len(), n);

    // The hook changes its mind: the next start of watching is refused with the new reason.
    hook_at("/deny", 0);
    assert_eq!(message(play(&pass)), (403, "The show is over".to_string()));

    // A hook that cannot be reached: viewers of a password channel are refused (fail closed) ...
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    server.set(
        "viewer/admissionhook",
        json!({"url": format!("http://{closed}/gone"), "onPlay": true, "cacheSeconds": 0}),
    );
    let (status, msg) = message(server.post_json("/api/viewer/unlock", &json!({"password": "first-password"})));
    assert_eq!(status, 503, "{msg}");
    assert_eq!(message(play(&pass)).0, 503);
    // ... and viewers of a public channel are let through (fail open).
    server.set("visibility", json!("public"));
    let r = server.get("/api/config");
    assert_eq!(r.status().as_u16(), 200);
    assert_ne!(server.get("/hls/stream.m3u8").status().as_u16(), 503);
    assert!(server.log_text().contains("admission hook unreachable"));
}

/// The `Cache-Control` of an answer.
fn cache_control(r: &reqwest::blocking::Response) -> String {
    r.headers().get("cache-control").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// A live stream on the default channel (public, no hook yet): the publisher and a segment's path once
/// variant 0 lists two.
fn live(server: &Server) -> (std::process::Child, String) {
    let ff = publish(server, &server.default_channel().stream_key(), "320x180", 40);
    let variant = server
        .wait_for(Duration::from_secs(40), || {
            let r = server.get("/hls/0/stream.m3u8");
            let text = r.status().is_success().then(|| r.text().ok()).flatten()?;
            (segments(&text).len() >= 2).then_some(text)
        })
        .expect("variant 0 has segments");
    (ff, format!("/hls/0/{}", segments(&variant)[0]))
}

#[test]
fn the_hooks_no_holds_on_every_way_out() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (base, _seen) = hook(&rt);
    let server = Server::start();
    let (mut ff, segment) = live(&server);
    assert_eq!(server.get(&segment).status().as_u16(), 200);

    // A public channel whose hook refuses everyone: the start of watching and every way after it.
    server.set("viewer/admissionhook", json!({"url": format!("{base}/deny"), "onPlay": true, "cacheSeconds": 0}));
    for way in ["/hls/stream.m3u8", "/hls/0/stream.m3u8", segment.as_str()] {
        assert_eq!(message(server.get(way)), (403, "The show is over".to_string()), "{way}");
    }

    // A password channel: a viewer the hook admits plays; once it refuses (a new hook URL, nothing
    // cached), the variant playlist and the segment are refused too, fetched without the master.
    let r = server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "first-password"}));
    assert!(r.status().is_success());
    server.set("visibility", json!("password"));
    server.set("viewer/admissionhook", json!({"url": format!("{base}/allow-one"), "onPlay": true, "cacheSeconds": 0}));
    let r = server.post_json("/api/viewer/unlock", &json!({"password": "first-password"}));
    assert_eq!(r.status().as_u16(), 200);
    let pass = r.json::<Value>().unwrap()["pass"].as_str().unwrap().to_string();
    let with = |way: &str| server.client.get(server.url(way)).bearer_auth(&pass).send().unwrap();
    for way in ["/hls/0/stream.m3u8", segment.as_str()] {
        assert_eq!(with(way).status().as_u16(), 200, "{way} admitted");
    }
    server.set("viewer/admissionhook", json!({"url": format!("{base}/deny"), "onPlay": true, "cacheSeconds": 0}));
    for way in ["/hls/0/stream.m3u8", segment.as_str(), "/hls/stream.m3u8"] {
        assert_eq!(message(with(way)), (403, "The show is over".to_string()), "{way} with a pass");
    }
    let _ = wait_exit(&mut ff, Duration::from_secs(1));
}

#[test]
fn the_admins_answers_on_a_private_channel_are_private() {
    let server = Server::start();
    let (mut ff, segment) = live(&server);
    let r = server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "open sesame"}));
    assert!(r.status().is_success());
    server.set("visibility", json!("password"));
    for way in ["/hls/stream.m3u8", "/hls/0/stream.m3u8", segment.as_str()] {
        let r = server.admin_get(way);
        assert_eq!(r.status().as_u16(), 200, "{way} for the admin");
        let cc = cache_control(&r);
        assert!(cc.starts_with("private") || cc.contains("no-store"), "{way}: Cache-Control {cc}");
        assert!(!cc.contains("public"), "{way}: Cache-Control {cc}");
    }
    let _ = wait_exit(&mut ff, Duration::from_secs(1));
}
