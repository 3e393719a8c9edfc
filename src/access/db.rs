//! The access tables of a channel's database: its pass signing key, its viewer passwords (bcrypt
//! hashes, each with its keyed prefix: see `prefix`; the fingerprint of the prefix key beside them) and
//! its invite links (the SHA-256 of each link's secret, its expiry and use count).

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::store::{Migrations, StoreError};

pub const MIGRATIONS: Migrations = &[
    "CREATE TABLE access_keys (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        key BLOB NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE viewer_passwords (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        hash TEXT NOT NULL,
        comment TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE viewer_invites (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        secret_hash TEXT NOT NULL UNIQUE,
        comment TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        max_uses INTEGER NOT NULL,
        uses INTEGER NOT NULL DEFAULT 0
    );",
    // The keyed prefix of each password (`prefix`; NULL: stored before prefixes, written back at the
    // next right password) and the fingerprint of the key the prefixes were made with.
    "ALTER TABLE viewer_passwords ADD COLUMN prefix INTEGER;
    CREATE TABLE viewer_password_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        fingerprint BLOB NOT NULL
    );",
];

/// A viewer password as the admin list shows it (never the password).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordRow {
    pub id: i64,
    pub comment: String,
    /// RFC 3339.
    pub created_at: String,
    #[serde(skip)]
    pub hash: String,
    /// The password's keyed prefix (`prefix`); `None` for a row stored before prefixes.
    #[serde(skip)]
    pub prefix: Option<u16>,
}

/// An invite link as the admin list shows it (never its secret).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InviteRow {
    pub id: i64,
    pub comment: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub expires_at: String,
    /// 0: any number of uses.
    pub max_uses: i64,
    pub uses: i64,
    #[serde(skip)]
    pub expires_unix: i64,
}

/// Unix seconds as RFC 3339 (seconds, `Z`), as the access routes show times.
pub(super) fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The SHA-256 (hex) of an invite's secret: what the table keeps.
pub fn invite_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The signing key, made on first use.
pub fn signing_key(c: &Connection, now: i64) -> Result<Vec<u8>, StoreError> {
    if let Some(k) = c.query_row("SELECT key FROM access_keys WHERE id = 1", [], |r| r.get(0)).optional()? {
        return Ok(k);
    }
    rotate_key(c, now)
}

/// A new signing key (every pass signed with the old one stops being valid).
pub fn rotate_key(c: &Connection, now: i64) -> Result<Vec<u8>, StoreError> {
    let key: [u8; 32] = rand::random();
    c.execute(
        "INSERT INTO access_keys (id, key, created_at) VALUES (1, ?1, ?2)
         ON CONFLICT(id) DO UPDATE SET key = excluded.key, created_at = excluded.created_at",
        params![key.to_vec(), now],
    )?;
    Ok(key.to_vec())
}

const PASSWORD_COLUMNS: &str = "id, comment, created_at, hash, prefix";

fn password_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PasswordRow> {
    let prefix: Option<i64> = r.get(4)?;
    Ok(PasswordRow {
        id: r.get(0)?,
        comment: r.get(1)?,
        created_at: rfc3339(r.get(2)?),
        hash: r.get(3)?,
        prefix: prefix.and_then(|p| u16::try_from(p).ok()),
    })
}

pub fn passwords(c: &Connection) -> Result<Vec<PasswordRow>, StoreError> {
    let mut st = c.prepare(&format!("SELECT {PASSWORD_COLUMNS} FROM viewer_passwords ORDER BY id"))?;
    let rows = st.query_map([], password_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The rows an unlock with a password of prefix `prefix` must verify: those with that prefix, then
/// those without one yet (stored before prefixes).
pub fn password_candidates(c: &Connection, prefix: u16) -> Result<Vec<PasswordRow>, StoreError> {
    let mut st = c.prepare(&format!(
        "SELECT {PASSWORD_COLUMNS} FROM viewer_passwords WHERE prefix = ?1 OR prefix IS NULL
         ORDER BY prefix IS NULL, id"
    ))?;
    let rows = st.query_map([i64::from(prefix)], password_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn add_password(c: &Connection, hash: &str, prefix: u16, comment: &str, now: i64) -> Result<i64, StoreError> {
    c.execute(
        "INSERT INTO viewer_passwords (hash, prefix, comment, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![hash, i64::from(prefix), comment, now],
    )?;
    Ok(c.last_insert_rowid())
}

/// Write the prefix of a row stored without one (after its password was given right).
pub fn set_password_prefix(c: &Connection, id: i64, prefix: u16) -> Result<(), StoreError> {
    c.execute("UPDATE viewer_passwords SET prefix = ?2 WHERE id = ?1", params![id, i64::from(prefix)])?;
    Ok(())
}

/// Take the prefix key of `fingerprint`: when the prefixes were made with another key (the key file
/// was lost or replaced), they are dropped, so their rows are verified as rows without one until
/// their password is given again. Whether prefixes were dropped.
pub fn adopt_prefix_key(c: &Connection, fingerprint: &[u8]) -> Result<bool, StoreError> {
    let known: Option<Vec<u8>> =
        c.query_row("SELECT fingerprint FROM viewer_password_key WHERE id = 1", [], |r| r.get(0)).optional()?;
    if known.as_deref() == Some(fingerprint) {
        return Ok(false);
    }
    let dropped = c.execute("UPDATE viewer_passwords SET prefix = NULL WHERE prefix IS NOT NULL", [])? > 0;
    c.execute(
        "INSERT INTO viewer_password_key (id, fingerprint) VALUES (1, ?1)
         ON CONFLICT(id) DO UPDATE SET fingerprint = excluded.fingerprint",
        [fingerprint],
    )?;
    Ok(dropped)
}

/// Whether a password was there to delete.
pub fn delete_password(c: &Connection, id: i64) -> Result<bool, StoreError> {
    Ok(c.execute("DELETE FROM viewer_passwords WHERE id = ?1", [id])? > 0)
}

pub fn invites(c: &Connection) -> Result<Vec<InviteRow>, StoreError> {
    let mut st =
        c.prepare("SELECT id, comment, created_at, expires_at, max_uses, uses FROM viewer_invites ORDER BY id")?;
    let rows = st
        .query_map([], |r| {
            let expires: i64 = r.get(3)?;
            Ok(InviteRow {
                id: r.get(0)?,
                comment: r.get(1)?,
                created_at: rfc3339(r.get(2)?),
                expires_at: rfc3339(expires),
                max_uses: r.get(4)?,
                uses: r.get(5)?,
                expires_unix: expires,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn add_invite(
    c: &Connection,
    secret: &str,
    comment: &str,
    now: i64,
    expires_at: i64,
    max_uses: i64,
) -> Result<i64, StoreError> {
    c.execute(
        "INSERT INTO viewer_invites (secret_hash, comment, created_at, expires_at, max_uses) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![invite_hash(secret), comment, now, expires_at, max_uses],
    )?;
    Ok(c.last_insert_rowid())
}

pub fn delete_invite(c: &Connection, id: i64) -> Result<bool, StoreError> {
    Ok(c.execute("DELETE FROM viewer_invites WHERE id = ?1", [id])? > 0)
}

/// Redeem an invite: one use counted if it is valid at `now` and has uses left; its id and expiry.
pub fn redeem_invite(c: &Connection, secret: &str, now: i64) -> Result<Option<(i64, i64)>, StoreError> {
    let found = c
        .query_row(
            "UPDATE viewer_invites SET uses = uses + 1
             WHERE secret_hash = ?1 AND expires_at > ?2 AND (max_uses = 0 OR uses < max_uses)
             RETURNING id, expires_at",
            params![invite_hash(secret), now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invite_is_redeemed_until_its_uses_or_time_run_out() {
        let store = crate::store::Store::open_in_memory().unwrap();
        store.migrate("access", MIGRATIONS).unwrap();
        store
            .with(|c| {
                let id = add_invite(c, "s3cret", "friends", 100, 200, 2)?;
                assert_eq!(redeem_invite(c, "s3cret", 150)?, Some((id, 200)));
                assert_eq!(redeem_invite(c, "wrong", 150)?, None);
                assert_eq!(redeem_invite(c, "s3cret", 151)?, Some((id, 200)));
                assert_eq!(redeem_invite(c, "s3cret", 152)?, None, "two uses only");
                let open = add_invite(c, "open", "", 100, 200, 0)?;
                assert_eq!(redeem_invite(c, "open", 199)?, Some((open, 200)));
                assert_eq!(redeem_invite(c, "open", 200)?, None, "expired");
                assert_eq!(invites(c)?[0].uses, 2);
                let k1 = signing_key(c, 1)?;
                assert_eq!(signing_key(c, 2)?, k1);
                assert_ne!(rotate_key(c, 3)?, k1);
                Ok(())
            })
            .unwrap();
    }
}
