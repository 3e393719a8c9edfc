//! The schedule's bus events for other features: the SCHEDULED_EVENTS webhook's payload
//! ([`ScheduleNotice`], with the [`ScheduledEvent`] it is about, which is also the schedule API's
//! shape), what federation sends for a scheduled stream (its ActivityPub `Event` announced, updated,
//! deleted, and the reminders in reply to it) and the chat notice when a scheduled stream never
//! started. The schedule publishes them; webhooks, federation and chat subscribe, without knowing the
//! schedule.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// One scheduled stream (a one-off, or one occurrence of a series).
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEvent {
    pub id: String,
    /// The series this occurrence belongs to; absent for a one-off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series_id: Option<String>,
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reminder_message: String,
    /// RFC 3339, UTC.
    pub start_time: DateTime<Utc>,
    pub duration_minutes: i64,
    /// IANA time zone the event was announced in.
    pub timezone: String,
    /// `scheduled` or `cancelled`.
    #[schema(schema_with = event_status_schema)]
    pub status: String,
}

/// `ScheduledEvent::status`'s values.
fn event_status_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["scheduled", "cancelled"]))
        .description(Some("`scheduled` or `cancelled`."))
        .build()
}

/// What a SCHEDULED_EVENTS notice is about (its `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ScheduleAction {
    /// The event starts in ten minutes.
    #[serde(rename = "10-minute-warning")]
    TenMinuteWarning,
    /// One of the reminder slots (the notice has the reminder text as `message`).
    #[serde(rename = "reminder")]
    Reminder,
    #[serde(rename = "started")]
    Started,
    #[serde(rename = "ended")]
    Ended,
}

/// SCHEDULED_EVENTS' `eventData`: `{status, serverURL, event, action, timestamp}`, and `message` for a
/// reminder.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ScheduleNotice {
    pub status: ScheduleStreamStatus,
    #[serde(rename = "serverURL")]
    pub server_url: String,
    pub event: ScheduledEvent,
    pub action: ScheduleAction,
    pub timestamp: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The stream's state in a [`ScheduleNotice`].
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStreamStatus {
    pub online: bool,
    pub stream_title: String,
    pub last_connect_time: Option<DateTime<Utc>>,
    pub last_disconnect_time: Option<DateTime<Utc>>,
}

/// A scheduled stream as federation describes it (the fields of its ActivityPub `Event`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FederatedEvent {
    pub id: String,
    pub name: String,
    pub description: String,
    pub start_time: DateTime<Utc>,
    pub duration_minutes: i64,
    /// IANA zone the event was announced in.
    pub timezone: String,
    pub cancelled: bool,
}

/// What federation sends to the followers for a scheduled stream, published in the order it must
/// arrive (federation keeps that order per event and inbox).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "activity", rename_all = "camelCase")]
pub enum ScheduleActivity {
    /// `Create{Event}`: the event is announced for the first time.
    Create { event: FederatedEvent },
    /// `Update{Event}`: the event changed or was cancelled; `version` numbers the updates (the last
    /// segment of the activity id).
    Update { event: FederatedEvent, version: i64 },
    /// `Delete{Tombstone}`: the announced event was deleted.
    Delete { id: String },
    /// `Create{Note}` in reply to the announced event: reminder `slot` (1 or 2) with its text.
    Reminder { id: String, slot: u8, text: String },
}

impl ScheduleActivity {
    /// The scheduled event it is about.
    pub fn event_id(&self) -> &str {
        match self {
            ScheduleActivity::Create { event } | ScheduleActivity::Update { event, .. } => &event.id,
            ScheduleActivity::Delete { id } | ScheduleActivity::Reminder { id, .. } => id,
        }
    }
}
