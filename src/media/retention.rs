//! Retention: the one owner of when a media file on disk may go.
//!
//! Each variant has a live window: its newest `keep` segments (the playlist's list size plus a grace,
//! so a player holding the previous playlist still finds what it names); LL-HLS parts are kept for the
//! newest `PART_SEGMENTS` segments, which are the ones LL-HLS playlists list parts for. A segment that leaves the
//! window is *retired*; its file (and its LL-HLS parts) is deleted when it is retired *and* no consumer
//! holds it. A consumer that still needs a file (an upload in flight, a recording) takes a `Hold` and
//! drops it when done; the last release of a retired segment deletes it. Nothing else deletes segments
//! (libav's `delete_segments` is off, the CMAF packager deletes nothing), except `prune_oldest` when the
//! disk is full, where the live stream wins over holders.
//!
//! A new stream starts with empty windows (its folder was emptied); the finished stream's last window
//! stays on disk, served as a finished playlist, until then.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::feed::{HlsPart, SegmentWritten};

/// Segments kept past the playlist's list size (players and caches holding the previous playlist).
pub const GRACE_SEGMENTS: usize = 2;
/// LL-HLS parts are listed for the newest segments only; parts of older segments go (their segment stays).
pub const PART_SEGMENTS: usize = 4;

/// A file a consumer still needs; dropping it releases it (the last release of a retired segment
/// deletes the file).
pub struct Hold {
    retention: Arc<Retention>,
    path: PathBuf,
}

impl Hold {
    /// The held file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.retention.release(&self.path);
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Hold").field(&self.path).finish()
    }
}

#[derive(Default)]
struct Window {
    segments: VecDeque<SegmentWritten>,
}

#[derive(Default)]
struct Inner {
    keep: usize,
    windows: HashMap<usize, Window>,
    /// LL-HLS part files by (variant, msn): deleted with their segment.
    parts: HashMap<(usize, u64), Vec<String>>,
    /// Holds per file.
    holds: HashMap<PathBuf, usize>,
    /// Retired files still held: deleted on their last release.
    retired: HashSet<PathBuf>,
    deleted: u64,
}

/// The retention owner (see the module doc); share as `Arc<Retention>`.
pub struct Retention {
    hls_dir: PathBuf,
    inner: Mutex<Inner>,
}

impl Retention {
    pub fn new(hls_dir: PathBuf) -> Arc<Retention> {
        Arc::new(Retention { hls_dir, inner: Mutex::new(Inner { keep: 4 + GRACE_SEGMENTS, ..Inner::default() }) })
    }

    fn path_of(&self, variant: usize, file: &str) -> PathBuf {
        self.hls_dir.join(variant.to_string()).join(file)
    }

    /// A new stream: empty windows, `list_size` segments listed per playlist (plus the grace). Files of
    /// the previous stream are the supervisor's to clear (it empties the folder); holds on them stay
    /// valid and delete nothing new.
    /// Returns the previous stream's windows, now retired.
    pub fn start_stream(&self, list_size: usize) -> Vec<SegmentWritten> {
        let mut inner = self.inner.lock();
        inner.keep = list_size.max(1) + GRACE_SEGMENTS;
        inner.parts.clear();
        let mut old: Vec<SegmentWritten> = inner.windows.drain().flat_map(|(_, w)| w.segments).collect();
        old.sort_by_key(|s| (s.variant, s.msn));
        old
    }

    /// Record an LL-HLS part (deleted with its segment).
    pub fn add_part(&self, p: &HlsPart) {
        self.inner.lock().parts.entry((p.variant, p.msn)).or_default().push(p.name.clone());
    }

    /// Record a new segment; returns the segments it pushed out of the window (retired). Their files
    /// are deleted now unless held.
    pub fn add_segment(&self, seg: &SegmentWritten) -> Vec<SegmentWritten> {
        let mut to_delete = Vec::new();
        let retired = {
            let mut inner = self.inner.lock();
            let keep = inner.keep;
            let window = inner.windows.entry(seg.variant).or_default();
            window.segments.push_back(seg.clone());
            let mut retired = Vec::new();
            while window.segments.len() > keep {
                if let Some(old) = window.segments.pop_front() {
                    retired.push(old);
                }
            }
            // Parts of segments no LL-HLS playlist lists any more.
            let stale_parts = window.segments.iter().rev().nth(PART_SEGMENTS).map(|s| (s.variant, s.msn));
            if let Some(parts) = stale_parts.and_then(|key| inner.parts.remove(&key)) {
                for p in parts {
                    let f = self.path_of(seg.variant, &p);
                    if inner.holds.contains_key(&f) {
                        inner.retired.insert(f);
                    } else {
                        to_delete.push(f);
                    }
                }
            }
            for old in &retired {
                let mut files = vec![self.path_of(old.variant, &old.file)];
                if let Some(parts) = inner.parts.remove(&(old.variant, old.msn)) {
                    files.extend(parts.iter().map(|p| self.path_of(old.variant, p)));
                }
                for f in files {
                    if inner.holds.contains_key(&f) {
                        inner.retired.insert(f);
                    } else {
                        to_delete.push(f);
                    }
                }
            }
            inner.deleted += to_delete.len() as u64;
            retired
        };
        for f in to_delete {
            remove(&f);
        }
        retired
    }

    /// Hold the file `file` of `variant` (a segment of the window, or any file still on disk) until the
    /// returned `Hold` is dropped. `None` when the file is already gone.
    pub fn hold(self: &Arc<Self>, variant: usize, file: &str) -> Option<Hold> {
        let path = self.path_of(variant, file);
        let mut inner = self.inner.lock();
        // Checked under the lock: a retired, unheld file is deleted under it too.
        if !path.exists() {
            return None;
        }
        *inner.holds.entry(path.clone()).or_insert(0) += 1;
        Some(Hold { retention: self.clone(), path })
    }

    fn release(&self, path: &Path) {
        let delete = {
            let mut inner = self.inner.lock();
            let last = match inner.holds.get_mut(path) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    inner.holds.remove(path);
                    true
                }
                None => false,
            };
            let delete = last && inner.retired.remove(path);
            if delete {
                inner.deleted += 1;
            }
            delete
        };
        if delete {
            remove(path);
        }
    }

    /// The live window of `variant`, oldest first (what a lagged consumer resyncs from).
    pub fn window(&self, variant: usize) -> Vec<SegmentWritten> {
        self.inner.lock().windows.get(&variant).map(|w| w.segments.iter().cloned().collect()).unwrap_or_default()
    }

    /// Variants with a window.
    pub fn variants(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.inner.lock().windows.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Files held now.
    pub fn held(&self) -> usize {
        self.inner.lock().holds.len()
    }

    /// Files retired but still held.
    pub fn retired_and_held(&self) -> usize {
        self.inner.lock().retired.len()
    }

    /// Files deleted since start.
    pub fn deleted(&self) -> u64 {
        self.inner.lock().deleted
    }

    /// The disk is full: delete the older half of every window now, held or not (the live stream wins
    /// over uploads and recordings). Returns how many files were deleted.
    pub fn prune_oldest(&self) -> usize {
        let files: Vec<PathBuf> = {
            let mut inner = self.inner.lock();
            let mut files = Vec::new();
            let variants: Vec<usize> = inner.windows.keys().copied().collect();
            for v in variants {
                let Some(w) = inner.windows.get_mut(&v) else { continue };
                let n = w.segments.len().div_ceil(2);
                let old: Vec<SegmentWritten> = w.segments.drain(..n).collect();
                for s in old {
                    files.push(self.path_of(v, &s.file));
                    if let Some(parts) = inner.parts.remove(&(v, s.msn)) {
                        files.extend(parts.iter().map(|p| self.path_of(v, p)));
                    }
                }
            }
            let retired: Vec<PathBuf> = inner.retired.drain().collect();
            files.extend(retired);
            files
        };
        let deleted = files.iter().filter(|f| std::fs::remove_file(f).is_ok()).count();
        self.inner.lock().deleted += deleted as u64;
        deleted
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("retention: cannot delete {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(variant: usize, msn: u64) -> SegmentWritten {
        SegmentWritten {
            variant,
            msn,
            file: format!("s-{msn}.ts"),
            duration: 1.0,
            program_date_time: None,
            bytes: 3,
            independent: true,
        }
    }

    fn write(dir: &Path, s: &SegmentWritten) {
        let d = dir.join(s.variant.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(&s.file), b"abc").unwrap();
    }

    fn files(dir: &Path, variant: usize) -> usize {
        std::fs::read_dir(dir.join(variant.to_string())).map(|d| d.count()).unwrap_or(0)
    }

    #[test]
    fn the_window_keeps_list_size_plus_grace_and_deletes_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Retention::new(tmp.path().to_path_buf());
        r.start_stream(3);
        for msn in 0..20 {
            let s = seg(0, msn);
            write(tmp.path(), &s);
            let retired = r.add_segment(&s);
            assert_eq!(retired.len(), usize::from(msn >= (3 + GRACE_SEGMENTS) as u64));
        }
        assert_eq!(files(tmp.path(), 0), 3 + GRACE_SEGMENTS);
        let window: Vec<u64> = r.window(0).iter().map(|s| s.msn).collect();
        assert_eq!(window, (20 - (3 + GRACE_SEGMENTS) as u64..20).collect::<Vec<_>>());
        assert_eq!(r.deleted(), 20 - (3 + GRACE_SEGMENTS) as u64);
    }

    #[test]
    fn a_held_segment_outlives_the_window_until_released() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Retention::new(tmp.path().to_path_buf());
        r.start_stream(1);
        let first = seg(0, 0);
        write(tmp.path(), &first);
        r.add_segment(&first);
        let hold = r.hold(0, &first.file).expect("on disk");
        let second_hold = r.hold(0, &first.file).expect("held twice");
        for msn in 1..10 {
            let s = seg(0, msn);
            write(tmp.path(), &s);
            r.add_segment(&s);
        }
        // Retired long ago, still there: held.
        assert!(hold.path().exists());
        assert_eq!(r.retired_and_held(), 1);
        drop(hold);
        assert!(second_hold.path().exists(), "one holder left");
        let path = second_hold.path().to_path_buf();
        drop(second_hold);
        assert!(!path.exists(), "the last release deletes a retired segment");
        assert_eq!(r.held(), 0);
        assert_eq!(files(tmp.path(), 0), 1 + GRACE_SEGMENTS);
        // A file that is gone cannot be held.
        assert!(r.hold(0, &first.file).is_none());
    }

    #[test]
    fn a_new_stream_retires_the_last_windows() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Retention::new(tmp.path().to_path_buf());
        r.start_stream(2);
        for v in 0..2 {
            for msn in 0..3 {
                r.add_segment(&seg(v, msn));
            }
        }
        let old: Vec<(usize, u64)> = r.start_stream(2).iter().map(|s| (s.variant, s.msn)).collect();
        assert_eq!(old, vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
        assert!(r.window(0).is_empty() && r.variants().is_empty());
    }

    #[test]
    fn releasing_a_segment_still_in_the_window_deletes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Retention::new(tmp.path().to_path_buf());
        r.start_stream(4);
        let s = seg(1, 7);
        write(tmp.path(), &s);
        r.add_segment(&s);
        drop(r.hold(1, &s.file));
        assert!(tmp.path().join("1").join(&s.file).exists());
    }

    #[test]
    fn parts_go_with_their_segment_and_a_full_disk_prunes_half() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Retention::new(tmp.path().to_path_buf());
        r.start_stream(1);
        let d = tmp.path().join("0");
        std::fs::create_dir_all(&d).unwrap();
        for msn in 0..2 {
            for n in 0..3 {
                let name = format!("part-{msn}-{n}.m4s");
                std::fs::write(d.join(&name), b"p").unwrap();
                r.add_part(&HlsPart { variant: 0, msn, part: n, name, ..HlsPart::default() });
            }
            let s = seg(0, msn);
            write(tmp.path(), &s);
            r.add_segment(&s);
        }
        assert_eq!(files(tmp.path(), 0), 8, "two segments of three parts each");
        let _held = r.hold(0, "s-1.ts");
        assert_eq!(r.prune_oldest(), 4, "the older segment and its three parts");
        assert_eq!(files(tmp.path(), 0), 4);
    }
}
