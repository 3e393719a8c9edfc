//! Reading an Owncast data directory: finding `owncast.db`, opening a private copy of it (so the
//! Owncast directory is never written, not even a `-shm` file), checking that it is whole and of a
//! schema version this importer knows, and reading the datastore (gob values) and the tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::gob;
use super::ImportError;

/// The newest goose schema version this importer has read the shape of (Owncast's migrations test
/// at the commit the facts were gathered from).
pub const NEWEST_GOOSE_VERSION: i64 = 12;
/// The newest `DATA_STORE_VERSION` (value encodings) this importer knows.
pub const NEWEST_DATASTORE_VERSION: f64 = 4.0;
/// The legacy schema version the goose migrations start from.
const LEGACY_BASELINE: i64 = 9;

/// An opened, checked Owncast database (a private copy) and where its data directory is.
pub struct Source {
    /// The Owncast `data/` directory (logo, emoji, public files are relative to it).
    pub data_dir: PathBuf,
    pub conn: Connection,
    /// The goose schema version.
    pub version: i64,
    /// Datastore keys and their raw values (undecoded).
    pub datastore: BTreeMap<String, Vec<u8>>,
    /// Holds the private copy of the database until the import is over.
    _copy: tempfile::TempDir,
}

/// What is at a path of the Owncast data directory, without following a link.
#[derive(Debug)]
pub enum Entry {
    /// A regular file, open for reading (opened with `O_NOFOLLOW`: a link put there after a check is
    /// refused too).
    File(std::fs::File),
    /// A symbolic link: never followed (it could point anywhere, out of the Owncast directory).
    Link,
    /// A directory (not a link to one).
    Dir,
    /// Nothing, or something else (a socket, a device).
    Other,
}

/// Look at `path` without following a final symbolic link (see [`Entry`]).
pub fn entry(path: &Path) -> Entry {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Entry::Other };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Entry::Link;
    }
    if kind.is_dir() {
        return Entry::Dir;
    }
    if !kind.is_file() {
        return Entry::Other;
    }
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
        Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => Entry::File(f),
        Ok(_) => Entry::Other,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Entry::Link,
        Err(_) => Entry::Other,
    }
}

/// Copy the open file `from` to a new file `to`.
pub fn copy_open(mut from: std::fs::File, to: &Path) -> std::io::Result<u64> {
    let mut out = std::fs::File::create(to)?;
    std::io::copy(&mut from, &mut out)
}

/// Where `owncast.db` is: `DIR/owncast.db` (DIR is the data directory) or `DIR/data/owncast.db`
/// (DIR is Owncast's working directory). The database must be a regular file there, not a link.
fn locate(dir: &Path) -> Result<PathBuf, ImportError> {
    if !dir.is_dir() {
        return Err(ImportError::Source(format!("{} is not a directory", dir.display())));
    }
    for data in [dir.to_path_buf(), dir.join("data")] {
        match entry(&data.join("owncast.db")) {
            Entry::File(_) => return Ok(data),
            Entry::Link => {
                return Err(ImportError::Source(format!(
                    "{} is a symbolic link; castd reads only the files of the Owncast directory itself",
                    data.join("owncast.db").display()
                )))
            }
            _ => {}
        }
    }
    Err(ImportError::Source(format!(
        "no owncast.db in {} or {}/data: is this an Owncast data directory?",
        dir.display(),
        dir.display()
    )))
}

impl Source {
    /// Find, copy, open and check the Owncast database under `dir`.
    pub fn open(dir: &Path) -> Result<Source, ImportError> {
        let data_dir = locate(dir)?;
        let copy =
            tempfile::Builder::new().prefix("castd-import-src").tempdir().map_err(ImportError::io("temp dir"))?;
        let db = copy.path().join("owncast.db");
        let Entry::File(file) = entry(&data_dir.join("owncast.db")) else {
            return Err(ImportError::Source(format!("{}/owncast.db is not a regular file", data_dir.display())));
        };
        copy_open(file, &db).map_err(ImportError::io("copying owncast.db"))?;
        // A WAL beside the database holds its newest transactions; the copy replays them. (Not a link.)
        if let Entry::File(wal) = entry(&data_dir.join("owncast.db-wal")) {
            copy_open(wal, &copy.path().join("owncast.db-wal")).map_err(ImportError::io("copying owncast.db-wal"))?;
        }
        let corrupt = |e: rusqlite::Error| ImportError::Corrupt(format!("owncast.db: {e}"));
        let conn =
            Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(corrupt)?;
        let check: Vec<String> = {
            let mut stmt = conn.prepare("PRAGMA quick_check").map_err(corrupt)?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(corrupt)?;
            rows.collect::<Result<_, _>>().map_err(corrupt)?
        };
        if check.first().map(String::as_str) != Some("ok") {
            return Err(ImportError::Corrupt(format!(
                "owncast.db failed SQLite's integrity check: {}",
                check.into_iter().take(3).collect::<Vec<_>>().join("; ")
            )));
        }
        let version = schema_version(&conn)?;
        let mut source = Source { data_dir, conn, version, datastore: BTreeMap::new(), _copy: copy };
        source.datastore = source.read_datastore()?;
        if let Some(raw) = source.datastore.get("DATA_STORE_VERSION") {
            let v = gob::decode(raw)
                .ok()
                .and_then(|v| v.as_f64())
                .ok_or_else(|| ImportError::Corrupt("datastore key DATA_STORE_VERSION is not a number".into()))?;
            if v > NEWEST_DATASTORE_VERSION {
                return Err(ImportError::Version(format!(
                    "the datastore's DATA_STORE_VERSION is {v}; this castd knows up to {NEWEST_DATASTORE_VERSION}"
                )));
            }
        }
        Ok(source)
    }

    fn table_exists(&self, name: &str) -> bool {
        table_exists(&self.conn, name)
    }

    /// Whether `table` has `column` (the schema differs between Owncast versions).
    pub fn has_column(&self, table: &str, column: &str) -> bool {
        let Ok(mut stmt) = self.conn.prepare(&format!("PRAGMA table_info({table})")) else { return false };
        let Ok(rows) = stmt.query_map([], |r| r.get::<_, String>(1)) else { return false };
        let names: Vec<String> = rows.filter_map(Result::ok).collect();
        names.iter().any(|c| c == column)
    }

    fn read_datastore(&self) -> Result<BTreeMap<String, Vec<u8>>, ImportError> {
        if !self.table_exists("datastore") {
            return Err(ImportError::Corrupt("owncast.db has no datastore table".into()));
        }
        let mut stmt = self.conn.prepare("SELECT key, value FROM datastore").map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                let key: String = r.get(0)?;
                let value = match r.get_ref(1)? {
                    ValueRef::Blob(b) => b.to_vec(),
                    ValueRef::Text(t) => t.to_vec(),
                    _ => Vec::new(),
                };
                Ok((key, value))
            })
            .map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)
    }

    /// How many rows `table` has (0 when it does not exist).
    pub fn count(&self, table: &str) -> Result<usize, ImportError> {
        if !self.table_exists(table) {
            return Ok(0);
        }
        let n: i64 = self.conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0)).map_err(db_err)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Rows of `table` (when it exists) as column name → value, with the columns asked for that it has.
    pub fn rows(&self, table: &str, columns: &[&str]) -> Result<Vec<Row>, ImportError> {
        if !self.table_exists(table) {
            return Ok(Vec::new());
        }
        let present: Vec<&str> = columns.iter().copied().filter(|c| self.has_column(table, c)).collect();
        if present.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {} FROM {table} ORDER BY rowid", present.join(", "));
        let mut stmt = self.conn.prepare(&sql).map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                let mut row = Row::default();
                for (i, c) in present.iter().enumerate() {
                    let v: rusqlite::types::Value = r.get(i)?;
                    row.0.insert((*c).to_string(), v);
                }
                Ok(row)
            })
            .map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)
    }
}

fn db_err(e: rusqlite::Error) -> ImportError {
    ImportError::Corrupt(format!("reading owncast.db: {e}"))
}

fn table_exists(conn: &Connection, name: &str) -> bool {
    conn.query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |_| Ok(()))
        .optional()
        .ok()
        .flatten()
        .is_some()
}

/// The goose schema version, refusing legacy (pre-goose) and newer-than-known databases.
fn schema_version(conn: &Connection) -> Result<i64, ImportError> {
    if !table_exists(conn, "goose_db_version") {
        if table_exists(conn, "config") {
            let legacy: Option<String> = conn
                .query_row("SELECT value FROM config WHERE key = 'version'", [], |r| r.get(0))
                .optional()
                .ok()
                .flatten();
            return Err(ImportError::Version(format!(
                "owncast.db has the legacy schema (version {}) and no goose migrations: start it once with a \
                 current Owncast (which upgrades it), then import again",
                legacy.as_deref().unwrap_or("unknown")
            )));
        }
        if table_exists(conn, "datastore") {
            return Err(ImportError::Version(
                "owncast.db has no goose_db_version table, so its schema version is unknown".into(),
            ));
        }
        return Err(ImportError::Corrupt(
            "owncast.db has no Owncast tables (no datastore, no goose_db_version)".into(),
        ));
    }
    let version: Option<i64> = conn
        .query_row("SELECT MAX(version_id) FROM goose_db_version WHERE is_applied", [], |r| r.get(0))
        .map_err(db_err)?;
    let version = version.unwrap_or(0);
    if version > NEWEST_GOOSE_VERSION {
        return Err(ImportError::Version(format!(
            "owncast.db is at schema version {version}; this castd can import up to version \
             {NEWEST_GOOSE_VERSION} (a newer Owncast): update castd, or report the version"
        )));
    }
    if version < 1 {
        return Err(ImportError::Version(format!(
            "owncast.db is at goose schema version {version} (the legacy schema {LEGACY_BASELINE} or older): \
             start it once with a current Owncast, then import again"
        )));
    }
    Ok(version)
}

/// One row: column name → value.
#[derive(Debug, Default)]
pub struct Row(BTreeMap<String, rusqlite::types::Value>);

impl Row {
    /// A text column ("" when absent or NULL; numbers as their text).
    pub fn text(&self, col: &str) -> String {
        use rusqlite::types::Value as V;
        match self.0.get(col) {
            Some(V::Text(s)) => s.clone(),
            Some(V::Blob(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(V::Integer(i)) => i.to_string(),
            Some(V::Real(f)) => f.to_string(),
            _ => String::new(),
        }
    }

    /// A text column, `None` when absent, NULL or empty.
    pub fn opt_text(&self, col: &str) -> Option<String> {
        Some(self.text(col)).filter(|s| !s.is_empty())
    }

    pub fn int(&self, col: &str) -> Option<i64> {
        use rusqlite::types::Value as V;
        match self.0.get(col) {
            Some(V::Integer(i)) => Some(*i),
            Some(V::Real(f)) => Some(*f as i64),
            Some(V::Text(s)) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn bool(&self, col: &str) -> bool {
        use rusqlite::types::Value as V;
        match self.0.get(col) {
            Some(V::Integer(i)) => *i != 0,
            Some(V::Text(s)) => matches!(s.trim().to_ascii_lowercase().as_str(), "1" | "true" | "t"),
            _ => false,
        }
    }

    pub fn blob(&self, col: &str) -> Vec<u8> {
        use rusqlite::types::Value as V;
        match self.0.get(col) {
            Some(V::Blob(b)) => b.clone(),
            Some(V::Text(s)) => s.as_bytes().to_vec(),
            _ => Vec::new(),
        }
    }

    /// A time column: `Ok(None)` when NULL/empty, `Err` when it is there but unreadable.
    pub fn time(&self, col: &str) -> Result<Option<DateTime<Utc>>, String> {
        use rusqlite::types::Value as V;
        match self.0.get(col) {
            None | Some(V::Null) => Ok(None),
            Some(V::Integer(i)) => Utc.timestamp_opt(*i, 0).single().map(Some).ok_or_else(|| format!("{col} = {i}")),
            Some(V::Real(f)) => {
                Utc.timestamp_opt(*f as i64, 0).single().map(Some).ok_or_else(|| format!("{col} = {f}"))
            }
            Some(_) => {
                let s = self.text(col);
                if s.trim().is_empty() {
                    return Ok(None);
                }
                parse_time(&s).map(Some).ok_or_else(|| format!("{col} = {s:?}"))
            }
        }
    }
}

/// Times as Go's SQLite driver writes them (`2006-01-02 15:04:05.999999999-07:00`), RFC 3339, or
/// SQLite's `CURRENT_TIMESTAMP` (`2006-01-02 15:04:05`, UTC).
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    // Go's time.String() adds " +0000 UTC" and maybe " m=+1.23"; keep the part before the zone name.
    let trimmed = s.split(" m=").next().unwrap_or(s);
    for fmt in
        ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f %z", "%Y-%m-%dT%H:%M:%S%.f%:z"]
    {
        if let Ok(t) = DateTime::parse_from_str(trimmed, fmt) {
            return Some(t.with_timezone(&Utc));
        }
    }
    let no_zone = trimmed.trim_end_matches(" UTC");
    if let Ok(t) = DateTime::parse_from_str(no_zone, "%Y-%m-%d %H:%M:%S%.f %z") {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(no_zone, fmt) {
            return Some(Utc.from_utc_datetime(&t));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_the_formats_owncast_leaves() {
        let want = Utc.with_ymd_and_hms(2024, 3, 1, 12, 30, 5).unwrap();
        for s in [
            "2024-03-01 12:30:05+00:00",
            "2024-03-01T12:30:05Z",
            "2024-03-01 12:30:05",
            "2024-03-01 14:30:05+02:00",
            "2024-03-01 12:30:05 +0000 UTC",
        ] {
            assert_eq!(parse_time(s), Some(want), "{s}");
        }
        assert!(parse_time("2024-03-01 12:30:05.123456789+00:00").is_some());
        assert_eq!(parse_time("yesterday"), None);
    }
}
