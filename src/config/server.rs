//! The server section of the settings: the admin password, stream keys, listen ports and addresses,
//! the public URL, the ffmpeg path, the video serving endpoint, and the server's capacity (how many
//! channels may be live at once, the transcode budget, and what happens to a publisher beyond them).
//! The server feature (`api`) owns its setters and its part of the admin configuration.
//!
//! Only the admin password and the stream keys of this section are a channel's own; the rest is the
//! server's (`config::server_wide::ServerSettings` names them), stored in the root database only.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A stream key and the owner's note about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StreamKey {
    pub key: String,
    #[serde(default)]
    #[schema(required)]
    pub comment: String,
}

/// What castd does with a publisher whose channel would go beyond the server's capacity
/// (`server/overcapacity`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OverCapacity {
    /// Refuse the publisher in the protocol's handshake, with the reason.
    #[default]
    Refuse,
    /// Take the publisher but serve its broadcast as passthrough (the broadcaster's own video, no
    /// ladder: nothing is encoded).
    Passthrough,
}

impl OverCapacity {
    pub fn as_str(self) -> &'static str {
        match self {
            OverCapacity::Refuse => "refuse",
            OverCapacity::Passthrough => "passthrough",
        }
    }
}

/// The server section. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerSection {
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
    pub server_url: String,
    pub socket_host_override: String,
    pub video_serving_endpoint: String,
    pub ffmpeg_path: String,
    /// The most channels live at once (0: no limit). Server-wide (the default channel's).
    pub max_live_channels: u32,
    /// What happens to a publisher beyond `max_live_channels` or the transcode budget.
    pub over_capacity: OverCapacity,
    /// Encoded pixels per second this server can transcode in real time, summed over every live
    /// channel's encoded rungs (width × height × frame rate); 0: worked out from the CPU cores
    /// (`media::capacity::auto_budget`). Server-wide (the default channel's).
    pub transcode_budget: u64,
    /// Whether the URLs channel admins set (webhooks, admission hook, JWKS, Discord, simulcast) may
    /// reach loopback and private addresses (`outbound::PrivateTargets`); off by default. Server-wide
    /// (the default channel's): the server admin's alone.
    pub allow_private_targets: bool,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            admin_password_hash: String::new(),
            admin_password_weak: false,
            stream_keys: Vec::new(),
            web_server_port: 8080,
            web_server_ip: "0.0.0.0".into(),
            rtmp_server_port: 1935,
            rtmp_server_bind_address: "0.0.0.0".into(),
            server_url: String::new(),
            socket_host_override: String::new(),
            video_serving_endpoint: String::new(),
            ffmpeg_path: String::new(),
            max_live_channels: 0,
            over_capacity: OverCapacity::Refuse,
            transcode_budget: 0,
            allow_private_targets: false,
        }
    }
}
