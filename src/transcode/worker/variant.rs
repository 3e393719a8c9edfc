//! Setting up one output variant: its sink, its video (copied, encoded in software on a stage
//! thread, or encoded on the hardware ladder: the `VariantVideo` implementations) and its audio
//! (copied, or encoded to AAC from the shared decoder), and the per-variant state the pipeline keeps.

use std::path::PathBuf;

use ff::codec;
use ff::format::context::Output;
use ff::Rational;
use ffmpeg_next as ff;
use hwaccel::{EncoderInfo, EncoderKind};

use super::codecs::codec_from_avcc;
use super::hw::HwPath;
use super::master::Measured;
use super::report::PlaylistWatch;
use super::sink::Sink;
use super::stage::{open_encoder, VideoEncode};
use crate::config::StreamOutputVariant;
use crate::transcode::capacity;
use crate::transcode::recipe::{self, EncoderRecipe};
use crate::transcode::{TranscodeError, WorkerConfig};

/// Size of a variant: both 0 keeps the source; one 0 keeps the aspect ratio (rounded to even, as
/// ffmpeg's `-2`).
pub fn target_size(v: &StreamOutputVariant, sw: u32, sh: u32) -> (u32, u32) {
    let round_even = |num: u64, den: u64| -> u32 {
        if den == 0 {
            return 2;
        }
        let x = (num as f64 / den as f64 / 2.0).round() as u32 * 2;
        x.max(2)
    };
    match (v.scaled_width, v.scaled_height) {
        (0, 0) => (sw & !1, sh & !1),
        (w, 0) => (w & !1, round_even(sh as u64 * w as u64, sw as u64)),
        (0, h) => (round_even(sw as u64 * h as u64, sh as u64), h & !1),
        (w, h) => ((w & !1).max(2), (h & !1).max(2)),
    }
}

/// A software-encoded variant as the main thread sees it (the encoder itself runs in a `stage`).
pub(super) struct StageInfo {
    pub(super) framerate: u32,
    /// The variant whose picture this one scales from (`None`: the decoded frame, or the graph's output).
    pub(super) source: Option<usize>,
    /// The hardware ladder's filter-graph output that feeds this stage (a decode path), if any.
    pub(super) graph_out: Option<usize>,
    pub(super) last_pts: Option<i64>,
}

/// A variant of a hardware ladder: fed by the filter graph's `[out<pos>]`, its encoder opened on the
/// first filtered frame.
pub(super) struct HwEncode {
    pub(super) encoder: Option<ff::encoder::Video>,
    pub(super) recipe: EncoderRecipe,
    pub(super) pos: usize,
    pub(super) last_pts: Option<i64>,
    pub(super) last_segment: Option<i64>,
}

/// How a variant's video is made, as the main thread dispatches it.
pub(super) enum VideoPath {
    /// Opened in `Pipeline::open`, moved into its stage thread before the first frame.
    Encode(Box<VideoEncode>),
    Stage(StageInfo),
    Hw(Box<HwEncode>),
    Copy,
}

impl VideoPath {
    /// The open encoder and its recipe, if any.
    pub(super) fn encoder(&mut self) -> Option<(&mut ff::encoder::Video, &EncoderRecipe)> {
        match self {
            VideoPath::Hw(e) => e.encoder.as_mut().map(|x| (x, &e.recipe)),
            VideoPath::Encode(_) | VideoPath::Stage(_) | VideoPath::Copy => None,
        }
    }
}

/// How a variant's audio is made: none (the input has none), copied, or encoded to AAC.
pub(super) enum AudioPath {
    None,
    Copy,
    Encode(ff::encoder::Audio),
}

/// One output variant while the worker runs: its sink, how its video and audio are made, what it
/// has reported, and its progress figures.
pub(super) struct Variant {
    pub(super) sink: Sink,
    pub(super) video: VideoPath,
    pub(super) audio: AudioPath,
    pub(super) v_ost: usize,
    pub(super) a_ost: Option<usize>,
    pub(super) playlist: PathBuf,
    /// Classic HLS: what libav's muxer wrote (`report`).
    pub(super) watch: Option<PlaylistWatch>,
    /// Low latency: the init segment was reported.
    pub(super) init_reported: bool,
    pub(super) has_segment: bool,
    pub(super) codecs: Option<String>,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) framerate: f64,
    pub(super) bandwidth: u64,
    /// The audio's share of `bandwidth`, in kbit/s.
    pub(super) audio_kbps: u64,
    /// A passthrough's video as received until the master playlist is written (`master`).
    pub(super) measured: Measured,
    pub(super) encoder_name: String,
    pub(super) frames: u64,
    pub(super) last_report_frames: u64,
    pub(super) media_time: f64,
    pub(super) last_report_media_time: f64,
}

fn bit_rate_of(par: &codec::Parameters) -> u64 {
    // SAFETY: reading a plain field of the parameters we borrow.
    unsafe { (*par.as_ptr()).bit_rate.max(0) as u64 }
}

fn clear_codec_tag(ost: &mut ff::format::stream::StreamMut) {
    // SAFETY: the stream's parameters are owned by the output context; codec_tag 0 lets the muxer pick.
    unsafe {
        (*ost.parameters().as_mut_ptr()).codec_tag = 0;
    }
}

/// The input video, as each variant's setup sees it.
pub(super) struct Source<'a> {
    pub(super) par: &'a codec::Parameters,
    pub(super) tb: Rational,
    pub(super) fps: f64,
    pub(super) width: u32,
    pub(super) height: u32,
}

/// What setting up a variant's video produced.
struct VideoOpened {
    path: VideoPath,
    width: u32,
    height: u32,
    fps: f64,
    kbps: u64,
    encoder: String,
}

/// How one variant's video is made: copied, encoded in software (a stage thread), or encoded on a
/// hardware ladder. `add` puts the variant's video stream into its HLS muxer and opens what it needs.
trait VariantVideo {
    fn add(&self, octx: &mut Output, v: &StreamOutputVariant, src: &Source) -> Result<VideoOpened, TranscodeError>;
}

/// Passthrough: the broadcaster's video, packet for packet.
struct CopyVideo;

impl VariantVideo for CopyVideo {
    fn add(&self, octx: &mut Output, v: &StreamOutputVariant, src: &Source) -> Result<VideoOpened, TranscodeError> {
        let mut ost = octx.add_stream(ff::encoder::find(codec::Id::None))?;
        ost.set_parameters(src.par.clone());
        clear_codec_tag(&mut ost);
        if src.par.id() == codec::Id::HEVC {
            // `hvc1` (parameter sets in the sample entry), which Safari requires; the mp4 muxer's
            // default is `hev1`.
            // SAFETY: as in `clear_codec_tag`.
            unsafe {
                (*ost.parameters().as_mut_ptr()).codec_tag = u32::from_le_bytes(*b"hvc1");
            }
        }
        ost.set_time_base(src.tb);
        Ok(VideoOpened {
            path: VideoPath::Copy,
            width: src.width,
            height: src.height,
            fps: src.fps,
            kbps: (bit_rate_of(src.par) / 1000).max(u64::from(v.video_bitrate)),
            encoder: "copy".to_string(),
        })
    }
}

/// A software encoder (libx264), opened here and moved into its stage thread before the first frame.
struct SoftwareVideo<'a> {
    info: &'a hwaccel::EncoderInfo,
    segment_seconds: u32,
    /// The capacity step x264 rungs start at (`WorkerConfig::ladder_step`).
    ladder_step: u32,
}

impl VariantVideo for SoftwareVideo<'_> {
    fn add(&self, octx: &mut Output, v: &StreamOutputVariant, src: &Source) -> Result<VideoOpened, TranscodeError> {
        let rec = recipe::recipe_for(&self.info.name, v, self.segment_seconds)?;
        let (w, h) = target_size(v, src.width, src.height);
        let x264_level = (self.info.kind == EncoderKind::Software).then_some(v.cpu_usage_level);
        open_stage_encoder(octx, rec, w, h, x264_level, self.ladder_step, v, None)
    }
}

/// Open a software encoder for a stage thread (`VideoPath::Encode`) with `rec` at `w`×`h`, and add its
/// stream to the muxer. `x264_level`: the cpuUsageLevel that sets libx264's threads (None: not libx264);
/// `ladder_step`: the capacity step a restarted worker continues at (x264 presets that much faster);
/// `graph_out`: the hardware ladder's filter-graph output that feeds it (a decode path), else `None`.
#[allow(clippy::too_many_arguments)]
fn open_stage_encoder(
    octx: &mut Output,
    mut rec: EncoderRecipe,
    w: u32,
    h: u32,
    x264_level: Option<u32>,
    ladder_step: u32,
    v: &StreamOutputVariant,
    graph_out: Option<usize>,
) -> Result<VideoOpened, TranscodeError> {
    let codec =
        ff::encoder::find_by_name(&rec.encoder).ok_or_else(|| TranscodeError::EncoderMissing(rec.encoder.clone()))?;
    let pix_fmt: ff::format::Pixel =
        rec.pix_fmt.parse().map_err(|_| TranscodeError::Config(format!("pix_fmt {}", rec.pix_fmt)))?;
    let threads = x264_level.map(|level| hwaccel::recipe::x264_threads(w, h, rec.framerate, level));
    // A restarted worker continues at the capacity step the last one had reached.
    let configured = rec.clone();
    if ladder_step > 0 {
        let preset = rec.option("preset").and_then(capacity::preset_index);
        if let Some(p) = preset.and_then(|c| hwaccel::recipe::X264_PRESETS.get(capacity::preset_at(c, ladder_step))) {
            rec = hwaccel::recipe::stepped_x264_recipe(&configured, p);
        }
    }
    let opened = open_encoder(&rec, w, h, pix_fmt, threads)?;
    let mut ost = octx.add_stream(codec)?;
    ost.set_parameters(&opened);
    ost.set_time_base(Rational(1, rec.framerate as i32));
    let (fps, encoder) = (f64::from(rec.framerate), rec.encoder.clone());
    let path = VideoPath::Encode(Box::new(VideoEncode {
        encoder: opened,
        recipe: rec,
        configured,
        width: w,
        height: h,
        pix_fmt,
        threads,
        source: None,
        graph_out,
    }));
    Ok(VideoOpened { path, width: w, height: h, fps, kbps: u64::from(recipe::encoder_bitrate(v)), encoder })
}

/// A variant of the hardware ladder: output `pos` of the filter graph; its encoder opens on the first
/// filtered frame.
struct HardwareVideo<'a> {
    hw: &'a HwPath,
    pos: usize,
    /// The capacity step its x264 rungs (a decode path) start at (`WorkerConfig::ladder_step`).
    ladder_step: u32,
}

impl VariantVideo for HardwareVideo<'_> {
    fn add(&self, octx: &mut Output, v: &StreamOutputVariant, src: &Source) -> Result<VideoOpened, TranscodeError> {
        let rec =
            self.hw.ladder.variants.get(self.pos).cloned().ok_or_else(|| TranscodeError::Config("ladder".into()))?;
        let (tw, th) = target_size(v, src.width, src.height);
        let w = u32::try_from(rec.width).ok().filter(|w| *w > 0).unwrap_or(tw);
        let h = u32::try_from(rec.height).ok().filter(|h| *h > 0).unwrap_or(th);
        if !rec.hardware && rec.kind == EncoderKind::Software {
            // A decode path (or a software rung beside hardware encoders): the graph scales and downloads the
            // picture, a stage thread encodes it, in parallel with the other rungs.
            return open_stage_encoder(octx, rec, w, h, Some(v.cpu_usage_level), self.ladder_step, v, Some(self.pos));
        }
        let codec = ff::encoder::find_by_name(&rec.encoder)
            .ok_or_else(|| TranscodeError::EncoderMissing(rec.encoder.clone()))?;
        // The muxer (MPEG-TS, Annex B in band) only needs the stream's kind and size now.
        let mut ost = octx.add_stream(codec)?;
        // SAFETY: the stream's parameters are owned by the output context.
        unsafe {
            let p = ost.parameters().as_mut_ptr();
            (*p).codec_type = ff::ffi::AVMediaType::AVMEDIA_TYPE_VIDEO;
            (*p).codec_id = ff::ffi::AVCodecID::AV_CODEC_ID_H264;
            (*p).width = w as i32;
            (*p).height = h as i32;
        }
        ost.set_time_base(Rational(1, rec.framerate as i32));
        let (fps, kbps, encoder) = (f64::from(rec.framerate), u64::from(rec.bitrate_kbps), rec.encoder.clone());
        let path = VideoPath::Hw(Box::new(HwEncode {
            encoder: None,
            recipe: rec,
            pos: self.pos,
            last_pts: None,
            last_segment: None,
        }));
        Ok(VideoOpened { path, width: w, height: h, fps, kbps, encoder })
    }
}

/// The AAC bitrate (kbps) of a variant whose passthrough audio cannot be copied.
const FALLBACK_AUDIO_KBPS: u32 = 128;

/// Whether a variant encodes its audio to AAC (otherwise it copies the broadcaster's). Audio that is
/// not AAC (Opus from WHIP or SRT) is always encoded: HLS players take AAC.
pub(super) fn audio_encoded(v: &StreamOutputVariant, input: Option<&codec::Parameters>) -> bool {
    let copyable = input.is_none_or(|p| p.id() == codec::Id::AAC);
    !copyable || (!v.audio_passthrough && v.audio_bitrate > 0)
}

/// Add the variant's audio stream (copied, or encoded to AAC from the shared decoder); returns the
/// path, the output stream index and the audio bitrate in kbps.
fn add_audio(
    octx: &mut Output,
    v: &StreamOutputVariant,
    par: Option<&codec::Parameters>,
    tb: Rational,
    dec: Option<&ff::decoder::Audio>,
) -> Result<(AudioPath, Option<usize>, u64), TranscodeError> {
    let Some(p) = par else { return Ok((AudioPath::None, None, 0)) };
    if !audio_encoded(v, Some(p)) {
        let mut ost = octx.add_stream(ff::encoder::find(codec::Id::None))?;
        ost.set_parameters(p.clone());
        clear_codec_tag(&mut ost);
        ost.set_time_base(tb);
        return Ok((AudioPath::Copy, Some(1), (bit_rate_of(p) / 1000).max(128)));
    }
    let dec = dec.ok_or_else(|| TranscodeError::Other("no audio decoder".into()))?;
    let codec = ff::encoder::find(codec::Id::AAC).ok_or_else(|| TranscodeError::EncoderMissing("aac".into()))?;
    let mut enc = codec::context::Context::new_with_codec(codec).encoder().audio()?;
    enc.set_rate(dec.rate() as i32);
    let layout = if dec.channel_layout().is_empty() {
        ff::ChannelLayout::default(i32::from(dec.channels()))
    } else {
        dec.channel_layout()
    };
    enc.set_channel_layout(layout);
    enc.set_format(ff::format::Sample::F32(ff::format::sample::Type::Planar));
    let kbps = if v.audio_bitrate > 0 { v.audio_bitrate } else { FALLBACK_AUDIO_KBPS };
    enc.set_bit_rate(kbps as usize * 1000);
    enc.set_time_base(Rational(1, dec.rate() as i32));
    let opened = enc.open_as(codec)?;
    let mut ost = octx.add_stream(codec)?;
    ost.set_parameters(&opened);
    ost.set_time_base(Rational(1, dec.rate() as i32));
    Ok((AudioPath::Encode(opened), Some(1), u64::from(kbps)))
}

/// What every variant's setup shares: the configuration, the input, and what the pipeline opened for
/// it (the audio decoder, the hardware ladder).
pub(super) struct Setup<'a> {
    pub(super) cfg: &'a WorkerConfig,
    /// The input video.
    pub(super) source: Source<'a>,
    pub(super) a_par: Option<&'a codec::Parameters>,
    pub(super) a_tb: Rational,
    pub(super) adec: Option<&'a ff::decoder::Audio>,
    pub(super) hw: Option<&'a HwPath>,
    /// Per variant: its output on the hardware ladder's filter graph, if it is encoded there.
    pub(super) hw_pos: &'a [Option<usize>],
    /// Per variant: its encoder.
    pub(super) infos: &'a [EncoderInfo],
}

impl Variant {
    /// Open variant `n`: its directory and sink, its video and audio streams, the sink's header.
    pub(super) fn open(n: usize, v: &StreamOutputVariant, s: &Setup) -> Result<Variant, TranscodeError> {
        let cfg = s.cfg;
        let dir = cfg.hls_dir.join(n.to_string());
        std::fs::create_dir_all(&dir)?;
        let playlist = dir.join("stream.m3u8");
        // MPEG-TS HLS carries H.264 to every player; a passthrough of HEVC, AV1 or VP9 goes as fMP4.
        let fmp4 =
            v.video_passthrough && matches!(s.source.par.id(), codec::Id::HEVC | codec::Id::AV1 | codec::Id::VP9);
        let mut sink = Sink::open(cfg, n, v, &dir, &playlist, fmp4)?;
        let octx = sink.output();
        let setup: Box<dyn VariantVideo + '_> = match (v.video_passthrough, s.hw_pos[n], s.hw) {
            (true, _, _) => Box::new(CopyVideo),
            (false, Some(pos), Some(hw)) => Box::new(HardwareVideo { hw, pos, ladder_step: cfg.ladder_step }),
            _ => Box::new(SoftwareVideo {
                info: &s.infos[n],
                segment_seconds: cfg.segment_seconds,
                ladder_step: cfg.ladder_step,
            }),
        };
        let VideoOpened { path: video, width: w, height: h, fps, kbps: v_kbps, encoder: encoder_name } =
            setup.add(octx, v, &s.source)?;
        let (audio, a_ost, a_kbps) = add_audio(octx, v, s.a_par, s.a_tb, s.adec)?;
        sink.start(cfg, &dir, fps)?;
        let watch = matches!(sink, Sink::Hls(..)).then(|| PlaylistWatch::new(n, playlist.clone(), cfg.append));
        Ok(Variant {
            sink,
            video,
            audio,
            v_ost: 0,
            a_ost,
            watch,
            init_reported: false,
            playlist,
            has_segment: false,
            codecs: if v.video_passthrough { codec_from_avcc(s.source.par) } else { None },
            width: w,
            height: h,
            framerate: fps,
            bandwidth: (v_kbps + a_kbps) * 1000,
            audio_kbps: a_kbps,
            measured: Measured::default(),
            encoder_name,
            frames: 0,
            last_report_frames: 0,
            media_time: 0.0,
            last_report_media_time: 0.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(w: u32, h: u32) -> StreamOutputVariant {
        StreamOutputVariant { scaled_width: w, scaled_height: h, ..Default::default() }
    }

    #[test]
    fn sizes_keep_aspect_and_stay_even() {
        assert_eq!(target_size(&v(0, 0), 1920, 1080), (1920, 1080));
        assert_eq!(target_size(&v(1280, 0), 1920, 1080), (1280, 720));
        assert_eq!(target_size(&v(0, 360), 1920, 1080), (640, 360));
        assert_eq!(target_size(&v(0, 480), 1920, 1080), (854, 480));
        assert_eq!(target_size(&v(640, 360), 1280, 720), (640, 360));
    }
}
