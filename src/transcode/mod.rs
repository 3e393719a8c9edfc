//! Transcoding: the worker process that turns the broadcaster's FLV into HLS variants, and the
//! daemon-side supervision of that worker.
//!
//! The daemon re-executes itself as `castd worker --config <json>` (`WorkerConfig`), writes the FLV
//! byte stream to the child's stdin and reads `WorkerEvent`s, one JSON object per line, from its
//! stdout; the child logs to stderr. Keeping libav in a child means a codec or driver crash cannot
//! take down chat or the API: `supervisor` restarts the worker (see there for the policy).
//!
//! - `recipe`: which encoder and which options per variant (an adapter over `hwaccel::recipe`).
//! - `worker`: the libav pipeline (demux once, decode once, scale and encode per variant, HLS mux).
//! - `scale`: fast area downscaling for the exact 2:1 and 3:2 ladder steps (the rest is libswscale).
//! - `stage`: the software ladder's encoding stages (a thread per variant: scale, encode, pass the picture on).
//! - `hw`: the worker's hardware path (device, hardware decode or one upload, libavfilter ladder).
//! - `supervisor`: spawning, feeding, restarting, and the stream's online/offline life cycle.

pub mod hw;
pub mod recipe;
pub mod scale;
pub mod stage;
pub mod supervisor;
pub mod worker;

use std::path::PathBuf;
use std::sync::OnceLock;

use hwaccel::EncoderInfo;

use serde::{Deserialize, Serialize};

use crate::config::StreamOutputVariant;

/// Errors of the transcoder (worker and supervisor).
#[derive(Debug, thiserror::Error)]
pub enum TranscodeError {
    #[error("libav: {0}")]
    Av(#[from] ffmpeg_next::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("the input has no video stream")]
    NoVideo,
    #[error("encoder {0} is not available in this libavcodec")]
    EncoderMissing(String),
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// An encoder (or the hardware path feeding it) failed; `hardware` asks the supervisor to fall back.
    #[error("encoder {encoder} failed: {message}")]
    Encoder { encoder: String, hardware: bool, message: String },
    #[error("{0}")]
    Other(String),
}

/// Test/debug switch (`--debug-encoder-fault SECONDS`, env `CASTD_DEBUG_ENCODER_FAULT`): the first worker
/// of each stream makes its encoder fail this many media seconds after its first frame, reported as a
/// hardware encoder failure, so the supervisor's fallback to libx264 runs for real. Never set in production.
pub static DEBUG_ENCODER_FAULT: OnceLock<f64> = OnceLock::new();

fn default_encoder() -> String {
    recipe::SOFTWARE_ENCODER.to_string()
}

/// Everything the worker needs to know; passed as JSON on its command line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerConfig {
    /// `<data-dir>/hls`; variant N goes to `<hls_dir>/N/`.
    pub hls_dir: PathBuf,
    pub segment_seconds: u32,
    pub list_size: u32,
    pub variants: Vec<StreamOutputVariant>,
    /// Encoder name for every non-passthrough variant when `encoders` is empty (default libx264).
    #[serde(default = "default_encoder")]
    pub encoder: String,
    /// The encoder of each variant, in order (`copy` for passthrough), as planned by the supervisor
    /// (`hwaccel::plan_sessions`); overrides `encoder`.
    #[serde(default)]
    pub encoders: Vec<EncoderInfo>,
    /// See [`DEBUG_ENCODER_FAULT`]: fail the encoder this many media seconds in (test/debug only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_encoder_fault: Option<f64>,
    /// Continue existing playlists (a restart): `append_list` + `EXT-X-DISCONTINUITY`.
    pub append: bool,
    /// Part of every segment file name, new for each worker run so restarts never overwrite.
    pub segment_id: String,
}

impl WorkerConfig {
    /// The encoder of variant `n`: `encoders[n]` when planned, else `copy` for passthrough and `encoder`.
    pub fn encoder_of(&self, n: usize) -> Result<EncoderInfo, TranscodeError> {
        if let Some(e) = self.encoders.get(n) {
            return Ok(e.clone());
        }
        let passthrough = self.variants.get(n).is_some_and(|v| v.video_passthrough);
        recipe::encoder_info(if passthrough { "copy" } else { &self.encoder })
    }
}

/// Progress of one variant, as the worker reports it about once a second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VariantProgress {
    pub variant: usize,
    pub encoder: String,
    /// Frames encoded (or copied) per second of wall time over the last interval.
    pub fps: f64,
    /// Media seconds produced per wall second over the last interval (realtime factor).
    pub speed: f64,
    pub frames: u64,
}

/// What the worker tells the daemon, one JSON object per stdout line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum WorkerEvent {
    /// Inputs opened and encoders set up.
    Started {
        width: u32,
        height: u32,
        encoders: Vec<String>,
    },
    Progress {
        variants: Vec<VariantProgress>,
    },
    /// A variant playlist was rewritten with a new segment.
    Segment {
        variant: usize,
    },
    /// Every variant has a segment and the master playlist is written: the stream is playable.
    Ready,
    Error {
        message: String,
    },
    /// An encoder failed; the worker exits right after. `hardware`: the supervisor falls back to libx264.
    EncoderFailed {
        encoder: String,
        hardware: bool,
        message: String,
    },
    /// The input ended and every playlist is finalised.
    Finished,
}

/// A short random id for segment names.
pub fn new_segment_id() -> String {
    crate::password::random_token(6).chars().filter(char::is_ascii_alphanumeric).collect()
}
