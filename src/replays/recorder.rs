//! The recorder: a reader of every broadcast on the media plane that keeps each of its segments; the
//! replay is named by the broadcast's stream id (its running profile).
//!
//! Each `SegmentWritten` (and each fMP4 `InitWritten`) is *held* (`media::Retention::hold`: retention
//! does not delete it meanwhile), hard-linked into `<data-dir>/replays/<streamId>/<variant>/` (copied
//! where the filesystem cannot link), released, and only then written as a row of `replay_segments`,
//! so a row never names a missing file and a `kill -9` loses at most the segment being linked. The
//! live master playlist's variant lines are kept with the replay (`PlaylistWritten` of the master).
//! `StreamEnded` finishes the replay (then the budget runs and REPLAY_READY is published). A lagged
//! feed resyncs from the live window (segments newer than the last one recorded per variant).
//!
//! Disk full: linking needs no space, a copy may fail; then recording pauses (a health notice) and the
//! live stream goes on; it resumes with the next segment that fits.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use tracing::{info, warn};

use super::db::{self, SegmentRow};
use super::Replays;
use crate::health::HealthInput;
use crate::media::{Attached, Broadcast, BroadcastReader, Delivery, MediaEvent, SegmentWritten, Subscription};
use crate::tasks::Stage;

#[derive(Default)]
struct Variant {
    seq: i64,
    offset: f64,
    init: Option<String>,
    last_msn: Option<u64>,
}

struct Current {
    id: String,
    variants: HashMap<usize, Variant>,
}

/// Record every broadcast the media plane hands the reader, each in a task of its own.
pub async fn run(r: Arc<Replays>, mut reader: BroadcastReader) {
    while let Some(Attached { broadcast, feed }) = reader.next().await {
        r.tasks.spawn(Stage::Outputs, "replay recorder", record_broadcast(r.clone(), broadcast, feed));
    }
}

/// Follow one broadcast's feed until it ends (the transcoder ends it before the outputs stop, so what is
/// queued at shutdown, its last segments and its end, is still recorded).
async fn record_broadcast(r: Arc<Replays>, b: Arc<Broadcast>, mut sub: Subscription) {
    let mut current: Option<Current> = None;
    let mut paused = false;
    while let Some(d) = sub.recv().await {
        match d {
            Delivery::Event(ev) => match &*ev {
                MediaEvent::SegmentWritten(seg) => {
                    record(&r, &b, &mut current, seg, &mut paused).await;
                }
                MediaEvent::InitWritten { variant, file } => {
                    if let Some(cur) = ensure_current(&r, &b, &mut current).await {
                        let id = cur.id.clone();
                        if link_file(&r, &b, &id, *variant, file).await.is_ok() {
                            cur.variants.entry(*variant).or_default().init = Some(file.clone());
                        }
                    }
                }
                MediaEvent::PlaylistWritten { variant: None } => {
                    if let Some(cur) = &current {
                        let text = tokio::fs::read_to_string(b.dir.join("stream.m3u8")).await.unwrap_or_default();
                        let lines: String = text
                            .lines()
                            .filter(|l| l.starts_with("#EXT-X-STREAM-INF:"))
                            .map(|l| format!("{l}\n"))
                            .collect();
                        if !lines.is_empty() {
                            let (store, id) = (r.store.clone(), cur.id.clone());
                            if let Err(e) = store.call(move |c| db::set_master(c, &id, &lines)).await {
                                warn!("replays: cannot save the master playlist: {e}");
                            }
                        }
                    }
                }
                MediaEvent::StreamEnded => {
                    if let Some(cur) = current.take() {
                        r.finish(&cur.id).await;
                    }
                }
                _ => {}
            },
            Delivery::Lagged => {
                // Resync: record what the window holds past the last segment recorded per variant.
                for v in b.retention.variants() {
                    let last = current.as_ref().and_then(|c| c.variants.get(&v)).and_then(|x| x.last_msn);
                    for seg in b.retention.window(v) {
                        if last.is_none_or(|l| seg.msn > l) {
                            record(&r, &b, &mut current, &seg, &mut paused).await;
                        }
                    }
                }
            }
        }
    }
    if let Some(cur) = current.take() {
        r.finish(&cur.id).await;
    }
}

/// The replay being recorded for broadcast `b` (named by its stream id); `None` while recording is off
/// or the broadcast has no id yet.
async fn ensure_current<'a>(
    r: &Arc<Replays>,
    b: &Broadcast,
    current: &'a mut Option<Current>,
) -> Option<&'a mut Current> {
    let enabled = r.settings.get().replay.replay_enabled;
    let live_id = b.profile().map(|p| p.stream_id.clone()).filter(|id| !id.is_empty());
    let same = current.as_ref().is_some_and(|c| Some(&c.id) == live_id.as_ref());
    if !same || !enabled {
        if let Some(old) = current.take() {
            r.finish(&old.id).await;
        }
    }
    if !enabled {
        return None;
    }
    let id = live_id?;
    if current.is_none() {
        let title = r.settings.get().instance.stream_title.clone();
        let (store, rid) = (r.store.clone(), id.clone());
        if let Err(e) = store.call(move |c| db::insert_replay(c, &rid, &title, Utc::now())).await {
            warn!("replays: cannot start recording {id}: {e}");
            return None;
        }
        info!(replay = %id, "recording the broadcast");
        let (store, rid) = (r.store.clone(), id.clone());
        let resumed = store.call(move |c| db::resume_state(c, &rid)).await.unwrap_or_default();
        let variants = resumed
            .into_iter()
            .filter_map(|(v, seq, offset, init)| {
                Some((usize::try_from(v).ok()?, Variant { seq, offset, init, last_msn: None }))
            })
            .collect();
        *current = Some(Current { id, variants });
    }
    current.as_mut()
}

async fn record(
    r: &Arc<Replays>,
    b: &Broadcast,
    current: &mut Option<Current>,
    seg: &SegmentWritten,
    paused: &mut bool,
) {
    let Some(cur) = ensure_current(r, b, current).await else { return };
    let id = cur.id.clone();
    let v = cur.variants.entry(seg.variant).or_default();
    if v.last_msn.is_some_and(|l| seg.msn <= l) {
        return;
    }
    match link_file(r, b, &id, seg.variant, &seg.file).await {
        Ok(()) => {
            if *paused {
                *paused = false;
                r.health.submit(HealthInput::Hardware { metric: "replays", alert: None });
            }
        }
        Err(e) => {
            if !*paused {
                *paused = true;
                warn!(replay = %id, "replays: cannot keep segment {}: {e}; recording pauses", seg.file);
                let alert = format!("recording the broadcast is paused: {e} (the live stream goes on)");
                r.health.submit(HealthInput::Hardware { metric: "replays", alert: Some(alert) });
            }
            return;
        }
    }
    let row = SegmentRow {
        variant: seg.variant as i64,
        seq: v.seq,
        file: seg.file.clone(),
        init: v.init.clone(),
        duration: seg.duration,
        media_offset: v.offset,
        bytes: seg.bytes as i64,
        pdt_ms: seg.program_date_time,
    };
    v.seq += 1;
    v.offset += seg.duration;
    v.last_msn = Some(seg.msn);
    let store = r.store.clone();
    if let Err(e) = store.call(move |c| db::insert_segment(c, &id, &row)).await {
        warn!("replays: cannot record a segment: {e}");
    }
}

/// Hold `<hls>/<variant>/<file>`, link it into the replay's folder, release it.
async fn link_file(r: &Arc<Replays>, b: &Broadcast, id: &str, variant: usize, file: &str) -> std::io::Result<()> {
    let hold = b.retention.hold(variant, file).ok_or_else(|| std::io::Error::other("the file is already gone"))?;
    let src = hold.path().to_path_buf();
    let dst = r.variant_dir(id, variant).join(file);
    let res = tokio::task::spawn_blocking(move || keep(&src, &dst)).await.map_err(std::io::Error::other)?;
    drop(hold);
    res
}

/// Hard-link `src` to `dst` (a copy where the filesystem cannot link).
pub fn keep(src: &Path, dst: &Path) -> std::io::Result<()> {
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::hard_link(src, dst) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => {
            let tmp: PathBuf = dst.with_extension("part");
            std::fs::copy(src, &tmp)?;
            std::fs::rename(&tmp, dst)
        }
    }
}
