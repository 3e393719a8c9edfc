//! Chat users in SQLite: registration, access tokens, names, colours, moderators, enable/disable and
//! the admin users list.
//!
//! Access tokens are never stored: the table holds their SHA-256, so a leaked database does not let
//! anyone speak as a user. Functions here are synchronous and take the connection; callers run them
//! through `Store::call`.

use chrono::{DateTime, SecondsFormat, Utc};
use rand::seq::SliceRandom;
use rand::Rng;
use rusqlite::{params, Connection, OptionalExtension, Row};
use sha2::{Digest, Sha256};

use super::protocol::{User, MODERATOR_SCOPE};
use crate::store::StoreError;

/// Longest display name; longer names are cut (Owncast: 30).
pub const MAX_DISPLAY_NAME_LEN: usize = 30;
/// Display colours are indexes into the web client's palette, 0 through this.
pub const MAX_USER_COLOR: i64 = 7;

/// Columns selected for a user, in the order `from_row` reads them.
pub const USER_COLS: &str = "u.id, u.display_name, u.display_color, u.created_at, u.previous_names, \
    u.name_changed_at, u.scopes, u.is_bot, u.authenticated, u.disabled_at, u.auth_provider";

/// Time format of every stored timestamp (sortable as text).
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub fn parse_ts(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e)))
}

fn opt_ts(s: Option<String>) -> rusqlite::Result<Option<DateTime<Utc>>> {
    s.as_deref().map(parse_ts).transpose()
}

fn json_list(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

/// Read a user from `row`, starting at column `at` (columns as in `USER_COLS`).
pub fn from_row(row: &Row, at: usize) -> rusqlite::Result<User> {
    let scopes = json_list(&row.get::<_, String>(at + 6)?);
    Ok(User {
        id: row.get(at)?,
        display_name: row.get(at + 1)?,
        display_color: row.get(at + 2)?,
        created_at: parse_ts(&row.get::<_, String>(at + 3)?)?,
        previous_names: json_list(&row.get::<_, String>(at + 4)?),
        name_changed_at: opt_ts(row.get(at + 5)?)?,
        is_moderator: scopes.iter().any(|s| s == MODERATOR_SCOPE),
        scopes,
        is_bot: row.get(at + 7)?,
        authenticated: row.get(at + 8)?,
        disabled_at: opt_ts(row.get(at + 9)?)?,
        auth_provider: row.get(at + 10)?,
    })
}

/// SHA-256 of an access token, hex.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Trim a requested name and cut it to the maximum length (on a character boundary).
pub fn clean_name(name: &str) -> String {
    let name: String = name.chars().filter(|c| !c.is_control()).collect();
    name.trim().chars().take(MAX_DISPLAY_NAME_LEN).collect::<String>().trim().to_string()
}

/// Whether a forbidden-names entry occurs in `name` (case-insensitive), as Owncast checks it.
pub fn is_forbidden(name: &str, forbidden: &[String]) -> bool {
    let lower = name.to_lowercase();
    forbidden.iter().map(|f| f.trim().to_lowercase()).any(|f| !f.is_empty() && lower.contains(&f))
}

const ADJECTIVES: &[&str] = &[
    "Amused", "Brave", "Calm", "Clever", "Curious", "Eager", "Fancy", "Gentle", "Happy", "Jolly", "Kind", "Lively",
    "Lucky", "Mellow", "Nimble", "Polite", "Quick", "Quiet", "Shiny", "Sleepy", "Sunny", "Swift", "Witty", "Zesty",
];
const ANIMALS: &[&str] = &[
    "Badger", "Beaver", "Crane", "Dolphin", "Falcon", "Ferret", "Fox", "Gecko", "Heron", "Koala", "Lemur", "Lynx",
    "Marten", "Otter", "Owl", "Panda", "Puffin", "Quokka", "Raven", "Seal", "Sloth", "Tapir", "Walrus", "Yak",
];

/// A random two-word name such as "Gentle Otter".
pub fn random_name() -> String {
    let mut rng = rand::thread_rng();
    format!("{} {}", ADJECTIVES.choose(&mut rng).unwrap_or(&"Happy"), ANIMALS.choose(&mut rng).unwrap_or(&"Otter"))
}

pub fn random_color() -> i64 {
    rand::thread_rng().gen_range(0..=MAX_USER_COLOR)
}

/// Create a user; returns it with its (only ever shown once) access token.
pub fn create(conn: &Connection, display_name: &str, color: i64) -> Result<(User, String), StoreError> {
    let token = crate::password::random_token(44);
    let id = crate::password::random_token(12);
    let now = Utc::now();
    conn.execute(
        "INSERT INTO chat_users (id, token_hash, display_name, display_color, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, token_hash(&token), display_name, color, ts(now)],
    )?;
    let user = by_id(conn, &id)?.ok_or_else(|| StoreError::Corrupt("user vanished after insert".into()))?;
    Ok((user, token))
}

pub fn by_id(conn: &Connection, id: &str) -> Result<Option<User>, StoreError> {
    let sql = format!("SELECT {USER_COLS} FROM chat_users u WHERE u.id = ?1");
    Ok(conn.query_row(&sql, [id], |r| from_row(r, 0)).optional()?)
}

pub fn by_token(conn: &Connection, token: &str) -> Result<Option<User>, StoreError> {
    let sql = format!("SELECT {USER_COLS} FROM chat_users u WHERE u.token_hash = ?1");
    Ok(conn.query_row(&sql, [token_hash(token)], |r| from_row(r, 0)).optional()?)
}

/// Whether `name` belongs to an authenticated user other than `except_id`.
pub fn name_taken_by_authenticated(conn: &Connection, name: &str, except_id: &str) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row(
        "SELECT COUNT(*) FROM chat_users WHERE authenticated = 1 AND id != ?2 AND lower(display_name) = lower(?1)",
        params![name, except_id],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// The provider of a sign-in with a viewing pass that carries a member's name (a JWT of the
/// operator's site); the identity is the pass's subject (`jwt:<sub>`).
pub const JWT_PROVIDER: &str = "jwt";

/// The identity a user signed in with (`None`: not signed in, or no such user).
pub fn auth_identity(conn: &Connection, id: &str) -> Result<Option<String>, StoreError> {
    let found = conn
        .query_row("SELECT auth_identity FROM chat_users WHERE id = ?1", params![id], |r| r.get::<_, Option<String>>(0))
        .optional()?;
    Ok(found.flatten())
}

/// Record an external sign-in: the user becomes authenticated with `provider`/`identity`, and takes
/// the offered display name unless it is reserved or another authenticated user has it. Returns the
/// updated user and the name they had before, or `None` when there is no such enabled user.
pub fn sign_in(
    conn: &Connection,
    id: &str,
    sign_in: &crate::http::SignIn,
    forbidden: &[String],
) -> Result<Option<(User, String)>, StoreError> {
    let Some(user) = by_id(conn, id)?.filter(User::is_enabled) else { return Ok(None) };
    conn.execute(
        "UPDATE chat_users SET authenticated = 1, auth_provider = ?2, auth_identity = ?3 WHERE id = ?1",
        params![id, sign_in.provider, sign_in.identity],
    )?;
    let offered = sign_in.display_name.as_deref().map(clean_name).unwrap_or_default();
    if !offered.is_empty()
        && offered != user.display_name
        && !is_forbidden(&offered, forbidden)
        && !name_taken_by_authenticated(conn, &offered, id)?
    {
        rename(conn, id, &offered)?;
    }
    let updated = by_id(conn, id)?.ok_or_else(|| StoreError::Corrupt("user vanished during sign-in".into()))?;
    Ok(Some((updated, user.display_name)))
}

/// Rename a user, remembering the old name.
pub fn rename(conn: &Connection, id: &str, new_name: &str) -> Result<Option<User>, StoreError> {
    let Some(user) = by_id(conn, id)? else { return Ok(None) };
    let mut previous = user.previous_names.clone();
    previous.push(user.display_name.clone());
    let previous = serde_json::to_string(&previous).unwrap_or_else(|_| "[]".into());
    conn.execute(
        "UPDATE chat_users SET display_name = ?2, previous_names = ?3, name_changed_at = ?4 WHERE id = ?1",
        params![id, new_name, previous, ts(Utc::now())],
    )?;
    by_id(conn, id)
}

pub fn set_color(conn: &Connection, id: &str, color: i64) -> Result<Option<User>, StoreError> {
    conn.execute("UPDATE chat_users SET display_color = ?2 WHERE id = ?1", params![id, color])?;
    by_id(conn, id)
}

/// Enable (clear `disabledAt`) or disable a user; `None` when there is no such user.
pub fn set_enabled(conn: &Connection, id: &str, enabled: bool) -> Result<Option<User>, StoreError> {
    let disabled_at = (!enabled).then(|| ts(Utc::now()));
    let n = conn.execute(
        "UPDATE chat_users SET disabled_at = CASE WHEN ?2 IS NULL THEN NULL ELSE COALESCE(disabled_at, ?2) END WHERE id = ?1",
        params![id, disabled_at],
    )?;
    if n == 0 {
        return Ok(None);
    }
    by_id(conn, id)
}

pub fn set_moderator(conn: &Connection, id: &str, moderator: bool) -> Result<Option<User>, StoreError> {
    let Some(user) = by_id(conn, id)? else { return Ok(None) };
    let mut scopes: Vec<String> = user.scopes.into_iter().filter(|s| s != MODERATOR_SCOPE).collect();
    if moderator {
        scopes.push(MODERATOR_SCOPE.to_string());
    }
    let scopes = serde_json::to_string(&scopes).unwrap_or_else(|_| "[]".into());
    conn.execute("UPDATE chat_users SET scopes = ?2 WHERE id = ?1", params![id, scopes])?;
    by_id(conn, id)
}

pub fn delete(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    Ok(conn.execute("DELETE FROM chat_users WHERE id = ?1", [id])? > 0)
}

fn query_users(conn: &Connection, filter: &str) -> Result<Vec<User>, StoreError> {
    let sql = format!("SELECT {USER_COLS} FROM chat_users u WHERE {filter} ORDER BY u.created_at DESC");
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([], |r| from_row(r, 0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn disabled(conn: &Connection) -> Result<Vec<User>, StoreError> {
    query_users(conn, "u.disabled_at IS NOT NULL")
}

pub fn moderators(conn: &Connection) -> Result<Vec<User>, StoreError> {
    query_users(conn, "EXISTS (SELECT 1 FROM json_each(u.scopes) WHERE value = 'MODERATOR')")
}

/// Filter of the admin users list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    All,
    Active,
    Bots,
}

/// The admin users list: `(total matching, one page)`.
pub fn list(
    conn: &Connection,
    offset: u64,
    limit: u64,
    search: Option<&str>,
    status: StatusFilter,
    newest_first: bool,
) -> Result<(u64, Vec<User>), StoreError> {
    let mut cond = vec!["1=1"];
    match status {
        StatusFilter::All => {}
        StatusFilter::Active => cond.push("u.disabled_at IS NULL"),
        StatusFilter::Bots => cond.push("u.is_bot = 1"),
    }
    let search = search.map(str::trim).filter(|s| !s.is_empty()).map(|s| {
        let escaped = s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        format!("%{escaped}%")
    });
    if search.is_some() {
        cond.push("u.display_name LIKE ?1 ESCAPE '\\'");
    } else {
        cond.push("?1 IS NULL");
    }
    let filter = cond.join(" AND ");
    let total: i64 =
        conn.query_row(&format!("SELECT COUNT(*) FROM chat_users u WHERE {filter}"), [&search], |r| r.get(0))?;
    let order = if newest_first { "DESC" } else { "ASC" };
    let sql = format!(
        "SELECT {USER_COLS} FROM chat_users u WHERE {filter} ORDER BY u.created_at {order}, u.rowid {order} LIMIT ?2 OFFSET ?3"
    );
    let mut stmt = conn.prepare(&sql)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![search, limit, offset], |r| from_row(r, 0))?;
    Ok((total.max(0) as u64, rows.collect::<Result<_, _>>()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(clean_name("  bob \n"), "bob");
        assert_eq!(clean_name(&"x".repeat(50)).chars().count(), MAX_DISPLAY_NAME_LEN);
        let forbidden = vec!["admin".to_string(), "system".into()];
        assert!(is_forbidden("SuperAdmin", &forbidden));
        assert!(!is_forbidden("bob", &forbidden));
        assert!(random_name().contains(' '));
        assert_eq!(token_hash("a").len(), 64);
    }

    #[test]
    fn sign_in_marks_authenticated_and_takes_a_free_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("t.db")).unwrap();
        store.migrate("chat", crate::chat::MIGRATIONS).unwrap();
        store
            .with(|c| {
                let (a, _) = create(c, "anon", 1)?;
                let (b, _) = create(c, "other", 2)?;
                let si = |name: &str| crate::http::SignIn {
                    provider: "indieauth".into(),
                    identity: "https://a.example/".into(),
                    display_name: Some(name.into()),
                };
                let (u, old) = sign_in(c, &a.id, &si("Alice"), &[]).unwrap().unwrap();
                assert!(u.authenticated);
                assert_eq!(u.auth_provider.as_deref(), Some("indieauth"));
                assert_eq!((u.display_name.as_str(), old.as_str()), ("Alice", "anon"));
                // An authenticated user's name is not taken over; a reserved one neither.
                let (u, _) = sign_in(c, &b.id, &si("alice"), &[]).unwrap().unwrap();
                assert_eq!(u.display_name, "other");
                let (u, _) = sign_in(c, &b.id, &si("admin"), &["admin".into()]).unwrap().unwrap();
                assert_eq!(u.display_name, "other");
                assert!(sign_in(c, "nobody", &si("x"), &[]).unwrap().is_none());
                Ok(())
            })
            .unwrap();
    }
}
