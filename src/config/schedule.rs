//! The schedule section of the settings. The `schedule` feature owns its setters (`schedule::api`) and
//! its part of the admin configuration (`schedule::settings`).

use serde::{Deserialize, Serialize};

/// The schedule settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScheduleSettings {
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

impl Default for ScheduleSettings {
    fn default() -> Self {
        Self {
            schedule_enabled: false,
            schedule_reminder_message: String::new(),
            schedule_show_countdown: false,
            schedule_chat_open_minutes: 0,
            schedule_first_reminder_minutes: 120,
            schedule_second_reminder_minutes: 15,
        }
    }
}
