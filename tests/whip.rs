//! WHIP's HTTP side against the real daemon (plain HTTP; the browser publish is tests/web/whip.test.mjs):
//! the CORS preflight, a wrong or missing stream key (401), an offer that is not SDP (415, 400) or has
//! no H.264 (400), a second publisher while one is live, over WHIP or RTMP (409, StatusResponse), PATCH
//! (405 with Allow), DELETE of an unknown session (404) and of a live one (200, an empty body with
//! `Content-Length: 0`: what FFmpeg's and OBS's WHIP clients read as a clean end). An offer castd
//! answers but that never connects frees the publisher slot after `webrtc::CONNECT_TIMEOUT`.

mod common;

use std::time::Duration;

use common::media::{online, publish, wait_exit};
use common::sdp::{client, error_of, whip_offer as offer};
use common::Server;

const KEY: &str = "whip-stream-key-1";

fn post(server: &Server, bearer: Option<&str>, ctype: &str, body: String) -> reqwest::blocking::Response {
    common::sdp::post(server, "/whip", bearer, ctype, body)
}

#[test]
fn whip_http_answers_and_refusals() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let sdp = "application/sdp";

    // CORS preflight of the endpoint and of a session.
    let r = client().request(reqwest::Method::OPTIONS, server.url("/whip")).send().expect("OPTIONS");
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["accept-post"], sdp);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    assert!(r.headers()["allow"].to_str().unwrap_or_default().contains("POST"));
    let r = client().request(reqwest::Method::OPTIONS, server.url("/whip/abc")).send().expect("OPTIONS");
    assert_eq!(r.status().as_u16(), 204);
    assert!(r.headers()["allow"].to_str().unwrap_or_default().contains("DELETE"));

    // The key: missing, wrong.
    let (status, _) = error_of(post(&server, None, sdp, offer("H264")));
    assert_eq!(status, 401);
    let r = post(&server, Some("not-the-key"), sdp, offer("H264"));
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_of(r).0, 401);

    // Not SDP, malformed SDP, no H.264.
    assert_eq!(error_of(post(&server, Some(KEY), "application/json", offer("H264"))).0, 415);
    assert_eq!(error_of(post(&server, Some(KEY), sdp, "hello".into())).0, 400);
    assert_eq!(error_of(post(&server, Some(KEY), sdp, "v=0\r\nm=video nonsense\r\n".into())).0, 400);
    let (status, message) = error_of(post(&server, Some(KEY), sdp, offer("VP8")));
    assert_eq!(status, 400);
    assert!(message.contains("H.264"), "{message}");

    // PATCH (trickle ICE): 405 with Allow. DELETE of an unknown session: 404.
    let r = client().patch(server.url("/whip/abc")).body("a=candidate").send().expect("PATCH");
    let allow = r.headers()["allow"].to_str().unwrap_or_default().to_ascii_uppercase();
    assert!(allow.contains("DELETE") && !allow.contains("PATCH"), "Allow: {allow}");
    assert_eq!(error_of(r).0, 405);
    let r = client().delete(server.url("/whip/nosuchsession")).send().expect("DELETE");
    assert_eq!(error_of(r).0, 404);

    // A good offer: 201, the SDP answer, the session in Location. It holds the publisher slot, so a
    // second WHIP publisher is refused with 409; DELETE ends it and frees the slot.
    let r = post(&server, Some(KEY), sdp, offer("H264"));
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(r.headers()["content-type"], sdp);
    let location = r.headers()["location"].to_str().expect("Location").to_string();
    assert!(location.starts_with("/whip/"), "{location}");
    let answer = r.text().expect("answer");
    assert!(answer.starts_with("v=0") && answer.contains("a=ice-lite") && answer.contains("H264"), "{answer}");
    assert!(answer.contains("a=candidate:") && answer.contains("127.0.0.1"), "a host candidate: {answer}");
    let (status, message) = error_of(post(&server, Some(KEY), sdp, offer("H264")));
    assert_eq!(status, 409, "{message}");
    let r = client().delete(server.url(&location)).send().expect("DELETE");
    assert_eq!(r.status().as_u16(), 200);
    let freed = server.wait_for(Duration::from_secs(10), || {
        let r = post(&server, Some(KEY), sdp, offer("H264"));
        (r.status().as_u16() == 201).then_some(())
    });
    assert!(freed.is_some(), "the slot is free again after DELETE");

    // That one never connects: its session ends after the connect timeout and frees the slot.
    assert_eq!(error_of(post(&server, Some(KEY), sdp, offer("H264"))).0, 409, "still pending");
    let freed = server.wait_for(Duration::from_secs(40), || {
        (post(&server, Some(KEY), sdp, offer("H264")).status().as_u16() == 201).then_some(())
    });
    assert!(freed.is_some(), "a session that never connects frees the slot; log:\n{}", server.log_text());
}

/// FFmpeg's WHIP muxer logs "Failed to dispose resource" on a 204 to its DELETE and reads a 200 with
/// `Content-Length: 0` as a clean end; OBS's WHIP output warns on anything but 200 (RFC 9725 allows
/// any 2xx). Debian 12's ffmpeg has no WHIP muxer, so the answer is checked on the wire.
#[test]
fn delete_of_a_session_is_200_with_an_empty_body_and_content_length_0() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let r = post(&server, Some(KEY), "application/sdp", offer("H264"));
    assert_eq!(r.status().as_u16(), 201);
    let location = r.headers()["location"].to_str().expect("Location").to_string();
    let r = client().delete(server.url(&location)).send().expect("DELETE");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers().get("content-length").map(|v| v.to_str().unwrap().to_string()), Some("0".into()));
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    assert!(r.headers().get("transfer-encoding").is_none(), "{:?}", r.headers());
    assert_eq!(r.bytes().expect("body").len(), 0);
    // The session is gone: a second DELETE finds nothing.
    assert_eq!(error_of(client().delete(server.url(&location)).send().expect("DELETE")).0, 404);
}

#[test]
fn a_whip_publisher_is_refused_while_rtmp_is_live() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set(
        "video/streamoutputvariants",
        serde_json::json!([{"name": "low", "videoPassthrough": true, "audioPassthrough": true, "framerate": 30}]),
    );
    let mut ffmpeg = publish(&server, KEY, "320x240", 20);
    let live = server.wait_for(Duration::from_secs(30), || online(&server).then_some(()));
    assert!(live.is_some(), "the RTMP publish goes live; log:\n{}", server.log_text());
    let (status, message) = error_of(post(&server, Some(KEY), "application/sdp", offer("H264")));
    assert_eq!(status, 409);
    assert!(message.contains("live"), "{message}");
    let _ = ffmpeg.kill();
    let _ = wait_exit(&mut ffmpeg, Duration::from_secs(5));
}
