//! TRANSCODE_DEGRADED (a castd webhook type): the transcoder moved its x264 rungs to faster presets
//! because the box could not keep up with the ladder in real time (`degraded: true`), found that the
//! ladder does not fit even at the fastest preset (`fits: false`), or stepped back towards the
//! configured presets (`degraded: false` once it is back at them). The transcode supervisor publishes
//! it; webhooks deliver it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// One variant in a TRANSCODE_DEGRADED payload.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DegradedVariant {
    pub variant: usize,
    pub name: String,
    /// The x264 preset it uses now (absent: not an x264 rung).
    pub preset: Option<String>,
    /// The x264 preset it is configured with (cpuUsageLevel).
    pub configured_preset: Option<String>,
    /// The real-time factor it can sustain at its preset (media seconds per wall second).
    pub speed: f64,
}

/// TRANSCODE_DEGRADED's eventData.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscodeDegraded {
    /// The broadcast's stream id.
    pub stream_id: String,
    /// Whether any rung runs a faster preset than configured.
    pub degraded: bool,
    /// Whether the ladder keeps up in real time at this step (false: not even at `ultrafast`).
    pub fits: bool,
    /// Presets faster than configured (0: as configured).
    pub step: u32,
    pub variants: Vec<DegradedVariant>,
    /// The ladder's speed that led to the change (below 1: it fell behind real time).
    pub speed: f64,
    /// 1 − the ladder's load (negative: short by that fraction).
    pub headroom: f64,
    /// `behind`, `doesNotFit`, `fits` or `headroom`.
    pub reason: String,
    /// The health message, in words.
    pub message: String,
    pub timestamp: DateTime<Utc>,
}
