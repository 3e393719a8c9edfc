//! The notifications section of the settings (`config::NotificationSettings`): its setters
//! (`/api/admin/config/notifications/*`) and its part of the server configuration.
//!
//! The Discord webhook URL is a secret (whoever has it may post to the channel): the server
//! configuration shows it as `********` when one is set, as the object-storage secret, and the setter
//! keeps the saved URL when it is sent `********` back (so a form can send what it was shown).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::NotifyState;
use crate::config::validate::{self, url_re};
use crate::config::{BrowserNotification, DiscordNotification, Settings, MASKED};
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{Registry, ValueDoc};
use crate::store::settings::SettingsStore;

const DISCORD: &str = concat!(
    r#"{"type":"object","properties":{"enabled":{"type":"boolean"},"goLiveMessage":{"type":"string"},
  "webhook":{"type":"string","pattern":"^("#,
    url_re!(),
    r#"|\\*{8})?$"}}}"#
);

/// The notification setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<NotifyState>] = &[
    Setter::new(
        "notifications/browser",
        "Browser push notifications",
        ValueDoc::Schema("BrowserNotification"),
        |_, v, s| {
            let n: BrowserNotification = validate::typed(v, "browser notification settings")?;
            set(&mut s.notifications.browser_notifications, Ok(n))
        },
    ),
    Setter::new("notifications/discord", "Discord go-live notification", ValueDoc::Json(DISCORD), |state, v, s| {
        let mut n: DiscordNotification = validate::typed(v, "discord notification settings")?;
        if n.webhook == MASKED {
            // What the server configuration showed: the saved URL stays.
            n.webhook = s.notifications.discord_notifications.webhook.clone();
        } else if !n.webhook.trim().is_empty() {
            // Enabled without a webhook sends nothing (accepted, as a half-filled form is).
            n.webhook = validate::url(&Value::String(n.webhook.clone()), false)?;
            // A channel's webhook at a refused literal address is refused now, with the reason.
            state
                .notifications
                .reach()
                .check_saved("the Discord webhook URL", &n.webhook)
                .map_err(validate::ValidationError)?;
        }
        set(&mut s.notifications.discord_notifications, Ok(n))
    }),
];

impl SettingsHost for NotifyState {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// The notification setter routes (and the schemas their values name).
pub fn routes(reg: &mut Registry, state: NotifyState) {
    reg.schema::<BrowserNotification>();
    reg.schema::<DiscordNotification>();
    setters::register(reg, std::sync::Arc::new(state), SETTERS);
}

/// `notifications` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = NotificationSettings)]
pub struct NotificationsView {
    pub browser: BrowserNotification,
    pub discord: DiscordNotification,
}

/// The notifications' part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationsConfigPart {
    pub notifications: NotificationsView,
}

/// The notifications' part of the server configuration (the Discord webhook URL masked).
pub fn server_config(s: &Settings) -> NotificationsConfigPart {
    let discord = &s.notifications.discord_notifications;
    let webhook = if discord.webhook.is_empty() { String::new() } else { MASKED.to_string() };
    NotificationsConfigPart {
        notifications: NotificationsView {
            browser: s.notifications.browser_notifications.clone(),
            discord: DiscordNotification { webhook, ..discord.clone() },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_webhook_is_shown_masked() {
        let mut s = Settings::default();
        assert_eq!(server_config(&s).notifications.discord.webhook, "");
        s.notifications.discord_notifications.webhook = "https://discord.com/api/webhooks/1/secret".into();
        let shown = server_config(&s).notifications.discord;
        assert_eq!(shown.webhook, MASKED);
        assert_eq!(shown.go_live_message, s.notifications.discord_notifications.go_live_message);
    }
}
