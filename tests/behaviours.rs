//! Issue 34, part 3: behaviours that tools written for Owncast still tripped on (webhook payloads,
//! chat notices, the websocket close handshake, listings and config shapes that differed from
//! Owncast's). Each test runs the real daemon and real clients on 127.0.0.1.
//!
//! Each test runs twice (`each_channel!`): on the default channel and on a channel under `/c/c1` with
//! its own admin password. Default channel only: the directory listing (the server's).

mod common;

use std::time::Duration;

use common::chatclient::{join, next_of, send};
use common::fedactor::FedActor;
use common::receiver::Receiver;
use common::{each_channel, On, Server, Target};
use serde_json::{json, Value};

each_channel!(
    name_change_webhook_has_new_name_and_client_id,
    stream_title_change_is_announced_in_chat,
    like_and_repost_webhooks,
    chat_close_handshake_is_answered,
    robots_txt_is_owncasts_text,
    social_handles_without_an_icon_read_back_as_set,
    federation_prefixes_answer_405_while_disabled,
    offline_message_has_no_trailing_newline,
    unmeasured_playback_figures_are_null,
);

/// Item 1: The NAME_CHANGE webhook carries Owncast's `newName` and `clientId` besides `oldName` and the user.
fn name_change_webhook_has_new_name_and_client_id(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let rx = Receiver::start(&[]);
    let r = server.admin_post("/api/admin/webhooks/create", &json!({"url": rx.url, "events": ["NAME_CHANGE"]}));
    assert_eq!(r.status().as_u16(), 200);
    let mut bob = join(&server, "bob");
    send(&mut bob.ws, json!({ "type": "NAME_CHANGE", "newName": "Robert" }));
    let hook =
        rx.wait_for(Duration::from_secs(10), |r| r.json()["type"] == "NAME_CHANGE").expect("NAME_CHANGE webhook");
    let data = &hook.json()["eventData"];
    assert_eq!(data["newName"], json!("Robert"));
    assert_eq!(data["oldName"], json!("bob"));
    assert_eq!(data["user"]["displayName"], json!("Robert"));
    assert!(data["clientId"].is_u64(), "clientId: {data}");
    // the chat broadcast carries the same
    let nc = next_of(&mut bob.ws, "NAME_CHANGE", Duration::from_secs(5)).expect("NAME_CHANGE broadcast");
    assert_eq!(nc["newName"], json!("Robert"));
}

/// Item 2: Changing the stream title posts Owncast's CHAT_ACTION "Stream title changed to **TITLE**" (not
/// for an empty title).
fn stream_title_change_is_announced_in_chat(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let mut alice = join(&server, "alice");
    server.set("streamtitle", json!("Building a birdhouse"));
    let ev = next_of(&mut alice.ws, "CHAT_ACTION", Duration::from_secs(5)).expect("CHAT_ACTION for the title");
    let body = ev["body"].as_str().unwrap_or_default();
    assert!(body.contains("Stream title changed to <strong>Building a birdhouse</strong>"), "{body}");
    server.set("streamtitle", json!(""));
    assert!(next_of(&mut alice.ws, "CHAT_ACTION", Duration::from_secs(2)).is_none(), "no notice for an empty title");
}

/// A daemon with federation on (plain http on loopback allowed).
fn federating() -> Server {
    Server::start_with_args(&["--federation-allow-http-loopback"])
}

/// Federation on for `on` (the server's URL set first: a channel's is the server's under its prefix).
fn federate(daemon: &Server, on: On) -> Target<'_> {
    let s = on.of(daemon);
    s.set_server_wide("serverurl", json!(daemon.base));
    s.set("federation/enable", json!(true));
    s
}

/// Item 3: Webhooks may subscribe to FEDIVERSE_ENGAGEMENT_LIKE and _REPOST, and get them, shaped like the
/// FOLLOW engagement, when a Like or an Announce arrives in the inbox; FOLLOW carries Owncast's keys.
fn like_and_repost_webhooks(on: On) {
    let daemon = federating();
    let a = federate(&daemon, on);
    let alice = FedActor::start("alice");
    let hook = Receiver::start(&[]);
    let events = ["FEDIVERSE_ENGAGEMENT_FOLLOW", "FEDIVERSE_ENGAGEMENT_LIKE", "FEDIVERSE_ENGAGEMENT_REPOST"];
    let r = a.admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": events}));
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default());
    // The actor's name as the admin's serverconfig gives it (`streamer` on the default channel; a channel's
    // is named after its slug).
    let username = a.admin_json("/api/admin/serverconfig")["federation"]["username"].as_str().unwrap().to_string();
    let actor = format!("{}/federation/user/{username}", a.base);
    let inbox = format!("{actor}/inbox");
    let follow = json!({"@context": "https://www.w3.org/ns/activitystreams", "id": format!("{}/follows/1", alice.base),
        "type": "Follow", "actor": alice.iri(), "object": actor});
    assert_eq!(alice.send(&inbox, &follow), 202);
    // Likes and boosts count only of what castd published: a post of its own.
    let r = a.admin_post("/api/admin/federation/send", &json!({"value": "a post to like"}));
    assert!(r.status().is_success());
    let post = alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Create").expect("the post");
    let note = post.json()["object"]["id"].as_str().unwrap().to_string();
    let like = json!({"id": format!("{}/likes/1", alice.base), "type": "Like", "actor": alice.iri(), "object": note});
    assert_eq!(alice.send(&inbox, &like), 202);
    let boost =
        json!({"id": format!("{}/boosts/1", alice.base), "type": "Announce", "actor": alice.iri(), "object": note});
    assert_eq!(alice.send(&inbox, &boost), 202);
    let got = |kind: &str| {
        hook.wait_for(Duration::from_secs(10), |r| r.json()["type"] == kind)
            .unwrap_or_else(|| panic!("{kind} webhook"))
            .json()
    };
    let keys = |v: &Value| {
        let mut k: Vec<String> = v["eventData"].as_object().expect("eventData").keys().cloned().collect();
        k.sort();
        k
    };
    let (follow, like, repost) =
        (got("FEDIVERSE_ENGAGEMENT_FOLLOW"), got("FEDIVERSE_ENGAGEMENT_LIKE"), got("FEDIVERSE_ENGAGEMENT_REPOST"));
    // Owncast's FEDIVERSE_ENGAGEMENT_FOLLOW eventData {id, timestamp, name, username, image}, and castd's
    // chat-event keys (type, body, link, title)
    let mut want = ["id", "timestamp", "name", "username", "image", "type", "body", "link", "title"].map(String::from);
    want.sort();
    assert_eq!(keys(&follow), want);
    assert_eq!(follow["eventData"]["username"], json!(alice.account()));
    assert!(follow["eventData"]["name"].as_str().is_some_and(|n| !n.is_empty()), "{follow}");
    assert_eq!(keys(&like), keys(&follow));
    assert_eq!(keys(&repost), keys(&follow));
    assert_eq!(like["eventData"]["title"], json!(alice.account()));
    assert_eq!(repost["eventData"]["title"], json!(alice.account()));
    assert_eq!(like["eventData"]["type"], json!("FEDIVERSE_ENGAGEMENT_LIKE"));
}

/// Item 4: A client that closes the chat connection gets the close handshake answered (its status code
/// echoed), not a dropped connection (1006).
fn chat_close_handshake_is_answered(on: On) {
    use tungstenite::protocol::frame::coding::CloseCode;
    use tungstenite::protocol::CloseFrame;
    use tungstenite::Message;
    let daemon = Server::start();
    let server = on.of(&daemon);
    let mut alice = join(&server, "alice");
    alice.ws.close(Some(CloseFrame { code: CloseCode::Normal, reason: "bye".into() })).expect("send close");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let reply = loop {
        match alice.ws.read() {
            Ok(Message::Close(frame)) => break Ok(frame),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
                    && std::time::Instant::now() < deadline => {}
            Err(e) => break Err(e.to_string()),
        }
    };
    let frame = reply.expect("a close frame in reply");
    assert_eq!(frame.map(|f| f.code), Some(CloseCode::Normal));
}

/// Item 6: robots.txt is Owncast's text, byte for byte, with search indexing disabled (and enabled).
fn robots_txt_is_owncasts_text(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    assert_eq!(server.get("/robots.txt").text().unwrap(), "User-agent: *\nDisallow: /admin\nDisallow: /api");
    server.set("disablesearchindexing", json!(true));
    assert_eq!(
        server.get("/robots.txt").text().unwrap(),
        "User-agent: *\nDisallow: /admin\nDisallow: /api\nDisallow: /"
    );
}

/// Item 7: A social handle set without an icon is read back without one (no `"icon": ""`), in the public
/// config and the admin server config; one with an icon keeps it.
fn social_handles_without_an_icon_read_back_as_set(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let handles = json!([
        {"platform": "mastodon", "url": "https://mastodon.example/@me"},
        {"platform": "custom", "url": "https://me.example", "icon": "/img/me.png"},
    ]);
    server.set("socialhandles", handles.clone());
    assert_eq!(server.get_json("/api/config")["socialHandles"], handles);
    assert_eq!(server.admin_json("/api/admin/serverconfig")["instanceDetails"]["socialHandles"], handles);
}

/// Item 8: With federation disabled, `/federation/` and `/federation/user/` answer 405 like every other
/// federation route; enabled, there is nothing there (404).
fn federation_prefixes_answer_405_while_disabled(on: On) {
    let daemon = Server::start_with_args(&["--federation-allow-http-loopback"]);
    let server = on.of(&daemon);
    for path in ["/federation/", "/federation/user/"] {
        let r = server.get(path);
        assert_eq!(r.status().as_u16(), 405, "{path}");
        assert_eq!(r.json::<Value>().unwrap()["success"], json!(false), "{path}");
    }
    server.set_server_wide("serverurl", json!(daemon.base));
    server.set("federation/enable", json!(true));
    for path in ["/federation/", "/federation/user/"] {
        assert_eq!(server.get(path).status().as_u16(), 404, "{path}");
    }
}

/// Item 9: `/api/config` `offlineMessage` is the rendered HTML without a trailing newline.
fn offline_message_has_no_trailing_newline(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    server.set("offlinemessage", json!("Back **soon**"));
    assert_eq!(server.get_json("/api/config")["offlineMessage"], json!("<p>Back <strong>soon</strong></p>"));
}

/// Item 10: A playback client measured from request-mode CMCD only (no latency, no download time) shows
/// `latencySeconds` and `downloadSeconds` as null, not 0.0.
fn unmeasured_playback_figures_are_null(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let r = server
        .client
        .post(server.url("/api/metrics/cmcd"))
        .header("X-Forwarded-For", "198.51.100.30")
        .json(&json!({"v": 2, "sid": "req-only", "mtp": 1500, "br": 800, "ot": "v"}))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let clients = server.admin_json("/api/admin/viewers/playback");
    let entry = clients
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["clientID"] == json!("req-only"))
        .unwrap_or_else(|| panic!("req-only listed: {clients}"))
        .clone();
    let p = &entry["playback"];
    assert_eq!(p["bandwidthKbps"], json!(1500.0), "{p}");
    assert!(p.get("latencySeconds").is_some_and(Value::is_null), "{p}");
    assert!(p.get("downloadSeconds").is_some_and(Value::is_null), "{p}");
}

/// Item 11: `config/directoryenabled true` is accepted without a server URL (as Owncast does); the admin
/// health message and status warnings say the URL is missing until it is set.
#[test]
fn directory_can_be_enabled_before_the_server_url() {
    let server = Server::start();
    // a local directory, so no ping leaves this machine once the URL is set
    server.set("directoryurl", json!("http://127.0.0.1:9"));
    let r = server.admin_post("/api/admin/config/directoryenabled", &json!({"value": true}));
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default());
    assert_eq!(server.admin_json("/api/admin/serverconfig")["yp"]["enabled"], json!(true));
    let mentions_url = |s: &str| s.contains("server URL");
    let status = server
        .wait_for(Duration::from_secs(5), || {
            let st = server.admin_json("/api/admin/status");
            mentions_url(st["health"]["message"].as_str().unwrap_or_default()).then_some(st)
        })
        .expect("the health message warns about the missing server URL");
    assert!(status["warnings"].as_array().unwrap().iter().any(|w| mentions_url(w.as_str().unwrap_or_default())));
    server.set("serverurl", json!("https://live.example.com"));
    let cleared = server.wait_for(Duration::from_secs(5), || {
        let st = server.admin_json("/api/admin/status");
        (!mentions_url(st["health"]["message"].as_str().unwrap_or_default())).then_some(st)
    });
    let cleared = cleared.expect("the warning goes once the URL is set");
    assert!(!cleared["warnings"].as_array().unwrap().iter().any(|w| mentions_url(w.as_str().unwrap_or_default())));
}
