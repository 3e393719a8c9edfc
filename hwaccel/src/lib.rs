//! Encoder discovery, selection policy and per-encoder recipes for castd's transcoder.
//!
//! This crate knows the H.264 encoders castd can drive through libavcodec (`libx264`, `h264_nvenc`,
//! `h264_vaapi`, `h264_qsv`) and reports for each whether it works on this box. No HTTP, no SQLite.
//!
//! - [`probe`]: discovery by opening each encoder for real on its device (libavcodec through ffmpeg-next);
//! - [`select`]: the `auto` preference (NVENC > QSV > VA-API > x264 with GPU decode and scaling > x264) or
//!   a named encoder;
//! - [`recipe`]: pure-data per-encoder recipes (device, decode, filter graph, AVOptions) and NVENC session
//!   planning, consumed by the transcode worker;
//! - [`gpu`]: GPU statistics through NVML, when an NVIDIA driver is present.

pub mod gpu;
pub mod hwdec;
pub mod probe;
pub mod recipe;

pub use recipe::{
    ladder, plan_sessions, recipe, Decode, HwDevice, HwDeviceKind, InputSpec, Ladder, Recipe, SessionPlan, VariantSpec,
    SOFTWARE_ENCODER,
};

use serde::{Deserialize, Serialize};

/// The family of an encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderKind {
    Software,
    Nvenc,
    Vaapi,
    Qsv,
}

/// What the probe found about one encoder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderInfo {
    pub name: String,
    pub kind: EncoderKind,
    pub available: bool,
    /// The device it runs on (`/dev/dri/renderD128`, `cuda:0`), empty for software.
    pub device: String,
    /// Why it is unavailable (the driver's own error), empty when available.
    pub reason: String,
    /// A decode path: this (software) encoder with the input decoded and every rung scaled on `device`
    /// (NVDEC + `scale_cuda`, or VA-API decode + `scale_vaapi`), one download of each rung's small picture.
    /// `None` for a plain encoder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<HwDeviceKind>,
}

impl EncoderInfo {
    /// Whether this choice uses a GPU or other device (a hardware encoder, or a decode path).
    pub fn uses_device(&self) -> bool {
        self.kind != EncoderKind::Software || self.decode.is_some()
    }

    /// How the choice is named to people: `libx264` , `h264_nvenc`, `libx264 (decode and scaling on cuda:0)`.
    pub fn label(&self) -> String {
        match self.decode {
            Some(d) if self.device.is_empty() => format!("{} (decode and scaling on {})", self.name, d.av_name()),
            Some(_) => format!("{} (decode and scaling on {})", self.name, self.device),
            None => self.name.clone(),
        }
    }
}

/// The encoders castd knows, in order of preference for `auto` (hardware first).
pub const KNOWN_ENCODERS: [(&str, EncoderKind); 4] = [
    ("h264_nvenc", EncoderKind::Nvenc),
    ("h264_qsv", EncoderKind::Qsv),
    ("h264_vaapi", EncoderKind::Vaapi),
    ("libx264", EncoderKind::Software),
];

/// The decode paths castd probes, in order of preference: libx264 encoding pictures decoded and scaled on
/// an NVIDIA GPU (NVDEC + `scale_cuda`), then on a VA-API device. They serve boxes whose GPU decodes but
/// cannot encode (data-centre NVIDIA cards have NVDEC but no NVENC) or whose encoder sessions are used up.
pub const KNOWN_DECODE_PATHS: [(&str, HwDeviceKind); 2] =
    [("decode:cuda", HwDeviceKind::Cuda), ("decode:vaapi", HwDeviceKind::Vaapi)];

/// The software encoder alone, before (or without) a hardware probe.
pub fn software_encoders() -> Vec<EncoderInfo> {
    vec![EncoderInfo {
        name: "libx264".into(),
        kind: EncoderKind::Software,
        available: true,
        device: String::new(),
        reason: String::new(),
        decode: None,
    }]
}

/// Pick the encoder for `wanted` (`auto` or a name) among `found`: `auto` takes the first available hardware
/// encoder in `KNOWN_ENCODERS` order, then the first available decode path (libx264 with GPU decode and
/// scaling), then plain libx264; a name must be available (a named `libx264` is plain libx264: the CPU does
/// everything, as asked). Returns `None` when nothing fits.
pub fn select<'a>(wanted: &str, found: &'a [EncoderInfo]) -> Option<&'a EncoderInfo> {
    let available = |name: &str| found.iter().find(|e| e.name == name && e.available && e.decode.is_none());
    if wanted == "auto" || wanted.is_empty() {
        let hardware = KNOWN_ENCODERS.iter().filter(|(_, kind)| *kind != EncoderKind::Software);
        hardware
            .clone()
            .find_map(|(name, _)| available(name))
            .or_else(|| {
                KNOWN_DECODE_PATHS
                    .iter()
                    .find_map(|(_, kind)| found.iter().find(|e| e.available && e.decode == Some(*kind)))
            })
            .or_else(|| available(SOFTWARE_ENCODER))
    } else {
        available(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, kind: EncoderKind, available: bool) -> EncoderInfo {
        EncoderInfo { name: name.into(), kind, available, device: String::new(), reason: String::new(), decode: None }
    }

    #[test]
    fn auto_prefers_hardware_that_works() {
        let found = vec![
            info("libx264", EncoderKind::Software, true),
            info("h264_nvenc", EncoderKind::Nvenc, false),
            info("h264_vaapi", EncoderKind::Vaapi, true),
        ];
        assert_eq!(select("auto", &found).map(|e| e.name.as_str()), Some("h264_vaapi"));
        assert_eq!(select("h264_nvenc", &found), None);
        assert_eq!(select("libx264", &found).map(|e| e.name.as_str()), Some("libx264"));
        assert_eq!(select("auto", &software_encoders()).map(|e| e.name.as_str()), Some("libx264"));
    }

    #[test]
    fn auto_takes_a_decode_path_when_no_gpu_encodes() {
        let cuda = EncoderInfo {
            device: "cuda:0".into(),
            decode: Some(HwDeviceKind::Cuda),
            ..info("libx264", EncoderKind::Software, true)
        };
        let vaapi_dec = EncoderInfo {
            device: "/dev/dri/renderD128".into(),
            decode: Some(HwDeviceKind::Vaapi),
            ..info("libx264", EncoderKind::Software, true)
        };
        let found = vec![
            info("h264_nvenc", EncoderKind::Nvenc, false),
            info("h264_vaapi", EncoderKind::Vaapi, false),
            info("libx264", EncoderKind::Software, true),
            vaapi_dec.clone(),
            cuda.clone(),
        ];
        assert_eq!(select("auto", &found), Some(&cuda), "NVDEC first among decode paths");
        assert_eq!(select("libx264", &found).map(|e| e.decode), Some(None), "a named libx264 is the CPU alone");
        assert!(cuda.uses_device() && !found[2].uses_device());
        assert_eq!(cuda.label(), "libx264 (decode and scaling on cuda:0)");
        let broken = EncoderInfo { available: false, reason: "no NVDEC".into(), ..cuda.clone() };
        let found = vec![info("libx264", EncoderKind::Software, true), broken, vaapi_dec.clone()];
        assert_eq!(select("auto", &found), Some(&vaapi_dec));
        let mut with_nvenc = found.clone();
        with_nvenc.push(info("h264_nvenc", EncoderKind::Nvenc, true));
        assert_eq!(select("auto", &with_nvenc).map(|e| e.name.as_str()), Some("h264_nvenc"), "a GPU encoder wins");
    }
}
