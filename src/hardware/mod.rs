//! The box's hardware as the daemon sees it: which encoders work here and how loaded CPU, memory, disk
//! and GPUs are.
//!
//! - `encoders`: runs the hwaccel probe in child processes (`castd encoders --json --only NAME`, one per
//!   encoder, each with a time limit) so a hanging or crashing driver cannot take the daemon down, fills
//!   `App.encoders`, and reports an encoder fallback (health message, log, HEALTH_ALERT).
//! - `stats`: samples CPU %, memory %, disk % of the data dir's filesystem and NVML GPU figures every
//!   10 s into bounded series (10 h), raising Owncast's hardware alerts.
//! - `api`: `GET /api/admin/hardwarestats`, `GET /api/admin/encoders`, `POST /api/admin/encoders/probe`.

pub mod api;
pub mod encoders;
pub mod stats;

use chrono::{DateTime, Utc};
use parking_lot::RwLock;

/// What can go wrong here.
#[derive(Debug, thiserror::Error)]
pub enum HardwareError {
    #[error("cannot find castd's own executable: {0}")]
    OwnExe(std::io::Error),
    #[error("cannot start the encoder probe: {0}")]
    Spawn(std::io::Error),
    #[error("the encoder probe did not finish within {0} s")]
    Timeout(u64),
    #[error("the encoder probe failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("the encoder probe printed unreadable output: {0}")]
    Output(serde_json::Error),
    #[error("cannot read system statistics: {0}")]
    Sysinfo(sysinfo::Error),
    #[error("cannot start the hardware sampler: {0}")]
    Thread(std::io::Error),
}

/// Hardware state shared through `App.hardware`.
#[derive(Default)]
pub struct HardwareState {
    /// The sampled series.
    pub stats: RwLock<stats::Series>,
    /// Serialises probes (start-up and on-demand).
    pub probe_lock: tokio::sync::Mutex<()>,
    /// When the last probe finished.
    pub probed_at: RwLock<Option<DateTime<Utc>>>,
}
