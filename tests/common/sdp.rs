//! WHIP and WHEP over plain HTTP (tests/whip.rs, tests/whep.rs): POST an SDP offer with an optional
//! `Authorization: Bearer`, and read a refusal's StatusResponse.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde_json::Value;

use super::Server;

pub fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(15)).build().expect("client")
}

/// `POST path` with `body` as `ctype`, and `Authorization: Bearer <bearer>` when given.
pub fn post(server: &Server, path: &str, bearer: Option<&str>, ctype: &str, body: String) -> Response {
    let mut req = client().post(server.url(path)).header("Content-Type", ctype).body(body);
    if let Some(b) = bearer {
        req = req.header("Authorization", format!("Bearer {b}"));
    }
    req.send().unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// The status and the StatusResponse message of an error answer.
pub fn error_of(r: Response) -> (u16, String) {
    let status = r.status().as_u16();
    let v: Value = r.json().expect("a StatusResponse body");
    assert_eq!(v["success"], false, "{v}");
    (status, v["message"].as_str().unwrap_or_default().to_string())
}

/// A browser-like publishing offer (WHIP): H.264 (packetization-mode 1) video and Opus audio, send-only, ICE and DTLS
/// attributes as Chromium writes them.
pub fn whip_offer(video_codec: &str) -> String {
    let fingerprint = (0..32).map(|i| format!("{:02X}", i * 7 % 256)).collect::<Vec<_>>().join(":");
    let lines = [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0 1",
        "a=msid-semantic: WMS",
        "m=video 9 UDP/TLS/RTP/SAVPF 102",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=ice-ufrag:Abcd",
        "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        "a=ice-options:trickle",
        &format!("a=fingerprint:sha-256 {fingerprint}"),
        "a=setup:actpass",
        "a=mid:0",
        "a=sendonly",
        "a=rtcp-mux",
        &format!("a=rtpmap:102 {video_codec}/90000"),
        "a=rtcp-fb:102 nack",
        "a=rtcp-fb:102 nack pli",
        "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
        "a=ssrc:1111 cname:whiptest",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=ice-ufrag:Abcd",
        "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        &format!("a=fingerprint:sha-256 {fingerprint}"),
        "a=setup:actpass",
        "a=mid:1",
        "a=sendonly",
        "a=rtcp-mux",
        "a=rtpmap:111 opus/48000/2",
        "a=fmtp:111 minptime=10;useinbandfec=1",
        "a=ssrc:2222 cname:whiptest",
    ];
    lines.iter().map(|l| format!("{l}\r\n")).collect()
}

/// A browser-like receive-only offer: H.264 (packetization-mode 1) video and Opus audio.
pub fn whep_offer() -> String {
    let fingerprint = (0..32).map(|i| format!("{:02X}", i * 7 % 256)).collect::<Vec<_>>().join(":");
    let mut lines = vec![
        "v=0".to_string(),
        "o=- 4611731400430051337 2 IN IP4 127.0.0.1".into(),
        "s=-".into(),
        "t=0 0".into(),
        "a=group:BUNDLE 0 1".into(),
        "a=msid-semantic: WMS".into(),
    ];
    for (mid, media) in [("0", "video"), ("1", "audio")] {
        let (pt, rtpmap, fmtp) = if media == "video" {
            ("102", "H264/90000", "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f")
        } else {
            ("111", "opus/48000/2", "minptime=10;useinbandfec=1")
        };
        lines.extend([
            format!("m={media} 9 UDP/TLS/RTP/SAVPF {pt}"),
            "c=IN IP4 0.0.0.0".into(),
            "a=rtcp:9 IN IP4 0.0.0.0".into(),
            "a=ice-ufrag:Wxyz".into(),
            "a=ice-pwd:abcdefghijklmnopqrstuvwx".into(),
            format!("a=fingerprint:sha-256 {fingerprint}"),
            "a=setup:actpass".into(),
            format!("a=mid:{mid}"),
            // Chromium offers these header extensions (ids as it numbers them), transport-cc among them.
            "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level".into(),
            "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time".into(),
            format!("a=extmap:3 {TRANSPORT_CC}"),
            "a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid".into(),
            "a=recvonly".into(),
            "a=rtcp-mux".into(),
            format!("a=rtpmap:{pt} {rtpmap}"),
            format!("a=rtcp-fb:{pt} transport-cc"),
            format!("a=rtcp-fb:{pt} nack"),
            format!("a=rtcp-fb:{pt} nack pli"),
            format!("a=fmtp:{pt} {fmtp}"),
        ]);
    }
    lines.iter().map(|l| format!("{l}\r\n")).collect()
}

/// The transport-wide congestion control header extension's URI (draft-holmer-rmcat-transport-wide-cc).
pub const TRANSPORT_CC: &str = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01";
