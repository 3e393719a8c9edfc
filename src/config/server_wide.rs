//! The server's settings, as a type of their own: everything that belongs to the server and not to a
//! channel (listen addresses and ports, the server URL, the socket host override, the video serving
//! endpoint, the ffmpeg path, the encoder choice, capacity, what channels' URLs may reach, SRT, the
//! directory and object storage).
//!
//! The keys stay where they always were: in the root database's settings table, beside the default
//! channel's (an install keeps its data; nothing is migrated). A channel's database holds channel keys
//! only (`store::settings::SettingsStore::open_channel` leaves [`ServerSettings::keys`] out of it and
//! removes copies an older castd wrote there); what a channel's features read of the server's is the
//! server's own value, laid over the channel's settings in memory ([`ServerSettings::lay_over`]) by
//! the composition root, which keeps it in step with the server's (it reads this type through
//! `store::settings::ServerSettingsStore`). The server-wide features themselves still read the root's
//! whole `Settings`; moving them onto this type is the next step of issue 53.

use serde::{Deserialize, Serialize};

use super::{DirectorySettings, IngestSettings, OverCapacity, Settings, StorageSettings};

/// Every server-wide setting (field names are the persisted keys, as in [`Settings`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerSettings {
    pub web_server_port: u16,
    pub web_server_ip: String,
    pub rtmp_server_port: u16,
    pub rtmp_server_bind_address: String,
    /// The server's public URL (a channel's is this one under `/c/{slug}`).
    pub server_url: String,
    pub socket_host_override: String,
    pub video_serving_endpoint: String,
    pub ffmpeg_path: String,
    pub max_live_channels: u32,
    pub over_capacity: OverCapacity,
    pub transcode_budget: u64,
    pub allow_private_targets: bool,
    /// The encoder every channel's ladder uses (`video/codec`: a name or `auto`).
    pub video_codec: String,
    #[serde(flatten)]
    pub ingest: IngestSettings,
    #[serde(flatten)]
    pub directory: DirectorySettings,
    #[serde(flatten)]
    pub storage: StorageSettings,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings::of(&Settings::default())
    }
}

impl ServerSettings {
    /// The server's settings in the root database's `settings`.
    pub fn of(s: &Settings) -> ServerSettings {
        let srv = &s.server;
        ServerSettings {
            web_server_port: srv.web_server_port,
            web_server_ip: srv.web_server_ip.clone(),
            rtmp_server_port: srv.rtmp_server_port,
            rtmp_server_bind_address: srv.rtmp_server_bind_address.clone(),
            server_url: srv.server_url.clone(),
            socket_host_override: srv.socket_host_override.clone(),
            video_serving_endpoint: srv.video_serving_endpoint.clone(),
            ffmpeg_path: srv.ffmpeg_path.clone(),
            max_live_channels: srv.max_live_channels,
            over_capacity: srv.over_capacity,
            transcode_budget: srv.transcode_budget,
            allow_private_targets: srv.allow_private_targets,
            video_codec: s.video.video_codec.clone(),
            ingest: s.ingest.clone(),
            directory: s.directory.clone(),
            storage: s.storage.clone(),
        }
    }

    /// Put these values in `s` (a channel's settings in memory: what its features read of the
    /// server's). Destructured in full, so a field added here cannot be left out.
    pub fn lay_over(&self, s: &mut Settings) {
        let ServerSettings {
            web_server_port,
            web_server_ip,
            rtmp_server_port,
            rtmp_server_bind_address,
            server_url,
            socket_host_override,
            video_serving_endpoint,
            ffmpeg_path,
            max_live_channels,
            over_capacity,
            transcode_budget,
            allow_private_targets,
            video_codec,
            ingest,
            directory,
            storage,
        } = self;
        let srv = &mut s.server;
        srv.web_server_port = *web_server_port;
        srv.web_server_ip.clone_from(web_server_ip);
        srv.rtmp_server_port = *rtmp_server_port;
        srv.rtmp_server_bind_address.clone_from(rtmp_server_bind_address);
        srv.server_url.clone_from(server_url);
        srv.socket_host_override.clone_from(socket_host_override);
        srv.video_serving_endpoint.clone_from(video_serving_endpoint);
        srv.ffmpeg_path.clone_from(ffmpeg_path);
        srv.max_live_channels = *max_live_channels;
        srv.over_capacity = *over_capacity;
        srv.transcode_budget = *transcode_budget;
        srv.allow_private_targets = *allow_private_targets;
        s.video.video_codec.clone_from(video_codec);
        s.ingest.clone_from(ingest);
        s.directory.clone_from(directory);
        s.storage.clone_from(storage);
    }

    /// The persisted keys of the server's settings (none of them is stored in a channel's database).
    pub fn keys() -> &'static [String] {
        static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        KEYS.get_or_init(|| match serde_json::to_value(ServerSettings::default()) {
            Ok(serde_json::Value::Object(m)) => m.into_iter().map(|(k, _)| k).collect(),
            _ => Vec::new(),
        })
    }

    /// Whether `key` (a persisted settings key) is the server's.
    pub fn is_server_key(key: &str) -> bool {
        Self::keys().iter().any(|k| k == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The server's keys are keys of `Settings`, each with the same value; laying them over another
    /// settings value changes those keys and no other.
    #[test]
    fn the_servers_keys_are_settings_keys_and_lay_over_changes_only_them() {
        let mut root = Settings::default();
        root.server.rtmp_server_port = 21935;
        root.server.server_url = "https://box.example".into();
        root.ingest.srt_server_port = 9000;
        root.video.video_codec = "libx264".into();
        root.storage.s3.bucket = "b".into();
        root.directory.directory_enabled = true;
        root.server.allow_private_targets = true;
        let server = ServerSettings::of(&root);
        let Value::Object(all) = serde_json::to_value(&root).unwrap() else { panic!("an object") };
        let Value::Object(own) = serde_json::to_value(&server).unwrap() else { panic!("an object") };
        assert_eq!(own.len(), ServerSettings::keys().len());
        for (k, v) in &own {
            assert_eq!(all.get(k), Some(v), "{k}");
        }
        for k in ["rtmpServerPort", "srtServerPort", "videoCodec", "s3", "directoryEnabled", "serverUrl"] {
            assert!(ServerSettings::is_server_key(k), "{k}");
        }
        for k in ["streamKeys", "adminPasswordHash", "name", "videoQualityVariants", "chatDisabled", "visibility"] {
            assert!(!ServerSettings::is_server_key(k), "{k} is a channel's");
        }

        let mut channel = Settings::default();
        channel.instance.name = "Church".into();
        channel.video.latency_level = 4;
        let before = channel.clone();
        server.lay_over(&mut channel);
        assert_eq!(ServerSettings::of(&channel), server);
        let (Value::Object(a), Value::Object(b)) =
            (serde_json::to_value(&before).unwrap(), serde_json::to_value(&channel).unwrap())
        else {
            panic!("objects")
        };
        for (k, v) in &b {
            if a.get(k) != Some(v) {
                assert!(ServerSettings::is_server_key(k), "{k} changed but is a channel's");
            }
        }
        assert_eq!(channel.instance.name, "Church");
        assert_eq!(channel.video.latency_level, 4);
    }
}
