//! The fuzz targets: one function per parser that takes untrusted input, each taking raw bytes and
//! panicking only on a real defect (a parser panic that escapes castd, or an unsafe sanitizer output).
//! Shared by the coverage-guided libFuzzer binaries (`fuzz/fuzz_targets/`, run by `fuzz/run.sh`) and
//! by `tests/fuzz.rs`, which replays the committed corpora and regressions on every `cargo test`.
//! Each target's dictionary (the tokens its format is made of) is `tests/fuzz/dict/<target>.dict`.
#![allow(dead_code)]

pub const TARGETS: [&str; 6] = ["rtmp", "chat", "cmcd", "setters", "ts", "srt"];

/// The target function by name.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    match name {
        "rtmp" => Some(rtmp_one),
        "chat" => Some(chat_one),
        "cmcd" => Some(cmcd_one),
        "setters" => Some(setters_one),
        "ts" => Some(ts_one),
        "srt" => Some(srt_one),
        _ => None,
    }
}

// ---- rtmp: the RTMP handshake + chunk stream through rml_rtmp's server session, the media messages
// framed as FLV tags as the ingest does.

pub fn rtmp_one(data: &[u8]) {
    use castd::ingest::rtmp::{handshake_input, session_input};
    use rml_rtmp::handshake::{Handshake, HandshakeProcessResult, PeerType};
    use rml_rtmp::sessions::{ServerSession, ServerSessionConfig, ServerSessionEvent, ServerSessionResult};

    let mut hs = Handshake::new(PeerType::Server);
    let mut rest = data;
    // The first 1537 bytes are the client's C0+C1, the next 1536 its C2 (as a client sends them).
    let (c01, after) = rest.split_at(rest.len().min(1537));
    let remaining = match handshake_input(&mut hs, c01) {
        Ok(HandshakeProcessResult::InProgress { .. }) => {
            let (c2, after2) = after.split_at(after.len().min(1536));
            rest = after2;
            match handshake_input(&mut hs, c2) {
                Ok(HandshakeProcessResult::Completed { remaining_bytes, .. }) => remaining_bytes,
                _ => return,
            }
        }
        Ok(HandshakeProcessResult::Completed { remaining_bytes, .. }) => {
            rest = after;
            remaining_bytes
        }
        Err(_) => return,
    };
    let Ok((mut session, _)) = ServerSession::new(ServerSessionConfig::new()) else { return };
    let mut feed = remaining;
    feed.extend_from_slice(rest);
    // Fed in pieces, as the socket reads them.
    for piece in feed.chunks(1 + feed.len() % 4096) {
        // castd's wrapper: a parser panic must come back as an error, not unwind.
        let Ok(results) = session_input(&mut session, piece) else { return };
        for r in results {
            let ServerSessionResult::RaisedEvent(ev) = r else { continue };
            let mut more = Vec::new();
            match ev {
                ServerSessionEvent::ConnectionRequested { request_id, .. } => {
                    more = session.accept_request(request_id).unwrap_or_default();
                }
                ServerSessionEvent::PublishStreamRequested { request_id, .. } => {
                    more = session.accept_request(request_id).unwrap_or_default();
                }
                ServerSessionEvent::VideoDataReceived { data, timestamp, .. } => {
                    frame(castd::media::flv::TAG_VIDEO, timestamp.value, data)
                }
                ServerSessionEvent::AudioDataReceived { data, timestamp, .. } => {
                    frame(castd::media::flv::TAG_AUDIO, timestamp.value, data)
                }
                _ => {}
            }
            drop(more);
        }
    }
}

fn frame(kind: u8, timestamp: u32, data: bytes::Bytes) {
    use castd::media::flv::{audio_codec_name, video_codec_name, FlvTag};
    let tag = FlvTag { kind, timestamp, data };
    let _ = tag.is_video_keyframe();
    let _ = tag.is_sequence_header();
    if let Some(b) = tag.data.first() {
        let _ = video_codec_name(b & 0x0f);
        let _ = audio_codec_name(b >> 4);
    }
    let mut out = Vec::new();
    tag.write_to(&mut out);
    assert_eq!(out.len(), tag.data.len() + 15, "an FLV tag is 11 + data + 4 bytes");
    if kind == castd::media::flv::TAG_VIDEO {
        // Enhanced RTMP: the FourCC header, then the Matroska re-wrap the worker reads.
        let _ = tag.is_enhanced_video();
        if let Ok(v) = castd::media::flv::VideoTag::parse(&tag.data) {
            let _ = v.codec_name();
            let _ = castd::media::flv::fourcc_str(v.fourcc);
        }
        let mut mkv = Vec::new();
        if let Ok(mut w) = castd::media::mkv::MkvWriter::start(&tag, None, &mut mkv) {
            w.write(&tag, &mut mkv);
        }
    } else if let Some(asc) = tag.data.get(2..) {
        let _ = castd::media::mkv::aac_config(asc);
    }
}

/// The RTMP target's inputs make rml_rtmp panic, and `castd::ingest::rtmp::session_input` catches that: such
/// panics are let through silently to be caught, every other panic goes to the hook installed before
/// (which reports it; libFuzzer's aborts). `only_thread`: limit the silence to threads whose name
/// contains it (the test harness runs other tests beside).
pub fn quiet_caught_rtmp_panics(only_thread: Option<&'static str>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_thread = only_thread.is_none_or(|name| std::thread::current().name().is_some_and(|n| n.contains(name)));
        let from_parser =
            info.location().is_some_and(|l| l.file().contains("rml_rtmp") || l.file().contains("/library/core/"));
        if !(in_thread && from_parser) {
            default(info);
        }
    }));
}

// ---- chat: the websocket's inbound frame JSON, then the Markdown sanitizer on its body, which must
// never let script through.

pub fn chat_one(data: &[u8]) {
    use castd::chat::protocol::ClientCommand;
    use castd::chat::sanitize::{is_empty, render};
    let text = String::from_utf8_lossy(data);
    let bodies: Vec<String> = match ClientCommand::parse(&text) {
        Ok(ClientCommand::Chat { body }) => vec![body],
        Ok(ClientCommand::NameChange { new_name }) => vec![new_name],
        Ok(ClientCommand::ColorChange { .. } | ClientCommand::Unknown(_)) | Err(_) => vec![text.to_string()],
    };
    for body in bodies {
        let html = render(&body);
        let _ = is_empty(&html);
        // Text is escaped (`&lt;`), so every `<` in the output opens a real tag: check each tag.
        for tag in html.split('<').skip(1) {
            let tag = tag.split('>').next().unwrap_or_default().to_ascii_lowercase();
            let name =
                tag.trim_start_matches('/').split(|c: char| c.is_whitespace() || c == '/').next().unwrap_or_default();
            assert!(
                !matches!(name, "script" | "iframe" | "style" | "object" | "embed" | "form" | "svg" | "math"),
                "tag <{name}> survived: {body:?} -> {html:?}"
            );
            for attr in ["href=\"", "src=\""] {
                for value in tag.split(attr).skip(1) {
                    let url = value.split('"').next().unwrap_or_default().trim();
                    assert!(
                        !["javascript:", "vbscript:", "data:"].iter().any(|scheme| url.starts_with(scheme)),
                        "script URL in <{tag}>: {body:?} -> {html:?}"
                    );
                }
            }
            let attrs = tag.split_whitespace().skip(1);
            for a in attrs {
                let key = a.split('=').next().unwrap_or_default();
                let handler = a.contains('=') && key.starts_with("on") && key.chars().all(|c| c.is_ascii_alphabetic());
                assert!(!handler, "event handler attribute in <{tag}>: {body:?} -> {html:?}");
            }
        }
    }
}

// ---- cmcd: the query, header and JSON forms.

pub fn cmcd_one(data: &[u8]) {
    use castd::metrics::cmcd::{from_headers, from_query, parse_dictionary, Report};
    let text = String::from_utf8_lossy(data);
    if let Ok(map) = parse_dictionary(&text) {
        let _ = Report::from_map(&map);
    }
    if let Ok(Some(map)) = from_query(&text) {
        let _ = Report::from_map(&map);
    }
    let mut headers = axum::http::HeaderMap::new();
    for (i, part) in text.split('\n').enumerate().take(4) {
        let name = ["cmcd-request", "cmcd-object", "cmcd-status", "cmcd-session"][i];
        if let Ok(v) = axum::http::HeaderValue::from_str(part) {
            headers.insert(name, v);
        }
    }
    if let Ok(Some(map)) = from_headers(&headers) {
        let _ = Report::from_map(&map);
    }
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(serde_json::Value::Object(map)) => {
            let _ = Report::from_map(&map);
        }
        Ok(serde_json::Value::Array(items)) => {
            for item in items {
                if let serde_json::Value::Object(map) = item {
                    let _ = Report::from_map(&map);
                }
            }
        }
        _ => {}
    }
}

// ---- setters: the setter body decoder and every value validator.

pub fn setters_one(data: &[u8]) {
    use castd::config::validate as v;
    let Ok(body) = castd::http::parse_json::<serde_json::Value>(data) else { return };
    let value = body.get("value").cloned().unwrap_or(body);
    let _ = v::string(&value, 255);
    let _ = v::boolean(&value);
    let _ = v::integer(&value, 0, 4);
    let _ = v::port(&value);
    let _ = v::ip_address(&value);
    let _ = v::string_list(&value, 50);
    let _ = v::url(&value, true);
    let _ = v::url(&value, false);
    let _ = v::stream_keys(&value);
    let _ = v::socket_url(&value);
    let _ = v::variants(&value);
    let _ = v::social_handles(&value);
    let _ = v::external_actions(&value);
    let _ = v::s3(&value);
    let _ = v::federation_username(&value);
    let _ = v::domains(&value);
    if let Some(s) = value.as_str() {
        if let Ok(k) = v::stream_key(s) {
            assert_eq!(k, k.trim(), "a stream key is stored trimmed");
        }
    }
}

// ---- ts: the MPEG-TS an SRT publisher sends, as the SRT ingest takes it: the byte stream cut into
// packets (resynchronising on the sync byte), the program tables and the random-access runs, and the
// SRT streamid's key forms (the first line).

pub fn ts_one(data: &[u8]) {
    use castd::media::ts::{Demux, Framer};
    let (first, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let _ = castd::ingest::srt::stream_key(&String::from_utf8_lossy(first));
    let mut framer = Framer::default();
    let mut demux = Demux::default();
    // SRT delivers payloads of up to 1316 bytes; the cut points vary with the input.
    let step = 1 + usize::from(rest.first().copied().unwrap_or(0)) * 6;
    let mut total = 0;
    for piece in rest.chunks(step) {
        framer.push(piece, |p| demux.packet(p));
        for chunk in demux.take_chunks() {
            if let castd::media::MediaChunk::Bytes { data, .. } = chunk {
                assert_eq!(data.len() % castd::media::ts::PACKET, 0, "runs are whole packets");
                total += data.len();
            }
        }
        let _ = demux.take_program_change();
        let _ = demux.take_bytes();
    }
    // PAT/PMT copies lead random-access runs, so the output may exceed the input by a few packets each.
    let _ = total;
}

// ---- srt: datagrams from one peer to castd's SRT listener, through the (patched, vendored) srt-protocol
// state machines srt-tokio drives: each datagram is parsed, handed to the multiplexing listener (which
// runs the handshake and asks for access, answered "accepted" as a valid stream key would be), and once
// a connection opens, to that connection (ACK/NAK/loss lists, key refresh, shutdown), whose timers and
// output are driven too. The input is datagrams, each led by its length (2 bytes, big-endian). A
// handshake whose SYN cookie is 0 gets the cookie the listener last sent, so the conclusion phase is
// reachable.

pub fn srt_one(data: &[u8]) {
    use srt_protocol::connection::{DuplexConnection, Input as ConnInput};
    use srt_protocol::listener::{Action, Input, MultiplexListener, NextInputContext, ResultOf};
    use srt_protocol::packet::{ControlTypes, Packet};
    use srt_protocol::settings::ConnInitSettings;
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    let peer: SocketAddr = ([127, 0, 0, 1], 5000).into();
    let local: SocketAddr = ([127, 0, 0, 1], 8890).into();
    let mut now = Instant::now();
    let mut listener = MultiplexListener::new(now, local, ConnInitSettings::default());
    let mut connection: Option<DuplexConnection> = None;
    let mut cookie = 0;
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let (datagram, after) = rest[2..].split_at(len);
        rest = after;
        now += Duration::from_millis(10);
        let Ok(mut packet) = Packet::parse(&mut std::io::Cursor::new(datagram), false) else { continue };
        if let Packet::Control(c) = &mut packet {
            if let ControlTypes::Handshake(hs) = &mut c.control_type {
                if hs.syn_cookie == 0 {
                    hs.syn_cookie = cookie;
                }
            }
        }
        if let Some(conn) = connection.as_mut() {
            conn.handle_packet_input(now, Ok((packet, peer)));
            let _ = conn.check_timers(now);
            while conn.next_packet(now).is_some() {}
            while conn.next_data(now).is_some() {}
            let _ = conn.handle_input(now, ConnInput::Timer);
            continue;
        }
        let mut input = Input::Packet(Ok((packet, peer)));
        // A bounded number of steps per datagram: the listener answers each result it is told.
        for _ in 0..8 {
            let action = listener.handle_input(now, input);
            let context = NextInputContext::for_action(&action);
            input = match action {
                Action::SendPacket((Packet::Control(c), _)) => {
                    if let ControlTypes::Handshake(hs) = &c.control_type {
                        cookie = hs.syn_cookie;
                    }
                    Input::Success(ResultOf::SendPacket(peer))
                }
                Action::RequestAccess(id, _) => {
                    Input::AccessResponse(Some((id, srt_protocol::listener::AccessControlResponse::Accepted(None))))
                }
                Action::OpenConnection(_, boxed) => {
                    let (_, conn) = *boxed;
                    connection = Some(DuplexConnection::new(conn));
                    break;
                }
                Action::WaitForInput | Action::Close => break,
                _ => context.input_from(Ok::<(), ()>(())),
            };
        }
    }
}
