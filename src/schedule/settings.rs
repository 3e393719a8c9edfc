//! The schedule's part of the admin server configuration (`schedule`), from its section of the
//! settings (`config::ScheduleSettings`; its setters are `schedule::api`'s).

use serde::Serialize;
use utoipa::ToSchema;

use crate::config::Settings;

/// `schedule` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ScheduleSettings)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    pub enabled: bool,
    pub show_countdown: bool,
    pub chat_open_minutes_before: u32,
    pub reminder_message: String,
    pub first_reminder_minutes: u32,
    pub second_reminder_minutes: u32,
}

/// The schedule's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleConfigPart {
    pub schedule: ScheduleView,
}

/// The schedule's part of the server configuration.
pub fn server_config(s: &Settings) -> ScheduleConfigPart {
    let c = &s.schedule;
    ScheduleConfigPart {
        schedule: ScheduleView {
            enabled: c.schedule_enabled,
            show_countdown: c.schedule_show_countdown,
            chat_open_minutes_before: c.schedule_chat_open_minutes,
            reminder_message: c.schedule_reminder_message.clone(),
            first_reminder_minutes: c.schedule_first_reminder_minutes,
            second_reminder_minutes: c.schedule_second_reminder_minutes,
        },
    }
}
