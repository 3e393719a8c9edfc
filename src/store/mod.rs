//! SQLite storage: one database file in WAL mode, opened once, with numbered migrations in code.
//!
//! Each module that keeps data owns its tables and hands its migrations to `Store::migrate` under its
//! own name (`"settings"`, `"chat"`, ...); `schema_migrations` records how far each module has got, so
//! modules add tables without touching each other's lists. Queries run on the blocking pool through
//! `Store::call`, so a slow disk never stalls the async runtime.

pub mod settings;

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::Connection;

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("stored data is not valid: {0}")]
    Corrupt(String),
    #[error("database task failed: {0}")]
    Task(String),
}

/// A module's migrations: each entry is applied once, in order, inside a transaction.
pub type Migrations = &'static [&'static str];

/// The shared database handle.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
}

impl Store {
    /// Open (or create) the database file, switch it to WAL and prepare the migrations table.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // NORMAL in WAL mode is durable against a process crash (kill -9); only power loss can drop
        // the last transactions.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::prepared(conn)
    }

    /// An empty database in memory, gone with the process: a cluster edge's (it owns no data; the
    /// origin's database is the one, see `cluster`).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::prepared(Connection::open_in_memory()?)
    }

    /// Foreign keys on and the migrations table ready.
    fn prepared(conn: Connection) -> Result<Self, StoreError> {
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                module TEXT PRIMARY KEY,
                version INTEGER NOT NULL
            );",
        )?;
        Ok(Self { conn: Arc::new(Mutex::new(conn)) })
    }

    /// Apply the migrations of `module` that have not run yet.
    pub fn migrate(&self, module: &str, migrations: Migrations) -> Result<(), StoreError> {
        let mut conn = self.conn.lock();
        let done: i64 = conn
            .query_row("SELECT version FROM schema_migrations WHERE module = ?1", [module], |r| r.get(0))
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(0),
                e => Err(e),
            })?;
        let done = usize::try_from(done).map_err(|_| StoreError::Corrupt(format!("migration version of {module}")))?;
        if done > migrations.len() {
            return Err(StoreError::Corrupt(format!(
                "the database has {done} migrations of '{module}' but this castd knows {}: it was written by a newer version",
                migrations.len()
            )));
        }
        for (i, sql) in migrations.iter().enumerate().skip(done) {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (module, version) VALUES (?1, ?2)
                 ON CONFLICT(module) DO UPDATE SET version = excluded.version",
                rusqlite::params![module, (i + 1) as i64],
            )?;
            tx.commit()?;
            tracing::debug!(module, version = i + 1, "applied migration");
        }
        Ok(())
    }

    /// Run `f` with the connection on the current thread (for start-up and tests).
    pub fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        f(&mut self.conn.lock())
    }

    /// Run `f` with the connection on tokio's blocking pool.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || f(&mut conn.lock())).await.map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Checkpoint the WAL into the main file; called on shutdown so the file is complete on its own.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn.lock().execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_run_once_per_module() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        const A: Migrations = &["CREATE TABLE a (x INTEGER);", "ALTER TABLE a ADD COLUMN y TEXT;"];
        store.migrate("a", A).unwrap();
        store.migrate("a", A).unwrap(); // second run is a no-op, not an error
        store.migrate("b", &["CREATE TABLE b (x INTEGER);"]).unwrap();
        let n: i64 = store
            .with(|c| Ok(c.query_row("SELECT version FROM schema_migrations WHERE module='a'", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(n, 2);
        // a database from a newer castd is refused instead of being misread
        assert!(store.migrate("a", &A[..1]).is_err());
    }
}
