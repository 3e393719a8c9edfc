//! The schedule's tables (Owncast's `stream_event_series` and `stream_events`, plus the slots of a
//! series the owner deleted, so they are not created again, and Owncast's
//! `stream_event_federation_deletes`, the announced events whose ActivityPub Delete is still to be
//! sent) and every query on them. Times are stored
//! as RFC 3339 UTC text with whole seconds, so text order is time order.

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};

use super::model::{ScheduledEvent, ScheduledEventSeries};
use crate::store::{Migrations, StoreError};

// `series_id` has no foreign key: the past occurrences of a deleted series are kept, as in Owncast.
pub const MIGRATIONS: Migrations = &[
    "CREATE TABLE stream_event_series (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        reminder_message TEXT NOT NULL DEFAULT '',
        recurrence TEXT NOT NULL,
        duration_minutes INTEGER NOT NULL DEFAULT 60,
        active BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE stream_events (
        id TEXT PRIMARY KEY,
        series_id TEXT,
        original_start TEXT,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        reminder_message TEXT NOT NULL DEFAULT '',
        start_time TEXT NOT NULL,
        duration_minutes INTEGER NOT NULL DEFAULT 60,
        timezone TEXT NOT NULL DEFAULT 'UTC',
        status TEXT NOT NULL DEFAULT 'scheduled',
        reminder_1_sent_at TEXT,
        reminder_2_sent_at TEXT,
        webhook_warning_sent_at TEXT,
        webhook_started_sent_at TEXT,
        webhook_ended_sent_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE UNIQUE INDEX idx_stream_events_series_slot ON stream_events(series_id, original_start);
    CREATE INDEX idx_stream_events_start ON stream_events(start_time);
    CREATE TABLE stream_event_skips (
        series_id TEXT NOT NULL,
        original_start TEXT NOT NULL,
        PRIMARY KEY (series_id, original_start)
    );",
    // Federation (Owncast's migration 00012): when an event was announced to the followers, whether an
    // Update is owed and how many went out, the federated reminders; and the chat notice of a
    // scheduled stream that never started.
    "ALTER TABLE stream_events ADD COLUMN federated_at TEXT;
    ALTER TABLE stream_events ADD COLUMN federation_update_pending BOOLEAN NOT NULL DEFAULT FALSE;
    ALTER TABLE stream_events ADD COLUMN federation_version INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE stream_events ADD COLUMN federation_reminder_1_sent_at TEXT;
    ALTER TABLE stream_events ADD COLUMN federation_reminder_2_sent_at TEXT;
    ALTER TABLE stream_events ADD COLUMN chat_closing_sent_at TEXT;
    CREATE INDEX idx_stream_events_federated ON stream_events(federated_at);
    CREATE TABLE stream_event_federation_deletes (
        event_id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL
    );",
];

/// Stored time text.
pub fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn parse_ts(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e)))
}

const EVENT_COLUMNS: &str =
    "id, series_id, name, description, reminder_message, start_time, duration_minutes, timezone, status";

fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScheduledEvent> {
    Ok(ScheduledEvent {
        id: r.get(0)?,
        series_id: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        reminder_message: r.get(4)?,
        start_time: parse_ts(&r.get::<_, String>(5)?)?,
        duration_minutes: r.get(6)?,
        timezone: r.get(7)?,
        status: r.get(8)?,
    })
}

const SERIES_COLUMNS: &str = "id, name, description, reminder_message, recurrence, duration_minutes, active";

fn series_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScheduledEventSeries> {
    Ok(ScheduledEventSeries {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        reminder_message: r.get(3)?,
        recurrence: r.get(4)?,
        duration_minutes: r.get(5)?,
        active: r.get(6)?,
    })
}

/// Events with `from <= start < to`, in time order (cancelled ones included).
pub fn events_between(
    c: &Connection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ScheduledEvent>, StoreError> {
    let mut stmt = c.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM stream_events WHERE start_time >= ?1 AND start_time < ?2 ORDER BY start_time, id"
    ))?;
    let rows = stmt.query_map(params![ts(from), ts(to)], event_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Every event (the admin list), in time order, at most `limit`.
pub fn all_events(c: &Connection, limit: i64) -> Result<Vec<ScheduledEvent>, StoreError> {
    let mut stmt = c.prepare(&format!("SELECT {EVENT_COLUMNS} FROM stream_events ORDER BY start_time, id LIMIT ?1"))?;
    let rows = stmt.query_map([limit], event_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn all_series(c: &Connection) -> Result<Vec<ScheduledEventSeries>, StoreError> {
    let mut stmt = c.prepare(&format!("SELECT {SERIES_COLUMNS} FROM stream_event_series ORDER BY created_at, id"))?;
    let rows = stmt.query_map([], series_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn event(c: &Connection, id: &str) -> Result<Option<ScheduledEvent>, StoreError> {
    Ok(c.query_row(&format!("SELECT {EVENT_COLUMNS} FROM stream_events WHERE id = ?1"), [id], event_row).optional()?)
}

pub fn series(c: &Connection, id: &str) -> Result<Option<ScheduledEventSeries>, StoreError> {
    Ok(c.query_row(&format!("SELECT {SERIES_COLUMNS} FROM stream_event_series WHERE id = ?1"), [id], series_row)
        .optional()?)
}

/// The earliest `scheduled` event that has not ended by `now`.
pub fn upcoming(c: &Connection, now: DateTime<Utc>) -> Result<Option<ScheduledEvent>, StoreError> {
    // An event lasts at most 7 days, so only rows that started in the last 7 days can still run.
    let earliest = now - chrono::Duration::minutes(super::model::MAX_DURATION_MINUTES);
    let mut stmt = c.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM stream_events WHERE status = 'scheduled' AND start_time >= ?1
         ORDER BY start_time, id"
    ))?;
    let mut rows = stmt.query_map([ts(earliest)], event_row)?;
    for row in rows.by_ref() {
        let e = row?;
        if e.start_time + chrono::Duration::minutes(e.duration_minutes) > now {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

pub fn insert_event(c: &Connection, e: &ScheduledEvent, now: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO stream_events (id, series_id, original_start, name, description, reminder_message, start_time,
           duration_minutes, timezone, status, created_at, updated_at)
         VALUES (?1, NULL, NULL, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        params![
            e.id,
            e.name,
            e.description,
            e.reminder_message,
            ts(e.start_time),
            e.duration_minutes,
            e.timezone,
            e.status,
            ts(now)
        ],
    )?;
    Ok(())
}

/// Rewrite an event (an announced one owes its followers an Update); a moved start clears the sent
/// reminders and warnings.
pub fn update_event(c: &Connection, e: &ScheduledEvent, moved: bool, now: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(
        "UPDATE stream_events SET name = ?2, description = ?3, reminder_message = ?4, start_time = ?5,
           duration_minutes = ?6, updated_at = ?7 WHERE id = ?1",
        params![e.id, e.name, e.description, e.reminder_message, ts(e.start_time), e.duration_minutes, ts(now)],
    )?;
    if moved {
        c.execute(
            "UPDATE stream_events SET webhook_warning_sent_at = NULL, reminder_1_sent_at = NULL,
               reminder_2_sent_at = NULL, federation_reminder_1_sent_at = NULL,
               federation_reminder_2_sent_at = NULL WHERE id = ?1",
            [&e.id],
        )?;
    }
    owe_update(c, &e.id)
}

/// An announced event changed: its followers are owed an Update (one more version).
pub fn owe_update(c: &Connection, id: &str) -> Result<(), StoreError> {
    c.execute(
        "UPDATE stream_events SET federation_update_pending = TRUE, federation_version = federation_version + 1
         WHERE id = ?1 AND federated_at IS NOT NULL",
        [id],
    )?;
    Ok(())
}

/// Before announced events are deleted (those `rows` selects, by id): their followers are owed a Delete.
fn owe_deletes(c: &Connection, rows: &str, args: impl rusqlite::Params, now: DateTime<Utc>) -> Result<(), StoreError> {
    let mut stmt = c.prepare(&format!(
        "INSERT OR IGNORE INTO stream_event_federation_deletes (event_id, created_at)
         SELECT id, '{}' FROM stream_events WHERE federated_at IS NOT NULL AND id IN ({rows})",
        ts(now)
    ))?;
    stmt.execute(args)?;
    Ok(())
}

pub fn upsert_series(c: &Connection, s: &ScheduledEventSeries, now: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO stream_event_series (id, name, description, reminder_message, recurrence, duration_minutes,
           active, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, description = excluded.description,
           reminder_message = excluded.reminder_message, recurrence = excluded.recurrence,
           duration_minutes = excluded.duration_minutes, active = excluded.active, updated_at = excluded.updated_at",
        params![s.id, s.name, s.description, s.reminder_message, s.recurrence, s.duration_minutes, s.active, ts(now)],
    )?;
    Ok(())
}

/// A series' rule or fields changed (Owncast): its future `scheduled` occurrences not announced yet
/// are removed (they are created again from the new rule); announced ones whose slot is still in
/// `slots` (the new rule's starts) take the series' fields and owe an Update, the others owe a Delete
/// and are removed.
pub fn reconcile_series(
    c: &Connection,
    series: &ScheduledEventSeries,
    slots: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    c.execute(
        "DELETE FROM stream_events WHERE series_id = ?1 AND start_time >= ?2 AND status = 'scheduled'
           AND federated_at IS NULL",
        params![series.id, ts(now)],
    )?;
    let announced: Vec<(String, Option<String>)> = {
        let mut stmt = c.prepare(
            "SELECT id, original_start FROM stream_events WHERE series_id = ?1 AND start_time >= ?2
               AND status = 'scheduled' AND federated_at IS NOT NULL",
        )?;
        let rows = stmt.query_map(params![series.id, ts(now)], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let slots: std::collections::HashSet<String> = slots.iter().map(|t| ts(*t)).collect();
    for (id, original) in announced {
        if original.is_some_and(|o| slots.contains(&o)) {
            c.execute(
                "UPDATE stream_events SET name = ?2, description = ?3, reminder_message = ?4, duration_minutes = ?5,
                   updated_at = ?6 WHERE id = ?1",
                params![id, series.name, series.description, series.reminder_message, series.duration_minutes, ts(now)],
            )?;
            owe_update(c, &id)?;
        } else {
            owe_deletes(c, "?1", [&id], now)?;
            c.execute("DELETE FROM stream_events WHERE id = ?1", [&id])?;
        }
    }
    Ok(())
}

/// Delete a series: its future occurrences that are not cancelled (announced ones owe a Delete),
/// then the row; past occurrences and cancelled ones stay, listed as before (Owncast keeps
/// cancelled rows whatever happens to their series).
pub fn delete_series(c: &mut Connection, id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
    let tx = c.transaction()?;
    owe_deletes(
        &tx,
        "SELECT id FROM stream_events WHERE series_id = ?1 AND start_time >= ?2 AND status != 'cancelled'",
        params![id, ts(now)],
        now,
    )?;
    tx.execute(
        "DELETE FROM stream_events WHERE series_id = ?1 AND start_time >= ?2 AND status != 'cancelled'",
        params![id, ts(now)],
    )?;
    tx.execute("DELETE FROM stream_event_skips WHERE series_id = ?1", [id])?;
    tx.execute("DELETE FROM stream_event_series WHERE id = ?1", [id])?;
    tx.commit()?;
    Ok(())
}

pub fn set_series_active(c: &Connection, id: &str, active: bool, now: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(
        "UPDATE stream_event_series SET active = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, active, ts(now)],
    )?;
    Ok(())
}

/// Cancel an event (an announced one owes an Update).
pub fn cancel_event(c: &Connection, id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute("UPDATE stream_events SET status = 'cancelled', updated_at = ?2 WHERE id = ?1", params![id, ts(now)])?;
    owe_update(c, id)
}

/// Delete one event (an announced one owes a Delete); an occurrence's slot is remembered so the
/// series does not create it again.
pub fn delete_event(c: &mut Connection, id: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
    let tx = c.transaction()?;
    owe_deletes(&tx, "?1", [id], now)?;
    tx.execute(
        "INSERT OR IGNORE INTO stream_event_skips (series_id, original_start)
         SELECT series_id, original_start FROM stream_events
         WHERE id = ?1 AND series_id IS NOT NULL AND original_start IS NOT NULL",
        [id],
    )?;
    tx.execute("DELETE FROM stream_events WHERE id = ?1", [id])?;
    tx.commit()?;
    Ok(())
}

/// Create the occurrence of `series` at `start` unless that slot exists or was deleted; true when new.
pub fn insert_occurrence(
    c: &Connection,
    series: &ScheduledEventSeries,
    id: &str,
    start: DateTime<Utc>,
    timezone: &str,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let n = c.execute(
        "INSERT OR IGNORE INTO stream_events (id, series_id, original_start, name, description, reminder_message,
           start_time, duration_minutes, timezone, status, created_at, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?3, ?7, ?8, 'scheduled', ?9, ?9
         WHERE NOT EXISTS (SELECT 1 FROM stream_event_skips WHERE series_id = ?2 AND original_start = ?3)",
        params![
            id,
            series.id,
            ts(start),
            series.name,
            series.description,
            series.reminder_message,
            series.duration_minutes,
            timezone,
            ts(now)
        ],
    )?;
    Ok(n > 0)
}

/// Stamp a sent notice (`column` is one of this module's constant column names).
pub fn stamp(c: &Connection, id: &str, column: &'static str, now: DateTime<Utc>) -> Result<(), StoreError> {
    c.execute(&format!("UPDATE stream_events SET {column} = ?2 WHERE id = ?1"), params![id, ts(now)])?;
    Ok(())
}

/// `scheduled` events with `column` not yet stamped whose start is in `(from, to]`.
pub fn due(
    c: &Connection,
    column: &'static str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ScheduledEvent>, StoreError> {
    due_where(c, column, "", from, to)
}

fn due_where(
    c: &Connection,
    column: &'static str,
    and: &'static str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ScheduledEvent>, StoreError> {
    let mut stmt = c.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM stream_events WHERE status = 'scheduled' AND {column} IS NULL {and}
           AND start_time > ?1 AND start_time <= ?2 ORDER BY start_time"
    ))?;
    let rows = stmt.query_map(params![ts(from), ts(to)], event_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Events whose start webhook went out and whose end (start + duration) is at or before `now`,
/// without an end webhook yet.
pub fn ended(c: &Connection, now: DateTime<Utc>) -> Result<Vec<ScheduledEvent>, StoreError> {
    let mut stmt = c.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM stream_events WHERE webhook_started_sent_at IS NOT NULL
           AND webhook_ended_sent_at IS NULL AND start_time <= ?1"
    ))?;
    let rows = stmt.query_map([ts(now)], event_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows.into_iter().filter(|e| e.start_time + chrono::Duration::minutes(e.duration_minutes) <= now).collect())
}

/// Future `scheduled` events not announced to the followers yet.
pub fn unannounced(c: &Connection, now: DateTime<Utc>) -> Result<Vec<ScheduledEvent>, StoreError> {
    let mut stmt = c.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM stream_events WHERE status = 'scheduled' AND federated_at IS NULL
           AND start_time > ?1 ORDER BY start_time, id"
    ))?;
    let rows = stmt.query_map([ts(now)], event_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Announced events that owe their followers an Update, with the version to send.
pub fn owed_updates(c: &Connection) -> Result<Vec<(ScheduledEvent, i64)>, StoreError> {
    let mut stmt = c.prepare(&format!(
        "SELECT {EVENT_COLUMNS}, federation_version FROM stream_events
         WHERE federation_update_pending AND federated_at IS NOT NULL ORDER BY start_time, id"
    ))?;
    let rows = stmt.query_map([], |r| Ok((event_row(r)?, r.get(9)?)))?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The Update of `version` went out (a later change owes another one).
pub fn update_sent(c: &Connection, id: &str, version: i64) -> Result<(), StoreError> {
    c.execute(
        "UPDATE stream_events SET federation_update_pending = FALSE WHERE id = ?1 AND federation_version = ?2",
        params![id, version],
    )?;
    Ok(())
}

/// The ids of deleted announced events whose Delete is still owed.
pub fn owed_deletes(c: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = c.prepare("SELECT event_id FROM stream_event_federation_deletes ORDER BY created_at, event_id")?;
    let rows = stmt.query_map([], |r| r.get(0))?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn delete_sent(c: &Connection, id: &str) -> Result<(), StoreError> {
    c.execute("DELETE FROM stream_event_federation_deletes WHERE event_id = ?1", [id])?;
    Ok(())
}

/// `due`, among announced events only (the federated reminders).
pub fn announced_due(
    c: &Connection,
    column: &'static str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ScheduledEvent>, StoreError> {
    due_where(c, column, "AND federated_at IS NOT NULL", from, to)
}
