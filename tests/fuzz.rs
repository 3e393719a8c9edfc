//! Bounded fuzzing of the parsers that take untrusted input, on the stable toolchain.
//!
//! How: a mutation fuzzer (bit and byte flips, inserts, deletes, repeats, splices between corpus
//! entries and the insertion of each target's dictionary tokens) over the committed seed corpus in
//! `tests/fuzz/corpus/<target>/`, run for `CASTD_FUZZ_SECS` seconds per target (default 20). Not
//! coverage-guided: cargo-fuzz and cargo-afl need an instrumented rebuild of castd and all its
//! dependencies (`-Cpasses=sancov-module`), which on this project's 2-core machines would add more than
//! the whole `make test` budget; the corpora and dictionaries stand in for the guidance. Every input
//! runs under `catch_unwind`: a panic fails the test, prints the input and saves it under
//! `target/fuzz-crashes/<target>/`. Crashes once found are kept in `tests/fuzz/regressions/<target>/`
//! and replayed first on every run. The seed is printed (and `CASTD_FUZZ_SEED` replays one).
//!
//! Targets: `rtmp` (RTMP handshake + chunk stream through rml_rtmp's server session, the media
//! messages framed as FLV tags as the ingest does), `chat` (the websocket's inbound frame JSON, then
//! the Markdown sanitizer on its body, which must never let script through), `cmcd` (the query,
//! header and JSON forms), `setters` (the setter body decoder and every value validator).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MAX_INPUT: usize = 64 * 1024;

fn budget() -> Duration {
    let secs = std::env::var("CASTD_FUZZ_SECS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(20.0);
    Duration::from_secs_f64(secs)
}

fn dir(kind: &str, target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz").join(kind).join(target)
}

fn read_dir(p: &Path) -> Vec<Vec<u8>> {
    let mut out: Vec<(PathBuf, Vec<u8>)> = match std::fs::read_dir(p) {
        Ok(rd) => rd.flatten().filter_map(|e| std::fs::read(e.path()).ok().map(|b| (e.path(), b))).collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out.into_iter().map(|(_, b)| b).collect()
}

fn mutate(rng: &mut StdRng, input: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[&[u8]]) {
    let rounds = 1 + rng.gen_range(0..4);
    for _ in 0..rounds {
        let len = input.len();
        match rng.gen_range(0..9) {
            0 if len > 0 => {
                let i = rng.gen_range(0..len);
                input[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.gen_range(0..len);
                input[i] = *[0u8, 0xff, 0x7f, 0x80, b'"', b'\\', b'=', b',', b';', b'\n']
                    .get(rng.gen_range(0..10))
                    .unwrap_or(&0);
            }
            2 => {
                let i = rng.gen_range(0..=len);
                input.insert(i, rng.gen());
            }
            3 if len > 0 => {
                let i = rng.gen_range(0..len);
                let n = rng.gen_range(1..=(len - i).min(16));
                input.drain(i..i + n);
            }
            4 if len > 0 => {
                // repeat a slice
                let i = rng.gen_range(0..len);
                let n = rng.gen_range(1..=(len - i).min(64));
                let chunk: Vec<u8> = input[i..i + n].to_vec();
                let times = rng.gen_range(1..8);
                for _ in 0..times {
                    input.splice(i..i, chunk.iter().copied());
                }
            }
            5 if !corpus.is_empty() => {
                // splice another entry's tail
                let other = &corpus[rng.gen_range(0..corpus.len())];
                if !other.is_empty() {
                    let from = rng.gen_range(0..other.len());
                    let at = rng.gen_range(0..=len);
                    input.truncate(at);
                    input.extend_from_slice(&other[from..]);
                }
            }
            6 | 7 if !dict.is_empty() => {
                let tok = dict[rng.gen_range(0..dict.len())];
                let i = rng.gen_range(0..=len);
                input.splice(i..i, tok.iter().copied());
            }
            _ if len > 1 => {
                // overwrite with an "interesting" integer
                let i = rng.gen_range(0..len - 1);
                let v: [u8; 2] = *[[0u8, 0], [0xff, 0xff], [0x7f, 0xff], [0x80, 0], [0, 1]]
                    .get(rng.gen_range(0..5))
                    .unwrap_or(&[0, 0]);
                input[i] = v[0];
                input[i + 1] = v[1];
            }
            _ => input.push(rng.gen()),
        }
    }
    input.truncate(MAX_INPUT);
}

/// Run `one` on the regressions, the corpus, then mutations until the budget is spent.
fn fuzz(target: &str, dict: &[&[u8]], one: fn(&[u8])) {
    let regressions = read_dir(&dir("regressions", target));
    let corpus = read_dir(&dir("corpus", target));
    assert!(!corpus.is_empty(), "no seed corpus for {target}");
    let seed = std::env::var("CASTD_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let mut rng = StdRng::seed_from_u64(seed);
    let run = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| one(input))).is_err() {
            let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-crashes").join(target);
            let _ = std::fs::create_dir_all(&out);
            let file = out.join(format!("crash-{seed}-{}", input.len()));
            let _ = std::fs::write(&file, input);
            panic!(
                "fuzz {target}: input {:?} panicked (seed {seed}); saved as {}",
                String::from_utf8_lossy(input),
                file.display()
            );
        }
    };
    for r in regressions.iter().chain(corpus.iter()) {
        run(r);
    }
    let start = Instant::now();
    let limit = budget();
    let mut execs: u64 = 0;
    while start.elapsed() < limit {
        for _ in 0..64 {
            let mut input = corpus[rng.gen_range(0..corpus.len())].clone();
            mutate(&mut rng, &mut input, &corpus, dict);
            run(&input);
            execs += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz {target}: {execs} executions in {secs:.1} s ({:.0}/s), seed {seed}, {} seeds, {} regressions",
        execs as f64 / secs,
        corpus.len(),
        regressions.len()
    );
}

// ---- rtmp

fn rtmp_one(data: &[u8]) {
    use castd::ingest::{handshake_input, session_input};
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
                    frame(castd::transcode::flv::TAG_VIDEO, timestamp.value, data)
                }
                ServerSessionEvent::AudioDataReceived { data, timestamp, .. } => {
                    frame(castd::transcode::flv::TAG_AUDIO, timestamp.value, data)
                }
                _ => {}
            }
            drop(more);
        }
    }
}

fn frame(kind: u8, timestamp: u32, data: bytes::Bytes) {
    use castd::transcode::flv::{audio_codec_name, video_codec_name, FlvTag};
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
}

/// The RTMP target's inputs make rml_rtmp panic (caught by `castd::ingest::session_input`); their
/// messages are left out of the output, every other panic is reported as usual.
fn quiet_caught_rtmp_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_rtmp_test = std::thread::current().name().is_some_and(|n| n.contains("fuzz_rtmp"));
        let from_parser =
            info.location().is_some_and(|l| l.file().contains("rml_rtmp") || l.file().contains("/library/core/"));
        if !(in_rtmp_test && from_parser) {
            default(info);
        }
    }));
}

#[test]
fn fuzz_rtmp_chunk_stream_and_flv_tags() {
    quiet_caught_rtmp_panics();
    let dict: &[&[u8]] = &[
        b"\x02\x00\x07connect",
        b"\x02\x00\x0dcreateStream",
        b"\x02\x00\x07publish",
        b"\x02\x00\x0c@setDataFrame",
        b"\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        b"\x04\x00\x00\x00\x00\x00\x10\x09\x01\x00\x00\x00",
        b"\x17\x00\x00\x00\x00",
        b"\xaf\x00\x12\x10",
        b"\xc4",
        b"\x00\x00\x00\x09",
    ];
    fuzz("rtmp", dict, rtmp_one);
}

// ---- chat

fn chat_one(data: &[u8]) {
    use castd::chat::protocol::Inbound;
    use castd::chat::sanitize::{is_empty, render};
    let text = String::from_utf8_lossy(data);
    let bodies: Vec<String> = match serde_json::from_str::<Inbound>(&text) {
        Ok(ev) => ev.body.into_iter().chain(ev.new_name).collect(),
        Err(_) => vec![text.to_string()],
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

#[test]
fn fuzz_chat_inbound_frames_and_markdown_sanitizer() {
    let dict: &[&[u8]] = &[
        b"{\"type\":\"CHAT\",\"body\":\"",
        b"{\"type\":\"NAME_CHANGE\",\"newName\":\"",
        b"\"}",
        b"<script>alert(1)</script>",
        b"<img src=x onerror=alert(1)>",
        b"[x](javascript:alert(1))",
        b"<a href=\"javascript:alert(1)\">",
        b"![i](http://e/x.png)",
        b"<iframe src=",
        b"**",
        b"`",
        b"```\n",
        b"<",
        b"&#106;avascript:",
        b"\\u003cscript\\u003e",
        b"https://example.com/a?b=c",
        b":emoji:",
    ];
    fuzz("chat", dict, chat_one);
}

// ---- cmcd

fn cmcd_one(data: &[u8]) {
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

#[test]
fn fuzz_cmcd_query_header_and_json() {
    let dict: &[&[u8]] = &[
        b"CMCD=",
        b"br=",
        b"bl=",
        b"sid=\"",
        b"cid=\"",
        b"ot=v",
        b"su",
        b"bs",
        b"?1",
        b"?0",
        b"nor=\"",
        b"(",
        b")",
        b":",
        b";",
        b"%2C",
        b"%3D",
        b"%22",
        b"1e308",
        b"-1",
        b"99999999999999999999",
        b"\"v\":",
        b"{\"br\":",
    ];
    fuzz("cmcd", dict, cmcd_one);
}

// ---- setters

fn setters_one(data: &[u8]) {
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

#[test]
fn fuzz_setter_value_decoder() {
    let dict: &[&[u8]] = &[
        b"{\"value\":",
        b"}",
        b"[",
        b"]",
        b"\"",
        b"null",
        b"true",
        b"1e400",
        b"-0",
        b"18446744073709551616",
        b"\"http://",
        b"\"ws://",
        b"\"::1\"",
        b"{\"key\":\"",
        b"{\"videoBitrate\":",
        b"{\"enabled\":true,",
        b"\\u0000",
        b"\\ud800",
        b",",
    ];
    fuzz("setters", dict, setters_one);
}
