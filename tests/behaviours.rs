//! Issue 34, part 3: behaviours that tools written for Owncast still tripped on (webhook payloads,
//! chat notices, the websocket close handshake, listings and config shapes that differed from
//! Owncast's). Each test runs the real daemon and real clients on 127.0.0.1.

mod common;

use std::time::Duration;

use common::chatclient::{join, next_of, send};
use common::fedactor::FedActor;
use common::receiver::Receiver;
use common::Server;
use serde_json::{json, Value};

/// 1. The NAME_CHANGE webhook carries Owncast's `newName` and `clientId` besides `oldName` and the user.
#[test]
fn name_change_webhook_has_new_name_and_client_id() {
    let server = Server::start();
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

/// 2. Changing the stream title posts Owncast's CHAT_ACTION "Stream title changed to **TITLE**" (not
/// for an empty title).
#[test]
fn stream_title_change_is_announced_in_chat() {
    let server = Server::start();
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
    let s = Server::start_with_args(&["--federation-allow-http-loopback"]);
    s.set("serverurl", json!(s.base));
    s.set("federation/enable", json!(true));
    s
}

/// 3. Webhooks may subscribe to FEDIVERSE_ENGAGEMENT_LIKE and _REPOST, and get them, shaped like the
/// FOLLOW engagement, when a Like or an Announce arrives in the inbox.
#[test]
fn like_and_repost_webhooks() {
    let a = federating();
    let alice = FedActor::start("alice");
    let hook = Receiver::start(&[]);
    let events = ["FEDIVERSE_ENGAGEMENT_FOLLOW", "FEDIVERSE_ENGAGEMENT_LIKE", "FEDIVERSE_ENGAGEMENT_REPOST"];
    let r = a.admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": events}));
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default());
    let actor = format!("{}/federation/user/streamer", a.base);
    let inbox = format!("{actor}/inbox");
    let follow = json!({"@context": "https://www.w3.org/ns/activitystreams", "id": format!("{}/follows/1", alice.base),
        "type": "Follow", "actor": alice.iri(), "object": actor});
    assert_eq!(alice.send(&inbox, &follow), 202);
    let note = format!("{}/federation/somenote", a.base);
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
    assert_eq!(keys(&like), keys(&follow));
    assert_eq!(keys(&repost), keys(&follow));
    assert_eq!(like["eventData"]["title"], json!(alice.account()));
    assert_eq!(repost["eventData"]["title"], json!(alice.account()));
    assert_eq!(like["eventData"]["type"], json!("FEDIVERSE_ENGAGEMENT_LIKE"));
}

/// 4. A client that closes the chat connection gets the close handshake answered (its status code
/// echoed), not a dropped connection (1006).
#[test]
fn chat_close_handshake_is_answered() {
    use tungstenite::protocol::frame::coding::CloseCode;
    use tungstenite::protocol::CloseFrame;
    use tungstenite::Message;
    let server = Server::start();
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
