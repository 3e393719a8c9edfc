//! Per-encoder recipes: how one quality variant is decoded, scaled and encoded on a given encoder.
//!
//! Everything here is pure data, built from the encoder the probe found, the variant's settings and
//! what the input stream is. The transcode worker turns a [`Ladder`] into libav calls:
//!
//! 1. create the hardware device once (`av_hwdevice_ctx_create(device.kind.av_type(), device.path)`);
//! 2. decode the input as [`Decode`] says (hardware decode keeps frames on the device: the full-GPU pipeline);
//! 3. build one filter graph ([`Ladder::filter_graph`]): the shared `upload` chain runs once after decode,
//!    then a `split` feeds each variant's own `filter` chain (`scale_cuda`, `scale_vaapi`, `scale_qsv` or
//!    `scale`); when `filters_need_device` is set, every filter gets the device as `hw_device_ctx`;
//! 4. open each variant's encoder with `pix_fmt` and the `options` (AVOptions, generic and private alike).
//!
//! Rates follow Owncast (owncast-compat.md §4): `b = bitrate − 192 kbps`, `maxrate = bufsize = 1.08 × b`,
//! `g = keyint_min = fps × segment seconds`, a 0 bitrate means 1200 kbps and a 0 frame rate 24 fps.
//! Presets by cpuUsageLevel 0..=4: x264 ultrafast…fast (superfast when out of range), NVENC p1…p5 (p3),
//! QSV veryfast…medium (veryfast), VA-API `quality` 7…1 (6).

use serde::Serialize;

use crate::{EncoderInfo, EncoderKind};

/// Owncast's x264 presets for cpuUsageLevel 0..=4.
pub const X264_PRESETS: [&str; 5] = ["ultrafast", "superfast", "veryfast", "faster", "fast"];
/// NVENC presets for cpuUsageLevel 0..=4 (p1 fastest).
pub const NVENC_PRESETS: [&str; 5] = ["p1", "p2", "p3", "p4", "p5"];
/// QSV presets for cpuUsageLevel 0..=4 (QSV has no ultrafast/superfast; it starts at veryfast).
pub const QSV_PRESETS: [&str; 5] = ["veryfast", "veryfast", "faster", "fast", "medium"];
/// VA-API `quality` for cpuUsageLevel 0..=4 (higher is faster; Intel's 1 best … 7 fastest).
pub const VAAPI_QUALITY: [u32; 5] = [7, 6, 4, 2, 1];
/// Owncast's bitrate when a variant says 0 (kbps).
pub const DEFAULT_VIDEO_BITRATE: u32 = 1200;
/// Owncast's frame rate when a variant says 0.
pub const DEFAULT_FRAMERATE: u32 = 24;
/// The lowest video bitrate handed to an encoder after Owncast's −192 kbps (kbps).
const MIN_VIDEO_BITRATE: u32 = 64;
/// The software encoder every hardware failure falls back to.
pub const SOFTWARE_ENCODER: &str = "libx264";

/// One output variant, as the transcoder sees it (mapped from castd's `StreamOutputVariant`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct VariantSpec {
    /// Video passthrough (`-c:v copy`): no encoder session.
    pub passthrough: bool,
    /// Target width, 0 = from the height keeping the aspect ratio (or the source width when both are 0).
    pub width: u32,
    /// Target height, 0 = from the width (or the source height when both are 0).
    pub height: u32,
    /// The variant's configured bitrate in kbps (before Owncast's −192); 0 = 1200.
    pub bitrate_kbps: u32,
    /// Frames per second; 0 = 24.
    pub framerate: u32,
    /// Owncast's cpuUsageLevel 0 (fastest) ..= 4 (best quality).
    pub cpu_usage_level: u32,
    /// HLS segment length; one keyframe per segment.
    pub segment_seconds: u32,
}

/// What the worker decodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputSpec {
    /// libavcodec codec name of the input video (`h264`, `hevc`, ...).
    pub codec: String,
    /// Pixel format the software decoder would produce (`yuv420p`, `yuv422p`, `yuv420p10le`, ...).
    pub pix_fmt: String,
    /// Source size, 0 when not yet known.
    pub width: u32,
    pub height: u32,
}

impl Default for InputSpec {
    fn default() -> Self {
        Self { codec: "h264".into(), pix_fmt: "yuv420p".into(), width: 0, height: 0 }
    }
}

/// A libav hardware device type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HwDeviceKind {
    Cuda,
    Vaapi,
    Qsv,
}

impl HwDeviceKind {
    /// The name `av_hwdevice_find_type_by_name` takes, also the hardware pixel format's name.
    pub fn av_name(self) -> &'static str {
        match self {
            HwDeviceKind::Cuda => "cuda",
            HwDeviceKind::Vaapi => "vaapi",
            HwDeviceKind::Qsv => "qsv",
        }
    }

    /// The device an encoder kind runs on (none for software).
    pub fn for_encoder(kind: EncoderKind) -> Option<HwDeviceKind> {
        match kind {
            EncoderKind::Software => None,
            EncoderKind::Nvenc => Some(HwDeviceKind::Cuda),
            EncoderKind::Vaapi => Some(HwDeviceKind::Vaapi),
            EncoderKind::Qsv => Some(HwDeviceKind::Qsv),
        }
    }

    /// The scaling filter on this device (`scale_cuda=W:H`, ...).
    pub fn scaler(self, w: i64, h: i64) -> String {
        match self {
            HwDeviceKind::Cuda => format!("scale_cuda={w}:{h}"),
            HwDeviceKind::Vaapi => format!("scale_vaapi=w={w}:h={h}:format=nv12"),
            HwDeviceKind::Qsv => format!("scale_qsv=w={w}:h={h}"),
        }
    }

    fn upload(self) -> &'static str {
        match self {
            HwDeviceKind::Cuda => "format=nv12,hwupload_cuda",
            HwDeviceKind::Vaapi => "format=nv12,hwupload",
            HwDeviceKind::Qsv => "format=nv12,hwupload=extra_hw_frames=64",
        }
    }
}

/// The hardware device to create once per worker (global setup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HwDevice {
    pub kind: HwDeviceKind,
    /// Device string for `av_hwdevice_ctx_create`: `0` (CUDA index), `/dev/dri/renderD128`; `None` = default.
    pub path: Option<String>,
}

/// How the input is decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum Decode {
    /// libavcodec's software decoder; frames in system memory.
    Software,
    /// Decode on the device, frames stay there (`hw_device_ctx` on the decoder and a `get_format` that picks
    /// `output_format`); `decoder` names a dedicated decoder when one is needed (`h264_qsv`), else the
    /// default decoder with the hwaccel is used.
    Hardware { device: HwDeviceKind, decoder: Option<String>, output_format: &'static str },
}

/// Everything the worker needs to encode one variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recipe {
    /// libavcodec encoder name (`copy` for passthrough).
    pub encoder: String,
    pub kind: EncoderKind,
    pub hardware: bool,
    /// Per-variant filter chain after the shared upload/split (`null` when nothing is to be done).
    pub filter: String,
    /// Pixel format of the frames fed to the encoder (`cuda`, `vaapi`, `qsv` are hardware frames).
    pub pix_fmt: &'static str,
    /// Software layout of those frames (the hardware frames context's `sw_format`).
    pub sw_pix_fmt: &'static str,
    /// Output size; a value of -2 means "from the other dimension" once the source size is known.
    pub width: i64,
    pub height: i64,
    /// swscale flags for software scaling (Owncast's `-sws_flags bilinear`).
    pub sws_flags: &'static str,
    /// AVOptions for `avcodec_open2`, in order.
    pub options: Vec<(String, String)>,
    pub framerate: u32,
    /// Keyframe interval in frames (one per segment).
    pub gop: u32,
    /// Bitrate and maxrate handed to the encoder, kbps.
    pub bitrate_kbps: u32,
    pub maxrate_kbps: u32,
}

impl Recipe {
    /// The value of option `name`, if set.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A whole ladder on one input: device and decode set-up shared by all variants, and one recipe each.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ladder {
    /// Hardware device to create (None: all software).
    pub device: Option<HwDevice>,
    pub decode: Decode,
    /// Chain run once after decode, before the split (`format=nv12,hwupload_cuda` when the decoder cannot
    /// decode this input on the device); empty when frames are already where the encoders want them.
    pub upload: String,
    /// Whether filters need the device as `hw_device_ctx` (hwupload does).
    pub filters_need_device: bool,
    /// Whether decode, scale and encode all stay on the GPU.
    pub full_gpu: bool,
    pub variants: Vec<Recipe>,
}

impl Ladder {
    /// The complete libavfilter graph: `[in]` is the decoder output, `[out0]`, `[out1]`, ... feed the
    /// encoders in variant order.
    pub fn filter_graph(&self) -> String {
        let n = self.variants.len();
        let mut graph = String::from("[in]");
        if !self.upload.is_empty() {
            graph.push_str(&self.upload);
            graph.push(',');
        }
        graph.push_str(&format!("split={n}"));
        for i in 0..n {
            graph.push_str(&format!("[s{i}]"));
        }
        for (i, r) in self.variants.iter().enumerate() {
            graph.push_str(&format!(";[s{i}]{}[out{i}]", r.filter));
        }
        graph
    }
}

/// Owncast's bitrate for the encoder: `bitrate − 192` (0 means 1200), kbps.
pub fn encoder_bitrate(v: &VariantSpec) -> u32 {
    let b = if v.bitrate_kbps == 0 { DEFAULT_VIDEO_BITRATE } else { v.bitrate_kbps };
    b.saturating_sub(192).max(MIN_VIDEO_BITRATE)
}

/// The variant's frame rate (24 for 0).
pub fn framerate(v: &VariantSpec) -> u32 {
    if v.framerate == 0 {
        DEFAULT_FRAMERATE
    } else {
        v.framerate
    }
}

/// Owncast's x264 preset for a cpuUsageLevel.
pub fn x264_preset(level: u32) -> &'static str {
    X264_PRESETS.get(level as usize).copied().unwrap_or("superfast")
}

/// What each of libx264's presets sets that the SPS and PPS carry (x264's presets: reference frames, CABAC,
/// 8x8 transforms, weighted P prediction), and the chroma QP offset x264 adds on its own (−2 where psy-RD
/// runs: subpixel refinement 6 and up, `fast`). `tune zerolatency` already holds B-frames at 0; the profile,
/// level and VUI follow from these and the rates.
fn x264_parameter_sets(preset: &str) -> Option<(&'static str, i32)> {
    Some(match preset {
        "ultrafast" => ("ref=1:cabac=0:8x8dct=0:weightp=0", 0),
        "superfast" | "veryfast" => ("ref=1:cabac=1:8x8dct=1:weightp=1", 0),
        "faster" => ("ref=2:cabac=1:8x8dct=1:weightp=1", 0),
        "fast" => ("ref=2:cabac=1:8x8dct=1:weightp=1", -2),
        _ => return None,
    })
}

/// libx264 recipe `configured` moved to `preset` (a capacity step) under the parameter sets of the preset it
/// was configured with: `x264-params` pins what that preset's SPS and PPS say, so the stream never changes
/// them mid-way. The CMAF init segment's `avcC` (which an `avc1` player may decode with alone) and the
/// master playlist's `CODECS` stay true. Stepping `fast` down to `ultrafast` would otherwise drop CABAC and
/// 8x8 transforms and the psy-RD chroma offset (a new PPS) and a reference frame (a new SPS). What a step
/// saves comes from motion search, subpixel refinement, partitions, trellis and look-ahead, which the
/// parameter sets do not carry (measured here, 720p30 at one thread: `ultrafast` pinned to `veryfast`'s
/// sets costs 1.3× plain `ultrafast`, still 0.8× `superfast`).
pub fn stepped_x264_recipe(configured: &Recipe, preset: &str) -> Recipe {
    let mut rec = configured.clone();
    let from = configured.option("preset").and_then(x264_parameter_sets);
    if let (Some((pins, from_offset)), Some((_, to_offset))) = (from, x264_parameter_sets(preset)) {
        let mut pins = pins.to_string();
        if from_offset != to_offset {
            pins.push_str(&format!(":chroma-qp-offset={}", from_offset - to_offset));
        }
        match rec.options.iter_mut().find(|(k, _)| k == "x264-params") {
            Some((_, v)) if !v.is_empty() => *v = format!("{v}:{pins}"),
            Some((_, v)) => *v = pins,
            None => rec.options.push(("x264-params".into(), pins)),
        }
    }
    match rec.options.iter_mut().find(|(k, _)| k == "preset") {
        Some((_, v)) => *v = preset.to_string(),
        None => rec.options.push(("preset".into(), preset.to_string())),
    }
    rec
}

/// libx264's `threads` for a variant encoded on a pipeline thread of its own: 1 (no slice threads,
/// which cost CPU time in synchronisation and split frames; the variants already run in parallel) while
/// the variant is no heavier than 1080p30 at veryfast, which one core of a current CPU encodes at 2–3×
/// realtime; 0 (x264's own choice) above that, so large or slow encodes still keep up.
pub fn x264_threads(width: u32, height: u32, fps: u32, level: u32) -> u32 {
    let cost = match x264_preset(level) {
        "ultrafast" => 1,
        "superfast" => 2,
        "veryfast" => 3,
        "faster" => 5,
        _ => 8,
    };
    let load = u64::from(width) * u64::from(height) * u64::from(fps) * cost;
    if load <= 1920 * 1080 * 30 * 3 {
        1
    } else {
        0
    }
}

/// NVENC preset for a cpuUsageLevel (Owncast: p1..p5, p3 when out of range).
pub fn nvenc_preset(level: u32) -> &'static str {
    NVENC_PRESETS.get(level as usize).copied().unwrap_or("p3")
}

/// QSV preset for a cpuUsageLevel.
pub fn qsv_preset(level: u32) -> &'static str {
    QSV_PRESETS.get(level as usize).copied().unwrap_or("veryfast")
}

/// VA-API `quality` for a cpuUsageLevel.
pub fn vaapi_quality(level: u32) -> u32 {
    VAAPI_QUALITY.get(level as usize).copied().unwrap_or(6)
}

/// Whether `device` can decode `input` itself (NVDEC, VA-API and QSV decode 8-bit 4:2:0 H.264; HEVC, VP9
/// and AV1 also in 10-bit; no vendor decodes 4:2:2 or 4:4:4 H.264).
pub fn hw_decode_supported(device: HwDeviceKind, input: &InputSpec) -> bool {
    let eight_bit = matches!(input.pix_fmt.as_str(), "yuv420p" | "yuvj420p" | "nv12");
    let ten_bit = matches!(input.pix_fmt.as_str(), "yuv420p10le" | "p010le");
    match (device, input.codec.as_str()) {
        (_, "h264") => eight_bit,
        (HwDeviceKind::Qsv, "hevc" | "vp9" | "av1") => eight_bit || ten_bit,
        (HwDeviceKind::Cuda | HwDeviceKind::Vaapi, "hevc" | "vp9" | "av1") => eight_bit || ten_bit,
        (HwDeviceKind::Cuda | HwDeviceKind::Vaapi, "vp8" | "mpeg2video") => eight_bit,
        (HwDeviceKind::Qsv, "mpeg2video") => eight_bit,
        _ => false,
    }
}

/// How `input` is decoded when `device` is the encoders' device.
pub fn decode_for(device: Option<HwDeviceKind>, input: &InputSpec) -> Decode {
    match device {
        Some(d) if hw_decode_supported(d, input) => Decode::Hardware {
            device: d,
            decoder: (d == HwDeviceKind::Qsv).then(|| format!("{}_qsv", input.codec)),
            output_format: d.av_name(),
        },
        _ => Decode::Software,
    }
}

/// Output size for `v` on `input`: `None` when no scaling is asked; a -2 marks a dimension to derive from
/// the other (when the source size is unknown). Derived dimensions are rounded to even.
pub fn output_size(v: &VariantSpec, input: &InputSpec) -> Option<(i64, i64)> {
    let (w, h) = (i64::from(v.width), i64::from(v.height));
    let (iw, ih) = (i64::from(input.width), i64::from(input.height));
    let even = |x: i64| (x / 2 * 2).max(2);
    match (w, h) {
        (0, 0) => None,
        (w, 0) if iw > 0 && ih > 0 => Some((w, even((w * ih + iw / 2) / iw))),
        (0, h) if iw > 0 && ih > 0 => Some((even((h * iw + ih / 2) / ih), h)),
        (w, 0) => Some((w, -2)),
        (0, h) => Some((-2, h)),
        (w, h) => Some((w, h)),
    }
}

/// The recipe for one variant on `encoder`, deciding the decode mode from `input` alone (all variants on
/// the same encoder). Use [`ladder`] for a whole ladder, which may mix encoders.
pub fn recipe(encoder: &EncoderInfo, variant: &VariantSpec, input: &InputSpec) -> Recipe {
    let decode = decode_for(HwDeviceKind::for_encoder(encoder.kind), input);
    build(&encoder.name, encoder.kind, variant, input, &decode)
}

/// Plan a whole ladder: `encoders[i]` encodes `variants[i]` (see [`plan_sessions`]). The device follows the
/// first hardware encoder, else the first decode path (a software encoder with `decode` set); software
/// variants on a hardware-decoded ladder scale on the GPU and download the small picture.
///
/// A ladder of software encoders on a decode path (the GPU decodes and scales, libx264 encodes) is planned
/// only when the device decodes this input (8-bit 4:2:0); otherwise it is an all-software ladder (`device`
/// `None`): uploading a picture only to download it again would cost more than it saves.
pub fn ladder(encoders: &[EncoderInfo], variants: &[VariantSpec], input: &InputSpec) -> Ladder {
    let encoded = || encoders.iter().zip(variants).filter(|(_, v)| !v.passthrough).map(|(e, _)| e);
    let device_of = |e: &EncoderInfo, kind: HwDeviceKind| HwDevice {
        kind,
        path: match kind {
            HwDeviceKind::Cuda => Some(e.device.strip_prefix("cuda:").unwrap_or("0").to_string()),
            _ if e.device.is_empty() => None,
            _ => Some(e.device.clone()),
        },
    };
    let hw_encoder = encoded()
        .find(|e| e.kind != EncoderKind::Software)
        .and_then(|e| HwDeviceKind::for_encoder(e.kind).map(|k| device_of(e, k)));
    let decode_path = || {
        encoded().find_map(|e| e.decode.map(|k| device_of(e, k))).filter(|d| {
            let eight_bit = matches!(input.pix_fmt.as_str(), "yuv420p" | "yuvj420p" | "nv12");
            eight_bit && hw_decode_supported(d.kind, input)
        })
    };
    let device = hw_encoder.or_else(decode_path);
    let decode = decode_for(device.as_ref().map(|d| d.kind), input);
    let upload = match (&device, &decode) {
        (Some(d), Decode::Software) => d.kind.upload().to_string(),
        _ => String::new(),
    };
    let software = crate::software_encoders().remove(0);
    let recipes = variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let e = encoders.get(i).unwrap_or(&software);
            build(&e.name, e.kind, v, input, &decode_or_uploaded(&decode, device.as_ref(), &upload))
        })
        .collect();
    Ladder {
        filters_need_device: !upload.is_empty(),
        full_gpu: matches!(decode, Decode::Hardware { .. }),
        device,
        decode,
        upload,
        variants: recipes,
    }
}

/// Where frames are after decode and the shared upload: an upload makes them hardware frames as if decoded
/// there, so the per-variant chains are the same in both cases.
fn decode_or_uploaded(decode: &Decode, device: Option<&HwDevice>, upload: &str) -> Decode {
    match (decode, device) {
        (Decode::Software, Some(d)) if !upload.is_empty() => {
            Decode::Hardware { device: d.kind, decoder: None, output_format: d.kind.av_name() }
        }
        _ => decode.clone(),
    }
}

/// Build one variant's recipe given where decoded frames are (`frames`).
fn build(name: &str, kind: EncoderKind, v: &VariantSpec, input: &InputSpec, frames: &Decode) -> Recipe {
    let fps = framerate(v);
    let gop = fps * v.segment_seconds.max(1);
    let b = encoder_bitrate(v);
    let maxrate = b * 108 / 100;
    let size = output_size(v, input);
    let (width, height) = size.unwrap_or((i64::from(input.width), i64::from(input.height)));
    let level = v.cpu_usage_level;
    let mut base: Vec<(String, String)> = vec![
        ("b".into(), format!("{b}k")),
        ("maxrate".into(), format!("{maxrate}k")),
        ("bufsize".into(), format!("{maxrate}k")),
        ("g".into(), gop.to_string()),
        ("keyint_min".into(), gop.to_string()),
    ];
    let on_device = match frames {
        Decode::Hardware { device, .. } => Some(*device),
        Decode::Software => None,
    };
    let mut recipe = Recipe {
        encoder: name.to_string(),
        kind,
        hardware: kind != EncoderKind::Software,
        filter: String::new(),
        pix_fmt: "yuv420p",
        sw_pix_fmt: "yuv420p",
        width,
        height,
        sws_flags: "bilinear",
        options: Vec::new(),
        framerate: fps,
        gop,
        bitrate_kbps: b,
        maxrate_kbps: maxrate,
    };
    if v.passthrough {
        recipe.encoder = "copy".into();
        recipe.hardware = false;
        recipe.filter = "null".into();
        return recipe;
    }
    let opt = |k: &str, val: &str| (k.to_string(), val.to_string());
    match (kind, on_device) {
        (EncoderKind::Software, None) => {
            let mut chain = Vec::new();
            if let Some((w, h)) = size {
                chain.push(format!("scale={w}:{h}:flags=bilinear"));
            }
            if input.pix_fmt != "yuv420p" {
                chain.push("format=yuv420p".into());
            }
            recipe.filter = if chain.is_empty() { "null".into() } else { chain.join(",") };
        }
        (EncoderKind::Software, Some(dev)) => {
            // Frames live on the GPU (another variant's encoder is there): scale there, download the small one.
            let scale = size.map(|(w, h)| dev.scaler(w, h)).unwrap_or_else(|| "null".into());
            recipe.filter = format!("{scale},hwdownload,format=nv12");
            recipe.pix_fmt = "nv12";
            recipe.sw_pix_fmt = "nv12";
        }
        (_, _) => {
            let dev = HwDeviceKind::for_encoder(kind).unwrap_or(HwDeviceKind::Cuda);
            // A hardware encoder always gets hardware frames: either decoded there or uploaded once.
            recipe.filter = size.map(|(w, h)| dev.scaler(w, h)).unwrap_or_else(|| "null".into());
            recipe.pix_fmt = dev.av_name();
            recipe.sw_pix_fmt = "nv12";
        }
    }
    match kind {
        EncoderKind::Software => {
            base.extend([
                opt("sc_threshold", "0"),
                opt("preset", x264_preset(level)),
                opt("tune", "zerolatency"),
                opt("profile", "high"),
                opt("x264-params", "scenecut=0:open_gop=0"),
                opt("forced-idr", "1"),
            ]);
        }
        EncoderKind::Nvenc => {
            base.extend([
                opt("preset", nvenc_preset(level)),
                opt("tune", "ll"),
                opt("rc", "vbr"),
                opt("profile", "high"),
                opt("zerolatency", "1"),
                opt("no-scenecut", "1"),
                opt("strict_gop", "1"),
                opt("forced-idr", "1"),
            ]);
        }
        EncoderKind::Vaapi => {
            base.extend([
                opt("rc_mode", "VBR"),
                opt("quality", &vaapi_quality(level).to_string()),
                opt("profile", "high"),
                opt("bf", "0"),
            ]);
        }
        EncoderKind::Qsv => {
            base.extend([
                opt("preset", qsv_preset(level)),
                opt("profile", "high"),
                opt("look_ahead", "0"),
                opt("bf", "0"),
                opt("forced_idr", "1"),
            ]);
        }
    }
    recipe.options = base;
    recipe
}

/// NVENC sessions a GPU allows at once, from its name and driver version: consumer cards (GeForce, TITAN)
/// are capped by the driver (3 before 530, 5 from 530, 8 from 550); professional and data-centre cards
/// are not (`None`).
pub fn nvenc_session_cap(gpu_name: &str, driver_version: &str) -> Option<u32> {
    let consumer = gpu_name.contains("GeForce") || gpu_name.contains("TITAN");
    if !consumer {
        return None;
    }
    let major: u32 = driver_version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some(match major {
        550.. => 8,
        530.. => 5,
        _ => 3,
    })
}

/// Which encoder each variant uses, and why it differs from the chosen one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionPlan {
    /// Encoder name per variant (`copy` for passthrough).
    pub encoders: Vec<String>,
    /// Set when some variants could not get the chosen encoder; says which and why.
    pub message: Option<String>,
}

/// Give each variant the chosen `encoder`, within NVENC's session cap (`nvenc_cap`, minus sessions other
/// programs hold): the most expensive variants (largest size, then bitrate) get NVENC sessions, the rest
/// are encoded with libx264. Other encoders have no cap.
pub fn plan_sessions(ladder: &[VariantSpec], encoder: &str, nvenc_cap: Option<u32>) -> SessionPlan {
    let mut encoders: Vec<String> =
        ladder.iter().map(|v| if v.passthrough { "copy".into() } else { encoder.to_string() }).collect();
    let cap = match (encoder, nvenc_cap) {
        ("h264_nvenc", Some(cap)) => cap as usize,
        _ => return SessionPlan { encoders, message: None },
    };
    let mut order: Vec<usize> = (0..ladder.len()).filter(|&i| !ladder[i].passthrough).collect();
    let cost = |v: &VariantSpec| (u64::from(v.width.max(v.height)), encoder_bitrate(v));
    order.sort_by(|&a, &b| cost(&ladder[b]).cmp(&cost(&ladder[a])).then(a.cmp(&b)));
    let overflow: Vec<usize> = order.into_iter().skip(cap).collect();
    if overflow.is_empty() {
        return SessionPlan { encoders, message: None };
    }
    for &i in &overflow {
        encoders[i] = SOFTWARE_ENCODER.into();
    }
    let mut names: Vec<String> = overflow.iter().map(|i| (i + 1).to_string()).collect();
    names.sort();
    let message = format!(
        "this GPU allows {cap} NVENC session(s); variant(s) {} are encoded in software (libx264)",
        names.join(", ")
    );
    SessionPlan { encoders, message: Some(message) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(name: &str, kind: EncoderKind, device: &str) -> EncoderInfo {
        EncoderInfo {
            name: name.into(),
            kind,
            available: true,
            device: device.into(),
            reason: String::new(),
            decode: None,
        }
    }

    fn v720() -> VariantSpec {
        VariantSpec {
            width: 1280,
            height: 720,
            bitrate_kbps: 1800,
            framerate: 30,
            cpu_usage_level: 2,
            segment_seconds: 2,
            ..Default::default()
        }
    }

    fn h264_1080() -> InputSpec {
        InputSpec { codec: "h264".into(), pix_fmt: "yuv420p".into(), width: 1920, height: 1080 }
    }

    #[test]
    fn x264_follows_owncast() {
        let r = recipe(&enc("libx264", EncoderKind::Software, ""), &v720(), &h264_1080());
        assert_eq!(r.encoder, "libx264");
        assert!(!r.hardware);
        assert_eq!(r.filter, "scale=1280:720:flags=bilinear");
        assert_eq!(r.pix_fmt, "yuv420p");
        assert_eq!(r.option("b"), Some("1608k"));
        assert_eq!(r.option("maxrate"), Some("1736k"));
        assert_eq!(r.option("bufsize"), Some("1736k"));
        assert_eq!(r.option("g"), Some("60"));
        assert_eq!(r.option("keyint_min"), Some("60"));
        assert_eq!(r.option("preset"), Some("veryfast"));
        assert_eq!(r.option("tune"), Some("zerolatency"));
        assert_eq!(r.option("profile"), Some("high"));
        assert_eq!(r.option("x264-params"), Some("scenecut=0:open_gop=0"));
        assert_eq!(r.option("sc_threshold"), Some("0"));
        let presets: Vec<_> = (0..6).map(x264_preset).collect();
        assert_eq!(presets, ["ultrafast", "superfast", "veryfast", "faster", "fast", "superfast"]);
        // One thread per encode up to 1080p30 veryfast; x264's own threading above.
        assert_eq!(x264_threads(1280, 720, 30, 2), 1);
        assert_eq!(x264_threads(640, 360, 30, 4), 1);
        assert_eq!(x264_threads(1920, 1080, 30, 2), 1);
        assert_eq!(x264_threads(1920, 1080, 60, 2), 0);
        assert_eq!(x264_threads(1920, 1080, 30, 3), 0);
        assert_eq!(x264_threads(1280, 720, 30, 3), 1);
        assert_eq!(x264_threads(1280, 720, 30, 4), 0);
        assert_eq!(x264_threads(3840, 2160, 30, 0), 0);
        // 4:2:2 input gets converted; no scaling and 4:2:0 input is a null chain.
        let i422 = InputSpec { pix_fmt: "yuv422p".into(), ..h264_1080() };
        assert_eq!(
            recipe(&enc("libx264", EncoderKind::Software, ""), &v720(), &i422).filter,
            "scale=1280:720:flags=bilinear,format=yuv420p"
        );
        let plain = VariantSpec { width: 0, height: 0, ..v720() };
        assert_eq!(recipe(&enc("libx264", EncoderKind::Software, ""), &plain, &h264_1080()).filter, "null");
    }

    /// A capacity step encodes at the new preset under the configured preset's parameter-set options
    /// (and psy-RD's chroma offset, which `fast` has and the faster presets do not).
    #[test]
    fn a_stepped_x264_recipe_keeps_the_configured_parameter_sets() {
        let fast = VariantSpec { cpu_usage_level: 4, ..v720() };
        let r = recipe(&enc("libx264", EncoderKind::Software, ""), &fast, &h264_1080());
        let down = stepped_x264_recipe(&r, "ultrafast");
        assert_eq!(down.option("preset"), Some("ultrafast"));
        assert_eq!(
            down.option("x264-params"),
            Some("scenecut=0:open_gop=0:ref=2:cabac=1:8x8dct=1:weightp=1:chroma-qp-offset=-2")
        );
        assert_eq!(stepped_x264_recipe(&r, "faster").option("preset"), Some("faster"));
        let back = stepped_x264_recipe(&r, "fast");
        assert_eq!(back.option("x264-params"), Some("scenecut=0:open_gop=0:ref=2:cabac=1:8x8dct=1:weightp=1"));
        let mut v = recipe(&enc("libx264", EncoderKind::Software, ""), &v720(), &h264_1080());
        v.options.retain(|(k, _)| k != "x264-params");
        let s = stepped_x264_recipe(&v, "superfast");
        assert_eq!(s.option("x264-params"), Some("ref=1:cabac=1:8x8dct=1:weightp=1"));
        assert_eq!(s.option("preset"), Some("superfast"));
        // Every preset castd steps between is known.
        assert!(X264_PRESETS.iter().all(|p| x264_parameter_sets(p).is_some()));
    }

    #[test]
    fn nvenc_full_gpu_with_cuda_decode() {
        let nv = enc("h264_nvenc", EncoderKind::Nvenc, "cuda:0");
        let r = recipe(&nv, &v720(), &h264_1080());
        assert!(r.hardware);
        assert_eq!(r.filter, "scale_cuda=1280:720");
        assert_eq!((r.pix_fmt, r.sw_pix_fmt), ("cuda", "nv12"));
        assert_eq!(r.option("tune"), Some("ll"));
        assert_eq!(r.option("preset"), Some("p3"));
        assert_eq!(r.option("rc"), Some("vbr"));
        assert_eq!(r.option("b"), Some("1608k"));
        assert_eq!(r.option("maxrate"), Some("1736k"));
        assert_eq!(r.option("forced-idr"), Some("1"));
        assert_eq!(r.option("x264-params"), None);
        let presets: Vec<_> = (0..6).map(nvenc_preset).collect();
        assert_eq!(presets, ["p1", "p2", "p3", "p4", "p5", "p3"]);

        let l = ladder(std::slice::from_ref(&nv), &[v720()], &h264_1080());
        assert_eq!(l.device, Some(HwDevice { kind: HwDeviceKind::Cuda, path: Some("0".into()) }));
        assert_eq!(l.decode, Decode::Hardware { device: HwDeviceKind::Cuda, decoder: None, output_format: "cuda" });
        assert!(l.full_gpu);
        assert_eq!(l.upload, "");
        assert_eq!(l.filter_graph(), "[in]split=1[s0];[s0]scale_cuda=1280:720[out0]");
    }

    #[test]
    fn nvenc_uploads_once_when_nvdec_cannot_decode() {
        let nv = enc("h264_nvenc", EncoderKind::Nvenc, "cuda:1");
        let i444 = InputSpec { pix_fmt: "yuv444p".into(), ..h264_1080() };
        let v360 = VariantSpec { width: 0, height: 360, bitrate_kbps: 600, ..v720() };
        let l = ladder(&[nv.clone(), nv], &[v720(), v360], &i444);
        assert_eq!(l.decode, Decode::Software);
        assert!(!l.full_gpu);
        assert!(l.filters_need_device);
        assert_eq!(l.device.as_ref().and_then(|d| d.path.as_deref()), Some("1"));
        assert_eq!(
            l.filter_graph(),
            "[in]format=nv12,hwupload_cuda,split=2[s0][s1];[s0]scale_cuda=1280:720[out0];[s1]scale_cuda=640:360[out1]"
        );
        assert_eq!(l.variants[1].pix_fmt, "cuda");
        assert_eq!(l.variants[1].option("b"), Some("408k"));
    }

    #[test]
    fn vaapi_full_gpu_and_upload() {
        let va = enc("h264_vaapi", EncoderKind::Vaapi, "/dev/dri/renderD128");
        let r = recipe(&va, &v720(), &h264_1080());
        assert_eq!(r.filter, "scale_vaapi=w=1280:h=720:format=nv12");
        assert_eq!((r.pix_fmt, r.sw_pix_fmt), ("vaapi", "nv12"));
        assert_eq!(r.option("rc_mode"), Some("VBR"));
        assert_eq!(r.option("quality"), Some("4"));
        assert_eq!(r.option("profile"), Some("high"));
        assert_eq!(r.option("g"), Some("60"));
        assert_eq!(r.option("preset"), None, "VA-API has no preset option");
        let q: Vec<_> = (0..6).map(vaapi_quality).collect();
        assert_eq!(q, [7, 6, 4, 2, 1, 6]);

        let l = ladder(std::slice::from_ref(&va), &[v720()], &h264_1080());
        assert_eq!(l.device, Some(HwDevice { kind: HwDeviceKind::Vaapi, path: Some("/dev/dri/renderD128".into()) }));
        assert_eq!(l.decode, Decode::Hardware { device: HwDeviceKind::Vaapi, decoder: None, output_format: "vaapi" });
        let hevc10 = InputSpec { codec: "h264".into(), pix_fmt: "yuv420p10le".into(), ..h264_1080() };
        let l = ladder(&[va], &[v720()], &hevc10);
        assert_eq!(l.upload, "format=nv12,hwupload");
        assert!(l.filters_need_device);
    }

    #[test]
    fn qsv_uses_its_decoder_and_presets() {
        let qsv = enc("h264_qsv", EncoderKind::Qsv, "");
        let r = recipe(&qsv, &v720(), &h264_1080());
        assert_eq!(r.filter, "scale_qsv=w=1280:h=720");
        assert_eq!((r.pix_fmt, r.sw_pix_fmt), ("qsv", "nv12"));
        assert_eq!(r.option("preset"), Some("faster"));
        assert_eq!(r.option("look_ahead"), Some("0"));
        assert_eq!(r.option("forced_idr"), Some("1"));
        let presets: Vec<_> = (0..6).map(qsv_preset).collect();
        assert_eq!(presets, ["veryfast", "veryfast", "faster", "fast", "medium", "veryfast"]);
        let l = ladder(std::slice::from_ref(&qsv), &[v720()], &h264_1080());
        assert_eq!(l.device, Some(HwDevice { kind: HwDeviceKind::Qsv, path: None }));
        assert_eq!(
            l.decode,
            Decode::Hardware { device: HwDeviceKind::Qsv, decoder: Some("h264_qsv".into()), output_format: "qsv" }
        );
        let i422 = InputSpec { pix_fmt: "yuv422p".into(), ..h264_1080() };
        assert_eq!(ladder(&[qsv], &[v720()], &i422).upload, "format=nv12,hwupload=extra_hw_frames=64");
    }

    #[test]
    fn mixed_ladder_downloads_scaled_pictures_for_software_variants() {
        let nv = enc("h264_nvenc", EncoderKind::Nvenc, "cuda:0");
        let x = enc("libx264", EncoderKind::Software, "");
        let v360 = VariantSpec { width: 640, height: 360, bitrate_kbps: 600, ..v720() };
        let copy = VariantSpec { passthrough: true, ..v720() };
        let l = ladder(&[nv, x.clone(), x], &[v720(), v360, copy], &h264_1080());
        assert!(l.full_gpu);
        assert_eq!(l.variants[1].encoder, "libx264");
        assert_eq!(l.variants[1].filter, "scale_cuda=640:360,hwdownload,format=nv12");
        assert_eq!(l.variants[1].pix_fmt, "nv12");
        assert_eq!(l.variants[1].option("preset"), Some("veryfast"));
        assert_eq!(l.variants[2].encoder, "copy");
    }

    /// NVDEC decodes, `scale_cuda` makes every rung on the GPU, one `hwdownload` per rung of the small
    /// picture, libx264 encodes (the decode path of GPUs without NVENC); passthrough stays a copy.
    #[test]
    fn cuda_decode_path_scales_on_the_gpu_and_encodes_with_x264() {
        let x = EncoderInfo { decode: Some(HwDeviceKind::Cuda), ..enc("libx264", EncoderKind::Software, "cuda:1") };
        let v480 = VariantSpec { width: 0, height: 480, bitrate_kbps: 1200, ..v720() };
        let v360 = VariantSpec { width: 640, height: 360, bitrate_kbps: 600, ..v720() };
        let copy = VariantSpec { passthrough: true, ..v720() };
        let l = ladder(&[x.clone(), x.clone(), x.clone(), x.clone()], &[v720(), v480, v360, copy], &h264_1080());
        assert_eq!(l.device, Some(HwDevice { kind: HwDeviceKind::Cuda, path: Some("1".into()) }));
        assert_eq!(l.decode, Decode::Hardware { device: HwDeviceKind::Cuda, decoder: None, output_format: "cuda" });
        assert!(l.full_gpu && !l.filters_need_device);
        assert_eq!(l.upload, "");
        assert_eq!(
            l.filter_graph(),
            "[in]split=4[s0][s1][s2][s3];[s0]scale_cuda=1280:720,hwdownload,format=nv12[out0];\
             [s1]scale_cuda=852:480,hwdownload,format=nv12[out1];[s2]scale_cuda=640:360,hwdownload,format=nv12[out2];\
             [s3]null[out3]"
        );
        for r in &l.variants[..3] {
            assert_eq!((r.encoder.as_str(), r.hardware, r.pix_fmt, r.sw_pix_fmt), ("libx264", false, "nv12", "nv12"));
            assert_eq!(r.option("preset"), Some("veryfast"));
            assert_eq!(r.option("x264-params"), Some("scenecut=0:open_gop=0"));
            assert_eq!(r.option("g"), Some("60"), "keyframes stay on the segment grid");
        }
        assert_eq!(l.variants[3].encoder, "copy");
        // A rung at the source's size downloads the decoded picture as it is.
        let same = VariantSpec { width: 0, height: 0, ..v720() };
        assert_eq!(
            ladder(std::slice::from_ref(&x), &[same], &h264_1080()).variants[0].filter,
            "null,hwdownload,format=nv12"
        );
        // HEVC 8-bit decodes on NVDEC too.
        let hevc = InputSpec { codec: "hevc".into(), ..h264_1080() };
        assert!(ladder(std::slice::from_ref(&x), &[v720()], &hevc).full_gpu);
    }

    /// Input NVDEC or the VA-API device cannot decode (4:2:2, 10-bit) is not uploaded just to be scaled:
    /// the whole ladder stays on the CPU.
    #[test]
    fn decode_path_stays_on_the_cpu_for_input_the_gpu_cannot_decode() {
        let x = EncoderInfo { decode: Some(HwDeviceKind::Cuda), ..enc("libx264", EncoderKind::Software, "cuda:0") };
        for pix in ["yuv422p", "yuv444p", "yuv420p10le"] {
            let input = InputSpec { pix_fmt: pix.into(), ..h264_1080() };
            let l = ladder(std::slice::from_ref(&x), &[v720()], &input);
            assert_eq!((l.device.clone(), l.decode.clone(), l.full_gpu), (None, Decode::Software, false), "{pix}");
            assert!(l.variants[0].filter.starts_with("scale=1280:720"), "{}", l.variants[0].filter);
            assert_eq!(l.variants[0].pix_fmt, "yuv420p");
        }
    }

    #[test]
    fn vaapi_decode_path() {
        let x = EncoderInfo {
            decode: Some(HwDeviceKind::Vaapi),
            ..enc("libx264", EncoderKind::Software, "/dev/dri/renderD129")
        };
        let l = ladder(std::slice::from_ref(&x), &[v720()], &h264_1080());
        assert_eq!(l.device, Some(HwDevice { kind: HwDeviceKind::Vaapi, path: Some("/dev/dri/renderD129".into()) }));
        assert_eq!(l.decode, Decode::Hardware { device: HwDeviceKind::Vaapi, decoder: None, output_format: "vaapi" });
        assert_eq!(
            l.filter_graph(),
            "[in]split=1[s0];[s0]scale_vaapi=w=1280:h=720:format=nv12,hwdownload,format=nv12[out0]"
        );
        assert_eq!(l.variants[0].pix_fmt, "nv12");
    }

    #[test]
    fn sizes_and_defaults() {
        let input = h264_1080();
        let only_h = VariantSpec { width: 0, height: 480, ..v720() };
        assert_eq!(output_size(&only_h, &input), Some((852, 480)));
        assert_eq!(output_size(&only_h, &InputSpec::default()), Some((-2, 480)));
        let only_w = VariantSpec { width: 640, height: 0, ..v720() };
        assert_eq!(output_size(&only_w, &input), Some((640, 360)));
        let r = recipe(&enc("libx264", EncoderKind::Software, ""), &only_h, &InputSpec::default());
        assert_eq!(r.filter, "scale=-2:480:flags=bilinear");
        let zero = VariantSpec { bitrate_kbps: 0, framerate: 0, segment_seconds: 3, ..v720() };
        assert_eq!(encoder_bitrate(&zero), 1008);
        assert_eq!(framerate(&zero), 24);
        assert_eq!(recipe(&enc("libx264", EncoderKind::Software, ""), &zero, &input).gop, 72);
    }

    #[test]
    fn nvenc_session_cap_moves_the_rest_to_software() {
        let v = |w: u32, b: u32| VariantSpec { width: w, height: 0, bitrate_kbps: b, ..v720() };
        let ladder = [v(640, 800), v(1920, 6000), v(1280, 3000), v(854, 1200)];
        let plan = plan_sessions(&ladder, "h264_nvenc", Some(3));
        assert_eq!(plan.encoders, ["libx264", "h264_nvenc", "h264_nvenc", "h264_nvenc"]);
        assert!(plan.message.as_deref().unwrap_or("").contains("variant(s) 1 are encoded in software"));
        let plan = plan_sessions(&ladder, "h264_nvenc", None);
        assert!(plan.encoders.iter().all(|e| e == "h264_nvenc"));
        assert_eq!(plan.message, None);
        let plan = plan_sessions(&ladder, "h264_vaapi", Some(1));
        assert!(plan.encoders.iter().all(|e| e == "h264_vaapi"));
        let with_copy = [VariantSpec { passthrough: true, ..v(1920, 6000) }, v(1280, 3000)];
        let plan = plan_sessions(&with_copy, "h264_nvenc", Some(1));
        assert_eq!(plan.encoders, ["copy", "h264_nvenc"]);
        assert_eq!(plan.message, None);

        assert_eq!(nvenc_session_cap("NVIDIA GeForce RTX 3060", "525.147.05"), Some(3));
        assert_eq!(nvenc_session_cap("NVIDIA GeForce RTX 4090", "535.104.05"), Some(5));
        assert_eq!(nvenc_session_cap("NVIDIA GeForce RTX 4090", "555.42.02"), Some(8));
        assert_eq!(nvenc_session_cap("NVIDIA RTX A4000", "535.104.05"), None);
        assert_eq!(nvenc_session_cap("Tesla T4", "470.82.01"), None);
    }
}
