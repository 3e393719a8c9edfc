//! `castd import-owncast`: brings an Owncast server's data directory over into a castd data
//! directory: settings, the admin password hash, stream keys, chat users (with their access tokens,
//! so clients keep their identity), chat history, IP bans, ActivityPub followers, posts and activity
//! with the same key pair, webhooks, integration access tokens, browser-push subscriptions and keys,
//! custom emoji, the logo and `public/` files.
//!
//! This is an offline tool, not a daemon feature: `main.rs` runs it and nothing else imports it. It
//! writes through the castd modules' own tables (their migrations create them) and settings store.
//!
//! Safety: the Owncast directory is only read (the database is read from a private copy). The castd
//! data directory is built in a temporary directory beside the target and renamed into place at the
//! end, so a failure at any point leaves nothing half-written; a non-empty target is refused unless
//! `force` (then it is replaced whole). A dry run builds the same result in the system's temporary
//! directory, reports it and deletes it. Running the import again with `force` gives the same data.
//!
//! With a channel (`--channel SLUG`), the Owncast server becomes a new channel of the castd data
//! directory: the same import into the channel's folder, and the channel's row (`channel`).

pub mod channel;
pub mod gob;
mod settings;
pub mod source;
mod tables;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::settings::SettingsStore;
use crate::store::{Store, StoreError};

pub use source::{NEWEST_DATASTORE_VERSION, NEWEST_GOOSE_VERSION};

/// Errors of the importer; each stops the import with nothing written.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}")]
    Source(String),
    #[error("the Owncast database is damaged or not an Owncast database: {0}")]
    Corrupt(String),
    #[error("unsupported Owncast schema: {0}")]
    Version(String),
    #[error("the castd data directory {0} is not empty; import into a new directory, or pass --force to replace it")]
    NotEmpty(PathBuf),
    #[error(
        "channel {0} exists already; import as another channel, or pass --force to replace its database and files"
    )]
    ChannelExists(crate::media::ChannelId),
    #[error("{0}: {1}")]
    Io(&'static str, std::io::Error),
    #[error("writing the castd database: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
}

impl ImportError {
    fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ImportError {
        move |e| ImportError::Io(what, e)
    }
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        ImportError::Store(StoreError::Sqlite(e))
    }
}

/// What to import, from where, to where.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Owncast directory (its `data/` directory, or the directory holding `data/`).
    pub from: PathBuf,
    /// The castd data directory to create.
    pub data_dir: PathBuf,
    /// Build and report, but write nothing.
    pub dry_run: bool,
    /// Replace a non-empty data directory (with `channel`: that channel's database and files).
    pub force: bool,
    /// Import as this new channel of the data directory (see `channel`) instead of into the whole of it.
    pub channel: Option<crate::media::ChannelId>,
}

/// What was imported and what was not, per kind.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// The Owncast goose schema version read.
    pub schema_version: i64,
    /// kind → how many were imported.
    pub imported: BTreeMap<&'static str, u64>,
    /// kind → reason → how many were not.
    pub skipped: BTreeMap<&'static str, BTreeMap<String, u64>>,
    /// Things worth knowing that are not failures.
    pub notes: Vec<String>,
    pub dry_run: bool,
}

impl Report {
    fn add(&mut self, kind: &'static str, n: u64) {
        *self.imported.entry(kind).or_default() += n;
    }

    fn imported_one(&mut self, kind: &'static str) {
        self.add(kind, 1);
    }

    fn skip(&mut self, kind: &'static str, reason: impl Into<String>) {
        *self.skipped.entry(kind).or_default().entry(reason.into()).or_default() += 1;
    }

    fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// How many of `kind` were imported.
    pub fn count(&self, kind: &str) -> u64 {
        self.imported.get(kind).copied().unwrap_or(0)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dry_run { "would import" } else { "imported" };
        writeln!(f, "Owncast schema version {}", self.schema_version)?;
        for (kind, n) in &self.imported {
            writeln!(f, "{verb} {kind}: {n}")?;
        }
        for (kind, reasons) in &self.skipped {
            for (reason, n) in reasons {
                writeln!(f, "not imported {kind}: {n} ({reason})")?;
            }
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        if self.dry_run {
            writeln!(f, "dry run: nothing was written")?;
        }
        Ok(())
    }
}

fn is_empty_dir(dir: &Path) -> Result<bool, ImportError> {
    match std::fs::read_dir(dir) {
        Ok(mut rd) => Ok(rd.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(ImportError::Io("reading the castd data directory", e)),
    }
}

/// `path` made absolute through its nearest existing ancestor (the target may not exist yet).
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = at.canonicalize() {
            return Some(rest.iter().rev().fold(real, |p, c| p.join(c)));
        }
        rest.push(at.file_name()?.to_os_string());
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
    }
}

/// Whether one directory is inside the other (or they are the same): the import must not write
/// into the Owncast directory, nor replace a directory that holds it.
fn overlapping(from: &Path, target: &Path) -> bool {
    match (resolved(from), resolved(target)) {
        (Some(a), Some(b)) => a.starts_with(&b) || b.starts_with(&a),
        // A path that cannot be resolved (`..` after a missing directory) is refused to be safe.
        _ => true,
    }
}

/// Run the import (see the module doc).
pub fn run(opts: &Options) -> Result<Report, ImportError> {
    if overlapping(&opts.from, &opts.data_dir) {
        return Err(ImportError::Invalid(
            "the castd data directory must be outside the Owncast directory and not contain it (give plain paths)"
                .into(),
        ));
    }
    let target = &match &opts.channel {
        Some(slug) => {
            channel::check_slug(&opts.data_dir, slug, opts.force)?;
            channel::folder(&opts.data_dir, slug)
        }
        None => opts.data_dir.clone(),
    };
    if !opts.dry_run && !opts.force && !is_empty_dir(target)? {
        return Err(ImportError::NotEmpty(target.clone()));
    }
    let source = source::Source::open(&opts.from)?;

    // Build in a fresh directory: beside the target (same file system, so the final rename is
    // atomic), or in the system temp dir for a dry run.
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let build = if opts.dry_run {
        tempfile::Builder::new().prefix("castd-import-dry").tempdir()
    } else {
        std::fs::create_dir_all(&parent).map_err(ImportError::io("creating the data directory's parent"))?;
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "data".into());
        tempfile::Builder::new().prefix(&format!(".{name}.import-")).tempdir_in(&parent)
    }
    .map_err(ImportError::io("creating the build directory"))?;

    let mut report = Report { schema_version: source.version, dry_run: opts.dry_run, ..Report::default() };
    let imported = build_into(&source, build.path(), &mut report)?;
    if let Some(slug) = &opts.channel {
        let keys: Vec<String> = imported.server.stream_keys.iter().map(|k| k.key.clone()).collect();
        channel::check_keys(&opts.data_dir, slug, &keys)?;
    }
    if opts.dry_run {
        return Ok(report); // `build` is deleted on drop
    }
    let built = build.keep();
    match put_in_place(&built, target, opts.force) {
        Ok(Some(leftover)) => report.note(leftover),
        Ok(None) => {}
        Err(e) => {
            let _ = std::fs::remove_dir_all(&built);
            return Err(e);
        }
    }
    if let Some(slug) = &opts.channel {
        channel::register(&opts.data_dir, slug, &imported.instance.name)?;
        report.note(format!(
            "channel {slug} is at /c/{slug}/ ({}); castd opens it when it starts: restart castd if it runs",
            target.display()
        ));
    }
    Ok(report)
}

/// Move the built directory to `target`, replacing an empty directory, or (with `force`) any.
/// Returns a note when the replaced directory could not be deleted afterwards (the import itself is
/// in place then).
fn put_in_place(built: &Path, target: &Path, force: bool) -> Result<Option<String>, ImportError> {
    let into_place = |built: &Path| {
        std::fs::rename(built, target).map(|()| None).map_err(ImportError::io("moving the imported data into place"))
    };
    if !target.exists() {
        return into_place(built);
    }
    if is_empty_dir(target)? {
        std::fs::remove_dir(target).map_err(ImportError::io("replacing the empty data directory"))?;
        return into_place(built);
    }
    if !force {
        return Err(ImportError::NotEmpty(target.to_path_buf()));
    }
    // Beside the build dir, with its unique name, so no leftover of an earlier run is in the way.
    let old = built.with_file_name(format!(
        "{}.replaced",
        built.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    std::fs::rename(target, &old).map_err(ImportError::io("moving the old data directory aside"))?;
    if let Err(e) = std::fs::rename(built, target) {
        let _ = std::fs::rename(&old, target);
        return Err(ImportError::Io("moving the imported data into place", e));
    }
    Ok(std::fs::remove_dir_all(&old)
        .err()
        .map(|e| format!("the replaced data directory is left at {} ({e}): delete it", old.display())))
}

/// Create castd's database in `dir` and fill it, then copy the files; returns the imported settings.
fn build_into(
    source: &source::Source,
    dir: &Path,
    report: &mut Report,
) -> Result<crate::config::Settings, ImportError> {
    let store = Store::open(&dir.join("castd.db"))?;
    // The tables of every module written to, created by the modules' own migrations.
    // Nothing listens: the daemon is not running.
    let settings_store = SettingsStore::open(store.clone(), crate::events::Bus::default())?;
    store.migrate("chat", crate::chat::MIGRATIONS)?;
    store.migrate("federation", crate::federation::data::MIGRATIONS)?;
    drop(crate::tokens::Tokens::open(store.clone())?);
    drop(crate::webhooks::Webhooks::open(
        store.clone(),
        Arc::new(crate::telemetry::Telemetry::default()),
        crate::tasks::Tasks::new(),
    )?);
    drop(crate::notifications::Notifications::open(store.clone()).map_err(|e| ImportError::Invalid(e.to_string()))?);

    let mut next = (*settings_store.get()).clone();
    let plan = settings::apply(source, &mut next, report)?;
    settings::copy_files(source, dir, &mut next, report)?;
    let imported = next.clone();
    settings_store.update_blocking(|s| *s = next)?;

    // Everything else in one transaction.
    let outcome = store.with(|c| {
        let tx = c.transaction()?;
        match tables::import_all(source, &tx, &plan, report) {
            Ok(()) => {
                tx.commit()?;
                Ok(Ok(()))
            }
            Err(e) => Ok(Err(e)),
        }
    })?;
    outcome?;
    store.checkpoint()?;
    drop(settings_store);
    drop(store);
    Ok(imported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_may_not_overlap_the_owncast_directory() {
        let dir = tempfile::tempdir().unwrap();
        let owncast = dir.path().join("owncast");
        std::fs::create_dir_all(owncast.join("data")).unwrap();
        assert!(overlapping(&owncast, &owncast.join("data/castd")), "a target inside, not created yet");
        assert!(overlapping(&owncast.join("data"), dir.path()), "a target holding the Owncast dir");
        assert!(overlapping(&owncast, &owncast.join("x/../")));
        assert!(!overlapping(&owncast, &dir.path().join("castd")));
        let opts = Options {
            from: owncast.clone(),
            data_dir: owncast.join("castd"),
            dry_run: false,
            force: true,
            channel: None,
        };
        assert!(matches!(run(&opts), Err(ImportError::Invalid(_))));
        assert!(!owncast.join("castd").exists());
    }
}
