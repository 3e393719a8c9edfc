//! Encoder discovery, selection policy and per-encoder recipes for castd's transcoder.
//!
//! This crate knows the H.264 encoders castd can drive through libavcodec (`libx264`, `h264_nvenc`,
//! `h264_vaapi`, `h264_qsv`) and reports for each whether it works on this box. No HTTP, no SQLite.
//!
//! - [`probe`]: discovery by opening each encoder for real on its device (libavcodec through ffmpeg-next);
//! - [`select`]: the `auto` preference (NVENC > QSV > VA-API > x264) or a named encoder;
//! - [`recipe`]: pure-data per-encoder recipes (device, decode, filter graph, AVOptions) and NVENC session
//!   planning, consumed by the transcode worker;
//! - [`gpu`]: GPU statistics through NVML, when an NVIDIA driver is present.

pub mod gpu;
pub mod probe;
pub mod recipe;

pub use recipe::{
    ladder, plan_sessions, recipe, Decode, HwDevice, HwDeviceKind, InputSpec, Ladder, Recipe, SessionPlan, VariantSpec,
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
}

/// The encoders castd knows, in order of preference for `auto` (hardware first).
pub const KNOWN_ENCODERS: [(&str, EncoderKind); 4] = [
    ("h264_nvenc", EncoderKind::Nvenc),
    ("h264_qsv", EncoderKind::Qsv),
    ("h264_vaapi", EncoderKind::Vaapi),
    ("libx264", EncoderKind::Software),
];

/// The software encoder alone, before (or without) a hardware probe.
pub fn software_encoders() -> Vec<EncoderInfo> {
    vec![EncoderInfo {
        name: "libx264".into(),
        kind: EncoderKind::Software,
        available: true,
        device: String::new(),
        reason: String::new(),
    }]
}

/// Pick the encoder for `wanted` (`auto` or a name) among `found`: `auto` takes the first available in
/// `KNOWN_ENCODERS` order; a name must be available. Returns `None` when nothing fits.
pub fn select<'a>(wanted: &str, found: &'a [EncoderInfo]) -> Option<&'a EncoderInfo> {
    let available = |name: &str| found.iter().find(|e| e.name == name && e.available);
    if wanted == "auto" || wanted.is_empty() {
        KNOWN_ENCODERS.iter().find_map(|(name, _)| available(name))
    } else {
        available(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, kind: EncoderKind, available: bool) -> EncoderInfo {
        EncoderInfo { name: name.into(), kind, available, device: String::new(), reason: String::new() }
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
}
