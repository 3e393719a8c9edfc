//! Typed server settings with documented defaults.
//!
//! `Settings` is the whole configuration the owner controls through the admin API. Every field has a
//! default (see `Default for Settings`); field names are the camelCase keys under which the settings
//! store (`store::settings`) persists each one, so a field added later simply takes its default on an
//! existing database. Validation of values coming from the API lives in `config::validate`.

pub mod validate;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Owncast's latency levels: (seconds per segment, playlist size) for levels 0..=4.
pub const LATENCY_LEVELS: [(u32, u32); 5] = [(1, 25), (2, 15), (3, 10), (4, 8), (5, 5)];
/// The latency level served as low-latency HLS (CMAF parts, blocking reload); the others are classic
/// MPEG-TS HLS as in Owncast.
pub const LOW_LATENCY_HLS_LEVEL: u32 = 0;
/// The default latency level (Owncast: 2).
pub const DEFAULT_LATENCY_LEVEL: u32 = 2;
/// Largest chat message, in bytes, that a client may send (Owncast: 2048).
pub const MAX_SOCKET_PAYLOAD_SIZE: usize = 2048;
/// Owncast's directory service, used while `directory_url` is empty.
pub const DEFAULT_DIRECTORY_URL: &str = "https://directory.owncast.online";

/// A stream key and the owner's note about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StreamKey {
    pub key: String,
    #[serde(default)]
    pub comment: String,
}

/// One HLS quality variant (Owncast's StreamOutputVariant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamOutputVariant {
    pub name: String,
    pub video_passthrough: bool,
    pub audio_passthrough: bool,
    /// kbps; 0 means Owncast's default of 1200.
    pub video_bitrate: u32,
    /// kbps.
    pub audio_bitrate: u32,
    /// 0 keeps the aspect ratio from the other dimension (or the source size when both are 0).
    pub scaled_width: u32,
    pub scaled_height: u32,
    pub framerate: u32,
    /// 0 (fastest) ..= 4 (best quality), mapped to an encoder preset.
    pub cpu_usage_level: u32,
}

impl Default for StreamOutputVariant {
    /// Owncast's default variant: audio passthrough, 1200 kbps, 24 fps, cpuUsageLevel 2, no scaling.
    fn default() -> Self {
        Self {
            name: String::new(),
            video_passthrough: false,
            audio_passthrough: true,
            video_bitrate: 1200,
            audio_bitrate: 0,
            scaled_width: 0,
            scaled_height: 0,
            framerate: 24,
            cpu_usage_level: 2,
        }
    }
}

/// The warning while the directory listing is on without a server URL (nothing is listed until it is
/// set).
pub const DIRECTORY_NEEDS_SERVER_URL: &str =
    "The directory listing is enabled but the server URL is not set: set it under Server settings, or \
     this server cannot be listed in the directory.";

/// A link to the streamer's account on another platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct SocialHandle {
    pub platform: String,
    pub url: String,
    /// Omitted when empty, as Owncast does (tools compare the list they set with the list they read).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub icon: String,
}

/// A button on the viewer page that opens a URL or shows HTML.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ExternalAction {
    pub url: String,
    pub html: String,
    pub title: String,
    pub description: String,
    pub icon: String,
    pub color: String,
    pub open_externally: bool,
}

/// Object storage (S3-compatible) settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct S3Info {
    pub enabled: bool,
    pub endpoint: String,
    pub access_key: String,
    pub secret: String,
    pub bucket: String,
    pub region: String,
    pub acl: String,
    pub path_prefix: String,
    pub force_path_style: bool,
}

/// Browser push notification settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct BrowserNotification {
    pub enabled: bool,
    pub go_live_message: String,
}

/// Chat-service (Discord) webhook notification settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct DiscordNotification {
    pub enabled: bool,
    pub webhook: String,
    pub go_live_message: String,
}

/// Every setting of the server. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    // --- instance details
    pub name: String,
    pub summary: String,
    pub stream_title: String,
    pub welcome_message: String,
    pub offline_message: String,
    pub extra_page_content: String,
    pub tags: Vec<String>,
    pub nsfw: bool,
    /// File name of the uploaded logo inside the data dir; empty = built-in logo.
    pub logo: String,
    /// File name of the uploaded favicon inside the data dir; empty = none.
    pub favicon: String,
    pub custom_styles: String,
    pub custom_javascript: String,
    pub appearance_variables: std::collections::BTreeMap<String, String>,
    pub social_handles: Vec<SocialHandle>,
    pub external_actions: Vec<ExternalAction>,
    /// `off`, `on` or `muted`.
    pub autoplay: String,
    pub hide_viewer_count: bool,
    pub disable_search_indexing: bool,

    // --- server
    /// bcrypt hash of the admin password (Owncast's format; serverconfig shows it); never the
    /// password itself. Databases of earlier versions hold an argon2 PHC string here until the next
    /// successful login or password change replaces it.
    pub admin_password_hash: String,
    /// Whether the admin password was weak (see `password::is_weak`) when it was last set or used to
    /// log in; the hash alone cannot tell.
    pub admin_password_weak: bool,
    pub stream_keys: Vec<StreamKey>,
    pub web_server_port: u16,
    pub web_server_ip: String,
    pub rtmp_server_port: u16,
    pub rtmp_server_bind_address: String,
    /// SRT ingest port (`ingest::srt`, bound on the RTMP address); 0 disables SRT.
    pub srt_server_port: u16,
    /// SRT encryption passphrase (10-79 characters); empty = unencrypted.
    pub srt_passphrase: String,
    pub server_url: String,
    pub socket_host_override: String,
    pub video_serving_endpoint: String,
    pub ffmpeg_path: String,
    pub directory_enabled: bool,
    /// Base URL of the directory (YP) service; empty = Owncast's [`DEFAULT_DIRECTORY_URL`].
    pub directory_url: String,

    // --- video
    pub video_quality_variants: Vec<StreamOutputVariant>,
    pub latency_level: u32,
    /// Encoder name (`libx264`, `h264_nvenc`, ...) or `auto`.
    pub video_codec: String,

    // --- chat
    pub chat_disabled: bool,
    pub chat_join_messages_enabled: bool,
    pub chat_established_user_mode: bool,
    pub chat_spam_protection_enabled: bool,
    pub chat_slur_filter_enabled: bool,
    /// Words the slur filter masks in addition to its built-in list.
    pub chat_slur_filter_words: Vec<String>,
    pub chat_require_authentication: bool,
    pub forbidden_usernames: Vec<String>,
    pub suggested_usernames: Vec<String>,

    // --- federation
    pub federation_enabled: bool,
    pub federation_private: bool,
    pub federation_username: String,
    pub federation_go_live_message: String,
    pub federation_show_engagement: bool,
    pub federation_enable_quotes: bool,
    pub federation_hide_followers: bool,
    pub federation_blocked_domains: Vec<String>,

    // --- notifications
    pub browser_notifications: BrowserNotification,
    pub discord_notifications: DiscordNotification,

    // --- object storage
    pub s3: S3Info,

    // --- schedule
    pub schedule_enabled: bool,
    pub schedule_reminder_message: String,
    /// Show a countdown to the next event on the viewer page.
    pub schedule_show_countdown: bool,
    /// Chat opens this many minutes before an event (0, 5, 10, 30 or 60; 0 = not before).
    pub schedule_chat_open_minutes: u32,
    /// Reminders this many minutes before an event (Owncast's allowed values; 0 = off).
    pub schedule_first_reminder_minutes: u32,
    pub schedule_second_reminder_minutes: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            name: "castd".into(),
            summary: "A live stream served by castd, a self-hosted streaming server with chat.".into(),
            stream_title: String::new(),
            welcome_message: String::new(),
            offline_message: String::new(),
            extra_page_content: String::new(),
            tags: vec!["owncast".into(), "streaming".into()],
            nsfw: false,
            logo: String::new(),
            favicon: String::new(),
            custom_styles: String::new(),
            custom_javascript: String::new(),
            appearance_variables: Default::default(),
            social_handles: Vec::new(),
            external_actions: Vec::new(),
            autoplay: "off".into(),
            hide_viewer_count: false,
            disable_search_indexing: false,

            admin_password_hash: String::new(),
            admin_password_weak: false,
            stream_keys: Vec::new(),
            web_server_port: 8080,
            web_server_ip: "0.0.0.0".into(),
            rtmp_server_port: 1935,
            rtmp_server_bind_address: "0.0.0.0".into(),
            srt_server_port: 8890,
            srt_passphrase: String::new(),
            server_url: String::new(),
            socket_host_override: String::new(),
            video_serving_endpoint: String::new(),
            ffmpeg_path: String::new(),
            directory_enabled: false,
            directory_url: String::new(),

            video_quality_variants: vec![StreamOutputVariant::default()],
            latency_level: DEFAULT_LATENCY_LEVEL,
            video_codec: "auto".into(),

            chat_disabled: false,
            chat_join_messages_enabled: true,
            chat_established_user_mode: false,
            chat_spam_protection_enabled: true,
            chat_slur_filter_enabled: false,
            chat_slur_filter_words: Vec::new(),
            chat_require_authentication: false,
            forbidden_usernames: vec!["owncast".into(), "operator".into(), "admin".into(), "system".into()],
            suggested_usernames: Vec::new(),

            federation_enabled: false,
            federation_private: false,
            federation_username: "streamer".into(),
            federation_go_live_message: "I've gone live!".into(),
            federation_show_engagement: true,
            federation_enable_quotes: false,
            federation_hide_followers: false,
            federation_blocked_domains: Vec::new(),

            browser_notifications: BrowserNotification { enabled: false, go_live_message: "I've gone live!".into() },
            discord_notifications: DiscordNotification {
                enabled: false,
                webhook: String::new(),
                go_live_message: "I've gone live!".into(),
            },

            s3: S3Info::default(),

            schedule_enabled: false,
            schedule_reminder_message: String::new(),
            schedule_show_countdown: false,
            schedule_chat_open_minutes: 0,
            schedule_first_reminder_minutes: 120,
            schedule_second_reminder_minutes: 15,
        }
    }
}

impl Settings {
    /// (seconds per segment, playlist size) for the configured latency level, clamped to 0..=4.
    pub fn latency(&self) -> (u32, u32) {
        LATENCY_LEVELS[self.latency_level.min(4) as usize]
    }

    /// Whether the configured latency level is served as LL-HLS (`LOW_LATENCY_HLS_LEVEL`).
    pub fn low_latency_hls(&self) -> bool {
        self.latency_level == LOW_LATENCY_HLS_LEVEL
    }

    /// The directory service's base URL (the setting, or Owncast's directory).
    pub fn directory_url(&self) -> &str {
        if self.directory_url.is_empty() {
            DEFAULT_DIRECTORY_URL
        } else {
            &self.directory_url
        }
    }

    /// Weak secrets and incomplete settings castd accepts (as Owncast does) but warns about: a weak
    /// admin password, stream keys shorter than 8 characters (named by their comment, never by the
    /// key), and the directory listing turned on without a server URL.
    pub fn security_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.admin_password_weak {
            out.push(
                "The admin password is weak (fewer than 8 characters, or Owncast's default abc123): \
                 change it under Server settings."
                    .to_string(),
            );
        }
        for k in &self.stream_keys {
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
        if self.directory_enabled && self.server_url.is_empty() {
            out.push(DIRECTORY_NEEDS_SERVER_URL.to_string());
        }
        out
    }
}
