//! Security of castd's data (issue #39, findings 4 (push), 5, 9 and 11): clips only of what anyone may
//! watch, downloads capped per address and in all, browser push endpoints only on public https
//! addresses with caps and bounded delivery, no generated password in the logs, secrets masked in the
//! server configuration (and a masked simulcast key not sent to a new address), integration tokens
//! stored hashed and never listed back.
//!
//! Every test starts the real daemon; distinct client addresses are real source addresses on loopback
//! (127.0.0.x), not `X-Forwarded-For`.

mod common;

use std::net::IpAddr;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::media::{publish, wait_exit};
use common::Server;
use reqwest::blocking::Client;
use serde_json::{json, Value};

const KEY: &str = "security-data-key";

/// Passthrough, 2 s segments: a broadcast is recorded cheaply.
fn setup_replays(server: &Server) {
    server.set(
        "video/streamoutputvariants",
        json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]),
    );
    server.set("video/streamlatencylevel", json!(1));
}

fn replays(server: &Server) -> Vec<Value> {
    server.admin_json("/api/admin/replays").as_array().cloned().unwrap_or_default()
}

fn wait_finished(server: &Server, id: &str) {
    server
        .wait_for(Duration::from_secs(40), || {
            replays(server).into_iter().find(|r| r["id"] == id && r["status"] == "finished")
        })
        .unwrap_or_else(|| panic!("replay {id} did not finish: {:?}", replays(server)));
}

/// A chat user whose account is two hours old (Owncast's `established`), by its token.
fn established_user(server: &Server, name: &str) -> String {
    let v: Value = server.post_json("/api/chat/register", &json!({ "displayName": name })).json().unwrap();
    let db = rusqlite::Connection::open(server.data_dir.join("castd.db")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let old = (chrono::Utc::now() - chrono::TimeDelta::hours(2)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    db.execute(
        "UPDATE chat_users SET created_at = ?1 WHERE id = ?2",
        rusqlite::params![old, v["id"].as_str().unwrap()],
    )
    .unwrap();
    v["accessToken"].as_str().unwrap().to_string()
}

/// A client whose requests come from `ip` (a loopback address).
fn client_from(ip: &str) -> Client {
    Client::builder().local_address(ip.parse::<IpAddr>().unwrap()).timeout(Duration::from_secs(60)).build().unwrap()
}

fn window(sid: &str, start: f64, end: f64) -> Value {
    json!({"streamId": sid, "clipTitle": "moment", "relativeStartTimeSeconds": start, "relativeEndTimeSeconds": end})
}

fn status_json(r: reqwest::blocking::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn viewer_clip(server: &Server, token: &str, body: &Value) -> (u16, Value) {
    status_json(server.client.post(server.url(&format!("/api/clip?accessToken={token}"))).json(body).send().unwrap())
}

fn bot_clip(server: &Server, token: &str, body: &Value) -> (u16, Value) {
    status_json(server.client.post(server.url("/api/integrations/clips")).bearer_auth(token).json(body).send().unwrap())
}

fn clip_count(server: &Server) -> usize {
    server.get_json("/api/clips").as_array().map_or(0, Vec::len)
}

fn create_token(server: &Server, name: &str, scopes: &[&str]) -> Value {
    let r = server.admin_post("/api/admin/accesstokens/create", &json!({ "name": name, "scopes": scopes }));
    assert_eq!(r.status(), 200);
    r.json().unwrap()
}

/// Finding 5: clips are public, so a viewer or a bot may clip the live broadcast and public replays,
/// never a finished replay the admin has not made public; the refusal stores nothing.
#[test]
fn the_clip_of_a_private_replay_is_refused_and_nothing_is_stored() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup_replays(&server);
    let viewer = established_user(&server, "Clipper");
    let bot = create_token(&server, "clipbot", &["HAS_ADMIN_ACCESS"])["accessToken"].as_str().unwrap().to_string();
    let mut ff = publish(&server, KEY, "320x180", 10);
    let sid = server
        .wait_for(Duration::from_secs(30), || server.get_json("/api/status")["streamId"].as_str().map(str::to_string))
        .expect("the stream id while live");
    server
        .wait_for(Duration::from_secs(30), || {
            replays(&server).into_iter().find(|r| r["id"] == sid.as_str() && r["durationSeconds"].as_f64() > Some(5.0))
        })
        .expect("recorded media");

    // While live: the viewer clips the live broadcast, as in Owncast.
    let (status, made) = viewer_clip(&server, &viewer, &window(&sid, 0.0, 4.0));
    assert_eq!(status, 200, "{made}");
    assert_eq!(clip_count(&server), 1);

    assert!(wait_exit(&mut ff, Duration::from_secs(60)).is_some());
    wait_finished(&server, &sid);
    assert_eq!(server.get(&format!("/replay/{sid}")).status(), 401, "the replay is private");

    // Finished and private: neither a viewer nor a bot may clip it, and nothing is stored.
    let (status, r) = viewer_clip(&server, &viewer, &window(&sid, 0.0, 4.0));
    assert_eq!((status, &r["success"], &r["message"]), (400, &json!(false), &json!("stream not found")), "{r}");
    let (status, r) = bot_clip(&server, &bot, &window(&sid, 0.0, 4.0));
    assert_eq!((status, &r["success"], &r["message"]), (400, &json!(false), &json!("stream not found")), "{r}");
    assert_eq!(clip_count(&server), 1, "no clip of the private replay is stored");
    let replay = replays(&server).into_iter().find(|r| r["id"] == sid.as_str()).unwrap();
    assert_eq!(replay["clipCount"], 1);

    // The admin may clip it (the admin's own form).
    let r = server.admin_post("/api/admin/clips/create", &window(&sid, 0.0, 4.0));
    assert_eq!(r.status(), 200);
    assert_eq!(clip_count(&server), 2);

    // Made public: anyone may clip it.
    let r = server.admin_post("/api/admin/replays/update", &json!({"id": sid, "public": true}));
    assert_eq!(r.status(), 200);
    assert_eq!(viewer_clip(&server, &viewer, &window(&sid, 1.0, 5.0)).0, 200);
    assert_eq!(bot_clip(&server, &bot, &window(&sid, 1.0, 5.0)).0, 200);
    assert_eq!(clip_count(&server), 4);
}

/// GET `path` from each client at once (a barrier lines them up); every answer's status, with its
/// body read only after all have answered (so a download in progress holds its place meanwhile).
fn all_at_once(server: &Server, clients: Vec<Client>, path: &str) -> Vec<(u16, Value, Option<String>)> {
    let n = clients.len();
    let start = Arc::new(Barrier::new(n));
    let answered = Arc::new(Barrier::new(n));
    let threads: Vec<_> = clients
        .into_iter()
        .map(|c| {
            let (url, start, answered) = (server.url(path), start.clone(), answered.clone());
            std::thread::spawn(move || {
                start.wait();
                let r = c.get(url).send();
                answered.wait();
                let r = r.unwrap();
                let status = r.status().as_u16();
                let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
                if status == 200 {
                    let bytes = r.bytes().unwrap();
                    assert!(bytes.len() > 1000, "a whole download");
                    (status, Value::Null, retry)
                } else {
                    (status, r.json().unwrap_or(Value::Null), retry)
                }
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// Finding 9: each `download.mp4` is an ffmpeg child; one address may run at most 2 at once (429
/// beyond), the server at most 4 (503 beyond), and the places free again.
#[test]
fn downloads_are_capped_per_address_and_in_all_and_free_again() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup_replays(&server);
    let before = replays(&server).len();
    let mut ff = publish(&server, KEY, "320x180", 6);
    assert!(wait_exit(&mut ff, Duration::from_secs(60)).is_some());
    let sid = server
        .wait_for(Duration::from_secs(40), || {
            let list = replays(&server);
            (list.len() > before).then(|| list[0].clone()).filter(|r| r["status"] == "finished")
        })
        .expect("a finished replay")["id"]
        .as_str()
        .unwrap()
        .to_string();
    server.admin_post("/api/admin/replays/update", &json!({"id": sid, "public": true}));
    let path = format!("/replay/{sid}/download.mp4");

    // Eight at once from one address: some are refused with 429 and a StatusResponse.
    let answers = all_at_once(&server, (0..8).map(|_| client_from("127.0.0.1")).collect(), &path);
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(statuses.iter().filter(|s| **s == 200).count() < 8, "not all eight at once: {statuses:?}");
    for (status, body, retry) in &answers {
        assert!(matches!(status, 200 | 429), "one address meets its own cap first: {statuses:?}");
        if *status == 429 {
            assert_eq!(body["success"], false, "{body}");
            assert!(body["message"].as_str().unwrap().contains("downloads at once"), "{body}");
            assert!(retry.is_some(), "Retry-After");
        }
    }

    // Two at once from each of six addresses: within each address's cap, beyond the server's (503).
    let clients = (2..8).flat_map(|i| [client_from(&format!("127.0.0.{i}")), client_from(&format!("127.0.0.{i}"))]);
    let answers = all_at_once(&server, clients.collect(), &path);
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert!(statuses.contains(&200) && statuses.contains(&503), "{statuses:?}");
    assert!(!statuses.contains(&429), "{statuses:?}");
    let busy = answers.iter().find(|a| a.0 == 503).unwrap();
    assert_eq!(busy.1["success"], false);
    assert!(busy.1["message"].as_str().unwrap().contains("busy"), "{}", busy.1);

    // Every place is free again: one download after another works.
    for _ in 0..3 {
        let r = server.get(&path);
        assert_eq!(r.status(), 200);
        assert!(r.bytes().unwrap().len() > 1000);
    }
    let clip = server.admin_post("/api/admin/clips/create", &window(&sid, 0.0, 4.0)).json::<Value>().unwrap();
    let r = server.get(&format!("/clip/{}/download.mp4", clip["id"].as_str().unwrap()));
    assert_eq!(r.status(), 200, "clip downloads share the caps and work");
}

const PUSH_LOOPBACK: (&str, &str) = ("CASTD_PUSH_ALLOW_LOOPBACK", "1");

/// A chat user registered from `ip`: (id, token).
fn chat_user_from(server: &Server, ip: &str, name: &str) -> (String, String) {
    let r =
        client_from(ip).post(server.url("/api/chat/register")).json(&json!({ "displayName": name })).send().unwrap();
    assert_eq!(r.status(), 200, "chat registration from {ip}");
    let v: Value = r.json().unwrap();
    (v["id"].as_str().unwrap().to_string(), v["accessToken"].as_str().unwrap().to_string())
}

/// Register a push subscription for `endpoint` as the user holding `token`, from `client`.
fn register_push(server: &Server, client: &Client, token: &str, endpoint: &str) -> (u16, Value) {
    let (sub, _, _) = common::push::push_subscription(endpoint);
    let body = json!({"channel": "BROWSER_PUSH_NOTIFICATION", "destination": sub.to_string()});
    status_json(
        client
            .post(server.url(&format!("/api/notifications/register?accessToken={token}")))
            .json(&body)
            .send()
            .unwrap(),
    )
}

/// Stored push subscriptions: (id, endpoint, user id).
fn push_rows(server: &Server) -> Vec<(i64, String, Option<String>)> {
    let db = rusqlite::Connection::open(server.data_dir.join("castd.db")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut stmt = db.prepare("SELECT id, destination, user_id FROM notification_destinations ORDER BY id").unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .map(|(id, dest, user)| {
            let v: Value = serde_json::from_str(&dest).unwrap();
            (id, v["endpoint"].as_str().unwrap().to_string(), user)
        });
    rows.collect()
}

/// Finding 4 (push): a chat user cannot make castd POST to loopback, private or plain-http addresses.
#[test]
fn push_endpoints_must_be_https_on_a_public_address() {
    let server = Server::start();
    server.set("notifications/browser", json!({"enabled": true, "goLiveMessage": "live"}));
    let (_, token) = chat_user_from(&server, "127.0.0.1", "pusher");
    let rx = common::receiver::Receiver::start(&[]);
    for endpoint in [
        format!("{}/push", rx.url),
        rx.url.replace("http://", "https://") + "/push",
        "https://localhost/push".to_string(),
        "https://10.1.2.3/push".to_string(),
        "https://[fd00::1]/push".to_string(),
        "https://169.254.169.254/latest/meta-data".to_string(),
        "http://93.184.216.34/push".to_string(),
    ] {
        let (status, r) = register_push(&server, &server.client, &token, &endpoint);
        assert_eq!(status, 400, "{endpoint}: {r}");
        assert_eq!(r["success"], false);
        assert_eq!(r["message"], "the push endpoint must be an https URL on a public address", "{endpoint}");
    }
    assert!(push_rows(&server).is_empty(), "nothing is stored");
    assert!(rx.all().is_empty(), "and nothing was sent");
}

/// Finding 4 (push): at most 3 subscriptions per chat user (a new one replaces the oldest) and 20 per
/// client address (429 beyond).
#[test]
fn push_subscriptions_are_capped_per_user_and_per_address() {
    let server = Server::start_with_env(&[], &[PUSH_LOOPBACK]);
    server.set("notifications/browser", json!({"enabled": true, "goLiveMessage": "live"}));
    let rx = common::receiver::Receiver::start(&[]);
    // Users made from other addresses (chat registration has its own limits); subscriptions from one.
    let users: Vec<(String, String)> =
        (0..8).map(|i| chat_user_from(&server, &format!("127.0.0.{}", 20 + i), &format!("u{i}"))).collect();
    let one = client_from("127.0.0.9");

    let (first, token) = &users[0];
    for n in 0..4 {
        let (status, r) = register_push(&server, &one, token, &format!("{}/push/a{n}", rx.url));
        assert_eq!(status, 200, "{r}");
    }
    let mine: Vec<String> =
        push_rows(&server).into_iter().filter(|r| r.2.as_deref() == Some(first)).map(|r| r.1).collect();
    assert_eq!(mine, (1..4).map(|n| format!("{}/push/a{n}", rx.url)).collect::<Vec<_>>(), "the oldest was replaced");

    let mut stored = 3;
    'users: for (_, token) in &users[1..] {
        for n in 0..3 {
            let (status, r) = register_push(&server, &one, token, &format!("{}/push/{token}{n}", rx.url));
            if stored == 20 {
                assert_eq!(status, 429, "{r}");
                assert_eq!(r["success"], false);
                assert!(r["message"].as_str().unwrap().contains("this address"), "{r}");
                break 'users;
            }
            assert_eq!(status, 200, "{r}");
            stored += 1;
        }
    }
    assert_eq!(stored, 20);
    assert_eq!(push_rows(&server).len(), 20);
    // Another address still may.
    let (status, r) = register_push(&server, &client_from("127.0.0.10"), &users[7].1, &format!("{}/push/z", rx.url));
    assert_eq!(status, 200, "{r}");
}

/// A push service on loopback that holds each request `hold` and counts how many it holds at once.
struct SlowPushService {
    url: String,
    paths: Arc<std::sync::Mutex<Vec<String>>>,
    most_at_once: Arc<std::sync::atomic::AtomicUsize>,
}

fn slow_push_service(hold: Duration) -> SlowPushService {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let paths = Arc::new(std::sync::Mutex::new(Vec::new()));
    let most_at_once = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    let (p, m) = (paths.clone(), most_at_once.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (p, m, now) = (p.clone(), m.clone(), now.clone());
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                while let Some(req) = common::receiver::read_request(&mut reader) {
                    let held = now.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(held, Ordering::SeqCst);
                    std::thread::sleep(hold);
                    now.fetch_sub(1, Ordering::SeqCst);
                    p.lock().unwrap().push(req.path);
                    if !common::receiver::write_response(reader.get_ref(), 201, "text/plain", "") {
                        return;
                    }
                }
            });
        }
    });
    SlowPushService { url, paths, most_at_once }
}

/// Finding 4 (push): go-live delivery runs several pushes at once, but a bounded number (16), not one
/// after another; an endpoint castd may not deliver to is removed.
#[test]
fn go_live_pushes_are_sent_concurrently_but_bounded() {
    let server = Server::start_with_env(&["--streamkey", KEY], &[PUSH_LOOPBACK]);
    setup_replays(&server);
    server.set("notifications/browser", json!({"enabled": true, "goLiveMessage": "live"}));
    let service = slow_push_service(Duration::from_millis(400));
    // Forty subscriptions (written to the database as registrations over time would have) and one on
    // a private address (as an import from Owncast could bring).
    {
        let db = rusqlite::Connection::open(server.data_dir.join("castd.db")).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        let add = |endpoint: String| {
            let (sub, _, _) = common::push::push_subscription(&endpoint);
            db.execute(
                "INSERT INTO notification_destinations (channel, destination, created_at) VALUES (?1, ?2, ?3)",
                rusqlite::params!["BROWSER_PUSH_NOTIFICATION", sub.to_string(), "2024-01-01T00:00:00Z"],
            )
            .unwrap();
        };
        for n in 0..40 {
            add(format!("{}/push/{n}", service.url));
        }
        add("https://10.9.9.9/push/private".to_string());
    }
    let mut ff = publish(&server, KEY, "320x180", 6);
    let all = server.wait_for(Duration::from_secs(60), || (service.paths.lock().unwrap().len() >= 40).then_some(()));
    assert!(all.is_some(), "every push arrives: {} of 40", service.paths.lock().unwrap().len());
    let most = service.most_at_once.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most > 1, "pushes go out concurrently, not one after another (at most {most} at once)");
    assert!(most <= 16, "a bounded number at once: {most}");
    let mut paths = service.paths.lock().unwrap().clone();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 40, "each once");
    let left = server.wait_for(Duration::from_secs(10), || {
        let rows = push_rows(&server);
        (!rows.iter().any(|r| r.1.contains("10.9.9.9"))).then_some(rows)
    });
    assert_eq!(left.expect("the private endpoint is removed").len(), 40);
    wait_exit(&mut ff, Duration::from_secs(60));
}

/// Finding 11: the generated admin password is in its 0600 file only, never in the log (stderr, the
/// journal) nor in the admin log view.
#[test]
fn the_generated_admin_password_is_never_logged() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start();
    let file = server.data_dir.join("initial-admin-password");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let pw = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(pw.len() >= 16);
    let log = server.log_text();
    assert!(!log.contains(&pw), "the password is in the log");
    assert!(log.contains("initial-admin-password"), "the log says where the password is: {log}");
    for path in ["/api/admin/logs", "/api/admin/logs/warnings"] {
        let r = server.admin_get(path);
        assert_eq!(r.status(), 200, "{path}");
        let text = r.text().unwrap();
        assert!(text.contains("initial-admin-password"), "{path} names the file: {text}");
        assert!(!text.contains(&pw), "{path} shows the password");
    }
}

/// A saved setting as the settings table holds it.
fn saved_setting(server: &Server, key: &str) -> Value {
    let db = rusqlite::Connection::open(server.data_dir.join("castd.db")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let v: String = db.query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| r.get(0)).unwrap();
    serde_json::from_str(&v).unwrap()
}

/// Finding 11: the Discord webhook URL and the SRT passphrase are shown masked in the server
/// configuration, as the object-storage secret is, and sending the masked value back keeps the saved one.
#[test]
fn secrets_are_masked_in_the_server_configuration_and_kept_when_sent_back() {
    let server = Server::start();
    let hook = "https://discord.com/api/webhooks/123/hook-secret-token";
    server.set("notifications/discord", json!({"enabled": true, "webhook": hook, "goLiveMessage": "up"}));
    server.set("srt/passphrase", json!("srt-secret-passphrase"));
    server.set(
        "s3",
        json!({"enabled": false, "endpoint": "https://s3.example.com", "accessKey": "AK", "secret": "s3-secret-value",
               "bucket": "b", "region": "r"}),
    );
    let text = server.admin_get("/api/admin/serverconfig").text().unwrap();
    for secret in ["hook-secret-token", "srt-secret-passphrase", "s3-secret-value"] {
        assert!(!text.contains(secret), "{secret} shown in the server configuration");
    }
    let cfg: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(cfg["notifications"]["discord"]["webhook"], "********");
    assert_eq!(cfg["srtPassphrase"], "********");
    assert_eq!(cfg["s3"]["secret"], "********");

    // A form sends back what it was shown (with another change): the saved secrets stay.
    let mut discord = cfg["notifications"]["discord"].clone();
    discord["goLiveMessage"] = json!("we are up");
    server.set("notifications/discord", discord);
    server.set("srt/passphrase", json!("********"));
    let saved = saved_setting(&server, "discordNotifications");
    assert_eq!((saved["webhook"].as_str(), saved["goLiveMessage"].as_str()), (Some(hook), Some("we are up")));
    assert_eq!(saved_setting(&server, "srtPassphrase"), "srt-secret-passphrase");
    // Empty still clears, a new value replaces.
    server.set("srt/passphrase", json!(""));
    assert_eq!(server.admin_json("/api/admin/serverconfig")["srtPassphrase"], "");
    server.set("notifications/discord", json!({"enabled": true, "webhook": "https://discord.com/api/webhooks/9/new"}));
    assert_eq!(saved_setting(&server, "discordNotifications")["webhook"], "https://discord.com/api/webhooks/9/new");
}

/// Finding 11: a simulcast key sent back masked is kept only for the URL it was saved with; with a new
/// URL it is dropped, so the saved key never goes to another host.
#[test]
fn a_masked_simulcast_key_is_dropped_when_the_target_url_changes() {
    let server = Server::start();
    let target = |url: &str, key: &str| json!([{"id": "yt", "name": "YouTube", "url": url, "streamKey": key}]);
    server.set("simulcast/targets", target("rtmp://a.rtmp.youtube.com/live2", "the-real-key"));
    let shown = server.admin_json("/api/admin/serverconfig")["simulcastTargets"].clone();
    assert_eq!(shown[0]["streamKey"], "********");
    let saved = || saved_setting(&server, "simulcastTargets")[0]["streamKey"].as_str().unwrap().to_string();

    // The same URL: the saved key stays.
    server.set("simulcast/targets", target("rtmp://a.rtmp.youtube.com/live2", "********"));
    assert_eq!(saved(), "the-real-key");
    // Another host (or another path): the masked key is dropped, not sent there.
    server.set("simulcast/targets", target("rtmp://attacker.example/live2", "********"));
    assert_eq!(saved(), "", "the old key would go to a new host");
    assert_eq!(server.admin_json("/api/admin/serverconfig")["simulcastTargets"][0]["streamKey"], "");
    // Back at the old URL it does not come back by itself either.
    server.set("simulcast/targets", target("rtmp://a.rtmp.youtube.com/live2", "********"));
    assert_eq!(saved(), "");
}

/// Finding 11, the object-storage secret: like a simulcast key, a secret sent back masked is kept only
/// with the endpoint and access key it was saved with, in the setter and in "Test connection", so the
/// saved secret never signs requests to another host.
#[test]
fn a_masked_storage_secret_is_not_used_for_another_endpoint() {
    let server = Server::start();
    let s3 = |endpoint: &str, key: &str, secret: &str| json!({"enabled": false, "endpoint": endpoint, "accessKey": key, "secret": secret, "bucket": "b", "region": "r"});
    server.set("s3", s3("https://s3.example.com", "AK", "s3-secret-value"));
    let saved = || saved_setting(&server, "s3")["secret"].as_str().unwrap().to_string();

    // The same account, shown masked and sent back: kept.
    server.set("s3", s3("https://S3.example.com/", "AK", "********"));
    assert_eq!(saved(), "s3-secret-value");
    // Another endpoint or another access key with the mask: refused with a message, nothing changes.
    for (endpoint, key) in [("https://attacker.example", "AK"), ("https://s3.example.com", "OTHER")] {
        let r = server.admin_post("/api/admin/config/s3", &json!({"value": s3(endpoint, key, "********")}));
        assert_eq!(r.status(), 400, "{endpoint} {key}");
        let body: Value = r.json().unwrap();
        assert_eq!(body["success"], false);
        assert!(body["message"].as_str().unwrap().contains("enter it again"), "{body}");
        assert_eq!(saved(), "s3-secret-value");
        assert_eq!(saved_setting(&server, "s3")["endpoint"], "https://S3.example.com/", "unchanged");
        // "Test connection" with the saved secret against another endpoint: refused before any request.
        let r = server.admin_post("/api/admin/storage/test", &s3(endpoint, key, "********"));
        assert_eq!(r.status(), 400);
        let body: Value = r.json().unwrap();
        assert!(body["message"].as_str().unwrap().contains("enter the secret"), "{body}");
    }
    // A new secret with the new endpoint is fine.
    server.set("s3", s3("https://other.example", "AK2", "new-secret"));
    assert_eq!(saved(), "new-secret");
}

/// Finding 11: integration tokens are kept as their SHA-256: the whole token is shown once (in the
/// creation's answer, where Owncast's bots read it), the list gives a display form, and a token an
/// earlier castd stored in full keeps working after the upgrade, which removes the stored value.
#[test]
fn integration_tokens_are_stored_hashed_shown_once_and_old_plain_ones_keep_working() {
    use sha2::Digest;
    let server = Server::start();
    let created = create_token(&server, "owlbot", &["HAS_ADMIN_ACCESS"]);
    let token = created["accessToken"].as_str().unwrap().to_string();
    assert_eq!((token.len(), &created["accessTokenComplete"]), (44, &json!(true)));
    let title = |server: &Server, token: &str, value: &str| {
        let r = server.client.post(server.url("/api/integrations/streamtitle")).bearer_auth(token);
        r.json(&json!({ "value": value })).send().unwrap().status().as_u16()
    };
    assert_eq!(title(&server, &token, "from the bot"), 200, "the token works as Bearer");
    let list = server.admin_get("/api/admin/accesstokens").text().unwrap();
    assert!(!list.contains(&token), "the list holds the token: {list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["accessToken"], format!("{}…", &token[..8]));
    assert_eq!(list[0]["accessTokenComplete"], false);
    assert_eq!(list[0]["displayName"], "owlbot");

    // A database from before: the tokens table at its second migration, a token stored in full.
    let mut server = server;
    server.stop();
    let old = "old-plain-token-0123456789abcdefghijklmnopq";
    {
        let db = rusqlite::Connection::open(server.data_dir.join("castd.db")).unwrap();
        db.execute_batch("ALTER TABLE access_tokens ADD COLUMN token TEXT;").unwrap();
        db.execute(
            "INSERT INTO access_tokens (id, token_hash, token_prefix, display_name, display_color, scopes, created_at, token)
             VALUES ('oldbot', ?1, ?2, 'old bot', 1, '[\"HAS_ADMIN_ACCESS\"]', '2024-01-01T00:00:00Z', ?3)",
            rusqlite::params![hex::encode(sha2::Sha256::digest(old.as_bytes())), &old[..8], old],
        )
        .unwrap();
        db.execute("UPDATE schema_migrations SET version = 2 WHERE module = 'tokens'", []).unwrap();
    }
    let mut server = server.restart();
    assert_eq!(title(&server, old, "from the old bot"), 200, "the old token keeps working");
    assert_eq!(title(&server, &token, "from the new bot"), 200);
    let list = server.admin_get("/api/admin/accesstokens").text().unwrap();
    assert!(!list.contains(old), "{list}");
    assert!(list.contains(&format!("{}…", &old[..8])), "{list}");
    server.stop();
    for file in ["castd.db", "castd.db-wal"] {
        let bytes = std::fs::read(server.data_dir.join(file)).unwrap_or_default();
        assert!(!bytes.windows(old.len()).any(|w| w == old.as_bytes()), "{file} still holds the old token");
        assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()), "{file} holds the new token");
    }
}
