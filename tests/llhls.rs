//! Low-latency HLS end to end: the ffmpeg CLI publishes to the real daemon at the LL latency level (0);
//! the LL-HLS playlists are checked against a grammar written here (tags, part durations within
//! PART-TARGET, independent parts, monotonic sequence and part numbers, program date times), blocking
//! reload (holds, 400s, the timeout while the broadcaster is paused), the preload hint, delta updates,
//! and ffprobe reads init + parts and init + segment.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::media::{publish, wait_exit};
use common::{unsafe_kill, Server};
use serde_json::{json, Value};

const KEY: &str = "ll-stream-key-1";

/// One `#EXT-X-PART`.
#[derive(Debug, Clone)]
struct Part {
    duration: f64,
    uri: String,
    independent: bool,
}

/// One segment (complete, or the one in progress when `uri` is empty).
#[derive(Debug, Clone, Default)]
struct Seg {
    msn: u64,
    duration: f64,
    uri: String,
    parts: Vec<Part>,
    pdt: Option<String>,
}

#[derive(Debug, Default)]
struct Playlist {
    version: u32,
    target: u64,
    part_target: f64,
    part_hold_back: f64,
    can_skip_until: f64,
    can_block: bool,
    media_sequence: u64,
    map: String,
    skipped: u64,
    segments: Vec<Seg>,
    /// Parts after the last complete segment.
    current: Seg,
    hint: Option<String>,
    reports: Vec<(String, u64, u64)>,
}

fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    // Attribute lists: NAME=value pairs separated by commas (quoted values hold no commas here).
    line.split_once(':')?.1.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| v.trim_matches('"'))
    })
}

fn num<T: std::str::FromStr>(line: &str, name: &str) -> T {
    attr(line, name).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} missing or not a number in {line}"))
}

/// Parse and check an LL-HLS media playlist; panics with the text on a grammar error.
fn parse(text: &str) -> Playlist {
    let mut p = Playlist::default();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("#EXTM3U"), "{text}");
    let mut cur = Seg::default();
    let mut next_msn = None;
    let mut pending_extinf: Option<f64> = None;
    for line in lines {
        let tag = line.split(':').next().unwrap_or_default();
        match tag {
            "#EXT-X-VERSION" => p.version = line[15..].parse().expect("version"),
            "#EXT-X-TARGETDURATION" => p.target = line[22..].parse().expect("target"),
            "#EXT-X-SERVER-CONTROL" => {
                p.can_block = attr(line, "CAN-BLOCK-RELOAD") == Some("YES");
                p.part_hold_back = num(line, "PART-HOLD-BACK");
                p.can_skip_until = num(line, "CAN-SKIP-UNTIL");
            }
            "#EXT-X-PART-INF" => p.part_target = num(line, "PART-TARGET"),
            "#EXT-X-MEDIA-SEQUENCE" => {
                p.media_sequence = line[22..].parse().expect("media sequence");
                next_msn = Some(p.media_sequence);
            }
            "#EXT-X-MAP" => p.map = attr(line, "URI").expect("map uri").to_string(),
            "#EXT-X-SKIP" => {
                p.skipped = num(line, "SKIPPED-SEGMENTS");
                next_msn = next_msn.map(|m| m + p.skipped);
            }
            "#EXT-X-PROGRAM-DATE-TIME" => {
                let v = &line[25..];
                assert!(chrono::DateTime::parse_from_rfc3339(v).is_ok(), "bad date-time: {line}");
                cur.pdt = Some(v.to_string());
            }
            "#EXT-X-PART" => cur.parts.push(Part {
                duration: num(line, "DURATION"),
                uri: attr(line, "URI").expect("part uri").to_string(),
                independent: attr(line, "INDEPENDENT") == Some("YES"),
            }),
            "#EXTINF" => pending_extinf = Some(line[8..].trim_end_matches(',').parse().expect("extinf")),
            "#EXT-X-PRELOAD-HINT" => {
                assert_eq!(attr(line, "TYPE"), Some("PART"), "{line}");
                p.hint = Some(attr(line, "URI").expect("hint uri").to_string());
            }
            "#EXT-X-RENDITION-REPORT" => p.reports.push((
                attr(line, "URI").expect("report uri").to_string(),
                num(line, "LAST-MSN"),
                num(line, "LAST-PART"),
            )),
            "#EXT-X-INDEPENDENT-SEGMENTS" | "#EXT-X-DISCONTINUITY" | "#EXT-X-DISCONTINUITY-SEQUENCE" => {}
            t if t.starts_with('#') => panic!("unexpected tag {line}\n{text}"),
            _ => {
                let duration = pending_extinf.take().unwrap_or_else(|| panic!("URI without EXTINF: {line}\n{text}"));
                let msn = next_msn.expect("MEDIA-SEQUENCE before segments");
                next_msn = Some(msn + 1);
                p.segments.push(Seg { msn, duration, uri: line.to_string(), ..std::mem::take(&mut cur) });
            }
        }
    }
    cur.msn = next_msn.unwrap_or(0);
    p.current = cur;
    assert!(p.version >= 9, "delta updates need version 9: {text}");
    assert!(p.can_block, "CAN-BLOCK-RELOAD=YES: {text}");
    assert!(p.part_target >= 0.2 && p.part_target <= 0.5, "PART-TARGET 200-500 ms: {text}");
    assert!(p.part_hold_back >= 3.0 * p.part_target - 1e-6, "PART-HOLD-BACK >= 3 x PART-TARGET: {text}");
    assert!(p.can_skip_until >= 6.0 * p.target as f64, "CAN-SKIP-UNTIL >= 6 x target: {text}");
    assert!(!p.map.is_empty(), "EXT-X-MAP: {text}");
    for s in p.segments.iter().chain([&p.current]) {
        // Part durations within PART-TARGET; each segment starts with an independent part.
        for part in &s.parts {
            assert!(part.duration > 0.0 && part.duration <= p.part_target + 1e-3, "part {part:?} vs {text}");
        }
        if let Some(first) = s.parts.first() {
            assert!(first.independent, "segment {} starts with a dependent part: {text}", s.msn);
        }
        if !s.uri.is_empty() {
            assert!((s.duration.round() as u64) <= p.target, "EXTINF over the target: {text}");
            assert!(s.pdt.is_some(), "segment {} without PROGRAM-DATE-TIME", s.msn);
            if !s.parts.is_empty() {
                let sum: f64 = s.parts.iter().map(|x| x.duration).sum();
                assert!((sum - s.duration).abs() < 0.05, "parts sum {sum} vs EXTINF {}: {text}", s.duration);
            }
        }
        // Part URIs name their segment and index, in order.
        for (i, part) in s.parts.iter().enumerate() {
            assert!(part.uri.ends_with(&format!("-{i}.m4s")), "part {i} of segment {}: {}", s.msn, part.uri);
        }
    }
    let dates: Vec<&String> = p.segments.iter().filter_map(|s| s.pdt.as_ref()).collect();
    assert!(dates.windows(2).all(|w| w[0] < w[1]), "PROGRAM-DATE-TIME increases: {text}");
    p
}

/// (last msn, last part) of a playlist.
fn last_part(p: &Playlist) -> (u64, usize) {
    if p.current.parts.is_empty() {
        let s = p.segments.last().expect("a segment");
        (s.msn, s.parts.len().saturating_sub(1))
    } else {
        (p.current.msn, p.current.parts.len() - 1)
    }
}

fn probe(bytes: &[u8]) -> Value {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-show_entries", "stream=codec_name,width,height,nb_read_frames", "-count_frames"])
        .args(["-of", "json"])
        .arg(file.path())
        .output()
        .expect("ffprobe");
    assert!(out.status.success(), "ffprobe: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("ffprobe json")
}

fn frames(v: &Value, codec: &str) -> u64 {
    v["streams"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["codec_name"] == codec)
        .and_then(|s| s["nb_read_frames"].as_str()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn ll_hls_parts_playlists_blocking_reload_and_delta_updates() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set(
        "video/streamoutputvariants",
        json!([
            {"name": "360p", "scaledWidth": 640, "scaledHeight": 360, "videoBitrate": 600, "framerate": 30, "cpuUsageLevel": 0},
            {"name": "180p", "scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 200, "framerate": 30, "cpuUsageLevel": 0}
        ]),
    );
    server.set("video/streamlatencylevel", json!(0));
    let mut ff = publish(&server, KEY, "640x360", 40);
    let get = |path: &str| server.get(path);
    let text = |path: &str| get(path).text().unwrap_or_default();

    let started = Instant::now();
    let master = server
        .wait_for(Duration::from_secs(15), || {
            let r = get("/hls/stream.m3u8");
            let t = r.text().ok()?;
            t.contains("1/stream.m3u8").then_some(t)
        })
        .unwrap_or_else(|| panic!("no master playlist; log:\n{}", server.log_text()));
    eprintln!("publish to playable master: {:?}", started.elapsed());
    assert!(master.contains("RESOLUTION=640x360") && master.contains("mp4a.40.2"), "{master}");

    // Nine seconds of segments, so a delta update has something to skip.
    let p = server
        .wait_for(Duration::from_secs(25), || {
            let r = get("/hls/0/stream.m3u8");
            let p = parse(&r.text().ok().filter(|t| t.starts_with("#EXTM3U"))?);
            (p.segments.len() >= 9).then_some(p)
        })
        .unwrap_or_else(|| panic!("fewer than 9 segments; log:\n{}", server.log_text()));
    assert_eq!(p.target, 1, "level 0: one-second segments");
    assert!(p.segments.iter().rev().take(3).all(|s| !s.parts.is_empty()), "parts of the newest segments listed");
    assert!(p.segments.first().is_some_and(|s| s.parts.is_empty()), "old segments without parts");
    let hint = p.hint.clone().expect("a preload hint");
    assert!(p.reports.iter().any(|(uri, _, _)| uri == "../1/stream.m3u8"), "rendition report of variant 1");
    // Segment numbers are consecutive.
    assert!(p.segments.windows(2).all(|w| w[1].msn == w[0].msn + 1));

    // Blocking reload: ask for the part after the newest; it comes within a part or two.
    let (msn, part) = last_part(&p);
    let t0 = Instant::now();
    let r = get(&format!("/hls/0/stream.m3u8?_HLS_msn={msn}&_HLS_part={}", part + 1));
    assert_eq!(r.status().as_u16(), 200);
    let blocked = t0.elapsed();
    // Apple's LL-HLS rules for caches: a blocking reload is cacheable by its whole URL (every answer
    // to it holds the part asked for); a plain playlist reload a second at most; nothing varies.
    assert_eq!(r.headers()["cache-control"], "public, max-age=10", "blocking reload");
    assert!(!r.headers().contains_key("vary"));
    let plain = get("/hls/0/stream.m3u8");
    assert_eq!(plain.headers()["cache-control"], "public, max-age=1", "playlist without directives");
    let delta = get("/hls/0/stream.m3u8?_HLS_skip=YES");
    assert_eq!(delta.headers()["cache-control"], "public, max-age=1", "delta update without _HLS_msn");
    let q = parse(&r.text().unwrap());
    let (msn2, part2) = last_part(&q);
    assert!(
        (msn2, part2) > (msn, part),
        "the held playlist has the next part: {:?} after {:?}",
        (msn2, part2),
        (msn, part)
    );
    assert!(blocked < Duration::from_millis(1500), "held {blocked:?}");
    eprintln!("blocking reload for the next part answered in {blocked:?}");
    // Monotonic across reloads: nothing listed before goes back.
    assert!(q.media_sequence >= p.media_sequence);

    // The preload-hinted part: the request waits until it is written.
    let t0 = Instant::now();
    let r = get(&format!("/hls/0/{hint}"));
    assert_eq!(r.status().as_u16(), 200, "hinted part {hint}");
    assert_eq!(r.headers()["cache-control"], "public, max-age=31536000, immutable", "parts are immutable");
    assert!(r.bytes().unwrap().len() > 100);
    eprintln!("hinted part answered in {:?}", t0.elapsed());

    // Playlist fetches count the viewer; CMCD keys on a part request are playback data (as for TS).
    let viewers = server.get_json("/api/status")["viewerCount"].as_u64().unwrap_or(0);
    assert!(viewers >= 1, "LL playlist fetches count the viewer");
    let cmcd = "CMCD=br%3D600%2Cot%3Dv%2Csid%3D%22ll-session%22%2Cbl%3D900";
    let listed = q.current.parts.first().or_else(|| q.segments.last().and_then(|s| s.parts.last())).expect("a part");
    assert_eq!(get(&format!("/hls/0/{}?{cmcd}", listed.uri)).status().as_u16(), 200);
    let playback = server.admin_json("/api/admin/viewers/playback");
    assert!(!playback.as_array().is_none_or(|a| a.is_empty()), "CMCD from a part request: {playback}");

    // 400s: too far ahead, a part without a segment, not a number.
    let now = parse(&text("/hls/0/stream.m3u8"));
    let ahead = now.current.msn + 3;
    for q in [format!("_HLS_msn={ahead}"), "_HLS_part=1".into(), "_HLS_msn=x".into(), "_HLS_msn=1&_HLS_part=-1".into()]
    {
        let r = get(&format!("/hls/0/stream.m3u8?{q}"));
        assert_eq!(r.status().as_u16(), 400, "{q}");
        let body: Value = r.json().expect("json error");
        assert_eq!(body["success"], false);
    }

    // Delta update: segments older than CAN-SKIP-UNTIL are replaced by EXT-X-SKIP.
    let full = parse(&text("/hls/0/stream.m3u8"));
    let delta = parse(&text("/hls/0/stream.m3u8?_HLS_skip=YES"));
    assert!(delta.skipped > 0, "{delta:?}");
    assert!(delta.segments.len() < full.segments.len());
    let shown: f64 = delta.segments.iter().map(|s| s.duration).sum();
    assert!(shown >= delta.can_skip_until - 1.5, "the delta keeps CAN-SKIP-UNTIL of segments ({shown} s)");
    assert_eq!(delta.media_sequence, full.media_sequence);

    // ffprobe: init + the parts of a segment, and init + the segment, are valid fMP4 with video and audio.
    let init = get(&format!("/hls/0/{}", full.map));
    assert_eq!(init.headers()["cache-control"], "public, max-age=31536000, immutable", "init segments");
    let init = init.bytes().unwrap().to_vec();
    let seg = &full.segments[full.segments.len() - 2];
    let mut joined = init.clone();
    for part in &seg.parts {
        let r = get(&format!("/hls/0/{}", part.uri));
        assert_eq!(r.status().as_u16(), 200, "{}", part.uri);
        joined.extend_from_slice(&r.bytes().unwrap());
    }
    let v = probe(&joined);
    let expected = (seg.duration * 30.0).round() as u64;
    assert!(frames(&v, "h264").abs_diff(expected) <= 1, "video frames of the parts: {v} (expected {expected})");
    assert!(frames(&v, "aac") > 0, "{v}");
    assert_eq!(v["streams"].as_array().unwrap().iter().find(|s| s["codec_name"] == "h264").unwrap()["height"], 360);
    let mut whole = init;
    whole.extend_from_slice(&get(&format!("/hls/0/{}", seg.uri)).bytes().unwrap());
    assert_eq!(whole, joined, "a segment is its parts");
    let v1 = parse(&text("/hls/1/stream.m3u8"));
    assert!(v1.reports.iter().any(|(uri, _, _)| uri == "../0/stream.m3u8"));

    // Timeout: with the broadcaster paused, a request for a part two segments ahead fails after about
    // three target durations (503), and a request for one that exists still answers at once.
    unsafe_kill(ff.id(), 19);
    std::thread::sleep(Duration::from_millis(500));
    let now = parse(&text("/hls/0/stream.m3u8"));
    let t0 = Instant::now();
    let r = get(&format!("/hls/0/stream.m3u8?_HLS_msn={}", now.current.msn + 2));
    let waited = t0.elapsed();
    unsafe_kill(ff.id(), 18);
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()["cache-control"], "no-store", "a timed-out reload is not cached");
    assert!(waited >= Duration::from_millis(2500) && waited < Duration::from_secs(6), "timed out after {waited:?}");
    let (m, _) = last_part(&now);
    let t0 = Instant::now();
    assert_eq!(get(&format!("/hls/0/stream.m3u8?_HLS_msn={m}&_HLS_part=0")).status().as_u16(), 200);
    assert!(t0.elapsed() < Duration::from_millis(500));

    // The thumbnail comes from the fMP4 segments.
    server
        .wait_for(Duration::from_secs(10), || get("/thumbnail.jpg").status().is_success().then_some(()))
        .expect("a thumbnail from the fMP4 segments");

    // The stream ends: the playlist on disk lists the segments after their init segment, with ENDLIST.
    let _ = ff.kill();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
    let ended = server
        .wait_for(Duration::from_secs(20), || {
            let t = text("/hls/0/stream.m3u8");
            t.contains("#EXT-X-ENDLIST").then_some(t)
        })
        .unwrap_or_else(|| panic!("no ENDLIST; log:\n{}", server.log_text()));
    assert!(ended.contains("#EXT-X-MAP:URI=\"init-") && ended.contains(".m4s"), "{ended}");
}

#[test]
fn part_length_is_configurable() {
    let server = Server::start_with_args(&["--streamkey", KEY, "--llhls-part-ms", "200"]);
    server.set(
        "video/streamoutputvariants",
        json!([{"scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 200, "framerate": 30, "cpuUsageLevel": 0}]),
    );
    server.set("video/streamlatencylevel", json!(0));
    let mut ff = publish(&server, KEY, "320x180", 20);
    let p = server
        .wait_for(Duration::from_secs(20), || {
            let r = server.get("/hls/0/stream.m3u8");
            if !r.status().is_success() {
                return None;
            }
            let p = parse(&r.text().ok()?);
            (p.segments.len() >= 2).then_some(p)
        })
        .unwrap_or_else(|| panic!("no LL playlist; log:\n{}", server.log_text()));
    assert!((p.part_target - 0.2).abs() < 1e-9, "PART-TARGET=0.200");
    assert!((p.part_hold_back - 0.6).abs() < 1e-9, "PART-HOLD-BACK=0.600 (three parts)");
    // 30 fps: six frames a part, five parts a one-second segment (the grammar checked each <= 0.2 s).
    let seg = &p.segments[p.segments.len() - 1];
    assert_eq!(seg.parts.len(), 5, "{seg:?}");
    let _ = ff.kill();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
}
