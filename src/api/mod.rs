//! The server feature: the public configuration and status (`/api/config`, `/api/status`, YP,
//! logos, robots), the admin status and server configuration (assembled from every feature's part),
//! the instance, server and video setters, and the integrations status/stream-title routes.
//!
//! It reads the other features only through the snapshots and handles it is given (`Server`): the
//! settings store (which it writes through its setters), the stream snapshot, the viewer counts,
//! the health hub, the encoder list and the integration tokens. The settings store announces its
//! changes; the stream title's setter also publishes STREAM_TITLE_UPDATED.

pub mod admin;
pub mod integrations;
pub mod public;
pub mod setters;
pub mod video;
pub mod warnings;

use std::path::PathBuf;
use std::sync::Arc;

use hwaccel::EncoderInfo;
use tokio::sync::watch;

use crate::events::Bus;
use crate::health::HealthHub;
use crate::http::Registry;
use crate::store::settings::SettingsStore;
use crate::stream::{StreamWatch, Viewers};
use crate::tokens::Tokens;

/// The server feature's state.
pub struct Server {
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    /// The media plane: what is running (the live broadcast's profile) is read there, not in the settings.
    pub media: Arc<crate::media::MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    pub viewers: Viewers,
    pub health: Arc<HealthHub>,
    pub encoders: watch::Receiver<Vec<EncoderInfo>>,
    pub tokens: Tokens,
    /// Uploads (logo, favicon) live here.
    pub data_dir: PathBuf,
    /// A `--streamkey` is in force for this run.
    pub stream_key_overridden: bool,
    /// The browser-push public key (`/api/config`).
    pub vapid_public_key: String,
    /// Approved fediverse followers (`federation.followerCount` of `/api/config`), kept by federation.
    pub follower_count: Arc<std::sync::atomic::AtomicU64>,
    /// The current or next scheduled stream (`scheduledEvent` of `/api/status`), kept by the schedule.
    pub schedule: crate::schedule::ScheduleWatch,
    /// Whether a stream key is another channel's (stream keys are unique across the server): the
    /// registry of channels answers.
    pub key_taken: KeyTaken,
    /// New stream keys a channel's `config/streamkeys` checked against the other channels' (each is a
    /// guess that the uniqueness answer would confirm): limited per channel ([`KEY_GUESSES`]), so a
    /// channel admin cannot test guesses of another channel's keys at speed.
    pub key_guesses: crate::throttle::Backoff,
}

/// The limit of [`Server::key_guesses`]: 5 new keys an hour are free, then each waits 10 s, 20 s, 40 s
/// … (up to 10 minutes) before it is looked at.
pub const KEY_GUESSES: crate::throttle::BackoffConfig = crate::throttle::BackoffConfig {
    free: 5,
    base: std::time::Duration::from_secs(10),
    max: std::time::Duration::from_secs(600),
    forget_after: std::time::Duration::from_secs(3600),
};

/// See [`Server::key_taken`].
pub type KeyTaken = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl Server {
    /// Names of the encoders that can be used on this box (once each, though VA-API may work on several
    /// render nodes).
    pub fn available_codecs(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for e in self.encoders.borrow().iter().filter(|e| e.available) {
            if !names.contains(&e.name) {
                names.push(e.name.clone());
            }
        }
        names
    }
}

/// Every route of this feature.
pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    public::routes(reg, server.clone());
    admin::routes(reg, server.clone());
    setters::routes(reg, server.clone());
    video::routes(reg, server.clone());
    integrations::routes(reg, server);
}
