//! Enhanced RTMP ingest end to end: a publisher written here (rml_rtmp's client session, sending
//! Enhanced RTMP FourCC video tags, since Debian 12's ffmpeg 5.1 cannot) fed by an ffmpeg-made HEVC
//! elementary stream (libx265) and ADTS AAC, published to the real daemon in real time. Checked:
//! the `connect` answer lists the FourCCs castd takes, the H.264 rungs ffprobe reads, the broadcaster
//! details say `hevc`; the passthrough rung's `FRAME-RATE` and `BANDWIDTH` in the master playlist are
//! the source's (30 fps, two bitrates); and a FourCC castd cannot decode is refused with an `onStatus`
//! error.
//! Live tests run one at a time (the machine has two cores).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::media::{online, segments, text};
use common::Server;
use rml_rtmp::chunk_io::ChunkDeserializer;
use rml_rtmp::handshake::{Handshake, HandshakeProcessResult, PeerType};
use rml_rtmp::messages::RtmpMessage;
use rml_rtmp::rml_amf0::Amf0Value;
use rml_rtmp::sessions::{
    ClientSession, ClientSessionConfig, ClientSessionEvent, ClientSessionResult, PublishRequestType,
};
use rml_rtmp::time::RtmpTimestamp;

static LIVE: Mutex<()> = Mutex::new(());

const KEY: &str = "ertmp-stream-key-1";

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// An AMF0 command the server sent: name, transaction, command object, the rest.
type Command0 = (String, f64, Amf0Value, Vec<Amf0Value>);

/// A raw RTMP publisher: rml_rtmp's client session, plus a second deserializer that reads every
/// command the server sends (the client session hides the `connect` answer's properties).
struct Publisher {
    sock: TcpStream,
    session: ClientSession,
    sniff: ChunkDeserializer,
    commands: Vec<Command0>,
    events: Vec<ClientSessionEvent>,
    closed: bool,
}

impl Publisher {
    fn connect(port: u16) -> Publisher {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect to castd's RTMP port");
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        sock.set_nodelay(true).unwrap();
        let mut hs = Handshake::new(PeerType::Client);
        sock.write_all(&hs.generate_outbound_p0_and_p1().unwrap()).unwrap();
        let mut buf = [0u8; 8192];
        let deadline = Instant::now() + Duration::from_secs(10);
        let leftover = loop {
            assert!(Instant::now() < deadline, "handshake timed out");
            let n = match sock.read(&mut buf) {
                Ok(0) => panic!("closed during the handshake"),
                Ok(n) => n,
                Err(_) => continue,
            };
            match hs.process_bytes(&buf[..n]).unwrap() {
                HandshakeProcessResult::InProgress { response_bytes } => sock.write_all(&response_bytes).unwrap(),
                HandshakeProcessResult::Completed { response_bytes, remaining_bytes } => {
                    sock.write_all(&response_bytes).unwrap();
                    break remaining_bytes;
                }
            }
        };
        let (session, initial) = ClientSession::new(ClientSessionConfig::new()).unwrap();
        let mut p = Publisher {
            sock,
            session,
            sniff: ChunkDeserializer::new(),
            commands: Vec::new(),
            events: Vec::new(),
            closed: false,
        };
        p.results(initial);
        p.feed(&leftover);
        p
    }

    fn results(&mut self, results: Vec<ClientSessionResult>) {
        for r in results {
            match r {
                ClientSessionResult::OutboundResponse(packet) => {
                    if self.sock.write_all(&packet.bytes).is_err() {
                        self.closed = true;
                    }
                }
                ClientSessionResult::RaisedEvent(e) => self.events.push(e),
                ClientSessionResult::UnhandleableMessageReceived(_) => {}
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut input = bytes;
        while let Ok(Some(payload)) = self.sniff.get_next_message(input) {
            input = &[];
            match payload.to_rtmp_message() {
                Ok(RtmpMessage::SetChunkSize { size }) => self.sniff.set_max_chunk_size(size as usize).unwrap(),
                Ok(RtmpMessage::Amf0Command { command_name, transaction_id, command_object, additional_arguments }) => {
                    self.commands.push((command_name, transaction_id, command_object, additional_arguments))
                }
                _ => {}
            }
        }
        let results = self.session.handle_input(bytes).expect("the server's bytes parse");
        self.results(results);
    }

    /// Read what the server sent (up to `wait`), until `done` holds or the socket closes.
    fn pump(&mut self, wait: Duration, done: impl Fn(&Publisher) -> bool) -> bool {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 8192];
        while !done(self) && !self.closed && Instant::now() < deadline {
            match self.sock.read(&mut buf) {
                Ok(0) => self.closed = true,
                Ok(n) => self.feed(&buf[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => self.closed = true,
            }
        }
        done(self)
    }

    fn publish(&mut self, key: &str) {
        let r = self.session.request_connection("live".into()).unwrap();
        self.results(vec![r]);
        let ok = self.pump(Duration::from_secs(10), |p| {
            p.events.iter().any(|e| matches!(e, ClientSessionEvent::ConnectionRequestAccepted))
        });
        assert!(ok, "connect not accepted: {:?}", self.events);
        let r = self.session.request_publishing(key.into(), PublishRequestType::Live).unwrap();
        self.results(vec![r]);
        let ok = self.pump(Duration::from_secs(10), |p| {
            p.events.iter().any(|e| matches!(e, ClientSessionEvent::PublishRequestAccepted))
        });
        assert!(ok, "publish not accepted: {:?}", self.events);
    }

    fn send(&mut self, tag: &Tag) {
        let ts = RtmpTimestamp::new(tag.ms);
        let r = if tag.video {
            self.session.publish_video_data(tag.data.clone(), ts, false)
        } else {
            self.session.publish_audio_data(tag.data.clone(), ts, false)
        };
        match r {
            Ok(r) => self.results(vec![r]),
            Err(_) => self.closed = true,
        }
        // Whatever the server says meanwhile (an onStatus error, acknowledgements).
        let mut buf = [0u8; 8192];
        self.sock.set_nonblocking(true).unwrap();
        loop {
            match self.sock.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => self.feed(&buf[..n]),
                Err(_) => break,
            }
        }
        self.sock.set_nonblocking(false).unwrap();
    }
}

/// One FLV tag to send.
struct Tag {
    video: bool,
    ms: u32,
    data: Bytes,
}

/// Split an Annex B byte stream into NAL units.
fn nal_units(data: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    for (k, &s) in starts.iter().enumerate() {
        let mut end = starts.get(k + 1).map(|&n| n - 3).unwrap_or(data.len());
        while end > s && data[end - 1] == 0 {
            end -= 1;
        }
        out.push(&data[s..end]);
    }
    out
}

/// An HEVC elementary stream (libx265, no B-frames, a keyframe a second, 30 fps) as Enhanced RTMP
/// tags: the sequence start with an hvcC made of the first VPS/SPS/PPS, then one coded frame per
/// access unit (keyframes as CodedFrames with a zero composition time, the rest as CodedFramesX).
fn hevc_tags(secs: u32, fourcc: &[u8; 4]) -> Vec<Tag> {
    hevc_tags_at(secs, fourcc, None)
}

/// As `hevc_tags`, at the average bitrate `bitrate` (ffmpeg's `-b:v`, such as `400k`) when given.
fn hevc_tags_at(secs: u32, fourcc: &[u8; 4], bitrate: Option<&str>) -> Vec<Tag> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.hevc");
    let st = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t"])
        .arg(secs.to_string())
        .args([
            "-c:v",
            "libx265",
            "-preset",
            "ultrafast",
            "-x265-params",
            "keyint=30:bframes=0:repeat-headers=1:log-level=error",
        ])
        .args(bitrate.map(|b| ["-b:v", b]).into_iter().flatten())
        .args(["-pix_fmt", "yuv420p", "-f", "hevc"])
        .arg(&path)
        .status()
        .expect("run ffmpeg");
    assert!(st.success(), "ffmpeg made no HEVC");
    let data = std::fs::read(&path).unwrap();
    let (mut vps, mut sps, mut pps) = (None, None, None);
    let mut frames: Vec<(bool, Vec<u8>)> = Vec::new();
    let mut au = Vec::new();
    for nal in nal_units(&data) {
        let kind = (nal[0] >> 1) & 0x3f;
        match kind {
            32 => vps = vps.or(Some(nal.to_vec())),
            33 => sps = sps.or(Some(nal.to_vec())),
            34 => pps = pps.or(Some(nal.to_vec())),
            35 => continue, // access unit delimiter
            _ => {}
        }
        au.extend_from_slice(&(nal.len() as u32).to_be_bytes());
        au.extend_from_slice(nal);
        if kind < 32 {
            frames.push(((16..=21).contains(&kind), std::mem::take(&mut au)));
        }
    }
    let (vps, sps, pps) = (vps.expect("a VPS"), sps.expect("an SPS"), pps.expect("a PPS"));
    // hvcC: version 1, the SPS's profile_tier_level (12 bytes after its 2-byte header and 1 byte),
    // no min spatial segmentation or parallelism, 4:2:0 8-bit, 4-byte lengths, three arrays.
    // (The SPS without its emulation-prevention bytes: `00 00 03` is `00 00`.)
    let mut rbsp = Vec::with_capacity(sps.len());
    let mut zeros = 0;
    for &b in &sps {
        if b == 3 && zeros >= 2 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        rbsp.push(b);
    }
    let mut hvcc = vec![1];
    hvcc.extend_from_slice(&rbsp[3..15]);
    hvcc.extend_from_slice(&[0xf0, 0x00, 0xfc, 0xfd, 0xf8, 0xf8, 0x00, 0x00, 0x0f, 3]);
    for (kind, nal) in [(32u8, &vps), (33, &sps), (34, &pps)] {
        hvcc.push(0x80 | kind);
        hvcc.extend_from_slice(&1u16.to_be_bytes());
        hvcc.extend_from_slice(&(nal.len() as u16).to_be_bytes());
        hvcc.extend_from_slice(nal);
    }
    let mut start = vec![0x90];
    start.extend_from_slice(fourcc);
    start.extend_from_slice(&hvcc);
    let mut tags = vec![Tag { video: true, ms: 0, data: start.into() }];
    for (i, (key, au)) in frames.into_iter().enumerate() {
        let mut d = Vec::with_capacity(au.len() + 8);
        if key {
            d.push(0x91);
            d.extend_from_slice(fourcc);
            d.extend_from_slice(&[0, 0, 0]);
        } else {
            d.push(0xa3);
            d.extend_from_slice(fourcc);
        }
        d.extend_from_slice(&au);
        tags.push(Tag { video: true, ms: (i as u64 * 1000 / 30) as u32, data: d.into() });
    }
    tags
}

/// An AV1 elementary stream (SVT-AV1, a keyframe a second, 30 fps) as Enhanced RTMP tags: the
/// sequence start with an av1C holding the first sequence header OBU, then one CodedFrames tag per
/// temporal unit (its temporal delimiter left out, as ISOBMFF and Matroska store AV1).
fn av1_tags(secs: u32) -> Vec<Tag> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t"])
        .arg(secs.to_string())
        .args(["-c:v", "libsvtav1", "-preset", "12", "-g", "30", "-pix_fmt", "yuv420p", "-f", "obu", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(out.status.success() && !out.stdout.is_empty(), "ffmpeg made no AV1");
    let data = out.stdout;
    let leb128 = |at: &mut usize| {
        let mut v = 0usize;
        for i in 0..8 {
            let b = data[*at];
            *at += 1;
            v |= usize::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    };
    let mut seq_header: Option<Vec<u8>> = None;
    let mut units: Vec<(bool, Vec<u8>)> = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let start = i;
        let header = data[i];
        let kind = (header >> 3) & 0x0f;
        i += 1 + usize::from(header & 0x04 != 0);
        assert!(header & 0x02 != 0, "OBUs with sizes");
        let size = leb128(&mut i);
        let obu = &data[start..i + size];
        let payload = &data[i..i + size];
        i += size;
        match kind {
            2 => units.push((false, Vec::new())), // temporal delimiter: a new unit
            1 => {
                seq_header.get_or_insert_with(|| obu.to_vec());
                units.last_mut().expect("a unit").1.extend_from_slice(obu);
            }
            _ => {
                let unit = units.last_mut().expect("a unit");
                // A frame (6) or frame header (3) OBU shown now with frame_type KEY_FRAME.
                if (kind == 6 || kind == 3) && payload.first().is_some_and(|b| b & 0xe0 == 0) {
                    unit.0 = true;
                }
                unit.1.extend_from_slice(obu);
            }
        }
    }
    let seq = seq_header.expect("a sequence header OBU");
    let profile = seq[2] >> 5;
    let mut start = vec![0x90, b'a', b'v', b'0', b'1', 0x81, profile << 5 | 8, 0x0c, 0];
    start.extend_from_slice(&seq);
    let mut tags = vec![Tag { video: true, ms: 0, data: start.into() }];
    for (n, (key, unit)) in units.into_iter().enumerate() {
        let mut d = vec![if key { 0x91 } else { 0xa1 }, b'a', b'v', b'0', b'1'];
        d.extend_from_slice(&unit);
        tags.push(Tag { video: true, ms: (n as u64 * 1000 / 30) as u32, data: d.into() });
    }
    tags
}

/// A VP9 stream (libvpx-vp9, a keyframe a second, 30 fps, from IVF) as Enhanced RTMP tags: a sequence
/// start with a minimal vpcC, then one CodedFrames tag per IVF frame (superframes kept whole).
fn vp9_tags(secs: u32) -> Vec<Tag> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t"])
        .arg(secs.to_string())
        .args(["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-g", "30", "-b:v", "800k"])
        .args(["-pix_fmt", "yuv420p", "-f", "ivf", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(out.status.success() && out.stdout.len() > 32, "ffmpeg made no VP9");
    let data = out.stdout;
    // vpcC (version 1, flags 0): profile 0, level 21, 8-bit 4:2:0, BT.709, no codec init data.
    let mut tags = vec![Tag {
        video: true,
        ms: 0,
        data: Bytes::from_static(&[0x90, b'v', b'p', b'0', b'9', 1, 0, 0, 0, 0, 21, 0x82, 1, 1, 1, 0, 0]),
    }];
    let mut i = 32;
    let mut n = 0u64;
    while i + 12 <= data.len() {
        let size = u32::from_le_bytes(data[i..i + 4].try_into().unwrap()) as usize;
        let frame = &data[i + 12..(i + 12 + size).min(data.len())];
        i += 12 + size;
        // Profile 0 uncompressed header: frame marker, profile bits, show_existing_frame, frame_type (0: key).
        let key = frame.first().is_some_and(|b| b & 0x0c == 0);
        let mut d = vec![if key { 0x91 } else { 0xa1 }, b'v', b'p', b'0', b'9'];
        d.extend_from_slice(frame);
        tags.push(Tag { video: true, ms: (n * 1000 / 30) as u32, data: d.into() });
        n += 1;
    }
    tags
}

/// A 440 Hz tone as legacy FLV AAC tags (the sequence header, then one tag per ADTS frame).
fn aac_tags(secs: u32) -> Vec<Tag> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t"])
        .arg(secs.to_string())
        .args(["-ac", "2", "-c:a", "aac", "-f", "adts", "-"])
        .output()
        .expect("run ffmpeg");
    let data = out.stdout;
    let mut tags = Vec::new();
    let mut i = 0;
    let mut n = 0u64;
    while i + 7 <= data.len() {
        assert!(data[i] == 0xff && data[i + 1] & 0xf0 == 0xf0, "ADTS sync at {i}");
        let header = if data[i + 1] & 1 == 1 { 7 } else { 9 };
        let len =
            ((usize::from(data[i + 3] & 3) << 11) | (usize::from(data[i + 4]) << 3) | usize::from(data[i + 5] >> 5))
                .min(data.len() - i);
        if tags.is_empty() {
            let aot = (data[i + 2] >> 6) + 1;
            let sfi = (data[i + 2] >> 2) & 0x0f;
            let ch = ((data[i + 2] & 1) << 2) | (data[i + 3] >> 6);
            let asc = [(aot << 3) | (sfi >> 1), ((sfi & 1) << 7) | (ch << 3)];
            tags.push(Tag { video: false, ms: 0, data: Bytes::from(vec![0xaf, 0, asc[0], asc[1]]) });
        }
        let mut d = vec![0xaf, 1];
        d.extend_from_slice(&data[i + header..i + len]);
        tags.push(Tag { video: false, ms: (n * 1024 * 1000 / 48000) as u32, data: d.into() });
        n += 1;
        i += len;
    }
    tags
}

/// Video and audio in send order (by time, set-up first).
fn interleave(mut video: Vec<Tag>, audio: Vec<Tag>) -> Vec<Tag> {
    video.extend(audio);
    video.sort_by_key(|t| (t.ms, t.data.get(1) != Some(&0) || !t.video));
    video
}

/// Send `tags` in real time.
fn send_all(p: &mut Publisher, tags: &[Tag]) {
    let start = Instant::now();
    for t in tags {
        let at = Duration::from_millis(t.ms.into());
        if let Some(wait) = at.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        p.send(t);
        if p.closed {
            return;
        }
    }
}

/// ffprobe's video codec name and height of a segment (with its init segment, if any).
fn probe_segment(server: &Server, variant: usize, name: &str) -> (String, u64) {
    let playlist = text(server, &format!("/hls/{variant}/stream.m3u8")).unwrap_or_default();
    let init = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\""))
        .and_then(|rest| rest.split('"').next())
        .map(|n| server.get(&format!("/hls/{variant}/{n}")).bytes().expect("init segment").to_vec());
    let mut bytes = init.unwrap_or_default();
    bytes.extend_from_slice(&server.get(&format!("/hls/{variant}/{name}")).bytes().expect("segment"));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,height", "-of", "json"])
        .arg(file.path())
        .output()
        .expect("ffprobe");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    let s = &v["streams"][0];
    (s["codec_name"].as_str().unwrap_or_default().to_string(), s["height"].as_u64().unwrap_or(0))
}

#[test]
fn hevc_over_enhanced_rtmp_is_transcoded_to_the_h264_ladder() {
    let secs = 12;
    // x265's Main profile (1, compatible with Main and Main 10: flags 0x60000000 → "6"), Main tier,
    // level 2.1 (63) for 640x360 at 30 fps, progressive and frame-only (constraint byte 0x90).
    transcoded_to_the_h264_ladder(interleave(hevc_tags(secs, b"hvc1"), aac_tags(secs)), "hevc", "hvc1.1.6.L63.90");
}

#[test]
fn hevc_over_enhanced_rtmp_with_low_latency_hls() {
    let secs = 12;
    let tags = interleave(hevc_tags(secs, b"hvc1"), aac_tags(secs));
    transcoded_with(tags, "hevc", "hvc1.", |server| server.set("video/streamlatencylevel", serde_json::json!(0)));
}

#[test]
fn vp9_over_enhanced_rtmp_is_transcoded_to_the_h264_ladder() {
    let secs = 12;
    transcoded_to_the_h264_ladder(interleave(vp9_tags(secs), aac_tags(secs)), "vp9", "vp09.");
}

#[test]
fn av1_over_enhanced_rtmp_is_transcoded_to_the_h264_ladder() {
    let secs = 12;
    transcoded_to_the_h264_ladder(interleave(av1_tags(secs), aac_tags(secs)), "av1", "av01.");
}

/// The variant (`N/stream.m3u8`) whose `CODECS` starts with `prefix` in a master playlist, and the
/// variants listed before it.
fn variant_with(master: &str, prefix: &str) -> Option<(usize, Vec<String>)> {
    let lines: Vec<&str> = master.lines().collect();
    let mut before = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if !l.starts_with("#EXT-X-STREAM-INF:") {
            continue;
        }
        let codecs = l.split("CODECS=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or_default().to_string();
        let uri = lines.get(i + 1)?;
        if codecs.starts_with(prefix) {
            return Some((uri.split('/').next()?.parse().ok()?, before));
        }
        before.push(codecs);
    }
    None
}

/// Publish `tags` and check the H.264 rungs, the passthrough rung (fMP4, `CODECS` starting with
/// `codecs`), the codec the details name and the connect answer.
fn transcoded_to_the_h264_ladder(tags: Vec<Tag>, codec: &str, codecs: &str) {
    transcoded_with(tags, codec, codecs, |_| {})
}

/// As `transcoded_to_the_h264_ladder`, with `setup` run on the server before the publish.
fn transcoded_with(tags: Vec<Tag>, codec: &str, codecs: &str, setup: impl Fn(&Server)) {
    let _l = lock();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    let port = server.rtmp_port.expect("rtmp port");
    let mut p = Publisher::connect(port);
    p.publish(KEY);
    // The connect answer castd sent first lists the FourCCs it takes.
    let (_, _, object, _) = p.commands.iter().find(|c| c.0 == "_result").expect("a _result").clone();
    let Amf0Value::Object(props) = object else { panic!("no command object") };
    let Some(Amf0Value::StrictArray(list)) = props.get("fourCcList") else { panic!("no fourCcList in {props:?}") };
    for want in ["hvc1", "av01", "vp09"] {
        assert!(list.contains(&Amf0Value::Utf8String(want.into())), "{want} missing from {list:?}");
    }
    let sender = std::thread::spawn(move || {
        send_all(&mut p, &tags);
        p
    });
    let seg = server
        .wait_for(Duration::from_secs(60), || {
            let names = segments(&text(&server, "/hls/0/stream.m3u8")?);
            (online(&server) && names.len() >= 2).then(|| names[0].clone())
        })
        .unwrap_or_else(|| panic!("no H.264 segments from the HEVC source; log:\n{}", server.log_text()));
    let (rung, height) = probe_segment(&server, 0, &seg);
    assert_eq!(rung, "h264", "the ladder is H.264");
    assert!(height > 0, "ffprobe read no height");
    // The source as it came, in fMP4, listed after the H.264 rungs with its own CODECS.
    let master = server
        .wait_for(Duration::from_secs(30), || text(&server, "/hls/stream.m3u8").filter(|m| m.contains(codecs)))
        .unwrap_or_else(|| panic!("no {codecs} variant in the master playlist; log:\n{}", server.log_text()));
    let (n, before) = variant_with(&master, codecs).expect("the passthrough variant");
    assert!(!before.is_empty() && before.iter().all(|c| c.starts_with("avc1.")), "H.264 rungs first:\n{master}");
    let playlist = text(&server, &format!("/hls/{n}/stream.m3u8")).expect("passthrough playlist");
    assert!(playlist.contains("#EXT-X-MAP:URI="), "fMP4 with an init segment:\n{playlist}");
    let first = server
        .wait_for(Duration::from_secs(30), || {
            let p = text(&server, &format!("/hls/{n}/stream.m3u8"))?;
            segments(&p).first().cloned()
        })
        .expect("a passthrough segment");
    assert!(first.split('?').next().unwrap_or_default().ends_with(".m4s"), "{playlist}");
    let (source, _) = probe_segment(&server, n, &first);
    assert_eq!(source, codec, "the passthrough rung is the source's {codec}");
    let status = server.admin_json("/api/admin/status");
    assert_eq!(status["broadcaster"]["streamDetails"]["videoCodec"], codec, "{status}");
    let p = sender.join().unwrap();
    assert!(!p.closed, "castd closed the publisher's socket; log:\n{}", server.log_text());
}

/// The passthrough rung's `EXT-X-STREAM-INF` says what the publisher sends: `FRAME-RATE=30.000` for a
/// 30 fps source (its timestamps are whole milliseconds, which a few frames' estimate reads as
/// 30.303), and a `BANDWIDTH` that follows the stream's real bitrate, for two bitrates far apart.
#[test]
fn the_passthrough_rung_states_the_sources_frame_rate_and_bitrate() {
    let _l = lock();
    let secs = 10;
    let mut seen = Vec::new();
    for bitrate in ["400k", "3000k"] {
        let video = hevc_tags_at(secs, b"hvc1", Some(bitrate));
        // What the stream really carries: its coded frames' bytes over its length.
        let real = video.iter().map(|t| t.data.len() as u64).sum::<u64>() * 8 / u64::from(secs);
        let server = Server::start_with_args(&["--streamkey", KEY]);
        let mut p = Publisher::connect(server.rtmp_port.expect("rtmp port"));
        p.publish(KEY);
        let tags = interleave(video, aac_tags(secs));
        let sender = std::thread::spawn(move || {
            send_all(&mut p, &tags);
            p
        });
        let master = server
            .wait_for(Duration::from_secs(60), || text(&server, "/hls/stream.m3u8").filter(|m| m.contains("hvc1.")))
            .unwrap_or_else(|| panic!("no hvc1 variant in the master playlist; log:\n{}", server.log_text()));
        let line = master
            .lines()
            .find(|l| l.starts_with("#EXT-X-STREAM-INF:") && l.contains("CODECS=\"hvc1."))
            .unwrap_or_else(|| panic!("no hvc1 line in\n{master}"));
        let attr = |name: &str| {
            line.split(&format!("{name}=")).nth(1).and_then(|r| r.split(',').next()).unwrap_or_default().to_string()
        };
        eprintln!("{bitrate} ({real} bit/s of video): {line}");
        assert_eq!(attr("FRAME-RATE"), "30.000", "{line}");
        let bandwidth: u64 = attr("BANDWIDTH").parse().unwrap_or_else(|_| panic!("no BANDWIDTH in {line}"));
        // Within a factor of two of the video's real bitrate (the audio's share on top, up to 200k).
        assert!(
            bandwidth >= real / 2 && bandwidth <= real * 2 + 200_000,
            "{bitrate}: BANDWIDTH {bandwidth} for a stream of {real} bit/s:\n{master}"
        );
        seen.push(bandwidth);
        let p = sender.join().unwrap();
        assert!(!p.closed, "castd closed the publisher's socket; log:\n{}", server.log_text());
    }
    assert!(seen[1] > seen[0] * 3, "the bandwidth follows the bitrate: {seen:?}");
}

#[test]
fn a_fourcc_castd_cannot_decode_is_refused_with_an_onstatus_error() {
    let _l = lock();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let port = server.rtmp_port.expect("rtmp port");
    // VVC (H.266): an Enhanced RTMP FourCC castd does not take.
    let tags = hevc_tags(1, b"vvc1");
    let mut p = Publisher::connect(port);
    p.publish(KEY);
    send_all(&mut p, &tags[..5]);
    p.pump(Duration::from_secs(10), |p| p.closed);
    assert!(p.closed, "castd kept the socket open");
    let refusal = p.commands.iter().find(|c| c.0 == "onStatus" && format!("{:?}", c.3).contains("error"));
    let refusal = format!("{:?}", refusal.expect("an onStatus error"));
    assert!(refusal.contains("NetStream.Publish.Rejected") && refusal.contains("vvc1"), "{refusal}");
    assert!(!online(&server), "online with a codec castd cannot decode");
    assert!(server.log_text().contains("vvc1"), "the log does not say why:\n{}", server.log_text());
}

/// A publisher for the browser test (`tests/web/ertmp-playback.test.mjs`), not a test by itself: HEVC
/// and AAC for `ERTMP_SECS` seconds (default 60) to `live/ERTMP_KEY` on `127.0.0.1:ERTMP_PORT`.
#[test]
#[ignore = "run by tests/web/ertmp-playback.test.mjs as its publisher"]
fn publish_hevc_for_the_browser_test() {
    let port: u16 = std::env::var("ERTMP_PORT").expect("ERTMP_PORT").parse().expect("a port");
    let key = std::env::var("ERTMP_KEY").expect("ERTMP_KEY");
    let secs: u32 = std::env::var("ERTMP_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let tags = interleave(hevc_tags(secs, b"hvc1"), aac_tags(secs));
    let mut p = Publisher::connect(port);
    p.publish(&key);
    send_all(&mut p, &tags);
    assert!(!p.closed, "castd closed the socket");
}
