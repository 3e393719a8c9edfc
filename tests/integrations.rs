//! Issue 6 acceptance: access tokens, the integrations API's bearer auth, and webhook delivery to a
//! real local HTTP receiver (signature, retries).
//!
//! Every test runs twice (`each_channel!`): on the default channel at the root and on a channel under
//! `/c/c1` with that channel's admin password, as an Owncast bot given the channel's base URL would.

mod common;

use std::time::Duration;

use common::chatclient::{history, join, next_of, next_where, register, say, send};
use common::push::push_subscription;
use common::receiver::Receiver;
use common::{each_channel, On, Server, Target};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

each_channel!(
    access_tokens_create_list_delete,
    integrations_routes_check_the_token_and_scope,
    webhooks_are_signed_and_retried,
    webhook_input_is_validated_and_a_dead_receiver_is_harmless,
    chat_routes_for_bots,
    going_live_sends_push_discord_and_webhooks,
    webhooks_undelivered_at_shutdown_are_sent_after_the_next_start,
    webhook_event_data_has_owncasts_keys,
    chat_histories_list_only_rows_with_a_user,
);

fn create_token(server: &Target, name: &str, scopes: &[&str]) -> Value {
    let r = server.admin_post("/api/admin/accesstokens/create", &json!({ "name": name, "scopes": scopes }));
    assert_eq!(r.status().as_u16(), 200);
    r.json().unwrap()
}

fn bearer_post(server: &Target, path: &str, token: Option<&str>, body: &Value) -> reqwest::blocking::Response {
    let mut req = server.client.post(server.url(path)).json(body);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    req.send().unwrap()
}

fn access_tokens_create_list_delete(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let created = create_token(&server, "my bot", &["CAN_SEND_MESSAGES", "HAS_ADMIN_ACCESS"]);
    let token = created["accessToken"].as_str().unwrap().to_string();
    assert!(token.len() >= 32);
    for field in ["id", "displayName", "type", "scopes", "displayColor", "isBot", "createdAt", "lastUsedAt"] {
        assert!(created.get(field).is_some(), "token record lacks {field}");
    }
    assert_eq!(created["displayName"], json!("my bot"));
    assert_eq!(created["isBot"], json!(true));

    // the token is shown once, at creation; the list gives its display form (castd keeps its SHA-256)
    assert_eq!(created["accessTokenComplete"], json!(true));
    let list = server.admin_json("/api/admin/accesstokens");
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["accessToken"], json!(format!("{}…", &token[..8])));
    assert_eq!(list[0]["accessTokenComplete"], json!(false));
    // admin only
    assert_eq!(server.get("/api/admin/accesstokens").status().as_u16(), 401);
    let r = server.client.get(server.url("/api/admin/accesstokens")).bearer_auth(&token).send().unwrap();
    assert_eq!(r.status().as_u16(), 401, "an access token does not list tokens");

    // bad input
    for body in [
        json!({"name": "x", "scopes": ["NOPE"]}),
        json!({"name": "", "scopes": ["CAN_SEND_MESSAGES"]}),
        json!({"name": "x", "scopes": []}),
        json!({"scopes": ["CAN_SEND_MESSAGES"]}),
    ] {
        let r = server.admin_post("/api/admin/accesstokens/create", &body);
        assert_eq!(r.status().as_u16(), 400, "{body}");
    }
    let r = server.admin_post("/api/admin/accesstokens/delete", &json!({ "token": "unknown" }));
    assert_eq!(r.status().as_u16(), 404);

    // the token works, is stamped on use, and stops working once deleted
    let r = bearer_post(&server, "/api/integrations/streamtitle", Some(&token), &json!({"value": "from a bot"}));
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(server.get_json("/api/status")["streamTitle"], json!("from a bot"));
    let list = server.admin_json("/api/admin/accesstokens");
    assert!(list[0]["lastUsedAt"].is_string());
    let r = server.admin_post("/api/admin/accesstokens/delete", &json!({ "token": token }));
    assert_eq!(r.status().as_u16(), 200);
    assert!(server.admin_json("/api/admin/accesstokens").as_array().unwrap().is_empty());
    let r = bearer_post(&server, "/api/integrations/streamtitle", Some(&token), &json!({"value": "no"}));
    assert_eq!(r.status().as_u16(), 401);
}

fn integrations_routes_check_the_token_and_scope(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let admin = create_token(&server, "admin bot", &["HAS_ADMIN_ACCESS"]);
    let admin = admin["accessToken"].as_str().unwrap();
    let sender = create_token(&server, "sender", &["CAN_SEND_MESSAGES"]);
    let sender = sender["accessToken"].as_str().unwrap();

    let title = json!({"value": "title"});
    // missing, unknown, wrong scope: all 401 as Owncast
    assert_eq!(bearer_post(&server, "/api/integrations/streamtitle", None, &title).status().as_u16(), 401);
    assert_eq!(bearer_post(&server, "/api/integrations/streamtitle", Some("bogus"), &title).status().as_u16(), 401);
    assert_eq!(bearer_post(&server, "/api/integrations/streamtitle", Some(sender), &title).status().as_u16(), 401);
    // no token and a bad body: still 401, auth comes first
    assert_eq!(bearer_post(&server, "/api/integrations/streamtitle", None, &json!(5)).status().as_u16(), 401);
    // the right scope, lower-case prefix
    let r = server
        .client
        .post(server.url("/api/integrations/streamtitle"))
        .header("authorization", format!("bearer {admin}"))
        .json(&title)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    // bad bodies with a good token
    for body in [json!({}), json!({"value": 5}), json!([1])] {
        let r = bearer_post(&server, "/api/integrations/streamtitle", Some(admin), &body);
        assert_eq!(r.status().as_u16(), 400, "{body}");
    }
    // preflight
    let r =
        server.client.request(reqwest::Method::OPTIONS, server.url("/api/integrations/streamtitle")).send().unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    // status for integrations
    let r = server.client.get(server.url("/api/integrations/status")).bearer_auth(admin).send().unwrap();
    assert_eq!(r.json::<Value>().unwrap()["online"], json!(false));
}

fn verify_signature(secret: &str, body: &[u8], header: &str) -> bool {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    expected == header
}

fn webhooks_are_signed_and_retried(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    // 500 twice, then 200: the third attempt delivers
    let rx = Receiver::start(&[500, 500]);
    let r = server.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": format!("{}/hook", rx.url), "events": ["STREAM_TITLE_UPDATED"], "secret": "s3cret"}),
    );
    assert_eq!(r.status().as_u16(), 200);
    let hook: Value = r.json().unwrap();
    assert!(hook["id"].is_i64());
    assert!(hook.get("secret").is_none(), "the secret is not shown");

    server.set("streamtitle", json!("Signed title"));
    let got = rx
        .wait_for(Duration::from_secs(20), |r| rx.all().len() >= 3 && r.json()["type"] == "STREAM_TITLE_UPDATED")
        .expect("delivery");
    let all = rx.all();
    assert_eq!(all.len(), 3, "two failures and one success");
    let last = all.last().unwrap();
    let body = last.json();
    assert_eq!(body["type"], json!("STREAM_TITLE_UPDATED"));
    assert_eq!(body["eventData"]["streamTitle"], json!("Signed title"));
    for field in ["id", "name", "summary", "streamTitle", "status", "timestamp"] {
        assert!(body["eventData"].get(field).is_some(), "eventData lacks {field}");
    }
    let sig = last.header("x-castd-signature").expect("signature header");
    assert!(verify_signature("s3cret", &last.body, sig), "signature {sig} does not verify");
    assert!(!verify_signature("other", &last.body, sig));
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, "/hook");

    // lastUsed is stamped, events it did not subscribe to are not sent
    let list = server.admin_json("/api/admin/webhooks");
    assert!(list[0]["lastUsed"].is_string());
    assert_eq!(list[0]["events"], json!(["STREAM_TITLE_UPDATED"]));
    server.set("name", json!("not a webhook event"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(rx.all().len(), 3);

    // deleting stops deliveries
    let r = server.admin_post("/api/admin/webhooks/delete", &json!({"id": hook["id"]}));
    assert_eq!(r.status().as_u16(), 200);
    server.set("streamtitle", json!("after delete"));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(rx.all().len(), 3);
}

fn webhook_input_is_validated_and_a_dead_receiver_is_harmless(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    for body in [
        json!({"url": "ftp://x.example", "events": ["CHAT"]}),
        json!({"url": "not a url", "events": ["CHAT"]}),
        json!({"url": "http://127.0.0.1:9", "events": ["NOPE"]}),
        json!({"url": "http://127.0.0.1:9", "events": []}),
        json!({"events": ["CHAT"]}),
    ] {
        let r = server.admin_post("/api/admin/webhooks/create", &body);
        assert_eq!(r.status().as_u16(), 400, "{body}");
        assert_eq!(r.json::<Value>().unwrap()["success"], json!(false));
    }
    assert_eq!(server.admin_post("/api/admin/webhooks/delete", &json!({"id": 999})).status().as_u16(), 404);

    // a receiver that refuses connections: setters stay fast, a good receiver still gets its event
    let dead = server.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": "http://127.0.0.1:9/dead", "events": ["STREAM_TITLE_UPDATED"]}),
    );
    assert_eq!(dead.status().as_u16(), 200);
    let rx = Receiver::start(&[]);
    server.admin_post("/api/admin/webhooks/create", &json!({"url": rx.url, "events": ["STREAM_TITLE_UPDATED"]}));
    let start = std::time::Instant::now();
    for i in 0..20 {
        server.set("streamtitle", json!(format!("t{i}")));
    }
    assert!(start.elapsed() < Duration::from_secs(5), "setters slowed down by a dead webhook");
    assert!(rx.wait_for(Duration::from_secs(10), |r| r.json()["eventData"]["streamTitle"] == "t19").is_some());
    // the receiver without a secret gets no signature
    assert!(rx.all()[0].header("x-castd-signature").is_none());
}

fn bearer_get(server: &Target, path: &str, token: Option<&str>) -> reqwest::blocking::Response {
    let mut req = server.client.get(server.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().unwrap()
}

/// Owncast's history query joins the users table, so a client may read `message.user.id` of every
/// row: the three history lists (`/api/admin/chat/messages`, `/api/chat`, `/api/integrations/chat`)
/// leave out the system's messages and actions, which have no user, and list the users' messages.
fn chat_histories_list_only_rows_with_a_user(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let sys =
        create_token(&server, "announcer", &["CAN_SEND_SYSTEM_MESSAGES"])["accessToken"].as_str().unwrap().to_string();
    let admin = create_token(&server, "mod tool", &["HAS_ADMIN_ACCESS"])["accessToken"].as_str().unwrap().to_string();
    let mut viewer = join(&server, "viewer");
    say(&mut viewer.ws, "a viewer's line");
    let said = next_of(&mut viewer.ws, "CHAT", Duration::from_secs(5)).expect("the viewer's CHAT");
    // Stored before they are broadcast: once the viewer hears them, they are in the database.
    for (path, kind, body) in [
        ("/api/integrations/chat/system", "SYSTEM", "maintenance at 5"),
        ("/api/integrations/chat/action", "CHAT_ACTION", "the bot waves"),
    ] {
        let r = bearer_post(&server, path, Some(&sys), &json!({ "body": body }));
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let heard = next_where(&mut viewer.ws, Duration::from_secs(5), |e| {
            e["type"] == kind && e["body"].as_str().is_some_and(|b| b.contains(body))
        });
        assert!(heard.is_some(), "{kind} not heard");
    }
    let lists = [
        ("/api/admin/chat/messages", server.admin_json("/api/admin/chat/messages")),
        ("/api/chat", Value::Array(history(&server, &viewer.token))),
        ("/api/integrations/chat", bearer_get(&server, "/api/integrations/chat", Some(&admin)).json().unwrap()),
    ];
    for (path, list) in lists {
        let rows = list.as_array().unwrap_or_else(|| panic!("{path}: not a list: {list}"));
        assert!(rows.iter().any(|m| m["id"] == said["id"]), "{path} lists the viewer's message: {list}");
        for m in rows {
            assert!(m["user"]["id"].as_str().is_some_and(|id| !id.is_empty()), "{path}: a row without user.id: {m}");
            assert!(m["type"] != "SYSTEM" && m["type"] != "CHAT_ACTION", "{path} lists {m}");
        }
    }
}

fn chat_routes_for_bots(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let token =
        |name: &str, scope: &str| create_token(&server, name, &[scope])["accessToken"].as_str().unwrap().to_string();
    let sys = token("announcer", "CAN_SEND_SYSTEM_MESSAGES");
    let bot = token("Helper Bot", "CAN_SEND_MESSAGES");
    let admin = token("mod tool", "HAS_ADMIN_ACCESS");
    let rx = Receiver::start(&[]);
    server
        .admin_post("/api/admin/webhooks/create", &json!({"url": rx.url, "events": ["CHAT", "SYSTEM", "CHAT_ACTION"]}));

    let mut viewer = join(&server, "viewer");
    let msg = |b: &str| json!({ "body": b });

    // chat/send: a CHAT from a bot user named after the token, stored in history
    assert_eq!(bearer_post(&server, "/api/integrations/chat/send", Some(&sys), &msg("x")).status().as_u16(), 401);
    assert_eq!(bearer_post(&server, "/api/integrations/chat/send", None, &msg("x")).status().as_u16(), 401);
    assert_eq!(bearer_post(&server, "/api/integrations/chat/send", Some(&bot), &msg("  ")).status().as_u16(), 400);
    let r = bearer_post(&server, "/api/integrations/chat/send", Some(&bot), &msg("hello from **bot**"));
    assert_eq!(r.status().as_u16(), 200);
    let chat = next_of(&mut viewer.ws, "CHAT", Duration::from_secs(5)).expect("bot CHAT at the viewer");
    assert_eq!(chat["user"]["displayName"], json!("Helper Bot"));
    assert_eq!(chat["user"]["isBot"], json!(true));
    assert!(chat["body"].as_str().unwrap().contains("<strong>bot</strong>"));
    let bot_msg_id = chat["id"].as_str().unwrap().to_string();

    // chat/system and chat/action
    assert_eq!(bearer_post(&server, "/api/integrations/chat/system", Some(&bot), &msg("x")).status().as_u16(), 401);
    let r = bearer_post(&server, "/api/integrations/chat/system", Some(&sys), &msg("maintenance at 5"));
    assert_eq!(r.status().as_u16(), 200);
    let ev = next_of(&mut viewer.ws, "SYSTEM", Duration::from_secs(5)).expect("SYSTEM");
    assert!(ev["body"].as_str().unwrap().contains("maintenance at 5"));
    // the system user is named after the server (the channel)
    assert_eq!(ev["user"]["displayName"], server.get_json("/api/config")["name"]);
    let r = bearer_post(&server, "/api/integrations/chat/action", Some(&sys), &msg("*waves*"));
    assert_eq!(r.status().as_u16(), 200);
    let ev = next_of(&mut viewer.ws, "CHAT_ACTION", Duration::from_secs(5)).expect("CHAT_ACTION");
    assert!(ev["body"].as_str().unwrap().contains("<em>waves</em>"));
    // the deprecated route says where to go
    let r = bearer_post(&server, "/api/integrations/chat/user", Some(&bot), &msg("x"));
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("chat/send"));

    // clients, system message to one client
    assert_eq!(bearer_get(&server, "/api/integrations/clients", Some(&bot)).status().as_u16(), 401);
    let clients: Value = bearer_get(&server, "/api/integrations/clients", Some(&admin)).json().unwrap();
    let client =
        clients.as_array().unwrap().iter().find(|c| c["user"]["id"] == viewer.id.as_str()).expect("viewer listed");
    let cid = client["id"].as_u64().unwrap();
    let path = format!("/api/integrations/chat/system/client/{cid}");
    assert_eq!(bearer_post(&server, &path, Some(&sys), &msg("just you")).status().as_u16(), 200);
    let ev = next_of(&mut viewer.ws, "SYSTEM", Duration::from_secs(5)).expect("SYSTEM to one client");
    assert!(ev["body"].as_str().unwrap().contains("just you"));
    let r = bearer_post(&server, "/api/integrations/chat/system/client/999999", Some(&sys), &msg("nobody"));
    assert_eq!(r.status().as_u16(), 404);

    // history and visibility with HAS_ADMIN_ACCESS
    assert_eq!(bearer_get(&server, "/api/integrations/chat", Some(&sys)).status().as_u16(), 401);
    let hist: Value = bearer_get(&server, "/api/integrations/chat", Some(&admin)).json().unwrap();
    assert!(hist.as_array().unwrap().iter().any(|m| m["id"] == bot_msg_id.as_str()), "bot message in history");
    let vis = json!({"idArray": [bot_msg_id], "visible": false});
    assert_eq!(
        bearer_post(&server, "/api/integrations/chat/messagevisibility", Some(&bot), &vis).status().as_u16(),
        401
    );
    assert_eq!(
        bearer_post(&server, "/api/integrations/chat/messagevisibility", Some(&admin), &vis).status().as_u16(),
        200
    );
    let ev = next_of(&mut viewer.ws, "VISIBILITY-UPDATE", Duration::from_secs(5)).expect("VISIBILITY-UPDATE");
    assert_eq!(ev["ids"], json!([bot_msg_id]));
    assert!(!history(&server, &viewer.token).iter().any(|m| m["id"] == bot_msg_id.as_str()));

    // user details
    let r = bearer_get(&server, &format!("/api/integrations/moderation/chat/user/{}", viewer.id), Some(&admin));
    let details: Value = r.json().unwrap();
    assert_eq!(details["user"]["displayName"], json!("viewer"));
    assert_eq!(details["connectedClients"].as_array().unwrap().len(), 1);
    assert_eq!(bearer_get(&server, "/api/integrations/moderation/chat/user/nope", Some(&admin)).status().as_u16(), 404);

    // a CHAT webhook for a viewer's message, with Owncast's fields
    say(&mut viewer.ws, "hi *there*");
    let hook = rx.wait_for(Duration::from_secs(10), |r| r.json()["type"] == "CHAT").expect("CHAT webhook");
    let data = &hook.json()["eventData"];
    assert_eq!(data["rawBody"], json!("hi *there*"));
    assert!(data["body"].as_str().unwrap().contains("<em>there</em>"));
    assert_eq!(data["user"]["displayName"], json!("viewer"));
    assert!(data["clientId"].is_u64() && data["id"].is_string() && data["timestamp"].is_string());
    assert!(rx.wait_for(Duration::from_secs(5), |r| r.json()["type"] == "SYSTEM").is_some());
    assert!(rx.wait_for(Duration::from_secs(5), |r| r.json()["type"] == "CHAT_ACTION").is_some());
    // integration sends are not CHAT webhooks (Owncast)
    assert!(!rx.all().iter().any(|r| r.json()["eventData"]["user"]["isBot"] == json!(true)));

    // a deleted token stops working at once
    server.admin_post("/api/admin/accesstokens/delete", &json!({ "token": bot }));
    assert_eq!(bearer_post(&server, "/api/integrations/chat/send", Some(&bot), &msg("x")).status().as_u16(), 401);
}

fn going_live_sends_push_discord_and_webhooks(on: On) {
    const KEY: &str = "integration-test-key";
    // The push service runs on loopback: the development switch lets castd deliver there.
    let daemon = Server::start_with_env(&["--streamkey", KEY], &[("CASTD_PUSH_ALLOW_LOOPBACK", "1")]);
    let server = on.of(&daemon);
    // `--streamkey` is the default channel's; a channel publishes with its own key.
    let stream_key = if on.is_channel() { server.stream_key() } else { KEY.to_string() };
    let rx = Receiver::start(&[]);
    let gone = Receiver::start(&[410]);
    server.set_server_wide("serverurl", json!("https://live.example.com"));
    server.set("notifications/browser", json!({"enabled": true, "goLiveMessage": "We are live!"}));
    server.set(
        "notifications/discord",
        json!({"enabled": true, "webhook": format!("{}/discord", rx.url), "goLiveMessage": "Going live now"}),
    );
    server.set(
        "video/streamoutputvariants",
        json!([{"videoBitrate": 400, "scaledWidth": 320, "scaledHeight": 240, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    server.set("video/streamlatencylevel", json!(0));
    server.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": format!("{}/hook", rx.url), "events": ["STREAM_STARTED", "USER_JOINED", "STREAM_STOPPED"]}),
    );

    // the public key is in /api/config; a chat user registers two subscriptions
    let key = server.get_json("/api/config")["notifications"]["browser"]["publicKey"].as_str().unwrap().to_string();
    assert!(key.len() > 80, "VAPID public key: {key}");
    let (id, token, _) = register(&server, Some("subscriber"));
    let _ = id;
    let (sub, secret, auth) = push_subscription(&format!("{}/push/one", rx.url));
    let (sub_gone, _, _) = push_subscription(&format!("{}/push/expired", gone.url));
    let reg = |body: &Value, t: &str| server.post_json(&format!("/api/notifications/register?accessToken={t}"), body);
    assert_eq!(
        reg(&json!({"channel": "BROWSER_PUSH_NOTIFICATION", "destination": sub.to_string()}), "bad").status().as_u16(),
        401
    );
    assert_eq!(reg(&json!({"channel": "SMS", "destination": "x"}), &token).status().as_u16(), 400);
    assert_eq!(
        reg(&json!({"channel": "BROWSER_PUSH_NOTIFICATION", "destination": "{}"}), &token).status().as_u16(),
        400
    );
    for s in [&sub, &sub_gone] {
        let r = reg(&json!({"channel": "BROWSER_PUSH_NOTIFICATION", "destination": s.to_string()}), &token);
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default());
    }

    let mut ff = common::media::publish(&daemon, &stream_key, "320x240", 25);
    let started = rx
        .wait_for(Duration::from_secs(30), |r| r.path == "/hook" && r.json()["type"] == "STREAM_STARTED")
        .unwrap_or_else(|| panic!("no STREAM_STARTED webhook; log:\n{}", server.log_text()));
    assert_eq!(started.json()["eventData"]["status"]["online"], json!(true));

    // Discord: the go-live message with the link
    let discord = rx.wait_for(Duration::from_secs(15), |r| r.path == "/discord").expect("discord message");
    assert!(discord.json()["content"].as_str().unwrap().starts_with("Going live now"));
    let name = server.get_json("/api/config")["name"].clone();
    assert_eq!(discord.json()["username"], name, "named after the server (the channel)");

    // Web Push: RFC 8291 payload that decrypts with the subscription's keys, and a VAPID authorization
    let push = rx.wait_for(Duration::from_secs(15), |r| r.path == "/push/one").expect("push message");
    assert_eq!(push.header("content-encoding"), Some("aes128gcm"));
    assert!(push.header("authorization").is_some_and(|a| a.starts_with("vapid t=")), "VAPID header");
    let auth = web_push_native::Auth::clone_from_slice(&auth);
    let plain = web_push_native::decrypt(push.body.clone(), &secret, &auth).expect("payload decrypts");
    let payload: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(payload["body"], json!("We are live!"));
    assert_eq!(payload["title"], name);
    // the expired subscription was tried once and removed (410)
    assert!(gone.wait_for(Duration::from_secs(15), |r| r.path == "/push/expired").is_some());
    server
        .wait_for(Duration::from_secs(5), || server.log_text().contains("expired; removed").then_some(()))
        .expect("removed");

    // USER_JOINED while live
    let _viewer = join(&server, "latecomer");
    let joined = rx
        .wait_for(Duration::from_secs(10), |r| r.path == "/hook" && r.json()["type"] == "USER_JOINED")
        .expect("USER_JOINED webhook");
    assert_eq!(joined.json()["eventData"]["user"]["displayName"], json!("latecomer"));

    common::media::wait_exit(&mut ff, Duration::from_secs(60));
    assert!(
        rx.wait_for(Duration::from_secs(40), |r| r.path == "/hook" && r.json()["type"] == "STREAM_STOPPED").is_some(),
        "STREAM_STOPPED webhook"
    );
}

/// A webhook that could not be delivered while castd stopped is kept (webhook_outbox) and delivered
/// after the next start, unchanged.
fn webhooks_undelivered_at_shutdown_are_sent_after_the_next_start(on: On) {
    let mut server = Server::start();
    // Three failures take the retries (0, 1 and 3 s) past the 4 s the shutdown gives delivery tasks.
    let rx = Receiver::start(&[500, 500, 500]);
    let target = on.of(&server);
    let r = target.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": format!("{}/hook", rx.url), "events": ["STREAM_TITLE_UPDATED"]}),
    );
    assert_eq!(r.status().as_u16(), 200);
    target.set("streamtitle", json!("Kept across a restart"));
    drop(target);
    rx.wait_for(Duration::from_secs(10), |_| true).expect("a first (failed) attempt");
    assert_eq!(server.stop(), Some(0));
    let attempts = rx.all().len();
    assert!((1..=3).contains(&attempts), "not delivered before the exit: {attempts} attempts");
    let server = server.restart();
    rx.wait_for(Duration::from_secs(15), |_| rx.all().len() > 3).expect("delivered after the restart");
    let body = rx.all()[3].json();
    assert_eq!(body["type"], "STREAM_TITLE_UPDATED");
    assert_eq!(body["eventData"]["streamTitle"], "Kept across a restart");
    // delivered once: nothing is left in the outbox for a third start
    let server = server.restart();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(rx.all().len(), 4, "the kept delivery is sent once");
    drop(server);
}

/// Owncast 0.2's `eventData` keys of each webhook type castd sends (Owncast's `services/webhooks` and
/// its tests; `owncast-compat.md` §3), and the keys castd adds. SYSTEM and CHAT_ACTION have no Owncast
/// webhook: their keys are Owncast's chat events'.
const OWNCAST_EVENT_DATA: &[(&str, &[&str], &[&str])] = &[
    ("STREAM_STARTED", STREAM_KEYS, &[]),
    ("STREAM_TITLE_UPDATED", STREAM_KEYS, &[]),
    ("STREAM_STOPPED", STREAM_KEYS, &[]),
    ("USER_JOINED", &["clientId", "id", "timestamp", "type", "user"], &[]),
    ("USER_PARTED", &["clientId", "id", "timestamp", "type", "user"], &[]),
    ("CHAT", &["body", "clientId", "id", "rawBody", "timestamp", "user", "visible"], &[]),
    ("NAME_CHANGE", &["clientId", "id", "newName", "timestamp", "type", "user"], &["oldName"]),
    // Owncast 0.2 serialises its Go struct (`MessageIDs`, `Visible`); newer Owncast says `ids`, `visible`.
    ("VISIBILITY-UPDATE", &["MessageIDs", "Visible", "body", "id", "timestamp", "type", "user"], &["ids", "visible"]),
    ("SYSTEM", &["body", "id", "timestamp", "type", "user"], &[]),
    ("CHAT_ACTION", &["body", "id", "timestamp", "type"], &[]),
];
const STREAM_KEYS: &[&str] = &["id", "name", "status", "streamTitle", "summary", "timestamp"];
const STREAM_STATUS_KEYS: &[&str] = &[
    "lastConnectTime",
    "lastDisconnectTime",
    "online",
    "overallMaxViewerCount",
    "sessionMaxViewerCount",
    "streamTitle",
    "versionNumber",
    "viewerCount",
];
/// The user keys Owncast's webhooks always send (castd sends more: `scopes`, `isModerator`, ...).
const OWNCAST_USER_KEYS: &[&str] =
    &["authenticated", "createdAt", "displayColor", "displayName", "id", "isBot", "previousNames"];

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap_or_else(|| panic!("an object: {v}")).keys().cloned().collect();
    k.sort();
    k
}

/// Every webhook type castd sends for a live stream and its chat carries exactly Owncast's `eventData`
/// keys (plus the listed castd additions), delivered to a real receiver; USER_JOINED's `clientId` is the
/// chat connection's, so a bot greets the newcomer privately with it and nobody else sees the greeting.
fn webhook_event_data_has_owncasts_keys(on: On) {
    const KEY: &str = "webhook-keys-test-key";
    let daemon = Server::start_with_args(&["--streamkey", KEY]);
    let server = on.of(&daemon);
    let stream_key = if on.is_channel() { server.stream_key() } else { KEY.to_string() };
    server.set(
        "video/streamoutputvariants",
        json!([{"videoBitrate": 400, "scaledWidth": 320, "scaledHeight": 240, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    let rx = Receiver::start(&[]);
    let types: Vec<&str> = OWNCAST_EVENT_DATA.iter().map(|(t, _, _)| *t).collect();
    let r = server.admin_post("/api/admin/webhooks/create", &json!({"url": rx.url, "events": types}));
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default());
    let token =
        |name: &str, scope: &str| create_token(&server, name, &[scope])["accessToken"].as_str().unwrap().to_string();
    let greeter = token("greeter", "CAN_SEND_SYSTEM_MESSAGES");
    let admin = token("mod tool", "HAS_ADMIN_ACCESS");
    let hook = |kind: &str, timeout: u64, f: &dyn Fn(&Value) -> bool| {
        rx.wait_for(Duration::from_secs(timeout), |r| r.json()["type"] == kind && f(&r.json()["eventData"]))
            .unwrap_or_else(|| panic!("no {kind} webhook; log:\n{}", server.log_text()))
            .json()["eventData"]
            .clone()
    };

    // someone already in the room (joined before the stream: no USER_JOINED for them)
    let mut bystander = join(&server, "bystander");
    let mut ff = common::media::publish(&daemon, &stream_key, "320x240", 120);
    hook("STREAM_STARTED", 60, &|_| true);

    // USER_JOINED names the connection; a bot greets it privately with that id
    let mut newcomer = join(&server, "newcomer");
    let joined = hook("USER_JOINED", 10, &|d| d["user"]["displayName"] == "newcomer");
    let client_id = joined["clientId"].as_u64().unwrap_or_else(|| panic!("USER_JOINED without clientId: {joined}"));
    // the room gets Owncast's broadcast {id,timestamp,type,user}: no connection ids of others
    let seen = next_where(&mut bystander.ws, Duration::from_secs(5), |e| {
        e["type"] == "USER_JOINED" && e["user"]["displayName"] == "newcomer"
    })
    .expect("USER_JOINED in the room");
    assert_eq!(sorted_keys(&seen), ["id", "timestamp", "type", "user"]);
    let clients: Value = bearer_get(&server, "/api/integrations/clients", Some(&admin)).json().unwrap();
    let listed = clients.as_array().unwrap().iter().find(|c| c["user"]["id"] == newcomer.id.as_str()).expect("listed");
    assert_eq!(listed["id"].as_u64(), Some(client_id), "the id the clients list and the greeting route use");
    let path = format!("/api/integrations/chat/system/client/{client_id}");
    let greeting = json!({ "body": "welcome, newcomer" });
    assert_eq!(bearer_post(&server, &path, Some(&greeter), &greeting).status().as_u16(), 200);
    let greeted =
        |e: &Value| e["type"] == "SYSTEM" && e["body"].as_str().is_some_and(|b| b.contains("welcome, newcomer"));
    assert!(next_where(&mut newcomer.ws, Duration::from_secs(5), greeted).is_some(), "the newcomer is greeted");
    assert!(next_where(&mut bystander.ws, Duration::from_secs(3), greeted).is_none(), "only the newcomer");

    // CHAT, NAME_CHANGE, VISIBILITY-UPDATE from the newcomer's connection and a moderator
    say(&mut newcomer.ws, "hi *there*");
    let chat = hook("CHAT", 10, &|d| d["rawBody"] == "hi *there*");
    assert_eq!(chat["clientId"].as_u64(), Some(client_id));
    send(&mut newcomer.ws, json!({ "type": "NAME_CHANGE", "newName": "renamed" }));
    let renamed = hook("NAME_CHANGE", 10, &|_| true);
    assert_eq!((renamed["clientId"].as_u64(), renamed["newName"].as_str()), (Some(client_id), Some("renamed")));
    let msg_id = chat["id"].as_str().unwrap().to_string();
    let vis = json!({"idArray": [msg_id], "visible": false});
    let r = bearer_post(&server, "/api/integrations/chat/messagevisibility", Some(&admin), &vis);
    assert_eq!(r.status().as_u16(), 200);
    let hidden = hook("VISIBILITY-UPDATE", 10, &|_| true);
    assert_eq!((&hidden["MessageIDs"], &hidden["Visible"]), (&json!([msg_id]), &json!(false)));
    assert_eq!((&hidden["ids"], &hidden["visible"]), (&json!([msg_id]), &json!(false)));

    // SYSTEM and CHAT_ACTION (integration sends), STREAM_TITLE_UPDATED
    let r = bearer_post(&server, "/api/integrations/chat/system", Some(&greeter), &json!({"body": "to all"}));
    assert_eq!(r.status().as_u16(), 200);
    let r = bearer_post(&server, "/api/integrations/chat/action", Some(&greeter), &json!({"body": "waves"}));
    assert_eq!(r.status().as_u16(), 200);
    server.set("streamtitle", json!("Key sets"));
    hook("STREAM_TITLE_UPDATED", 10, &|d| d["streamTitle"] == "Key sets");

    // USER_PARTED (10 s after the last connection closed) names the same connection
    drop(newcomer);
    let parted = hook("USER_PARTED", 30, &|_| true);
    assert_eq!(parted["clientId"].as_u64(), Some(client_id));
    let _ = ff.kill();
    let _ = ff.wait();
    hook("STREAM_STOPPED", 60, &|_| true);

    for (kind, owncast, castd) in OWNCAST_EVENT_DATA {
        let data = hook(kind, 1, &|_| true);
        let mut want: Vec<String> = owncast.iter().chain(castd.iter()).map(|k| k.to_string()).collect();
        want.sort();
        assert_eq!(sorted_keys(&data), want, "{kind}'s eventData keys: Owncast's {owncast:?} + castd's {castd:?}");
        if STREAM_KEYS == *owncast {
            assert_eq!(sorted_keys(&data["status"]), STREAM_STATUS_KEYS, "{kind}'s status");
        }
        if data["user"].is_object() && *kind != "SYSTEM" {
            let user = sorted_keys(&data["user"]);
            let missing: Vec<_> = OWNCAST_USER_KEYS.iter().filter(|k| !user.contains(&k.to_string())).collect();
            assert!(missing.is_empty(), "{kind}'s user lacks {missing:?}");
        }
    }
}
