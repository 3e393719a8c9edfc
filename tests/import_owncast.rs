//! `castd import-owncast`: an Owncast data directory built here the way Owncast leaves it (goose
//! schema 12, gob-encoded datastore values, PKCS#1 ActivityPub key, bcrypt admin password, plain-text
//! tokens) is imported with the real binary; then the real daemon runs on the imported directory and
//! everything is checked over HTTP and the chat websocket.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use castd::import::gob::encode::{encode, Enc};
use common::chatclient::{connect_raw, history, next_of, say};
use common::receiver::Receiver;
use common::Server;
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::{DecodePublicKey, EncodePublicKey, LineEnding};
use rusqlite::{params, Connection};
use serde_json::{json, Value};

const ADMIN_PW: &str = "owncast-admin-password-1";
const ALICE_TOKEN: &str = "alice-owncast-token-0123456789abcdefghijklmnopq";
const ALICE_OLD_TOKEN: &str = "alice-older-token-0123456789abcdefghijklmnop";
const BOB_TOKEN: &str = "bob-owncast-token-0123456789abcdefghijklmnopqrs";
const BOT_TOKEN: &str = "bot-owncast-token-0123456789abcdefghijklmnopqrs";
const STREAM_KEY: &str = "owncast-stream-key-abcdef";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// Owncast's schema at goose version 12 (the tables the importer reads; see the facts note).
const SCHEMA: &str = "
CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL, tstamp TIMESTAMP DEFAULT (datetime('now')));
CREATE TABLE datastore (key string NOT NULL PRIMARY KEY, value BLOB, timestamp DATE DEFAULT CURRENT_TIMESTAMP NOT NULL);
CREATE TABLE webhooks (id INTEGER PRIMARY KEY AUTOINCREMENT, url string NOT NULL, events TEXT NOT NULL, timestamp DATETIME DEFAULT CURRENT_TIMESTAMP, last_used DATETIME, secret TEXT NOT NULL DEFAULT 'abc123');
CREATE TABLE users (id TEXT, display_name TEXT NOT NULL, display_color INTEGER NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, disabled_at TIMESTAMP, previous_names TEXT DEFAULT '', namechanged_at TIMESTAMP, authenticated_at TIMESTAMP, scopes TEXT, type TEXT DEFAULT 'STANDARD', last_used DATETIME DEFAULT CURRENT_TIMESTAMP, disabled_reason TEXT, PRIMARY KEY (id));
CREATE TABLE user_access_tokens (token TEXT NOT NULL PRIMARY KEY, user_id TEXT NOT NULL, timestamp DATE DEFAULT CURRENT_TIMESTAMP NOT NULL);
CREATE TABLE auth (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, auth_key TEXT NOT NULL, type TEXT NOT NULL, timestamp DATE DEFAULT CURRENT_TIMESTAMP NOT NULL, provider TEXT NOT NULL DEFAULT '', profile_url TEXT, handle TEXT, is_public BOOLEAN NOT NULL DEFAULT false);
CREATE TABLE messages (id string PRIMARY KEY, user_id TEXT, body TEXT, eventType TEXT, hidden_at DATETIME, timestamp DATETIME, title TEXT, subtitle TEXT, image TEXT, link TEXT);
CREATE TABLE ip_bans (ip_address TEXT NOT NULL PRIMARY KEY, notes TEXT, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE notifications (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, destination TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE ap_followers (iri TEXT NOT NULL, inbox TEXT NOT NULL, shared_inbox TEXT, name TEXT, username TEXT NOT NULL, image TEXT, request TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, approved_at TIMESTAMP, disabled_at TIMESTAMP, request_object BLOB, last_validated_at TIMESTAMP, first_validation_failure_at TIMESTAMP, directory BOOLEAN DEFAULT false, PRIMARY KEY (iri));
CREATE TABLE ap_outbox (iri TEXT NOT NULL, value BLOB, type TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, live_notification BOOLEAN DEFAULT FALSE, coalesce_version INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (iri));
CREATE TABLE ap_accepted_activities (id INTEGER PRIMARY KEY AUTOINCREMENT, iri TEXT NOT NULL, actor TEXT NOT NULL, type TEXT NOT NULL, timestamp TIMESTAMP NOT NULL);
CREATE TABLE ap_delivery_queue (id INTEGER PRIMARY KEY AUTOINCREMENT, inbox TEXT NOT NULL, payload BLOB NOT NULL, actor_iri TEXT NOT NULL, activity_type TEXT NOT NULL, coalesce_key TEXT, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at TIMESTAMP, claimed_until TIMESTAMP, last_error TEXT, failed_at TIMESTAMP, created_at TIMESTAMP, revision INTEGER NOT NULL DEFAULT 0, ordering_key TEXT, coalesce_version INTEGER NOT NULL DEFAULT 0, blocks_following BOOLEAN NOT NULL DEFAULT false);
CREATE TABLE federated_servers (id INTEGER PRIMARY KEY AUTOINCREMENT, iri TEXT UNIQUE, name TEXT, logo_url TEXT, is_online BOOLEAN, stream_title TEXT, stream_description TEXT, stream_tags TEXT, thumbnail_url TEXT, last_seen_online TIMESTAMP, last_status_update TIMESTAMP, added_at TIMESTAMP, followed_at TIMESTAMP, pending BOOLEAN, username TEXT, display_name TEXT, summary TEXT, accepted_at TIMESTAMP, rejected_at TIMESTAMP, follow_status TEXT, priority INT NOT NULL DEFAULT 0);
";

fn s(v: &str) -> Enc {
    Enc::String(v.into())
}

fn fields(pairs: &[(&str, Enc)]) -> Vec<(String, Enc)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// An Owncast working directory (with `data/`), as a given Owncast version leaves it.
struct Owncast {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    /// The ActivityPub public key (PKIX PEM) as Owncast stored it.
    public_pem: String,
    /// The VAPID public key (base64url, uncompressed point) as Owncast stored it.
    vapid_public: String,
}

impl Owncast {
    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    fn db(&self) -> Connection {
        Connection::open(self.data().join("owncast.db")).unwrap()
    }
}

fn rsa_pair() -> (String, String) {
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    let private = key.to_pkcs1_pem(LineEnding::LF).unwrap().to_string();
    let public = rsa::RsaPublicKey::from(&key).to_public_key_pem(LineEnding::LF).unwrap();
    (private, public)
}

fn build_owncast(webhook_url: &str) -> Owncast {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("owncast");
    let data = root.join("data");
    std::fs::create_dir_all(data.join("emoji/blob")).unwrap();
    std::fs::create_dir_all(data.join("public/docs")).unwrap();
    std::fs::write(data.join("logo-1690000000.png"), PNG).unwrap();
    std::fs::write(data.join("emoji/partyparrot.png"), PNG).unwrap();
    std::fs::write(data.join("emoji/blob/blobcat.png"), PNG).unwrap();
    std::fs::write(data.join("emoji/notes.txt"), b"not an image").unwrap();
    std::fs::write(data.join("public/hello.txt"), b"hello from owncast").unwrap();
    std::fs::write(data.join("public/docs/rules.md"), b"# Rules").unwrap();
    let (private_pem, public_pem) = rsa_pair();
    // VAPID keys as webpush-go makes them: base64url (no padding) of the scalar and of the point.
    let vapid = {
        use web_push_native::jwt_simple::algorithms::ES256KeyPair;
        ES256KeyPair::generate()
    };
    let b64 = |b: &[u8]| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    };
    let vapid_private = b64(&vapid.to_bytes());
    let vapid_public = {
        use web_push_native::jwt_simple::algorithms::ECDSAP256KeyPairLike;
        b64(&vapid.key_pair().public_key().to_bytes_uncompressed())
    };

    let c = Connection::open(data.join("owncast.db")).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.execute_batch(SCHEMA).unwrap();
    for v in 0..=12 {
        c.execute("INSERT INTO goose_db_version (version_id, is_applied) VALUES (?1, 1)", [v]).unwrap();
    }
    let key = |k: &str, c: &str| fields(&[("Key", s(k)), ("Comment", s(c))]);
    let handle = |p: &str, u: &str| fields(&[("Platform", s(p)), ("URL", s(u)), ("Icon", s(""))]);
    let variant = |name: &str, vb: f64, w: f64, fps: f64| {
        fields(&[
            ("Name", s(name)),
            ("IsVideoPassthrough", Enc::Bool(false)),
            ("IsAudioPassthrough", Enc::Bool(true)),
            ("VideoBitrate", Enc::Float(vb)),
            ("AudioBitrate", Enc::Float(0.0)),
            ("ScaledWidth", Enc::Float(w)),
            ("ScaledHeight", Enc::Float(0.0)),
            ("Framerate", Enc::Float(fps)),
            ("CPUUsageLevel", Enc::Float(3.0)),
        ])
    };
    let datastore: Vec<(&str, Enc)> = vec![
        ("DATA_STORE_VERSION", Enc::Float(4.0)),
        ("HAS_POPULATED_DEFAULTS", Enc::Bool(true)),
        ("server_name", s("Retro Game Nights")),
        ("server_summary", s("Old games, new friends.")),
        ("server_welcome_message", s("Welcome, be nice!")),
        ("server_url", s("https://live.example.org")),
        ("stream_title", s("Speedruns all night")),
        ("extra_page_content", s("## About\nWe play *old* games.")),
        ("custom_offline_message", s("Back on Friday at 8.")),
        ("logo_path", s("logo-1690000000.png")),
        ("logo_uniqueness", s("abc")),
        ("admin_password_key", s(&castd::password::hash(ADMIN_PW).unwrap())),
        (
            "stream_keys",
            Enc::StructSlice(
                "StreamKey".into(),
                key("", ""),
                vec![key(STREAM_KEY, "OBS at home"), key("second-key-for-laptop", "")],
            ),
        ),
        ("http_port_number", Enc::Float(8080.0)),
        ("rtmp_port_number", Enc::Float(1935.0)),
        ("server_metadata_tags", s("retro,games,speedrun")),
        (
            "social_handles",
            Enc::StructSlice(
                "SocialHandle".into(),
                handle("", ""),
                vec![
                    handle("mastodon", "https://mastodon.example/@retro"),
                    handle("github", "https://github.com/retro"),
                ],
            ),
        ),
        ("nsfw", Enc::Bool(true)),
        ("hide_viewer_count", Enc::Bool(true)),
        ("custom_styles", s("body { background: #123; }")),
        ("custom_javascript", s("console.log('hi')")),
        (
            "custom_color_variable_values",
            Enc::StringMap(vec![("theme-color-background-main".into(), "#112233".into())]),
        ),
        ("video_latency_level", Enc::Float(3.0)),
        (
            "video_stream_output_variants",
            Enc::StructSlice(
                "StreamOutputVariant".into(),
                variant("", 0.0, 0.0, 0.0),
                vec![variant("720p", 2500.0, 1280.0, 30.0), variant("360p", 800.0, 640.0, 24.0)],
            ),
        ),
        (
            "s3_storage_config",
            Enc::Struct(
                "S3".into(),
                fields(&[
                    ("Enabled", Enc::Bool(false)),
                    ("Endpoint", s("https://s3.example.org")),
                    ("ServingEndpoint", s("")),
                    ("AccessKey", s("AKIA123")),
                    ("Secret", s("s3cr3t")),
                    ("Bucket", s("retro-bucket")),
                    ("Region", s("eu-1")),
                    ("ACL", s("")),
                    ("ForcePathStyle", Enc::Bool(true)),
                ]),
            ),
        ),
        ("chat_join_messages_enabled", Enc::Bool(false)),
        ("chat_slur_filter_enabled", Enc::Bool(true)),
        ("blocked_usernames", Enc::StringSlice(vec!["owncast".into(), "admin".into(), "badword".into()])),
        ("suggested_usernames", Enc::StringSlice(vec!["Pixel".into(), "Sprite".into()])),
        ("federation_enabled", Enc::Bool(true)),
        ("federation_username", s("retro")),
        ("federation_go_live_message", s("Retro night is live!")),
        ("federation_blocked_domains", s("spam.example,bad.example")),
        ("private_key", s(&private_pem)),
        ("public_key", s(&public_pem)),
        ("directory_enabled", Enc::Bool(true)),
        ("browser_push_private_key", s(&vapid_private)),
        ("browser_push_public_key", s(&vapid_public)),
        ("peak_viewers_overall", Enc::Float(42.0)),
        ("schedule_show_countdown", Enc::Bool(true)),
        (
            "browser_push_configuration",
            Enc::Struct(
                "BrowserNotificationConfiguration".into(),
                fields(&[("Enabled", Enc::Bool(true)), ("GoLiveMessage", s("We're live"))]),
            ),
        ),
    ];
    for (k, v) in &datastore {
        c.execute("INSERT INTO datastore (key, value) VALUES (?1, ?2)", params![k, encode(v)]).unwrap();
    }
    let users = [
        ("alice-id", "alice", 3, "MODERATOR", "STANDARD", None::<&str>, Some("2024-02-01 10:00:00+00:00")),
        ("bob-id", "bob", 5, "", "STANDARD", Some("2024-03-01 10:00:00+00:00"), None),
        ("carol-id", "carol", 1, "", "STANDARD", None, None),
        ("bot-id", "Game Bot", 2, "CAN_SEND_MESSAGES,CAN_SEND_SYSTEM_MESSAGES", "API", None, None),
    ];
    for (id, name, color, scopes, kind, disabled, authed) in users {
        c.execute(
            "INSERT INTO users (id, display_name, display_color, created_at, disabled_at, previous_names, authenticated_at, scopes, type, disabled_reason)
             VALUES (?1, ?2, ?3, '2024-01-05 18:30:00.123456789+00:00', ?4, ?5, ?6, ?7, ?8, ?9)",
            params![id, name, color, disabled, format!("{name},old-{name}"), authed, scopes, kind, disabled.map(|_| "spam")],
        )
        .unwrap();
    }
    for (token, user, when) in [
        (ALICE_TOKEN, "alice-id", "2024-02-02 10:00:00+00:00"),
        (ALICE_OLD_TOKEN, "alice-id", "2024-01-05 18:30:00+00:00"),
        (BOB_TOKEN, "bob-id", "2024-01-05 18:30:00+00:00"),
        (BOT_TOKEN, "bot-id", "2024-01-05 18:30:00+00:00"),
    ] {
        c.execute(
            "INSERT INTO user_access_tokens (token, user_id, timestamp) VALUES (?1, ?2, ?3)",
            params![token, user, when],
        )
        .unwrap();
    }
    c.execute(
        "INSERT INTO auth (user_id, auth_key, type, provider) VALUES ('alice-id', 'https://alice.example/', 'indieauth', 'IndieAuth')",
        [],
    )
    .unwrap();
    for (id, user, body, kind, hidden, when) in [
        ("m1", Some("alice-id"), "hello everyone", "CHAT", None::<&str>, "2024-02-01 20:00:00+00:00"),
        (
            "m2",
            Some("bob-id"),
            "buy cheap stuff",
            "CHAT",
            Some("2024-02-01 20:02:00+00:00"),
            "2024-02-01 20:01:00+00:00",
        ),
        ("m3", None, "Stream starting soon", "SYSTEM", None, "2024-02-01 19:59:00+00:00"),
        ("m4", Some("bot-id"), "GG!", "CHAT", None, "2024-02-01 20:03:00+00:00"),
    ] {
        c.execute(
            "INSERT INTO messages (id, user_id, body, eventType, hidden_at, timestamp) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, user, body, kind, hidden, when],
        )
        .unwrap();
    }
    c.execute("INSERT INTO ip_bans (ip_address, notes) VALUES ('203.0.113.7', 'spammer')", []).unwrap();
    for (n, approved, disabled) in [(1, true, false), (2, true, false), (3, false, false), (4, true, true)] {
        c.execute(
            "INSERT INTO ap_followers (iri, inbox, shared_inbox, name, username, image, request, approved_at, disabled_at)
             VALUES (?1, ?2, 'https://social.example/inbox', ?3, ?4, '', ?5, ?6, ?7)",
            params![
                format!("https://social.example/users/fan{n}"),
                format!("https://social.example/users/fan{n}/inbox"),
                format!("Fan {n}"),
                format!("fan{n}@social.example"),
                format!("https://social.example/follows/{n}"),
                approved.then_some("2024-01-10 10:00:00+00:00"),
                disabled.then_some("2024-01-11 10:00:00+00:00"),
            ],
        )
        .unwrap();
    }
    let note = json!({"@context": "https://www.w3.org/ns/activitystreams", "id": "https://live.example.org/federation/abc", "type": "Create",
        "object": {"type": "Note", "content": "Retro night is live!"}});
    c.execute(
        "INSERT INTO ap_outbox (iri, value, type, live_notification) VALUES ('https://live.example.org/federation/abc', ?1, 'Create', 1)",
        [note.to_string().into_bytes()],
    )
    .unwrap();
    c.execute(
        "INSERT INTO ap_accepted_activities (iri, actor, type, timestamp) VALUES ('https://social.example/likes/9', 'https://social.example/users/fan1', 'FEDIVERSE_ENGAGEMENT_LIKE', '2024-02-01 20:05:00+00:00')",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO webhooks (url, events, secret) VALUES (?1, 'CHAT,USER_JOINED,STREAM_STARTED,SOME_FUTURE_EVENT', 'hook-secret-1')",
        [webhook_url],
    )
    .unwrap();
    c.execute(
        "INSERT INTO notifications (channel, destination) VALUES ('BROWSER_PUSH_NOTIFICATION', ?1)",
        [json!({"endpoint": "https://push.example/abc", "keys": {"p256dh": "x", "auth": "y"}}).to_string()],
    )
    .unwrap();
    c.execute(
        "INSERT INTO federated_servers (iri, name) VALUES ('https://other.example/federation/user/x', 'Other')",
        [],
    )
    .unwrap();
    drop(c);
    Owncast { _tmp: tmp, root, public_pem, vapid_public }
}

/// Every file under `dir` with its contents (to show the import leaves the Owncast dir as it was).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Run `castd import-owncast`; (success, stdout, stderr).
fn import(from: &Path, data_dir: &Path, extra: &[&str]) -> (bool, String, String) {
    let out = Command::new(common::BIN)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("import-owncast")
        .arg("--from")
        .arg(from)
        .args(extra)
        .output()
        .expect("run castd import-owncast");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn line_count(report: &str, kind: &str) -> Option<u64> {
    report.lines().find_map(|l| l.strip_prefix(&format!("imported {kind}: "))?.trim().parse().ok())
}

#[test]
fn an_owncast_server_comes_over_whole() {
    let hooks = Receiver::start(&[]);
    let oc = build_owncast(&hooks.url);
    let before = snapshot(&oc.root);
    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");

    let (ok, report, err) = import(&oc.root, &data_dir, &[]);
    assert!(ok, "import failed: {err}\n{report}");
    println!("{report}");
    assert_eq!(snapshot(&oc.root), before, "the Owncast directory was modified");
    for (kind, n) in [
        ("chat users", 3),
        ("access tokens", 1),
        ("chat messages", 4),
        ("IP bans", 1),
        ("followers", 2),
        ("pending follow requests", 1),
        ("blocked followers", 1),
        ("federation posts", 1),
        ("federation activity", 1),
        ("webhooks", 1),
        ("push subscriptions", 1),
        ("stream keys", 2),
        ("video variants", 2),
        ("custom emoji", 1),
        ("public files", 2),
        ("logo", 1),
        ("admin password", 1),
        ("federation key pair", 1),
        ("auth links", 1),
    ] {
        assert_eq!(line_count(&report, kind), Some(n), "{kind} in report:\n{report}");
    }
    for reason in [
        "not imported chat user tokens: 1 (castd keeps one token per user",
        "not imported webhook events: 1 (SOME_FUTURE_EVENT is not an event castd sends)",
        "not imported federated servers: 1",
        "not imported settings: 1 (schedule_show_countdown: castd has no such setting)",
        "not imported custom emoji: 1 (a subdirectory",
        "not imported custom emoji: 1 (not a PNG",
    ] {
        assert!(report.contains(reason), "missing '{reason}' in:\n{report}");
    }
    assert!(data_dir.join("emoji/partyparrot.png").is_file());
    assert_eq!(std::fs::read(data_dir.join("public/docs/rules.md")).unwrap(), b"# Rules");

    let mut s = Server::start_in(&data_dir, &["--federation-allow-http-loopback"]);
    s.admin_password = ADMIN_PW.to_string();
    assert!(
        !data_dir.join("initial-admin-password").exists(),
        "castd generated an admin password instead of keeping Owncast's"
    );

    // Settings, through the public and admin config.
    let config = s.get_json("/api/config");
    assert_eq!(config["name"], "Retro Game Nights");
    assert_eq!(config["summary"], "Old games, new friends.");
    assert_eq!(config["offlineMessage"], "<p>Back on Friday at 8.</p>", "rendered from the imported Markdown");
    assert_eq!(config["tags"], json!(["retro", "games", "speedrun"]));
    assert_eq!(config["socialHandles"][0]["url"], "https://mastodon.example/@retro");
    assert_eq!(config["nsfw"], true);
    assert_eq!(config["notifications"]["browser"]["enabled"], true);
    assert_eq!(config["notifications"]["browser"]["publicKey"], oc.vapid_public.as_str(), "the VAPID key came over");
    assert_eq!(config["appearanceVariables"]["theme-color-background-main"], "#112233");
    assert_eq!(s.get("/logo").bytes().unwrap().as_ref(), PNG);
    assert_eq!(s.get("/public/hello.txt").text().unwrap(), "hello from owncast");
    assert_eq!(s.get("/customjavascript").text().unwrap(), "console.log('hi')");
    let sc = s.admin_json("/api/admin/serverconfig");
    assert_eq!(sc["streamKeys"][0]["key"], STREAM_KEY);
    assert_eq!(sc["streamKeys"][0]["comment"], "OBS at home");
    assert_eq!(sc["videoSettings"]["latencyLevel"], 3);
    assert_eq!(sc["videoSettings"]["videoQualityVariants"][0]["videoBitrate"], 2500);
    assert_eq!(sc["videoSettings"]["videoQualityVariants"][1]["scaledWidth"], 640);
    assert_eq!(sc["s3"]["bucket"], "retro-bucket");
    assert_eq!(sc["s3"]["forcePathStyle"], true);
    assert_eq!(sc["federation"]["username"], "retro");
    assert_eq!(sc["federation"]["blockedDomains"], json!(["spam.example", "bad.example"]));
    assert_eq!(sc["chatJoinMessagesEnabled"], false, "{sc}");
    assert_eq!(sc["chatSlurFilterEnabled"], true);
    assert_eq!(sc["instanceDetails"]["welcomeMessage"], "Welcome, be nice!");
    assert_eq!(sc["instanceDetails"]["extraPageContent"], "## About\nWe play *old* games.");
    assert_eq!(sc["notifications"]["browser"]["goLiveMessage"], "We're live");
    assert_eq!(sc["forbiddenUsernames"], json!(["owncast", "admin", "badword"]));
    assert_eq!(sc["suggestedUsernames"], json!(["Pixel", "Sprite"]));
    assert_eq!(sc["instanceDetails"]["customStyles"], "body { background: #123; }");
    assert_eq!(sc["yp"]["enabled"], true, "{sc}");

    // Alice chats with her Owncast token, keeps her name, colour and moderator scope; the webhook fires.
    let mut ws = connect_raw(&s, ALICE_TOKEN);
    let info = next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).expect("CONNECTED_USER_INFO");
    assert_eq!(info["user"]["id"], "alice-id");
    assert_eq!(info["user"]["displayName"], "alice");
    assert_eq!(info["user"]["displayColor"], 3);
    assert_eq!(info["user"]["isModerator"], true);
    assert_eq!(info["user"]["authenticated"], true, "her IndieAuth sign-in came over");
    say(&mut ws, "still here after the move");
    let hook = hooks
        .wait_for(Duration::from_secs(10), |r| r.json()["type"] == "CHAT")
        .expect("the imported webhook fired for a chat message");
    assert_eq!(hook.json()["eventData"]["body"].as_str().map(|b| b.contains("still here")), Some(true));
    // History came over, oldest first, with its authors; the hidden message stays hidden (Alice, a
    // moderator, sees it marked so). The SYSTEM row has no user, so it is not listed (Owncast's
    // history query joins the users table).
    let hist = history(&s, ALICE_TOKEN);
    let bodies: Vec<&str> = hist.iter().filter_map(|m| m["body"].as_str()).collect();
    assert_eq!(&bodies[..3], ["hello everyone", "buy cheap stuff", "GG!"], "{hist:?}");
    assert!(!bodies.contains(&"Stream starting soon"), "{hist:?}");
    assert_eq!(hist[0]["user"]["displayName"], "alice");
    assert_eq!(hist[1]["visible"], false);
    assert_eq!(hist[2]["user"]["isBot"], true);
    // The older token of Alice was not kept; Bob is disabled.
    let users = s.admin_json("/api/admin/chat/users/disabled");
    assert_eq!(users[0]["id"], "bob-id", "{users}");
    let mods = s.admin_json("/api/admin/chat/users/moderators");
    assert_eq!(mods[0]["id"], "alice-id", "{mods}");

    // The integration keeps its token.
    let r = s
        .client
        .post(s.url("/api/integrations/chat/send"))
        .bearer_auth(BOT_TOKEN)
        .json(&json!({"body": "bot still works"}))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "bot send: {}", r.status());
    let bad =
        s.client.post(s.url("/api/integrations/chat/send")).bearer_auth("nope").json(&json!({"body": "x"})).send();
    assert_eq!(bad.unwrap().status().as_u16(), 401);
    // The admin's token list shows its display form only (castd keeps tokens as their SHA-256).
    let tokens = s.admin_json("/api/admin/accesstokens");
    let shown = format!("{}…", &BOT_TOKEN[..8]);
    assert!(
        tokens.as_array().into_iter().flatten().any(|t| t["accessToken"] == shown.as_str()),
        "the imported token is listed by its display form: {tokens}"
    );
    assert!(!tokens.to_string().contains(BOT_TOKEN), "the token itself is not listed");

    // Followers, pending requests, bans.
    let followers = s.get_json("/api/followers");
    assert_eq!(followers["total"], 2, "{followers}");
    let pending = s.admin_json("/api/admin/followers/pending");
    assert_eq!(pending["total"], 1, "{pending}");
    assert_eq!(pending["results"][0]["link"], "https://social.example/users/fan3");
    assert_eq!(s.admin_json("/api/admin/followers/blocked")["total"], 1);
    let bans = s.admin_json("/api/admin/chat/users/ipbans");
    assert_eq!(bans[0]["ipAddress"], "203.0.113.7", "{bans}");

    // Custom emoji.
    let emoji = s.get_json("/api/emoji");
    assert_eq!(emoji.as_array().map(|e| e.iter().filter(|x| x["name"] == "partyparrot").count()), Some(1), "{emoji}");

    // The actor publishes Owncast's public key; its posts and the activity list came over.
    s.set("serverurl", json!(s.base));
    let outbox: Value = s
        .client
        .get(s.url("/federation/user/retro/outbox"))
        .header("accept", "application/activity+json")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(outbox["totalItems"], 1, "{outbox}");
    let actions = s.admin_json("/api/admin/federation/actions");
    assert_eq!(actions["results"][0]["iri"], "https://social.example/likes/9", "{actions}");
    let actor: Value = s
        .client
        .get(s.url("/federation/user/retro"))
        .header("accept", "application/activity+json")
        .send()
        .unwrap()
        .json()
        .unwrap();
    let published = actor["publicKey"]["publicKeyPem"].as_str().expect("publicKeyPem");
    assert_eq!(
        rsa::RsaPublicKey::from_public_key_pem(published).unwrap(),
        rsa::RsaPublicKey::from_public_key_pem(&oc.public_pem).unwrap()
    );
    s.stop();
}

#[test]
fn dry_run_writes_nothing_and_a_second_import_needs_force() {
    let oc = build_owncast("http://127.0.0.1:9/hook");
    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");
    let (ok, report, err) = import(&oc.root, &data_dir, &["--dry-run"]);
    assert!(ok, "{err}");
    assert!(report.contains("would import chat users: 3"), "{report}");
    assert!(!data_dir.exists(), "a dry run created the data dir");
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 0, "a dry run left files beside the target");

    // The import, then again: refused without --force, the same result with it.
    let (ok, first, err) = import(&oc.data(), &data_dir, &[]);
    assert!(ok, "{err}");
    let (ok, _, err) = import(&oc.root, &data_dir, &[]);
    assert!(!ok && err.contains("not empty") && err.contains("--force"), "{err}");
    let (ok, second, err) = import(&oc.root, &data_dir, &["--force"]);
    assert!(ok, "{err}");
    assert_eq!(first, second, "a repeated import reported differently");
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 1, "leftovers beside the data dir");
    let db = Connection::open(data_dir.join("castd.db")).unwrap();
    let n: i64 = db.query_row("SELECT COUNT(*) FROM chat_users", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 4, "three users and the bot, once each");
}

/// A failed import: an error naming the problem, and no data dir (not even a partial one).
fn assert_refused(oc: &Owncast, want: &str) {
    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");
    let (ok, out, err) = import(&oc.root, &data_dir, &[]);
    assert!(!ok, "the import succeeded: {out}");
    assert!(err.contains(want), "error does not say '{want}': {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 0, "something was written: {err}");
}

#[test]
fn corrupt_or_unknown_input_is_refused_with_nothing_written() {
    // A truncated database.
    let oc = build_owncast("http://127.0.0.1:9/hook");
    {
        let c = oc.db();
        c.pragma_update(None, "journal_mode", "DELETE").unwrap();
    }
    let db = oc.data().join("owncast.db");
    let bytes = std::fs::read(&db).unwrap();
    std::fs::write(&db, &bytes[..bytes.len() / 2]).unwrap();
    assert_refused(&oc, "damaged");

    // A schema newer than this castd knows.
    let oc = build_owncast("http://127.0.0.1:9/hook");
    oc.db().execute("INSERT INTO goose_db_version (version_id, is_applied) VALUES (13, 1)", []).unwrap();
    assert_refused(&oc, "schema version 13");

    // A legacy (pre-goose) database.
    let oc = build_owncast("http://127.0.0.1:9/hook");
    oc.db().execute_batch("DROP TABLE goose_db_version; CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT); INSERT INTO config VALUES ('version', '6');").unwrap();
    assert_refused(&oc, "legacy schema (version 6)");

    // A garbled ActivityPub key: importing would change the server's identity.
    let oc = build_owncast("http://127.0.0.1:9/hook");
    oc.db()
        .execute(
            "UPDATE datastore SET value = ?1 WHERE key = 'private_key'",
            [encode(&s("-----BEGIN RSA PRIVATE KEY-----\nxx"))],
        )
        .unwrap();
    assert_refused(&oc, "ActivityPub private key");

    // No database at all.
    let oc = build_owncast("http://127.0.0.1:9/hook");
    std::fs::remove_file(oc.data().join("owncast.db")).unwrap();
    assert_refused(&oc, "no owncast.db");
}

#[test]
fn a_running_owncasts_wal_is_read_and_left_alone() {
    let oc = build_owncast("http://127.0.0.1:9/hook");
    // As while Owncast runs: the newest transactions only in owncast.db-wal, the connection open.
    let c = oc.db();
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    c.execute(
        "INSERT INTO users (id, display_name, display_color, scopes, type) VALUES ('dave-id', 'dave', 4, '', 'STANDARD')",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO user_access_tokens (token, user_id) VALUES ('dave-token-0123456789abcdefghijklmnop', 'dave-id')",
        [],
    )
    .unwrap();
    let wal = oc.data().join("owncast.db-wal");
    assert!(std::fs::metadata(&wal).map(|m| m.len() > 0).unwrap_or(false), "the test needs a WAL with the new rows");
    let before = snapshot(&oc.root);
    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");
    let (ok, report, err) = import(&oc.root, &data_dir, &[]);
    assert!(ok, "{err}");
    assert_eq!(line_count(&report, "chat users"), Some(4), "the user only in the WAL is missing:\n{report}");
    assert_eq!(snapshot(&oc.root), before, "the Owncast directory (WAL, shm) was modified");
    let db = Connection::open(data_dir.join("castd.db")).unwrap();
    let name: String = db
        .query_row(
            "SELECT display_name FROM chat_users WHERE token_hash = ?1",
            [castd::chat::users::token_hash("dave-token-0123456789abcdefghijklmnop")],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(name, "dave");
    drop(c);
}

#[test]
fn an_older_owncast_schema_imports_too() {
    // Goose version 3: auth.token (renamed auth_key in 4), no webhook secret (5), no disabled_reason (7).
    let oc = build_owncast("http://127.0.0.1:9/hook");
    oc.db()
        .execute_batch(
            "DELETE FROM goose_db_version WHERE version_id > 3;
             ALTER TABLE auth RENAME COLUMN auth_key TO token;
             ALTER TABLE webhooks DROP COLUMN secret;
             ALTER TABLE users DROP COLUMN disabled_reason;",
        )
        .unwrap();
    // A datastore before version 4 kept the admin password itself, and before 2 a single stream key.
    let c = oc.db();
    c.execute("UPDATE datastore SET value = ?1 WHERE key = 'DATA_STORE_VERSION'", [encode(&Enc::Float(1.0))]).unwrap();
    c.execute("UPDATE datastore SET value = ?1 WHERE key = 'admin_password_key'", [encode(&s("plain-old-password"))])
        .unwrap();
    c.execute("DELETE FROM datastore WHERE key = 'stream_keys'", []).unwrap();
    c.execute("INSERT INTO datastore (key, value) VALUES ('stream_key', ?1)", [encode(&s("legacy-stream-key"))])
        .unwrap();
    drop(c);
    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");
    let (ok, report, err) = import(&oc.root, &data_dir, &[]);
    assert!(ok, "{err}");
    assert!(report.starts_with("Owncast schema version 3"), "{report}");
    assert_eq!(line_count(&report, "auth links"), Some(1), "{report}");
    assert_eq!(line_count(&report, "webhooks"), Some(1), "{report}");
    let db = Connection::open(data_dir.join("castd.db")).unwrap();
    let identity: String =
        db.query_row("SELECT auth_identity FROM chat_users WHERE id = 'alice-id'", [], |r| r.get(0)).unwrap();
    assert_eq!(identity, "https://alice.example/");
    let setting = |key: &str| -> Value {
        let raw: String = db.query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| r.get(0)).unwrap();
        serde_json::from_str(&raw).unwrap()
    };
    let hash = setting("adminPasswordHash");
    let hash = hash.as_str().unwrap();
    assert!(hash.starts_with("$2") && castd::password::verify("plain-old-password", hash), "{hash}");
    assert_eq!(setting("streamKeys"), json!([{"key": "legacy-stream-key", "comment": "Default stream key"}]));
}

/// Every file under `dir` whose contents hold `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    snapshot(dir)
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle))
        .map(|(p, _)| p)
        .collect()
}

/// Issue #39 (finding 11): the importer follows no symbolic link out of the Owncast directory (the logo,
/// the `public/` folder or a file in it, an emoji), and imported chat bodies go through castd's chat
/// cleaning: no script, `javascript:` link or foreign image comes out live.
#[test]
fn links_are_not_followed_and_imported_chat_bodies_are_cleaned() {
    use std::os::unix::fs::symlink;
    let oc = build_owncast("http://127.0.0.1:9/hook");
    let data = oc.data();
    // Secrets outside the Owncast directory, and links to them where Owncast's files would be.
    let outside = oc._tmp.path().join("elsewhere");
    std::fs::create_dir_all(outside.join("private")).unwrap();
    let secret = b"SECRET-OUTSIDE-THE-OWNCAST-DIR";
    let mut png_secret = PNG.to_vec();
    png_secret.extend_from_slice(secret);
    std::fs::write(outside.join("secret.png"), &png_secret).unwrap();
    std::fs::write(outside.join("private/key.txt"), secret).unwrap();
    std::fs::remove_file(data.join("logo-1690000000.png")).unwrap();
    symlink(outside.join("secret.png"), data.join("logo-1690000000.png")).unwrap();
    // The emoji folder itself a link to a folder elsewhere (whose files are plain files).
    std::fs::rename(data.join("emoji"), outside.join("emoji")).unwrap();
    std::fs::write(outside.join("emoji/leak.png"), &png_secret).unwrap();
    symlink(outside.join("emoji"), data.join("emoji")).unwrap();
    symlink(outside.join("private/key.txt"), data.join("public/docs/leak.txt")).unwrap();
    symlink(outside.join("private"), data.join("public/linked")).unwrap();
    // Messages as a hostile Owncast database could hold them.
    let c = Connection::open(data.join("owncast.db")).unwrap();
    for (id, body) in [
        ("x1", r#"<p>hi <script>alert(1)</script>there</p>"#),
        ("x2", r#"<p><a href="javascript:alert(2)">click me</a></p>"#),
        ("x3", r#"<p><img src="https://evil.example/x.gif" onerror="alert(3)">pic</p>"#),
        ("x4", r#"<p onclick="alert(4)"><a href="https://fine.example/">fine</a></p>"#),
    ] {
        c.execute(
            "INSERT INTO messages (id, user_id, body, eventType, timestamp) VALUES (?1, 'alice-id', ?2, 'CHAT', '2024-02-02 20:00:00+00:00')",
            params![id, body],
        )
        .unwrap();
    }
    drop(c);

    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");
    let (ok, report, err) = import(&oc.root, &data_dir, &[]);
    assert!(ok, "import failed: {err}\n{report}");
    assert_eq!(files_holding(&data_dir, secret), Vec::<PathBuf>::new(), "a linked file was copied");
    assert!(report.contains("not imported logo: 1 (logo-1690000000.png is a symbolic link"), "{report}");
    assert!(!data_dir.join("public/linked").exists() && !data_dir.join("public/docs/leak.txt").exists());
    assert!(data_dir.join("public/docs/rules.md").is_file(), "the plain files still come over");
    assert!(report.contains("not imported custom emoji: 1 (emoji/ is a symbolic link"), "{report}");

    let s = Server::start_in(&data_dir, &[]);
    assert_ne!(s.get("/logo").bytes().unwrap().as_ref(), &png_secret[..]);
    assert_eq!(s.get("/public/linked/key.txt").status(), 404);
    let hist = history(&s, ALICE_TOKEN);
    let body = |id: &str| hist.iter().find(|m| m["id"] == id).and_then(|m| m["body"].as_str()).unwrap().to_string();
    for id in ["x1", "x2", "x3", "x4"] {
        let b = body(id);
        for bad in ["<script", "alert", "javascript:", "onerror", "onclick", "evil.example"] {
            assert!(!b.contains(bad), "message {id} kept {bad}: {b}");
        }
    }
    assert!(body("x1").contains("hi") && body("x1").contains("there"));
    assert!(body("x2").contains("click me"));
    assert!(body("x4").contains(r#"href="https://fine.example/""#), "{}", body("x4"));
    assert_eq!(body("m1"), "hello everyone", "plain bodies stay as they were");
}

/// The database itself is not read through a link either.
#[test]
fn a_linked_owncast_database_is_refused() {
    let oc = build_owncast("http://127.0.0.1:9/hook");
    let data = oc.data();
    let elsewhere = oc._tmp.path().join("other.db");
    std::fs::rename(data.join("owncast.db"), &elsewhere).unwrap();
    let _ = std::fs::remove_file(data.join("owncast.db-wal"));
    let _ = std::fs::remove_file(data.join("owncast.db-shm"));
    std::os::unix::fs::symlink(&elsewhere, data.join("owncast.db")).unwrap();
    assert_refused(&oc, "symbolic link");
}

#[test]
fn an_owncast_server_comes_over_as_a_new_channel() {
    let oc = build_owncast("http://127.0.0.1:9/hook");
    let target = tempfile::tempdir().unwrap();
    let data_dir = target.path().join("castd");
    // A castd that has run (its default channel has its own admin password and stream key), stopped.
    let mut first = Server::start_in(&data_dir, &[]);
    let server_admin = first.admin_password.clone();
    first.stop();

    let (ok, report, err) = import(&oc.root, &data_dir, &["--channel", "retro"]);
    assert!(ok, "import failed: {err}\n{report}");
    assert_eq!(line_count(&report, "chat messages"), Some(4), "{report}");
    assert!(data_dir.join("channels/retro/castd.db").is_file(), "the channel's own database");
    assert!(data_dir.join("channels/retro/emoji/partyparrot.png").is_file(), "the channel's own files");
    // The slug is taken now: refused without --force; `default` is no channel to import into.
    let (ok, _, err) = import(&oc.root, &data_dir, &["--channel", "retro"]);
    assert!(!ok && err.contains("exists already") && err.contains("--force"), "{err}");
    let (ok, _, err) = import(&oc.root, &data_dir, &["--channel", "default", "--force"]);
    assert!(!ok && err.contains("without --channel"), "{err}");
    let (ok, _, err) = import(&oc.root, &data_dir, &["--channel", "Not A Slug"]);
    assert!(!ok && err.contains("slug"), "{err}");
    // Stream keys are unique across the server: the same Owncast again as another channel is refused.
    let (ok, _, err) = import(&oc.root, &data_dir, &["--channel", "again"]);
    assert!(!ok && err.contains("already channel retro's"), "{err}");
    assert!(!data_dir.join("channels/again").exists(), "nothing written for a refused import");
    // With --force, the channel is replaced (the DIR may also be given without --from).
    let out = Command::new(common::BIN)
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["import-owncast", "--channel", "retro", "--force"])
        .arg(&oc.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mut s = Server::start_in(&data_dir, &[]);
    s.admin_password = server_admin;
    assert_eq!(s.get_json("/c/retro/api/config")["name"], "Retro Game Nights");
    assert_ne!(s.get_json("/api/config")["name"], "Retro Game Nights", "the default channel is untouched");
    let listed = s.get_json("/api/channels");
    assert!(
        listed.as_array().unwrap().iter().any(|c| c["name"] == "Retro Game Nights" && c["url"] == "/c/retro/"),
        "{listed}"
    );
    // Chat history, with Alice's Owncast token, on the channel only.
    let hist = s.get_json(&format!("/c/retro/api/chat?accessToken={ALICE_TOKEN}"));
    let bodies: Vec<&str> = hist.as_array().unwrap().iter().filter_map(|m| m["body"].as_str()).collect();
    assert_eq!(&bodies[..3], ["hello everyone", "buy cheap stuff", "GG!"], "{hist}");
    assert!(!s.get(&format!("/api/chat?accessToken={ALICE_TOKEN}")).status().is_success(), "not the default's");
    // Owncast's admin password is the channel admin's; the stream key is the channel's.
    let as_owncast_admin =
        |path: &str| s.client.get(s.url(path)).basic_auth("admin", Some(ADMIN_PW)).send().unwrap().status().as_u16();
    assert_eq!(as_owncast_admin("/c/retro/api/admin/status"), 200);
    assert_eq!(as_owncast_admin("/api/admin/status"), 401, "not the server admin's");
    let sc = s.admin_json("/c/retro/api/admin/serverconfig");
    assert_eq!(sc["streamKeys"][0]["key"], STREAM_KEY);
}
