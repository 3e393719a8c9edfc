//! The verdict's arithmetic: which rungs cost what on this box, and whether the ladder fits.
//!
//! **Rungs.** Each variant becomes a [`Rung`]: its size as `media::capacity` counts it before the media
//! arrives (its scaled size; one dimension keeps 16:9; neither is the source's size, counted as
//! 1920×1080), rounded to even as the worker's `target_size` does, its frame rate (Owncast's 24 for 0),
//! and its encoder from `hwaccel::plan_sessions` (passthrough is `copy`; NVENC's session cap may put
//! some rungs on libx264).
//!
//! **Cost.** A software rung costs its measured CPU seconds per frame × its frame rate, in cores
//! (CPU-seconds per wall second). The decode costs the measured 1080p30 H.264 decode per frame ×
//! max(30, the highest encoded frame rate), × the source's pixels over 1080p's when a rung is larger
//! than 1080p (the source is at least as large as its largest rung); nothing when no rung is encoded
//! in software (passthrough decodes nothing; an all-hardware ladder decodes on the device). A rung on a
//! hardware encoder costs no CPU here: its work is on the device, which the probe found working; it is
//! not measured. A software rung that could not be measured (the time budget ran out, or it failed) is
//! estimated from the measured ones per pixel and x264 effort, else from `media::capacity`'s model.
//!
//! **Verdict.** The budget is the box's cores less one for the rest of the server, at least one
//! ([`crate::media::capacity::budget_cores`], as the automatic transcode budget keeps). The ladder fits
//! when the load (rungs + decode) is at most `MARGIN` of the budget — the rest is kept for scaling
//! peaks, audio, muxing and scene changes — and no rung the worker encodes on one thread (libx264
//! `threads` 1, see `hwaccel::recipe::x264_threads`) nor the one-thread decode needs more than `MARGIN`
//! of a core.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::StreamOutputVariant;
use crate::media::capacity::{budget_cores, PIXELS_PER_CORE};

/// The share of the budget (and of one core, for one-thread work) a ladder may use and still fit.
pub const MARGIN: f64 = 0.8;
/// The source size a rung without a size is counted as.
const SOURCE: (u32, u32) = (1920, 1080);
/// The decode is counted at least at this frame rate (the 1080p30 source).
const DECODE_FPS: u32 = 30;
/// libx264's relative effort per cpuUsageLevel 0..=4 (ultrafast … fast), as `x264_threads` weighs them.
const X264_EFFORT: [f64; 5] = [1.0, 2.0, 3.0, 5.0, 8.0];
/// Without any measurement: one core encodes 1080p30 at veryfast this many times over in real time
/// (`media::capacity`'s assumption), and decodes a 1080p30 source this many times over.
const MODEL_VERYFAST_SPEED: f64 = 2.5;
const MODEL_DECODE_SPEED: f64 = 8.0;

/// How a rung's video is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// Passthrough: no encode.
    Copy,
    /// A hardware encoder: on the device.
    Device,
    /// A software encoder (libx264): on the CPU, measured.
    Software,
}

/// One rung of the ladder as the verdict sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rung {
    pub index: usize,
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub framerate: u32,
    pub encoder: String,
    pub made: Made,
    /// The encoder's preset for the rung's cpuUsageLevel (`copy` for passthrough).
    pub preset: String,
    pub level: u32,
    /// The variant with its resolved size and frame rate (what is measured).
    pub variant: StreamOutputVariant,
    /// libx264 `threads` as the worker sets it (software rungs).
    pub threads: Option<u32>,
}

impl Rung {
    /// The rung's cache key: encoder, preset, size and frame rate.
    pub fn key(&self) -> String {
        format!("{}|{}|{}x{}@{}", self.encoder, self.preset, self.width, self.height, self.framerate)
    }

    fn pixels(&self) -> f64 {
        f64::from(self.width) * f64::from(self.height)
    }

    fn effort(&self) -> f64 {
        X264_EFFORT.get(self.level as usize).copied().unwrap_or(X264_EFFORT[1])
    }
}

/// A rung's size before the media arrives (see the module doc), even in both dimensions.
pub fn rung_size(v: &StreamOutputVariant) -> (u32, u32) {
    let even = |x: u64| (x.div_ceil(2) * 2).clamp(2, u64::from(u32::MAX)) as u32;
    let (w, h) = (u64::from(v.scaled_width), u64::from(v.scaled_height));
    let (sw, sh) = (u64::from(SOURCE.0), u64::from(SOURCE.1));
    match (w, h) {
        (0, 0) => SOURCE,
        (w, 0) => (even(w), even((w * sh + sw / 2) / sw)),
        (0, h) => (even((h * sw + sh / 2) / sh), even(h)),
        (w, h) => (even(w), even(h)),
    }
}

/// The preset a rung's cpuUsageLevel means on `encoder`.
pub fn preset(encoder: &str, level: u32) -> String {
    use hwaccel::recipe;
    match encoder {
        "copy" => "copy".into(),
        "h264_nvenc" => recipe::nvenc_preset(level).into(),
        "h264_qsv" => recipe::qsv_preset(level).into(),
        "h264_vaapi" => format!("quality {}", recipe::vaapi_quality(level)),
        _ => recipe::x264_preset(level).into(),
    }
}

/// The ladder's rungs, `encoders[i]` encoding `ladder[i]` (`hwaccel::plan_sessions`' plan).
pub fn rungs(ladder: &[StreamOutputVariant], encoders: &[String]) -> Vec<Rung> {
    ladder
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let (width, height) = rung_size(v);
            let framerate = if v.framerate == 0 { hwaccel::recipe::DEFAULT_FRAMERATE } else { v.framerate };
            let encoder = if v.video_passthrough {
                "copy".to_string()
            } else {
                encoders.get(index).cloned().unwrap_or_else(|| hwaccel::recipe::SOFTWARE_ENCODER.into())
            };
            let made = match encoder.as_str() {
                "copy" => Made::Copy,
                e if hwaccel::KNOWN_ENCODERS.iter().any(|(n, k)| *n == e && *k != hwaccel::EncoderKind::Software) => {
                    Made::Device
                }
                _ => Made::Software,
            };
            let variant = StreamOutputVariant { scaled_width: width, scaled_height: height, framerate, ..v.clone() };
            let threads = (made == Made::Software)
                .then(|| hwaccel::recipe::x264_threads(width, height, framerate, v.cpu_usage_level));
            Rung {
                index,
                name: v.name.clone(),
                width,
                height,
                framerate,
                preset: preset(&encoder, v.cpu_usage_level),
                encoder,
                made,
                level: v.cpu_usage_level,
                variant,
                threads,
            }
        })
        .collect()
}

/// A measured cost per frame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub cpu_per_frame: f64,
    pub wall_per_frame: f64,
    pub frames: u32,
    pub measured_at: DateTime<Utc>,
}

/// One rung in the answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RungFit {
    /// The variant's position in the ladder (0-based).
    pub index: usize,
    pub name: String,
    /// The size counted (the source's, 1920×1080, when the variant keeps it).
    pub width: u32,
    pub height: u32,
    pub framerate: u32,
    /// `copy` for passthrough.
    pub encoder: String,
    pub preset: String,
    /// CPU cores the rung keeps busy in real time (0 for passthrough and hardware encoders).
    pub cpu_cores_needed: f64,
    /// How many times real time the rung encodes when it runs alone (measured rungs only).
    pub speed: Option<f64>,
    /// Whether the figure was measured on this box (false: estimated, passthrough or on a device).
    pub measured: bool,
}

/// `GET|POST /api/admin/video/fit`: whether the ladder fits this box.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LadderFit {
    pub fits: bool,
    /// The box's logical cores.
    pub cores: usize,
    /// The cores the ladder may use: the cores less one for the rest of the server, at least one.
    pub budget_cores: f64,
    /// The cores the ladder keeps busy: its rungs and the decode.
    pub load_cores: f64,
    /// The decode of the source, in cores (included in `loadCores`).
    pub decode_cores: f64,
    /// The encoder the configured video codec selects here.
    pub encoder: String,
    /// Everything came from this box's cache: nothing was measured for this answer.
    pub cached: bool,
    /// When the newest figure used was measured (none when nothing needed measuring).
    pub measured_at: Option<DateTime<Utc>>,
    pub message: String,
    pub variants: Vec<RungFit>,
}

/// What the verdict is computed from.
pub struct Inputs<'a> {
    pub rungs: &'a [Rung],
    /// Per rung: its measured cost, if any.
    pub costs: &'a [Option<Cost>],
    pub decode: Option<Cost>,
    pub cores: usize,
    /// The encoder the video codec selects (`encoder` of the answer).
    pub encoder: String,
    /// The source is decoded on a GPU (a decode path): no decode on the CPU.
    pub gpu_decode: bool,
    pub cached: bool,
    /// Why some figures are estimates (a failed or skipped measurement), if they are.
    pub note: Option<String>,
}

/// CPU seconds per frame of a software rung without a measurement: per pixel and x264 effort from the
/// measured rungs, else `media::capacity`'s model.
fn estimate(rung: &Rung, rungs: &[Rung], costs: &[Option<Cost>]) -> f64 {
    let per_unit: Vec<f64> =
        rungs.iter().zip(costs).filter_map(|(r, c)| c.map(|c| c.cpu_per_frame / (r.pixels() * r.effort()))).collect();
    if per_unit.is_empty() {
        let veryfast_per_pixel = 1.0 / (PIXELS_PER_CORE as f64 * MODEL_VERYFAST_SPEED);
        rung.pixels() * veryfast_per_pixel * rung.effort() / X264_EFFORT[2]
    } else {
        rung.pixels() * rung.effort() * per_unit.iter().sum::<f64>() / per_unit.len() as f64
    }
}

fn one(x: f64) -> String {
    format!("{x:.1}")
}

/// The verdict (see the module doc).
pub fn judge(i: Inputs) -> LadderFit {
    let budget = budget_cores(i.cores) as f64;
    let mut variants = Vec::with_capacity(i.rungs.len());
    let mut load = 0.0;
    let mut one_thread_over: Vec<String> = Vec::new();
    for (n, rung) in i.rungs.iter().enumerate() {
        let cost = i.costs.get(n).copied().flatten();
        let (cores, speed, measured) = match (rung.made, cost) {
            (Made::Copy | Made::Device, _) => (0.0, None, false),
            (Made::Software, Some(c)) => {
                let speed = (c.wall_per_frame > 0.0).then(|| 1.0 / (c.wall_per_frame * f64::from(rung.framerate)));
                (c.cpu_per_frame * f64::from(rung.framerate), speed, true)
            }
            (Made::Software, None) => (estimate(rung, i.rungs, i.costs) * f64::from(rung.framerate), None, false),
        };
        if rung.threads == Some(1) && cores > MARGIN {
            one_thread_over.push(format!(
                "variant {} ({}x{}@{}) needs ~{} cores on its one encoder thread",
                n + 1,
                rung.width,
                rung.height,
                rung.framerate,
                one(cores)
            ));
        }
        load += cores;
        variants.push(RungFit {
            index: rung.index,
            name: rung.name.clone(),
            width: rung.width,
            height: rung.height,
            framerate: rung.framerate,
            encoder: rung.encoder.clone(),
            preset: rung.preset.clone(),
            cpu_cores_needed: cores,
            speed,
            measured,
        });
    }
    let software: Vec<&Rung> = i.rungs.iter().filter(|r| r.made == Made::Software).collect();
    let decode_cores = if software.is_empty() || i.gpu_decode {
        0.0
    } else {
        let fps = software.iter().map(|r| r.framerate).max().unwrap_or(DECODE_FPS).max(DECODE_FPS);
        let source = f64::from(SOURCE.0) * f64::from(SOURCE.1);
        let scale = (software.iter().map(|r| r.pixels()).fold(0.0, f64::max) / source).max(1.0);
        let per_frame = i.decode.map_or(source / (PIXELS_PER_CORE as f64 * MODEL_DECODE_SPEED), |d| d.cpu_per_frame);
        per_frame * scale * f64::from(fps)
    };
    if decode_cores > MARGIN {
        one_thread_over.push(format!("decoding the source needs ~{} cores on its one thread", one(decode_cores)));
    }
    load += decode_cores;
    let fits = load <= budget * MARGIN && one_thread_over.is_empty();
    let n = budget_cores(i.cores);
    let cores_word = if n == 1 { "core" } else { "cores" };
    let mut message = if fits {
        format!("This ladder fits this box (uses ~{} of {n} {cores_word}).", one(load))
    } else if load > budget * MARGIN {
        format!(
            "This ladder does not fit this box: needs ~{} cores, {n} available — use fewer or smaller rungs, a \
             faster CPU usage level, or passthrough.",
            one(load)
        )
    } else {
        format!(
            "This ladder does not fit this box: {} — use smaller rungs, a faster CPU usage level, or \
             passthrough.",
            one_thread_over.join("; ")
        )
    };
    if i.cores > 1 {
        message.push_str(&format!(" One of the box's {} cores is left to the rest of the server.", i.cores));
    }
    let devices: Vec<&str> = {
        let mut d: Vec<&str> = i.rungs.iter().filter(|r| r.made == Made::Device).map(|r| r.encoder.as_str()).collect();
        d.dedup();
        d
    };
    if !devices.is_empty() {
        message.push_str(&format!(
            " Rungs on {} are encoded on the device, which the encoder probe found working: they use no CPU here \
             and are not measured.",
            devices.join(", ")
        ));
    }
    if let Some(note) = &i.note {
        message.push(' ');
        message.push_str(note);
    }
    let measured_at = i
        .costs
        .iter()
        .flatten()
        .map(|c| c.measured_at)
        .chain(i.decode.filter(|_| !software.is_empty() && !i.gpu_decode).map(|d| d.measured_at))
        .max();
    LadderFit {
        fits,
        cores: i.cores,
        budget_cores: budget,
        load_cores: load,
        decode_cores,
        encoder: i.encoder,
        cached: i.cached,
        measured_at,
        message,
        variants,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(w: u32, h: u32, fps: u32, level: u32) -> StreamOutputVariant {
        StreamOutputVariant {
            scaled_width: w,
            scaled_height: h,
            framerate: fps,
            cpu_usage_level: level,
            ..Default::default()
        }
    }

    fn cost(cpu_per_frame: f64) -> Option<Cost> {
        Some(Cost { cpu_per_frame, wall_per_frame: cpu_per_frame, frames: 30, measured_at: Utc::now() })
    }

    fn x264(n: usize) -> Vec<String> {
        vec![hwaccel::recipe::SOFTWARE_ENCODER.to_string(); n]
    }

    fn judge_with(rungs: &[Rung], costs: &[Option<Cost>], decode: Option<Cost>, cores: usize) -> LadderFit {
        judge(Inputs {
            rungs,
            costs,
            decode,
            cores,
            encoder: "libx264".into(),
            gpu_decode: false,
            cached: false,
            note: None,
        })
    }

    #[test]
    fn rung_sizes_are_the_workers_on_a_1080p_source() {
        for (w, h) in [(0, 0), (1280, 0), (0, 720), (0, 480), (0, 360), (640, 360), (3840, 2160), (0, 2160), (2, 0)] {
            let var = v(w, h, 30, 2);
            assert_eq!(rung_size(&var), crate::transcode::worker::target_size(&var, 1920, 1080), "{w}x{h}");
        }
        assert_eq!(rung_size(&v(0, 480, 30, 2)), (854, 480));
        assert_eq!(rung_size(&v(0, 0, 30, 2)), (1920, 1080), "the source's size counts as 1080p");
    }

    #[test]
    fn rungs_take_their_encoders_presets_and_threads() {
        let copy = StreamOutputVariant { video_passthrough: true, ..v(0, 0, 0, 2) };
        let ladder = [copy, v(1280, 720, 0, 2), v(3840, 2160, 60, 4), v(640, 360, 30, 0)];
        let r = rungs(&ladder, &["copy".into(), "libx264".into(), "libx264".into(), "h264_nvenc".into()]);
        assert_eq!((r[0].made, r[0].encoder.as_str(), r[0].preset.as_str()), (Made::Copy, "copy", "copy"));
        assert_eq!(
            (r[1].made, r[1].preset.as_str(), r[1].framerate, r[1].threads),
            (Made::Software, "veryfast", 24, Some(1))
        );
        assert_eq!(r[1].key(), "libx264|veryfast|1280x720@24");
        assert_eq!((r[1].variant.scaled_width, r[1].variant.scaled_height, r[1].variant.framerate), (1280, 720, 24));
        assert_eq!((r[2].preset.as_str(), r[2].threads), ("fast", Some(0)), "4K60 at fast: x264's own threads");
        assert_eq!((r[3].made, r[3].preset.as_str(), r[3].threads), (Made::Device, "p1", None));
        assert_ne!(r[1].key(), rungs(&[v(1280, 720, 30, 2)], &x264(1))[0].key(), "the frame rate is in the key");
        assert_ne!(r[1].key(), rungs(&[v(1280, 720, 24, 3)], &x264(1))[0].key(), "the preset is in the key");
        assert_eq!(
            rungs(&[v(1280, 720, 24, 2)], &x264(1))[0].key(),
            rungs(&[StreamOutputVariant { video_bitrate: 9000, name: "x".into(), ..v(1280, 0, 24, 2) }], &x264(1))[0]
                .key(),
            "bitrate and name are not"
        );
    }

    #[test]
    fn load_is_the_rungs_and_the_decode_against_cores_less_one() {
        let r = rungs(&[v(1280, 720, 30, 2), v(640, 360, 30, 1)], &x264(2));
        // 0.010 s × 30 = 0.30 cores, 0.005 × 30 = 0.15, decode 0.004 × 30 = 0.12: 0.57 cores.
        let fit = judge_with(&r, &[cost(0.010), cost(0.005)], cost(0.004), 2);
        assert!((fit.load_cores - 0.57).abs() < 1e-9, "{}", fit.load_cores);
        assert!((fit.decode_cores - 0.12).abs() < 1e-9);
        assert!((fit.variants[0].cpu_cores_needed - 0.30).abs() < 1e-9);
        assert_eq!((fit.cores, fit.budget_cores), (2, 1.0), "one core is left to the rest of the server");
        assert!(fit.fits, "{}", fit.message);
        assert!(fit.message.starts_with("This ladder fits this box (uses ~0.6 of 1 core)"), "{}", fit.message);
        assert!(fit.variants.iter().all(|r| r.measured));
        assert!((fit.variants[0].speed.unwrap() - 1.0 / 0.3).abs() < 1e-9, "alone, 3.3× real time");
        // One core: still one core of budget.
        assert_eq!(judge_with(&r, &[cost(0.010), cost(0.005)], cost(0.004), 1).budget_cores, 1.0);
        // Over the margin (0.8 of the budget): 0.02 × 30 + 0.005 × 30 + 0.12 = 0.87.
        let over = judge_with(&r, &[cost(0.020), cost(0.005)], cost(0.004), 2);
        assert!(!over.fits);
        assert!(
            over.message.starts_with(
                "This ladder does not fit this box: needs ~0.9 cores, 1 available — use fewer or smaller rungs"
            ),
            "{}",
            over.message
        );
        // The same ladder on 8 cores: 7 available.
        let big = judge_with(&r, &[cost(0.020), cost(0.005)], cost(0.004), 8);
        assert!(big.fits && big.budget_cores == 7.0 && big.message.contains("of 7 cores"), "{}", big.message);
    }

    #[test]
    fn a_one_thread_rung_must_keep_up_on_its_one_thread() {
        let r = rungs(&[v(1280, 720, 30, 2)], &x264(1));
        assert_eq!(r[0].threads, Some(1));
        // 0.03 × 30 = 0.9 cores on one thread: the box has room, the thread does not.
        let fit = judge_with(&r, &[cost(0.030)], cost(0.001), 16);
        assert!(
            !fit.fits && fit.message.contains("variant 1 (1280x720@30) needs ~0.9 cores on its one encoder thread"),
            "{}",
            fit.message
        );
    }

    #[test]
    fn the_decode_follows_the_highest_frame_rate_and_the_largest_rung() {
        let r = rungs(&[v(3840, 2160, 60, 0), v(640, 360, 30, 0)], &x264(2));
        let fit = judge_with(&r, &[cost(0.001), cost(0.001)], cost(0.002), 64);
        // 0.002 s × 4 (a 4K source) × 60 fps.
        assert!((fit.decode_cores - 0.48).abs() < 1e-9, "{}", fit.decode_cores);
        let small = rungs(&[v(640, 360, 24, 0)], &x264(1));
        let fit = judge_with(&small, &[cost(0.001)], cost(0.002), 4);
        assert!((fit.decode_cores - 0.06).abs() < 1e-9, "at least the 1080p30 source: {}", fit.decode_cores);
        // On a decode path the GPU decodes: the CPU only encodes.
        let on_gpu = judge(Inputs {
            rungs: &r,
            costs: &[cost(0.001), cost(0.001)],
            decode: cost(0.002),
            cores: 64,
            encoder: "libx264 (decode and scaling on cuda:0)".into(),
            gpu_decode: true,
            cached: false,
            note: None,
        });
        assert_eq!(on_gpu.decode_cores, 0.0);
        assert!((on_gpu.load_cores - 0.09).abs() < 1e-9, "the two rungs alone: {}", on_gpu.load_cores);
    }

    #[test]
    fn passthrough_and_hardware_rungs_cost_no_cpu() {
        let copy = StreamOutputVariant { video_passthrough: true, ..v(0, 0, 60, 4) };
        let r = rungs(&[copy.clone(), v(3840, 2160, 60, 4)], &["copy".into(), "h264_nvenc".into()]);
        let fit = judge_with(&r, &[None, None], None, 2);
        assert!(fit.fits && fit.load_cores == 0.0 && fit.decode_cores == 0.0, "{fit:?}");
        assert!(fit.message.contains("h264_nvenc") && fit.message.contains("not measured"), "{}", fit.message);
        assert_eq!(fit.measured_at, None);
        assert!(fit.variants.iter().all(|r| !r.measured && r.speed.is_none()));
        let only_copy = rungs(&[copy], &["copy".into()]);
        let fit = judge_with(&only_copy, &[None], cost(0.5), 2);
        assert!(fit.fits && fit.load_cores == 0.0, "passthrough decodes nothing");
    }

    #[test]
    fn unmeasured_rungs_are_estimated_per_pixel_and_effort() {
        let r = rungs(&[v(1280, 720, 30, 2), v(640, 360, 30, 2), v(640, 360, 30, 4)], &x264(3));
        let fit = judge_with(&r, &[cost(0.008), None, None], cost(0.001), 4);
        // A quarter of the pixels at the same preset: a quarter of the cost; at fast (8 vs 3) 8/3 of that.
        assert!((fit.variants[1].cpu_cores_needed - 0.06).abs() < 1e-9, "{}", fit.variants[1].cpu_cores_needed);
        assert!((fit.variants[2].cpu_cores_needed - 0.16).abs() < 1e-9, "{}", fit.variants[2].cpu_cores_needed);
        assert!(fit.variants[0].measured && !fit.variants[1].measured);
        // Nothing measured at all: media::capacity's model (1080p30 veryfast at 2.5× real time on a core).
        let one = rungs(&[v(1920, 1080, 30, 2)], &x264(1));
        let fit = judge_with(&one, &[None], None, 4);
        assert!((fit.variants[0].cpu_cores_needed - 0.4).abs() < 1e-9, "{}", fit.variants[0].cpu_cores_needed);
    }
}
