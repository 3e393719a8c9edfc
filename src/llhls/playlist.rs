//! Rendering of the LL-HLS media playlist of one variant (Apple's LL-HLS, RFC 8216bis): the server
//! control, part info, parts of the newest segments, the preload hint, delta updates (`EXT-X-SKIP`)
//! and rendition reports. Pure functions over the window; `super` holds the state.

use std::fmt::Write;

use super::{Segment, Variant};

/// Segments (counted from the newest) whose parts are listed.
pub const PARTS_LISTED_SEGMENTS: usize = 3;

/// `CAN-SKIP-UNTIL`, in target durations (the spec's minimum is six).
pub const SKIP_TARGETS: f64 = 6.0;

/// `(msn, part)` of the newest part of a variant (`EXT-X-RENDITION-REPORT`'s LAST-MSN and LAST-PART).
pub fn last_part(v: &Variant) -> Option<(u64, u32)> {
    if !v.current.parts.is_empty() {
        return Some((v.current.msn, v.current.parts.len() as u32 - 1));
    }
    v.segments.back().map(|s| (s.msn, s.part_count.saturating_sub(1)))
}

/// `EXT-X-PROGRAM-DATE-TIME` form of a wall-clock time in ms.
pub fn pdt_string(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn fmt_dur(d: f64) -> String {
    format!("{d:.5}")
}

fn write_parts(out: &mut String, seg: &Segment) {
    for p in &seg.parts {
        let _ = write!(out, "#EXT-X-PART:DURATION={},URI=\"{}\"", fmt_dur(p.duration), p.name);
        if p.independent {
            out.push_str(",INDEPENDENT=YES");
        }
        out.push('\n');
    }
}

/// PART-HOLD-BACK in parts: three (0.6 s with the default 200 ms parts), as Apple's rules recommend (they
/// require at least two). Issue 44 shipped five, because hls.js stalled at segment boundaries with three or
/// four. The cause, found after that issue, was the player's: hls.js's back-buffer trimming, which a few
/// parts behind live falls mid-segment, could make it forget the parts of the newest segment it had
/// appended and never load the next segment's first part. The viewer page now trims the back buffer itself
/// at a safe moment (`web/src/lib/backbuffer.ts`); three parts then played five minutes without a stall
/// (`BENCHMARKS.md`).
pub const PART_HOLD_BACK_PARTS: f64 = 3.0;

/// The playlist of `v`; `skip`: a delta update (`_HLS_skip=YES`); `reports`: the other variants'
/// `(index, last msn, last part)`.
pub fn render(v: &Variant, skip: bool, reports: &[(usize, u64, u32)]) -> String {
    let target = v.target_duration();
    let skip_until = SKIP_TARGETS * f64::from(target);
    let mut out = String::with_capacity(4096);
    out.push_str("#EXTM3U\n#EXT-X-VERSION:9\n");
    let _ = writeln!(out, "#EXT-X-TARGETDURATION:{target}");
    let _ = writeln!(
        out,
        "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL={:.1},PART-HOLD-BACK={:.3}",
        skip_until,
        PART_HOLD_BACK_PARTS * v.part_target
    );
    let _ = writeln!(out, "#EXT-X-PART-INF:PART-TARGET={:.3}", v.part_target);
    let first_msn = v.segments.front().map_or(v.current.msn, |s| s.msn);
    let _ = writeln!(out, "#EXT-X-MEDIA-SEQUENCE:{first_msn}");
    if v.discontinuity_sequence > 0 {
        let _ = writeln!(out, "#EXT-X-DISCONTINUITY-SEQUENCE:{}", v.discontinuity_sequence);
    }
    out.push_str("#EXT-X-INDEPENDENT-SEGMENTS\n");
    // Skipped: the oldest segments that end before the skip boundary (and carry no discontinuity, so
    // the delta never hides one).
    let mut skipped = 0;
    if skip {
        let total: f64 = v.segments.iter().map(|s| s.duration).sum::<f64>()
            + v.current.parts.iter().map(|p| p.duration).sum::<f64>();
        let boundary = total - skip_until;
        let mut end = 0.0;
        for s in &v.segments {
            end += s.duration;
            if end > boundary || s.discontinuity {
                break;
            }
            skipped += 1;
        }
    }
    let first_init = v.segments.get(skipped).map_or(&v.current.init, |s| &s.init);
    let _ = writeln!(out, "#EXT-X-MAP:URI=\"{first_init}\"");
    if skipped > 0 {
        let _ = writeln!(out, "#EXT-X-SKIP:SKIPPED-SEGMENTS={skipped}");
    }
    let mut init = first_init.clone();
    let with_parts_from = v.segments.len().saturating_sub(PARTS_LISTED_SEGMENTS);
    for (i, s) in v.segments.iter().enumerate().skip(skipped) {
        if s.discontinuity && i > skipped {
            out.push_str("#EXT-X-DISCONTINUITY\n");
        }
        if s.init != init {
            let _ = writeln!(out, "#EXT-X-MAP:URI=\"{}\"", s.init);
            init = s.init.clone();
        }
        let _ = writeln!(out, "#EXT-X-PROGRAM-DATE-TIME:{}", pdt_string(s.pdt_ms));
        if i >= with_parts_from {
            write_parts(&mut out, s);
        }
        let _ = writeln!(out, "#EXTINF:{},\n{}", fmt_dur(s.duration), s.name);
    }
    if !v.current.parts.is_empty() {
        if v.current.discontinuity && !v.segments.is_empty() {
            out.push_str("#EXT-X-DISCONTINUITY\n");
        }
        if v.current.init != init {
            let _ = writeln!(out, "#EXT-X-MAP:URI=\"{}\"", v.current.init);
        }
        let _ = writeln!(out, "#EXT-X-PROGRAM-DATE-TIME:{}", pdt_string(v.current.pdt_ms));
        write_parts(&mut out, &v.current);
    }
    if let Some(hint) = v.hint_name() {
        let _ = writeln!(out, "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"{hint}\"");
    }
    for (n, msn, part) in reports {
        let _ = writeln!(out, "#EXT-X-RENDITION-REPORT:URI=\"../{n}/stream.m3u8\",LAST-MSN={msn},LAST-PART={part}");
    }
    out
}
