//! Encoder recipes: which libavcodec encoder a variant uses and with which options.
//!
//! This is the seam the hardware encoders plug into: `recipe_for` maps (encoder name, variant,
//! segment length) to an `EncoderRecipe` (encoder, AVOptions, pixel format, scaler flags). Only
//! `libx264` is implemented here, with Owncast's argument set (owncast-compat.md §4):
//! `b = bitrate − 192 kbps`, `maxrate = bufsize = 1.08 × b`, `g = keyint_min = fps × segment seconds`,
//! `x264-params scenecut=0:open_gop=0`, `profile high`, `tune zerolatency`, preset by cpuUsageLevel.

use super::TranscodeError;
use crate::config::StreamOutputVariant;

/// Owncast's x264 presets for cpuUsageLevel 0..=4.
pub const X264_PRESETS: [&str; 5] = ["ultrafast", "superfast", "veryfast", "faster", "fast"];
/// Owncast's preset when the level is out of range.
pub const X264_DEFAULT_PRESET: &str = "superfast";
/// Owncast's bitrate when a variant says 0.
pub const DEFAULT_VIDEO_BITRATE: u32 = 1200;
/// Owncast's frame rate when a variant says 0.
pub const DEFAULT_FRAMERATE: u32 = 24;
/// The lowest video bitrate we hand an encoder after Owncast's −192 kbps (kbps).
const MIN_VIDEO_BITRATE: u32 = 64;

/// How to encode one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderRecipe {
    /// libavcodec encoder name.
    pub encoder: String,
    /// Options passed to `avcodec_open2` (generic and private AVOptions alike).
    pub options: Vec<(String, String)>,
    /// Pixel format the encoder is fed.
    pub pix_fmt: &'static str,
    /// swscale flags name for the scaler (`bilinear`, as Owncast's `-sws_flags`).
    pub scaler: &'static str,
    /// Whether this is a hardware encoder (the supervisor falls back to software when it keeps failing).
    pub hardware: bool,
    pub framerate: u32,
    /// Keyframe interval in frames: one per segment.
    pub gop: u32,
}

/// The encoder used when nothing else is chosen.
pub const SOFTWARE_ENCODER: &str = "libx264";

/// Whether `encoder` is a hardware encoder.
pub fn is_hardware(encoder: &str) -> bool {
    encoder != SOFTWARE_ENCODER
}

/// The video bitrate (kbps) the encoder gets for a variant: Owncast's `bitrate − 192`.
pub fn encoder_bitrate(v: &StreamOutputVariant) -> u32 {
    let b = if v.video_bitrate == 0 { DEFAULT_VIDEO_BITRATE } else { v.video_bitrate };
    b.saturating_sub(192).max(MIN_VIDEO_BITRATE)
}

/// The variant's frame rate (Owncast's default for 0).
pub fn framerate(v: &StreamOutputVariant) -> u32 {
    if v.framerate == 0 {
        DEFAULT_FRAMERATE
    } else {
        v.framerate
    }
}

/// Owncast's x264 preset for a cpuUsageLevel.
pub fn x264_preset(level: u32) -> &'static str {
    X264_PRESETS.get(level as usize).copied().unwrap_or(X264_DEFAULT_PRESET)
}

/// Build the recipe for `variant` on `encoder`.
pub fn recipe_for(
    encoder: &str,
    variant: &StreamOutputVariant,
    segment_seconds: u32,
) -> Result<EncoderRecipe, TranscodeError> {
    let fps = framerate(variant);
    let gop = fps * segment_seconds.max(1);
    let b = encoder_bitrate(variant);
    let maxrate = b * 108 / 100;
    match encoder {
        SOFTWARE_ENCODER => {
            let options = vec![
                ("b".to_string(), format!("{b}k")),
                ("maxrate".to_string(), format!("{maxrate}k")),
                ("bufsize".to_string(), format!("{maxrate}k")),
                ("g".to_string(), gop.to_string()),
                ("keyint_min".to_string(), gop.to_string()),
                ("sc_threshold".to_string(), "0".to_string()),
                ("preset".to_string(), x264_preset(variant.cpu_usage_level).to_string()),
                ("tune".to_string(), "zerolatency".to_string()),
                ("profile".to_string(), "high".to_string()),
                ("x264-params".to_string(), "scenecut=0:open_gop=0".to_string()),
                ("forced-idr".to_string(), "1".to_string()),
            ];
            Ok(EncoderRecipe {
                encoder: encoder.to_string(),
                options,
                pix_fmt: "yuv420p",
                scaler: "bilinear",
                hardware: false,
                framerate: fps,
                gop,
            })
        }
        // Hardware encoders (h264_nvenc, h264_vaapi, h264_qsv) are added by the encoders issue.
        other => Err(TranscodeError::EncoderMissing(other.to_string())),
    }
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
    }

    #[test]
    fn presets_and_defaults() {
        assert_eq!(x264_preset(0), "ultrafast");
        assert_eq!(x264_preset(4), "fast");
        assert_eq!(x264_preset(9), "superfast");
        let v = StreamOutputVariant { video_bitrate: 0, framerate: 0, ..Default::default() };
        assert_eq!(encoder_bitrate(&v), 1008);
        assert_eq!(framerate(&v), 24);
        assert!(recipe_for("h264_nvenc", &v, 2).is_err());
    }
}
