//! Typed server settings with documented defaults.
//!
//! `Settings` is the whole configuration the owner controls through the admin API, made of one section
//! per feature (one file each: `instance`, `server`, `ingest`, `directory`, `video`, `chat`,
//! `federation`, `notifications`, `storage`, `schedule`, `webrtc`, `simulcast`, `replay`). The sections are flattened, so every field of a section is
//! one top-level camelCase key, the key under which the settings store (`store::settings`) persists it:
//! a field added later simply takes its default on an existing database. The section types live here,
//! below every feature, because features read each other's settings; each feature owns its section's
//! setters and its part of the admin server configuration (see `lib.rs`). Validation of values coming
//! from the API lives in `config::validate`.

pub mod chat;
pub mod directory;
pub mod federation;
pub mod ingest;
pub mod instance;
pub mod notifications;
pub mod replay;
pub mod schedule;
pub mod server;
pub mod simulcast;
pub mod storage;
pub mod validate;
pub mod video;
pub mod webrtc;

use serde::{Deserialize, Serialize};

pub use chat::{ChatSettings, MAX_SOCKET_PAYLOAD_SIZE};
pub use directory::{DirectorySettings, DEFAULT_DIRECTORY_URL};
pub use federation::FederationSettings;
pub use ingest::{IngestSettings, DEFAULT_SRT_PORT};
pub use instance::{ExternalAction, InstanceSettings, SocialHandle};
pub use notifications::{BrowserNotification, DiscordNotification, NotificationSettings};
pub use replay::ReplaySettings;
pub use schedule::ScheduleSettings;
pub use server::{ServerSettings, StreamKey};
pub use simulcast::{SimulcastSettings, SimulcastTarget, TargetVariant};
pub use storage::{S3Info, StorageSettings, MASKED};
pub use video::{StreamOutputVariant, VideoSettings, DEFAULT_LATENCY_LEVEL, LATENCY_LEVELS, LOW_LATENCY_HLS_LEVEL};
pub use webrtc::WebRtcSettings;

/// The warning while the directory listing is on without a server URL (nothing is listed until it is
/// set).
pub const DIRECTORY_NEEDS_SERVER_URL: &str =
    "The directory listing is enabled but the server URL is not set: set it under Server settings, or \
     this server cannot be listed in the directory.";

/// Every setting of the server: one section per feature, flattened (the sections' field names are the
/// persisted keys, and no two sections share one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    #[serde(flatten)]
    pub instance: InstanceSettings,
    #[serde(flatten)]
    pub server: ServerSettings,
    #[serde(flatten)]
    pub ingest: IngestSettings,
    #[serde(flatten)]
    pub directory: DirectorySettings,
    #[serde(flatten)]
    pub video: VideoSettings,
    #[serde(flatten)]
    pub chat: ChatSettings,
    #[serde(flatten)]
    pub federation: FederationSettings,
    #[serde(flatten)]
    pub notifications: NotificationSettings,
    #[serde(flatten)]
    pub storage: StorageSettings,
    #[serde(flatten)]
    pub schedule: ScheduleSettings,
    #[serde(flatten)]
    pub webrtc: WebRtcSettings,
    #[serde(flatten)]
    pub simulcast: SimulcastSettings,
    #[serde(flatten)]
    pub replay: ReplaySettings,
}

impl Settings {
    /// (seconds per segment, playlist size) for the configured latency level, clamped to 0..=4.
    pub fn latency(&self) -> (u32, u32) {
        self.video.latency()
    }

    /// Whether the configured latency level is served as LL-HLS (`LOW_LATENCY_HLS_LEVEL`).
    pub fn low_latency_hls(&self) -> bool {
        self.video.low_latency_hls()
    }

    /// The directory service's base URL (the setting, or Owncast's directory).
    pub fn directory_url(&self) -> &str {
        self.directory.directory_url()
    }

    /// Weak secrets and incomplete settings castd accepts (as Owncast does) but warns about: a weak
    /// admin password, stream keys shorter than 8 characters (named by their comment, never by the
    /// key), and the directory listing turned on without a server URL.
    pub fn security_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.server.admin_password_weak {
            out.push(
                "The admin password is weak (fewer than 8 characters, or Owncast's default abc123): \
                 change it under Server settings."
                    .to_string(),
            );
        }
        for k in &self.server.stream_keys {
            if crate::password::is_weak(&k.key) {
                let name = if k.comment.trim().is_empty() {
                    "A stream key without a comment".to_string()
                } else {
                    format!("The stream key \"{}\"", k.comment.trim())
                };
                out.push(format!(
                    "{name} is short (fewer than 8 characters): anyone who guesses it can broadcast here. \
                     Use a longer key."
                ));
            }
        }
        if self.directory.directory_enabled && self.server.server_url.is_empty() {
            out.push(DIRECTORY_NEEDS_SERVER_URL.to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// The persisted keys: one per field of every section, none shared between sections.
    #[test]
    fn sections_flatten_to_the_persisted_keys() {
        let Value::Object(map) = serde_json::to_value(Settings::default()).unwrap() else {
            panic!("settings serialize to an object");
        };
        assert_eq!(map.len(), 74, "{:?}", map.keys().collect::<Vec<_>>());
        for key in ["name", "adminPasswordHash", "srtServerPort", "directoryEnabled", "latencyLevel", "chatDisabled"] {
            assert!(map.contains_key(key), "{key}");
        }
        for key in [
            "federationBlockedDomains",
            "browserNotifications",
            "s3",
            "scheduleChatOpenMinutes",
            "webrtcMaxViewers",
            "simulcastTargets",
            "replayEnabled",
        ] {
            assert!(map.contains_key(key), "{key}");
        }
        assert!(!map.contains_key("chat") && !map.contains_key("instance"));
        let back: Settings = serde_json::from_value(Value::Object(map)).unwrap();
        assert_eq!(back, Settings::default());
    }

    #[test]
    fn missing_keys_take_their_section_default_and_unknown_keys_are_ignored() {
        let s: Settings =
            serde_json::from_value(json!({"chatDisabled": true, "latencyLevel": 4, "noSuchKey": 1})).unwrap();
        assert!(s.chat.chat_disabled);
        assert_eq!(s.video.latency_level, 4);
        assert_eq!(s.chat.forbidden_usernames, ChatSettings::default().forbidden_usernames);
        assert_eq!(s.instance, InstanceSettings::default());
        assert!(serde_json::from_value::<Settings>(json!({"latencyLevel": "x"})).is_err());
        assert!(serde_json::from_value::<Settings>(json!({"webServerPort": 70000})).is_err());
    }
}
