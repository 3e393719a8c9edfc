//! Typed server settings with documented defaults.
//!
//! `Settings` is the whole configuration the owner controls through the admin API, made of one section
//! per feature (one file each: `instance`, `server`, `ingest`, `directory`, `video`, `chat`,
//! `federation`, `notifications`, `storage`, `schedule`, `webrtc`, `simulcast`, `replay`, `access`). The sections are flattened, so every field of a section is
//! one top-level camelCase key, the key under which the settings store (`store::settings`) persists it:
//! a field added later simply takes its default on an existing database. The section types live here,
//! below every feature, because features read each other's settings; each feature owns its section's
//! setters and its part of the admin server configuration (see `lib.rs`). Validation of values coming
//! from the API lives in `config::validate`. [`Section`] names the sections, and
//! [`Settings::changed_sections`] says which of them differ between two settings values (what the
//! settings store announces after an update).

pub mod access;
pub mod chat;
pub mod directory;
pub mod federation;
pub mod ingest;
pub mod instance;
pub mod notifications;
pub mod replay;
pub mod schedule;
pub mod server;
pub mod server_wide;
pub mod simulcast;
pub mod storage;
pub mod validate;
pub mod video;
pub mod webrtc;

use serde::{Deserialize, Serialize};

pub use access::{AccessSettings, HookSettings, JwtSettings, PrivatePosts, Visibility};
pub use chat::{ChatSettings, MAX_SOCKET_PAYLOAD_SIZE};
pub use directory::{DirectorySettings, DEFAULT_DIRECTORY_URL};
pub use federation::FederationSettings;
pub use ingest::{IngestSettings, DEFAULT_SRT_PORT};
pub use instance::{ExternalAction, InstanceSettings, SocialHandle};
pub use notifications::{BrowserNotification, DiscordNotification, NotificationSettings};
pub use replay::ReplaySettings;
pub use schedule::ScheduleSettings;
pub use server::{OverCapacity, ServerSection, StreamKey};
pub use server_wide::ServerSettings;
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
    pub server: ServerSection,
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
    #[serde(flatten)]
    pub access: AccessSettings,
}

/// One section of [`Settings`] (one per field of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    Instance,
    Server,
    Ingest,
    Directory,
    Video,
    Chat,
    Federation,
    Notifications,
    Storage,
    Schedule,
    WebRtc,
    Simulcast,
    Replay,
    Access,
}

impl Section {
    /// Every section, in `Settings`' order.
    pub const ALL: [Section; 14] = [
        Section::Instance,
        Section::Server,
        Section::Ingest,
        Section::Directory,
        Section::Video,
        Section::Chat,
        Section::Federation,
        Section::Notifications,
        Section::Storage,
        Section::Schedule,
        Section::WebRtc,
        Section::Simulcast,
        Section::Replay,
        Section::Access,
    ];

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of [`Section`]s (serialised as the list of their names, in `Settings`' order).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Sections(u16);

impl Sections {
    pub const fn empty() -> Self {
        Sections(0)
    }

    pub fn insert(&mut self, section: Section) {
        self.0 |= section.bit();
    }

    pub const fn contains(self, section: Section) -> bool {
        self.0 & section.bit() != 0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The sections in the set, in `Settings`' order.
    pub fn iter(self) -> impl Iterator<Item = Section> {
        Section::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

impl FromIterator<Section> for Sections {
    fn from_iter<I: IntoIterator<Item = Section>>(iter: I) -> Self {
        let mut out = Sections::empty();
        for s in iter {
            out.insert(s);
        }
        out
    }
}

impl std::fmt::Debug for Sections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for Sections {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl Settings {
    /// The sections whose values differ between `self` and `other`.
    pub fn changed_sections(&self, other: &Settings) -> Sections {
        // Destructured in full, so a section added to `Settings` cannot be left out here.
        let Settings {
            instance,
            server,
            ingest,
            directory,
            video,
            chat,
            federation,
            notifications,
            storage,
            schedule,
            webrtc,
            simulcast,
            replay,
            access,
        } = self;
        let mut out = Sections::empty();
        let mut differs = |section, changed: bool| {
            if changed {
                out.insert(section);
            }
        };
        differs(Section::Instance, *instance != other.instance);
        differs(Section::Server, *server != other.server);
        differs(Section::Ingest, *ingest != other.ingest);
        differs(Section::Directory, *directory != other.directory);
        differs(Section::Video, *video != other.video);
        differs(Section::Chat, *chat != other.chat);
        differs(Section::Federation, *federation != other.federation);
        differs(Section::Notifications, *notifications != other.notifications);
        differs(Section::Storage, *storage != other.storage);
        differs(Section::Schedule, *schedule != other.schedule);
        differs(Section::WebRtc, *webrtc != other.webrtc);
        differs(Section::Simulcast, *simulcast != other.simulcast);
        differs(Section::Replay, *replay != other.replay);
        differs(Section::Access, *access != other.access);
        out
    }

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
        assert_eq!(map.len(), 83, "{:?}", map.keys().collect::<Vec<_>>());
        for key in [
            "name",
            "adminPasswordHash",
            "srtServerPort",
            "directoryEnabled",
            "latencyLevel",
            "chatDisabled",
            "maxLiveChannels",
            "overCapacity",
            "transcodeBudget",
            "allowPrivateTargets",
        ] {
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

    /// Each section reports itself, and only itself; every persisted key belongs to exactly one
    /// section, so a change of any row is a change of one section.
    #[test]
    fn changed_sections_names_the_sections_that_differ() {
        let d = Settings::default();
        assert!(d.changed_sections(&d).is_empty());
        let mut s = d.clone();
        s.chat.chat_disabled = true;
        s.storage.s3.bucket = "b".into();
        assert_eq!(d.changed_sections(&s).iter().collect::<Vec<_>>(), [Section::Chat, Section::Storage]);
        assert_eq!(serde_json::to_value(d.changed_sections(&s)).unwrap(), json!(["chat", "storage"]));
        // Every key of the flattened settings lies in one section: changing it (to null, which no
        // default is) changes exactly that section.
        let Value::Object(map) = serde_json::to_value(&d).unwrap() else { panic!("an object") };
        let sections: Vec<(Section, Value)> = Section::ALL
            .iter()
            .map(|&sec| {
                let v = match sec {
                    Section::Instance => serde_json::to_value(&d.instance),
                    Section::Server => serde_json::to_value(&d.server),
                    Section::Ingest => serde_json::to_value(&d.ingest),
                    Section::Directory => serde_json::to_value(&d.directory),
                    Section::Video => serde_json::to_value(&d.video),
                    Section::Chat => serde_json::to_value(&d.chat),
                    Section::Federation => serde_json::to_value(&d.federation),
                    Section::Notifications => serde_json::to_value(&d.notifications),
                    Section::Storage => serde_json::to_value(&d.storage),
                    Section::Schedule => serde_json::to_value(&d.schedule),
                    Section::WebRtc => serde_json::to_value(&d.webrtc),
                    Section::Simulcast => serde_json::to_value(&d.simulcast),
                    Section::Replay => serde_json::to_value(&d.replay),
                    Section::Access => serde_json::to_value(&d.access),
                };
                (sec, v.unwrap())
            })
            .collect();
        for key in map.keys() {
            let owners: Vec<Section> =
                sections.iter().filter(|(_, v)| v.get(key).is_some()).map(|(sec, _)| *sec).collect();
            assert_eq!(owners.len(), 1, "{key} belongs to {owners:?}");
        }
        let total: usize = sections.iter().map(|(_, v)| v.as_object().map_or(0, |m| m.len())).sum();
        assert_eq!(total, map.len());
        let mut names: Vec<String> =
            Section::ALL.iter().map(|s| serde_json::to_value(s).unwrap().as_str().unwrap().to_string()).collect();
        names.dedup();
        assert_eq!(names.len(), Section::ALL.len());
    }
}
