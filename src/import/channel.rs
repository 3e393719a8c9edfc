//! `castd import-owncast --channel SLUG`: the Owncast server becomes a new channel of a castd data
//! directory instead of the whole of it. The import itself is the same, into the channel's folder
//! (`<data-dir>/channels/<slug>/`: its own `castd.db` and files, as `daemon::channel` opens them); this
//! file owns the castd side around it:
//! - before anything is written, the slug is checked: a channel's (not `default`), and free (no row in
//!   the channel table of the default channel's database, no non-empty folder) unless `force`, which
//!   replaces that channel's database and files;
//! - once the import is built, its stream keys are checked against every other channel's (stream
//!   keys are unique across the server: a key names the channel a publisher goes live on);
//! - once the channel's folder is in place, its row is added to the channel table (or, replacing a
//!   channel, renamed), named with the imported server name.
//!
//! The castd side is only read (read-only SQLite connections) until the row is written. The daemon
//! opens the channels of its table when it starts: import with castd stopped, or restart it after.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::ImportError;
use crate::channels::{db, ChannelRow, Visibility};
use crate::config::StreamKey;
use crate::media::ChannelId;
use crate::store::Store;

/// The default channel's database in `data_dir` (it holds the channel table).
fn default_db(data_dir: &Path) -> PathBuf {
    data_dir.join("castd.db")
}

/// Channel `slug`'s folder in `data_dir` (the one the daemon opens for it).
pub fn folder(data_dir: &Path, slug: &ChannelId) -> PathBuf {
    data_dir.join("channels").join(slug.as_str())
}

/// A read-only connection to a castd database; `None` when there is none yet.
fn peek(path: &Path) -> Result<Option<Connection>, ImportError> {
    if !path.is_file() {
        return Ok(None);
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Ok(Some(Connection::open_with_flags(path, flags)?))
}

fn has_table(c: &Connection, name: &str) -> Result<bool, ImportError> {
    let n: i64 =
        c.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |r| r.get(0))?;
    Ok(n > 0)
}

/// The channels of the table (none before castd first ran).
fn rows(data_dir: &Path) -> Result<Vec<ChannelRow>, ImportError> {
    let Some(mut c) = peek(&default_db(data_dir))? else {
        return Ok(Vec::new());
    };
    if !has_table(&c, "channels")? {
        return Ok(Vec::new());
    }
    Ok(db::all(&mut c)?)
}

/// The stream keys a castd database's settings hold (the settings table's `streamKeys` row, see
/// `store::settings`).
fn stream_keys(path: &Path) -> Result<Vec<String>, ImportError> {
    let Some(c) = peek(path)? else {
        return Ok(Vec::new());
    };
    if !has_table(&c, "settings")? {
        return Ok(Vec::new());
    }
    let raw: Option<String> =
        c.query_row("SELECT value FROM settings WHERE key = 'streamKeys'", [], |r| r.get(0)).optional()?;
    let keys: Vec<StreamKey> = raw.and_then(|r| serde_json::from_str(&r).ok()).unwrap_or_default();
    Ok(keys.into_iter().map(|k| k.key).collect())
}

fn is_empty_dir(dir: &Path) -> Result<bool, ImportError> {
    match std::fs::read_dir(dir) {
        Ok(mut rd) => Ok(rd.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(ImportError::Io("reading the channel's folder", e)),
    }
}

/// Before the import: `slug` may become an imported channel of `data_dir` (see the module doc).
pub fn check_slug(data_dir: &Path, slug: &ChannelId, force: bool) -> Result<(), ImportError> {
    if ChannelId::made(slug.as_str()).is_err() {
        return Err(ImportError::Invalid(
            "the default channel is the data directory itself: import into it without --channel".into(),
        ));
    }
    let taken = rows(data_dir)?.iter().any(|r| r.slug == *slug) || !is_empty_dir(&folder(data_dir, slug))?;
    if taken && !force {
        return Err(ImportError::ChannelExists(slug.clone()));
    }
    Ok(())
}

/// Once built: none of `keys` (the imported stream keys) is another channel's.
pub fn check_keys(data_dir: &Path, slug: &ChannelId, keys: &[String]) -> Result<(), ImportError> {
    let mut others = vec![(ChannelId::default_channel(), default_db(data_dir))];
    others.extend(
        rows(data_dir)?
            .into_iter()
            .filter(|r| r.slug != *slug)
            .map(|r| (r.slug.clone(), folder(data_dir, &r.slug).join("castd.db"))),
    );
    for (owner, path) in others {
        let theirs = stream_keys(&path)?;
        if keys.iter().any(|k| theirs.contains(k)) {
            return Err(ImportError::Invalid(format!(
                "a stream key of the Owncast server is already channel {owner}'s (stream keys are unique across \
                 the server): change it on one side first"
            )));
        }
    }
    Ok(())
}

/// Once the channel's folder is in place: its row in the channel table, named `name` (a channel that
/// was replaced keeps its visibility and creation time).
pub fn register(data_dir: &Path, slug: &ChannelId, name: &str) -> Result<(), ImportError> {
    let store = Store::open(&default_db(data_dir))?;
    store.migrate("channels", crate::channels::MIGRATIONS)?;
    let name = if name.trim().is_empty() { slug.as_str().to_string() } else { name.to_string() };
    store.with(|c| {
        match db::get(c, slug)? {
            Some(row) => {
                db::update(c, &ChannelRow { name, ..row })?;
            }
            None => {
                let row = ChannelRow {
                    slug: slug.clone(),
                    name,
                    visibility: Visibility::Public,
                    created_at: chrono::Utc::now(),
                };
                db::insert(c, &row)?;
            }
        }
        Ok(())
    })?;
    store.checkpoint()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_slug_needs_force_and_the_default_is_no_channel() {
        let dir = tempfile::tempdir().unwrap();
        let slug = ChannelId::new("retro").unwrap();
        assert!(check_slug(dir.path(), &slug, false).is_ok(), "no castd yet: free");
        assert!(matches!(check_slug(dir.path(), &ChannelId::default_channel(), true), Err(ImportError::Invalid(_))));
        register(dir.path(), &slug, "Retro").unwrap();
        assert!(matches!(check_slug(dir.path(), &slug, false), Err(ImportError::ChannelExists(_))));
        assert!(check_slug(dir.path(), &slug, true).is_ok());
        register(dir.path(), &slug, "Retro Nights").unwrap();
        let rows = rows(dir.path()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "Retro Nights", "renamed, not added twice");
        // A folder without a row is taken too.
        let other = ChannelId::new("other").unwrap();
        std::fs::create_dir_all(folder(dir.path(), &other).join("hls")).unwrap();
        assert!(matches!(check_slug(dir.path(), &other, false), Err(ImportError::ChannelExists(_))));
    }
}
