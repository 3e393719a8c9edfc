//! The federation tables and their queries: the key pair, followers (with their approval state),
//! the outbox (posts sent), the activity list (engagement received), federated servers, and the
//! outbound delivery queue. Plain functions over a connection, run through `Store::call`.

use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use super::client::RemoteActor;
use crate::store::{Migrations, StoreError};

pub const MIGRATIONS: Migrations = &[
    "CREATE TABLE federation_keys (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE federation_followers (
        iri TEXT PRIMARY KEY,
        inbox TEXT NOT NULL,
        shared_inbox TEXT NOT NULL,
        name TEXT NOT NULL,
        username TEXT NOT NULL,
        image TEXT NOT NULL,
        link TEXT NOT NULL,
        follow_iri TEXT NOT NULL,
        approved INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        approved_at TEXT,
        disabled_at TEXT
    );
    CREATE TABLE federation_outbox (
        iri TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        object TEXT NOT NULL,
        public INTEGER NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE federation_activity (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        iri TEXT NOT NULL,
        actor_iri TEXT NOT NULL,
        kind TEXT NOT NULL,
        timestamp TEXT NOT NULL
    );
    CREATE TABLE federation_servers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        url TEXT NOT NULL,
        actor_iri TEXT NOT NULL UNIQUE,
        inbox TEXT NOT NULL,
        follow_iri TEXT NOT NULL,
        name TEXT NOT NULL,
        summary TEXT NOT NULL,
        tags TEXT NOT NULL,
        is_online INTEGER NOT NULL DEFAULT 0,
        stream_title TEXT NOT NULL DEFAULT '',
        last_seen_online TEXT,
        last_status_update TEXT,
        added_at TEXT NOT NULL,
        followed_at TEXT
    );
    CREATE TABLE federation_deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        inbox TEXT NOT NULL,
        body TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        last_error TEXT
    );
    CREATE INDEX federation_deliveries_due ON federation_deliveries (next_at);",
    // Keys of a delivery (Owncast's ordering and coalesce keys): deliveries with one ordering key
    // reach an inbox one after the other; a newer delivery with the same coalesce key supersedes one
    // not delivered yet (it is dropped unsent).
    "ALTER TABLE federation_deliveries ADD COLUMN ordering_key TEXT;
    ALTER TABLE federation_deliveries ADD COLUMN coalesce_key TEXT;
    ALTER TABLE federation_deliveries ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX federation_deliveries_ordering ON federation_deliveries (ordering_key, inbox, id);",
    // Activities seen (the replay store, see `record_sight`), and only http(s) URLs from remote
    // documents: what an earlier version stored otherwise is dropped.
    "CREATE TABLE federation_seen (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL UNIQUE,
        signed_at INTEGER NOT NULL
    );
    CREATE INDEX federation_seen_signed ON federation_seen (signed_at);
    CREATE TABLE federation_seen_floor (id INTEGER PRIMARY KEY CHECK (id = 1), floor INTEGER NOT NULL);
    DELETE FROM federation_followers WHERE iri NOT LIKE 'http://%' AND iri NOT LIKE 'https://%';
    DELETE FROM federation_activity WHERE actor_iri NOT LIKE 'http://%' AND actor_iri NOT LIKE 'https://%';
    UPDATE federation_followers SET image = '' WHERE image NOT LIKE 'http://%' AND image NOT LIKE 'https://%';
    UPDATE federation_followers SET link = '' WHERE link NOT LIKE 'http://%' AND link NOT LIKE 'https://%';",
];

/// Most follower rows kept (a flood of follows cannot grow the table without bound).
pub const MAX_FOLLOWERS: i64 = 1_000_000;
/// Most activity-list rows kept; the oldest are dropped.
pub const MAX_ACTIVITY: i64 = 10_000;
/// Most queued deliveries; beyond it new deliveries are refused (and logged).
pub const MAX_QUEUED: i64 = 1_000_000;

fn now() -> String {
    Utc::now().to_rfc3339()
}

/// A follower as the API shows it (`link` is the actor IRI, which approve/remove take).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Follower {
    pub link: String,
    pub name: String,
    pub username: String,
    pub image: String,
    pub timestamp: String,
    pub disabled_at: Option<String>,
}

/// Which followers to list.
#[derive(Debug, Clone, Copy)]
pub enum FollowerState {
    Approved,
    Pending,
    Blocked,
}

impl FollowerState {
    fn clause(self) -> &'static str {
        match self {
            FollowerState::Approved => "approved = 1 AND disabled_at IS NULL",
            FollowerState::Pending => "approved = 0 AND disabled_at IS NULL",
            FollowerState::Blocked => "disabled_at IS NOT NULL",
        }
    }
}

/// What recording a follow did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// A new follower.
    New,
    /// A follower that followed before (its profile and follow IRI are refreshed); whether it was
    /// approved then.
    Again { was_approved: bool },
    /// The admin blocked this follower: the follow is ignored.
    Blocked,
    /// `MAX_FOLLOWERS` are recorded already: the follow is not recorded.
    Full,
}

/// Record a follow (approved, or waiting for the admin's approval). An approval is never taken back
/// by a later follow.
pub fn upsert_follower(
    c: &Connection,
    actor: &RemoteActor,
    follow_iri: &str,
    approved: bool,
) -> Result<Followed, StoreError> {
    upsert_follower_within(c, actor, follow_iri, approved, MAX_FOLLOWERS)
}

fn upsert_follower_within(
    c: &Connection,
    actor: &RemoteActor,
    follow_iri: &str,
    approved: bool,
    max_followers: i64,
) -> Result<Followed, StoreError> {
    let before: Option<(bool, Option<String>)> = c
        .query_row("SELECT approved, disabled_at FROM federation_followers WHERE iri = ?1", [&actor.iri], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let outcome = match before {
        Some((_, Some(_))) => return Ok(Followed::Blocked),
        Some((was_approved, None)) => Followed::Again { was_approved },
        None => {
            let n: i64 = c.query_row("SELECT COUNT(*) FROM federation_followers", [], |r| r.get(0))?;
            if n >= max_followers {
                return Ok(Followed::Full);
            }
            Followed::New
        }
    };
    c.execute(
        "INSERT INTO federation_followers
         (iri, inbox, shared_inbox, name, username, image, link, follow_iri, approved, created_at, approved_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, CASE WHEN ?9 THEN ?10 END)
         ON CONFLICT (iri) DO UPDATE SET inbox = ?2, shared_inbox = ?3, name = ?4, username = ?5, image = ?6,
         link = ?7, follow_iri = ?8, approved = MAX(approved, ?9),
         approved_at = COALESCE(approved_at, CASE WHEN ?9 THEN ?10 END)",
        params![
            actor.iri,
            actor.inbox,
            actor.shared_inbox,
            actor.name,
            actor.account(),
            actor.image,
            actor.url,
            follow_iri,
            approved,
            now()
        ],
    )?;
    Ok(outcome)
}

/// The follow activity IRI and inbox of a follower, if there is one.
pub fn follower_follow(c: &Connection, iri: &str) -> Result<Option<(String, String, bool)>, StoreError> {
    Ok(c.query_row(
        "SELECT follow_iri, inbox, approved FROM federation_followers WHERE iri = ?1 AND disabled_at IS NULL",
        [iri],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .optional()?)
}

/// Approve a pending follower; false if there is none.
pub fn approve(c: &Connection, iri: &str) -> Result<bool, StoreError> {
    Ok(c.execute(
        "UPDATE federation_followers SET approved = 1, approved_at = ?2 WHERE iri = ?1 AND disabled_at IS NULL",
        params![iri, now()],
    )? > 0)
}

/// Deny (block) a follower; false if there is none.
pub fn block(c: &Connection, iri: &str) -> Result<bool, StoreError> {
    Ok(c.execute("UPDATE federation_followers SET approved = 0, disabled_at = ?2 WHERE iri = ?1", params![iri, now()])?
        > 0)
}

/// Remove a follower; false if there was none.
pub fn remove_follower(c: &Connection, iri: &str) -> Result<bool, StoreError> {
    Ok(c.execute("DELETE FROM federation_followers WHERE iri = ?1", [iri])? > 0)
}

/// Refresh a follower's profile after an Update.
pub fn update_profile(c: &Connection, a: &RemoteActor) -> Result<bool, StoreError> {
    Ok(c.execute(
        "UPDATE federation_followers SET name = ?2, image = ?3, link = ?4, inbox = ?5, shared_inbox = ?6 WHERE iri = ?1",
        params![a.iri, a.name, a.image, a.url, a.inbox, a.shared_inbox],
    )? > 0)
}

/// A page of followers, newest first.
pub fn followers(
    c: &Connection,
    state: FollowerState,
    offset: i64,
    limit: i64,
) -> Result<(i64, Vec<Follower>), StoreError> {
    let where_ = state.clause();
    let total: i64 =
        c.query_row(&format!("SELECT COUNT(*) FROM federation_followers WHERE {where_}"), [], |r| r.get(0))?;
    let mut stmt = c.prepare(&format!(
        "SELECT iri, name, username, image, COALESCE(approved_at, created_at), disabled_at FROM federation_followers
         WHERE {where_} ORDER BY created_at DESC, iri LIMIT ?1 OFFSET ?2"
    ))?;
    let rows = stmt
        .query_map([limit, offset], |r| {
            Ok(Follower {
                link: r.get(0)?,
                name: r.get(1)?,
                username: r.get(2)?,
                image: r.get(3)?,
                timestamp: r.get(4)?,
                disabled_at: r.get(5)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok((total, rows))
}

/// The IRIs of approved followers (for the followers collection), newest first.
pub fn follower_iris(c: &Connection, offset: i64, limit: i64) -> Result<Vec<String>, StoreError> {
    let mut stmt = c.prepare(
        "SELECT iri FROM federation_followers WHERE approved = 1 AND disabled_at IS NULL
         ORDER BY created_at DESC, iri LIMIT ?1 OFFSET ?2",
    )?;
    let rows = stmt.query_map([limit, offset], |r| r.get(0))?.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// The distinct (shared) inboxes of approved followers.
pub fn follower_inboxes(c: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = c.prepare(
        "SELECT DISTINCT shared_inbox FROM federation_followers WHERE approved = 1 AND disabled_at IS NULL ORDER BY 1",
    )?;
    let rows = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Log an activity received (the admin activity list).
pub fn add_activity(c: &Connection, iri: &str, actor: &str, kind: &str) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO federation_activity (iri, actor_iri, kind, timestamp) VALUES (?1, ?2, ?3, ?4)",
        params![iri, actor, kind, now()],
    )?;
    c.execute(
        "DELETE FROM federation_activity WHERE id <= (SELECT MAX(id) FROM federation_activity) - ?1",
        [MAX_ACTIVITY],
    )?;
    Ok(())
}

/// Drop a logged activity (its Undo arrived).
pub fn remove_activity(c: &Connection, iri: &str, actor: &str) -> Result<usize, StoreError> {
    Ok(c.execute("DELETE FROM federation_activity WHERE iri = ?1 AND actor_iri = ?2", [iri, actor])?)
}

/// One entry of the activity list.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    pub timestamp: String,
    pub iri: String,
    #[serde(rename = "actorIRI")]
    pub actor_iri: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// A page of the activity list, newest first.
pub fn activities(c: &Connection, offset: i64, limit: i64) -> Result<(i64, Vec<Activity>), StoreError> {
    let total: i64 = c.query_row("SELECT COUNT(*) FROM federation_activity", [], |r| r.get(0))?;
    let mut stmt = c.prepare(
        "SELECT timestamp, iri, actor_iri, kind FROM federation_activity ORDER BY id DESC LIMIT ?1 OFFSET ?2",
    )?;
    let rows = stmt
        .query_map([limit, offset], |r| {
            Ok(Activity { timestamp: r.get(0)?, iri: r.get(1)?, actor_iri: r.get(2)?, kind: r.get(3)? })
        })?
        .collect::<Result<_, _>>()?;
    Ok((total, rows))
}

/// Most activities the replay store keeps; beyond it the oldest-signed go, and the floor rises.
pub const MAX_SEEN: i64 = 100_000;

/// What the replay store says of a verified activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight {
    /// Not seen before: recorded now.
    First,
    /// Seen before (a replay, or a sender's retry): drop it.
    Seen,
    /// Signed no later than an activity the store had to forget for room: it cannot say, so it
    /// refuses (the sender signs a retry afresh).
    TooOld,
}

/// The replay store: record `key` (an activity, see `inbox`) signed at `signed_at_ms`, unless it was
/// seen. Entries signed before `expired_before_ms` are dropped first (their signatures are outside the
/// window: a replay of them is refused anyway). When more than `max` are kept, the oldest-signed are
/// dropped and the floor rises to their signing time: anything signed no later is `TooOld`.
pub fn record_sight(
    c: &mut Connection,
    key: &str,
    signed_at_ms: i64,
    expired_before_ms: i64,
    max: i64,
) -> Result<Sight, StoreError> {
    let tx = c.transaction()?;
    tx.execute("DELETE FROM federation_seen WHERE signed_at < ?1", [expired_before_ms])?;
    if tx.query_row("SELECT 1 FROM federation_seen WHERE key = ?1", [key], |_| Ok(())).optional()?.is_some() {
        return Ok(Sight::Seen);
    }
    let floor: Option<i64> =
        tx.query_row("SELECT floor FROM federation_seen_floor WHERE id = 1", [], |r| r.get(0)).optional()?;
    if floor.is_some_and(|f| signed_at_ms <= f) {
        return Ok(Sight::TooOld);
    }
    tx.execute("INSERT INTO federation_seen (key, signed_at) VALUES (?1, ?2)", params![key, signed_at_ms])?;
    let id = tx.last_insert_rowid();
    // Counting is cheap but not free: every 64th insert (the store may exceed `max` by 64 meanwhile).
    if id % 64 == 0 || max < 64 {
        let n: i64 = tx.query_row("SELECT COUNT(*) FROM federation_seen", [], |r| r.get(0))?;
        if n > max {
            let cut: i64 = tx.query_row(
                "SELECT signed_at FROM federation_seen ORDER BY signed_at LIMIT 1 OFFSET ?1",
                [n - max - 1],
                |r| r.get(0),
            )?;
            tx.execute("DELETE FROM federation_seen WHERE signed_at <= ?1", [cut])?;
            tx.execute(
                "INSERT INTO federation_seen_floor (id, floor) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET floor = MAX(floor, ?1)",
                [cut],
            )?;
        }
    }
    tx.commit()?;
    Ok(Sight::First)
}

/// Forget a recorded activity (acting on it failed: the sender's retry must not be dropped).
pub fn forget_sight(c: &Connection, key: &str) -> Result<(), StoreError> {
    c.execute("DELETE FROM federation_seen WHERE key = ?1", [key])?;
    Ok(())
}

/// Keep a sent object (a Create activity or its Note) so it can be served and paged.
pub fn outbox_insert(c: &Connection, iri: &str, kind: &str, object: &Value, public: bool) -> Result<(), StoreError> {
    c.execute(
        "INSERT OR REPLACE INTO federation_outbox (iri, kind, object, public, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![iri, kind, object.to_string(), public, now()],
    )?;
    Ok(())
}

/// Forget a sent object (the Create of an event that was deleted since).
pub fn outbox_remove(c: &Connection, iri: &str) -> Result<(), StoreError> {
    c.execute("DELETE FROM federation_outbox WHERE iri = ?1", [iri])?;
    Ok(())
}

/// A stored object by IRI: `(object, public)`.
pub fn outbox_get(c: &Connection, iri: &str) -> Result<Option<(Value, bool)>, StoreError> {
    let row: Option<(String, bool)> = c
        .query_row("SELECT object, public FROM federation_outbox WHERE iri = ?1", [iri], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(row.and_then(|(s, p)| serde_json::from_str(&s).ok().map(|v| (v, p))))
}

/// How many public posts (Create activities) there are.
pub fn outbox_count(c: &Connection) -> Result<i64, StoreError> {
    Ok(c.query_row("SELECT COUNT(*) FROM federation_outbox WHERE kind = 'Create' AND public = 1", [], |r| r.get(0))?)
}

/// A page of public posts, newest first.
pub fn outbox_page(c: &Connection, offset: i64, limit: i64) -> Result<Vec<Value>, StoreError> {
    let mut stmt = c.prepare(
        "SELECT object FROM federation_outbox WHERE kind = 'Create' AND public = 1
         ORDER BY created_at DESC, iri LIMIT ?1 OFFSET ?2",
    )?;
    let rows: Vec<String> = stmt.query_map([limit, offset], |r| r.get(0))?.collect::<Result<_, _>>()?;
    Ok(rows.into_iter().filter_map(|s| serde_json::from_str(&s).ok()).collect())
}

/// A federated server as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    pub id: i64,
    pub name: String,
    pub url: String,
    #[serde(rename = "actorIRI")]
    pub actor_iri: String,
    pub is_online: bool,
    pub stream_title: String,
    pub stream_description: String,
    pub tags: Vec<String>,
    pub last_seen_online: Option<String>,
    pub last_status_update: Option<String>,
    pub added_at: String,
    pub followed_at: Option<String>,
    #[serde(skip)]
    pub inbox: String,
    #[serde(skip)]
    pub follow_iri: String,
}

const SERVER_COLUMNS: &str = "id, name, url, actor_iri, is_online, stream_title, summary, tags, last_seen_online,
    last_status_update, added_at, followed_at, inbox, follow_iri";

fn server_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Server> {
    let tags: String = r.get(7)?;
    Ok(Server {
        id: r.get(0)?,
        name: r.get(1)?,
        url: r.get(2)?,
        actor_iri: r.get(3)?,
        is_online: r.get(4)?,
        stream_title: r.get(5)?,
        stream_description: r.get(6)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        last_seen_online: r.get(8)?,
        last_status_update: r.get(9)?,
        added_at: r.get(10)?,
        followed_at: r.get(11)?,
        inbox: r.get(12)?,
        follow_iri: r.get(13)?,
    })
}

/// Every federated server, in the order added.
pub fn servers(c: &Connection) -> Result<Vec<Server>, StoreError> {
    let mut stmt = c.prepare(&format!("SELECT {SERVER_COLUMNS} FROM federation_servers ORDER BY id"))?;
    let rows = stmt.query_map([], server_row)?.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// A federated server by id or by actor IRI.
pub fn server_by(c: &Connection, id: Option<i64>, actor: Option<&str>) -> Result<Option<Server>, StoreError> {
    Ok(c.query_row(
        &format!("SELECT {SERVER_COLUMNS} FROM federation_servers WHERE id = ?1 OR actor_iri = ?2"),
        params![id, actor],
        server_row,
    )
    .optional()?)
}

/// Add (or refresh) a federated server; returns its id.
#[allow(clippy::too_many_arguments)]
pub fn add_server(
    c: &Connection,
    url: &str,
    actor: &str,
    inbox: &str,
    follow_iri: &str,
    name: &str,
    summary: &str,
    tags: &[String],
) -> Result<i64, StoreError> {
    let tags = serde_json::to_string(tags).unwrap_or_else(|_| "[]".into());
    c.execute(
        "INSERT INTO federation_servers (url, actor_iri, inbox, follow_iri, name, summary, tags, added_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (actor_iri) DO UPDATE SET url = ?1, inbox = ?3, follow_iri = ?4, name = ?5, summary = ?6, tags = ?7",
        params![url, actor, inbox, follow_iri, name, summary, tags, now()],
    )?;
    Ok(c.query_row("SELECT id FROM federation_servers WHERE actor_iri = ?1", [actor], |r| r.get(0))?)
}

/// The server accepted our follow.
pub fn server_followed(c: &Connection, actor: &str) -> Result<bool, StoreError> {
    Ok(c.execute("UPDATE federation_servers SET followed_at = ?2 WHERE actor_iri = ?1", params![actor, now()])? > 0)
}

/// The server's stream status changed (`title` `None` keeps the title).
pub fn server_status(c: &Connection, actor: &str, online: bool, title: Option<&str>) -> Result<bool, StoreError> {
    let t = now();
    Ok(c.execute(
        "UPDATE federation_servers SET is_online = ?2, stream_title = COALESCE(?3, stream_title),
         last_status_update = ?4, last_seen_online = CASE WHEN ?2 THEN ?4 ELSE last_seen_online END
         WHERE actor_iri = ?1",
        params![actor, online, title, t],
    )? > 0)
}

/// Remove a federated server; returns it.
pub fn remove_server(c: &Connection, id: i64) -> Result<Option<Server>, StoreError> {
    let s = server_by(c, Some(id), None)?;
    c.execute("DELETE FROM federation_servers WHERE id = ?1", [id])?;
    Ok(s)
}

/// One queued delivery.
#[derive(Debug, Clone)]
pub struct Queued {
    pub id: i64,
    pub inbox: String,
    pub body: String,
    pub attempts: u32,
    /// A newer delivery with the same coalesce key replaced it: dropped unsent.
    pub superseded: bool,
}

/// Queue `body` for each inbox; returns how many were queued. With `keys` (ordering key, coalesce
/// key), earlier deliveries of the same coalesce key to the same inbox are superseded (due at once,
/// so they are dropped without waiting out a retry).
pub fn enqueue(
    c: &mut Connection,
    inboxes: &[String],
    body: &str,
    now_ms: i64,
    keys: Option<(&str, &str)>,
) -> Result<usize, StoreError> {
    let queued: i64 = c.query_row("SELECT COUNT(*) FROM federation_deliveries", [], |r| r.get(0))?;
    if queued + inboxes.len() as i64 > MAX_QUEUED {
        return Err(StoreError::Corrupt("the federation delivery queue is full".into()));
    }
    let (ordering, coalesce) = keys.unzip();
    let tx = c.transaction()?;
    {
        let mut supersede = tx.prepare(
            "UPDATE federation_deliveries SET superseded = 1, next_at = MIN(next_at, ?3)
             WHERE inbox = ?1 AND coalesce_key = ?2",
        )?;
        let mut stmt = tx.prepare(
            "INSERT INTO federation_deliveries (inbox, body, next_at, created_at, ordering_key, coalesce_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let t = now();
        for inbox in inboxes {
            if let Some(key) = coalesce {
                supersede.execute(params![inbox, key, now_ms])?;
            }
            stmt.execute(params![inbox, body, now_ms, t, ordering, coalesce])?;
        }
    }
    tx.commit()?;
    Ok(inboxes.len())
}

/// A delivery that waits for an earlier one with its ordering key to the same inbox is not due.
const NOT_BLOCKED: &str = "(d.ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM federation_deliveries e
    WHERE e.ordering_key = d.ordering_key AND e.inbox = d.inbox AND e.id < d.id))";

/// Deliveries due at `now_ms` (and not waiting for an earlier one), oldest first, after `after_id`.
pub fn due(c: &Connection, now_ms: i64, limit: i64, after_id: i64) -> Result<Vec<Queued>, StoreError> {
    let mut stmt = c.prepare(&format!(
        "SELECT id, inbox, body, attempts, superseded FROM federation_deliveries d WHERE next_at <= ?1 AND id > ?3
         AND {NOT_BLOCKED} ORDER BY id LIMIT ?2"
    ))?;
    let rows = stmt
        .query_map(params![now_ms, limit, after_id], |r| {
            Ok(Queued { id: r.get(0)?, inbox: r.get(1)?, body: r.get(2)?, attempts: r.get(3)?, superseded: r.get(4)? })
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// When the next delivery is due (unix ms), if any is queued and not waiting for an earlier one.
pub fn next_due(c: &Connection) -> Result<Option<i64>, StoreError> {
    Ok(c.query_row(&format!("SELECT MIN(next_at) FROM federation_deliveries d WHERE {NOT_BLOCKED}"), [], |r| r.get(0))?)
}

/// Delivered or given up.
pub fn finish(c: &Connection, id: i64) -> Result<(), StoreError> {
    c.execute("DELETE FROM federation_deliveries WHERE id = ?1", [id])?;
    Ok(())
}

/// Try again at `next_at`; a delivery superseded while it was being tried is dropped instead.
pub fn retry(c: &Connection, id: i64, attempts: u32, next_at: i64, error: &str) -> Result<(), StoreError> {
    let n = c.execute(
        "UPDATE federation_deliveries SET attempts = ?2, next_at = ?3, last_error = ?4 WHERE id = ?1 AND superseded = 0",
        params![id, attempts, next_at, error],
    )?;
    if n == 0 {
        finish(c, id)?;
    }
    Ok(())
}

/// How many deliveries are queued.
pub fn queued(c: &Connection) -> Result<i64, StoreError> {
    Ok(c.query_row("SELECT COUNT(*) FROM federation_deliveries", [], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `f` on a fresh database with this module's migrations.
    fn with_db(f: impl FnOnce(&Connection)) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
        store.migrate("federation", MIGRATIONS).unwrap();
        store
            .with(|c| {
                f(c);
                Ok(())
            })
            .unwrap();
    }

    fn actor(n: u32) -> RemoteActor {
        RemoteActor {
            iri: format!("http://127.0.0.1:1/users/a{n}"),
            inbox: format!("http://127.0.0.1:1/users/a{n}/inbox"),
            shared_inbox: "http://127.0.0.1:1/inbox".into(),
            name: format!("A {n}"),
            username: format!("a{n}"),
            image: String::new(),
            url: format!("http://127.0.0.1:1/@a{n}"),
        }
    }

    fn row(c: &Connection, iri: &str) -> (bool, Option<String>, String, String) {
        c.query_row(
            "SELECT approved, approved_at, follow_iri, name FROM federation_followers WHERE iri = ?1",
            [iri],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
    }

    #[test]
    fn a_follow_is_recorded_refreshed_never_unapproved_and_ignored_once_blocked() {
        with_db(|c| {
            let mut a = actor(1);
            assert_eq!(upsert_follower(c, &a, "f1", false).unwrap(), Followed::New);
            let (approved, approved_at, follow, _) = row(c, &a.iri);
            assert!(!approved && approved_at.is_none() && follow == "f1", "pending until approved");

            // Following again once public: approved now, with the time of approval.
            a.name = "Renamed".into();
            assert_eq!(upsert_follower(c, &a, "f2", true).unwrap(), Followed::Again { was_approved: false });
            let (approved, approved_at, follow, name) = row(c, &a.iri);
            assert!(approved && approved_at.is_some());
            assert_eq!((follow.as_str(), name.as_str()), ("f2", "Renamed"), "the follow and profile are refreshed");

            // A later follow in private mode does not take the approval back.
            assert_eq!(upsert_follower(c, &a, "f3", false).unwrap(), Followed::Again { was_approved: true });
            assert!(row(c, &a.iri).0);

            assert!(block(c, &a.iri).unwrap());
            assert_eq!(upsert_follower(c, &a, "f4", true).unwrap(), Followed::Blocked);
            let (approved, _, follow, _) = row(c, &a.iri);
            assert!(!approved && follow == "f3", "a blocked follower's follow changes nothing");
        });
    }

    #[test]
    fn the_replay_store_drops_what_it_saw_and_refuses_below_its_floor() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
        store.migrate("federation", MIGRATIONS).unwrap();
        store
            .with(|c| {
                assert_eq!(record_sight(c, "a", 1000, 0, 3).unwrap(), Sight::First);
                assert_eq!(record_sight(c, "a", 1000, 0, 3).unwrap(), Sight::Seen);
                assert_eq!(record_sight(c, "b", 2000, 0, 3).unwrap(), Sight::First);
                assert_eq!(record_sight(c, "c", 3000, 0, 3).unwrap(), Sight::First);
                // a fourth: the oldest-signed ("a") goes, and nothing signed at or before it passes
                assert_eq!(record_sight(c, "d", 4000, 0, 3).unwrap(), Sight::First);
                assert_eq!(record_sight(c, "a", 1000, 0, 3).unwrap(), Sight::TooOld);
                assert_eq!(record_sight(c, "e", 900, 0, 3).unwrap(), Sight::TooOld);
                assert_eq!(record_sight(c, "b", 2000, 0, 3).unwrap(), Sight::Seen);
                // expired entries go; a forgotten one may be recorded again
                assert_eq!(record_sight(c, "f", 5000, 2500, 3).unwrap(), Sight::First);
                let n: i64 = c.query_row("SELECT COUNT(*) FROM federation_seen", [], |r| r.get(0)).unwrap();
                assert_eq!(n, 3, "c, d, f");
                forget_sight(c, "f").unwrap();
                assert_eq!(record_sight(c, "f", 5000, 2500, 3).unwrap(), Sight::First);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn past_the_limit_a_new_follower_is_not_recorded_but_known_ones_still_are() {
        with_db(|c| {
            for n in 0..3 {
                assert_eq!(upsert_follower_within(c, &actor(n), "f", true, 3).unwrap(), Followed::New);
            }
            assert_eq!(upsert_follower_within(c, &actor(9), "f", true, 3).unwrap(), Followed::Full);
            let n: i64 = c.query_row("SELECT COUNT(*) FROM federation_followers", [], |r| r.get(0)).unwrap();
            assert_eq!(n, 3);
            assert_eq!(
                upsert_follower_within(c, &actor(1), "g", true, 3).unwrap(),
                Followed::Again { was_approved: true }
            );
        });
    }
}
