//! The master playlist `<hls_dir>/stream.m3u8`: one `EXT-X-STREAM-INF` per variant, written once every
//! variant has a segment.
//!
//! An encoded variant says what its encoder was set to. A passthrough (`source`) variant says what the
//! publisher sends, as `Measured` until the master is written: the frame rate from the decode
//! timestamps, snapped to the nearest standard rate (`standard_rate`: timestamps in whole milliseconds,
//! as FLV and the worker's Matroska carry, make 30 fps look like 30.303 over a few frames), and the
//! bandwidth from the bytes received (plus the audio's). Before enough was seen, the input's stated
//! frame rate (snapped) and bitrate (else the variant's configured one) stand in.

use std::path::Path;

/// The frame rates publishers send, to which a measured rate is snapped.
const STANDARD_RATES: [f64; 14] =
    [23.976, 24.0, 25.0, 29.97, 30.0, 48.0, 50.0, 59.94, 60.0, 72.0, 90.0, 100.0, 119.88, 120.0];
/// How far (relative) a measured rate may be from a standard one and be taken as it.
const RATE_TOLERANCE: f64 = 0.015;
/// What a measurement needs before it is believed: frames, and the seconds they span.
const MIN_FRAMES: u64 = 5;
const MIN_SPAN_SECS: f64 = 0.1;

/// `fps` as the nearest standard frame rate when it is within `RATE_TOLERANCE` of one, else as it is.
pub fn standard_rate(fps: f64) -> f64 {
    let nearest =
        STANDARD_RATES.iter().copied().min_by(|a, b| ((fps - a).abs()).total_cmp(&(fps - b).abs())).unwrap_or(fps);
    if fps.is_finite() && (fps - nearest).abs() <= nearest * RATE_TOLERANCE {
        nearest
    } else {
        fps
    }
}

/// A passthrough variant's video as received: decode timestamps (seconds) and bytes.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    first: Option<f64>,
    last: f64,
    frames: u64,
    bytes: u64,
}

impl Measured {
    /// One packet: its decode time in seconds (`None`: untimed, not counted) and its size.
    pub fn add(&mut self, at: Option<f64>, bytes: usize) {
        let Some(t) = at.filter(|t| t.is_finite()) else { return };
        self.last = match self.first {
            None => {
                self.first = Some(t);
                t
            }
            Some(_) => self.last.max(t),
        };
        self.frames += 1;
        self.bytes += bytes as u64;
    }

    /// Seconds between the first and the last frame.
    fn span(&self) -> Option<f64> {
        let span = self.last - self.first?;
        (self.frames >= MIN_FRAMES && span >= MIN_SPAN_SECS).then_some(span)
    }

    /// The frame rate, snapped to a standard one.
    pub fn fps(&self) -> Option<f64> {
        self.span().map(|span| standard_rate((self.frames - 1) as f64 / span))
    }

    /// The video's bits per second (the span covers one frame less than was counted).
    pub fn video_bps(&self) -> Option<u64> {
        let span = self.span()?;
        let duration = span * self.frames as f64 / (self.frames - 1) as f64;
        Some((self.bytes as f64 * 8.0 / duration).round() as u64)
    }
}

/// Write the master playlist atomically (temp file + rename).
pub fn write_master(hls_dir: &Path, entries: &[(u64, u32, u32, String, f64)]) -> std::io::Result<()> {
    let mut s = String::from("#EXTM3U\n#EXT-X-VERSION:3\n");
    for (i, (bandwidth, w, h, codecs, fps)) in entries.iter().enumerate() {
        s.push_str(&format!(
            "#EXT-X-STREAM-INF:BANDWIDTH={bandwidth},RESOLUTION={w}x{h},CODECS=\"{codecs}\",FRAME-RATE={fps:.3}\n{i}/stream.m3u8\n"
        ));
    }
    let tmp = hls_dir.join(".stream.m3u8.tmp");
    std::fs::write(&tmp, s)?;
    std::fs::rename(&tmp, hls_dir.join("stream.m3u8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_snap_to_the_nearest_standard_one_within_the_tolerance() {
        assert_eq!(standard_rate(30.303), 30.0);
        assert_eq!(standard_rate(29.97), 29.97);
        assert_eq!(standard_rate(29.975), 29.97);
        assert_eq!(standard_rate(59.9), 59.94);
        assert_eq!(standard_rate(24.2), 24.0);
        assert_eq!(standard_rate(12.5), 12.5, "far from any standard rate: as measured");
        assert_eq!(standard_rate(37.0), 37.0);
    }

    #[test]
    fn a_second_of_millisecond_timestamps_measures_its_rate_and_bitrate() {
        // 30 fps in whole milliseconds (0, 33, 66, 100, ...), 5000 bytes a frame: 1.2 Mbit/s.
        let mut m = Measured::default();
        assert_eq!(m.fps(), None);
        for i in 0..31u64 {
            m.add(Some((i * 1000 / 30) as f64 / 1000.0), 5000);
        }
        assert_eq!(m.fps(), Some(30.0));
        let bps = m.video_bps().unwrap();
        assert!((1_150_000..=1_250_000).contains(&bps), "{bps}");
        m.add(None, 1_000_000);
        assert_eq!(m.video_bps(), Some(bps), "untimed packets are not counted");
        // 29.97 fps keeps its rate.
        let mut ntsc = Measured::default();
        for i in 0..61u64 {
            ntsc.add(Some(((i as f64 * 1001.0 / 30.0).round()) / 1000.0), 100);
        }
        assert_eq!(ntsc.fps(), Some(29.97));
    }
}
