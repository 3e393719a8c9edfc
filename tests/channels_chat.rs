//! Issue 41: channels' chats and admins are isolated. A message sent in one channel's chat reaches no
//! other channel's (nor the default channel's); a ban (an IP ban, a disabled user) in one channel bans
//! nobody in another; a channel's admin password opens only that channel's admin API, never another
//! channel's nor the server-wide admin routes. Real daemon, real websocket clients on 127.0.0.1.

mod common;

use std::time::Duration;

use common::chatclient::{connect_raw, join, next_of, next_where, say};
use common::{Server, Target};
use serde_json::json;

/// Whether `ws` gets a CHAT event whose body contains `needle` within `timeout`.
fn hears(ws: &mut common::chatclient::Ws, needle: &str, timeout: Duration) -> bool {
    next_where(ws, timeout, |ev| ev["type"] == "CHAT" && ev["body"].as_str().is_some_and(|b| b.contains(needle)))
        .is_some()
}

#[test]
fn a_message_in_one_channel_reaches_no_other_chat() {
    let server = Server::start();
    let a = server.channel("a");
    let b = server.channel("b");
    let root = server.default_channel();
    let mut sender = join(&a, "sender");
    let mut same_room = join(&a, "neighbour");
    let mut other_room = join(&b, "elsewhere");
    let mut default_room = join(&root, "at-the-root");

    say(&mut sender.ws, "only for channel a");
    assert!(hears(&mut same_room.ws, "only for channel a", Duration::from_secs(5)), "channel a's chat gets it");
    assert!(!hears(&mut other_room.ws, "only for channel a", Duration::from_secs(2)), "channel b's chat must not");
    assert!(!hears(&mut default_room.ws, "only for channel a", Duration::from_secs(1)), "the default chat must not");

    // and the other way: the default channel's message stays at the root
    say(&mut default_room.ws, "only for the root");
    assert!(hears(&mut default_room.ws, "only for the root", Duration::from_secs(5)));
    assert!(!hears(&mut same_room.ws, "only for the root", Duration::from_secs(2)), "channel a must not get it");
    assert!(!hears(&mut other_room.ws, "only for the root", Duration::from_secs(1)), "channel b must not get it");

    // histories are the channels' own
    let history = |t: &Target| t.admin_json("/api/admin/chat/messages").to_string();
    assert!(history(&a).contains("only for channel a"));
    assert!(!history(&b).contains("only for channel a"));
    assert!(!history(&root).contains("only for channel a"));
    assert!(history(&root).contains("only for the root"));
    assert!(!history(&a).contains("only for the root"));
}

#[test]
fn an_ip_ban_in_one_channel_bans_nobody_elsewhere() {
    let server = Server::start();
    let a = server.channel("a");
    let b = server.channel("b");
    let root = server.default_channel();
    let (_, token_a, _) = common::chatclient::register(&a, Some("viewer"));
    let (_, token_b, _) = common::chatclient::register(&b, Some("viewer"));
    let (_, token_root, _) = common::chatclient::register(&root, Some("viewer"));

    // the test's requests come from 127.0.0.1: channel a bans it
    a.admin_post("/api/admin/chat/users/ipbans/create", &json!({ "value": "127.0.0.1" }))
        .error_for_status()
        .expect("channel a bans loopback");
    assert_eq!(a.get(&format!("/api/chat?accessToken={token_a}")).status().as_u16(), 401, "banned in a");
    match tungstenite::connect(a.ws_url(&format!("/ws?accessToken={token_a}"))) {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status().as_u16(), 403),
        Err(e) => panic!("unexpected websocket error {e}"),
        Ok(_) => panic!("a banned address opened channel a's chat"),
    }
    // channel b and the default channel: not banned, chat works
    for (t, token) in [(&b, &token_b), (&root, &token_root)] {
        assert!(t.admin_json("/api/admin/chat/users/ipbans").as_array().unwrap().is_empty(), "{}", t.name());
        assert!(t.get(&format!("/api/chat?accessToken={token}")).status().is_success(), "{}", t.name());
        let mut ws = connect_raw(t, token);
        assert!(next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).is_some(), "{}", t.name());
    }
    // a new user registers in b, not in a
    assert!(b.post_json("/api/chat/register", &json!({"displayName": "new"})).status().is_success());
}

#[test]
fn a_disabled_user_in_one_channel_still_chats_in_another() {
    let server = Server::start();
    let a = server.channel("a");
    let b = server.channel("b");
    let mut troll_a = join(&a, "troll");
    let mut troll_b = join(&b, "troll");
    let mut watcher_b = join(&b, "watcher");

    let r = a.admin_post("/api/admin/chat/users/setenabled", &json!({ "userId": troll_a.id, "enabled": false }));
    assert!(r.status().is_success(), "{}", r.status());
    assert!(next_of(&mut troll_a.ws, "ERROR_USER_DISABLED", Duration::from_secs(5)).is_some(), "disabled in a");
    assert_eq!(a.admin_json("/api/admin/chat/users/disabled").as_array().unwrap().len(), 1);

    // channel b knows nothing of it: its troll is enabled and is heard
    assert!(b.admin_json("/api/admin/chat/users/disabled").as_array().unwrap().is_empty());
    say(&mut troll_b.ws, "still welcome in b");
    assert!(hears(&mut watcher_b.ws, "still welcome in b", Duration::from_secs(5)), "b's troll is heard in b");
    // a's user id means nothing in b: channel b's admin cannot reach a's users
    let r = b.admin_post("/api/admin/chat/users/setenabled", &json!({ "userId": troll_a.id, "enabled": false }));
    assert_eq!(r.status().as_u16(), 404, "a's user is not b's");
}

/// A client from loopback address 127.0.0.`n` (each refusal below counts against its address in the
/// failed-login limiter, which answers 429 after a few: one address per check keeps every answer a 401).
fn client_from(n: u8) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, n]))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

#[test]
fn a_channel_admin_password_opens_only_its_channel() {
    let server = Server::start();
    let a = server.channel("a");
    let b = server.channel("b");
    let with_a = |n: u8, method: reqwest::Method, path: &str| {
        client_from(n)
            .request(method, server.url(path))
            .basic_auth("admin", Some(&a.admin_password))
            .json(&json!({"slug": "c", "name": "C", "adminPassword": "c-password-1", "value": "hijacked"}))
            .send()
            .expect("request")
    };
    // its own channel: yes
    assert_eq!(with_a(10, reqwest::Method::GET, "/c/a/api/admin/serverconfig").status().as_u16(), 200);
    // another channel, the default channel and the server-wide admin routes: no
    let refused = [
        (reqwest::Method::GET, "/c/b/api/admin/serverconfig"),
        (reqwest::Method::GET, "/c/b/api/admin/chat/clients"),
        (reqwest::Method::POST, "/c/b/api/admin/config/name"),
        (reqwest::Method::GET, "/api/admin/serverconfig"),
        (reqwest::Method::POST, "/api/admin/config/name"),
        (reqwest::Method::GET, "/api/admin/channels"),
        (reqwest::Method::POST, "/api/admin/channels/create"),
        (reqwest::Method::GET, "/api/admin/hardwarestats"),
        (reqwest::Method::GET, "/api/admin/logs"),
    ];
    for (i, (method, path)) in refused.into_iter().enumerate() {
        let r = with_a(20 + i as u8, method.clone(), path);
        assert_eq!(r.status().as_u16(), 401, "channel a's password on {method} {path}");
    }
    // nothing changed
    assert_ne!(b.get_json("/api/config")["name"], json!("hijacked"));
    assert_ne!(server.get_json("/api/config")["name"], json!("hijacked"));
    assert!(server.admin_json("/api/admin/channels").to_string().contains("\"a\""));
    assert!(!server.admin_json("/api/admin/channels").to_string().contains("\"c\""), "no channel c");
    // the server admin's password opens every channel
    assert_eq!(server.admin_get("/c/b/api/admin/serverconfig").status().as_u16(), 200);
}
