//! The video settings (`config::VideoSettings`: output variants, latency level, encoder) on behalf of
//! `transcode`, which reads them but sees no HTTP types: their setters (`/api/admin/config/video/*`)
//! and their part of the admin server configuration.

use std::sync::Arc;

use serde::Serialize;
use utoipa::ToSchema;

use super::Server;
use crate::config::validate::{self, ValidationError};
use crate::config::StreamOutputVariant;
use crate::http::setters::{self, set, Setter};
use crate::http::{Registry, ValueDoc};

use ValueDoc::Json as JsonSchema;

const CODEC: &str = r#"{"type":"string","pattern":"^[A-Za-z0-9_]{1,64}$"}"#;
pub const VARIANTS: &str = r#"{"type":"array","minItems":1,"maxItems":10,"items":{"type":"object","properties":{
  "name":{"type":"string"},"videoPassthrough":{"type":"boolean"},"audioPassthrough":{"type":"boolean"},
  "videoBitrate":{"type":"integer","minimum":0,"maximum":100000},
  "audioBitrate":{"type":"integer","minimum":0,"maximum":1000},
  "scaledWidth":{"type":"integer","minimum":0,"maximum":7680,"multipleOf":2},
  "scaledHeight":{"type":"integer","minimum":0,"maximum":4320,"multipleOf":2},
  "framerate":{"type":"integer","minimum":0,"maximum":120},
  "cpuUsageLevel":{"type":"integer","minimum":0,"maximum":4}}}}"#;

/// The video setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Server>] = &[
    Setter::new("video/streamoutputvariants", "Output quality variants", JsonSchema(VARIANTS), |_, v, s| {
        set(&mut s.video.video_quality_variants, validate::variants(v))
    }),
    Setter::new(
        "video/streamlatencylevel",
        "Latency level 0 (lowest) to 4",
        JsonSchema(r#"{"type":"integer","minimum":0,"maximum":4}"#),
        |_, v, s| {
            // The range check makes the narrowing exact.
            set(&mut s.video.latency_level, validate::integer(v, 0, 4).map(|n| n as u32))
        },
    ),
    Setter::new(
        "video/codec",
        "Video encoder: auto or an available encoder name",
        JsonSchema(CODEC),
        |server: &Server, v, s| {
            let wanted = validate::string(v, 64)?;
            let available = server.available_codecs();
            if wanted != "auto" && !available.contains(&wanted) {
                return Err(ValidationError(format!(
                    "encoder '{wanted}' is not available on this server; available: auto, {}",
                    available.join(", ")
                )));
            }
            s.video.video_codec = wanted;
            Ok(())
        },
    )
    .server_wide(),
];

/// The video setter routes.
pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    reg.schema::<StreamOutputVariant>();
    setters::register(reg, server, SETTERS);
}

/// `videoSettings` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = VideoSettings)]
#[serde(rename_all = "camelCase")]
pub struct VideoView {
    pub video_quality_variants: Vec<StreamOutputVariant>,
    pub latency_level: u32,
}

/// The video part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoConfigPart {
    pub video_settings: VideoView,
    pub video_codec: String,
    /// The encoders that can be used on this server.
    pub supported_codecs: Vec<String>,
}

/// The video part of the admin server configuration.
pub fn server_config(server: &Server, s: &crate::config::Settings) -> VideoConfigPart {
    VideoConfigPart {
        video_settings: VideoView {
            video_quality_variants: s.video.video_quality_variants.clone(),
            latency_level: s.video.latency_level,
        },
        video_codec: s.video.video_codec.clone(),
        supported_codecs: server.available_codecs(),
    }
}
