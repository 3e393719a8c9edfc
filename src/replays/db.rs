//! The replays' tables: one row per recorded broadcast (`replays`), one per recorded segment
//! (`replay_segments`, written as each segment lands, so a `kill -9` loses at most the segment being
//! linked) and one per clip (`replay_clips`). Functions are synchronous and take the connection;
//! callers run them through `Store::call`.

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::store::{Migrations, StoreError};

pub const MIGRATIONS: Migrations = &["CREATE TABLE replays (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        stream_title TEXT NOT NULL DEFAULT '',
        start_time TEXT NOT NULL,
        end_time TEXT,
        status TEXT NOT NULL,
        public INTEGER NOT NULL DEFAULT 0,
        pinned INTEGER NOT NULL DEFAULT 0,
        master TEXT NOT NULL DEFAULT '',
        remote_base TEXT
    );
    CREATE TABLE replay_segments (
        replay_id TEXT NOT NULL REFERENCES replays(id) ON DELETE CASCADE,
        variant INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        file TEXT NOT NULL,
        init TEXT,
        duration REAL NOT NULL,
        media_offset REAL NOT NULL,
        bytes INTEGER NOT NULL,
        pdt_ms INTEGER,
        PRIMARY KEY (replay_id, variant, seq)
    );
    CREATE TABLE replay_clips (
        id TEXT PRIMARY KEY,
        stream_id TEXT NOT NULL REFERENCES replays(id) ON DELETE CASCADE,
        clipped_by TEXT NOT NULL DEFAULT '',
        clip_title TEXT NOT NULL DEFAULT '',
        relative_start_time REAL NOT NULL,
        relative_end_time REAL NOT NULL,
        timestamp TEXT NOT NULL
    );
    CREATE INDEX replay_clips_stream ON replay_clips (stream_id);"];

/// A replay's state.
pub const RECORDING: &str = "recording";
pub const FINISHED: &str = "finished";
/// castd: the daemon died while it recorded (found at the next start).
pub const INTERRUPTED: &str = "interrupted";

pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_ts(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).map(|d| d.with_timezone(&Utc)).unwrap_or_default()
}

/// One replay with its totals.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRow {
    pub id: String,
    pub title: String,
    pub stream_title: String,
    pub start_time: DateTime<Utc>,
    pub end_time: Option<DateTime<Utc>>,
    pub status: String,
    pub public: bool,
    pub pinned: bool,
    /// The live master playlist's `EXT-X-STREAM-INF` lines, one per variant, in variant order.
    pub master: String,
    /// Set once the replay is in object storage: the segments' base URL (ends with `/`).
    pub remote_base: Option<String>,
    /// Media seconds (the longest variant).
    pub duration: f64,
    pub bytes: i64,
    pub clip_count: i64,
}

const REPLAY_COLS: &str = "r.id, r.title, r.stream_title, r.start_time, r.end_time, r.status, r.public, r.pinned, \
    r.master, r.remote_base, \
    (SELECT COALESCE(MAX(m), 0) FROM (SELECT SUM(duration) AS m FROM replay_segments s WHERE s.replay_id = r.id GROUP BY variant)), \
    (SELECT COALESCE(SUM(bytes), 0) FROM replay_segments s WHERE s.replay_id = r.id), \
    (SELECT COUNT(*) FROM replay_clips c WHERE c.stream_id = r.id)";

fn replay_row(r: &Row) -> rusqlite::Result<ReplayRow> {
    Ok(ReplayRow {
        id: r.get(0)?,
        title: r.get(1)?,
        stream_title: r.get(2)?,
        start_time: parse_ts(&r.get::<_, String>(3)?),
        end_time: r.get::<_, Option<String>>(4)?.as_deref().map(parse_ts),
        status: r.get(5)?,
        public: r.get(6)?,
        pinned: r.get(7)?,
        master: r.get(8)?,
        remote_base: r.get(9)?,
        duration: r.get(10)?,
        bytes: r.get(11)?,
        clip_count: r.get(12)?,
    })
}

/// A recorded segment.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentRow {
    pub variant: i64,
    pub seq: i64,
    pub file: String,
    pub init: Option<String>,
    pub duration: f64,
    pub media_offset: f64,
    pub bytes: i64,
    pub pdt_ms: Option<i64>,
}

/// A clip.
#[derive(Debug, Clone, PartialEq)]
pub struct ClipRow {
    pub id: String,
    pub stream_id: String,
    pub clipped_by: String,
    pub title: String,
    pub stream_title: String,
    pub start: f64,
    pub end: f64,
    pub timestamp: DateTime<Utc>,
}

const CLIP_COLS: &str = "c.id, c.stream_id, c.clipped_by, c.clip_title, COALESCE(r.stream_title, ''), \
    c.relative_start_time, c.relative_end_time, c.timestamp";

fn clip_row(r: &Row) -> rusqlite::Result<ClipRow> {
    Ok(ClipRow {
        id: r.get(0)?,
        stream_id: r.get(1)?,
        clipped_by: r.get(2)?,
        title: r.get(3)?,
        stream_title: r.get(4)?,
        start: r.get(5)?,
        end: r.get(6)?,
        timestamp: parse_ts(&r.get::<_, String>(7)?),
    })
}

/// A replay left `recording` by a daemon that died is `interrupted` (ended at its last segment), and a
/// replay with no segment at all is dropped. Returns the ids of the interrupted ones.
pub fn recover(conn: &mut Connection) -> Result<Vec<String>, StoreError> {
    let tx = conn.transaction()?;
    let ids: Vec<String> = {
        let mut st = tx.prepare("SELECT id FROM replays WHERE status = ?1")?;
        let rows = st.query_map([RECORDING], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let now = ts(Utc::now());
    for id in &ids {
        tx.execute(
            "UPDATE replays SET status = ?2, end_time = COALESCE(end_time, ?3) WHERE id = ?1",
            params![id, INTERRUPTED, now],
        )?;
    }
    tx.execute(
        "DELETE FROM replays WHERE status != ?1 AND NOT EXISTS (SELECT 1 FROM replay_segments s WHERE s.replay_id = replays.id)",
        [RECORDING],
    )?;
    tx.commit()?;
    Ok(ids)
}

pub fn insert_replay(conn: &Connection, id: &str, stream_title: &str, start: DateTime<Utc>) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO replays (id, stream_title, start_time, status) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(id) DO UPDATE SET status = excluded.status, end_time = NULL",
        params![id, stream_title, ts(start), RECORDING],
    )?;
    Ok(())
}

/// (variant, next sequence number, media seconds recorded, newest init segment).
pub type Resume = (i64, i64, f64, Option<String>);

/// Per variant: the next sequence number, the media time recorded so far and the newest init segment (recording resumed in the same
/// broadcast after replays were turned off and on again).
pub fn resume_state(conn: &Connection, id: &str) -> Result<Vec<Resume>, StoreError> {
    let mut st = conn.prepare(
        "SELECT variant, MAX(seq) + 1, SUM(duration),
            (SELECT init FROM replay_segments l WHERE l.replay_id = ?1 AND l.variant = s.variant ORDER BY seq DESC LIMIT 1)
         FROM replay_segments s WHERE replay_id = ?1 GROUP BY variant",
    )?;
    let rows = st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn set_master(conn: &Connection, id: &str, master: &str) -> Result<(), StoreError> {
    conn.execute("UPDATE replays SET master = ?2 WHERE id = ?1", params![id, master])?;
    Ok(())
}

pub fn finish(conn: &Connection, id: &str, end: DateTime<Utc>) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE replays SET status = ?2, end_time = ?3 WHERE id = ?1 AND status = ?4",
        params![id, FINISHED, ts(end), RECORDING],
    )?;
    Ok(())
}

pub fn set_remote_base(conn: &Connection, id: &str, base: Option<&str>) -> Result<(), StoreError> {
    conn.execute("UPDATE replays SET remote_base = ?2 WHERE id = ?1", params![id, base])?;
    Ok(())
}

pub fn insert_segment(conn: &Connection, replay: &str, s: &SegmentRow) -> Result<(), StoreError> {
    conn.execute(
        "INSERT OR REPLACE INTO replay_segments (replay_id, variant, seq, file, init, duration, media_offset, bytes, pdt_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![replay, s.variant, s.seq, s.file, s.init, s.duration, s.media_offset, s.bytes, s.pdt_ms],
    )?;
    Ok(())
}

pub fn replay(conn: &Connection, id: &str) -> Result<Option<ReplayRow>, StoreError> {
    let sql = format!("SELECT {REPLAY_COLS} FROM replays r WHERE r.id = ?1");
    Ok(conn.query_row(&sql, [id], replay_row).optional()?)
}

/// Every replay, newest first; `public_only` for the viewer list; `limit`/`offset` page it.
pub fn replays(conn: &Connection, public_only: bool, limit: i64, offset: i64) -> Result<Vec<ReplayRow>, StoreError> {
    let filter = if public_only { "WHERE r.public = 1 AND r.status != 'recording'" } else { "" };
    let sql = format!("SELECT {REPLAY_COLS} FROM replays r {filter} ORDER BY r.start_time DESC LIMIT ?1 OFFSET ?2");
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map(params![limit, offset], replay_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn update_replay(
    conn: &Connection,
    id: &str,
    title: Option<&str>,
    public: Option<bool>,
    pinned: Option<bool>,
) -> Result<bool, StoreError> {
    let n = conn.execute(
        "UPDATE replays SET title = COALESCE(?2, title), public = COALESCE(?3, public), pinned = COALESCE(?4, pinned)
         WHERE id = ?1",
        params![id, title, public, pinned],
    )?;
    Ok(n > 0)
}

pub fn delete_replay(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    Ok(conn.execute("DELETE FROM replays WHERE id = ?1", [id])? > 0)
}

/// The variants recorded for a replay, in order.
pub fn variants(conn: &Connection, id: &str) -> Result<Vec<i64>, StoreError> {
    let mut st = conn.prepare("SELECT DISTINCT variant FROM replay_segments WHERE replay_id = ?1 ORDER BY variant")?;
    let rows = st.query_map([id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The segments of one variant in order.
pub fn segments(conn: &Connection, id: &str, variant: i64) -> Result<Vec<SegmentRow>, StoreError> {
    let mut st = conn.prepare(
        "SELECT variant, seq, file, init, duration, media_offset, bytes, pdt_ms FROM replay_segments
         WHERE replay_id = ?1 AND variant = ?2 ORDER BY seq",
    )?;
    let rows = st.query_map(params![id, variant], |r| {
        Ok(SegmentRow {
            variant: r.get(0)?,
            seq: r.get(1)?,
            file: r.get(2)?,
            init: r.get(3)?,
            duration: r.get(4)?,
            media_offset: r.get(5)?,
            bytes: r.get(6)?,
            pdt_ms: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The wall-clock time of the replay's media time 0 in ms since the epoch (a replay's chat is placed
/// against it): the first segment with a program date time, less its media offset; without one, the
/// first segment's start (it was linked, and the replay started, as it was written: its duration
/// before `start`). `None` while nothing is recorded.
pub fn media_epoch_ms(conn: &Connection, id: &str, start: DateTime<Utc>) -> Result<Option<i64>, StoreError> {
    let pdt: Option<i64> = conn
        .query_row(
            "SELECT pdt_ms - CAST(ROUND(media_offset * 1000) AS INTEGER) FROM replay_segments
             WHERE replay_id = ?1 AND pdt_ms IS NOT NULL ORDER BY variant, seq LIMIT 1",
            [id],
            |r| r.get(0),
        )
        .optional()?;
    if pdt.is_some() {
        return Ok(pdt);
    }
    let first: Option<f64> = conn
        .query_row(
            "SELECT duration FROM replay_segments WHERE replay_id = ?1 ORDER BY variant, seq LIMIT 1",
            [id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(first.map(|d| start.timestamp_millis() - (d * 1000.0).round() as i64))
}

/// Whether `file` is a segment or init segment of the replay's `variant`.
pub fn has_file(conn: &Connection, id: &str, variant: i64, file: &str) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row(
        "SELECT COUNT(*) FROM replay_segments WHERE replay_id = ?1 AND variant = ?2 AND (file = ?3 OR init = ?3)",
        params![id, variant, file],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// The end of the recorded media (seconds from the start; the shortest variant, so every variant has
/// it).
pub fn media_end(conn: &Connection, id: &str) -> Result<f64, StoreError> {
    Ok(conn.query_row(
        "SELECT COALESCE(MIN(m), 0) FROM (SELECT SUM(duration) AS m FROM replay_segments WHERE replay_id = ?1 GROUP BY variant)",
        [id],
        |r| r.get(0),
    )?)
}

pub fn insert_clip(conn: &Connection, c: &ClipRow) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO replay_clips (id, stream_id, clipped_by, clip_title, relative_start_time, relative_end_time, timestamp)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![c.id, c.stream_id, c.clipped_by, c.title, c.start, c.end, ts(c.timestamp)],
    )?;
    Ok(())
}

pub fn clip(conn: &Connection, id: &str) -> Result<Option<ClipRow>, StoreError> {
    let sql =
        format!("SELECT {CLIP_COLS} FROM replay_clips c LEFT JOIN replays r ON r.id = c.stream_id WHERE c.id = ?1");
    Ok(conn.query_row(&sql, [id], clip_row).optional()?)
}

pub fn clips(conn: &Connection) -> Result<Vec<ClipRow>, StoreError> {
    let sql = format!(
        "SELECT {CLIP_COLS} FROM replay_clips c LEFT JOIN replays r ON r.id = c.stream_id ORDER BY c.timestamp DESC"
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([], clip_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The ids of the clips of a replay.
pub fn clip_ids(conn: &Connection, stream_id: &str) -> Result<Vec<String>, StoreError> {
    let mut st = conn.prepare("SELECT id FROM replay_clips WHERE stream_id = ?1")?;
    let rows = st.query_map([stream_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn delete_clip(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    Ok(conn.execute("DELETE FROM replay_clips WHERE id = ?1", [id])? > 0)
}
