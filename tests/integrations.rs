//! Issue 6 acceptance: access tokens, the integrations API's bearer auth, and webhook delivery to a
//! real local HTTP receiver (signature, retries).

mod common;

use std::time::Duration;

use common::receiver::Receiver;
use common::Server;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

fn create_token(server: &Server, name: &str, scopes: &[&str]) -> Value {
    let r = server.admin_post("/api/admin/accesstokens/create", &json!({ "name": name, "scopes": scopes }));
    assert_eq!(r.status().as_u16(), 200);
    r.json().unwrap()
}

fn bearer_post(server: &Server, path: &str, token: Option<&str>, body: &Value) -> reqwest::blocking::Response {
    let mut req = server.client.post(server.url(path)).json(body);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    req.send().unwrap()
}

#[test]
fn access_tokens_create_list_delete() {
    let server = Server::start();
    let created = create_token(&server, "my bot", &["CAN_SEND_MESSAGES", "HAS_ADMIN_ACCESS"]);
    let token = created["accessToken"].as_str().unwrap().to_string();
    assert!(token.len() >= 32);
    for field in ["id", "displayName", "type", "scopes", "displayColor", "isBot", "createdAt", "lastUsedAt"] {
        assert!(created.get(field).is_some(), "token record lacks {field}");
    }
    assert_eq!(created["displayName"], json!("my bot"));
    assert_eq!(created["isBot"], json!(true));

    let list = server.admin_json("/api/admin/accesstokens");
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_ne!(list[0]["accessToken"], json!(token), "the token is only shown at creation");
    // nor is it in the database
    let db = std::fs::read(server.data_dir.join("castd.db")).unwrap();
    let wal = std::fs::read(server.data_dir.join("castd.db-wal")).unwrap_or_default();
    assert!(![db, wal].iter().any(|b| b.windows(token.len()).any(|w| w == token.as_bytes())));

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

#[test]
fn integrations_routes_check_the_token_and_scope() {
    let server = Server::start();
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

#[test]
fn webhooks_are_signed_and_retried() {
    let server = Server::start();
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

#[test]
fn webhook_input_is_validated_and_a_dead_receiver_is_harmless() {
    let server = Server::start();
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
