//! Beyond one box (`cluster`): an origin and two edges sharing one chat through a real `redis-server`.
//!
//! One cluster for the whole file (the steps run in order in one test, as they build on each other):
//! 300 clients over the three nodes and 20 senders → every client gets every message, in the same
//! order on every node, stored once at the origin; hide and disable from the admin (called through an
//! edge) apply on every node; Redis killed for 10 s and restarted → every message is either refused
//! to its sender ("temporarily unavailable") or delivered exactly once everywhere, in one order; the
//! origin restarted → the edges' sockets stay and chat resumes; an edge killed → its clients
//! reconnect through the other and reload the history.

mod common;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::chatclient::{self, connect_raw, next_of, read_events, register, register_from, say, Ws};
use common::redis::Redis;
use common::slowproxy::SlowProxy;
use common::Server;
use serde_json::{json, Value};

const CLIENTS: usize = 300;
const SENDERS: usize = 20;
const PER_SENDER: usize = 5;
/// The origin aborts right after storing an edge's message with this text (a test switch).
const CRASH_MARK: &str = "crash-right-after-store";

struct Cluster {
    redis: Redis,
    _secret_dir: tempfile::TempDir,
    origin: Option<Server>,
    /// The edges reach the origin through this (so it may restart on another port).
    front: SlowProxy,
    edges: Vec<Server>,
}

fn start_cluster() -> Cluster {
    let redis = Redis::start();
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("cluster-secret");
    std::fs::write(&secret, "s3cret-for-the-cluster-test\n").unwrap();
    let (url, secret) = (redis.url(), secret.to_str().unwrap().to_string());
    let origin = Server::start_with_env(
        &["--redis-url", &url, "--cluster-secret", &secret],
        &[("CASTD_DEBUG_CLUSTER_CRASH_AFTER_STORE", CRASH_MARK)],
    );
    let front = SlowProxy::start(origin.web_port, Duration::ZERO);
    let via = front.endpoint();
    let edges = (0..2)
        .map(|_| Server::start_with_args(&["--origin", &via, "--redis-url", &url, "--cluster-secret", &secret]))
        .collect();
    Cluster { redis, _secret_dir: secret_dir, origin: Some(origin), front, edges }
}

impl Cluster {
    fn origin(&self) -> &Server {
        self.origin.as_ref().expect("the origin")
    }

    fn node(&self, i: usize) -> &Server {
        match i % 3 {
            0 => self.origin(),
            n => &self.edges[n - 1],
        }
    }
}

/// Connect with `token` and wait for CONNECTED_USER_INFO.
fn connect(s: &Server, token: &str) -> Ws {
    let mut ws = connect_raw(s, token);
    next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(20)).expect("CONNECTED_USER_INFO");
    ws
}

/// CHAT events whose body starts with `prefix`, as (id, body), read until `want` of them or `deadline`.
fn collect(ws: &mut Ws, prefix: &str, want: usize, deadline: Instant, other: &mut Vec<Value>) -> Vec<(String, String)> {
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        match read_events(ws, Duration::from_millis(300)) {
            Ok(evs) => {
                for e in evs {
                    let body = e["body"].as_str().unwrap_or_default();
                    if e["type"] == "CHAT" && body.contains(prefix) {
                        got.push((e["id"].as_str().unwrap_or_default().to_string(), plain(body)));
                    } else {
                        other.push(e);
                    }
                }
            }
            Err(_) => break,
        }
    }
    got
}

/// The text of a rendered body (`<p>m-1-2</p>` → `m-1-2`).
fn plain(body: &str) -> String {
    body.trim().trim_start_matches("<p>").trim_end_matches("</p>").to_string()
}

fn stored(origin: &Server, prefix: &str) -> Vec<(String, String)> {
    let all = origin.admin_json("/api/admin/chat/messages");
    all.as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "CHAT" && m["body"].as_str().unwrap_or_default().contains(prefix))
        .map(|m| (m["id"].as_str().unwrap().to_string(), plain(m["body"].as_str().unwrap())))
        .collect()
}

fn admin_post(via: &Server, origin: &Server, path: &str, body: &Value) -> reqwest::blocking::Response {
    via.client.post(via.url(path)).basic_auth("admin", Some(&origin.admin_password)).json(body).send().unwrap()
}

#[test]
fn origin_and_two_edges_share_one_chat_over_redis() {
    let mut c = start_cluster();
    let t0 = Instant::now();

    // The edge's token check and the secret: the origin refuses a wrong secret; an edge does not
    // forward the cluster routes at all.
    let (_, token, _) = register(c.node(1), Some("probe"));
    let url = c.origin().url(&format!("/api/cluster/chat/lookup?accessToken={token}&ip=127.0.0.1"));
    let wrong = c.origin().client.get(&url).header("x-castd-cluster-secret", "nope").send().unwrap();
    assert_eq!(wrong.status(), 403, "a wrong cluster secret is refused");
    let right =
        c.origin().client.get(&url).header("x-castd-cluster-secret", "s3cret-for-the-cluster-test").send().unwrap();
    assert_eq!(right.status(), 200);
    assert_eq!(right.json::<Value>().unwrap()["status"], "ok");
    let through_edge = c.edges[0].get(&format!("/api/cluster/chat/lookup?accessToken={token}&ip=127.0.0.1"));
    assert_eq!(through_edge.status(), 404, "edges do not pass the cluster routes on");
    // The API through an edge is the origin's.
    assert_eq!(c.edges[0].get_json("/api/config")["name"], c.origin().get_json("/api/config")["name"]);
    // The admin through an edge, as a browser sends it (Origin: the edge's address): the origin sees the
    // Host the browser asked for (the edge passes it on), so its same-origin check lets the call in.
    let edge = &c.edges[0];
    let r = edge
        .client
        .post(edge.url("/api/admin/config/chat/spamprotectionenabled"))
        .basic_auth("admin", Some(&c.origin().admin_password))
        .header("origin", edge.base.as_str())
        .json(&json!({"value": true}))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "an admin call through an edge with the browser's Origin: {}", r.status());

    // An edge keeps no database of its own, and applies the origin's chat settings: with flood
    // protection turned off at the origin, an edge's client may send a burst (an edge on its own
    // defaults would mute it after the first message).
    for (n, edge) in c.edges.iter().enumerate() {
        let files: Vec<String> = std::fs::read_dir(&edge.data_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!files.iter().any(|f| f.contains(".db")), "edge {n} made a database: {files:?}");
        assert!(!files.iter().any(|f| f == "initial-admin-password"), "edge {n} wrote an admin password: {files:?}");
    }
    let set_flood_protection = |on: bool| {
        let r =
            admin_post(c.origin(), c.origin(), "/api/admin/config/chat/spamprotectionenabled", &json!({"value": on}));
        assert!(r.status().is_success(), "{}", r.status());
    };
    set_flood_protection(false);
    std::thread::sleep(Duration::from_secs(5)); // the edges ask every 2 s
    let (_, bt, _) = register(c.node(2), None);
    let mut burst = connect(c.node(2), &bt);
    for k in 0..4 {
        say(&mut burst, &format!("burst-{k}"));
    }
    let mut other = Vec::new();
    let got = collect(&mut burst, "burst-", 4, Instant::now() + Duration::from_secs(15), &mut other);
    assert_eq!(got.len(), 4, "an edge applied the origin's flood protection setting: {got:?} {other:?}");
    set_flood_protection(true);
    drop(burst);

    // 1. 300 readers over the three nodes, 20 senders, ten to a client address (as viewers come from
    // many addresses; castd limits registrations and sockets per address).
    let tokens: Vec<(usize, String)> = (0..CLIENTS)
        .map(|i| {
            let (_, t, _) = register_from(c.node(i), None, client_address(i));
            (i % 3, t)
        })
        .collect();
    let total = SENDERS * PER_SENDER;
    let ready = Arc::new(Barrier::new(CLIENTS + 1));
    let ports: Vec<u16> = (0..3).map(|n| c.node(n).web_port).collect();
    let readers: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, (node, token))| {
            let (ready, port) = (ready.clone(), ports[node]);
            std::thread::spawn(move || {
                let mut ws = connect_port_from(port, &token, client_address(i));
                ready.wait();
                let mut other = Vec::new();
                let got = collect(&mut ws, "m-", total, Instant::now() + Duration::from_secs(60), &mut other);
                (node, got)
            })
        })
        .collect();
    ready.wait();
    eprintln!("{:?}: 300 readers connected", t0.elapsed());
    // Presence: the origin lists every node's clients, each under an id of its own across the
    // cluster (every node's hub numbers its clients from 1), within two presence rounds.
    let listed = c.origin().wait_for(Duration::from_secs(20), || {
        let clients = c.origin().admin_json("/api/admin/chat/clients");
        let clients = clients.as_array().unwrap().clone();
        (clients.len() >= CLIENTS).then_some(clients)
    });
    let listed = listed.expect("the origin lists the 300 clients of the three nodes");
    let ids: HashSet<u64> = listed.iter().map(|c| c["id"].as_u64().expect("a numeric client id")).collect();
    assert_eq!(ids.len(), listed.len(), "client ids repeat across the nodes in /api/admin/chat/clients");
    assert!(ids.iter().all(|id| *id < 1 << 53), "client ids stay exact JSON numbers");
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let from = client_address(CLIENTS + s);
            let (_, token, _) = register_from(c.node(s), None, from);
            let port = ports[s % 3];
            std::thread::spawn(move || {
                let mut ws = connect_port_from(port, &token, from);
                for k in 0..PER_SENDER {
                    say(&mut ws, &format!("m-{s}-{k}"));
                    std::thread::sleep(Duration::from_millis(700));
                }
                // Stay until the room has had every message (a closing sender's part notice is fine).
                std::thread::sleep(Duration::from_secs(2));
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let mut orders: HashMap<Vec<String>, usize> = HashMap::new();
    for r in readers {
        let (node, got) = r.join().unwrap();
        assert_eq!(got.len(), total, "a client on node {node} got {} of {total} messages", got.len());
        *orders.entry(got.iter().map(|(id, _)| id.clone()).collect()).or_default() += 1;
    }
    assert_eq!(orders.len(), 1, "every client on every node saw one order ({} different orders)", orders.len());
    let order = orders.into_keys().next().unwrap();
    let stored_m = stored(c.origin(), "m-");
    assert_eq!(stored_m.len(), total, "each message stored once at the origin");
    let stored_ids: HashSet<&String> = stored_m.iter().map(|(id, _)| id).collect();
    assert!(order.iter().all(|id| stored_ids.contains(id)), "clients saw the stored ids");
    eprintln!("{:?}: {total} messages to {CLIENTS} clients in one order, stored once", t0.elapsed());

    // 2. Moderation from the admin (through an edge) applies on every node.
    let mut watchers: Vec<(Ws, String)> = (0..3)
        .map(|n| {
            let (id, t, _) = register(c.node(n), None);
            (connect(c.node(n), &t), id)
        })
        .collect();
    // Presence: the origin's admin client list shows every node's clients (within two presence rounds).
    let ids: Vec<String> = watchers.iter().map(|(_, id)| id.clone()).collect();
    let listed = c.origin().wait_for(Duration::from_secs(20), || {
        let clients = c.origin().admin_json("/api/admin/chat/clients");
        let users: HashSet<&str> =
            clients.as_array().unwrap().iter().filter_map(|c| c["user"]["id"].as_str()).collect();
        ids.iter().all(|id| users.contains(id.as_str())).then_some(())
    });
    assert!(listed.is_some(), "the origin lists the edges' chat clients");
    // A system message to one client by the id the list gives it reaches it on its node.
    let r = c.origin().admin_post(
        "/api/admin/accesstokens/create",
        &json!({"name": "announcer", "scopes": ["CAN_SEND_SYSTEM_MESSAGES"]}),
    );
    let sys = r.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let clients = c.origin().admin_json("/api/admin/chat/clients");
    let on_edge2 = clients.as_array().unwrap().iter().find(|c| c["user"]["id"] == ids[2].as_str()).unwrap();
    let path = format!("/api/integrations/chat/system/client/{}", on_edge2["id"]);
    let r = c.edges[0].client.post(c.edges[0].url(&path)).bearer_auth(&sys).json(&json!({"body": "just you"})).send();
    assert_eq!(r.unwrap().status(), 200, "a system message to {path}");
    let ev =
        next_where_body(&mut watchers[2].0, "just you", Duration::from_secs(10)).expect("it reached edge 2's client");
    assert_eq!(ev["type"], "SYSTEM");
    let hidden = order[0].clone();
    let r = admin_post(
        &c.edges[1],
        c.origin(),
        "/api/admin/chat/messagevisibility",
        &json!({"idArray": [hidden], "visible": false}),
    );
    assert!(r.status().is_success(), "hide through an edge: {}", r.status());
    for (n, (ws, _)) in watchers.iter_mut().enumerate() {
        let ev = next_of(ws, "VISIBILITY-UPDATE", Duration::from_secs(10))
            .unwrap_or_else(|| panic!("node {n} did not hear the hide"));
        assert!(ev["ids"].as_array().unwrap().iter().any(|i| *i == hidden.as_str()), "{ev}");
        assert_eq!(ev["visible"], false);
    }
    // A user connected to two edges is disabled: both sockets hear it and close, on every node.
    let (victim, victim_token, _) = register(c.node(1), Some("victim"));
    let mut v1 = connect(c.node(1), &victim_token);
    let mut v2 = connect(c.node(2), &victim_token);
    let r = admin_post(
        c.origin(),
        c.origin(),
        "/api/admin/chat/users/setenabled",
        &json!({"userId": victim, "enabled": false}),
    );
    assert!(r.status().is_success());
    for (n, ws) in [(1, &mut v1), (2, &mut v2)] {
        assert!(
            next_of(ws, "ERROR_USER_DISABLED", Duration::from_secs(10)).is_some(),
            "the disabled user's socket on node {n} was told"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while read_events(ws, Duration::from_millis(300)).is_ok() {
            assert!(Instant::now() < deadline, "the disabled user's socket on node {n} stays open");
        }
    }
    for (n, (ws, _)) in watchers.iter_mut().enumerate() {
        let ev = next_where_body(ws, "has been removed from chat", Duration::from_secs(10));
        assert!(ev.is_some(), "node {n} heard the removal");
    }
    std::thread::sleep(Duration::from_secs(2));
    let mut again = connect_raw(c.node(2), &victim_token);
    assert!(
        next_of(&mut again, "ERROR_USER_DISABLED", Duration::from_secs(10)).is_some(),
        "a disabled user is refused on an edge"
    );
    eprintln!("{:?}: moderation applied on every node", t0.elapsed());

    // 3. Redis killed for 10 s mid-conversation, then restarted on its append-only file.
    let fault_senders: Vec<_> = (0..3)
        .map(|n| {
            let (_, t, _) = register(c.node(n), None);
            (n, t)
        })
        .collect();
    let stop_at = Instant::now() + Duration::from_secs(20);
    let sending: Vec<_> = fault_senders
        .into_iter()
        .map(|(n, token)| {
            let port = ports[n];
            std::thread::spawn(move || {
                let mut ws = connect_port(port, &token);
                let (mut sent, mut refused, mut i) = (Vec::new(), 0usize, 0);
                while Instant::now() < stop_at {
                    let body = format!("r-{n}-{i}");
                    say(&mut ws, &body);
                    sent.push(body);
                    i += 1;
                    let until = Instant::now() + Duration::from_millis(900);
                    while Instant::now() < until {
                        for e in read_events(&mut ws, Duration::from_millis(100)).unwrap_or_default() {
                            refused += usize::from(is_unavailable(&e));
                        }
                    }
                }
                // Late refusals.
                let until = Instant::now() + Duration::from_secs(4);
                while Instant::now() < until {
                    for e in read_events(&mut ws, Duration::from_millis(100)).unwrap_or_default() {
                        refused += usize::from(is_unavailable(&e));
                    }
                }
                (n, sent, refused)
            })
        })
        .collect();
    let watching: Vec<_> = watchers
        .drain(..)
        .enumerate()
        .map(|(n, (mut ws, _))| {
            std::thread::spawn(move || {
                let mut other = Vec::new();
                let got = collect(&mut ws, "r-", usize::MAX, stop_at + Duration::from_secs(10), &mut other);
                (n, got)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    c.redis.kill();
    eprintln!("{:?}: Redis killed", t0.elapsed());
    std::thread::sleep(Duration::from_secs(10));
    c.redis.restart();
    eprintln!("{:?}: Redis restarted", t0.elapsed());
    let mut sent_by_node = HashMap::new();
    for s in sending {
        let (n, sent, refused) = s.join().unwrap();
        sent_by_node.insert(n, (sent, refused));
    }
    let stored_r: Vec<String> = stored(c.origin(), "r-").into_iter().map(|(_, b)| b).collect();
    let stored_set: HashSet<&String> = stored_r.iter().collect();
    assert_eq!(stored_set.len(), stored_r.len(), "no message stored twice: {stored_r:?}");
    let mut seen: Option<Vec<String>> = None;
    for w in watching {
        let (n, got) = w.join().unwrap();
        let bodies: Vec<String> = got.into_iter().map(|(_, b)| b).collect();
        let set: HashSet<&String> = bodies.iter().collect();
        assert_eq!(set.len(), bodies.len(), "node {n} got a message twice: {bodies:?}");
        assert_eq!(set, stored_set, "node {n} got exactly what the origin stored");
        match &seen {
            None => seen = Some(bodies),
            Some(first) => assert_eq!(first, &bodies, "node {n} saw another order"),
        }
    }
    for (n, (sent, refused)) in &sent_by_node {
        let delivered = sent.iter().filter(|b| stored_set.contains(b)).count();
        assert_eq!(
            delivered + refused,
            sent.len(),
            "node {n}: every message was delivered or refused to its sender, never lost (sent {}, delivered {delivered}, refused {refused})",
            sent.len()
        );
        if *n == 0 {
            assert_eq!(*refused, 0, "the origin's own clients are served while Redis is down");
        } else {
            assert!(*refused > 0, "an edge's client is told while Redis is down");
        }
    }
    eprintln!("{:?}: Redis outage: {sent_by_node:?}", t0.elapsed());

    // 4. The origin restarted: the edges keep their sockets and resume (a message sent just before
    // the restart and one after reach an edge's client over the same sockets, each stored once).
    let (_, wt, _) = register(c.node(2), None);
    let mut watcher = connect(c.node(2), &wt);
    let (sender_id, st, _) = register(c.node(1), None);
    let mut sender = connect(c.node(1), &st);
    say(&mut sender, "o-before");
    let origin = c.origin.take().expect("the origin").restart();
    c.front.retarget(origin.web_port);
    c.origin = Some(origin);
    eprintln!("{:?}: origin restarted", t0.elapsed());
    say(&mut sender, "o-after");
    let mut other = Vec::new();
    let got = collect(&mut watcher, "o-", 2, Instant::now() + Duration::from_secs(30), &mut other);
    let bodies: Vec<&str> = got.iter().map(|(_, b)| b.as_str()).collect();
    assert_eq!(bodies, ["o-before", "o-after"], "an edge's client kept its socket through the origin's restart");
    let stored_o: Vec<String> = stored(c.origin(), "o-").into_iter().map(|(_, b)| b).collect();
    assert_eq!(stored_o.len(), 2, "each stored once: {stored_o:?}");
    // 4b. The origin killed after storing an edge's message and before anything was sent: restarted,
    // it is redelivered the inbound entry, does not store it again, and sends it to the edges once.
    say(&mut sender, &format!("o-{CRASH_MARK}"));
    let died = c.origin().wait_for(Duration::from_secs(20), || {
        c.origin().client.get(c.origin().url("/api/status")).send().is_err().then_some(())
    });
    assert!(died.is_some(), "the origin's crash switch did not fire");
    let origin = c.origin.take().expect("the origin").restart();
    c.front.retarget(origin.web_port);
    c.origin = Some(origin);
    let want = format!("o-{CRASH_MARK}");
    let mut got = collect(&mut watcher, &want, 1, Instant::now() + Duration::from_secs(30), &mut other);
    got.extend(collect(&mut watcher, &want, 1, Instant::now() + Duration::from_secs(3), &mut other));
    let bodies: Vec<&str> = got.iter().map(|(_, b)| b.as_str()).collect();
    assert_eq!(bodies, [want.as_str()], "the message stored just before the crash reached the edges once");
    let stored_o: Vec<String> = stored(c.origin(), "o-").into_iter().map(|(_, b)| b).collect();
    assert_eq!(stored_o.iter().filter(|b| **b == want).count(), 1, "stored once: {stored_o:?}");
    eprintln!("{:?}: a message stored just before the origin crashed was sent after its restart", t0.elapsed());
    let (_, late, _) = register(c.node(2), None);
    let _late = connect(c.node(2), &late);

    // 5. An edge killed: its clients reconnect through the other and reload the history, and the
    // origin's counts drop what the dead edge held (its presence key expires) within 30 s.
    let (_, token, _) = register(c.node(1), Some("wanderer"));
    let _on_edge1 = connect(c.node(1), &token);
    // A viewer watching through the edge: its playlist requests count it there, and only there (the
    // origin serves the playlist, a file in its HLS directory, without counting it again).
    let hls_dir = c.origin().data_dir.join("hls");
    std::fs::create_dir_all(&hls_dir).unwrap();
    std::fs::write(hls_dir.join("stream.m3u8"), "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n").unwrap();
    const VIEWER_UA: &str = "viewer-through-the-dead-edge";
    let playlist =
        c.edges[0].client.get(c.edges[0].url("/hls/stream.m3u8")).header("user-agent", VIEWER_UA).send().unwrap();
    assert_eq!(playlist.status(), 200, "the origin's playlist through the edge");
    assert!(playlist.text().unwrap().starts_with("#EXTM3U"));
    let edge_port = c.edges[0].web_port;
    let viewer = std::thread::spawn(move || {
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let url = format!("http://127.0.0.1:{edge_port}/hls/stream.m3u8");
        while client.get(&url).header("user-agent", VIEWER_UA).send().is_ok() {
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let edge_users = |origin: &Server| -> (usize, u64) {
        let clients = origin.admin_json("/api/admin/chat/clients");
        let on_edge = clients.as_array().unwrap().iter().filter(|c| c["user"]["id"] == sender_id.as_str()).count();
        (on_edge, origin.get_json("/api/status")["viewerCount"].as_u64().unwrap_or_default())
    };
    let counted = c.origin().wait_for(Duration::from_secs(20), || {
        let (clients, viewers) = edge_users(c.origin());
        (clients == 1 && viewers >= 1).then_some(())
    });
    assert!(counted.is_some(), "the origin counts the edge's chat client and viewer: {:?}", edge_users(c.origin()));
    std::thread::sleep(Duration::from_secs(6)); // another presence round
    assert_eq!(edge_users(c.origin()), (1, 1), "one chat client and one viewer, each counted once");
    common::unsafe_kill(c.edges[0].pid().unwrap(), 9);
    let killed = Instant::now();
    let mut moved = connect(c.node(2), &token);
    let history = chatclient::history(c.node(2), &token);
    assert!(!history.is_empty());
    assert_eq!(history, chatclient::history(c.origin(), &token), "the history through the other edge is the origin's");
    let last = stored_r.last().unwrap();
    assert!(
        history.iter().any(|m| m["body"].as_str().is_some_and(|b| plain(b) == *last)),
        "the history has the latest message ({last})"
    );
    say(&mut moved, "after the edge died");
    assert!(
        next_where_body(&mut moved, "after the edge died", Duration::from_secs(10)).is_some(),
        "chat goes on through the other edge"
    );
    let gone = c.origin().wait_for(Duration::from_secs(45), || (edge_users(c.origin()) == (0, 0)).then_some(()));
    let took = killed.elapsed();
    assert!(gone.is_some(), "the dead edge's client and viewer are still counted: {:?}", edge_users(c.origin()));
    // 30 s is the promise (presence expires 20 s after the last write, the origin reads it every 5 s);
    // the margin is for a loaded 2-core machine.
    assert!(took < Duration::from_secs(38), "the dead edge's client and viewer took {took:?} to go");
    viewer.join().unwrap();
    eprintln!("{:?}: the dead edge's client and viewer left the counts in {took:?}; done", t0.elapsed());
}

/// The error event an edge answers a message with when Redis did not take it (castd's websocket error
/// shape: `{id, timestamp, type: "ERROR_...", body}`), never a CHAT_ACTION nor nothing.
fn is_unavailable(e: &Value) -> bool {
    let says = e["body"].as_str().unwrap_or_default().contains("temporarily unavailable");
    assert!(!(says && e["type"] != "ERROR_CHAT_UNAVAILABLE"), "the refusal is an error event: {e}");
    if e["type"] == "ERROR_CHAT_UNAVAILABLE" {
        assert!(says, "ERROR_CHAT_UNAVAILABLE says why: {e}");
        assert!(e["id"].is_string() && e["timestamp"].is_string(), "an error event has id and timestamp: {e}");
        return true;
    }
    false
}

fn connect_port(port: u16, token: &str) -> Ws {
    connect_port_from(port, token, IpAddr::from([127, 0, 0, 1]))
}

/// Connect to the node on `port` from the address `from`, and wait for CONNECTED_USER_INFO.
fn connect_port_from(port: u16, token: &str, from: IpAddr) -> Ws {
    let mut ws = chatclient::connect_raw_from(port, token, from);
    next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(30)).expect("CONNECTED_USER_INFO");
    ws
}

/// The loopback address of the `i`th of many clients: ten to an address (127.0.1.0, 127.0.1.1, …).
fn client_address(i: usize) -> IpAddr {
    let n = u16::try_from(i / 10).expect("few clients");
    IpAddr::from([127, 0, 1 + (n >> 8) as u8, n as u8])
}

fn next_where_body(ws: &mut Ws, text: &str, timeout: Duration) -> Option<Value> {
    chatclient::next_where(ws, timeout, |e| e["body"].as_str().is_some_and(|b| b.contains(text)))
}

/// The cluster flags are checked at start: an edge needs Redis and the secret, Redis needs the secret,
/// the secret file must hold something; `--help` documents them.
#[test]
fn cluster_flags_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-secret");
    std::fs::write(&empty, "\n").unwrap();
    let empty = empty.to_str().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "x").unwrap();
    let secret = secret.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--origin", "http://127.0.0.1:9"], "--origin needs --redis-url"),
        (&["--redis-url", "redis://127.0.0.1:9/0"], "--cluster-secret"),
        (&["--redis-url", "redis://127.0.0.1:9/0", "--cluster-secret", empty], "empty"),
        (&["--redis-url", "redis://127.0.0.1:9/0", "--cluster-secret", secret, "--origin", "ftp://x"], "http://"),
    ];
    for (args, says) in cases {
        let out = std::process::Command::new(common::BIN)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--webserverip", "127.0.0.1", "--webserverport", "0", "--rtmpport", "0", "--srtport", "0"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must not start");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let help = std::process::Command::new(common::BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for flag in ["--redis-url", "--cluster-secret", "--origin", "CASTD_REDIS_URL", "CASTD_ORIGIN"] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

/// A websocket to `url` (read timeout 200 ms), CONNECTED_USER_INFO awaited.
fn connect_url(url: &str) -> Ws {
    let (mut ws, _) = tungstenite::connect(url).expect("websocket connect");
    if let tungstenite::stream::MaybeTlsStream::Plain(t) = ws.get_ref() {
        t.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    }
    next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(20)).expect("CONNECTED_USER_INFO");
    ws
}

/// A websocket to `url`, retried until the node holds it (CONNECTED_USER_INFO) or `limit` passes: an
/// edge opens a channel's chat when it learns of the channel from the origin.
fn connect_within(url: &str, limit: Duration) -> (Ws, Duration) {
    let t0 = Instant::now();
    loop {
        match tungstenite::connect(url) {
            Ok((mut ws, _)) => {
                if let tungstenite::stream::MaybeTlsStream::Plain(t) = ws.get_ref() {
                    t.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
                }
                next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(20)).expect("CONNECTED_USER_INFO");
                return (ws, t0.elapsed());
            }
            Err(e) => assert!(t0.elapsed() < limit, "{url}: not held within {limit:?}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The HTTP status a websocket upgrade to `url` is refused with (panics when it is accepted).
fn refused_with(url: &str) -> u16 {
    match tungstenite::connect(url) {
        Err(tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("{url}: {e}"),
        Ok(_) => panic!("{url}: the socket was accepted"),
    }
}

/// A channel works through the edges, and its chat goes over Redis like the default channel's, with no
/// tunnel: a channel created after the edges started is followed by them (its chat socket is held on an
/// edge within a bound wait); a message from a client on an edge and one from a client on the origin
/// reach each other and a client on the other edge, each stored once in the channel's own history and
/// never in the default channel's room; the channel admin's client list on the origin shows the edge's
/// client as another node's (the origin holds one socket of the channel, its own client's); deleted,
/// the channel's socket on the edge is closed and a new one refused; a new channel with the slug
/// starts with an empty chat on the edges too. Its API, page and HLS go to the origin as before.
#[test]
fn a_channel_s_chat_goes_over_redis_on_the_edges() {
    let c = start_cluster();
    let origin = c.origin();
    let (edge, edge2) = (&c.edges[0], &c.edges[1]);
    let create = || {
        let r = origin.admin_post(
            "/api/admin/channels/create",
            &json!({"slug": "room2", "name": "Room Two", "adminPassword": "room2-admin"}),
        );
        assert!(r.status().is_success(), "{}", r.status());
    };
    create();
    assert_eq!(edge.get_json("/c/room2/api/config")["name"], "Room Two", "the channel's API through the edge");
    // (200, or 503 from a binary built without its web UI, as the origin answers it.)
    let page = edge.get("/c/room2/").status().as_u16();
    assert!([200, 503].contains(&page), "its viewer page through the edge: {page}");

    let register_in_channel = |s: &Server| -> (String, String) {
        let v: Value =
            s.client.post(s.url("/c/room2/api/chat/register")).json(&json!({})).send().unwrap().json().unwrap();
        (v["id"].as_str().expect("id").to_string(), v["accessToken"].as_str().expect("accessToken").to_string())
    };
    let ((edge_user, on_edge), (origin_user, on_origin)) = (register_in_channel(edge), register_in_channel(origin));
    let (_, on_edge2) = register_in_channel(edge2);
    let ws_url = |s: &Server, token: &str| format!("ws://127.0.0.1:{}/c/room2/ws?accessToken={token}", s.web_port);
    // Created after the edges started: each learns of it within a few of its 2 s asks.
    let (mut via_edge, took) = connect_within(&ws_url(edge, &on_edge), Duration::from_secs(15));
    eprintln!("the edge held the new channel's chat socket {took:?} after it was created");
    let (mut via_edge2, _) = connect_within(&ws_url(edge2, &on_edge2), Duration::from_secs(15));
    let mut at_origin = connect_url(&ws_url(origin, &on_origin));
    let (_, default_token, _) = register(edge, None);
    let mut default_room = connect(edge, &default_token);

    say(&mut via_edge, "through-the-edge-1");
    let mut other = Vec::new();
    let got = collect(&mut at_origin, "through-the-edge-1", 1, Instant::now() + Duration::from_secs(10), &mut other);
    assert_eq!(got.len(), 1, "a message sent through the edge reaches the channel's room at the origin: {other:?}");
    say(&mut at_origin, "from-the-origin-1");
    for (n, ws) in [(1, &mut via_edge), (2, &mut via_edge2)] {
        let mut got = collect(ws, "-1", 2, Instant::now() + Duration::from_secs(10), &mut other);
        got.sort_by(|a, b| a.1.cmp(&b.1));
        let bodies: Vec<&str> = got.iter().map(|(_, b)| b.as_str()).collect();
        assert_eq!(bodies, ["from-the-origin-1", "through-the-edge-1"], "edge {n}'s client got both, once");
    }
    let leaked = collect(&mut default_room, "-1", 1, Instant::now() + Duration::from_secs(2), &mut other);
    assert!(leaked.is_empty(), "the default channel's room never sees the channel's messages: {leaked:?}");
    let channel_history = origin.admin_json("/c/room2/api/admin/chat/messages");
    let count = |text: &str| {
        channel_history
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["body"].as_str().is_some_and(|b| plain(b) == text))
            .count()
    };
    assert_eq!(count("through-the-edge-1"), 1, "the edge's message is stored once in the channel's history");
    assert_eq!(count("from-the-origin-1"), 1, "and the origin's");
    assert!(stored(origin, "-1").is_empty(), "nothing of the channel in the default channel's history");

    // The channel admin's client list on the origin is cluster-wide (presence, within two rounds); the
    // edge's client is another node's (id ≥ 2^32): the origin holds the channel's socket of its own
    // client only, none for the edge's.
    let channel_admin = |path: &str| -> Value {
        let r = origin.client.get(origin.url(path)).basic_auth("admin", Some("room2-admin")).send().unwrap();
        assert_eq!(r.status(), 200, "{path} as the channel's admin");
        r.json().unwrap()
    };
    let listed = origin.wait_for(Duration::from_secs(20), || {
        let clients = channel_admin("/c/room2/api/admin/chat/clients");
        let clients = clients.as_array().unwrap().clone();
        let has = |id: &str| clients.iter().any(|c| c["user"]["id"] == id);
        (has(&edge_user) && has(&origin_user) && clients.len() >= 3).then_some(clients)
    });
    let listed = listed.expect("the channel's admin lists the clients of the origin and of the edge");
    let own: Vec<&Value> = listed.iter().filter(|c| c["id"].as_u64().unwrap() < 1 << 32).collect();
    assert_eq!(own.len(), 1, "the origin holds one socket of the channel, its own client's: {listed:?}");
    assert_eq!(own[0]["user"]["id"], origin_user.as_str());
    assert_eq!(listed.len(), 3, "the three clients (origin, edge, edge 2), each once: {listed:?}");
    let default_clients = origin.admin_json("/api/admin/chat/clients");
    assert!(
        !default_clients.to_string().contains(&edge_user),
        "the channel's clients are not the default channel's: {default_clients}"
    );

    // Deleted: the edge closes the channel's sockets and refuses new ones.
    let r = origin.admin_post("/api/admin/channels/delete", &json!({"slug": "room2"}));
    assert!(r.status().is_success(), "delete: {}", r.status());
    let deadline = Instant::now() + Duration::from_secs(15);
    while read_events(&mut via_edge, Duration::from_millis(300)).is_ok() {
        assert!(Instant::now() < deadline, "the deleted channel's socket on the edge stays open");
    }
    assert_eq!(refused_with(&ws_url(edge, &on_edge)), 404, "a deleted channel's socket is refused on the edge");

    // The slug again, a new channel: it starts from nothing on the edges too (the old token is unknown
    // there, the old messages are not its history), and its chat works through them.
    create();
    let (_, fresh) = register_in_channel(edge);
    let (mut again, _) = connect_within(&ws_url(edge, &fresh), Duration::from_secs(15));
    let (_, fresh2) = register_in_channel(edge2);
    drop(connect_within(&ws_url(edge2, &fresh2), Duration::from_secs(15)));
    let (mut stale, _) = tungstenite::connect(ws_url(edge2, &on_edge2)).expect("the upgrade");
    if let tungstenite::stream::MaybeTlsStream::Plain(t) = stale.get_ref() {
        t.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    }
    let refused = next_of(&mut stale, "ERROR_NEEDS_REGISTRATION", Duration::from_secs(10));
    assert!(refused.is_some(), "the old channel's user is unknown to the new one on the edge");
    say(&mut again, "second-life");
    let got = collect(&mut again, "second-life", 1, Instant::now() + Duration::from_secs(10), &mut other);
    assert_eq!(got.len(), 1, "the new channel's chat through the edge: {other:?}");
    let history = edge.get_json(&format!("/c/room2/api/chat?accessToken={fresh}"));
    let bodies: Vec<String> =
        history.as_array().unwrap().iter().filter_map(|m| m["body"].as_str().map(plain)).collect();
    assert_eq!(bodies, ["second-life"], "the new channel's history has none of the old one's");
}

/// The hops of one message, `hop -> [unix µs]`, from a file `CASTD_DEBUG_CHAT_HOPS` named.
fn hops_of(path: &std::path::Path, id: &str) -> HashMap<String, Vec<u64>> {
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() >= 3 && f[2] == id {
            out.entry(f[1].to_string()).or_default().push(f[0].parse().expect("a time"));
        }
    }
    out
}

/// With `CASTD_DEBUG_CHAT_HOPS` (issue 44, bench/cluster) every node writes each CHAT's hops under
/// its id: the edge its client's read and Redis's answer, the origin its read, its store, its
/// fan-out, the write-out and (after it) the acknowledgement, every node its read of the outbound
/// stream and its fan-out threads' writes, each after the hops that cause it.
#[test]
fn with_the_debug_switch_every_node_writes_each_message_s_hops() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("cluster-secret");
    std::fs::write(&secret, "s3cret-for-the-hops-test\n").unwrap();
    let (url, secret) = (redis.url(), secret.to_str().unwrap().to_string());
    let (origin_hops, edge_hops) = (dir.path().join("origin.tsv"), dir.path().join("edge.tsv"));
    let cl = ["--redis-url", url.as_str(), "--cluster-secret", secret.as_str()];
    let origin = Server::start_with_env(&cl, &[("CASTD_DEBUG_CHAT_HOPS", origin_hops.to_str().unwrap())]);
    let via = origin.url("");
    let via = via.trim_end_matches('/');
    let edge = Server::start_with_env(
        &[&cl[..], &["--origin", via]].concat(),
        &[("CASTD_DEBUG_CHAT_HOPS", edge_hops.to_str().unwrap())],
    );
    let quiet = Server::start_with_args(&[&cl[..], &["--origin", via]].concat());

    let (_, sender, _) = register(&origin, Some("hopper"));
    let (_, listener, _) = register(&origin, Some("listener"));
    let mut on_origin = connect(&origin, &listener);
    let mut on_quiet = connect(&quiet, &listener);
    let mut ws = connect(&edge, &sender);
    // The first messages may go before the edge reads the outbound stream: send until one arrives.
    let mut got = None;
    for i in 0..20 {
        say(&mut ws, &format!("hop-{i}"));
        if let Some(e) = next_where_body(&mut ws, &format!("hop-{i}"), Duration::from_secs(2)) {
            got = Some((i, e));
            break;
        }
    }
    let (i, e) = got.expect("the edge's client gets its message back");
    let id = e["id"].as_str().expect("an id").to_string();
    next_where_body(&mut on_origin, &format!("hop-{i}"), Duration::from_secs(10)).expect("on the origin");
    next_where_body(&mut on_quiet, &format!("hop-{i}"), Duration::from_secs(10)).expect("on the other edge");

    // The acknowledgement comes after the write-out, without holding up the message: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !hops_of(&origin_hops, &id).contains_key("acked") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (o, e) = (hops_of(&origin_hops, &id), hops_of(&edge_hops, &id));
    let at = |m: &HashMap<String, Vec<u64>>, hop: &str| -> u64 {
        *m.get(hop).and_then(|v| v.iter().min()).unwrap_or_else(|| panic!("hop {hop} of {id}: {m:?}"))
    };
    // Each mark is made after its step, so a later step on another thread (a fan-out thread, the
    // writer, another node) may be marked first: only causes are asserted before their effects.
    let order = [at(&e, "recv"), at(&o, "origin_read"), at(&o, "origin_handle"), at(&o, "stored"), at(&e, "node_read")];
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "hops in order: {order:?}\norigin {o:?}\nedge {e:?}");
    assert!(at(&e, "edge_added") >= at(&e, "recv"));
    assert!(at(&e, "node_fanout") >= at(&e, "node_read") && at(&e, "sent") >= at(&e, "node_read"), "{e:?}");
    assert!(at(&o, "broadcast") >= at(&o, "stored") && at(&o, "sent") >= at(&o, "stored"), "{o:?}");
    assert!(at(&o, "acked") >= at(&o, "written") && at(&o, "written") >= at(&o, "stored"), "{o:?}");
    assert!(!o.contains_key("recv") && !e.contains_key("stored"), "each node marks its own hops");
    let body = std::fs::read_to_string(&edge_hops).unwrap();
    assert!(body.lines().any(|l| l.contains("\trecv\t") && l.ends_with(&format!("hop-{i}"))), "{body}");
    drop((edge, quiet, origin));
}

/// `GET /api/cluster/channels` (the origin's list of channels for its edges) is the cluster secret's
/// only: without it, with a wrong one, with the server admin's password (as Basic auth or in the
/// secret's header) or a channel admin's, 403 with a StatusResponse; with it, 200 and the list.
#[test]
fn the_channel_list_for_edges_needs_the_cluster_secret() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("cluster-secret");
    let secret = "s3cret-for-the-refusal-test";
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    let origin =
        Server::start_with_args(&["--redis-url", &redis.url(), "--cluster-secret", secret_file.to_str().unwrap()]);
    let r = origin.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": "listed", "name": "Listed", "adminPassword": "listed-admin-pw"}),
    );
    assert!(r.status().is_success(), "{}", r.status());
    let url = origin.url("/api/cluster/channels");
    let get = |from: &str| origin.client.get(&url).header("x-forwarded-for", from);
    let refused = |r: reqwest::blocking::Response, status: u16, what: &str| {
        assert_eq!(r.status(), status, "{what}");
        let body: Value = r.json().unwrap_or_else(|e| panic!("{what}: a JSON body: {e}"));
        assert_eq!(body["success"], false, "{what}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    };

    let me = "198.51.100.1";
    refused(get(me).send().unwrap(), 403, "without the secret");
    refused(get(me).header("x-castd-cluster-secret", "").send().unwrap(), 403, "an empty secret");
    refused(get(me).header("x-castd-cluster-secret", "nope").send().unwrap(), 403, "a wrong secret");
    refused(get(me).header("x-castd-cluster-secret", format!("{secret}x")).send().unwrap(), 403, "the secret and more");
    let admin = origin.admin_password.clone();
    assert!(!admin.is_empty(), "the harness knows the server admin's password");
    refused(get(me).basic_auth("admin", Some(&admin)).send().unwrap(), 403, "the server admin's password");
    refused(get(me).header("x-castd-cluster-secret", &admin).send().unwrap(), 403, "the admin password as the secret");
    refused(get(me).basic_auth("admin", Some("listed-admin-pw")).send().unwrap(), 403, "a channel admin's password");
    let ok = get(me).header("x-castd-cluster-secret", secret).send().unwrap();
    assert_eq!(ok.status(), 200, "with the secret");
    let list: Value = ok.json().unwrap();
    let rooms = list["channels"].as_array().expect("a list of channels");
    assert_eq!(rooms.len(), 1, "the channel, not the default: {list}");
    assert!(rooms[0]["room"].as_str().is_some_and(|r| r.starts_with("listed")), "{list}");

    drop(origin);
}
