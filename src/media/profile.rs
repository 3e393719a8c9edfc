//! The running profile of a broadcast: what the transcoder runs (the ladder as transcoded, segment length
//! and list size, latency mode, real-time variant, encoders, stream id and start time), decided once when
//! transcoding starts. Every output and every report reads it from the broadcast instead of the current
//! settings, which an admin may change mid-stream.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::StreamOutputVariant;

/// What a broadcast is, as the transcoder runs it (see the module doc). Set when transcoding starts;
/// changed only by the transcoder (a fallback to software or to passthrough changes `encoders` or
/// `variants`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub stream_id: String,
    pub started_at: DateTime<Utc>,
    /// The ladder as transcoded, in order (variant N is `<dir>/N/`).
    pub variants: Vec<StreamOutputVariant>,
    /// Seconds per segment.
    pub segment_seconds: u32,
    /// Segments per playlist.
    pub list_size: u32,
    /// The latency level the segment length and list size came from.
    pub latency_level: u32,
    /// LL-HLS (CMAF parts) instead of MPEG-TS segments.
    pub low_latency: bool,
    /// The variant WebRTC viewers get, when WebRTC is on and one is encoded.
    pub realtime_variant: Option<usize>,
    /// The encoder of each variant (`copy` for passthrough).
    pub encoders: Vec<String>,
}
