//! Replay and clip playlists, built from the recorded segment rows: the master playlist (the live
//! master's variant lines, pointed at `/replay|clip/{id}/{variant}`), and media playlists (EVENT while
//! the broadcast is live, VOD with `#EXT-X-ENDLIST` once it ended; clips are always VOD and list the
//! segments overlapping their window in media time).

use chrono::{TimeZone, Utc};

use super::db::SegmentRow;

/// The master playlist for `variants` (recorded variant numbers). `stream_inf` is the live master
/// playlist's `EXT-X-STREAM-INF` lines (one per variant, in variant order); a variant without one
/// gets a plain line (passthrough variants have no configured bitrate; the live master knows it).
pub fn master(stream_inf: &str, variants: &[i64], uri: impl Fn(i64) -> String) -> String {
    let lines: Vec<&str> = stream_inf.lines().filter(|l| l.starts_with("#EXT-X-STREAM-INF:")).collect();
    let mut s = String::from("#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-INDEPENDENT-SEGMENTS\n");
    for v in variants {
        let inf = usize::try_from(*v)
            .ok()
            .and_then(|i| lines.get(i))
            .copied()
            .unwrap_or("#EXT-X-STREAM-INF:BANDWIDTH=1000000");
        s.push_str(inf);
        s.push('\n');
        s.push_str(&uri(*v));
        s.push('\n');
    }
    s
}

/// A media playlist of `segments`; `finished` gives VOD + ENDLIST, else EVENT. `uri` names a file
/// (segment or init segment).
pub fn media(segments: &[SegmentRow], finished: bool, uri: impl Fn(&str) -> String) -> String {
    let target = segments.iter().map(|s| s.duration.ceil() as u64).max().unwrap_or(1).max(1);
    let mut s = format!(
        "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:{target}\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:{}\n#EXT-X-INDEPENDENT-SEGMENTS\n",
        if finished { "VOD\n#EXT-X-ALLOW-CACHE:YES" } else { "EVENT" }
    );
    let mut init: Option<&str> = None;
    for seg in segments {
        if seg.init.as_deref() != init {
            if let Some(i) = seg.init.as_deref() {
                if init.is_some() {
                    s.push_str("#EXT-X-DISCONTINUITY\n");
                }
                s.push_str(&format!("#EXT-X-MAP:URI=\"{}\"\n", uri(i)));
            }
            init = seg.init.as_deref();
        }
        if let Some(t) = seg.pdt_ms.and_then(|ms| Utc.timestamp_millis_opt(ms).single()) {
            s.push_str(&format!(
                "#EXT-X-PROGRAM-DATE-TIME:{}\n",
                t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ));
        }
        s.push_str(&format!("#EXTINF:{:.3},\n{}\n", seg.duration, uri(&seg.file)));
    }
    if finished {
        s.push_str("#EXT-X-ENDLIST\n");
    }
    s
}

/// The segments overlapping `[start, end)` in media time.
pub fn window(segments: &[SegmentRow], start: f64, end: f64) -> Vec<SegmentRow> {
    segments.iter().filter(|s| s.media_offset < end && s.media_offset + s.duration > start).cloned().collect()
}

/// The variant with the highest `BANDWIDTH` among `variants` (the live master's lines), else the first.
pub fn best_variant(master: &str, variants: &[i64]) -> Option<i64> {
    let bw: Vec<u64> = master
        .lines()
        .filter(|l| l.starts_with("#EXT-X-STREAM-INF:"))
        .map(|l| {
            l.split(&[':', ','][..])
                .find_map(|kv| kv.strip_prefix("BANDWIDTH="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    variants
        .iter()
        .copied()
        .max_by_key(|v| (usize::try_from(*v).ok().and_then(|i| bw.get(i)).copied().unwrap_or(0), -v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(seq: i64, init: Option<&str>) -> SegmentRow {
        SegmentRow {
            variant: 0,
            seq,
            file: format!("s{seq}.ts"),
            init: init.map(str::to_string),
            duration: 2.0,
            media_offset: 2.0 * seq as f64,
            bytes: 10,
            pdt_ms: Some(1_700_000_000_000 + seq * 2000),
        }
    }

    #[test]
    fn event_while_live_vod_with_endlist_when_finished() {
        let segs: Vec<_> = (0..3).map(|i| seg(i, None)).collect();
        let live = media(&segs, false, |f| format!("/replay/x/0/{f}"));
        assert!(live.contains("#EXT-X-PLAYLIST-TYPE:EVENT") && !live.contains("ENDLIST"));
        assert!(live.contains("#EXTINF:2.000,\n/replay/x/0/s2.ts\n"));
        assert!(live.contains("#EXT-X-PROGRAM-DATE-TIME:2023-11-14T22:13:20.000Z"));
        let done = media(&segs, true, |f| f.to_string());
        assert!(done.contains("#EXT-X-PLAYLIST-TYPE:VOD") && done.ends_with("#EXT-X-ENDLIST\n"));
    }

    #[test]
    fn init_segments_are_mapped_and_a_new_one_is_a_discontinuity() {
        let segs = vec![seg(0, Some("init-a.mp4")), seg(1, Some("init-a.mp4")), seg(2, Some("init-b.mp4"))];
        let p = media(&segs, true, |f| f.to_string());
        assert_eq!(p.matches("#EXT-X-MAP").count(), 2);
        assert_eq!(p.matches("#EXT-X-DISCONTINUITY").count(), 1);
    }

    #[test]
    fn master_uses_the_live_lines_and_a_fallback() {
        let inf = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=5,RESOLUTION=1x1\n0/stream.m3u8\n";
        let m = master(inf, &[0, 1], |v| format!("/replay/x/{v}"));
        assert!(m.contains("#EXT-X-STREAM-INF:BANDWIDTH=5,RESOLUTION=1x1\n/replay/x/0\n"));
        assert!(m.contains("#EXT-X-STREAM-INF:BANDWIDTH=1000000\n/replay/x/1\n"));
    }

    #[test]
    fn a_window_selects_by_overlap() {
        let segs: Vec<_> = (0..10).map(|i| seg(i, None)).collect();
        let w = window(&segs, 3.0, 7.0);
        assert_eq!(w.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn the_best_variant_has_the_highest_bandwidth() {
        let m = "#EXT-X-STREAM-INF:BANDWIDTH=100,RESOLUTION=1x1\n#EXT-X-STREAM-INF:BANDWIDTH=900\n";
        assert_eq!(best_variant(m, &[0, 1]), Some(1));
        assert_eq!(best_variant("", &[0, 1]), Some(0));
    }
}
