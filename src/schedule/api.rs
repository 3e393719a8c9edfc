//! The schedule's routes: the public schedule and its iCalendar feed, the admin schedule (create,
//! update, cancel or delete, preview of a rule) and the `/api/admin/config/schedule/*` setters, with
//! Owncast's validation messages and allowed values.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::model::{
    self, AdminSchedule, DeleteInput, EventInput, Preview, PreviewInput, ScheduledEvent, ScheduledEventSeries,
};
use super::{db, ics, page, recurrence, Schedule, ScheduleError};
use crate::config::Settings;
use crate::http::{setter_value, ApiError, Auth, BodyDoc, JsonBody, Registry, ResponseDoc, StatusResponse, ValueDoc};

const PUBLIC: &str = "public";
const ADMIN: &str = "admin";
/// Most events the admin list returns.
const ADMIN_LIST_LIMIT: i64 = 2000;
/// Longest range `GET /api/schedule` serves.
const MAX_RANGE_DAYS: i64 = 366;

const EVENT_INPUT: &str = r#"{"type":"object","properties":{
  "id":{"type":"string"},
  "name":{"type":"string"},
  "description":{"type":"string"},
  "durationMinutes":{"type":"integer","minimum":1,"maximum":10080},
  "recurrence":{"type":"string"},
  "start":{"type":"string","format":"date-time"},
  "timezone":{"type":"string"},
  "reminderMessage":{"type":"string"}}}"#;
const DELETE_INPUT: &str =
    r#"{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"cancel":{"type":"boolean"}}}"#;
const PREVIEW_INPUT: &str =
    r#"{"type":"object","required":["recurrence"],"properties":{"recurrence":{"type":"string"}}}"#;
const DATE_TIME: &str = r#"{"type":"string","format":"date-time"}"#;
const CHAT_MINUTES: &str = r#"{"type":"integer","enum":[0,5,10,30,60]}"#;
const REMINDER_MINUTES: &str = r#"{"type":"integer","enum":[0,15,30,60,120,1440]}"#;
const TEXT_500: &str = r#"{"type":"string","maxLength":500}"#;

pub fn routes(reg: &mut Registry, schedule: Arc<Schedule>) {
    let mut reg = reg.scope(schedule);
    reg.get("/api/schedule", PUBLIC, Auth::Public, "Scheduled streams between from and to (RFC 3339)", public_list)
        .query("from", false, ValueDoc::Json(DATE_TIME))
        .query("to", false, ValueDoc::Json(DATE_TIME))
        .returns_list::<ScheduledEvent>()
        .error(400, "A bad time, to not after from, or a range over 366 days");
    reg.get("/api/schedule.ics", PUBLIC, Auth::Public, "The schedule as an iCalendar feed", feed)
        .answers(ResponseDoc::Content("text/calendar"));
    // The event page the reminders and the ActivityPub Event link to.
    reg.get(
        "/schedule/{id}",
        PUBLIC,
        Auth::Public,
        "A scheduled stream's public page (HTML; 404 while the schedule is off or for an unknown id)",
        page::page,
    )
    .answers(ResponseDoc::Content("text/html"));
    reg.get(
        "/schedule/{id}/calendar.ics",
        PUBLIC,
        Auth::Public,
        "One scheduled stream as an iCalendar file (the page's Add to calendar)",
        page::calendar,
    )
    .answers(ResponseDoc::Content("text/calendar"));
    reg.get("/api/admin/schedule", ADMIN, Auth::Admin, "Every series and event", admin_list).returns::<AdminSchedule>();
    reg.post(
        "/api/admin/schedule/event",
        ADMIN,
        Auth::Admin,
        "Create (no id) or update (id) a one-off event or a recurring series",
        BodyDoc::Json(EVENT_INPUT),
        save,
    )
    .returns::<AdminSchedule>()
    .error(400, "Invalid input (Owncast's message in message and error)");
    reg.post(
        "/api/admin/schedule/event/delete",
        ADMIN,
        Auth::Admin,
        "Delete, or with cancel pause a series or cancel one event",
        BodyDoc::Json(DELETE_INPUT),
        delete,
    )
    .returns::<AdminSchedule>()
    .error(400, "No such event or series");
    reg.post(
        "/api/admin/schedule/preview",
        ADMIN,
        Auth::Admin,
        "The next occurrences of a recurrence rule",
        BodyDoc::Json(PREVIEW_INPUT),
        preview,
    )
    .returns::<Preview>()
    .error(400, "The rule cannot be read or expanded");
    for setter in SETTERS {
        let path = format!("/api/admin/config/schedule/{}", setter.name);
        reg.post(
            &path,
            ADMIN,
            Auth::Admin,
            setter.summary,
            BodyDoc::Value(setter.value),
            move |State(s): State<Arc<Schedule>>, body: axum::body::Bytes| apply_setter(s, setter, body),
        );
    }
}

fn no_cache(mut resp: Response) -> Response {
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-store, must-revalidate"));
    resp
}

#[derive(Deserialize)]
struct Range {
    from: Option<String>,
    to: Option<String>,
}

fn query_time(v: Option<&str>, name: &str, default: DateTime<Utc>) -> Result<DateTime<Utc>, ScheduleError> {
    // Only a missing parameter takes the default: an empty one is a bad time, as a schema says.
    match v {
        None => Ok(default),
        Some(v) => DateTime::parse_from_rfc3339(v)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| ScheduleError::Invalid(format!("{name} is not an RFC 3339 date-time: {e}"))),
    }
}

async fn public_list(State(s): State<Arc<Schedule>>, Query(range): Query<Range>) -> Result<Response, ScheduleError> {
    let now = Utc::now();
    let from = query_time(range.from.as_deref(), "from", now - Duration::days(7))?;
    let to = query_time(range.to.as_deref(), "to", now + Duration::days(90))?;
    if to <= from {
        return Err(ScheduleError::Invalid("to must be after from".into()));
    }
    if to - from > Duration::days(MAX_RANGE_DAYS) {
        return Err(ScheduleError::Invalid("requested schedule range is too large".into()));
    }
    if !s.settings.get().schedule.schedule_enabled {
        return Ok(no_cache(Json(Vec::<ScheduledEvent>::new()).into_response()));
    }
    let events = s.store.call(move |c| db::events_between(c, from, to)).await?;
    Ok(no_cache(Json(events).into_response()))
}

async fn feed(State(s): State<Arc<Schedule>>) -> Result<Response, ScheduleError> {
    let now = Utc::now();
    let events = if s.settings.get().schedule.schedule_enabled {
        let (from, to) = (now - Duration::days(7), now + Duration::days(365));
        s.store.call(move |c| db::events_between(c, from, to)).await?
    } else {
        Vec::new()
    };
    let mut resp = ics::calendar(&events, now).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/calendar; charset=utf-8"));
    Ok(no_cache(resp))
}

async fn admin_schedule(s: &Schedule) -> Result<AdminSchedule, ScheduleError> {
    Ok(s.store
        .call(|c| Ok(AdminSchedule { series: db::all_series(c)?, events: db::all_events(c, ADMIN_LIST_LIMIT)? }))
        .await?)
}

async fn admin_list(State(s): State<Arc<Schedule>>) -> Result<Json<AdminSchedule>, ScheduleError> {
    Ok(Json(admin_schedule(&s).await?))
}

/// What an id names.
enum Target {
    Series(ScheduledEventSeries),
    Event(ScheduledEvent),
}

async fn find(s: &Schedule, id: &str) -> Result<Target, ScheduleError> {
    let id = id.to_string();
    let found = s
        .store
        .call(move |c| {
            Ok(match db::series(c, &id)? {
                Some(series) => Some(Target::Series(series)),
                None => db::event(c, &id)?.map(Target::Event),
            })
        })
        .await?;
    found.ok_or_else(|| ScheduleError::Invalid("no scheduled event or series with that id".into()))
}

fn trimmed(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string())
}

async fn save(
    State(s): State<Arc<Schedule>>,
    JsonBody(input): JsonBody<EventInput>,
) -> Result<Json<AdminSchedule>, ScheduleError> {
    let now = Utc::now();
    let name = model::check_common(&input)?;
    let writing = s.writes.lock().await;
    match input.id.clone().filter(|id| !id.trim().is_empty()) {
        Some(id) => update(&s, &id, input, name, now).await?,
        None => create(&s, input, name.unwrap_or_default(), now).await?,
    }
    drop(writing);
    s.refresh().await?;
    Ok(Json(admin_schedule(&s).await?))
}

async fn create(s: &Schedule, input: EventInput, name: String, now: DateTime<Utc>) -> Result<(), ScheduleError> {
    let duration = input.duration_minutes.unwrap_or(model::DEFAULT_DURATION_MINUTES);
    let description = trimmed(input.description).unwrap_or_default();
    let reminder = trimmed(input.reminder_message).unwrap_or_default();
    match input.recurrence {
        None => {
            let start =
                input.start.ok_or_else(|| ScheduleError::Invalid("start is required for a one-off event".into()))?;
            let start = model::parse_start(&start, now)?;
            let timezone = model::check_timezone(input.timezone.as_deref().unwrap_or("UTC"))?;
            let event = ScheduledEvent {
                id: crate::password::random_token(10),
                series_id: None,
                name,
                description,
                reminder_message: reminder,
                start_time: start,
                duration_minutes: duration,
                timezone,
                status: "scheduled".into(),
            };
            s.store.call(move |c| db::insert_event(c, &event, now)).await?;
        }
        Some(rule) => {
            if let Some(tz) = &input.timezone {
                model::check_timezone(tz)?;
            }
            // Expanding once refuses rules that cannot be read or are too dense before anything is saved.
            recurrence::expand(rule.clone(), now, now + Duration::days(super::MATERIALIZE_DAYS)).await?;
            let series = ScheduledEventSeries {
                id: crate::password::random_token(10),
                name,
                description,
                reminder_message: reminder,
                recurrence: rule.trim().to_string(),
                duration_minutes: duration,
                active: true,
            };
            let stored = series.clone();
            s.store.call(move |c| db::upsert_series(c, &stored, now)).await?;
            s.materialize_one(series, now).await?;
        }
    }
    Ok(())
}

async fn update(
    s: &Schedule,
    id: &str,
    input: EventInput,
    name: Option<String>,
    now: DateTime<Utc>,
) -> Result<(), ScheduleError> {
    let target = find(s, id).await?;
    if input.timezone.is_some() {
        return Err(ScheduleError::Invalid("timezone cannot be changed on an update".into()));
    }
    match target {
        Target::Series(mut series) => {
            if input.start.is_some() {
                return Err(ScheduleError::Invalid(
                    "a recurring series has no single start, edit its recurrence instead".into(),
                ));
            }
            if let Some(rule) = &input.recurrence {
                recurrence::expand(rule.clone(), now, now + Duration::days(super::MATERIALIZE_DAYS)).await?;
                series.recurrence = rule.trim().to_string();
            }
            // The slots of the (new) rule, a day past the created ones: announced occurrences still
            // in it are updated, the others deleted.
            let horizon = now + Duration::days(super::MATERIALIZE_DAYS + 1);
            let (slots, _) = recurrence::expand(series.recurrence.clone(), now, horizon).await?;
            if let Some(n) = name {
                series.name = n;
            }
            if let Some(d) = trimmed(input.description) {
                series.description = d;
            }
            if let Some(r) = trimmed(input.reminder_message) {
                series.reminder_message = r;
            }
            if let Some(d) = input.duration_minutes {
                series.duration_minutes = d;
            }
            let stored = series.clone();
            s.store
                .call(move |c| {
                    let tx = c.transaction()?;
                    db::upsert_series(&tx, &stored, now)?;
                    db::reconcile_series(&tx, &stored, &slots, now)?;
                    tx.commit()?;
                    Ok(())
                })
                .await?;
            if series.active {
                s.materialize_one(series, now).await?;
            }
        }
        Target::Event(mut event) => {
            if input.recurrence.is_some() {
                return Err(ScheduleError::Invalid(
                    "a one-off event cannot become a recurring series, create a new series instead".into(),
                ));
            }
            let mut moved = false;
            if let Some(start) = &input.start {
                let start = model::parse_start(start, now)?;
                moved = start != event.start_time;
                event.start_time = start;
            }
            if let Some(n) = name {
                event.name = n;
            }
            if let Some(d) = trimmed(input.description) {
                event.description = d;
            }
            if let Some(r) = trimmed(input.reminder_message) {
                event.reminder_message = r;
            }
            if let Some(d) = input.duration_minutes {
                event.duration_minutes = d;
            }
            s.store.call(move |c| db::update_event(c, &event, moved, now)).await?;
        }
    }
    Ok(())
}

async fn delete(
    State(s): State<Arc<Schedule>>,
    JsonBody(input): JsonBody<DeleteInput>,
) -> Result<Json<AdminSchedule>, ScheduleError> {
    let id =
        input.id.filter(|i| !i.trim().is_empty()).ok_or_else(|| ScheduleError::Invalid("id is required".into()))?;
    let cancel = input.cancel.unwrap_or(false);
    let now = Utc::now();
    let writing = s.writes.lock().await;
    match find(&s, &id).await? {
        Target::Series(series) => {
            if cancel {
                s.store.call(move |c| db::set_series_active(c, &series.id, false, now)).await?;
            } else {
                s.store.call(move |c| db::delete_series(c, &series.id, now)).await?;
            }
        }
        Target::Event(event) => {
            if cancel {
                s.store.call(move |c| db::cancel_event(c, &event.id, now)).await?;
            } else {
                s.store.call(move |c| db::delete_event(c, &event.id, now)).await?;
            }
        }
    }
    drop(writing);
    s.refresh().await?;
    Ok(Json(admin_schedule(&s).await?))
}

async fn preview(
    State(_): State<Arc<Schedule>>,
    JsonBody(input): JsonBody<PreviewInput>,
) -> Result<Json<Preview>, ScheduleError> {
    let rule = input.recurrence.unwrap_or_default();
    let now = Utc::now();
    let (mut occurrences, _) = recurrence::expand(rule, now, now + Duration::days(365)).await?;
    occurrences.truncate(recurrence::PREVIEW_COUNT);
    Ok(Json(Preview { occurrences }))
}

// --- settings

type Apply = fn(&Value, &mut Settings) -> Result<(), String>;

/// One `/api/admin/config/schedule/<name>` setter.
pub struct Setter {
    pub name: &'static str,
    pub summary: &'static str,
    pub value: ValueDoc,
    /// Owncast's success message.
    pub done: &'static str,
    pub apply: Apply,
}

/// Store a checked value in its settings field.
fn put<T>(slot: &mut T, value: Result<T, String>) -> Result<(), String> {
    *slot = value?;
    Ok(())
}

fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| "value must be a boolean".to_string())
}

/// A whole number of minutes that is one of `allowed`.
fn minutes(v: &Value, allowed: &[u32], refusal: &str) -> Result<u32, String> {
    let n = v.as_f64().ok_or_else(|| "value must be a whole number of minutes".to_string())?;
    if n.fract() != 0.0 {
        return Err("value must be a whole number of minutes".into());
    }
    allowed.iter().copied().find(|a| f64::from(*a) == n).ok_or_else(|| refusal.to_string())
}

/// Owncast's allowed pre-event chat windows.
pub const CHAT_OPEN_MINUTES: [u32; 5] = [0, 5, 10, 30, 60];
/// Owncast's allowed reminder times.
pub const REMINDER_MINUTES_ALLOWED: [u32; 6] = [0, 15, 30, 60, 120, 1440];
const REMINDER_REFUSAL: &str = "value must be 0, 15, 30, 60, 120, or 1440 minutes";

pub static SETTERS: &[Setter] = &[
    Setter {
        name: "enabled",
        summary: "Turn the schedule on or off",
        value: ValueDoc::Boolean,
        done: "schedule feature updated",
        apply: |v, s| put(&mut s.schedule.schedule_enabled, boolean(v)),
    },
    Setter {
        name: "showcountdown",
        summary: "Show a countdown to the next event",
        value: ValueDoc::Boolean,
        done: "schedule countdown setting updated",
        apply: |v, s| put(&mut s.schedule.schedule_show_countdown, boolean(v)),
    },
    Setter {
        name: "chatopenminutes",
        summary: "Open chat this many minutes before an event (0, 5, 10, 30, 60)",
        value: ValueDoc::Json(CHAT_MINUTES),
        done: "schedule chat open setting updated",
        apply: |v, s| {
            put(
                &mut s.schedule.schedule_chat_open_minutes,
                minutes(v, &CHAT_OPEN_MINUTES, "value must be 0, 5, 10, 30, or 60 minutes"),
            )
        },
    },
    Setter {
        name: "firstreminderminutes",
        summary: "First reminder, minutes before an event (0 = off)",
        value: ValueDoc::Json(REMINDER_MINUTES),
        done: "schedule reminder setting updated",
        apply: |v, s| {
            put(
                &mut s.schedule.schedule_first_reminder_minutes,
                minutes(v, &REMINDER_MINUTES_ALLOWED, REMINDER_REFUSAL),
            )
        },
    },
    Setter {
        name: "secondreminderminutes",
        summary: "Second reminder, minutes before an event (0 = off)",
        value: ValueDoc::Json(REMINDER_MINUTES),
        done: "schedule reminder setting updated",
        apply: |v, s| {
            put(
                &mut s.schedule.schedule_second_reminder_minutes,
                minutes(v, &REMINDER_MINUTES_ALLOWED, REMINDER_REFUSAL),
            )
        },
    },
    Setter {
        name: "remindermessage",
        summary: "The reminder message (empty: no reminders unless an event has its own)",
        value: ValueDoc::Json(TEXT_500),
        done: "schedule reminder message updated",
        apply: |v, s| {
            let text = v.as_str().ok_or_else(|| "value must be a string".to_string())?.trim().to_string();
            if text.chars().count() > 500 {
                return Err("value may be at most 500 characters".into());
            }
            s.schedule.schedule_reminder_message = text;
            Ok(())
        },
    },
];

async fn apply_setter(
    s: Arc<Schedule>,
    setter: &'static Setter,
    body: axum::body::Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    let value = setter_value(&body)?;
    s.settings.update::<ApiError, _>(|settings| (setter.apply)(&value, settings).map_err(ApiError::BadRequest)).await?;
    s.refresh().await.map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(StatusResponse::ok(setter.done))
}
