//! Federation fan-out benchmark: how long castd takes to deliver one post to N follower inboxes.
//!
//! Starts castd (the binary given as the first argument) on loopback with
//! `--federation-allow-http-loopback`, and a local follower farm: one HTTP server that serves N actor
//! documents (one shared RSA key, distinct key ids) and their inboxes, and that verifies the HTTP
//! Signature and digest of every delivery against castd's published key. Each actor follows castd
//! through its signed inbox (castd answers each with a signed Accept). Then the admin posts a note
//! (`/api/admin/federation/send`, the same path as the go-live post: one Create per follower inbox
//! through the delivery queue) and the time until every live inbox has received it is measured,
//! together with castd's RSS before and its peak (VmHWM).
//!
//! With `DEAD > 0`, that many of the followers' inboxes are on a second listener that accepts
//! connections and never answers: the figure is then the time until the live ones have the post.
//!
//! Usage: fanout CASTD_BIN FOLLOWERS DEAD  (prints one result line as JSON)

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::{get, post};
use axum::Router;
use castd::federation::signatures;
use rsa::pkcs8::{DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::{RsaPrivateKey, RsaPublicKey};
use serde_json::{json, Value};

struct Farm {
    base: String,
    dead_base: String,
    dead_from: usize,
    pem: String,
    castd_key: parking_lot::Mutex<Option<RsaPublicKey>>,
    accepts: AtomicU64,
    creates: AtomicU64,
    /// Inboxes that got the post, to count duplicate deliveries.
    seen: parking_lot::Mutex<std::collections::HashSet<String>>,
    duplicates: AtomicU64,
    bad: AtomicU64,
}

async fn actor(State(f): State<Arc<Farm>>, Path(id): Path<usize>) -> axum::Json<Value> {
    let iri = format!("{}/users/{id}", f.base);
    let inbox = if id >= f.dead_from { format!("{}/users/{id}/inbox", f.dead_base) } else { format!("{iri}/inbox") };
    axum::Json(json!({
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": iri, "type": "Person", "preferredUsername": format!("u{id}"), "inbox": inbox,
        "publicKey": {"id": format!("{iri}#main-key"), "owner": iri, "publicKeyPem": f.pem},
    }))
}

async fn inbox(State(f): State<Arc<Farm>>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    let key = f.castd_key.lock().clone();
    let ok = key.is_some_and(|key| {
        let Some(sig) = headers.get("signature").and_then(|v| v.to_str().ok()) else { return false };
        let Ok(p) = signatures::parse(sig) else { return false };
        let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        signatures::verify(&p, "POST", uri.path(), &get, Some(&body), &key, chrono::Utc::now()).is_ok()
    });
    if !ok {
        f.bad.fetch_add(1, Ordering::Relaxed);
        return StatusCode::UNAUTHORIZED;
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
    match v["type"].as_str() {
        Some("Accept") => f.accepts.fetch_add(1, Ordering::Relaxed),
        Some("Create") => {
            if f.seen.lock().insert(uri.path().to_string()) {
                f.creates.fetch_add(1, Ordering::Relaxed)
            } else {
                f.duplicates.fetch_add(1, Ordering::Relaxed)
            }
        }
        _ => 0,
    };
    StatusCode::ACCEPTED
}

fn rss_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = args.get(1).expect("usage: fanout CASTD_BIN FOLLOWERS DEAD").clone();
    let n: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1000);
    let dead: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);

    // the follower farm and the dead listener
    let key = RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    let pem = RsaPublicKey::from(&key).to_public_key_pem(LineEnding::LF).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let farm = Arc::new(Farm {
        base: format!("http://{}", listener.local_addr().unwrap()),
        dead_base: format!("http://{}", dead_listener.local_addr().unwrap()),
        dead_from: n - dead,
        pem,
        castd_key: Default::default(),
        accepts: AtomicU64::new(0),
        creates: AtomicU64::new(0),
        seen: Default::default(),
        duplicates: AtomicU64::new(0),
        bad: AtomicU64::new(0),
    });
    let app =
        Router::new().route("/users/{id}", get(actor)).route("/users/{id}/inbox", post(inbox)).with_state(farm.clone());
    tokio::spawn(async move { axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await });
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = dead_listener.accept().await {
            held.push(s); // never read, never answered
        }
    });

    // castd
    let data = tempfile::tempdir().unwrap();
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let pw = "bench-admin-password-1";
    let mut child = std::process::Command::new(&bin)
        .args(["--data-dir", data.path().to_str().unwrap(), "--webserverip", "127.0.0.1"])
        .args(["--webserverport", &port.to_string(), "--rtmpport", "0", "--adminpassword", pw])
        .args(["--log-level", "warn", "--federation-allow-http-loopback"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start castd");
    let pid = child.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    assert!(
        wait_until(Duration::from_secs(20), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()).await,
        "castd did not start"
    );
    for (k, v) in [("serverurl", json!(base)), ("federation/enable", json!(true))] {
        let r = http
            .post(format!("{base}/api/admin/config/{k}"))
            .basic_auth("admin", Some(pw))
            .json(&json!({ "value": v }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "setting {k}");
    }
    let actor_doc: Value = http
        .get(format!("{base}/federation/user/streamer"))
        .header("accept", "application/activity+json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let castd_pem = actor_doc["publicKey"]["publicKeyPem"].as_str().unwrap().to_string();
    *farm.castd_key.lock() = Some(RsaPublicKey::from_public_key_pem(&castd_pem).unwrap());

    // every actor follows castd (signed), 16 at a time
    let inbox_url = format!("{base}/federation/user/streamer/inbox");
    let sem = Arc::new(tokio::sync::Semaphore::new(16));
    let key = Arc::new(key);
    let mut tasks = Vec::new();
    let started = Instant::now();
    for id in 0..n {
        let (sem, key, http, farm, inbox_url, base) =
            (sem.clone(), key.clone(), http.clone(), farm.clone(), inbox_url.clone(), base.clone());
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let iri = format!("{}/users/{id}", farm.base);
            let body = json!({"id": format!("{iri}/follow"), "type": "Follow", "actor": iri,
                "object": format!("{base}/federation/user/streamer")})
            .to_string();
            let u = url::Url::parse(&inbox_url).unwrap();
            let mut req = http.post(&inbox_url).body(body.clone());
            for (k, v) in signatures::sign(
                &key,
                &format!("{iri}#main-key"),
                "POST",
                &u,
                Some(body.as_bytes()),
                chrono::Utc::now(),
            ) {
                req = req.header(k, v);
            }
            let status = req.send().await.unwrap().status();
            assert_eq!(status.as_u16(), 202, "follow {id}");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let live = (n - dead) as u64;
    let follow_secs = started.elapsed().as_secs_f64();
    assert!(
        wait_until(Duration::from_secs(120), || farm.accepts.load(Ordering::Relaxed) >= live).await,
        "the Accepts did not all arrive"
    );
    let accepts_secs = started.elapsed().as_secs_f64();
    let rss_before = rss_kb(pid, "VmRSS:");

    // the post, to every follower
    let t0 = Instant::now();
    let r = http
        .post(format!("{base}/api/admin/federation/send"))
        .basic_auth("admin", Some(pw))
        .json(&json!({"value": "I've gone live! (benchmark)"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let done = wait_until(Duration::from_secs(300), || farm.creates.load(Ordering::Relaxed) >= live).await;
    let secs = t0.elapsed().as_secs_f64();
    let rss_after = rss_kb(pid, "VmRSS:");
    let hwm = rss_kb(pid, "VmHWM:");
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "{}",
        json!({
            "followers": n,
            "dead": dead,
            "delivered": farm.creates.load(Ordering::Relaxed),
            "complete": done,
            "bad_signatures": farm.bad.load(Ordering::Relaxed),
            "duplicates": farm.duplicates.load(Ordering::Relaxed),
            "fanout_seconds": (secs * 1000.0).round() / 1000.0,
            "deliveries_per_second": ((live as f64 / secs) * 10.0).round() / 10.0,
            "follows_seconds": (follow_secs * 100.0).round() / 100.0,
            "accepts_seconds": (accepts_secs * 100.0).round() / 100.0,
            "rss_before_mb": rss_before as f64 / 1024.0,
            "rss_after_mb": rss_after as f64 / 1024.0,
            "peak_rss_mb": hwm as f64 / 1024.0,
        })
    );
}
