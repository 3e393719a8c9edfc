//! The stream's runtime state, as its one writer publishes it and everyone else reads it.
//!
//! The transcode supervisor alone writes `StreamState` (through `StreamWriter`, which only the
//! composition root creates and only transcode receives); the API, metrics, chat, systemd and the
//! webhooks read snapshots from a `watch` channel (`StreamWatch`). The viewer counters are written by
//! metrics alone and read here for the same readers. `stream_event` builds the typed payload of
//! STREAM_STARTED / STREAM_STOPPED / STREAM_TITLE_UPDATED from those snapshots and the settings.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::Settings;
use crate::events::{StreamEvent, StreamEventStatus};

/// Details of the connected broadcaster, as admin status reports them.
#[derive(Debug, Clone, Serialize, Default, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Broadcaster {
    pub remote_addr: String,
    pub time: Option<DateTime<Utc>>,
    pub stream_details: StreamDetails,
}

/// What the broadcaster sends (from onMetaData and the codec headers).
#[derive(Debug, Clone, Serialize, Default, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamDetails {
    pub width: u32,
    pub height: u32,
    pub framerate: f64,
    pub video_bitrate: u32,
    pub audio_bitrate: u32,
    pub video_codec: String,
    pub audio_codec: String,
    pub encoder: String,
}

/// Progress of one variant, as the worker reports it about once a second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariantProgress {
    pub variant: usize,
    pub encoder: String,
    /// Frames encoded (or copied) per second of wall time over the last interval.
    pub fps: f64,
    /// Media seconds produced per wall second over the last interval (realtime factor).
    pub speed: f64,
    pub frames: u64,
    /// Fraction of the interval the variant's encoding stage worked (scale + encode; 1.0: it never
    /// waited for its next picture); 0 for copies and hardware rungs.
    #[serde(default)]
    pub busy: f64,
    /// The x264 preset the variant is encoded with now (the capacity policy may have stepped it down
    /// from the configured one); absent for copies and hardware encoders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// How far the variant's output has fallen behind real time (seconds; the software ladder's lag
    /// growth, 0 for copies): it is working off a backlog while above 0.
    #[serde(default)]
    pub lag: f64,
}

/// Runtime state of the stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamState {
    pub online: bool,
    /// The broadcast's id while online (a new one per broadcast; a replay's id is its stream's id).
    pub stream_id: Option<String>,
    pub broadcaster: Option<Broadcaster>,
    pub last_connect_time: Option<DateTime<Utc>>,
    pub last_disconnect_time: Option<DateTime<Utc>>,
    /// Encoder in use per variant while online (`libx264`, `h264_nvenc`, `copy`, ...).
    pub encoders: Vec<String>,
    /// PID of the transcode worker while one runs (admin status shows it; tests kill it).
    pub worker_pid: Option<u32>,
    /// Per-variant fps and realtime factor, as the worker last reported them.
    pub transcode: Vec<VariantProgress>,
}

/// Read side: the latest snapshot, and change notification for those that wait.
pub type StreamWatch = watch::Receiver<StreamState>;

/// Write side; held by the transcode supervisor only.
pub struct StreamWriter {
    tx: watch::Sender<StreamState>,
}

impl StreamWriter {
    /// A new, offline stream and its first reader.
    pub fn new() -> (StreamWriter, StreamWatch) {
        let (tx, rx) = watch::channel(StreamState::default());
        (StreamWriter { tx }, rx)
    }

    /// Change the state; readers see the new snapshot.
    pub fn update(&self, f: impl FnOnce(&mut StreamState)) {
        self.tx.send_modify(f);
    }

    pub fn get(&self) -> StreamState {
        self.tx.borrow().clone()
    }

    pub fn subscribe(&self) -> StreamWatch {
        self.tx.subscribe()
    }
}

/// Viewer counters: written by metrics (viewers), read by status endpoints and stream events.
#[derive(Debug, Default)]
pub struct ViewerCounts {
    pub current: AtomicU64,
    pub session_max: AtomicU64,
    pub overall_max: AtomicU64,
    /// Viewers on the cluster's other nodes (written by `cluster` on the origin; 0 on a single box).
    pub remote: AtomicU64,
}

impl ViewerCounts {
    /// `(current, session peak, overall peak)`.
    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.current.load(Ordering::Relaxed),
            self.session_max.load(Ordering::Relaxed),
            self.overall_max.load(Ordering::Relaxed),
        )
    }
}

impl ViewerCounts {
    /// `get()` with the cluster's other nodes' viewers added to the current count (what the status
    /// routes show).
    pub fn everywhere(&self) -> (u64, u64, u64) {
        let (current, session, overall) = self.get();
        (current + self.remote.load(Ordering::Relaxed), session, overall)
    }
}

/// Shared viewer counters.
pub type Viewers = Arc<ViewerCounts>;

/// Owncast's payload of STREAM_STARTED / STREAM_STOPPED / STREAM_TITLE_UPDATED.
pub fn stream_event(settings: &Settings, state: &StreamState, viewers: &ViewerCounts) -> StreamEvent {
    let (current, session_max, overall_max) = viewers.get();
    StreamEvent {
        id: crate::password::random_token(10),
        name: settings.instance.name.clone(),
        summary: settings.instance.summary.clone(),
        stream_title: settings.instance.stream_title.clone(),
        status: StreamEventStatus {
            online: state.online,
            viewer_count: current,
            session_max_viewer_count: session_max,
            overall_max_viewer_count: overall_max,
            last_connect_time: state.last_connect_time,
            last_disconnect_time: state.last_disconnect_time,
            version_number: crate::VERSION.to_string(),
            stream_title: settings.instance.stream_title.clone(),
        },
        timestamp: Utc::now(),
    }
}
