//! The admission hook on play (#42): before a pass is issued and when a viewer starts watching (the
//! master playlist, a WHEP offer, the chat socket), castd asks the channel's hook about the pass's
//! subject; a denial is answered 403 with the hook's reason (what the viewer page shows), a hook that
//! cannot be reached refuses viewers of a password channel (fails closed, 503) and lets viewers of a
//! public channel through (fails open). The hook is a local receiver on loopback.

mod common;

use std::sync::{Arc, Mutex};

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
    // Segments are not asked about (only the start of watching is).
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
