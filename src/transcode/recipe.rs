//! Encoder recipes: a thin adapter from castd's variants to `hwaccel::recipe`, where every recipe
//! (software and hardware) is defined once.
//!
//! `recipe_for` maps (encoder name, variant, segment length) to an `EncoderRecipe` (`hwaccel::Recipe`:
//! encoder, AVOptions, pixel formats, filter chain, scaler flags). The rates follow Owncast
//! (owncast-compat.md §4): `b = bitrate − 192 kbps`, `maxrate = bufsize = 1.08 × b`,
//! `g = keyint_min = fps × segment seconds`; libx264 gets `x264-params scenecut=0:open_gop=0`,
//! `profile high`, `tune zerolatency` and the preset of the cpuUsageLevel.

use hwaccel::{EncoderInfo, EncoderKind, InputSpec, VariantSpec, KNOWN_ENCODERS};

use super::{TranscodeError, WorkerConfig};
use crate::config::StreamOutputVariant;

pub use hwaccel::recipe::{x264_preset, SOFTWARE_ENCODER};

/// How to encode one variant (the hwaccel crate's recipe).
pub type EncoderRecipe = hwaccel::Recipe;

/// Whether `encoder` is a hardware encoder (`copy` and libx264 are not).
pub fn is_hardware(encoder: &str) -> bool {
    KNOWN_ENCODERS.iter().any(|(name, kind)| *name == encoder && *kind != EncoderKind::Software)
}

/// The hwaccel view of a variant (`StreamOutputVariant::spec`).
pub fn variant_spec(v: &StreamOutputVariant, segment_seconds: u32) -> VariantSpec {
    v.spec(segment_seconds)
}

/// An `EncoderInfo` for a known encoder name (no device: the default one), or `copy`.
pub fn encoder_info(name: &str) -> Result<EncoderInfo, TranscodeError> {
    if name == "copy" {
        return Ok(EncoderInfo {
            name: "copy".into(),
            kind: EncoderKind::Software,
            available: true,
            device: String::new(),
            reason: String::new(),
            decode: None,
        });
    }
    let (name, kind) = KNOWN_ENCODERS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| TranscodeError::EncoderMissing(name.to_string()))?;
    Ok(EncoderInfo {
        name: name.to_string(),
        kind: *kind,
        available: true,
        device: String::new(),
        reason: String::new(),
        decode: None,
    })
}

impl WorkerConfig {
    /// The encoder of variant `n`: `encoders[n]` when planned, else `copy` for passthrough and `encoder`.
    pub fn encoder_of(&self, n: usize) -> Result<EncoderInfo, TranscodeError> {
        if let Some(e) = self.encoders.get(n) {
            return Ok(e.clone());
        }
        let passthrough = self.variants.get(n).is_some_and(|v| v.video_passthrough);
        encoder_info(if passthrough { "copy" } else { &self.encoder })
    }
}

/// The video bitrate (kbps) the encoder gets for a variant: Owncast's `bitrate − 192`.
pub fn encoder_bitrate(v: &StreamOutputVariant) -> u32 {
    hwaccel::recipe::encoder_bitrate(&variant_spec(v, 1))
}

/// The variant's frame rate (Owncast's default for 0).
pub fn framerate(v: &StreamOutputVariant) -> u32 {
    hwaccel::recipe::framerate(&variant_spec(v, 1))
}

/// Build the recipe for `variant` on `encoder` (frames in system memory; the worker uses
/// `hwaccel::ladder` for hardware ladders once the input is known).
pub fn recipe_for(
    encoder: &str,
    variant: &StreamOutputVariant,
    segment_seconds: u32,
) -> Result<EncoderRecipe, TranscodeError> {
    let info = encoder_info(encoder)?;
    Ok(hwaccel::recipe(&info, &variant_spec(variant, segment_seconds), &InputSpec::default()))
}

/// An encoder's failure as the supervisor sees it (`hardware` asks for the fallback to libx264).
pub fn encoder_error(recipe: &EncoderRecipe, e: ffmpeg_next::Error) -> TranscodeError {
    TranscodeError::Encoder { encoder: recipe.encoder.clone(), hardware: recipe.hardware, message: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x264_follows_owncast_for_the_anchor_ladder() {
        let v720 = StreamOutputVariant { video_bitrate: 1800, framerate: 30, ..Default::default() };
        let r = recipe_for("libx264", &v720, 2).unwrap();
        let get = |k: &str| r.options.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(get("b"), "1608k");
        assert_eq!(get("maxrate"), "1736k");
        assert_eq!(get("bufsize"), "1736k");
        assert_eq!(get("g"), "60");
        assert_eq!(get("keyint_min"), "60");
        assert_eq!(get("preset"), "veryfast");
        let v360 = StreamOutputVariant { video_bitrate: 600, framerate: 30, ..Default::default() };
        let r = recipe_for("libx264", &v360, 2).unwrap();
        assert!(r.options.contains(&("b".into(), "408k".into())));
        assert!(r.options.contains(&("maxrate".into(), "440k".into())));
        assert_eq!((r.pix_fmt, r.sws_flags, r.hardware), ("yuv420p", "bilinear", false));
    }

    #[test]
    fn presets_and_defaults() {
        assert_eq!(x264_preset(0), "ultrafast");
        assert_eq!(x264_preset(4), "fast");
        assert_eq!(x264_preset(9), "superfast");
        let v = StreamOutputVariant { video_bitrate: 0, framerate: 0, ..Default::default() };
        assert_eq!(encoder_bitrate(&v), 1008);
        assert_eq!(framerate(&v), 24);
        assert!(recipe_for("h264_bogus", &v, 2).is_err());
        let nv = recipe_for("h264_nvenc", &v, 2).unwrap();
        assert!(nv.hardware && nv.pix_fmt == "cuda");
        assert!(is_hardware("h264_vaapi") && !is_hardware("libx264") && !is_hardware("copy"));
    }
}
