//! Files served from disk without reading them per request: the HLS of a stream that has ended (and
//! whatever of a live stream is no longer in its memory window) and the recorded files of replays.
//!
//! Each file is opened once: a segment is mapped (`zerocopy::MappedFile`, so the web server sends it
//! with `sendfile` from the page cache, as nginx does), a playlist is read onto the heap. An entry is
//! trusted for [`REVALIDATE_AFTER`]; after that the next request stats the file and reloads it if its
//! inode, length or modification time changed, or forgets it if it is gone. So a rewritten playlist
//! (the `ENDLIST` written when a stream ends) is served at most one second late, which is what the
//! playlists' own `Cache-Control: max-age=1` already allows any cache in between.
//!
//! The table is bounded ([`MAX_ENTRIES`] files, each holding one descriptor and one mapping; no heap
//! beyond the playlists' bytes): when full, the least recently used entry goes. All the caches of the
//! process together hold at most [`MAX_OPEN`] files (every channel has two: its HLS and its replays),
//! so they cannot take the descriptors chat sockets need; past that a file is served without being
//! kept, read per request as before. Loading and the
//! revalidating `stat` run on the blocking pool, never on the async workers. The owner clears the table
//! when its folder is emptied (a new broadcast of the channel).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Bytes;
use parking_lot::RwLock;

use super::files::FileBody;
use super::zerocopy::MappedFile;

/// How long a loaded file is served without looking at the disk again.
pub const REVALIDATE_AFTER: Duration = Duration::from_secs(1);
/// Most files one cache holds open.
pub const MAX_ENTRIES: usize = 512;
/// Most files all caches together hold open (a descriptor each).
pub const MAX_OPEN: usize = 1024;

/// Files held by every cache of the process.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    modified: SystemTime,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp { ino: meta.ino(), len: meta.len(), modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH) }
    }
}

struct Entry {
    body: Arc<FileBody>,
    stamp: Stamp,
    /// Milliseconds since the cache's epoch at which the file was last found unchanged.
    checked: AtomicU64,
    /// Milliseconds since the cache's epoch of the last request (for eviction).
    used: AtomicU64,
}

/// A bounded cache of files under one folder, keyed by their path relative to it (see the module doc).
pub struct DiskCache {
    root: PathBuf,
    epoch: Instant,
    entries: RwLock<HashMap<String, Arc<Entry>>>,
}

impl Drop for DiskCache {
    fn drop(&mut self) {
        OPEN.fetch_sub(self.entries.get_mut().len(), Ordering::Relaxed);
    }
}

impl DiskCache {
    pub fn new(root: PathBuf) -> DiskCache {
        DiskCache { root, epoch: Instant::now(), entries: RwLock::default() }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The file at `rel` (a path already checked to stay under the root), served as `content_type`
    /// with `cache_control`; `None` if there is no such file. Playlists (`heap`) are read onto the heap,
    /// anything else is mapped.
    pub async fn get(
        &self,
        rel: &str,
        content_type: &'static str,
        cache_control: &'static str,
        heap: bool,
    ) -> Option<Arc<FileBody>> {
        let now = self.now_ms();
        // An entry made for other headers (a replay made private) is loaded afresh.
        let known = self
            .entries
            .read()
            .get(rel)
            .cloned()
            .filter(|e| e.body.cache_control == cache_control && e.body.content_type == content_type);
        if let Some(e) = &known {
            e.used.store(now, Ordering::Relaxed);
            if now.saturating_sub(e.checked.load(Ordering::Relaxed)) < REVALIDATE_AFTER.as_millis() as u64 {
                return Some(e.body.clone());
            }
        }
        let path = self.root.join(rel);
        let stamp = known.as_ref().map(|e| e.stamp);
        let loaded = tokio::task::spawn_blocking(move || load(&path, stamp, content_type, cache_control, heap))
            .await
            .ok()
            .flatten();
        match (loaded, known) {
            (None, _) => {
                if self.entries.write().remove(rel).is_some() {
                    OPEN.fetch_sub(1, Ordering::Relaxed);
                }
                None
            }
            (Some(Loaded::Unchanged), Some(e)) => {
                e.checked.store(now, Ordering::Relaxed);
                Some(e.body.clone())
            }
            // Unchanged but forgotten meanwhile (cleared): treat as gone for this request's sake.
            (Some(Loaded::Unchanged), None) => None,
            (Some(Loaded::New(body, stamp)), _) => {
                let body: Arc<FileBody> = Arc::from(body);
                let entry = Arc::new(Entry {
                    body: body.clone(),
                    stamp,
                    checked: AtomicU64::new(now),
                    used: AtomicU64::new(now),
                });
                let mut entries = self.entries.write();
                if entries.len() >= MAX_ENTRIES && !entries.contains_key(rel) {
                    let oldest =
                        entries.iter().min_by_key(|(_, e)| e.used.load(Ordering::Relaxed)).map(|(k, _)| k.clone());
                    if let Some(k) = oldest {
                        entries.remove(&k);
                        OPEN.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                // A new file takes a place among all caches' (a replaced one keeps its own); when every
                // place is taken, the file is served without being kept.
                let place = entries.contains_key(rel) || OPEN.fetch_add(1, Ordering::Relaxed) < MAX_OPEN;
                if place {
                    entries.insert(rel.to_string(), entry);
                } else {
                    OPEN.fetch_sub(1, Ordering::Relaxed);
                }
                Some(body)
            }
        }
    }

    /// Forget every file (the folder was emptied or is about to be rewritten).
    pub fn clear(&self) {
        let mut entries = self.entries.write();
        OPEN.fetch_sub(entries.len(), Ordering::Relaxed);
        entries.clear();
    }

    /// Files held (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.entries.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

enum Loaded {
    Unchanged,
    New(Box<FileBody>, Stamp),
}

/// Blocking: stat `path`; unchanged from `known` → `Unchanged`, else load it.
fn load(
    path: &Path,
    known: Option<Stamp>,
    content_type: &'static str,
    cache_control: &'static str,
    heap: bool,
) -> Option<Loaded> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let stamp = Stamp::of(&meta);
    if known == Some(stamp) {
        return Some(Loaded::Unchanged);
    }
    let bytes = if heap { Bytes::from(std::fs::read(path).ok()?) } else { MappedFile::load(path).ok()? };
    // Validators from the length read and the time stat saw (as nginx: length and mtime).
    let stamp = Stamp { len: bytes.len() as u64, ..stamp };
    Some(Loaded::New(Box::new(FileBody::from_disk(bytes, stamp.modified, content_type, cache_control)), stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests of this file share the process-wide count of open files ([`OPEN`]): one of them fills it on
    /// purpose, which would leave no place for another's files if they ran at once (cargo runs tests in
    /// parallel; the first test failed so on a busy box). Each takes this lock.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[tokio::test]
    async fn files_are_loaded_once_then_revalidated_and_forgotten_when_gone() {
        let _serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path().to_path_buf());
        std::fs::write(dir.path().join("a.m3u8"), b"#EXTM3U\n").unwrap();
        std::fs::write(dir.path().join("s.ts"), vec![7u8; 4096]).unwrap();
        let p = cache.get("a.m3u8", "application/x-mpegURL", "x", true).await.unwrap();
        assert_eq!(&p.bytes[..], b"#EXTM3U\n");
        let s = cache.get("s.ts", "video/mp2t", "y", false).await.unwrap();
        assert_eq!(s.bytes.len(), 4096);
        assert!(cache.get("missing.ts", "video/mp2t", "y", false).await.is_none());
        assert_eq!(cache.len(), 2);

        // Within the second, the same body (no disk access): the Arc is the one held.
        let again = cache.get("s.ts", "video/mp2t", "y", false).await.unwrap();
        assert!(Arc::ptr_eq(&s, &again));

        // Rewritten: after the revalidation period the new content is served with a new validator.
        std::fs::write(dir.path().join("a.m3u8"), b"#EXTM3U\n#EXT-X-ENDLIST\n").unwrap();
        tokio::time::sleep(REVALIDATE_AFTER + Duration::from_millis(50)).await;
        let p2 = cache.get("a.m3u8", "application/x-mpegURL", "x", true).await.unwrap();
        assert_eq!(&p2.bytes[..], b"#EXTM3U\n#EXT-X-ENDLIST\n");
        assert_ne!(p.etag, p2.etag);
        // Unchanged: the same body after revalidation.
        let s2 = cache.get("s.ts", "video/mp2t", "y", false).await.unwrap();
        assert!(Arc::ptr_eq(&s, &s2));

        // Deleted: gone after the revalidation period.
        std::fs::remove_file(dir.path().join("s.ts")).unwrap();
        tokio::time::sleep(REVALIDATE_AFTER + Duration::from_millis(50)).await;
        assert!(cache.get("s.ts", "video/mp2t", "y", false).await.is_none());
        assert_eq!(cache.len(), 1);
        // Asked with other headers (a replay made private): loaded afresh, with those headers.
        let private = cache.get("a.m3u8", "application/x-mpegURL", "private", true).await.unwrap();
        assert_eq!(private.cache_control, "private");
        cache.clear();
        assert!(cache.is_empty());
    }

    #[tokio::test]
    async fn the_table_is_bounded_and_keeps_what_is_used() {
        let _serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path().to_path_buf());
        for i in 0..MAX_ENTRIES + 10 {
            std::fs::write(dir.path().join(format!("{i}.ts")), [1u8, 2, 3]).unwrap();
        }
        for i in 0..MAX_ENTRIES + 10 {
            // The first file stays in use throughout.
            assert!(cache.get("0.ts", "video/mp2t", "y", false).await.is_some());
            assert!(cache.get(&format!("{i}.ts"), "video/mp2t", "y", false).await.is_some());
            if i % 64 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert!(cache.entries.read().contains_key("0.ts"), "the file in use is kept");
    }

    /// Every cache together holds at most `MAX_OPEN` files (a descriptor each); past that a file is served
    /// without being kept, and a cache that lets go makes room for the others. (Other tests of this process
    /// hold files of their own meanwhile, at most one table's worth: the figures allow for them.)
    #[tokio::test]
    async fn all_caches_together_hold_at_most_max_open_files() {
        let _serial = SERIAL.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let per = MAX_ENTRIES;
        for i in 0..per {
            std::fs::write(dir.path().join(format!("{i}.ts")), [1u8, 2, 3]).unwrap();
        }
        let caches: Vec<DiskCache> = (0..3).map(|_| DiskCache::new(dir.path().to_path_buf())).collect();
        for cache in &caches {
            for i in 0..per {
                assert!(cache.get(&format!("{i}.ts"), "video/mp2t", "y", false).await.is_some(), "always served");
                assert!(OPEN.load(Ordering::Relaxed) <= MAX_OPEN);
            }
        }
        let held: usize = caches.iter().map(DiskCache::len).sum();
        assert!(held <= MAX_OPEN, "{held} files held by three caches of {per}");
        assert!(held + MAX_ENTRIES + 16 >= MAX_OPEN, "the caches fill the places left: {held}");
        let last = &caches[2];
        let before = last.len();
        assert!(before < per, "the third cache could not keep every file: {before}");
        caches[0].clear();
        for i in 0..per {
            assert!(last.get(&format!("{i}.ts"), "video/mp2t", "y", false).await.is_some());
        }
        assert!(last.len() > before, "room made by the first cache is taken: {} after {before}", last.len());
        drop(caches);
    }
}
