//! The transcode worker: runs in the child process (`castd worker --config <json>`).
//!
//! It reads FLV from stdin with libavformat and decodes the video **once** on the main thread (one
//! decoding thread up to 1080p60). Each software-encoded variant runs in a `stage` thread of its own
//! that scales its picture from the nearest larger picture already scaled for another variant (`scale`
//! for exact 2:1 and 3:2 steps, libswscale bilinear otherwise) and encodes it with the variant's
//! `EncoderRecipe`; passthrough variants copy the input video. The main thread decides per frame which
//! variants take it, muxes what the stages send back, and copies or encodes audio to AAC (decoded
//! once). Each variant goes to libavformat's HLS muxer in `<hls_dir>/N/stream.m3u8`; once every
//! variant has a segment the master playlist `<hls_dir>/stream.m3u8` is written (temp file + rename).
//! Keyframes are forced at segment boundaries computed from the input time, so all variants cut their
//! segments at the same instants.
//! Frame-rate conversion drops frames whose output timestamp does not advance (no duplication).
//! When any variant's encoder is a hardware one, the whole encoded ladder goes through `hw` instead
//! (device, hardware decode or one upload, libavfilter graph from `hwaccel::ladder`); encoder failures
//! come back as `TranscodeError::Encoder`, reported as a `WorkerEvent::EncoderFailed` and exit status 3.
//! Events go to stdout as JSON lines (`WorkerEvent`), logs to stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ff::codec::{self, threading};
use ff::format::context::Output;
use ff::software::scaling;
use ff::{frame, media, picture, Dictionary, Packet, Rational};
use ffmpeg_next as ff;

use hwaccel::{EncoderKind, InputSpec};

use super::cmaf::{Cmaf, CmafSettings};
use super::hw::HwPath;
use super::recipe::{self, EncoderRecipe};
use super::report::PlaylistWatch;
use super::stage::{Encoded, Ladder, Plan, VideoEncode};
use super::{TranscodeError, WorkerConfig, WorkerEvent};
use crate::config::StreamOutputVariant;
use crate::media::SegmentWritten;
use crate::stream::VariantProgress;

/// Writes events to stdout, one JSON line each, flushed at once.
fn emit(event: &WorkerEvent) {
    if let Ok(line) = serde_json::to_string(event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

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
struct StageInfo {
    framerate: u32,
    /// The variant whose picture this one scales from (`None`: the decoded frame).
    source: Option<usize>,
    last_pts: Option<i64>,
}

/// A variant of a hardware ladder: fed by the filter graph's `[out<pos>]`, its encoder opened on the
/// first filtered frame.
struct HwEncode {
    encoder: Option<ff::encoder::Video>,
    recipe: EncoderRecipe,
    pos: usize,
    last_pts: Option<i64>,
    last_segment: Option<i64>,
}

enum VideoPath {
    /// Opened in `Pipeline::open`, moved into its stage thread before the first frame.
    Encode(Box<VideoEncode>),
    Stage(StageInfo),
    Hw(Box<HwEncode>),
    Copy,
}

impl VideoPath {
    /// The open encoder and its recipe, if any.
    fn encoder(&mut self) -> Option<(&mut ff::encoder::Video, &EncoderRecipe)> {
        match self {
            VideoPath::Hw(e) => e.encoder.as_mut().map(|x| (x, &e.recipe)),
            VideoPath::Encode(_) | VideoPath::Stage(_) | VideoPath::Copy => None,
        }
    }
}

/// An encoder's failure as the supervisor sees it (`hardware` asks for the fallback to libx264).
pub(super) fn encoder_error(recipe: &EncoderRecipe, e: ff::Error) -> TranscodeError {
    TranscodeError::Encoder { encoder: recipe.encoder.clone(), hardware: recipe.hardware, message: e.to_string() }
}

enum AudioPath {
    None,
    Copy,
    Encode(ff::encoder::Audio),
}

/// Where a variant's packets go: libavformat's HLS muxer (MPEG-TS segments), or the CMAF packager
/// (LL-HLS parts).
enum Sink {
    Hls(Output),
    Cmaf(Box<Cmaf>),
}

impl Sink {
    fn output(&mut self) -> &mut Output {
        match self {
            Sink::Hls(o) => o,
            Sink::Cmaf(c) => c.octx(),
        }
    }

    fn write_video(&mut self, pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        match self {
            Sink::Hls(o) => write_hls(o, pkt, from_tb, ost),
            Sink::Cmaf(c) => c.write_video(pkt, from_tb, ost),
        }
    }

    fn write_audio(&mut self, pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        match self {
            Sink::Hls(o) => write_hls(o, pkt, from_tb, ost),
            Sink::Cmaf(c) => c.write_audio(pkt, from_tb, ost),
        }
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

struct Variant {
    sink: Sink,
    video: VideoPath,
    audio: AudioPath,
    v_ost: usize,
    a_ost: Option<usize>,
    playlist: PathBuf,
    /// Classic HLS: what libav's muxer wrote (`report`).
    watch: Option<PlaylistWatch>,
    /// Low latency: the init segment was reported.
    init_reported: bool,
    has_segment: bool,
    codecs: Option<String>,
    width: u32,
    height: u32,
    framerate: f64,
    bandwidth: u64,
    encoder_name: String,
    frames: u64,
    last_report_frames: u64,
    media_time: f64,
    last_report_media_time: f64,
}

/// `avc1.PPCCLL` from an SPS NAL (the bytes after the NAL header).
fn avc1(profile: u8, compat: u8, level: u8) -> String {
    format!("avc1.{profile:02x}{compat:02x}{level:02x}")
}

/// Find the SPS in an Annex-B packet and describe it.
fn codec_from_annexb(data: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 3 < data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            let nal = i + 3;
            if data[nal] & 0x1f == 7 && nal + 3 < data.len() {
                return Some(avc1(data[nal + 1], data[nal + 2], data[nal + 3]));
            }
            i = nal;
        } else {
            i += 1;
        }
    }
    None
}

/// `avc1.PPCCLL` from an avcC extradata record (FLV/MP4 style).
fn codec_from_avcc(par: &codec::Parameters) -> Option<String> {
    // SAFETY: extradata/extradata_size describe a buffer owned by the parameters we borrow.
    let extra = unsafe {
        let p = par.as_ptr();
        if (*p).extradata.is_null() || (*p).extradata_size < 4 {
            return None;
        }
        std::slice::from_raw_parts((*p).extradata, (*p).extradata_size as usize)
    };
    if extra[0] == 1 {
        Some(avc1(extra[1], extra[2], extra[3]))
    } else {
        codec_from_annexb(extra)
    }
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

pub(super) fn scaler_flags(name: &str) -> scaling::Flags {
    match name {
        "fast_bilinear" => scaling::Flags::FAST_BILINEAR,
        "bicubic" => scaling::Flags::BICUBIC,
        "lanczos" => scaling::Flags::LANCZOS,
        _ => scaling::Flags::BILINEAR,
    }
}

/// The output frame slot (in 1/`fps`) an input frame at `t` seconds fills: slot n takes frames from a
/// quarter interval before its time up to three quarters after, so with an exact ratio (30 → 15 fps)
/// the frames on the slot times are the ones kept, whatever the millisecond rounding of FLV timestamps,
/// and the last input frame never lands in a slot (and segment) after the input's end.
pub(super) fn output_slot(t: f64, fps: f64) -> i64 {
    (t * fps - 0.25).round() as i64
}

/// The output timestamp (in 1/`fps`) of an input frame at `t`: the run's first frame `t0` on its nearest
/// slot, then `output_slot` of the time since, so frame selection and segment boundaries (both counted
/// from `t0`) agree whatever the input's start offset.
pub(super) fn output_pts(t: f64, t0: f64, fps: f64) -> i64 {
    (t0 * fps).round() as i64 + output_slot(t - t0, fps)
}

/// Decoder threads: 1 up to 1080p60 (frame threads cost CPU time in synchronisation, and the encodes
/// already run on threads of their own, so one decoding thread keeps up with room to spare), 0 (one
/// frame thread per core) for larger inputs.
fn decoder_threads(width: u32, height: u32, fps: f64) -> usize {
    if f64::from(width) * f64::from(height) * fps <= 1920.0 * 1080.0 * 60.0 {
        1
    } else {
        0
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

/// The input video, as each variant's setup sees it.
struct Source<'a> {
    par: &'a codec::Parameters,
    tb: Rational,
    fps: f64,
    width: u32,
    height: u32,
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
}

impl VariantVideo for SoftwareVideo<'_> {
    fn add(&self, octx: &mut Output, v: &StreamOutputVariant, src: &Source) -> Result<VideoOpened, TranscodeError> {
        let rec = recipe::recipe_for(&self.info.name, v, self.segment_seconds)?;
        let (w, h) = target_size(v, src.width, src.height);
        let codec = ff::encoder::find_by_name(&rec.encoder)
            .ok_or_else(|| TranscodeError::EncoderMissing(rec.encoder.clone()))?;
        let pix_fmt: ff::format::Pixel =
            rec.pix_fmt.parse().map_err(|_| TranscodeError::Config(format!("pix_fmt {}", rec.pix_fmt)))?;
        let mut enc = codec::context::Context::new_with_codec(codec).encoder().video()?;
        enc.set_width(w);
        enc.set_height(h);
        enc.set_format(pix_fmt);
        enc.set_time_base(Rational(1, rec.framerate as i32));
        enc.set_frame_rate(Some(Rational(rec.framerate as i32, 1)));
        let mut opts = Dictionary::new();
        for (k, val) in &rec.options {
            opts.set(k, val);
        }
        if self.info.kind == EncoderKind::Software {
            let threads = hwaccel::recipe::x264_threads(w, h, rec.framerate, v.cpu_usage_level);
            opts.set("threads", &threads.to_string());
        }
        let opened = enc.open_as_with(codec, opts)?;
        let mut ost = octx.add_stream(codec)?;
        ost.set_parameters(&opened);
        ost.set_time_base(Rational(1, rec.framerate as i32));
        let (fps, encoder) = (f64::from(rec.framerate), rec.encoder.clone());
        let path = VideoPath::Encode(Box::new(VideoEncode {
            encoder: opened,
            recipe: rec,
            width: w,
            height: h,
            pix_fmt,
            source: None,
        }));
        Ok(VideoOpened { path, width: w, height: h, fps, kbps: u64::from(recipe::encoder_bitrate(v)), encoder })
    }
}

/// A variant of the hardware ladder: output `pos` of the filter graph; its encoder opens on the first
/// filtered frame.
struct HardwareVideo<'a> {
    hw: &'a HwPath,
    pos: usize,
}

impl VariantVideo for HardwareVideo<'_> {
    fn add(&self, octx: &mut Output, v: &StreamOutputVariant, src: &Source) -> Result<VideoOpened, TranscodeError> {
        let rec =
            self.hw.ladder.variants.get(self.pos).cloned().ok_or_else(|| TranscodeError::Config("ladder".into()))?;
        let (tw, th) = target_size(v, src.width, src.height);
        let w = u32::try_from(rec.width).ok().filter(|w| *w > 0).unwrap_or(tw);
        let h = u32::try_from(rec.height).ok().filter(|h| *h > 0).unwrap_or(th);
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

/// Whether a variant encodes its audio to AAC (otherwise it copies the broadcaster's).
fn audio_encoded(v: &StreamOutputVariant) -> bool {
    !v.audio_passthrough && v.audio_bitrate > 0
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
    if !audio_encoded(v) {
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
    enc.set_bit_rate(v.audio_bitrate as usize * 1000);
    enc.set_time_base(Rational(1, dec.rate() as i32));
    let opened = enc.open_as(codec)?;
    let mut ost = octx.add_stream(codec)?;
    ost.set_parameters(&opened);
    ost.set_time_base(Rational(1, dec.rate() as i32));
    Ok((AudioPath::Encode(opened), Some(1), u64::from(v.audio_bitrate)))
}

/// The HLS muxer's options for a variant written to `dir`.
fn hls_options(cfg: &WorkerConfig, dir: &Path) -> Dictionary<'static> {
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
    let seg = dir.join(format!("stream-{}-%d.ts", cfg.segment_id));
    hls.set("hls_segment_filename", &seg.to_string_lossy());
    hls
}

struct Pipeline {
    cfg: WorkerConfig,
    variants: Vec<Variant>,
    /// Software-encoded variants, largest picture first.
    order: Vec<usize>,
    /// Their encoding stages (threads), when there are any.
    ladder: Option<Ladder>,
    v_index: usize,
    v_tb: Rational,
    a_index: Option<usize>,
    a_tb: Rational,
    vdec: Option<ff::decoder::Video>,
    adec: Option<ff::decoder::Audio>,
    /// The hardware ladder, when any encoder is a hardware one.
    hw: Option<HwPath>,
    /// Scratch frame for filtered pictures (hardware ladder).
    filtered: frame::Video,
    master_written: bool,
    warned_audio: bool,
    /// Time of the first decoded frame: segment boundaries count from here, so the first segment
    /// is one segment long (the HLS muxer cuts at `hls_time` after the first packet).
    t0: Option<f64>,
    start: Instant,
    last_report: Instant,
}

impl Pipeline {
    fn open(cfg: WorkerConfig, ictx: &ff::format::context::Input) -> Result<Pipeline, TranscodeError> {
        let ist = ictx.streams().best(media::Type::Video).ok_or(TranscodeError::NoVideo)?;
        let v_index = ist.index();
        let v_tb = ist.time_base();
        let v_par = ist.parameters();
        let fr = ist.avg_frame_rate();
        let src_fps = if fr.denominator() > 0 && fr.numerator() > 0 { f64::from(fr) } else { 30.0 };
        let audio = ictx.streams().best(media::Type::Audio);
        let (a_index, a_tb, a_par) = match &audio {
            Some(s) => (Some(s.index()), s.time_base(), Some(s.parameters())),
            None => (None, Rational(1, 1000), None),
        };

        let any_encode = cfg.variants.iter().any(|v| !v.video_passthrough);
        let infos = (0..cfg.variants.len()).map(|n| cfg.encoder_of(n)).collect::<Result<Vec<_>, _>>()?;
        let hw_ladder =
            cfg.variants.iter().zip(&infos).any(|(v, e)| !v.video_passthrough && e.kind != EncoderKind::Software);
        let mut hw_pos = vec![None; cfg.variants.len()];
        let hw = if hw_ladder {
            let probe = codec::context::Context::from_parameters(v_par.clone())?;
            // SAFETY: plain fields of a context we own (filled from the stream parameters).
            let (pix, w, h) = unsafe {
                let c = probe.as_ptr();
                (ff::format::Pixel::from((*c).pix_fmt), (*c).width.max(0) as u32, (*c).height.max(0) as u32)
            };
            let input = InputSpec {
                codec: ff::decoder::find(v_par.id()).map(|c| c.name().to_string()).unwrap_or_default(),
                pix_fmt: pix.descriptor().map(|d| d.name().to_string()).unwrap_or_default(),
                width: w,
                height: h,
            };
            let (mut encs, mut specs) = (Vec::new(), Vec::new());
            for (n, v) in cfg.variants.iter().enumerate().filter(|(_, v)| !v.video_passthrough) {
                hw_pos[n] = Some(encs.len());
                encs.push(infos[n].clone());
                specs.push(recipe::variant_spec(v, cfg.segment_seconds));
            }
            let ladder = hwaccel::ladder(&encs, &specs, &input);
            tracing::info!(graph = %ladder.filter_graph(), decode = ?ladder.decode, "hardware ladder");
            Some(HwPath::new(ladder)?)
        } else {
            None
        };
        let vdec = match &hw {
            Some(h) => Some(h.open_decoder(v_par.clone())?),
            None if any_encode => {
                let mut ctx = codec::context::Context::from_parameters(v_par.clone())?;
                // SAFETY: plain fields of the parameters we own.
                let (w, h) = unsafe { ((*v_par.as_ptr()).width.max(0) as u32, (*v_par.as_ptr()).height.max(0) as u32) };
                let count = decoder_threads(w, h, src_fps);
                ctx.set_threading(threading::Config { kind: threading::Type::Frame, count, ..Default::default() });
                Some(ctx.decoder().video()?)
            }
            None => None,
        };
        let (sw, sh) = match &vdec {
            Some(d) => (d.width(), d.height()),
            None => {
                // SAFETY: plain fields of the parameters we own.
                unsafe { ((*v_par.as_ptr()).width.max(0) as u32, (*v_par.as_ptr()).height.max(0) as u32) }
            }
        };
        if sw == 0 || sh == 0 {
            return Err(TranscodeError::Other("could not determine the input video size".into()));
        }
        let adec = match (&a_par, cfg.variants.iter().any(audio_encoded)) {
            (Some(p), true) => Some(codec::context::Context::from_parameters(p.clone())?.decoder().audio()?),
            _ => None,
        };

        let mut variants = Vec::with_capacity(cfg.variants.len());
        let mut sizes = Vec::new();
        for (n, v) in cfg.variants.iter().enumerate() {
            let dir = cfg.hls_dir.join(n.to_string());
            std::fs::create_dir_all(&dir)?;
            let playlist = dir.join("stream.m3u8");
            let mut sink = if cfg.low_latency {
                let mut c = Cmaf::new(CmafSettings {
                    variant: n,
                    dir: dir.clone(),
                    id: cfg.segment_id.clone(),
                    part_seconds: cfg.part_seconds(),
                    segment_seconds: cfg.segment_seconds,
                    list_size: cfg.list_size,
                })?;
                c.set_frame_rate(f64::from(v.framerate));
                Sink::Cmaf(Box::new(c))
            } else {
                // ffmpeg-next opens (and truncates) the output URL; the HLS muxer's append_list must
                // still find the previous playlist, so put it back before the header is written.
                let previous = if cfg.append { std::fs::read(&playlist).ok() } else { None };
                let octx = ff::format::output_as(&playlist, "hls")?;
                if let Some(prev) = previous {
                    std::fs::write(&playlist, prev)?;
                }
                Sink::Hls(octx)
            };
            let octx = sink.output();
            let source = Source { par: &v_par, tb: v_tb, fps: src_fps, width: sw, height: sh };
            let setup: Box<dyn VariantVideo + '_> = match (v.video_passthrough, hw_pos[n], &hw) {
                (true, _, _) => Box::new(CopyVideo),
                (false, Some(pos), Some(hw)) => Box::new(HardwareVideo { hw, pos }),
                _ => Box::new(SoftwareVideo { info: &infos[n], segment_seconds: cfg.segment_seconds }),
            };
            let VideoOpened { path: video, width: w, height: h, fps, kbps: v_kbps, encoder: encoder_name } =
                setup.add(octx, v, &source)?;
            let (audio, a_ost, a_kbps) = add_audio(octx, v, a_par.as_ref(), a_tb, adec.as_ref())?;

            match &mut sink {
                // The CMAF packager writes its header on the first keyframe.
                Sink::Cmaf(c) => c.set_frame_rate(fps),
                Sink::Hls(o) => {
                    o.write_header_with(hls_options(&cfg, &dir))?;
                }
            }
            sizes.push((w, h));
            let watch = matches!(sink, Sink::Hls(_)).then(|| PlaylistWatch::new(n, playlist.clone(), cfg.append));
            variants.push(Variant {
                sink,
                video,
                audio,
                v_ost: 0,
                a_ost,
                watch,
                init_reported: false,
                playlist,
                has_segment: false,
                codecs: if v.video_passthrough { codec_from_avcc(&v_par) } else { None },
                width: w,
                height: h,
                framerate: fps,
                bandwidth: (v_kbps + a_kbps) * 1000,
                encoder_name,
                frames: 0,
                last_report_frames: 0,
                media_time: 0.0,
                last_report_media_time: 0.0,
            });
        }
        // Encoded variants largest first; each takes its picture from the smallest larger one.
        let mut order: Vec<usize> =
            (0..variants.len()).filter(|&i| matches!(variants[i].video, VideoPath::Encode(_))).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(u64::from(sizes[i].0) * u64::from(sizes[i].1)));
        for (k, &i) in order.iter().enumerate() {
            let (w, h) = sizes[i];
            let best = order[..k]
                .iter()
                .copied()
                .filter(|&j| sizes[j].0 >= w && sizes[j].1 >= h && (sizes[j].0 < sw || sizes[j].1 < sh))
                .min_by_key(|&j| u64::from(sizes[j].0) * u64::from(sizes[j].1));
            if let (Some(j), VideoPath::Encode(enc)) = (best, &mut variants[i].video) {
                enc.source = Some(j);
            }
        }
        let mut encodes = Vec::new();
        for &i in &order {
            let placeholder = VideoPath::Stage(StageInfo { framerate: 0, source: None, last_pts: None });
            if let VideoPath::Encode(enc) = std::mem::replace(&mut variants[i].video, placeholder) {
                variants[i].video =
                    VideoPath::Stage(StageInfo { framerate: enc.recipe.framerate, source: enc.source, last_pts: None });
                encodes.push((i, *enc));
            }
        }
        let ladder = if encodes.is_empty() { None } else { Some(Ladder::start(encodes)?) };
        emit(&WorkerEvent::Started {
            width: sw,
            height: sh,
            encoders: variants.iter().map(|v| v.encoder_name.clone()).collect(),
        });
        for (n, v) in variants.iter().enumerate() {
            let src = match &v.video {
                VideoPath::Encode(e) => format!("{:?}", e.source),
                VideoPath::Stage(e) => e.source.map_or("decoded frame".into(), |j| format!("variant {j}")),
                VideoPath::Hw(e) => format!("hw out{}", e.pos),
                VideoPath::Copy => "copy".into(),
            };
            tracing::info!(variant = n, width = v.width, height = v.height, encoder = %v.encoder_name, source = %src, "variant ready");
        }
        Ok(Pipeline {
            cfg,
            variants,
            order,
            ladder,
            v_index,
            v_tb,
            a_index,
            a_tb,
            vdec,
            adec,
            hw,
            filtered: frame::Video::empty(),
            master_written: false,
            warned_audio: false,
            t0: None,
            start: Instant::now(),
            last_report: Instant::now(),
        })
    }

    fn on_packet(&mut self, packet: &Packet) -> Result<(), TranscodeError> {
        let idx = packet.stream();
        if idx == self.v_index {
            for n in 0..self.variants.len() {
                if matches!(self.variants[n].video, VideoPath::Copy) {
                    let p = packet.clone();
                    let v = &mut self.variants[n];
                    v.frames += 1;
                    if let Some(pts) = p.pts() {
                        v.media_time = pts as f64 * f64::from(self.v_tb);
                    }
                    let key = p.is_key();
                    v.sink.write_video(p, self.v_tb, v.v_ost)?;
                    self.after_video_write(n, key)?;
                }
            }
            if self.vdec.is_some() {
                if let Some(d) = self.vdec.as_mut() {
                    d.send_packet(packet)?;
                }
                self.drain_video()?;
            }
        } else if Some(idx) == self.a_index {
            for n in 0..self.variants.len() {
                let v = &mut self.variants[n];
                if let (AudioPath::Copy, Some(a_ost)) = (&v.audio, v.a_ost) {
                    v.sink.write_audio(packet.clone(), self.a_tb, a_ost)?;
                }
            }
            if self.adec.is_some() {
                if let Some(d) = self.adec.as_mut() {
                    d.send_packet(packet)?;
                }
                self.drain_audio()?;
            }
        }
        self.report();
        Ok(())
    }

    fn drain_video(&mut self) -> Result<(), TranscodeError> {
        let mut decoded = frame::Video::empty();
        loop {
            let got = match self.vdec.as_mut() {
                Some(d) => d.receive_frame(&mut decoded).is_ok(),
                None => false,
            };
            if !got {
                return Ok(());
            }
            self.on_frame(&mut decoded)?;
        }
    }

    fn on_frame(&mut self, decoded: &mut frame::Video) -> Result<(), TranscodeError> {
        let Some(ts) = decoded.timestamp() else { return Ok(()) };
        let t = ts as f64 * f64::from(self.v_tb);
        let t0 = *self.t0.get_or_insert(t);
        if let Some(limit) = self.cfg.debug_encoder_fault.filter(|l| t - t0 >= *l) {
            let encoder = self.variants.iter().map(|v| v.encoder_name.clone()).find(|e| e != "copy");
            let encoder = encoder.unwrap_or_else(|| recipe::SOFTWARE_ENCODER.into());
            return Err(TranscodeError::Encoder {
                hardware: recipe::is_hardware(&encoder),
                encoder,
                message: format!("simulated encoder fault after {limit} s (--debug-encoder-fault)"),
            });
        }
        if self.hw.is_some() {
            return self.on_frame_hw(decoded, t0);
        }
        let n = self.variants.len();
        let mut plan = Plan { t, t0, wants: vec![false; n], needed: vec![false; n], pts: vec![0; n] };
        for &i in &self.order {
            if let VideoPath::Stage(st) = &mut self.variants[i].video {
                let pts = output_pts(t, t0, f64::from(st.framerate));
                plan.pts[i] = pts;
                plan.wants[i] = st.last_pts.is_none_or(|l| pts > l);
                if plan.wants[i] {
                    st.last_pts = Some(pts);
                    let v = &mut self.variants[i];
                    v.frames += 1;
                    v.media_time = pts as f64 / v.framerate;
                }
            }
        }
        for &i in self.order.iter().rev() {
            if plan.wants[i] || plan.needed[i] {
                plan.needed[i] = true;
                if let VideoPath::Stage(StageInfo { source: Some(j), .. }) = self.variants[i].video {
                    plan.needed[j] = true;
                }
            }
        }
        if let Some(ladder) = &self.ladder {
            if let Err(e) = ladder.send(decoded, plan) {
                // Prefer the stage's own reason (an encoder error) to "it stopped".
                self.collect(false)?;
                return Err(e);
            }
        }
        self.collect(false)
    }

    /// Mux what the stages have encoded so far (`wait`: until they have all stopped).
    fn collect(&mut self, wait: bool) -> Result<(), TranscodeError> {
        loop {
            let Some(ladder) = &self.ladder else { return Ok(()) };
            let next = if wait { ladder.output.recv().ok() } else { ladder.output.try_recv().ok() };
            match next {
                None => return Ok(()),
                Some(Encoded::Failed(e)) => return Err(e),
                Some(Encoded::Packet { variant, packet }) => {
                    let fps = match &self.variants.get(variant).map(|v| &v.video) {
                        Some(VideoPath::Stage(st)) => st.framerate,
                        _ => continue,
                    };
                    self.mux_video(variant, packet, Rational(1, fps as i32))?;
                }
            }
        }
    }

    /// The hardware ladder: one frame into the graph, every variant's filtered frames into its encoder.
    fn on_frame_hw(&mut self, decoded: &frame::Video, t0: f64) -> Result<(), TranscodeError> {
        let Some(hw) = self.hw.as_mut() else { return Ok(()) };
        hw.push(decoded, self.v_tb)?;
        for i in 0..self.variants.len() {
            loop {
                let Some(hw) = self.hw.as_mut() else { return Ok(()) };
                let v = &mut self.variants[i];
                let VideoPath::Hw(enc) = &mut v.video else { break };
                if !hw.pull(enc.pos, &mut self.filtered)? {
                    break;
                }
                if enc.encoder.is_none() {
                    enc.encoder = Some(hw.open_encoder(enc.pos, &enc.recipe)?);
                }
                let Some(ts) = self.filtered.pts() else { continue };
                let t = ts as f64 * f64::from(self.v_tb);
                let fps = f64::from(enc.recipe.framerate);
                let pts = output_pts(t, t0, fps);
                if enc.last_pts.is_some_and(|l| pts <= l) {
                    continue;
                }
                let gop = i64::from(enc.recipe.gop.max(1));
                let segment = output_slot(t - t0, fps).div_euclid(gop);
                let key = enc.last_segment != Some(segment);
                enc.last_segment = Some(segment);
                enc.last_pts = Some(pts);
                self.filtered.set_pts(Some(pts));
                self.filtered.set_kind(if key { picture::Type::I } else { picture::Type::None });
                if let Some(encoder) = enc.encoder.as_mut() {
                    encoder.send_frame(&self.filtered).map_err(|e| encoder_error(&enc.recipe, e))?;
                }
                v.frames += 1;
                v.media_time = pts as f64 / fps;
                self.drain_encoder(i)?;
            }
        }
        Ok(())
    }

    fn drain_encoder(&mut self, i: usize) -> Result<(), TranscodeError> {
        loop {
            let mut pkt = Packet::empty();
            let v = &mut self.variants[i];
            let Some((encoder, rec)) = v.video.encoder() else { return Ok(()) };
            match encoder.receive_packet(&mut pkt) {
                Ok(()) => {}
                Err(ff::Error::Eof) | Err(ff::Error::Other { errno: ff::util::error::EAGAIN }) => return Ok(()),
                Err(e) => return Err(encoder_error(rec, e)),
            }
            let enc_tb = Rational(1, rec.framerate as i32);
            self.mux_video(i, pkt, enc_tb)?;
        }
    }

    /// Write an encoded video packet (time base `enc_tb`) to variant `i`'s muxer.
    fn mux_video(&mut self, i: usize, pkt: Packet, enc_tb: Rational) -> Result<(), TranscodeError> {
        let v = &mut self.variants[i];
        if v.codecs.is_none() && pkt.is_key() {
            v.codecs = pkt.data().and_then(codec_from_annexb);
        }
        let key = pkt.is_key();
        v.sink.write_video(pkt, enc_tb, v.v_ost)?;
        self.after_video_write(i, key)
    }

    fn drain_audio(&mut self) -> Result<(), TranscodeError> {
        let mut decoded = frame::Audio::empty();
        loop {
            let got = match self.adec.as_mut() {
                Some(d) => d.receive_frame(&mut decoded).is_ok(),
                None => false,
            };
            if !got {
                return Ok(());
            }
            let Some(ts) = decoded.timestamp() else { continue };
            for i in 0..self.variants.len() {
                let v = &mut self.variants[i];
                let (AudioPath::Encode(enc), Some(a_ost)) = (&mut v.audio, v.a_ost) else { continue };
                if decoded.format() != enc.format()
                    || (enc.frame_size() > 0 && decoded.samples() != enc.frame_size() as usize)
                {
                    if !self.warned_audio {
                        tracing::warn!(
                            "audio frames ({} samples, {:?}) do not fit the AAC encoder; variant {i} goes without audio",
                            decoded.samples(),
                            decoded.format()
                        );
                        self.warned_audio = true;
                    }
                    continue;
                }
                let rate = enc.rate() as i32;
                let pts = (ts as f64 * f64::from(self.a_tb) * f64::from(rate)).round() as i64;
                decoded.set_pts(Some(pts));
                enc.send_frame(&decoded)?;
                let mut pkt = Packet::empty();
                while enc.receive_packet(&mut pkt).is_ok() {
                    v.sink.write_audio(std::mem::replace(&mut pkt, Packet::empty()), Rational(1, rate), a_ost)?;
                }
            }
        }
    }

    /// After a video packet: notice new segments (the playlist is rewritten) and write the master
    /// playlist once every variant has one.
    fn after_video_write(&mut self, i: usize, key: bool) -> Result<(), TranscodeError> {
        if self.master_written && !key && matches!(self.variants[i].sink, Sink::Hls(_)) {
            return Ok(());
        }
        let v = &mut self.variants[i];
        if let Sink::Cmaf(c) = &mut v.sink {
            for r in c.reports.drain(..) {
                if !v.init_reported {
                    emit(&WorkerEvent::InitWritten { variant: i, file: r.init.clone() });
                    v.init_reported = true;
                }
                let segment = r.segment.as_ref().map(|file| SegmentWritten {
                    variant: i,
                    msn: r.msn,
                    file: file.clone(),
                    duration: r.segment_duration,
                    program_date_time: Some(r.pdt_ms),
                    bytes: std::fs::metadata(v.playlist.with_file_name(file)).map(|m| m.len()).unwrap_or(0),
                    independent: true,
                });
                emit(&WorkerEvent::PartWritten(r));
                if let Some(seg) = segment {
                    emit(&WorkerEvent::SegmentWritten(seg));
                    // The plain playlist on disk (thumbnails, players once the stream has ended).
                    emit(&WorkerEvent::PlaylistWritten { variant: i });
                }
            }
            v.has_segment = c.has_part;
        } else if let Some(watch) = v.watch.as_mut() {
            let written = watch.poll();
            if !written.is_empty() {
                v.has_segment = true;
                for seg in written {
                    emit(&WorkerEvent::SegmentWritten(seg));
                }
                emit(&WorkerEvent::PlaylistWritten { variant: i });
            }
        }
        if !self.master_written && self.variants.iter().all(|v| v.has_segment) {
            let entries: Vec<_> = self
                .variants
                .iter()
                .map(|v| {
                    let video = v.codecs.clone().filter(|c| !c.is_empty()).unwrap_or_else(|| "avc1.64001f".into());
                    let codecs = match v.audio {
                        AudioPath::None => video,
                        _ => format!("{video},mp4a.40.2"),
                    };
                    (v.bandwidth, v.width, v.height, codecs, v.framerate)
                })
                .collect();
            write_master(&self.cfg.hls_dir, &entries)?;
            self.master_written = true;
            emit(&WorkerEvent::Ready);
        }
        Ok(())
    }

    fn report(&mut self) {
        let dt = self.last_report.elapsed().as_secs_f64();
        if dt < 1.0 {
            return;
        }
        self.last_report = Instant::now();
        let variants = self
            .variants
            .iter_mut()
            .enumerate()
            .map(|(n, v)| {
                let p = VariantProgress {
                    variant: n,
                    encoder: v.encoder_name.clone(),
                    fps: (v.frames - v.last_report_frames) as f64 / dt,
                    speed: ((v.media_time - v.last_report_media_time) / dt).max(0.0),
                    frames: v.frames,
                };
                v.last_report_frames = v.frames;
                v.last_report_media_time = v.media_time;
                p
            })
            .collect();
        emit(&WorkerEvent::Progress { variants });
    }

    fn finish(&mut self) -> Result<(), TranscodeError> {
        if let Some(d) = self.vdec.as_mut() {
            let _ = d.send_eof();
        }
        self.drain_video()?;
        if let Some(ladder) = self.ladder.as_mut() {
            ladder.close();
        }
        self.collect(true)?;
        if let Some(ladder) = self.ladder.as_mut() {
            ladder.join();
        }
        if let Some(d) = self.adec.as_mut() {
            let _ = d.send_eof();
        }
        self.drain_audio()?;
        for i in 0..self.variants.len() {
            if let Some((encoder, _)) = self.variants[i].video.encoder() {
                let _ = encoder.send_eof();
                self.drain_encoder(i)?;
            }
            let v = &mut self.variants[i];
            if let (AudioPath::Encode(enc), Some(a_ost)) = (&mut v.audio, v.a_ost) {
                let _ = enc.send_eof();
                let rate = enc.rate() as i32;
                let mut pkt = Packet::empty();
                while enc.receive_packet(&mut pkt).is_ok() {
                    v.sink.write_audio(std::mem::replace(&mut pkt, Packet::empty()), Rational(1, rate), a_ost)?;
                }
            }
            match &mut v.sink {
                Sink::Hls(o) => o.write_trailer()?,
                Sink::Cmaf(c) => c.finish()?,
            }
            self.after_video_write(i, true)?;
        }
        let total = self.start.elapsed().as_secs_f64();
        tracing::info!(seconds = total, "input ended; playlists finalised");
        Ok(())
    }
}

/// Run the worker until stdin ends. Returns an error (and the process exits non-zero) on failure.
pub fn run(cfg: WorkerConfig) -> Result<(), TranscodeError> {
    if cfg.variants.is_empty() {
        return Err(TranscodeError::Config("no variants".into()));
    }
    ff::init()?;
    ff::util::log::set_level(ff::util::log::Level::Error);
    std::fs::create_dir_all(&cfg.hls_dir)?;
    let mut opts = Dictionary::new();
    opts.set("analyzeduration", "500000");
    opts.set("probesize", "1000000");
    opts.set("fflags", "+genpts");
    let mut ictx = ff::format::input_with_dictionary("pipe:0", opts)?;
    let mut pipeline = Pipeline::open(cfg, &ictx)?;
    let mut errors = 0u32;
    loop {
        // A fresh packet per read: av_read_frame overwrites the packet it is given without releasing
        // the buffer it held, so reusing one leaked every input packet (about the input's bitrate).
        let mut packet = Packet::empty();
        match packet.read(&mut ictx) {
            Ok(()) => {
                errors = 0;
                pipeline.on_packet(&packet)?;
            }
            Err(ff::Error::Eof) => break,
            Err(e) => {
                errors += 1;
                if errors > 100 {
                    return Err(e.into());
                }
            }
        }
    }
    pipeline.finish()?;
    emit(&WorkerEvent::Finished);
    Ok(())
}

/// Entry point of `castd worker`: parse the config, run, report a failure as an event.
pub fn main(config_json: &str) -> i32 {
    let cfg: WorkerConfig = match serde_json::from_str(config_json) {
        Ok(c) => c,
        Err(e) => {
            emit(&WorkerEvent::Error { message: format!("invalid worker config: {e}") });
            return 2;
        }
    };
    match run(cfg) {
        Ok(()) => 0,
        Err(TranscodeError::Encoder { encoder, hardware, message }) => {
            tracing::error!("transcode worker: encoder {encoder} failed: {message}");
            emit(&WorkerEvent::EncoderFailed { encoder, hardware, message });
            3
        }
        Err(e) => {
            tracing::error!("transcode worker failed: {e}");
            emit(&WorkerEvent::Error { message: e.to_string() });
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(w: u32, h: u32) -> StreamOutputVariant {
        StreamOutputVariant { scaled_width: w, scaled_height: h, ..Default::default() }
    }

    #[test]
    fn output_slots_keep_the_frames_on_the_slot_times() {
        // FLV timestamps are whole milliseconds.
        let t = |k: u32| f64::from((f64::from(k) * 1000.0 / 30.0).round() as u32) / 1000.0;
        let same: Vec<i64> = (0..90).map(|k| output_slot(t(k), 30.0)).collect();
        assert_eq!(same, (0..90).collect::<Vec<i64>>(), "30 → 30 keeps every frame in its own slot");
        let mut last = None;
        let mut kept = Vec::new();
        for k in 0..90 {
            let s = output_slot(t(k), 15.0);
            if last.is_none_or(|l| s > l) {
                kept.push(k);
                last = Some(s);
            }
        }
        assert_eq!(kept, (0..90).step_by(2).collect::<Vec<u32>>(), "30 → 15 keeps the even frames");
        assert_eq!(output_slot(t(89), 15.0), 44, "the last frame stays in the last slot");
        // An input starting at 21 ms keeps the same frames, and slot 0 is the first frame's.
        let t0 = 0.021;
        let kept: Vec<i64> = (0..6).map(|k| output_pts(t0 + t(k), t0, 15.0)).collect();
        assert_eq!(kept, [0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn one_decoder_thread_up_to_1080p60() {
        assert_eq!(decoder_threads(1920, 1080, 30.0), 1);
        assert_eq!(decoder_threads(1920, 1080, 60.0), 1);
        assert_eq!(decoder_threads(2560, 1440, 60.0), 0);
        assert_eq!(decoder_threads(3840, 2160, 30.0), 0);
    }

    #[test]
    fn sizes_keep_aspect_and_stay_even() {
        assert_eq!(target_size(&v(0, 0), 1920, 1080), (1920, 1080));
        assert_eq!(target_size(&v(1280, 0), 1920, 1080), (1280, 720));
        assert_eq!(target_size(&v(0, 360), 1920, 1080), (640, 360));
        assert_eq!(target_size(&v(0, 480), 1920, 1080), (854, 480));
        assert_eq!(target_size(&v(640, 360), 1280, 720), (640, 360));
    }

    #[test]
    fn codec_strings() {
        let sps = [0u8, 0, 0, 1, 0x67, 0x64, 0x00, 0x1f, 0xac];
        assert_eq!(codec_from_annexb(&sps).as_deref(), Some("avc1.64001f"));
        assert_eq!(codec_from_annexb(&[0, 0, 1, 0x65, 1, 2]), None);
    }
}
