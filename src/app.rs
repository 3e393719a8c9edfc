//! Shared application state handed to every handler and task as `Arc<App>`.
//!
//! `App` owns the database handles, the in-memory settings, the events bus and the runtime state of
//! the stream (online, broadcaster, viewer peaks, health). Modules that come later hang their own
//! state off it through `Extensions`-free plain fields so the compiler shows who uses what.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use parking_lot::RwLock;
use serde::Serialize;

use crate::events::Bus;
use crate::store::settings::SettingsStore;
use crate::store::Store;

/// The version string reported by `/api/config`, `/api/status` and admin status.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Details of the connected broadcaster, as admin status reports them.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Broadcaster {
    pub remote_addr: String,
    pub time: Option<DateTime<Utc>>,
    pub stream_details: StreamDetails,
}

/// What the broadcaster sends (from onMetaData and the codec headers).
#[derive(Debug, Clone, Serialize, Default)]
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

/// Runtime state of the stream.
#[derive(Debug, Clone, Default)]
pub struct StreamState {
    pub online: bool,
    pub broadcaster: Option<Broadcaster>,
    pub last_connect_time: Option<DateTime<Utc>>,
    pub last_disconnect_time: Option<DateTime<Utc>>,
    /// Encoder in use per variant while online (`libx264`, `h264_nvenc`, ...).
    pub encoders: Vec<String>,
    /// PID of the transcode worker while one runs (admin status shows it; tests kill it).
    pub worker_pid: Option<u32>,
    /// Per-variant fps and realtime factor, as the worker last reported them.
    pub transcode: Vec<crate::transcode::VariantProgress>,
}

/// Stream health as admin status and hardware stats report it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub healthy: bool,
    pub health_percentage: u32,
    pub representation: u32,
    pub message: String,
}

impl Default for Health {
    fn default() -> Self {
        Self { healthy: true, health_percentage: 100, representation: 0, message: String::new() }
    }
}

/// Viewer counters (maintained by the viewers module; read by the status endpoints).
#[derive(Debug, Default)]
pub struct ViewerCounts {
    pub current: AtomicU64,
    pub session_max: AtomicU64,
    pub overall_max: AtomicU64,
}

impl ViewerCounts {
    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.current.load(Ordering::Relaxed),
            self.session_max.load(Ordering::Relaxed),
            self.overall_max.load(Ordering::Relaxed),
        )
    }
}

/// Everything the daemon shares between its parts.
pub struct App {
    pub data_dir: PathBuf,
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: RwLock<StreamState>,
    pub health: RwLock<Health>,
    pub viewers: ViewerCounts,
    /// Viewers, playback reports, series, health inputs and Prometheus gauges (the metrics module).
    pub metrics: crate::metrics::Metrics,
    /// `--streamkey`: valid for this run only, never persisted.
    pub temp_stream_key: Option<String>,
    /// Encoders found on this box (hwaccel probe).
    pub encoders: RwLock<Vec<hwaccel::EncoderInfo>>,
    /// Hardware statistics series and probe state (`hardware` module).
    pub hardware: crate::hardware::HardwareState,
    /// SHA-256 of the last admin password that verified against the current hash, so Basic auth does
    /// not run argon2 on every admin request.
    pub admin_auth_cache: RwLock<Option<(String, [u8; 32])>>,
    /// VAPID public key for browser push (set by the notifications module; empty until then).
    pub vapid_public: RwLock<String>,
    pub started_at: DateTime<Utc>,
    /// Integration access tokens.
    pub tokens: crate::tokens::Tokens,
    /// Go-live notifications (push keys, subscriptions).
    pub notifications: crate::notifications::Notifications,
    /// Outbound webhooks and their delivery tasks.
    pub webhooks: std::sync::Arc<crate::webhooks::Webhooks>,
    /// Viewer chat: connections, bans, limits (`chat::start` prepares it).
    pub chat: crate::chat::Chat,
    /// The live RTMP publisher, if any (single-publisher rule, admin disconnect).
    pub publisher: crate::ingest::PublisherSlot,
}

impl App {
    pub fn new(
        data_dir: PathBuf,
        store: Store,
        settings: SettingsStore,
        temp_stream_key: Option<String>,
    ) -> Result<Self, crate::store::StoreError> {
        Ok(Self {
            tokens: crate::tokens::Tokens::open(store.clone())?,
            notifications: crate::notifications::Notifications::open(store.clone())
                .map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?,
            webhooks: std::sync::Arc::new(crate::webhooks::Webhooks::open(store.clone())?),
            data_dir,
            store,
            settings,
            bus: Bus::default(),
            stream: RwLock::new(StreamState::default()),
            health: RwLock::new(Health::default()),
            viewers: ViewerCounts::default(),
            metrics: crate::metrics::Metrics::new(crate::metrics::MetricsConfig::from_env()),
            temp_stream_key,
            encoders: RwLock::new(hwaccel::software_encoders()),
            hardware: crate::hardware::HardwareState::default(),
            admin_auth_cache: RwLock::new(None),
            vapid_public: RwLock::new(String::new()),
            started_at: Utc::now(),
            chat: crate::chat::Chat::default(),
            publisher: Default::default(),
        })
    }

    /// The browser-push public key, empty when push is not set up.
    pub fn vapid_public_key(&self) -> String {
        self.vapid_public.read().clone()
    }

    /// Owncast's payload for STREAM_STARTED / STREAM_STOPPED / STREAM_TITLE_UPDATED:
    /// `{id, name, summary, streamTitle, status, timestamp}`.
    pub fn stream_event_data(&self) -> serde_json::Value {
        let s = self.settings.get();
        let st = self.stream.read().clone();
        let (current, session_max, overall_max) = self.viewers.get();
        serde_json::json!({
            "id": crate::password::random_token(10),
            "name": s.name,
            "summary": s.summary,
            "streamTitle": s.stream_title,
            "status": {
                "online": st.online,
                "viewerCount": current,
                "sessionMaxViewerCount": session_max,
                "overallMaxViewerCount": overall_max,
                "lastConnectTime": st.last_connect_time,
                "lastDisconnectTime": st.last_disconnect_time,
                "versionNumber": VERSION,
                "streamTitle": s.stream_title,
            },
            "timestamp": Utc::now(),
        })
    }

    /// Names of the encoders that can be used on this box (once each, though VA-API may work on several
    /// render nodes).
    pub fn available_codecs(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for e in self.encoders.read().iter().filter(|e| e.available) {
            if !names.contains(&e.name) {
                names.push(e.name.clone());
            }
        }
        names
    }

    /// Whether `key` may publish: any configured stream key, or the temporary `--streamkey`.
    pub fn stream_key_valid(&self, key: &str) -> bool {
        if self.temp_stream_key.as_deref() == Some(key) {
            return true;
        }
        self.settings.get().stream_keys.iter().any(|k| k.key == key)
    }
}
