//! The replays section of the settings: recording of every broadcast, clips and the disk budget. The
//! `replays` feature owns its setters and its part of the admin configuration (`replays::settings`).

use serde::{Deserialize, Serialize};

/// Clip permission levels (Owncast's values).
pub const CLIP_PERMISSIONS: [&str; 3] = ["moderators", "authenticated", "established"];

/// The replay settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReplaySettings {
    /// Record every broadcast (castd default: on; Owncast's `replay_features_enabled` is off).
    pub replay_enabled: bool,
    pub clips_enabled: bool,
    /// Longest clip, seconds (1-3600).
    pub max_clip_duration_seconds: u32,
    /// `moderators`, `authenticated` or `established`.
    pub clip_permissions: String,
    /// Disk budget of all replays together, GB (castd); the oldest unpinned replays go first.
    pub replay_max_gigabytes: f64,
    /// Finished replays older than this many days are deleted (0 = kept forever; castd).
    pub replay_retention_days: u32,
    /// A CHAT_ACTION "NAME clipped TITLE" when a viewer clips (castd).
    pub replay_announce_clips: bool,
}

impl Default for ReplaySettings {
    fn default() -> Self {
        Self {
            replay_enabled: true,
            clips_enabled: true,
            max_clip_duration_seconds: 120,
            clip_permissions: "established".into(),
            replay_max_gigabytes: 20.0,
            replay_retention_days: 0,
            replay_announce_clips: true,
        }
    }
}
