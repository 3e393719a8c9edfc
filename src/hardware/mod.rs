//! The box's hardware as the daemon sees it: which encoders work here and how loaded CPU, memory, disk
//! and GPUs are.
//!
//! - `encoders`: runs the hwaccel probe in child processes (`castd encoders --json --only NAME`, one per
//!   encoder, each with a time limit) so a hanging or crashing driver cannot take the daemon down, fills
//!   the encoder list (a `watch` channel this module alone writes; transcode and the API read it).
//! - `stats`: samples CPU %, memory %, disk % of the data dir's filesystem and NVML GPU figures
//!   (utilization, memory, encoder, decoder, temperature, power) every 10 s into bounded series (10 h),
//!   raising Owncast's hardware alerts as health-hub inputs and handing the CPU/GPU figures to metrics
//!   through `Telemetry`.
//! - `api`: `GET /api/admin/hardwarestats`, `GET /api/admin/encoders`, `POST /api/admin/encoders/probe`.
//! - `fit`: whether a ladder fits this box (`/api/admin/video/fit`): a short measurement of each encoder
//!   at each rung's size in a child process (`castd measure`), cached per box in the data dir.

pub mod api;
pub mod encoders;
pub mod fit;
pub mod stats;

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use hwaccel::EncoderInfo;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::health::HealthHub;
use crate::store::settings::SettingsStore;
use crate::stream::StreamWatch;
use crate::telemetry::Telemetry;
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

/// The hardware feature's state.
pub struct Hardware {
    /// The sampled series.
    pub stats: RwLock<stats::Series>,
    /// Serialises probes (start-up and on-demand).
    pub probe_lock: tokio::sync::Mutex<()>,
    /// When the last probe finished.
    pub probed_at: RwLock<Option<DateTime<Utc>>>,
    /// The encoders found on this box (libx264 alone until the first probe finishes).
    encoders: watch::Sender<Vec<EncoderInfo>>,
    pub settings: SettingsStore,
    pub stream: StreamWatch,
    pub health: Arc<HealthHub>,
    pub telemetry: Arc<Telemetry>,
    /// Whose filesystem the disk figure is about.
    pub data_dir: PathBuf,
    /// `--debug-gpu-sample`: GPU readings reported instead of NVML's (test switch; `None` in production).
    pub debug_gpu_sample: Option<Vec<hwaccel::gpu::GpuSample>>,
    /// Whether a ladder fits this box: its cache (in the data dir) and its lock.
    pub fit: fit::FitState,
}

impl Hardware {
    pub fn new(
        settings: SettingsStore,
        stream: StreamWatch,
        health: Arc<HealthHub>,
        telemetry: Arc<Telemetry>,
        data_dir: PathBuf,
        debug_gpu_sample: Option<Vec<hwaccel::gpu::GpuSample>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            stats: RwLock::default(),
            probe_lock: tokio::sync::Mutex::new(()),
            probed_at: RwLock::new(None),
            encoders: watch::channel(hwaccel::software_encoders()).0,
            settings,
            stream,
            health,
            telemetry,
            fit: fit::FitState::new(&data_dir),
            data_dir,
            debug_gpu_sample,
        })
    }

    /// The encoder list for its readers (transcode, the API).
    pub fn encoders(&self) -> watch::Receiver<Vec<EncoderInfo>> {
        self.encoders.subscribe()
    }
}
