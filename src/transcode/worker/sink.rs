//! Where a variant's packets go: libavformat's HLS muxer (MPEG-TS segments, `<hls_dir>/N/stream.m3u8`;
//! fMP4 segments with an init segment for a passthrough of HEVC, AV1 or VP9, which MPEG-TS HLS does
//! not carry for browsers) or the CMAF packager (LL-HLS parts); how each is opened, its header
//! written, packets written to it.

use std::path::Path;

use ff::format::context::Output;
use ff::{Dictionary, Packet, Rational};
use ffmpeg_next as ff;

use super::cmaf::{Cmaf, CmafSettings};
use crate::config::StreamOutputVariant;
use crate::transcode::{TranscodeError, WorkerConfig};

/// Where a variant's packets go: libavformat's HLS muxer (MPEG-TS segments), or the CMAF packager
/// (LL-HLS parts).
pub(super) enum Sink {
    /// The HLS muxer; `true`: fMP4 segments instead of MPEG-TS.
    Hls(Output, bool),
    Cmaf(Box<Cmaf>),
}

impl Sink {
    /// Open variant `n`'s sink in `dir` (its media playlist is `playlist`), before any stream is added;
    /// `fmp4`: HLS segments in fragmented MP4 (a passthrough of a codec MPEG-TS HLS does not carry).
    pub(super) fn open(
        cfg: &WorkerConfig,
        n: usize,
        v: &StreamOutputVariant,
        dir: &Path,
        playlist: &Path,
        fmp4: bool,
    ) -> Result<Sink, TranscodeError> {
        if cfg.low_latency {
            let mut c = Cmaf::new(CmafSettings {
                variant: n,
                dir: dir.to_path_buf(),
                id: cfg.segment_id.clone(),
                part_seconds: cfg.part_seconds(),
                segment_seconds: cfg.segment_seconds,
                list_size: cfg.list_size,
            })?;
            c.set_frame_rate(f64::from(v.framerate));
            Ok(Sink::Cmaf(Box::new(c)))
        } else {
            // ffmpeg-next opens (and truncates) the output URL; the HLS muxer's append_list must
            // still find the previous playlist, so put it back before the header is written.
            let previous = if cfg.append { std::fs::read(playlist).ok() } else { None };
            let octx = ff::format::output_as(playlist, "hls")?;
            if let Some(prev) = previous {
                std::fs::write(playlist, prev)?;
            }
            Ok(Sink::Hls(octx, fmp4))
        }
    }

    /// Once the variant's streams are added: the HLS muxer writes its header now; the CMAF packager
    /// learns the video frame rate (it writes its header on the first keyframe).
    pub(super) fn start(&mut self, cfg: &WorkerConfig, dir: &Path, fps: f64) -> Result<(), TranscodeError> {
        match self {
            Sink::Cmaf(c) => c.set_frame_rate(fps),
            Sink::Hls(o, fmp4) => {
                o.write_header_with(hls_options(cfg, dir, *fmp4))?;
            }
        }
        Ok(())
    }

    pub(super) fn output(&mut self) -> &mut Output {
        match self {
            Sink::Hls(o, _) => o,
            Sink::Cmaf(c) => c.octx(),
        }
    }

    pub(super) fn write_video(&mut self, pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        match self {
            Sink::Hls(o, _) => write_hls(o, pkt, from_tb, ost),
            Sink::Cmaf(c) => c.write_video(pkt, from_tb, ost),
        }
    }

    pub(super) fn write_audio(&mut self, pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        match self {
            Sink::Hls(o, _) => write_hls(o, pkt, from_tb, ost),
            Sink::Cmaf(c) => c.write_audio(pkt, from_tb, ost),
        }
    }

    /// The input ended: the HLS muxer's trailer (the playlist gets `EXT-X-ENDLIST`), or the packager's
    /// last part and segment.
    pub(super) fn finish(&mut self) -> Result<(), TranscodeError> {
        match self {
            Sink::Hls(o, _) => o.write_trailer()?,
            Sink::Cmaf(c) => c.finish()?,
        }
        Ok(())
    }
}

fn write_hls(octx: &mut Output, mut pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
    let tb = octx.stream(ost).map(|s| s.time_base()).unwrap_or(from_tb);
    pkt.rescale_ts(from_tb, tb);
    pkt.set_stream(ost);
    pkt.set_position(-1);
    pkt.write_interleaved(octx)?;
    Ok(())
}

/// The HLS muxer's options for a variant written to `dir` (`fmp4`: fMP4 segments).
fn hls_options(cfg: &WorkerConfig, dir: &Path, fmp4: bool) -> Dictionary<'static> {
    let mut hls = Dictionary::new();
    hls.set("hls_time", &cfg.segment_seconds.to_string());
    hls.set("hls_list_size", &cfg.list_size.to_string());
    // No `delete_segments`: the daemon's retention (`media::retention`) deletes segments once they left
    // the window and nobody holds them.
    let mut flags = String::from("program_date_time+independent_segments");
    if cfg.append {
        flags.push_str("+append_list+discont_start");
    }
    hls.set("hls_flags", &flags);
    let ext = if fmp4 { "m4s" } else { "ts" };
    let seg = dir.join(format!("stream-{}-%d.{ext}", cfg.segment_id));
    hls.set("hls_segment_filename", &seg.to_string_lossy());
    if fmp4 {
        hls.set("hls_segment_type", "fmp4");
        // Relative to the playlist; one per worker, so a restarted worker's init does not replace
        // the one the segments already listed need.
        hls.set("hls_fmp4_init_filename", &format!("init-{}.mp4", cfg.segment_id));
    }
    hls
}
