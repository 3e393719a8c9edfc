//! Crash consistency: chat traffic and setter changes while castd is killed with SIGKILL at a random
//! moment, 20 times on one data directory. After each kill the database passes
//! `PRAGMA integrity_check`, and after the restart every chat message whose echo a client received and
//! every setting whose setter answered 200 before the kill is there.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::chatclient::{join, next_where};
use common::Server;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const ROUNDS: usize = 20;

/// Chat as fast as echoes come back; returns the bodies acknowledged (echoed) before the connection died.
fn chat_until_killed(server: &Server, round: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<String>> {
    let mut chatter = join(server, &format!("crasher{round}"));
    std::thread::spawn(move || {
        let mut acked = Vec::new();
        for n in 0.. {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let body = format!("round {round} message {n}");
            // The socket may already be gone (the daemon was killed): that ends the round.
            if chatter
                .ws
                .send(tungstenite::Message::Text(json!({"type": "CHAT", "body": body}).to_string().into()))
                .is_err()
            {
                break;
            }
            let echoed = next_where(&mut chatter.ws, Duration::from_secs(3), |e| {
                e["type"] == "CHAT" && e["body"].as_str().is_some_and(|b| b.contains(&body))
            });
            match echoed {
                Some(_) => acked.push(body),
                None => break,
            }
        }
        acked
    })
}

/// Change the stream title and the server name in turn; returns the last value of each answered 200.
fn set_until_killed(
    server: &Server,
    round: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Option<u64>, Option<u64>)> {
    let url = server.url("/api/admin/config/");
    let pw = server.admin_password.clone();
    std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let (mut title, mut name) = (None, None);
        for n in 0u64.. {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let (setter, value) = if n % 2 == 0 {
                ("streamtitle", format!("title {round}:{n}"))
            } else {
                ("name", format!("name {round}:{n}"))
            };
            let r = client
                .post(format!("{url}{setter}"))
                .basic_auth("admin", Some(&pw))
                .json(&json!({ "value": value }))
                .send();
            match r {
                Ok(r) if r.status().is_success() => {
                    let slot = if n % 2 == 0 { &mut title } else { &mut name };
                    *slot = Some(n);
                }
                _ => break,
            }
        }
        (title, name)
    })
}

/// `round:n` of a value written by `set_until_killed`, as a total order.
fn seq(v: &str) -> (usize, u64) {
    let tail = v.rsplit(' ').next().unwrap_or_default();
    let (r, n) = tail.split_once(':').unwrap_or(("0", "0"));
    (r.parse().unwrap_or(0), n.parse().unwrap_or(0))
}

/// After a kill: `PRAGMA integrity_check` is ok; the stored chat message bodies.
fn integrity(db: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("open the database after the kill");
    let result: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check");
    assert_eq!(result, "ok", "integrity_check after the kill");
    let mut stmt = conn.prepare("SELECT body FROM chat_messages").expect("chat_messages");
    let bodies = stmt.query_map([], |r| r.get::<_, String>(0)).expect("bodies").filter_map(Result::ok).collect();
    bodies
}

#[test]
fn kill_9_during_chat_and_setter_traffic_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let seed: u64 = std::env::var("CASTD_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let acked_messages: Arc<Mutex<Vec<String>>> = Arc::default();
    // (round, value counter) of the last acknowledged change of each setting.
    let mut last_title: Option<(usize, u64)> = None;
    let mut last_name: Option<(usize, u64)> = None;
    let mut admin_password = String::new();
    let started = Instant::now();
    let mut kills_mid_traffic = 0;
    for round in 0..ROUNDS {
        let mut server = Server::start_in(&dir, &[]);
        if round == 0 {
            admin_password = server.admin_password.clone();
            server.set("chat/spamprotectionenabled", json!(false));
        } else {
            server.admin_password = admin_password.clone();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let chat = chat_until_killed(&server, round, stop.clone());
        let setters = set_until_killed(&server, round, stop.clone());
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..800)));
        let pid = server.pid().expect("running");
        common::unsafe_kill(pid, 9);
        drop(server); // reaps the killed process
        stop.store(true, Ordering::Relaxed);
        let acked = chat.join().expect("chat thread");
        let (title, name) = setters.join().expect("setter thread");
        if !acked.is_empty() || title.is_some() {
            kills_mid_traffic += 1;
        }
        acked_messages.lock().unwrap().extend(acked);
        if let Some(n) = title {
            last_title = Some((round, n));
        }
        if let Some(n) = name {
            last_name = Some((round, n));
        }
        let stored = integrity(&dir.join("castd.db"));
        let acked = acked_messages.lock().unwrap();
        let missing: Vec<&String> =
            acked.iter().filter(|b| !stored.iter().any(|have| have.contains(b.as_str()))).collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} of {} acknowledged messages lost: {missing:?}",
            missing.len(),
            acked.len()
        );
    }
    // Restart once more and check everything acknowledged.
    let mut server = Server::start_in(&dir, &[]);
    server.admin_password = admin_password;
    let acked = acked_messages.lock().unwrap();
    let config: Value = server.admin_json("/api/admin/serverconfig");
    let title = config["instanceDetails"]["streamTitle"].as_str().unwrap_or_default().to_string();
    let name = config["instanceDetails"]["name"].as_str().unwrap_or_default().to_string();
    if let Some(t) = last_title {
        assert!(seq(&title) >= t, "stream title {title:?} is older than the last acknowledged {t:?}");
    }
    if let Some(n) = last_name {
        assert!(seq(&name) >= n, "server name {name:?} is older than the last acknowledged {n:?}");
    }
    assert!(kills_mid_traffic >= ROUNDS / 2, "only {kills_mid_traffic} kills came during traffic");
    println!(
        "crash: {ROUNDS} SIGKILL rounds ({kills_mid_traffic} mid-traffic) in {:.1} s, {} acknowledged messages and the last settings kept, seed {seed}",
        started.elapsed().as_secs_f64(),
        acked.len()
    );
}
