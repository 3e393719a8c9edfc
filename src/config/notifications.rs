//! The notifications section of the settings (browser push, Discord). The `notifications` feature owns
//! its setters and its part of the admin configuration (`notifications::settings`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

/// The notification settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NotificationSettings {
    pub browser_notifications: BrowserNotification,
    pub discord_notifications: DiscordNotification,
}

impl Default for NotificationSettings {
    fn default() -> Self {
        Self {
            browser_notifications: BrowserNotification { enabled: false, go_live_message: "I've gone live!".into() },
            discord_notifications: DiscordNotification {
                enabled: false,
                webhook: String::new(),
                go_live_message: "I've gone live!".into(),
            },
        }
    }
}
