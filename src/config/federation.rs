//! The federation (ActivityPub) section of the settings. The `federation` feature owns its setters and
//! its part of the admin configuration (`federation::settings`).

use serde::{Deserialize, Serialize};

/// The federation settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FederationSettings {
    pub federation_enabled: bool,
    pub federation_private: bool,
    pub federation_username: String,
    pub federation_go_live_message: String,
    pub federation_show_engagement: bool,
    pub federation_enable_quotes: bool,
    pub federation_hide_followers: bool,
    pub federation_blocked_domains: Vec<String>,
}

impl Default for FederationSettings {
    fn default() -> Self {
        Self {
            federation_enabled: false,
            federation_private: false,
            federation_username: "streamer".into(),
            federation_go_live_message: "I've gone live!".into(),
            federation_show_engagement: true,
            federation_enable_quotes: false,
            federation_hide_followers: false,
            federation_blocked_domains: Vec::new(),
        }
    }
}
