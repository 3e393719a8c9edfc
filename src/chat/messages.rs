//! Persisted chat history in SQLite: every CHAT (and the system messages and actions that go through
//! the room) is stored before it is broadcast, so history survives restarts and a client that sees a
//! user's message can always find it in `GET /api/chat`.
//!
//! The public history is the newest `PUBLIC_BACKLOG` visible messages of enabled users; moderators and
//! the admin get hidden messages too (with `hiddenAt`). As in Owncast (whose history query joins the
//! users table), those lists (`/api/chat`, `/api/admin/chat/messages`, `/api/integrations/chat`) hold
//! only rows with a user: SYSTEM and CHAT_ACTION rows stay stored for a replay's chat (`between`).

use chrono::{DateTime, Utc};
use rusqlite::{params, params_from_iter, Connection};
use serde::Serialize;

use super::protocol::User;
use super::users::{self, parse_ts, ts, USER_COLS};
use crate::store::StoreError;

/// How many messages the public history returns (Owncast: 50).
pub const PUBLIC_BACKLOG: u32 = 50;
/// How many messages the moderation/admin history returns (Owncast: 5000).
pub const ADMIN_BACKLOG: u32 = 5000;

/// A stored message, serialized as Owncast's ChatMessage.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    #[serde(rename = "type")]
    pub kind: String,
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub user: Option<User>,
    pub visible: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub hidden_at: Option<DateTime<Utc>>,
}

/// One stored message (a cluster's redelivered entry is sent again from it, see `relay::resend`).
pub fn by_id(conn: &Connection, id: &str) -> Result<Option<ChatMessage>, StoreError> {
    Ok(query(conn, "m.id = ?1", &[id], 1)?.pop())
}

pub fn insert(conn: &Connection, msg: &ChatMessage) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO chat_messages (id, type, user_id, body, timestamp, hidden_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            msg.id,
            msg.kind,
            msg.user.as_ref().map(|u| u.id.as_str()),
            msg.body,
            ts(msg.timestamp),
            msg.hidden_at.map(ts)
        ],
    )?;
    Ok(())
}

fn query(conn: &Connection, filter: &str, args: &[&str], limit: u32) -> Result<Vec<ChatMessage>, StoreError> {
    let sql = format!(
        "SELECT * FROM (SELECT m.rowid AS seq, m.id, m.type, m.body, m.timestamp, m.hidden_at, u.id IS NOT NULL, {USER_COLS}
         FROM chat_messages m LEFT JOIN chat_users u ON u.id = m.user_id WHERE {filter}
         ORDER BY m.rowid DESC LIMIT {limit}) ORDER BY seq ASC"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args.iter()), message_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A row of `query`'s and `between`'s column list.
fn message_row(r: &rusqlite::Row) -> rusqlite::Result<ChatMessage> {
    let hidden_at: Option<String> = r.get(5)?;
    let hidden_at = hidden_at.as_deref().map(parse_ts).transpose()?;
    let has_user: bool = r.get(6)?;
    Ok(ChatMessage {
        id: r.get(1)?,
        kind: r.get(2)?,
        body: r.get(3)?,
        timestamp: parse_ts(&r.get::<_, String>(4)?)?,
        visible: hidden_at.is_none(),
        hidden_at,
        user: if has_user { Some(users::from_row(r, 7)?) } else { None },
    })
}

/// History for viewers: visible messages of enabled users, oldest first. Rows without a user (the
/// system's messages and actions) are not listed: Owncast's history query joins the users table, so
/// every row its clients read has a `user`.
pub fn public_history(conn: &Connection) -> Result<Vec<ChatMessage>, StoreError> {
    query(conn, "u.id IS NOT NULL AND m.hidden_at IS NULL AND u.disabled_at IS NULL", &[], PUBLIC_BACKLOG)
}

/// What viewers may see stamped in `[from, to)` (a replay's chat): visible messages of enabled users
/// (and the system's), oldest first, at most `limit`.
pub fn between(
    conn: &Connection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<ChatMessage>, StoreError> {
    let sql = format!(
        "SELECT m.rowid AS seq, m.id, m.type, m.body, m.timestamp, m.hidden_at, u.id IS NOT NULL, {USER_COLS}
         FROM chat_messages m LEFT JOIN chat_users u ON u.id = m.user_id
         WHERE m.hidden_at IS NULL AND u.disabled_at IS NULL AND m.timestamp >= ?1 AND m.timestamp < ?2
         ORDER BY m.timestamp ASC, m.rowid ASC LIMIT {limit}"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![ts(from), ts(to)], message_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// History for moderators and the admin: every user's messages, hidden ones included (as in
/// `public_history`, rows without a user are not listed).
pub fn full_history(conn: &Connection) -> Result<Vec<ChatMessage>, StoreError> {
    query(conn, "u.id IS NOT NULL", &[], ADMIN_BACKLOG)
}

/// The messages of one user (moderation details).
pub fn by_user(conn: &Connection, user_id: &str) -> Result<Vec<ChatMessage>, StoreError> {
    query(conn, "m.user_id = ?1", &[user_id], ADMIN_BACKLOG)
}

/// Hide or show messages; returns the ids that exist.
pub fn set_visibility(conn: &mut Connection, ids: &[String], visible: bool) -> Result<Vec<String>, StoreError> {
    let hidden_at = (!visible).then(|| ts(Utc::now()));
    let tx = conn.transaction()?;
    let mut found = Vec::new();
    for id in ids {
        let n = tx.execute(
            "UPDATE chat_messages SET hidden_at = CASE WHEN ?2 IS NULL THEN NULL ELSE COALESCE(hidden_at, ?2) END WHERE id = ?1",
            params![id, hidden_at],
        )?;
        if n > 0 {
            found.push(id.clone());
        }
    }
    tx.commit()?;
    Ok(found)
}

/// Hide every visible message of a user; returns their ids.
pub fn hide_all_of_user(conn: &mut Connection, user_id: &str) -> Result<Vec<String>, StoreError> {
    let tx = conn.transaction()?;
    let ids: Vec<String> = {
        let mut stmt = tx.prepare("SELECT id FROM chat_messages WHERE user_id = ?1 AND hidden_at IS NULL")?;
        let rows = stmt.query_map([user_id], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    tx.execute(
        "UPDATE chat_messages SET hidden_at = ?2 WHERE user_id = ?1 AND hidden_at IS NULL",
        params![user_id, ts(Utc::now())],
    )?;
    tx.commit()?;
    Ok(ids)
}

/// Ids of all messages of a user (before deleting the user).
pub fn ids_of_user(conn: &Connection, user_id: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare("SELECT id FROM chat_messages WHERE user_id = ?1")?;
    let rows = stmt.query_map([user_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, at: DateTime<Utc>, user: Option<&User>, hidden: bool) -> ChatMessage {
        ChatMessage {
            id: id.into(),
            timestamp: at,
            kind: "CHAT".into(),
            body: id.into(),
            user: user.cloned(),
            visible: !hidden,
            hidden_at: hidden.then_some(at),
        }
    }

    #[test]
    fn between_answers_a_window_of_what_viewers_may_see_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
        store.migrate("chat", crate::chat::MIGRATIONS).unwrap();
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z").unwrap().with_timezone(&Utc);
        let s = |n: i64| t0 + chrono::Duration::seconds(n);
        store
            .with(|c| {
                let (alice, _) = users::create(c, "alice", 1)?;
                let (troll, _) = users::create(c, "troll", 2)?;
                // Inserted out of time order: the answer is in time order.
                insert(c, &msg("late", s(30), Some(&alice), false))?;
                insert(c, &msg("early", s(10), Some(&alice), false))?;
                insert(c, &msg("system", s(15), None, false))?;
                insert(c, &msg("hidden", s(12), Some(&alice), true))?;
                insert(c, &msg("spam", s(20), Some(&troll), false))?;
                insert(c, &msg("before", s(-5), Some(&alice), false))?;
                c.execute("UPDATE chat_users SET disabled_at = ?2 WHERE id = ?1", params![troll.id, ts(s(40))])?;
                let ids = |v: Vec<ChatMessage>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
                assert_eq!(ids(between(c, s(0), s(60), 100)?), ["early", "system", "late"]);
                assert_eq!(ids(between(c, s(10), s(30), 100)?), ["early", "system"], "[from, to)");
                assert_eq!(ids(between(c, s(0), s(60), 2)?), ["early", "system"], "the oldest `limit`");
                assert!(between(c, s(31), s(60), 100)?.is_empty());
                Ok(())
            })
            .unwrap();
    }
}
