//! Chat integration tests: the real daemon, real SQLite, real websocket clients (tungstenite).
//!
//! Every test runs twice (`each_channel!`): in the default channel's chat (`/ws`, `/api/chat`) and in a
//! channel's (`/c/c1/ws`, `/c/c1/api/chat`), administered with that channel's admin password.

mod common;

use std::time::{Duration, Instant};

use base64::Engine;
use common::chatclient::*;
use common::{each_channel, On, Server, Target};
use serde_json::{json, Value};

each_channel!(
    send_receive_sanitize_history_hide_and_rename,
    flood_is_limited_to_the_flooder,
    moderator_disables_a_user_and_bans_work,
    chat_history_survives_a_restart_and_disabled_chat_refuses,
    welcome_message_and_user_parted,
    a_client_that_stops_reading_is_dropped_and_the_room_gets_everything,
);

each_channel!(emoji_upload_is_served_and_listed);

fn send_receive_sanitize_history_hide_and_rename(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    let mut alice = join(&s, "alice");
    // X-Forwarded-User wins over the body
    let r = s
        .client
        .post(s.url("/api/chat/register"))
        .header("X-Forwarded-User", "bob")
        .json(&json!({ "displayName": "ignored" }))
        .send()
        .unwrap();
    let v: Value = r.json().unwrap();
    assert_eq!(v["displayName"], "bob");
    assert!(v["displayColor"].is_i64());
    let bob_token = v["accessToken"].as_str().unwrap().to_string();
    let mut bob = connect_raw(&s, &bob_token);
    assert!(next_of(&mut bob, "CONNECTED_USER_INFO", Duration::from_secs(5)).is_some());

    // a random name when none is asked for; forbidden names are refused
    let (_, _, anon) = register(&s, None);
    assert!(!anon["displayName"].as_str().unwrap().is_empty());
    assert_eq!(s.post_json("/api/chat/register", &json!({ "displayName": "TheAdmin" })).status(), 400);
    // A body Owncast's decoder cannot read registers a user with a picked name, as Owncast does (and as the
    // OpenAPI document says): a non-string name, another JSON value, text that is not JSON.
    for body in [json!({ "displayName": 5 }), json!(["alice"]), json!("alice")] {
        let r = s.post_json("/api/chat/register", &body);
        assert_eq!(r.status(), 200, "{body}");
        let v: Value = r.json().unwrap();
        assert!(!v["displayName"].as_str().unwrap().is_empty() && v["displayName"] != "alice", "{body}: {v}");
    }
    let r = s.client.post(s.url("/api/chat/register")).body("not json").send().unwrap();
    assert_eq!(r.status(), 200);

    say(&mut alice.ws, "**hi** <script>alert(1)</script> [x](javascript:alert(2)) https://example.com");
    let got = next_of(&mut bob, "CHAT", Duration::from_secs(5)).expect("bob receives the message");
    let body = got["body"].as_str().unwrap();
    assert!(body.contains("<strong>hi</strong>"), "{body}");
    assert!(!body.contains("script") && !body.contains("alert") && !body.contains("javascript"), "{body}");
    assert!(body.contains("<a href=\"https://example.com\""), "{body}");
    assert_eq!(got["user"]["displayName"], "alice");
    assert_eq!(got["visible"], true);
    assert!(chrono::DateTime::parse_from_rfc3339(got["timestamp"].as_str().unwrap()).is_ok());
    let msg_id = got["id"].as_str().unwrap().to_string();
    assert!(next_of(&mut alice.ws, "CHAT", Duration::from_secs(5)).is_some(), "sender sees its message too");

    // history needs a valid token
    assert_eq!(s.get("/api/chat").status(), 401);
    assert_eq!(s.get("/api/chat?accessToken=nope").status(), 401);
    let h = history(&s, &bob_token);
    assert!(h.iter().any(|m| m["id"] == msg_id.as_str() && m["body"] == body));

    // hide → VISIBILITY-UPDATE, gone from public history, kept (with hiddenAt) for the admin
    let r = s.admin_post("/api/admin/chat/messagevisibility", &json!({ "idArray": [msg_id], "visible": false }));
    assert!(r.status().is_success());
    let vu = next_of(&mut bob, "VISIBILITY-UPDATE", Duration::from_secs(5)).expect("visibility update");
    assert_eq!(vu["ids"], json!([msg_id]));
    assert_eq!(vu["visible"], false);
    assert!(!history(&s, &bob_token).iter().any(|m| m["id"] == msg_id.as_str()));
    let all = s.admin_json("/api/admin/chat/messages");
    let hidden = all.as_array().unwrap().iter().find(|m| m["id"] == msg_id.as_str()).expect("admin sees it");
    assert!(hidden["hiddenAt"].is_string());
    assert_eq!(
        s.admin_post("/api/admin/chat/messagevisibility", &json!({ "idArray": ["nope"], "visible": true })).status(),
        404
    );
    assert_eq!(s.admin_post("/api/admin/chat/messagevisibility", &json!({ "visible": true })).status(), 400);

    // name change is broadcast; a forbidden one is refused with an explanation
    send(&mut bob, json!({ "type": "NAME_CHANGE", "newName": "Robert" }));
    let nc = next_of(&mut alice.ws, "NAME_CHANGE", Duration::from_secs(5)).expect("name change");
    assert_eq!(nc["oldName"], "bob");
    assert_eq!(nc["user"]["displayName"], "Robert");
    assert_eq!(nc["user"]["previousNames"], json!(["bob"]));
    send(&mut bob, json!({ "type": "NAME_CHANGE", "newName": "system-bot" }));
    let act = next_of(&mut bob, "CHAT_ACTION", Duration::from_secs(5)).expect("refusal");
    assert!(act["body"].as_str().unwrap().contains("system-bot"));
    send(&mut bob, json!({ "type": "COLOR_CHANGE", "newColor": 3 }));
    let cc = next_of(&mut alice.ws, "COLOR_CHANGE", Duration::from_secs(5)).expect("colour change");
    assert_eq!(cc["user"]["displayColor"], 3);

    // oversize: refused with Owncast's CHAT_ACTION, the socket stays usable
    say(&mut alice.ws, &"x".repeat(3000));
    let act = next_of(&mut alice.ws, "CHAT_ACTION", Duration::from_secs(5)).expect("size refusal");
    assert!(act["body"].as_str().unwrap().contains("exceeded the maximum size"));
    say(&mut alice.ws, "still here");
    let got = next_of(&mut bob, "CHAT", Duration::from_secs(5)).expect("alive after oversize");
    assert_eq!(got["body"], "<p>still here</p>");

    // connected clients
    let clients = s.admin_json("/api/admin/chat/clients");
    let a = clients.as_array().unwrap().iter().find(|c| c["user"]["id"] == alice.id.as_str()).expect("alice listed");
    assert_eq!(a["messageCount"], 2);
    assert!(a["connectedAt"].is_string() && a["userAgent"].is_string());

    // unknown token
    let mut stranger = connect_raw(&s, "not-a-token");
    assert!(next_of(&mut stranger, "ERROR_NEEDS_REGISTRATION", Duration::from_secs(5)).is_some());
    let _ = alice.token;
}

fn flood_is_limited_to_the_flooder(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    let mut flooder = join(&s, "flooder");
    let mut calm = join(&s, "calm");
    for i in 0..20 {
        say(&mut flooder.ws, &format!("spam {i}"));
    }
    let act = next_of(&mut flooder.ws, "CHAT_ACTION", Duration::from_secs(5)).expect("flood notice");
    assert!(act["body"].as_str().unwrap().contains("flooding"));
    say(&mut calm.ws, "the room still works");
    // the flooder still receives the room
    let room = next_where(&mut flooder.ws, Duration::from_secs(5), |e| e["body"] == "<p>the room still works</p>");
    assert!(room.is_some(), "other users' messages still flow (also to the flooder)");
    // the others saw only the flooder's burst
    let mut spam_seen = 0;
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        for e in read_events(&mut calm.ws, Duration::from_millis(300)).unwrap() {
            if e["type"] == "CHAT" && e["user"]["id"] == flooder.id.as_str() {
                spam_seen += 1;
            }
        }
    }
    assert!((5..=6).contains(&spam_seen), "only the burst got through: {spam_seen}");
    let h = history(&s, &calm.token);
    assert!(h.iter().filter(|m| m["user"]["id"] == flooder.id.as_str()).count() <= 6);
}

fn moderator_disables_a_user_and_bans_work(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    let mut m = join(&s, "mod");
    let mut troll = join(&s, "troll");
    let mut viewer = join(&s, "viewer");

    // the moderator form needs the scope
    let r = s.post_json(
        &format!("/api/chat/users/setenabled?accessToken={}", m.token),
        &json!({ "userId": troll.id, "enabled": false }),
    );
    assert_eq!(r.status(), 401);
    let r = s.admin_post("/api/admin/chat/users/setmoderator", &json!({ "userId": m.id, "isModerator": true }));
    assert!(r.status().is_success());
    let info = next_of(&mut m.ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).expect("fresh user info");
    assert_eq!(info["user"]["isModerator"], true);
    assert_eq!(info["user"]["scopes"], json!(["MODERATOR"]));
    let mods = s.admin_json("/api/admin/chat/users/moderators");
    assert!(mods.as_array().unwrap().iter().any(|u| u["id"] == m.id.as_str()));
    assert_eq!(
        s.admin_post("/api/admin/chat/users/setmoderator", &json!({ "userId": "nobody", "isModerator": true }))
            .status(),
        404
    );

    say(&mut troll.ws, "bad words");
    let bad = next_of(&mut viewer.ws, "CHAT", Duration::from_secs(5)).expect("troll message");
    let bad_id = bad["id"].as_str().unwrap().to_string();

    // moderator's view of the user
    let d = s.get_json(&format!("/api/moderation/chat/user/{}?accessToken={}", troll.id, m.token));
    assert_eq!(d["user"]["id"], troll.id.as_str());
    assert_eq!(d["connectedClients"].as_array().unwrap().len(), 1);
    assert_eq!(d["messages"].as_array().unwrap().len(), 1);
    assert_eq!(s.get(&format!("/api/moderation/chat/user/nobody?accessToken={}", m.token)).status(), 404);
    assert_eq!(s.get(&format!("/api/moderation/chat/user/{}?accessToken={}", troll.id, viewer.token)).status(), 401);

    let r = s.post_json(
        &format!("/api/chat/users/setenabled?accessToken={}", m.token),
        &json!({ "userId": troll.id, "enabled": false }),
    );
    assert!(r.status().is_success(), "{}", r.status());
    let err = next_of(&mut troll.ws, "ERROR_USER_DISABLED", Duration::from_secs(5)).expect("disabled error");
    assert_eq!(err["user"]["id"], troll.id.as_str());
    // then the socket is closed
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut closed = false;
    while Instant::now() < deadline {
        if read_events(&mut troll.ws, Duration::from_millis(300)).is_err() {
            closed = true;
            break;
        }
    }
    assert!(closed, "disabled user's socket closes");
    let vu = next_of(&mut viewer.ws, "VISIBILITY-UPDATE", Duration::from_secs(5)).expect("messages hidden");
    assert_eq!(vu["ids"], json!([bad_id]));
    let disabled = s.admin_json("/api/admin/chat/users/disabled");
    let d = disabled.as_array().unwrap().iter().find(|u| u["id"] == troll.id.as_str()).expect("listed as disabled");
    assert!(d["disabledAt"].is_string());
    assert!(!history(&s, &viewer.token).iter().any(|m| m["id"] == bad_id.as_str()));
    assert_eq!(s.get(&format!("/api/chat?accessToken={}", troll.token)).status(), 401);
    let mut again = connect_raw(&s, &troll.token);
    assert!(next_of(&mut again, "ERROR_USER_DISABLED", Duration::from_secs(5)).is_some());
    // disabling a user never bans loopback (a local proxy)
    assert!(s.admin_json("/api/admin/chat/users/ipbans").as_array().unwrap().is_empty());

    // admin re-enables
    let r = s.admin_post("/api/admin/chat/users/setenabled", &json!({ "userId": troll.id, "enabled": true }));
    assert!(r.status().is_success());
    assert!(s.admin_json("/api/admin/chat/users/disabled").as_array().unwrap().is_empty());
    assert_eq!(
        s.admin_post("/api/admin/chat/users/setenabled", &json!({ "userId": "nobody", "enabled": true })).status(),
        404
    );

    // IP bans
    assert_eq!(s.admin_post("/api/admin/chat/users/ipbans/create", &json!({ "value": "not an ip" })).status(), 400);
    // (the admin may ban any address, loopback included: tests/dropin.rs)
    assert!(s
        .admin_post("/api/admin/chat/users/ipbans/create", &json!({ "value": "203.0.113.9" }))
        .status()
        .is_success());
    let bans = s.admin_json("/api/admin/chat/users/ipbans");
    assert_eq!(bans[0]["ipAddress"], "203.0.113.9");
    assert!(s
        .admin_post("/api/admin/chat/users/ipbans/remove", &json!({ "value": "203.0.113.9" }))
        .status()
        .is_success());
    assert!(s.admin_json("/api/admin/chat/users/ipbans").as_array().unwrap().is_empty());

    // users list, search, paging, delete
    let all = s.admin_json("/api/admin/users");
    assert_eq!(all["total"], 3);
    assert_eq!(all["results"][0]["displayName"], "viewer", "newest first");
    let asc = s.admin_json("/api/admin/users?sort=asc&limit=1&offset=1");
    assert_eq!(asc["total"], 3);
    assert_eq!(asc["results"].as_array().unwrap().len(), 1);
    assert_eq!(asc["results"][0]["displayName"], "troll");
    let found = s.admin_json("/api/admin/users?search=rol");
    assert_eq!(found["total"], 1);
    assert_eq!(s.admin_get("/api/admin/users?status=weird").status(), 400);
    assert_eq!(s.admin_get("/api/admin/users?limit=-1").status(), 400);
    assert!(s.admin_post("/api/admin/users/delete", &json!({ "userId": viewer.id })).status().is_success());
    assert_eq!(s.admin_json("/api/admin/users")["total"], 2);
    // an unknown user is a 400, as Owncast answers
    assert_eq!(s.admin_post("/api/admin/users/delete", &json!({ "userId": viewer.id })).status(), 400);
    let _ = viewer.ws.close(None);
}

fn emoji_upload_is_served_and_listed(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake but typed".to_vec();
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let r = s.admin_post("/api/admin/emoji/upload", &json!({ "name": "../../party", "data": data }));
    assert!(r.status().is_success(), "{}", r.status());
    let list = s.get_json("/api/emoji");
    // the URL is the channel's: an Owncast client loads it as given
    assert_eq!(list, json!([{ "name": "party", "url": s.path("/img/emoji/party.png") }]));
    let img = s.get("/img/emoji/party.png");
    assert_eq!(img.status(), 200);
    assert_eq!(img.headers()["content-type"], "image/png");
    assert_eq!(img.bytes().unwrap().to_vec(), png);
    assert!(!s.data_dir.parent().unwrap().join("party.png").exists());

    let svg = base64::engine::general_purpose::STANDARD.encode(b"<svg onload=alert(1)></svg>");
    assert_eq!(s.admin_post("/api/admin/emoji/upload", &json!({ "name": "x", "data": svg })).status(), 400);
    assert_eq!(s.admin_post("/api/admin/emoji/upload", &json!({ "name": "x", "data": "%%%" })).status(), 400);
    assert_eq!(s.admin_post("/api/admin/emoji/upload", &json!({ "name": "..", "data": data })).status(), 400);
    let big = base64::engine::general_purpose::STANDARD.encode(vec![0x89u8; 600 * 1024]);
    assert_eq!(s.admin_post("/api/admin/emoji/upload", &json!({ "name": "big", "data": big })).status(), 400);
    assert_eq!(s.get("/img/emoji/..%2F..%2Fcastd.db").status(), 404);

    // an emoji image passes the chat sanitizer
    let mut a = join(&s, "emoji-fan");
    let src = s.path("/img/emoji/party.png");
    say(&mut a.ws, &format!("<img src=\"{src}\" alt=\":party:\" title=\":party:\" class=\"emoji\">"));
    let got = next_of(&mut a.ws, "CHAT", Duration::from_secs(5)).unwrap();
    assert!(got["body"].as_str().unwrap().contains(&format!("src=\"{src}\"")), "{got}");

    assert!(s.admin_post("/api/admin/emoji/delete", &json!({ "name": "party.png" })).status().is_success());
    assert_eq!(s.get("/img/emoji/party.png").status(), 404);
    assert_eq!(s.get_json("/api/emoji"), json!([]));
    assert_eq!(s.admin_post("/api/admin/emoji/delete", &json!({ "name": "party.png" })).status(), 404);
}

fn chat_history_survives_a_restart_and_disabled_chat_refuses(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    let mut a = join(&s, "keeper");
    say(&mut a.ws, "remember me");
    let got = next_of(&mut a.ws, "CHAT", Duration::from_secs(5)).unwrap();
    drop(a.ws);
    drop(s);
    let server = server.restart();
    let s = on.of(&server);
    let h = history(&s, &a.token);
    assert!(h.iter().any(|m| m["id"] == got["id"] && m["body"] == "<p>remember me</p>"), "{h:?}");
    // tokens survive too
    let mut ws = connect_raw(&s, &a.token);
    assert!(next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).is_some());

    s.set("chat/disable", json!(true));
    let url = s.ws_url(&format!("/ws?accessToken={}", a.token));
    assert!(tungstenite::connect(url).is_err(), "disabled chat refuses connections");
}

fn welcome_message_and_user_parted(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    s.set("welcomemessage", json!("Welcome to **the show**"));
    let mut stay = join(&s, "stayer");
    let leave = join(&s, "leaver");
    let welcome = next_of(&mut stay.ws, "SYSTEM", Duration::from_secs(10)).expect("welcome message");
    assert!(welcome["body"].as_str().unwrap().contains("<strong>the show</strong>"));
    assert_eq!(
        welcome["user"]["displayName"],
        s.get_json("/api/config")["name"],
        "named after the server (the channel)"
    );
    let mut ws = leave.ws;
    ws.close(None).unwrap();
    let _ = ws.flush();
    let started = Instant::now();
    let parted = next_of(&mut stay.ws, "USER_PARTED", Duration::from_secs(15)).expect("USER_PARTED");
    assert_eq!(parted["user"]["id"], leave.id.as_str());
    assert!(started.elapsed() >= Duration::from_secs(8), "parted only after the grace period");
}

/// The slow-consumer policy end to end: a client that stops reading is disconnected once its socket
/// is full and frames pile up behind it, while a client that reads gets every message, whole and in
/// order; the room never waits for the stuck one.
fn a_client_that_stops_reading_is_dropped_and_the_room_gets_everything(on: On) {
    let server = Server::start();
    let s = on.of(&server);
    let r = s.admin_post(
        "/api/admin/accesstokens/create",
        &json!({ "name": "announcer", "scopes": ["CAN_SEND_SYSTEM_MESSAGES"] }),
    );
    let token = r.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let _stuck = join(&s, "stuck"); // joined, then never read again
    let mut reader = join(&s, "reader");
    let clients = |s: &Target| -> Vec<String> {
        s.admin_json("/api/admin/chat/clients")
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["user"]["displayName"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(clients(&s).len(), 2);

    // The reader reads in its own thread until it has every numbered message.
    const MAX_MESSAGES: usize = 4000;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<usize>();
    let reading = std::thread::spawn(move || {
        let mut got: Vec<usize> = Vec::new();
        let mut expected_total = None;
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline && expected_total.is_none_or(|n| got.len() < n) {
            if let Ok(n) = done_rx.try_recv() {
                expected_total = Some(n);
            }
            for e in read_events(&mut reader.ws, Duration::from_millis(200)).expect("the reader stays connected") {
                if e["type"] == "SYSTEM" {
                    let body = e["body"].as_str().unwrap();
                    let n = body.split("msg-").nth(1).and_then(|r| r.split('-').next()).unwrap().parse().unwrap();
                    got.push(n);
                }
            }
        }
        got
    });

    let client = reqwest::blocking::Client::new();
    let filler = "x".repeat(7000);
    let mut sent = 0;
    let mut dropped = false;
    while sent < MAX_MESSAGES && !dropped {
        let r = client
            .post(s.url("/api/integrations/chat/system"))
            .bearer_auth(&token)
            .json(&json!({ "body": format!("msg-{sent}-{filler}") }))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "the room never waits for a stuck client");
        sent += 1;
        if sent % 50 == 0 {
            dropped = !clients(&s).contains(&"stuck".to_string());
        }
    }
    eprintln!("stuck client dropped after {sent} messages");
    assert!(dropped, "the stuck client was disconnected after {sent} messages of 7 KB");
    assert_eq!(clients(&s), vec!["reader".to_string()]);
    // The channel's own series carry its slug (`default` at the root).
    let label = s.slug.clone().unwrap_or_else(|| "default".to_string());
    let metrics = s.admin_get("/api/admin/prometheus").text().unwrap();
    assert!(
        metrics.lines().any(|l| l == format!("castd_chat_slow_clients_dropped_total{{channel=\"{label}\"}} 1")),
        "the drop is counted once in Prometheus:\n{metrics}"
    );
    done_tx.send(sent).unwrap();
    let got = reading.join().unwrap();
    assert_eq!(got, (0..sent).collect::<Vec<_>>(), "the reader got every message once, in order");
}
