//! The schedule's API shapes (Owncast's `ScheduledEvent`, `ScheduledEventSeries`,
//! `ScheduledEventInput`, the admin schedule and the status entry) and the validation of an input,
//! with Owncast's messages in Owncast's order.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ScheduleError;

/// Longest event, in minutes (7 days).
pub const MAX_DURATION_MINUTES: i64 = 10_080;
/// Duration when an input leaves it out.
pub const DEFAULT_DURATION_MINUTES: i64 = 60;

/// One scheduled stream (a one-off, or one occurrence of a series): the bus' type, since it is the
/// `event` of the SCHEDULED_EVENTS webhook.
pub use crate::events::schedule::ScheduledEvent;

/// A recurring series.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEventSeries {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reminder_message: String,
    /// `DTSTART;TZID=<zone>:YYYYMMDDTHHMMSS` newline `RRULE:...`.
    pub recurrence: String,
    pub duration_minutes: i64,
    /// False once the series is paused (cancelled): no more occurrences are created.
    pub active: bool,
}

/// `GET /api/admin/schedule` and the answer of every admin change.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AdminSchedule {
    pub series: Vec<ScheduledEventSeries>,
    pub events: Vec<ScheduledEvent>,
}

/// `POST /api/admin/schedule/preview`'s answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Preview {
    pub occurrences: Vec<DateTime<Utc>>,
}

/// `scheduledEvent` of `/api/status`: the current or next event.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledStatus {
    pub id: String,
    pub name: String,
    pub description: String,
    pub start_time: DateTime<Utc>,
    pub duration_minutes: i64,
    /// Chat is open for this event now (the pre-event window or the event itself).
    pub chat_open: bool,
}

/// `ScheduledEventInput`: with `id` an update, without a create.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventInput {
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub duration_minutes: Option<i64>,
    pub recurrence: Option<String>,
    pub start: Option<String>,
    pub timezone: Option<String>,
    pub reminder_message: Option<String>,
}

/// `POST /api/admin/schedule/event/delete`'s body.
#[derive(Debug, Deserialize)]
pub struct DeleteInput {
    pub id: Option<String>,
    pub cancel: Option<bool>,
}

/// `POST /api/admin/schedule/preview`'s body.
#[derive(Debug, Deserialize)]
pub struct PreviewInput {
    pub recurrence: Option<String>,
}

fn bad(msg: &str) -> ScheduleError {
    ScheduleError::Invalid(msg.to_string())
}

/// The checks every input gets before it is looked up: name, duration, start/recurrence exclusivity.
/// Returns the trimmed name (None when the input leaves it out).
pub fn check_common(input: &EventInput) -> Result<Option<String>, ScheduleError> {
    let name = match &input.name {
        Some(n) if n.trim().is_empty() => return Err(bad("name is required")),
        Some(n) => Some(n.trim().to_string()),
        None if input.id.is_none() => return Err(bad("name is required")),
        None => None,
    };
    if let Some(d) = input.duration_minutes {
        if d <= 0 || d > MAX_DURATION_MINUTES {
            return Err(bad("durationMinutes is out of range"));
        }
    }
    if input.start.is_some() && input.recurrence.is_some() {
        return Err(bad("start and recurrence are mutually exclusive"));
    }
    Ok(name)
}

/// Parse `start` (RFC 3339) and require it to be in the future.
pub fn parse_start(start: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, ScheduleError> {
    let t = DateTime::parse_from_rfc3339(start.trim())
        .map_err(|e| ScheduleError::Invalid(format!("start is not an RFC 3339 date-time: {e}")))?
        .with_timezone(&Utc);
    // Whole seconds, as stored and served.
    let t = DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t);
    if t < now {
        return Err(bad("start must be in the future"));
    }
    Ok(t)
}

/// An IANA zone name `chrono-tz` knows (Owncast: `time.LoadLocation`).
pub fn check_timezone(tz: &str) -> Result<String, ScheduleError> {
    let tz = tz.trim();
    if tz.is_empty() {
        return Ok("UTC".into());
    }
    tz.parse::<chrono_tz::Tz>().map(|z| z.name().to_string()).map_err(|_| bad("unknown timezone"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<impl std::fmt::Debug, ScheduleError>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(v) => panic!("accepted: {v:?}"),
        }
    }

    #[test]
    fn common_checks_in_owncasts_order() {
        let base = EventInput { name: Some("Show".into()), ..Default::default() };
        assert_eq!(err(check_common(&EventInput { name: Some("  ".into()), ..base.clone() })), "name is required");
        assert_eq!(err(check_common(&EventInput { name: None, ..base.clone() })), "name is required");
        for d in [0, -1, 10_081] {
            let i = EventInput { duration_minutes: Some(d), ..base.clone() };
            assert_eq!(err(check_common(&i)), "durationMinutes is out of range");
        }
        let i = EventInput { start: Some("x".into()), recurrence: Some("y".into()), ..base.clone() };
        assert_eq!(err(check_common(&i)), "start and recurrence are mutually exclusive");
        let update = EventInput { id: Some("a".into()), ..Default::default() };
        assert_eq!(check_common(&update).unwrap(), None);
        assert_eq!(check_common(&EventInput { duration_minutes: Some(10_080), ..base }).unwrap(), Some("Show".into()));
    }

    #[test]
    fn start_and_zone() {
        let now = Utc::now();
        assert_eq!(err(parse_start("2000-01-01T00:00:00Z", now)), "start must be in the future");
        assert!(err(parse_start("tomorrow", now)).starts_with("start is not an RFC 3339 date-time"));
        assert_eq!(err(check_timezone("Mars/Olympus")), "unknown timezone");
        assert_eq!(check_timezone("America/New_York").unwrap(), "America/New_York");
        assert_eq!(check_timezone("").unwrap(), "UTC");
    }
}
