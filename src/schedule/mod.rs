//! Scheduled streams (Owncast's "schedule"): one-off events and recurring series (RFC 5545 RRULE in an
//! IANA zone), the public schedule and its iCalendar feed, the current or next event in `/api/status`
//! with whether chat is open for it, the schedule settings, and the background tick that creates a
//! series' occurrences, sends reminders and fires the SCHEDULED_EVENTS webhooks.
//!
//! Owns the `stream_event_series`, `stream_events`, `stream_event_skips` and
//! `stream_event_federation_deletes` tables (`db`) and the `schedule*` settings (its setters live in
//! `api`). Talks to the rest of the daemon through the bus: `Event::ScheduledEvent` (webhooks),
//! `Event::ScheduleReminder` (browser push and Discord), `Event::ScheduleFederation` (federation sends
//! the ActivityPub Event, its Updates and Delete, and the reminders in reply to it) and
//! `Event::ScheduleChatClosing` (chat says a scheduled stream never started); the API's status reads
//! the next event through the `ScheduleWatch` handle it is given, and chat asks it (through a closure
//! the composition root builds) whether a scheduled stream opens chat while the stream is offline.
//! `page` serves `/schedule/{id}`, the event's public page the reminders link to.
//!
//! The tick (`TICK`, and at once after every admin change) runs even while the schedule is off, but
//! then only creates occurrences: federation, the chat window, reminders and webhooks need the
//! schedule on (Owncast's order: announce, Updates, Deletes, chat, reminders, federated reminders,
//! webhooks). The followers hear of an event only while federation is on (with a server URL); an
//! event is announced once, and every later change or cancellation of an announced event owes them
//! one Update, a deletion one Delete (kept in the database until sent).

pub mod api;
pub mod db;
pub mod ics;
pub mod model;
pub mod page;
pub mod recurrence;
pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde_json::json;
use tokio::sync::{watch, Notify};
use tracing::warn;

use crate::config::Settings;
use crate::events::schedule::{FederatedEvent, ScheduleAction, ScheduleStreamStatus};
use crate::events::{Bus, Event, ScheduleActivity, ScheduleNotice};
use crate::http::ApiError;
use crate::store::settings::SettingsStore;
use crate::store::{Store, StoreError};
use crate::stream::StreamWatch;
use crate::tasks::{Stage, Tasks};
use model::{ScheduledEvent, ScheduledEventSeries, ScheduledStatus};

/// How often the background work runs.
pub const TICK: Duration = Duration::from_secs(10);
/// How far ahead a series' occurrences are created (Owncast: 30 days).
pub const MATERIALIZE_DAYS: i64 = 30;
/// Chat allowed by a schedule closes this long after the start when the stream never started.
pub const NO_SHOW_MINUTES: i64 = 10;
/// The webhook warning goes out this long before the start.
pub const WARNING_MINUTES: i64 = 10;
/// Chat hears that the stream never started this long after the start (a minute before it closes).
pub const CHAT_CLOSING_MINUTES: i64 = 9;
/// Owncast's chat notice when a scheduled stream that opened chat never started.
pub const NEVER_STARTED_MESSAGE: &str =
    "This scheduled live stream never started, so chat is being turned off. Thanks for coming!";
/// The stamps of reminder slot 1 and 2: (reminder sent, federated reminder sent).
const REMINDER_COLUMNS: [(&str, &str); 2] =
    [("reminder_1_sent_at", "federation_reminder_1_sent_at"), ("reminder_2_sent_at", "federation_reminder_2_sent_at")];

/// Errors of the schedule.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// Bad input, with Owncast's message.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ScheduleError {
    fn from(e: rusqlite::Error) -> Self {
        ScheduleError::Store(StoreError::Sqlite(e))
    }
}

impl IntoResponse for ScheduleError {
    /// Owncast answers bad input with 400 `{"error": ...}`; castd adds its StatusResponse fields, so
    /// clients of either shape read the message.
    fn into_response(self) -> Response {
        match self {
            ScheduleError::Invalid(m) => {
                (StatusCode::BAD_REQUEST, Json(json!({"success": false, "message": m, "error": m}))).into_response()
            }
            ScheduleError::Store(e) => ApiError::from(e).into_response(),
        }
    }
}

/// The schedule feature's state.
pub struct Schedule {
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    /// The current or next event (the status' `scheduledEvent`); written here only.
    upcoming: watch::Sender<Option<ScheduledEvent>>,
    /// Wakes the tick after an admin change.
    kick: Notify,
    /// Held by an admin change and by the tick's materialization, so the tick never re-creates
    /// occurrences from a series row an admin change has just replaced.
    writes: tokio::sync::Mutex<()>,
}

/// Read side for `/api/status`: the current or next event and whether chat is open for it.
#[derive(Clone)]
pub struct ScheduleWatch {
    upcoming: watch::Receiver<Option<ScheduledEvent>>,
    settings: SettingsStore,
}

impl ScheduleWatch {
    /// `scheduledEvent` of `/api/status`: None while the schedule is off or nothing is coming.
    pub fn status(&self, online: bool, now: DateTime<Utc>) -> Option<ScheduledStatus> {
        let s = self.settings.get();
        if !s.schedule.schedule_enabled {
            return None;
        }
        let e = self.upcoming.borrow().clone()?;
        let chat_open = chat_open(&e, i64::from(s.schedule.schedule_chat_open_minutes), online, now);
        Some(ScheduledStatus {
            id: e.id,
            name: e.name,
            description: e.description,
            start_time: e.start_time,
            duration_minutes: e.duration_minutes,
            chat_open,
        })
    }

    /// Whether a scheduled event opens chat now (false while the schedule is off).
    pub fn chat_open(&self, online: bool, now: DateTime<Utc>) -> bool {
        self.status(online, now).is_some_and(|s| s.chat_open)
    }
}

/// Owncast's rule: chat is open from `start - minutes` until the end; while offline it closes
/// `NO_SHOW_MINUTES` after the start.
pub fn chat_open(e: &ScheduledEvent, minutes: i64, online: bool, now: DateTime<Utc>) -> bool {
    let start = e.start_time;
    let end = start + chrono::Duration::minutes(e.duration_minutes);
    let opens = start - chrono::Duration::minutes(minutes);
    if !online && now >= start + chrono::Duration::minutes(NO_SHOW_MINUTES) {
        return false;
    }
    now >= opens && now < end
}

impl Schedule {
    /// Apply the migrations and load the next event.
    pub fn open(store: Store, settings: SettingsStore, bus: Bus, stream: StreamWatch) -> Result<Arc<Self>, StoreError> {
        store.migrate("schedule", db::MIGRATIONS)?;
        let next = store.with(|c| db::upcoming(c, Utc::now()))?;
        let (upcoming, _) = watch::channel(next);
        Ok(Arc::new(Self {
            store,
            settings,
            bus,
            stream,
            upcoming,
            kick: Notify::new(),
            writes: tokio::sync::Mutex::new(()),
        }))
    }

    pub fn watch(&self) -> ScheduleWatch {
        ScheduleWatch { upcoming: self.upcoming.subscribe(), settings: self.settings.clone() }
    }

    /// Create the occurrences of every active series in `[now, now + 30 days)` (idempotent).
    pub async fn materialize(&self, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        let _writing = self.writes.lock().await;
        let series: Vec<ScheduledEventSeries> = self.store.call(|c| db::all_series(c)).await?;
        for s in series.into_iter().filter(|s| s.active) {
            if let Err(e) = self.materialize_one(s.clone(), now).await {
                warn!(series = %s.id, "cannot create the occurrences of a series: {e}");
            }
        }
        Ok(())
    }

    async fn materialize_one(&self, s: ScheduledEventSeries, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        let to = now + chrono::Duration::days(MATERIALIZE_DAYS);
        let (starts, tz) = recurrence::expand(s.recurrence.clone(), now, to).await?;
        self.store
            .call(move |c| {
                let tx = c.transaction()?;
                for start in starts {
                    db::insert_occurrence(&tx, &s, &crate::password::random_token(10), start, &tz, now)?;
                }
                tx.commit()?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Re-read the next event into the watch, and wake the tick.
    pub async fn refresh(&self) -> Result<(), ScheduleError> {
        let next = self.store.call(|c| db::upcoming(c, Utc::now())).await?;
        self.upcoming.send_replace(next);
        self.kick.notify_one();
        Ok(())
    }

    /// One pass of the background work.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        self.materialize(now).await?;
        let next = self.store.call(move |c| db::upcoming(c, now)).await?;
        self.upcoming.send_replace(next);
        let s = self.settings.get();
        if !s.schedule.schedule_enabled {
            return Ok(());
        }
        let federating = federating(&s);
        if federating {
            self.federate(now).await?;
        }
        self.no_shows(now, i64::from(s.schedule.schedule_chat_open_minutes)).await?;
        self.reminders(now).await?;
        if federating {
            self.federated_reminders(now).await?;
        }
        self.webhooks(now).await?;
        Ok(())
    }

    /// The followers' side: announce (`Create`) the future events not announced yet, then send the
    /// owed Updates, then the owed Deletes. Each is stamped before it is published, so it goes once.
    async fn federate(&self, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        for e in self.store.call(move |c| db::unannounced(c, now)).await? {
            let id = e.id.clone();
            self.store.call(move |c| db::stamp(c, &id, "federated_at", now)).await?;
            self.bus.publish(Event::ScheduleFederation(ScheduleActivity::Create { event: federated(&e) }));
        }
        for (e, version) in self.store.call(|c| db::owed_updates(c)).await? {
            let id = e.id.clone();
            self.store.call(move |c| db::update_sent(c, &id, version)).await?;
            self.bus.publish(Event::ScheduleFederation(ScheduleActivity::Update { event: federated(&e), version }));
        }
        for id in self.store.call(|c| db::owed_deletes(c)).await? {
            let sent = id.clone();
            self.store.call(move |c| db::delete_sent(c, &sent)).await?;
            self.bus.publish(Event::ScheduleFederation(ScheduleActivity::Delete { id }));
        }
        Ok(())
    }

    /// A pre-opened chat whose stream never started: chat hears so `CHAT_CLOSING_MINUTES` after the
    /// start, and the event is cancelled `NO_SHOW_MINUTES` after it (Owncast).
    async fn no_shows(&self, now: DateTime<Utc>, minutes: i64) -> Result<(), ScheduleError> {
        if minutes == 0 {
            return Ok(());
        }
        let state = self.stream.borrow().clone();
        let started = |e: &ScheduledEvent| {
            let opened = e.start_time - chrono::Duration::minutes(minutes);
            state.online || state.last_connect_time.is_some_and(|t| t >= opened)
        };
        // Only within the minute before chat closes: a notice is never sent late.
        let from = now - chrono::Duration::minutes(NO_SHOW_MINUTES);
        let to = now - chrono::Duration::minutes(CHAT_CLOSING_MINUTES);
        let closing = self.store.call(move |c| db::due(c, "chat_closing_sent_at", from, to)).await?;
        for e in closing.into_iter().filter(|e| !started(e)) {
            let id = e.id.clone();
            self.store.call(move |c| db::stamp(c, &id, "chat_closing_sent_at", now)).await?;
            self.bus.publish(Event::ScheduleChatClosing { event_id: e.id, body: NEVER_STARTED_MESSAGE.into() });
        }
        let from = now - chrono::Duration::minutes(NO_SHOW_MINUTES + 60);
        let to = now - chrono::Duration::minutes(NO_SHOW_MINUTES);
        let due = self.store.call(move |c| db::due(c, "webhook_ended_sent_at", from, to)).await?;
        for e in due {
            if !started(&e) {
                let id = e.id.clone();
                self.store.call(move |c| db::cancel_event(c, &id, now)).await?;
                tracing::info!(event = %e.id, "the scheduled stream never started; the event is cancelled");
            }
        }
        Ok(())
    }

    /// Reminders: for each slot (first, second; 0 = off, equal values once) the events starting within
    /// it get the reminder text, sent by browser push and Discord and as a webhook.
    async fn reminders(&self, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        let s = self.settings.get();
        for (slot, minutes) in reminder_slots(&s) {
            let column = REMINDER_COLUMNS[slot].0;
            let to = now + chrono::Duration::minutes(i64::from(minutes));
            let due = self.store.call(move |c| db::due(c, column, now, to)).await?;
            for e in due {
                let id = e.id.clone();
                self.store.call(move |c| db::stamp(c, &id, column, now)).await?;
                let Some(text) = reminder_text(&e, &s.schedule.schedule_reminder_message, &s.server.server_url) else {
                    continue;
                };
                self.bus.publish(Event::ScheduleReminder { event_id: e.id.clone(), text: text.clone() });
                self.webhook(&e, ScheduleAction::Reminder, Some(text), now);
            }
        }
        Ok(())
    }

    /// Federated reminders: for each slot, the announced events starting within it get the reminder
    /// as a `Create{Note}` in reply to their Event.
    async fn federated_reminders(&self, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        let s = self.settings.get();
        for (slot, minutes) in reminder_slots(&s) {
            let column = REMINDER_COLUMNS[slot].1;
            let to = now + chrono::Duration::minutes(i64::from(minutes));
            let due = self.store.call(move |c| db::announced_due(c, column, now, to)).await?;
            for e in due {
                let id = e.id.clone();
                self.store.call(move |c| db::stamp(c, &id, column, now)).await?;
                if let Some(text) = reminder_text(&e, &s.schedule.schedule_reminder_message, &s.server.server_url) {
                    let slot = if slot == 0 { 1 } else { 2 };
                    self.bus.publish(Event::ScheduleFederation(ScheduleActivity::Reminder { id: e.id, slot, text }));
                }
            }
        }
        Ok(())
    }

    /// SCHEDULED_EVENTS webhooks: `10-minute-warning`, `started`, `ended`.
    async fn webhooks(&self, now: DateTime<Utc>) -> Result<(), ScheduleError> {
        let warn_to = now + chrono::Duration::minutes(WARNING_MINUTES);
        let warning = self.store.call(move |c| db::due(c, "webhook_warning_sent_at", now, warn_to)).await?;
        for e in warning {
            let id = e.id.clone();
            self.store.call(move |c| db::stamp(c, &id, "webhook_warning_sent_at", now)).await?;
            self.webhook(&e, ScheduleAction::TenMinuteWarning, None, now);
        }
        // Started: the start has passed (within the longest event, so old rows are not announced).
        let from = now - chrono::Duration::minutes(model::MAX_DURATION_MINUTES);
        let started = self.store.call(move |c| db::due(c, "webhook_started_sent_at", from, now)).await?;
        for e in started.into_iter().filter(|e| e.start_time + chrono::Duration::minutes(e.duration_minutes) > now) {
            let id = e.id.clone();
            self.store.call(move |c| db::stamp(c, &id, "webhook_started_sent_at", now)).await?;
            let name = e.name.clone();
            let title = self
                .settings
                .update::<StoreError, _>(|s| {
                    s.instance.stream_title = name;
                    Ok(())
                })
                .await;
            if let Err(err) = title {
                warn!("cannot set the stream title to the scheduled event's name: {err}");
            }
            self.webhook(&e, ScheduleAction::Started, None, now);
        }
        let ended = self.store.call(move |c| db::ended(c, now)).await?;
        for e in ended {
            let id = e.id.clone();
            self.store.call(move |c| db::stamp(c, &id, "webhook_ended_sent_at", now)).await?;
            self.webhook(&e, ScheduleAction::Ended, None, now);
        }
        Ok(())
    }

    fn webhook(&self, e: &ScheduledEvent, action: ScheduleAction, message: Option<String>, now: DateTime<Utc>) {
        let s = self.settings.get();
        let state = self.stream.borrow().clone();
        self.bus.publish(Event::ScheduledEvent(ScheduleNotice {
            status: ScheduleStreamStatus {
                online: state.online,
                stream_title: s.instance.stream_title.clone(),
                last_connect_time: state.last_connect_time,
                last_disconnect_time: state.last_disconnect_time,
            },
            server_url: s.server.server_url.clone(),
            event: e.clone(),
            action,
            timestamp: now,
            message,
        }));
    }
}

/// Whether the followers hear of scheduled streams: federation on, with a server URL.
fn federating(s: &Settings) -> bool {
    s.federation.federation_enabled && !s.server.server_url.is_empty()
}

/// The reminder slots in use, as (index into `REMINDER_COLUMNS`, minutes before the start): 0 is
/// off, and a second slot equal to the first is left out.
fn reminder_slots(s: &Settings) -> Vec<(usize, u32)> {
    let (first, second) = (s.schedule.schedule_first_reminder_minutes, s.schedule.schedule_second_reminder_minutes);
    let mut slots = vec![(0, first)];
    if second != first {
        slots.push((1, second));
    }
    slots.into_iter().filter(|(_, m)| *m > 0).collect()
}

/// An event as federation describes it.
fn federated(e: &ScheduledEvent) -> FederatedEvent {
    FederatedEvent {
        id: e.id.clone(),
        name: e.name.clone(),
        description: e.description.clone(),
        start_time: e.start_time,
        duration_minutes: e.duration_minutes,
        timezone: e.timezone.clone(),
        cancelled: e.status == "cancelled",
    }
}

/// The reminder text: the event's (or series') message, else the global one (both empty: none), a
/// blank line, the name and the start in the event's zone, and the event's page when the server URL
/// is set.
pub fn reminder_text(e: &ScheduledEvent, global: &str, server_url: &str) -> Option<String> {
    let message = if e.reminder_message.trim().is_empty() { global.trim() } else { e.reminder_message.trim() };
    if message.is_empty() {
        return None;
    }
    let tz: chrono_tz::Tz = e.timezone.parse().unwrap_or(chrono_tz::UTC);
    let when = e.start_time.with_timezone(&tz).format("%A, %B %-d at %-I:%M %p %Z");
    let mut text = format!("{message}\n\n{} {when}", e.name);
    if !server_url.is_empty() {
        text.push_str(&format!("\n{}/schedule/{}", server_url.trim_end_matches('/'), e.id));
    }
    Some(text)
}

/// Start the background tick.
pub fn start(schedule: Arc<Schedule>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "schedule: tick", async move {
        loop {
            if let Err(e) = schedule.tick(Utc::now()).await {
                warn!("schedule: {e}");
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = schedule.kick.notified() => {}
            }
        }
    });
}

pub use api::routes;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn event(start: DateTime<Utc>) -> ScheduledEvent {
        ScheduledEvent {
            id: "abc".into(),
            series_id: None,
            name: "Show".into(),
            description: String::new(),
            reminder_message: String::new(),
            start_time: start,
            duration_minutes: 60,
            timezone: "America/New_York".into(),
            status: "scheduled".into(),
        }
    }

    /// A schedule on a temporary database, switched on with the given reminder settings.
    async fn schedule(
        dir: &std::path::Path,
    ) -> (Arc<Schedule>, crate::events::Subscription, crate::stream::StreamWriter) {
        let store = Store::open(&dir.join("s.db")).unwrap();
        let bus = Bus::default();
        let settings = SettingsStore::open(store.clone(), bus.clone()).unwrap();
        settings
            .update::<StoreError, _>(|s| {
                s.schedule.schedule_enabled = true;
                s.schedule.schedule_reminder_message = "Soon!".into();
                s.schedule.schedule_first_reminder_minutes = 60;
                s.schedule.schedule_second_reminder_minutes = 15;
                s.schedule.schedule_chat_open_minutes = 10;
                Ok(())
            })
            .await
            .unwrap();
        let sub = bus.subscribe("test");
        let (writer, stream) = crate::stream::StreamWriter::new();
        (Schedule::open(store, settings, bus, stream).unwrap(), sub, writer)
    }

    fn actions(sub: &mut crate::events::Subscription) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(e) = sub.try_recv() {
            match &*e {
                Event::ScheduledEvent(n) => {
                    out.push(serde_json::to_value(n.action).unwrap().as_str().unwrap().to_string())
                }
                Event::ScheduleReminder { .. } => out.push("post".into()),
                Event::ScheduleChatClosing { body, .. } => {
                    assert_eq!(body, NEVER_STARTED_MESSAGE);
                    out.push("chat-closing".into())
                }
                _ => {}
            }
        }
        out
    }

    #[tokio::test]
    async fn the_tick_sends_each_notice_once_at_its_time_and_cancels_a_no_show() {
        let dir = tempfile::tempdir().unwrap();
        let (s, mut sub, _writer) = schedule(dir.path()).await;
        let start = Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap();
        let e = ScheduledEvent { duration_minutes: 30, ..event(start) };
        let (a, b) = (
            e.clone(),
            ScheduledEvent { id: "other".into(), start_time: start + chrono::Duration::days(1), ..e.clone() },
        );
        s.store
            .call(move |c| {
                db::insert_event(c, &a, start)?;
                db::insert_event(c, &b, start)
            })
            .await
            .unwrap();
        let at = |m: i64| start + chrono::Duration::minutes(m);

        s.tick(at(-90)).await.unwrap();
        assert!(actions(&mut sub).is_empty(), "nothing 90 minutes before");
        s.tick(at(-59)).await.unwrap();
        assert_eq!(actions(&mut sub), ["post", "reminder"], "first reminder: followers and webhook");
        s.tick(at(-58)).await.unwrap();
        assert!(actions(&mut sub).is_empty(), "sent once");
        s.tick(at(-14)).await.unwrap();
        assert_eq!(actions(&mut sub), ["post", "reminder"], "second reminder");
        s.tick(at(-9)).await.unwrap();
        assert_eq!(actions(&mut sub), ["10-minute-warning"]);
        s.tick(at(1)).await.unwrap();
        assert_eq!(actions(&mut sub), ["started"]);
        assert_eq!(s.settings.get().instance.stream_title, "Show", "the title becomes the event's name");
        // chat was opened early, the stream never came: chat hears it 9 minutes after the start (once),
        // and the event is cancelled 10 minutes after it
        s.tick(at(8)).await.unwrap();
        assert!(actions(&mut sub).is_empty());
        s.tick(at(9) + chrono::Duration::seconds(5)).await.unwrap();
        assert_eq!(actions(&mut sub), ["chat-closing"]);
        s.tick(at(9) + chrono::Duration::seconds(15)).await.unwrap();
        assert!(actions(&mut sub).is_empty());
        s.tick(at(11)).await.unwrap();
        let row = s.store.call(|c| db::event(c, "abc")).await.unwrap().unwrap();
        assert_eq!(row.status, "cancelled");
        s.tick(at(31)).await.unwrap();
        assert_eq!(actions(&mut sub), ["ended"]);
        s.tick(at(40)).await.unwrap();
        assert!(actions(&mut sub).is_empty());
        let other = s.store.call(|c| db::event(c, "other")).await.unwrap().unwrap();
        assert_eq!(other.status, "scheduled", "the next day's event is untouched");
    }

    #[test]
    fn chat_window_follows_owncast() {
        let start = Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap();
        let e = event(start);
        let m = |x: i64| start + chrono::Duration::minutes(x);
        assert!(!chat_open(&e, 10, false, m(-11)));
        assert!(chat_open(&e, 10, false, m(-10)));
        assert!(chat_open(&e, 10, false, m(9)));
        assert!(!chat_open(&e, 10, false, m(10)), "offline 10 minutes after the start: closed");
        assert!(chat_open(&e, 10, true, m(59)));
        assert!(!chat_open(&e, 10, true, m(60)));
        assert!(!chat_open(&e, 0, false, m(-1)), "0 minutes: no pre-event chat");
    }

    #[test]
    fn reminder_text_uses_the_event_zone() {
        let e = event(Utc.with_ymd_and_hms(2030, 1, 7, 20, 4, 0).unwrap());
        assert_eq!(reminder_text(&e, "", ""), None);
        let t = reminder_text(&e, "Soon!", "https://live.example/").unwrap();
        assert_eq!(t, "Soon!\n\nShow Monday, January 7 at 3:04 PM EST\nhttps://live.example/schedule/abc");
        let own = ScheduledEvent { reminder_message: "Mine".into(), ..e };
        assert!(reminder_text(&own, "Soon!", "").unwrap().starts_with("Mine\n\n"));
    }
}
