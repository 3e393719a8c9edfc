//! WHEP's HTTP side against the real daemon (plain HTTP; the browser playback is
//! tests/web/whep.test.mjs): the CORS preflight, refusals as StatusResponse bodies (not SDP 415,
//! malformed SDP 400, offline 404, playback disabled 403, a chat access token required 401, over
//! `webrtc/maxviewers` 503), PATCH (405), DELETE of an unknown session (404); while live, a good offer
//! gets 201 with an H.264 answer and the worker's real-time output connects to the daemon; the stream's
//! end ends its WHEP sessions.

mod common;

use std::time::Duration;

use common::media::{online, publish, wait_exit};
use common::sdp::{client, error_of, whep_offer as offer, TRANSPORT_CC};
use common::Server;
use serde_json::{json, Value};

const KEY: &str = "whep-stream-key-1";

fn post(server: &Server, bearer: Option<&str>, ctype: &str, body: String) -> reqwest::blocking::Response {
    common::sdp::post(server, "/whep", bearer, ctype, body)
}

#[test]
fn whep_answers_and_refusals() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let sdp = "application/sdp";

    let r = client().request(reqwest::Method::OPTIONS, server.url("/whep")).send().expect("OPTIONS");
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["accept-post"], sdp);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");

    // Not SDP, malformed SDP; offline.
    assert_eq!(error_of(post(&server, None, "application/json", offer())).0, 415);
    assert_eq!(error_of(post(&server, None, sdp, "hello".into())).0, 400);
    assert_eq!(error_of(post(&server, None, sdp, "v=0\r\nm=video nonsense\r\n".into())).0, 400);
    let (status, message) = error_of(post(&server, None, sdp, offer()));
    assert_eq!(status, 404);
    assert!(message.contains("offline"), "{message}");

    // PATCH: 405; DELETE of an unknown session: 404.
    let r = client().patch(server.url("/whep/abc")).body("a=candidate").send().expect("PATCH");
    assert_eq!(error_of(r).0, 405);
    assert_eq!(error_of(client().delete(server.url("/whep/nosuch")).send().expect("DELETE")).0, 404);

    // Disabled; a token required (none, a wrong one, a chat user's).
    server.set("webrtc/enabled", json!(false));
    assert_eq!(error_of(post(&server, None, sdp, offer())).0, 403);
    server.set("webrtc/enabled", json!(true));
    server.set("webrtc/requireauthentication", json!(true));
    let r = post(&server, None, sdp, offer());
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_of(r).0, 401);
    assert_eq!(error_of(post(&server, Some("nope"), sdp, offer())).0, 401);
    let user: Value = server.post_json("/api/chat/register", &json!({"displayName": "viewer1"})).json().expect("user");
    let token = user["accessToken"].as_str().expect("accessToken").to_string();
    assert_eq!(error_of(post(&server, Some(&token), sdp, offer())).0, 404, "authorised, but offline");
    server.set("webrtc/requireauthentication", json!(false));

    // Live: a good offer gets an answer; the cap refuses the next one.
    server.set("webrtc/maxviewers", json!(1));
    let mut ffmpeg = publish(&server, KEY, "320x240", 25);
    let live = server.wait_for(Duration::from_secs(40), || online(&server).then_some(()));
    assert!(live.is_some(), "the RTMP publish goes live; log:\n{}", server.log_text());
    let r = post(&server, None, sdp, offer());
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(r.headers()["content-type"], sdp);
    let location = r.headers()["location"].to_str().expect("Location").to_string();
    assert!(location.starts_with("/whep/"), "{location}");
    let answer = r.text().expect("answer");
    assert!(answer.contains("a=ice-lite") && answer.contains("H264") && answer.contains("opus"), "{answer}");
    assert!(answer.contains("a=sendonly"), "{answer}");
    // castd does no bandwidth estimation: it takes the offer's mid and abs-send-time header
    // extensions but not transport-cc's, so the viewer's packets carry no transport-wide sequence
    // numbers and it sends no TWCC feedback for castd to decrypt and drop. (str0m still lists the
    // codec's `rtcp-fb transport-cc`, which is void without the extension.)
    assert!(answer.contains("urn:ietf:params:rtp-hdrext:sdes:mid"), "{answer}");
    assert!(!answer.contains(TRANSPORT_CC), "{answer}");
    let (status, message) = error_of(post(&server, None, sdp, offer()));
    assert_eq!(status, 503);
    assert!(message.contains("limit"), "{message}");
    assert_eq!(client().delete(server.url(&location)).send().expect("DELETE").status().as_u16(), 204);
    server.set("webrtc/maxviewers", json!(0));
    assert_eq!(error_of(post(&server, None, sdp, offer())).0, 503);
    server.set("webrtc/maxviewers", json!(5));
    // A ladder changed mid-stream is the next broadcast's: this one keeps its real-time feed (a broadcast
    // that is passthrough only answers 503: tests/broadcast.rs).
    server.set(
        "video/streamoutputvariants",
        json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true, "framerate": 30}]),
    );
    let linked = server
        .wait_for(Duration::from_secs(20), || server.log_text().contains("real-time output connected").then_some(()));
    assert!(linked.is_some(), "the worker's real-time output connects; log:\n{}", server.log_text());

    // The stream ends: its WHEP sessions end with it (well before a session's 15 s connect timeout).
    let r = post(&server, None, sdp, offer());
    assert_eq!(r.status().as_u16(), 201);
    let posted = std::time::Instant::now();
    let location = r.headers()["location"].to_str().expect("Location").to_string();
    let _ = ffmpeg.kill();
    let _ = wait_exit(&mut ffmpeg, Duration::from_secs(5));
    let offline = server.wait_for(Duration::from_secs(10), || (!online(&server)).then_some(()));
    assert!(offline.is_some(), "offline after the publisher went away");
    let closed =
        server.wait_for(Duration::from_secs(5), || server.log_text().contains("sessions are closed").then_some(()));
    assert!(closed.is_some(), "the stream's end closes its WHEP sessions; log:\n{}", server.log_text());
    assert_eq!(error_of(client().delete(server.url(&location)).send().expect("DELETE")).0, 404);
    assert!(posted.elapsed() < Duration::from_secs(15), "ended by the stream, not the connect timeout");
}
