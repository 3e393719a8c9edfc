//! What the worker reports about the media files it wrote (`WorkerEvent::SegmentWritten` and friends).
//!
//! The CMAF packager (low latency) knows each part and segment as it cuts it. libavformat's HLS muxer
//! (classic HLS) has no callback: it rewrites its playlist right after it closes a segment, so the worker
//! watches *its own* playlist (`PlaylistWatch`, polled after each packet it muxes) and reports the newest
//! entry exactly as listed: sequence number, file, duration, program date-time, and the file's size. This
//! is the only place a playlist is read to learn what was written; every consumer gets the report.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::media::SegmentWritten;

/// A segment a media playlist lists.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub msn: u64,
    pub file: String,
    pub duration: f64,
    pub program_date_time: Option<i64>,
}

/// The segments `text` (an HLS media playlist) lists, oldest first.
pub fn listed_segments(text: &str) -> Vec<Listed> {
    let mut sequence = 0u64;
    let mut duration = 0.0;
    let mut pdt = None;
    let mut out: Vec<Listed> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("#EXT-X-MEDIA-SEQUENCE:") {
            sequence = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = line.strip_prefix("#EXTINF:") {
            duration = v.split(',').next().and_then(|d| d.trim().parse().ok()).unwrap_or(0.0);
        } else if let Some(v) = line.strip_prefix("#EXT-X-PROGRAM-DATE-TIME:") {
            pdt = parse_pdt(v.trim());
        } else if !line.is_empty() && !line.starts_with('#') {
            let Some(file) = Path::new(line).file_name().map(|f| f.to_string_lossy().into_owned()) else { continue };
            let msn = sequence + out.len() as u64;
            out.push(Listed { msn, file, duration, program_date_time: pdt.take() });
        }
    }
    out
}

/// The newest segment `text` lists, if any.
pub fn newest_segment(text: &str) -> Option<Listed> {
    listed_segments(text).pop()
}

/// `EXT-X-PROGRAM-DATE-TIME` as ms since the epoch: libav writes the offset as `+0000`, RFC 3339 as
/// `+00:00`; both are taken.
fn parse_pdt(v: &str) -> Option<i64> {
    chrono::DateTime::parse_from_str(v, "%Y-%m-%dT%H:%M:%S%.f%z")
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(v))
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Watches the playlist libav's HLS muxer writes for one variant.
pub struct PlaylistWatch {
    variant: usize,
    playlist: PathBuf,
    mtime: Option<SystemTime>,
    /// The newest segment reported (a continued playlist's last one counts as reported).
    last: Option<u64>,
}

impl PlaylistWatch {
    /// `append`: the playlist continues a previous worker's, whose segments were reported by it.
    pub fn new(variant: usize, playlist: PathBuf, append: bool) -> PlaylistWatch {
        let last = if append {
            std::fs::read_to_string(&playlist).ok().and_then(|t| newest_segment(&t)).map(|l| l.msn)
        } else {
            None
        };
        PlaylistWatch { variant, playlist, mtime: None, last }
    }

    /// The segments the muxer finished since the last call (several when it closed more than one, as
    /// when it flushes at the end), oldest first.
    pub fn poll(&mut self) -> Vec<SegmentWritten> {
        let Ok(mtime) = std::fs::metadata(&self.playlist).and_then(|m| m.modified()) else { return Vec::new() };
        if Some(mtime) == self.mtime {
            return Vec::new();
        }
        self.mtime = Some(mtime);
        let Ok(text) = std::fs::read_to_string(&self.playlist) else { return Vec::new() };
        let dir = self.playlist.parent().unwrap_or(Path::new(".")).to_path_buf();
        let new: Vec<Listed> =
            listed_segments(&text).into_iter().filter(|l| self.last.is_none_or(|last| l.msn > last)).collect();
        if let Some(l) = new.last() {
            self.last = Some(l.msn);
        }
        new.into_iter()
            .map(|l| SegmentWritten {
                variant: self.variant,
                msn: l.msn,
                bytes: std::fs::metadata(dir.join(&l.file)).map(|m| m.len()).unwrap_or(0),
                file: l.file,
                duration: l.duration,
                program_date_time: l.program_date_time,
                // The muxer runs with `independent_segments`: every segment starts on a keyframe.
                independent: true,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAYLIST: &str = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n\
#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-PROGRAM-DATE-TIME:2026-11-24T16:00:00.000+0000\n#EXTINF:2.000000,\n\
stream-abc-7.ts\n#EXT-X-PROGRAM-DATE-TIME:2026-11-24T16:00:02.000+00:00\n#EXTINF:1.966667,\nstream-abc-8.ts\n";

    #[test]
    fn the_newest_listed_segment_with_its_sequence_number_and_time() {
        let l = newest_segment(PLAYLIST).expect("a segment");
        assert_eq!(l.msn, 8);
        assert_eq!(l.file, "stream-abc-8.ts");
        assert!((l.duration - 1.966667).abs() < 1e-9);
        assert_eq!(l.program_date_time, Some(1_795_536_002_000));
        assert_eq!(newest_segment("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:0\n"), None);
        assert_eq!(parse_pdt("2026-11-24T16:00:00.000+0000"), Some(1_795_536_000_000));
    }

    #[test]
    fn a_rewritten_playlist_is_reported_once_per_new_segment() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("stream.m3u8");
        std::fs::write(tmp.path().join("stream-abc-8.ts"), b"12345").unwrap();
        std::fs::write(&path, PLAYLIST).unwrap();
        let mut w = PlaylistWatch::new(3, path.clone(), false);
        let segs = w.poll();
        let got: Vec<(usize, u64, u64, &str)> =
            segs.iter().map(|s| (s.variant, s.msn, s.bytes, s.file.as_str())).collect();
        assert_eq!(got, vec![(3, 7, 0, "stream-abc-7.ts"), (3, 8, 5, "stream-abc-8.ts")], "both, oldest first");
        assert_eq!(w.poll(), vec![], "nothing new");
        // Two more closed at once (the end): both reported.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let more = format!("{PLAYLIST}#EXTINF:2.0,\nstream-abc-9.ts\n#EXTINF:0.5,\nstream-abc-10.ts\n");
        std::fs::write(&path, more).unwrap();
        let msns: Vec<u64> = w.poll().iter().map(|s| s.msn).collect();
        assert_eq!(msns, vec![9, 10]);
        // A continued playlist (a restarted worker) does not report its predecessor's segments again.
        let mut again = PlaylistWatch::new(3, path, true);
        assert_eq!(again.poll(), vec![]);
    }
}
