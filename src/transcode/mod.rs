//! Transcoding: the worker process that turns the broadcaster's FLV into HLS variants, and the
//! daemon-side supervision of that worker.
//!
//! The daemon re-executes itself as `castd worker --config <json>` (`WorkerConfig`), writes the FLV
//! byte stream to the child's stdin and reads `WorkerEvent`s, one JSON object per line, from its
//! stdout; the child logs to stderr. Keeping libav in a child means a codec or driver crash cannot
//! take down chat or the API: `supervisor` restarts the worker (see there for the policy).
//!
//! - `recipe`: which encoder and which options per variant (an adapter over `hwaccel::recipe`); the
//!   daemon chooses with it, the worker opens what it chose.
//! - `worker`: everything that runs only in the child process: the libav pipeline (demux once, decode
//!   once, scale and encode per variant, HLS mux) and its files `worker::stage` (the software
//!   ladder's encoding stages), `worker::scale` (fast 2:1 and 3:2 downscaling), `worker::hw` (the
//!   hardware path), `worker::timing` (output frame slots), `worker::cmaf` (the CMAF packager of
//!   LL-HLS) and `worker::report` (what the worker reports about the files its muxer wrote).
//! - `rtlink`: the real-time link (Unix socket) from the worker's real-time output to `media::realtime`.
//! - `capacity`: the capacity-aware ladder's policy (step the x264 rungs to faster presets when the
//!   worker falls behind real time, back when headroom returns) and its health wording; pure, no libav.
//! - `supervisor`: spawning, feeding, restarting, and the stream's online/offline life cycle.
//! - `encoders`: which encoder a stream starts on, and the notices when that changes.
//! - `thumbnail`: the thumbnail and preview, made in a child process while live.
//! - `child`: castd's own executable, re-executed for the worker and thumbnail children.
//!
//! `Transcoder` is the feature's state. It was handed, at construction, the settings, the bus, the
//! stream-state writer (it is the only writer), the viewer counts (for the stream events), the health
//! hub, telemetry, the encoder list and the media plane (each broadcast carries its channel's
//! folders); it sees no HTTP types and no tokens.
//! Supervisors, the worker's event reader and the thumbnail loop are tasks of the `Stream` stage
//! (`tasks`), so shutdown waits for every stream to finish cleanly.
//!
//! This file holds what the files share (the error, the state, the worker's config and events) and
//! imports none of them: `Transcoder::start` lives in `supervisor`, `WorkerConfig::encoder_of` in
//! `recipe`, `WorkerConfig::part_seconds` in `worker::cmaf` (`tests/architecture.rs` checks the files' imports
//! have no cycles).

pub mod capacity;
pub mod child;
pub mod encoders;
pub mod recipe;
pub mod remux;
pub mod rtlink;
pub mod supervisor;
pub mod thumbnail;
pub mod worker;

use std::path::PathBuf;
use std::sync::Arc;

use hwaccel::EncoderInfo;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::StreamOutputVariant;
use crate::events::Bus;
use crate::health::HealthHub;
use crate::store::settings::SettingsStore;
use crate::stream::{StreamWriter, Viewers};
use crate::tasks::Tasks;
use crate::telemetry::Telemetry;

pub use crate::stream::VariantProgress;

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

/// What the transcoder is handed at construction.
pub struct TranscodeDeps {
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWriter,
    pub viewers: Viewers,
    pub health: Arc<HealthHub>,
    pub telemetry: Arc<Telemetry>,
    /// The encoders found on this box (written by the hardware probe).
    pub encoders: watch::Receiver<Vec<EncoderInfo>>,
    /// The media plane: the transcoder is handed every broadcast (`run`), reads its source and writes
    /// its profile and feed (the broadcast carries its channel's folders).
    pub media: Arc<crate::media::MediaPlane>,
    /// The channel whose broadcasts this transcoder runs (each channel has its own).
    pub channel: crate::media::ChannelId,
    /// Test/debug switch (`--debug-encoder-fault SECONDS`): the first worker of each stream makes its
    /// encoder fail this many media seconds after its first frame, so the fallback path runs for real
    /// without a faulty driver. Never set in production.
    pub debug_encoder_fault: Option<f64>,
    /// LL-HLS part length in milliseconds (`--llhls-part-ms`).
    pub llhls_part_ms: u32,
    /// The daemon's tasks: supervisors and their helpers run in the `Stream` stage.
    pub tasks: Tasks,
}

/// The transcode feature's state (see the module doc).
pub struct Transcoder {
    pub(crate) deps: TranscodeDeps,
}

impl Transcoder {
    pub fn new(deps: TranscodeDeps) -> Arc<Self> {
        Arc::new(Self { deps })
    }

    /// The current stream state.
    pub fn stream(&self) -> crate::stream::StreamState {
        self.deps.stream.get()
    }
}

fn default_encoder() -> String {
    hwaccel::recipe::SOFTWARE_ENCODER.to_string()
}

/// Everything the worker needs to know; passed as JSON on its command line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerConfig {
    /// `<data-dir>/hls`; variant N goes to `<hls_dir>/N/`.
    pub hls_dir: PathBuf,
    /// The container of the byte stream on the worker's stdin (the publisher's, `media::Source`); the
    /// worker opens it with that demuxer instead of probing.
    #[serde(default = "default_container")]
    pub container: crate::media::Container,
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
    /// See `TranscodeDeps::debug_encoder_fault`: fail the encoder this many media seconds in (test/debug only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_encoder_fault: Option<f64>,
    /// Continue existing playlists (a restart): `append_list` + `EXT-X-DISCONTINUITY`.
    pub append: bool,
    /// Part of every segment file name, new for each worker run so restarts never overwrite.
    pub segment_id: String,
    /// Low-latency HLS: CMAF parts (`cmaf`) instead of the HLS muxer's MPEG-TS segments.
    #[serde(default)]
    pub low_latency: bool,
    /// LL-HLS part length in milliseconds (0: `cmaf::DEFAULT_PART_SECONDS`).
    #[serde(default)]
    pub part_ms: u32,
    /// The real-time output for WebRTC viewers (`rtlink`), when WebRTC is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<RealtimeConfig>,
    /// The capacity step the x264 rungs start at (presets faster than configured; `capacity`): a
    /// restarted worker continues where the last one had stepped to.
    #[serde(default)]
    pub ladder_step: u32,
    /// Test/debug only (the daemon never sets it): `[seconds, step]` moves the x264 rungs to capacity
    /// step `step` once the input reaches `seconds` of media, as if the policy had decided so, so the
    /// mid-stream preset switch can be tested without an overloaded box.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_ladder_step_at: Option<(f64, u32)>,
}

/// What the worker needs for the real-time output (`rtlink`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RealtimeConfig {
    /// The variant whose encoded video goes out in real time.
    pub variant: usize,
    /// The Unix socket the daemon listens on.
    pub socket: PathBuf,
}

fn default_container() -> crate::media::Container {
    crate::media::Container::Flv
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
        /// How far the software ladder has fallen behind real time (seconds of lag growth, `capacity`).
        #[serde(default)]
        lag: f64,
        /// The ladder's headroom (1 − load; negative when it falls behind; `capacity::Policy::load`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        headroom: Option<f64>,
    },
    /// The capacity policy moved the x264 rungs to other presets, or found that the ladder does not
    /// fit even at the fastest one (see `capacity`).
    LadderChanged(LadderChange),
    /// A segment was finished (exactly what was written; see `media::SegmentWritten`).
    SegmentWritten(crate::media::SegmentWritten),
    /// An LL-HLS part was written (low-latency mode).
    PartWritten(crate::media::HlsPart),
    /// A variant's init segment was written (low-latency mode).
    InitWritten {
        variant: usize,
        file: String,
    },
    /// A variant's media playlist was rewritten (after its new segment).
    PlaylistWritten {
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

/// What the worker reports when the capacity policy changes the ladder.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LadderChange {
    /// Presets faster than configured (0: as configured).
    pub step: u32,
    /// Whether the ladder keeps up at this step (false: behind even at `ultrafast`).
    pub fits: bool,
    /// Per variant: the x264 preset it uses now (`None`: not an x264 rung).
    pub presets: Vec<Option<String>>,
    /// Per variant: its configured x264 preset (`None`: not an x264 rung).
    pub configured: Vec<Option<String>>,
    /// Per variant: the real-time factor it can sustain at its preset (speed / busy).
    pub speeds: Vec<f64>,
    /// The ladder's speed that led to the change (media seconds per wall second).
    pub speed: f64,
    pub headroom: f64,
    /// Why, in words (`behind`, `doesNotFit`, `fits`, `headroom`).
    pub reason: String,
    /// The rung to reduce when the ladder does not fit (its name, size and frame rate).
    pub heaviest: String,
}

/// A short random id for segment names.
pub fn new_segment_id() -> String {
    crate::password::random_token(6).chars().filter(char::is_ascii_alphanumeric).collect()
}
