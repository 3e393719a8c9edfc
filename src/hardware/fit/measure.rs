//! The measurement itself, run only in a child process (`castd measure --json <spec>`): libav encoders
//! are opened here, so a codec that crashes takes this child down, never the daemon.
//!
//! For each rung asked (`RungSpec`: encoder, the rung's variant at its resolved size, segment length)
//! the child opens the encoder exactly as the transcode worker's software stage does (the same
//! `hwaccel::recipe` options, `yuv420p`, the same `hwaccel::recipe::x264_threads`), feeds it a synthetic
//! moving picture and times it: a textured picture that pans (2 px right, 1 px down per frame) with a
//! little fresh noise every frame, made at the source size (1920×1080, or the rung's size when larger)
//! and scaled to the rung's size with libswscale bilinear (the worker's scaler for other than its exact
//! 2:1 and 3:2 steps, which it does cheaper: so the figure errs high, never low). About one second's
//! worth of frames is encoded (at most `RUNG_WALL` of measuring, at least `MIN_TIMED` frames; the first
//! frame, where the encoder sets itself up, is not timed). Per frame it reports the CPU seconds the
//! scale and encode took in the whole process (every encoder thread: with `tune zerolatency` libx264
//! works only inside the call that is timed; making the picture is not timed) and the wall seconds.
//!
//! The decode cost (`decode`: true) is a 1080p30 H.264 source's: one second of the synthetic picture is
//! encoded in memory with libx264 ultrafast at 6 Mbps (an OBS-like stream), then decoded with one
//! decoding thread, as the worker decodes up to 1080p60, and that decode is timed.
//!
//! Results go to stdout as they are made, one JSON object per line (`MeasureLine`), so a crash keeps
//! what was measured before it. Once `budget_ms` has passed, the rungs left are answered `skipped`.

use std::time::{Duration, Instant};

use ff::codec;
use ff::software::scaling;
use ff::{frame, Dictionary, Packet, Rational};
use ffmpeg_next as ff;
use hwaccel::{EncoderKind, InputSpec, VariantSpec};
use serde::{Deserialize, Serialize};

use crate::config::StreamOutputVariant;

/// At most this long measuring one rung (wall clock), once `MIN_TIMED` frames are timed.
const RUNG_WALL: Duration = Duration::from_millis(1000);
/// At least this many timed frames per rung.
const MIN_TIMED: u32 = 2;
/// The source a 1080p30 H.264 stream is assumed to be, for the decode cost.
pub const DECODE_SOURCE: (u32, u32, u32) = (1920, 1080, 30);
/// The bitrate of the synthetic source (kbps): what OBS sends at 1080p30.
const DECODE_SOURCE_KBPS: u32 = 6000;

/// What the child is asked to measure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MeasureSpec {
    pub rungs: Vec<RungSpec>,
    /// Also measure the decode of a 1080p30 H.264 source.
    pub decode: bool,
    /// After this many milliseconds, the rungs not yet started are skipped (the first is always measured).
    pub budget_ms: u64,
}

/// One rung to measure: `variant` carries its resolved (even) size and frame rate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RungSpec {
    /// The cache key it is answered under.
    pub key: String,
    pub encoder: String,
    pub variant: StreamOutputVariant,
    pub segment_seconds: u32,
}

/// One line of the child's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum MeasureLine {
    /// A rung's cost.
    #[serde(rename_all = "camelCase")]
    Rung { key: String, cpu_per_frame: f64, wall_per_frame: f64, frames: u32 },
    /// The decode cost of the 1080p30 H.264 source.
    #[serde(rename_all = "camelCase")]
    Decode { cpu_per_frame: f64, wall_per_frame: f64, frames: u32 },
    /// Not measured: the time budget was spent.
    Skipped { key: String },
    /// The encoder could not be opened or failed.
    Failed { key: String, message: String },
}

/// The hwaccel view of a variant, as the worker maps it (`StreamOutputVariant::spec`).
pub fn variant_spec(v: &StreamOutputVariant, segment_seconds: u32) -> VariantSpec {
    v.spec(segment_seconds)
}

/// The encoder's recipe for a rung, as the worker's software stage builds it (frames in system memory).
pub fn recipe_of(rung: &RungSpec) -> Result<hwaccel::Recipe, String> {
    let kind = hwaccel::KNOWN_ENCODERS
        .iter()
        .find(|(n, _)| *n == rung.encoder)
        .map(|(_, k)| *k)
        .ok_or_else(|| format!("unknown encoder {}", rung.encoder))?;
    let info = hwaccel::EncoderInfo {
        name: rung.encoder.clone(),
        kind,
        available: true,
        device: String::new(),
        reason: String::new(),
        decode: None,
    };
    Ok(hwaccel::recipe(&info, &variant_spec(&rung.variant, rung.segment_seconds), &InputSpec::default()))
}

/// libx264's `threads` for a rung, as the worker sets it (software encoders only).
pub fn threads_of(rung: &RungSpec, recipe: &hwaccel::Recipe) -> Option<u32> {
    (recipe.kind == EncoderKind::Software).then(|| {
        hwaccel::recipe::x264_threads(
            rung.variant.scaled_width,
            rung.variant.scaled_height,
            recipe.framerate,
            rung.variant.cpu_usage_level,
        )
    })
}

/// CPU seconds of a clock (`CLOCK_PROCESS_CPUTIME_ID`: every thread of this process).
fn cpu_seconds(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own; both clocks exist on Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn process_cpu() -> f64 {
    cpu_seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// A synthetic moving picture: a textured plane larger than the picture, panned one step per frame,
/// with fresh low-level noise on the luma every frame.
struct Picture {
    width: u32,
    height: u32,
    /// Luma texture, `tw` wide; chroma textures half as wide and high.
    luma: Vec<u8>,
    cb: Vec<u8>,
    cr: Vec<u8>,
    tw: usize,
    /// A noise table the frames index into at a moving offset.
    noise: Vec<u8>,
    frames: usize,
}

/// A cheap deterministic hash for texture values.
fn hash(x: u32, y: u32) -> u32 {
    let mut h = x.wrapping_mul(0x9E37_79B1) ^ y.wrapping_mul(0x85EB_CA77);
    h ^= h >> 15;
    h = h.wrapping_mul(0xC2B2_AE3D);
    h ^ (h >> 13)
}

impl Picture {
    /// A picture of `width`×`height` that can move for `frames` frames.
    fn new(width: u32, height: u32, frames: usize) -> Picture {
        let (w, h) = (width as usize, height as usize);
        let (tw, th) = (w + 2 * frames + 2, h + frames + 1);
        let mut luma = vec![0u8; tw * th];
        for y in 0..th {
            for x in 0..tw {
                // A gradient, 48-px tiles of varying brightness with edges, and fixed fine texture.
                let tile = hash((x / 48) as u32, (y / 48) as u32) & 0x7f;
                let edge = if x % 48 < 2 || y % 48 < 2 { 40 } else { 0 };
                let fine = hash(x as u32, y as u32) & 0x1f;
                let v = (x * 3 + y * 2) / 32 % 64 + tile as usize + edge + fine as usize;
                luma[y * tw + x] = v.clamp(16, 235) as u8;
            }
        }
        let (cw, ch) = (tw / 2 + 1, th / 2 + 1);
        let mut cb = vec![0u8; cw * ch];
        let mut cr = vec![0u8; cw * ch];
        for y in 0..ch {
            for x in 0..cw {
                let tile = hash((x / 24) as u32 + 7, (y / 24) as u32) & 0x3f;
                cb[y * cw + x] = (96 + (x * 64 / cw) as u32 + tile / 2) as u8;
                cr[y * cw + x] = (96 + (y * 64 / ch) as u32 + (tile >> 1)) as u8;
            }
        }
        let noise = (0..w + 4096).map(|i| (hash(i as u32, 99) & 3) as u8).collect();
        Picture { width, height, luma, cb, cr, tw, noise, frames }
    }

    /// Frame `t` of the picture, into `f` (yuv420p, the picture's size).
    fn fill(&self, t: usize, f: &mut frame::Video) {
        let t = t.min(self.frames);
        let (w, h) = (self.width as usize, self.height as usize);
        let (ox, oy) = (2 * t, t);
        let stride = f.stride(0);
        let data = f.data_mut(0);
        for y in 0..h {
            let dst = &mut data[y * stride..][..w];
            dst.copy_from_slice(&self.luma[(y + oy) * self.tw + ox..][..w]);
            let n = (y * 131 + t * 977) % 4096;
            // Eight pixels at a time: texture values are at most 235 and noise at most 3, so no byte carries
            // into the next (a debug build spends most of a frame's making here otherwise).
            for (d, e) in dst.chunks_exact_mut(8).zip(self.noise[n..n + w].chunks_exact(8)) {
                let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
                a.copy_from_slice(d);
                b.copy_from_slice(e);
                d.copy_from_slice(&(u64::from_ne_bytes(a) + u64::from_ne_bytes(b)).to_ne_bytes());
            }
        }
        let cw = self.tw / 2 + 1;
        let (w2, h2) = (w.div_ceil(2), h.div_ceil(2));
        for (plane, tex) in [(1usize, &self.cb), (2, &self.cr)] {
            let stride = f.stride(plane);
            let data = f.data_mut(plane);
            for y in 0..h2 {
                let src = &tex[(y + oy / 2) * cw + ox / 2..][..w2];
                data[y * stride..][..w2].copy_from_slice(src);
            }
        }
    }
}

/// Times spent on one rung or the decode.
struct Timing {
    cpu: f64,
    wall: f64,
    frames: u32,
}

impl Timing {
    fn per_frame(&self) -> (f64, f64) {
        let n = f64::from(self.frames.max(1));
        (self.cpu / n, self.wall / n)
    }
}

fn receive_all(enc: &mut ff::encoder::Video, out: &mut Vec<Packet>, keep: bool) -> Result<(), ff::Error> {
    loop {
        let mut packet = Packet::empty();
        match enc.receive_packet(&mut packet) {
            Ok(()) => {
                if keep {
                    out.push(packet);
                }
            }
            Err(ff::Error::Eof) | Err(ff::Error::Other { errno: ff::util::error::EAGAIN }) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Open `recipe`'s encoder for a `w`×`h` yuv420p picture, as the worker's software stage does.
fn open_encoder(recipe: &hwaccel::Recipe, w: u32, h: u32, threads: Option<u32>) -> Result<ff::encoder::Video, String> {
    let codec = ff::encoder::find_by_name(&recipe.encoder)
        .ok_or_else(|| format!("{} is not in this libavcodec", recipe.encoder))?;
    let pix_fmt: ff::format::Pixel =
        recipe.pix_fmt.parse().map_err(|_| format!("pixel format {} is unknown", recipe.pix_fmt))?;
    let mut enc = codec::context::Context::new_with_codec(codec).encoder().video().map_err(|e| e.to_string())?;
    enc.set_width(w);
    enc.set_height(h);
    enc.set_format(pix_fmt);
    enc.set_time_base(Rational(1, recipe.framerate as i32));
    enc.set_frame_rate(Some(Rational(recipe.framerate as i32, 1)));
    let mut opts = Dictionary::new();
    for (k, v) in &recipe.options {
        opts.set(k, v);
    }
    if let Some(threads) = threads {
        opts.set("threads", &threads.to_string());
    }
    enc.open_as_with(codec, opts).map_err(|e| format!("opening {}: {e}", recipe.encoder))
}

/// The source a rung is scaled from: 1080p, or the rung's own size when it is larger.
fn source_size(w: u32, h: u32) -> (u32, u32) {
    let (sw, sh) = (DECODE_SOURCE.0, DECODE_SOURCE.1);
    if u64::from(w) * u64::from(h) > u64::from(sw) * u64::from(sh) {
        (w, h)
    } else {
        (sw, sh)
    }
}

/// Measure one rung (see the module doc).
fn measure_rung(rung: &RungSpec) -> Result<Timing, String> {
    let recipe = recipe_of(rung)?;
    if recipe.hardware || recipe.kind != EncoderKind::Software {
        return Err(format!("{} is a hardware encoder: its cost is on the device, not measured here", rung.encoder));
    }
    let (w, h) = (rung.variant.scaled_width.max(2), rung.variant.scaled_height.max(2));
    let mut enc = open_encoder(&recipe, w, h, threads_of(rung, &recipe))?;
    let fps = recipe.framerate.max(1);
    let target = fps + 1;
    let (sw, sh) = source_size(w, h);
    let picture = Picture::new(sw, sh, target as usize);
    let yuv = ff::format::Pixel::YUV420P;
    let mut src = frame::Video::new(yuv, sw, sh);
    let mut scaler = if (sw, sh) == (w, h) {
        None
    } else {
        Some(scaling::Context::get(yuv, sw, sh, yuv, w, h, scaling::Flags::BILINEAR).map_err(|e| e.to_string())?)
    };
    let mut scaled = frame::Video::new(yuv, w, h);
    let mut sink = Vec::new();
    let mut timing = Timing { cpu: 0.0, wall: 0.0, frames: 0 };
    let started = Instant::now();
    for t in 0..target {
        picture.fill(t as usize, &mut src);
        let (cpu0, wall0) = (process_cpu(), Instant::now());
        let pic = match scaler.as_mut() {
            Some(s) => {
                s.run(&src, &mut scaled).map_err(|e| e.to_string())?;
                &mut scaled
            }
            None => &mut src,
        };
        pic.set_pts(Some(i64::from(t)));
        enc.send_frame(pic).map_err(|e| format!("encoding: {e}"))?;
        receive_all(&mut enc, &mut sink, false).map_err(|e| format!("encoding: {e}"))?;
        let (cpu, wall) = (process_cpu() - cpu0, wall0.elapsed().as_secs_f64());
        // The first frame sets the encoder up: not timed.
        if t > 0 {
            timing.cpu += cpu;
            timing.wall += wall;
            timing.frames += 1;
        }
        if timing.frames >= MIN_TIMED && started.elapsed() >= RUNG_WALL {
            break;
        }
    }
    let _ = enc.send_eof();
    let _ = receive_all(&mut enc, &mut sink, false);
    Ok(timing)
}

/// Measure the decode of a 1080p30 H.264 source (see the module doc).
fn measure_decode() -> Result<Timing, String> {
    let (w, h, fps) = DECODE_SOURCE;
    let recipe = hwaccel::recipe(
        &hwaccel::software_encoders().remove(0),
        &VariantSpec {
            passthrough: false,
            width: w,
            height: h,
            bitrate_kbps: DECODE_SOURCE_KBPS + 192,
            framerate: fps,
            cpu_usage_level: 0,
            segment_seconds: 2,
        },
        &InputSpec::default(),
    );
    let mut enc = open_encoder(&recipe, w, h, Some(0))?;
    let picture = Picture::new(w, h, fps as usize);
    let mut src = frame::Video::new(ff::format::Pixel::YUV420P, w, h);
    let mut packets = Vec::new();
    for t in 0..fps {
        picture.fill(t as usize, &mut src);
        src.set_pts(Some(i64::from(t)));
        enc.send_frame(&src).map_err(|e| format!("encoding the source: {e}"))?;
        receive_all(&mut enc, &mut packets, true).map_err(|e| format!("encoding the source: {e}"))?;
    }
    enc.send_eof().map_err(|e| format!("encoding the source: {e}"))?;
    receive_all(&mut enc, &mut packets, true).map_err(|e| format!("encoding the source: {e}"))?;
    let codec = ff::decoder::find(codec::Id::H264).ok_or("this libavcodec has no H.264 decoder")?;
    let mut ctx = codec::context::Context::new_with_codec(codec);
    ctx.set_threading(codec::threading::Config { kind: codec::threading::Type::Frame, count: 1, ..Default::default() });
    let mut dec = ctx.decoder().video().map_err(|e| format!("opening the H.264 decoder: {e}"))?;
    let mut out = frame::Video::empty();
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    let mut frames = 0u32;
    let mut drain = |dec: &mut ff::decoder::Video, frames: &mut u32| {
        while dec.receive_frame(&mut out).is_ok() {
            *frames += 1;
        }
    };
    for p in &packets {
        dec.send_packet(p).map_err(|e| format!("decoding: {e}"))?;
        drain(&mut dec, &mut frames);
    }
    let _ = dec.send_eof();
    drain(&mut dec, &mut frames);
    if frames == 0 {
        return Err("the H.264 decoder gave no frames".into());
    }
    Ok(Timing { cpu: process_cpu() - cpu0, wall: wall0.elapsed().as_secs_f64(), frames })
}

/// Run a measurement, handing each result to `out` as it is made.
pub fn run(spec: &MeasureSpec, mut out: impl FnMut(MeasureLine)) -> Result<(), String> {
    ff::init().map_err(|e| e.to_string())?;
    ff::util::log::set_level(ff::util::log::Level::Error);
    let started = Instant::now();
    let budget = Duration::from_millis(spec.budget_ms);
    if spec.decode {
        match measure_decode() {
            Ok(t) => {
                let (cpu_per_frame, wall_per_frame) = t.per_frame();
                out(MeasureLine::Decode { cpu_per_frame, wall_per_frame, frames: t.frames });
            }
            Err(message) => out(MeasureLine::Failed { key: "decode".into(), message }),
        }
    }
    for (i, rung) in spec.rungs.iter().enumerate() {
        if i > 0 && started.elapsed() >= budget {
            out(MeasureLine::Skipped { key: rung.key.clone() });
            continue;
        }
        match measure_rung(rung) {
            Ok(t) => {
                let (cpu_per_frame, wall_per_frame) = t.per_frame();
                out(MeasureLine::Rung { key: rung.key.clone(), cpu_per_frame, wall_per_frame, frames: t.frames });
            }
            Err(message) => out(MeasureLine::Failed { key: rung.key.clone(), message }),
        }
    }
    Ok(())
}

/// Entry point of `castd measure --json <spec>`: JSON lines on stdout; exit status 2 for a bad spec.
pub fn main(spec_json: &str) -> i32 {
    use std::io::Write;
    let spec: MeasureSpec = match serde_json::from_str(spec_json) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("castd measure: invalid spec: {e}");
            return 2;
        }
    };
    let stdout = std::io::stdout();
    let result = run(&spec, |line| {
        let mut out = stdout.lock();
        if let Ok(text) = serde_json::to_string(&line) {
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("castd measure: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rung(encoder: &str, w: u32, h: u32, fps: u32, level: u32) -> RungSpec {
        RungSpec {
            key: "k".into(),
            encoder: encoder.into(),
            variant: StreamOutputVariant {
                scaled_width: w,
                scaled_height: h,
                framerate: fps,
                cpu_usage_level: level,
                video_bitrate: 2500,
                ..Default::default()
            },
            segment_seconds: 3,
        }
    }

    #[test]
    fn a_rung_is_encoded_with_the_workers_recipe_and_threads() {
        for (w, h, fps, level) in [(1280, 720, 30, 2), (3840, 2160, 60, 4), (640, 360, 24, 0)] {
            let r = rung("libx264", w, h, fps, level);
            let ours = recipe_of(&r).unwrap();
            let workers = crate::transcode::recipe::recipe_for("libx264", &r.variant, 3).unwrap();
            assert_eq!(ours, workers, "the same recipe as the worker's software stage");
            assert_eq!(
                variant_spec(&r.variant, 3),
                crate::transcode::recipe::variant_spec(&r.variant, 3),
                "the same mapping as the worker's"
            );
            assert_eq!(threads_of(&r, &ours), Some(hwaccel::recipe::x264_threads(w, h, fps, level)));
        }
        assert_eq!(
            threads_of(&rung("libx264", 1280, 720, 30, 2), &recipe_of(&rung("libx264", 1280, 720, 30, 2)).unwrap()),
            Some(1)
        );
        assert_eq!(
            threads_of(&rung("libx264", 3840, 2160, 60, 4), &recipe_of(&rung("libx264", 3840, 2160, 60, 4)).unwrap()),
            Some(0)
        );
        let nv = rung("h264_nvenc", 1280, 720, 30, 2);
        assert_eq!(threads_of(&nv, &recipe_of(&nv).unwrap()), None, "hardware encoders get no x264 threads");
        assert!(recipe_of(&rung("h264_bogus", 2, 2, 1, 0)).is_err());
    }

    #[test]
    fn rungs_larger_than_1080p_are_their_own_source() {
        assert_eq!(source_size(1280, 720), (1920, 1080));
        assert_eq!(source_size(1920, 1080), (1920, 1080));
        assert_eq!(source_size(3840, 2160), (3840, 2160));
    }

    #[test]
    fn the_picture_moves() {
        let p = Picture::new(64, 36, 4);
        let mut a = frame::Video::new(ff::format::Pixel::YUV420P, 64, 36);
        let mut b = frame::Video::new(ff::format::Pixel::YUV420P, 64, 36);
        p.fill(0, &mut a);
        p.fill(1, &mut b);
        assert_ne!(a.data(0)[..64], b.data(0)[..64], "frame 1 differs from frame 0");
        p.fill(9, &mut b); // past the texture's end: clamped, no panic
    }

    #[test]
    fn the_answer_lines_round_trip() {
        let line = MeasureLine::Rung { key: "k".into(), cpu_per_frame: 0.01, wall_per_frame: 0.02, frames: 3 };
        let text = serde_json::to_string(&line).unwrap();
        assert!(text.contains(r#""type":"rung""#) && text.contains("cpuPerFrame"), "{text}");
        assert_eq!(serde_json::from_str::<MeasureLine>(&text).unwrap(), line);
    }
}
