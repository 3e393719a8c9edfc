//! The video section of the settings: the output variants, the latency level and the encoder.
//! `transcode` reads it; its setters and its part of the admin configuration are the server feature's
//! (`api::video`), as transcode sees no HTTP types.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Owncast's latency levels: (seconds per segment, playlist size) for levels 0..=4.
pub const LATENCY_LEVELS: [(u32, u32); 5] = [(1, 25), (2, 15), (3, 10), (4, 8), (5, 5)];
/// The latency level served as low-latency HLS (CMAF parts, blocking reload); the others are classic
/// MPEG-TS HLS as in Owncast.
pub const LOW_LATENCY_HLS_LEVEL: u32 = 0;
/// The default latency level (Owncast: 2).
pub const DEFAULT_LATENCY_LEVEL: u32 = 2;

/// One HLS quality variant (Owncast's StreamOutputVariant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamOutputVariant {
    #[schema(required)]
    pub name: String,
    #[schema(required)]
    pub video_passthrough: bool,
    #[schema(required)]
    pub audio_passthrough: bool,
    /// kbps; 0 means Owncast's default of 1200.
    #[schema(required)]
    pub video_bitrate: u32,
    /// kbps.
    #[schema(required)]
    pub audio_bitrate: u32,
    /// 0 keeps the aspect ratio from the other dimension (or the source size when both are 0).
    #[schema(required)]
    pub scaled_width: u32,
    #[schema(required)]
    pub scaled_height: u32,
    #[schema(required)]
    pub framerate: u32,
    /// 0 (fastest) ..= 4 (best quality), mapped to an encoder preset.
    #[schema(required)]
    pub cpu_usage_level: u32,
}

impl StreamOutputVariant {
    /// The encoder recipes' view of this variant (`hwaccel::VariantSpec`) with segments of
    /// `segment_seconds`: the one mapping the transcoder and the ladder-fit measurement share.
    pub fn spec(&self, segment_seconds: u32) -> hwaccel::VariantSpec {
        hwaccel::VariantSpec {
            passthrough: self.video_passthrough,
            width: self.scaled_width,
            height: self.scaled_height,
            bitrate_kbps: self.video_bitrate,
            framerate: self.framerate,
            cpu_usage_level: self.cpu_usage_level,
            segment_seconds: segment_seconds.max(1),
        }
    }
}

impl Default for StreamOutputVariant {
    /// Owncast's default variant: audio passthrough, 1200 kbps, 24 fps, cpuUsageLevel 2, no scaling.
    fn default() -> Self {
        Self {
            name: String::new(),
            video_passthrough: false,
            audio_passthrough: true,
            video_bitrate: 1200,
            audio_bitrate: 0,
            scaled_width: 0,
            scaled_height: 0,
            framerate: 24,
            cpu_usage_level: 2,
        }
    }
}

/// The video settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VideoSettings {
    pub video_quality_variants: Vec<StreamOutputVariant>,
    pub latency_level: u32,
    /// Encoder name (`libx264`, `h264_nvenc`, ...) or `auto`.
    pub video_codec: String,
}

impl Default for VideoSettings {
    fn default() -> Self {
        Self {
            video_quality_variants: vec![StreamOutputVariant::default()],
            latency_level: DEFAULT_LATENCY_LEVEL,
            video_codec: "auto".into(),
        }
    }
}

impl VideoSettings {
    /// (seconds per segment, playlist size) for the configured latency level, clamped to 0..=4.
    pub fn latency(&self) -> (u32, u32) {
        LATENCY_LEVELS[self.latency_level.min(4) as usize]
    }

    /// Whether the configured latency level is served as LL-HLS (`LOW_LATENCY_HLS_LEVEL`).
    pub fn low_latency_hls(&self) -> bool {
        self.latency_level == LOW_LATENCY_HLS_LEVEL
    }
}
