//! The directory (YP) section of the settings. The `yp` feature owns its setters and its part of the
//! admin configuration.

use serde::{Deserialize, Serialize};

/// Owncast's directory service, used while `directory_url` is empty.
pub const DEFAULT_DIRECTORY_URL: &str = "https://directory.owncast.online";

/// The directory listing. Field names are the persisted keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DirectorySettings {
    pub directory_enabled: bool,
    /// Base URL of the directory (YP) service; empty = Owncast's [`DEFAULT_DIRECTORY_URL`].
    pub directory_url: String,
}

impl DirectorySettings {
    /// The directory service's base URL (the setting, or Owncast's directory).
    pub fn directory_url(&self) -> &str {
        if self.directory_url.is_empty() {
            DEFAULT_DIRECTORY_URL
        } else {
            &self.directory_url
        }
    }
}
