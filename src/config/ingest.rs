//! The ingest section of the settings: the SRT listener's port and encryption passphrase (the RTMP
//! port and address are in the server section, as Owncast has them). The `ingest` feature owns its
//! setters and its part of the admin configuration.

use serde::{Deserialize, Serialize};

/// The default SRT port (mediamtx's too).
pub const DEFAULT_SRT_PORT: u16 = 8890;

/// The ingest settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngestSettings {
    /// SRT ingest port (UDP, bound on the RTMP address); 0 = no SRT.
    pub srt_server_port: u16,
    /// SRT encryption passphrase (10-79 printable ASCII characters); empty = unencrypted.
    pub srt_passphrase: String,
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self { srt_server_port: DEFAULT_SRT_PORT, srt_passphrase: String::new() }
    }
}
