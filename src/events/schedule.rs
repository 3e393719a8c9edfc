//! The schedule's bus events for other features: what federation sends for a scheduled stream (its
//! ActivityPub `Event` announced, updated, deleted, and the reminders in reply to it) and the chat
//! notice when a scheduled stream never started. The schedule publishes them; federation and chat
//! subscribe, without knowing the schedule.

use chrono::{DateTime, Utc};
use serde::Serialize;

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
