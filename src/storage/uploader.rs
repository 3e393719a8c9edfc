//! The uploader: keeps the bucket in step with what each channel's transcoder writes while storage is
//! enabled.
//!
//! Two parts. [`Storage`] is the server's, one per castd: the server admin's `s3` settings and the
//! `videoServingEndpoint`, the bucket they name ([`Target`], published on a `watch` and rebuilt, with a
//! new generation, when they change), the HTTP client, the shared upload pool of `UPLOAD_CONCURRENCY`
//! (every channel's uploads together), the figures (the server's telemetry: the root's `castd_storage_*`
//! series count every channel's objects, as they count one bucket and one pool) and the test route. [`ChannelStorage`] is a channel's, one per
//! channel stack (the default channel's at start, each channel's when it opens): its channel's key
//! folder, its media reader, the playlists it serves, its queues and upload tasks, its health notice
//! (the channel's own health hub), its stream state; its tasks are the channel's
//! and end when the channel closes, and a deleted channel's live objects leave the bucket
//! ([`ChannelStorage::close`]).
//!
//! Keys: the default channel's live files are under `<pathPrefix>hls/` and its replays under
//! `<pathPrefix>replays/` (as before channels, so nothing moves for an existing install); channel
//! `{slug}`'s under `<pathPrefix>c/{slug}/hls/` and `<pathPrefix>c/{slug}/replays/`
//! ([`channel_folder`], [`Target::channel_key`]). No key of one folder is a prefix of another's (the
//! default's folders are `hls/` and `replays/`, a channel's are under `c/`, and a slug has no `/`), so
//! a channel's leftover clean-up and deletes reach only its own objects.
//!
//! Each channel's uploader follows its channel's broadcasts on the media plane's feed: each
//! `SegmentWritten` is *held* (`media::Retention::hold`, so the file stays on disk past the live window
//! until it is uploaded) and queued for its variant; the `PlaylistWritten` after it wakes that variant's
//! task (one per variant, one for the master playlist), which uploads the queued segments (in the
//! shared pool, each request with a timeout, retried with back-off), releasing each hold once its
//! segment is in the bucket, then the playlist itself once every segment it names is there (so a player
//! never sees a missing segment), then batch-deletes the segments retention retired (`SegmentRetired`:
//! out of the window and its grace). Segments whose upload failed stay queued (and held) for the next
//! revision, at most `MAX_QUEUED` per variant: beyond that the oldest are given up (released, logged),
//! so an outage cannot fill the disk. Each task holds at most one waiting revision (a `watch`: a newer
//! one replaces it), so a slow store makes the uploader skip playlist revisions, never queue them. A
//! lagged feed resyncs from the live window. Nothing here reads a playlist to learn which segments are
//! new; the playlist is read to be uploaded and rewritten.
//!
//! The bucket copy of each playlist keeps relative URIs (it plays from the bucket or a CDN on its
//! own); the copy castd serves at `<channel>/hls/<n>/stream.m3u8` names the segments by absolute URL
//! (the `videoServingEndpoint` when set, else the bucket's URL), and is served only while it is no more
//! than `2 × target duration` behind the local playlist and was made for the bucket in force; otherwise
//! (store slow or failing, settings changed) viewers get the local playlist and segments.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::client::{ClientError, PutMeta, S3Client};
use super::playlist;
use crate::config::Settings;
use crate::events::{Bus, Event};
use crate::health::{HealthHub, HealthInput};
use crate::hls::PlaylistOverride;
use crate::http::files::FileBody;
use crate::http::zerocopy::MappedFile;
use crate::media::{
    Attached, Broadcast, BroadcastReader, ChannelId, Delivery, Hold, MediaEvent, MediaPlane, SegmentWritten,
};
use crate::store::settings::SettingsStore;
use crate::stream::StreamWatch;
use crate::tasks::{Stage, Tasks};
use crate::telemetry::Telemetry;

/// The folder under a channel's folder that belongs to its replays (never cleaned up as a leftover).
pub const REPLAYS_FOLDER: &str = "replays/";
/// The folder under the prefix that holds every channel but the default's (`c/{slug}/`).
pub const CHANNELS_FOLDER: &str = "c/";
/// Uploads in flight at once, every channel's and variant's together.
pub const UPLOAD_CONCURRENCY: usize = 8;
/// Tries per object (the first and the retries).
const ATTEMPTS: u32 = 4;
/// The first retry's delay; doubled for each further one.
const BACKOFF: Duration = Duration::from_millis(250);
/// Segments queued (and held on disk) per variant while the store is behind; older ones are given up.
pub const MAX_QUEUED: usize = 64;
/// How long a deleted channel's close waits for its last uploads before its live objects are removed.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

const PLAYLIST_TYPE: &str = "application/x-mpegURL";
const SEGMENT_CACHE: &str = "public, max-age=31536000, immutable";

/// Channel `id`'s folder under the prefix: `""` for the default channel (its keys are where they were
/// before channels), `c/{slug}/` for any other.
pub fn channel_folder(id: &ChannelId) -> String {
    // A channel's objects are where its URLs are: `/c/{slug}` is `c/{slug}/` in the bucket.
    match id.base_path().strip_prefix('/') {
        Some(under) => format!("{under}/"),
        None => String::new(),
    }
}

/// What the server-wide part of storage is given.
pub struct StorageDeps {
    /// The server's settings (`s3`, `videoServingEndpoint`); they announce their changes on `bus`.
    pub settings: SettingsStore,
    pub bus: Bus,
    /// The server's figures (the root's server-wide `castd_storage_*` series): every channel's uploads,
    /// failures, deletes, latencies and queue count there, as the bucket and the pool are one.
    pub telemetry: Arc<Telemetry>,
    /// The daemon's tasks: the settings follower runs there.
    pub tasks: Tasks,
    /// How long each channel's uploader may take at shutdown (or when its channel closes) to upload its
    /// stream's last segments and final playlists (`ChannelStorage::drain`).
    pub drain_limit: Duration,
}

/// What a channel's uploader is given (its channel's pieces).
pub struct ChannelDeps {
    pub channel: ChannelId,
    /// The channel's settings (its visibility: see the `storage` module doc on private channels).
    pub settings: SettingsStore,
    pub stream: StreamWatch,
    pub health: Arc<HealthHub>,
    /// The channel's HLS folder (`<data-dir>/hls` for the default channel).
    pub hls_dir: PathBuf,
    /// The media plane: the feed of what was written, and retention (holds).
    pub media: Arc<MediaPlane>,
    /// The channel's tasks: the feed follower, the per-variant upload tasks, the clean-up and the
    /// drain run in its `Outputs` stage.
    pub tasks: Tasks,
}

/// Where uploads go, built from the settings; replaced (with a new generation) when they change.
pub struct Target {
    client: S3Client,
    /// The normalised `pathPrefix` (`""` or `a/b/`).
    prefix: String,
    /// The `videoServingEndpoint`, without a trailing `/` (empty: the bucket's own URL).
    serving: String,
    generation: u64,
}

impl Target {
    /// The client (other features' objects, such as replays, go through it too).
    pub fn client(&self) -> &S3Client {
        &self.client
    }

    /// The key of `rel` in channel `id`'s folder (see the module doc): `<prefix>rel` for the default
    /// channel, `<prefix>c/{slug}/rel` for another (its live files are under `hls/`, its replays under
    /// `replays/`).
    pub fn channel_key(&self, id: &ChannelId, rel: &str) -> String {
        format!("{}{}{rel}", self.prefix, channel_folder(id))
    }

    /// The public URL of `key`: on the `videoServingEndpoint` when set, else the bucket's.
    pub fn public_url(&self, key: &str) -> String {
        if self.serving.is_empty() {
            self.client.object_url(key)
        } else {
            format!("{}/{key}", self.serving)
        }
    }
}

/// The bucket in force: the target (none while storage is off) and why there is none when the
/// settings are unusable.
#[derive(Clone, Default)]
struct Bucket {
    target: Option<Arc<Target>>,
    error: Option<String>,
}

/// The server-wide part of object storage (see the module doc); share as `Arc<Storage>`.
pub struct Storage {
    settings: SettingsStore,
    bus: Bus,
    http: reqwest::Client,
    /// The bucket in force; every channel's uploader follows it (one writer: `reload`).
    bucket: watch::Sender<Bucket>,
    generation: AtomicU64,
    /// The upload pool every channel shares.
    pool: Arc<Semaphore>,
    /// Segments waiting for upload, every channel's (the queue depth gauge).
    queued: AtomicU64,
    telemetry: Arc<Telemetry>,
    tasks: Tasks,
    drain_limit: Duration,
}

impl crate::http::setters::SettingsHost for Storage {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

impl Storage {
    pub fn new(deps: StorageDeps) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(UPLOAD_CONCURRENCY)
            .build()
            .unwrap_or_default();
        let storage = Arc::new(Self {
            settings: deps.settings,
            bus: deps.bus,
            http,
            bucket: watch::Sender::new(Bucket::default()),
            generation: AtomicU64::new(0),
            pool: Arc::new(Semaphore::new(UPLOAD_CONCURRENCY)),
            queued: AtomicU64::new(0),
            telemetry: deps.telemetry,
            tasks: deps.tasks,
            drain_limit: deps.drain_limit,
        });
        storage.reload();
        storage
    }

    pub fn settings(&self) -> Arc<Settings> {
        self.settings.get()
    }

    /// The HTTP client requests go through (shared connection pool).
    pub fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// The bucket while object storage is on (replays keep finished recordings in their channel's
    /// `replays/` folder, which the leftover clean-up leaves alone: [`Target::channel_key`]).
    pub fn bucket(&self) -> Option<Arc<Target>> {
        self.bucket.borrow().target.clone()
    }

    /// Build the target from the settings (none when storage is disabled or the settings are unusable)
    /// and hand it to every channel's uploader.
    fn reload(&self) {
        let s = self.settings.get();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let mut bucket = Bucket::default();
        if s.storage.s3.enabled {
            match S3Client::new(&s.storage.s3, self.http.clone()) {
                Ok(client) => {
                    bucket.target = Some(Arc::new(Target {
                        client,
                        prefix: playlist::normalise_prefix(&s.storage.s3.path_prefix),
                        serving: s.server.video_serving_endpoint.trim().trim_end_matches('/').to_string(),
                        generation,
                    }))
                }
                Err(e) => {
                    tracing::warn!("storage: {e}");
                    bucket.error = Some(e.to_string());
                }
            }
        }
        self.bucket.send_replace(bucket);
    }

    /// Channel `id` was deleted with its files (`purge`): every object of its folder leaves the bucket,
    /// its replays' too (their database is gone with its files, so nothing would ever name or delete
    /// them). In the background (a task of the server's); logged when the store fails. Never the
    /// default channel's folder (the whole prefix).
    pub fn purge_channel(&self, id: &ChannelId) {
        let folder = channel_folder(id);
        let Some(target) = self.bucket() else { return };
        if folder.is_empty() {
            return;
        }
        let (under, telemetry, id) = (format!("{}{folder}", target.prefix), self.telemetry.clone(), id.clone());
        self.tasks.spawn(Stage::Outputs, "storage: purge a channel", async move {
            let removed = async {
                let keys = target.client.list(&under).await?;
                if keys.is_empty() {
                    return Ok::<usize, ClientError>(0);
                }
                target.client.delete_batch(&keys).await
            }
            .await;
            match removed {
                Ok(n) => {
                    telemetry.storage_deleted(n as u64);
                    tracing::info!(channel = %id, "storage: the purged channel's {n} objects under {under} are removed");
                }
                Err(e) => tracing::warn!(channel = %id, "storage: the purged channel's objects under {under} stay: {e}"),
            }
        });
    }

    /// Channel `deps.channel`'s uploader (its media reader registers now, before any publisher can go
    /// live on the channel); its tasks start with [`start_channel`].
    pub fn channel(self: &Arc<Self>, deps: ChannelDeps) -> Arc<ChannelStorage> {
        let reader = deps.media.reader_for(&deps.channel, "storage");
        Arc::new(ChannelStorage {
            storage: self.clone(),
            folder: channel_folder(&deps.channel),
            channel: deps.channel,
            settings: deps.settings,
            stream: deps.stream,
            health: deps.health,
            telemetry: self.telemetry.clone(),
            hls_dir: deps.hls_dir,
            served: RwLock::default(),
            newest: RwLock::default(),
            failing: Mutex::default(),
            workers: Mutex::default(),
            running: Arc::new(()),
            reader: Mutex::new(Some(reader)),
            current: RwLock::default(),
            queued_segments: Mutex::default(),
            retired: Mutex::default(),
            done: Mutex::default(),
            ended: AtomicBool::new(false),
            drained: deps.tasks.signal(),
            tasks: deps.tasks,
        })
    }
}

/// A playlist castd serves instead of the local one.
struct Served {
    body: FileBody,
    /// When the revision it reflects was written.
    revision: Instant,
    /// Twice the target duration: how far behind the newest revision it may be.
    max_lag: Duration,
    /// The bucket generation it names (a playlist of an earlier bucket is never served).
    generation: u64,
}

/// One channel's uploader (see the module doc); share as `Arc<ChannelStorage>`.
pub struct ChannelStorage {
    storage: Arc<Storage>,
    channel: ChannelId,
    /// [`channel_folder`] of the channel.
    folder: String,
    settings: SettingsStore,
    stream: StreamWatch,
    health: Arc<HealthHub>,
    /// The server's figures (see `StorageDeps::telemetry`).
    telemetry: Arc<Telemetry>,
    hls_dir: PathBuf,
    /// Served playlists by path under the HLS directory (`0/stream.m3u8`).
    served: RwLock<HashMap<String, Served>>,
    /// The newest local revision of each variant playlist (set on `PlaylistWritten`).
    newest: RwLock<HashMap<String, Instant>>,
    /// Per task (`master`, `variant 0`, ...): its last error while it persists.
    failing: Mutex<BTreeMap<String, String>>,
    workers: Mutex<HashMap<Option<usize>, watch::Sender<Instant>>>,
    /// Held by each upload task while it runs (a deleted channel's close waits until only this one is left).
    running: Arc<()>,
    /// The reader of the channel's broadcasts (taken by `start_channel`).
    reader: Mutex<Option<BroadcastReader>>,
    /// The channel's broadcast being followed.
    current: RwLock<Option<Arc<Broadcast>>>,
    /// Per variant: segments written and not uploaded yet, each held on disk.
    queued_segments: Mutex<HashMap<usize, Vec<Queued>>>,
    /// Per variant: segment files retention retired (to delete from the bucket once uploaded).
    retired: Mutex<HashMap<usize, Vec<String>>>,
    /// Per task: the newest revision it finished syncing (shutdown waits for the newest sent: `drain`).
    done: Mutex<HashMap<Option<usize>, Instant>>,
    /// The feed's `StreamEnded` was handled (every segment of the stream is queued by then).
    ended: AtomicBool,
    tasks: Tasks,
    /// Fired once `drain` is over (shutdown, or the channel closed): the feed follower and the upload
    /// tasks end.
    drained: CancellationToken,
}

/// A segment waiting for its upload, and the hold that keeps its file until then.
struct Queued {
    segment: SegmentWritten,
    _hold: Hold,
}

impl ChannelStorage {
    fn target(&self) -> Option<Arc<Target>> {
        self.storage.bucket()
    }

    /// The key of `rel` (a path under the channel's HLS folder) in the bucket.
    fn key(&self, target: &Target, rel: &str) -> String {
        playlist::key(&format!("{}{}", target.prefix, self.folder), rel)
    }

    /// The public URL of the folder holding variant `variant`'s files (ends with `/`).
    fn public_folder(&self, target: &Target, variant: usize) -> String {
        target.public_url(&self.key(target, &format!("{variant}/")))
    }

    /// The bucket changed (settings): forget what was served and failing, report unusable settings,
    /// and clean up leftovers under the new one.
    fn on_bucket(self: &Arc<Self>, bucket: &Bucket) {
        self.served.write().clear();
        {
            let mut failing = self.failing.lock();
            failing.clear();
            if let Some(e) = &bucket.error {
                failing.insert("settings".to_string(), e.clone());
            }
        }
        self.submit_health();
        if let Some(t) = &bucket.target {
            self.spawn_clean_up(t.clone());
        }
    }

    /// Record (`Some`) or clear a task's error, and update the health notice; true when it changed.
    fn notice(&self, task: &str, error: Option<String>) -> bool {
        let changed = {
            let mut f = self.failing.lock();
            match error {
                Some(e) => f.insert(task.to_string(), e.clone()).as_ref() != Some(&e),
                None => f.remove(task).is_some(),
            }
        };
        if changed {
            self.submit_health();
        }
        changed
    }

    fn submit_health(&self) {
        let first = self.failing.lock().iter().next().map(|(task, e)| (task.clone(), e.clone()));
        let message = first.map(|(task, e)| {
            format!("Object storage is failing ({task}: {e}); video is served from castd until it recovers")
        });
        self.health.submit(HealthInput::Storage(message));
    }

    /// Segments taken up for upload (`delta` > 0) or done with: the server-wide queue depth.
    fn set_queue(&self, delta: i64) {
        let queued = &self.storage.queued;
        let n = if delta >= 0 {
            queued.fetch_add(delta as u64, Ordering::Relaxed) + delta as u64
        } else {
            let d = delta.unsigned_abs();
            queued.fetch_sub(d, Ordering::Relaxed).saturating_sub(d)
        };
        self.telemetry.set_storage_queue(n);
    }

    /// Wake the task of `variant` (creating it) with a revision written at `at`.
    fn tick(self: &Arc<Self>, variant: Option<usize>, at: Instant) {
        if let Some(n) = variant {
            self.newest.write().insert(format!("{n}/stream.m3u8"), at);
        }
        let mut workers = self.workers.lock();
        if let Some(tx) = workers.get(&variant) {
            tx.send_replace(at);
            return;
        }
        let (tx, rx) = watch::channel(at);
        tx.send_replace(at);
        workers.insert(variant, tx);
        let name = variant.map_or_else(|| "storage: master playlist".to_string(), |n| format!("storage: variant {n}"));
        let (running, me) = (self.running.clone(), self.clone());
        self.tasks.spawn(Stage::Outputs, name, async move {
            worker(me, variant, rx).await;
            drop(running);
        });
    }

    /// Wake every task that exists (the stream ended: upload the final playlists).
    fn tick_all(self: &Arc<Self>) {
        let variants: Vec<Option<usize>> = self.workers.lock().keys().copied().collect();
        let now = Instant::now();
        for v in variants {
            self.tick(v, now);
        }
    }

    /// Remove everything under the channel's `hls/` folder (leftovers of earlier runs; replays, and
    /// every other channel's folder, are not touched); the number removed.
    async fn remove_live(&self, target: &Target) -> Result<usize, ClientError> {
        let under = self.key(target, "");
        let keys = target.client.list(&under).await?;
        if keys.is_empty() {
            return Ok(0);
        }
        let n = target.client.delete_batch(&keys).await?;
        if n > 0 {
            tracing::info!(channel = %self.channel, "storage: removed {n} objects under {under}");
            self.telemetry.storage_deleted(n as u64);
        }
        Ok(n)
    }

    /// Remove leftovers (`remove_live`); true when done.
    async fn clean_leftovers(&self, target: &Target) -> bool {
        match self.remove_live(target).await {
            Ok(_) => {
                self.notice("clean-up", None);
                true
            }
            Err(e) => {
                if self.notice("clean-up", Some(e.to_string())) {
                    tracing::warn!(channel = %self.channel, "storage: leftovers not removed yet: {e}");
                }
                self.telemetry.storage_failure();
                false
            }
        }
    }

    /// Remove leftovers while no stream is live, retrying with back-off (5 s doubling to 5 min) while
    /// the store fails; given up (and its notice cleared) when a stream starts or the settings change.
    fn spawn_clean_up(self: &Arc<Self>, target: Arc<Target>) {
        let storage = self.clone();
        // Deletes are idempotent: the next start cleans up again, so the stage stopping ends it.
        self.tasks.spawn_until_stopped(Stage::Outputs, "storage: clean-up", async move {
            let mut delay = Duration::from_secs(5);
            loop {
                let current = storage.target().is_some_and(|t| t.generation == target.generation);
                if storage.stream.borrow().online || !current {
                    storage.notice("clean-up", None);
                    return;
                }
                if storage.clean_leftovers(&target).await {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(300));
            }
        });
    }

    /// Upload one file (`rel` under the HLS dir) with retries. `Ok(None)`: the file is gone (it left
    /// the window before it could be uploaded); `Ok(Some(bytes))` when uploaded.
    async fn upload(&self, target: &Target, rel: &str, meta: &PutMeta<'_>) -> Result<Option<u64>, ClientError> {
        let path = self.hls_dir.join(rel);
        let key = self.key(target, rel);
        let mut attempt = 0;
        loop {
            let p = path.clone();
            let loaded = tokio::task::spawn_blocking(move || {
                let ready = std::fs::metadata(&p).and_then(|m| m.modified()).ok();
                MappedFile::load(&p).map(|b| (b, ready))
            })
            .await;
            let Ok(Ok((bytes, ready))) = loaded else { return Ok(None) };
            let len = bytes.len() as u64;
            let result = target.client.put(&key, bytes, meta).await;
            attempt += 1;
            match result {
                Ok(()) => {
                    let latency = (meta.cache_control == SEGMENT_CACHE)
                        .then(|| ready.and_then(|t| SystemTime::now().duration_since(t).ok()))
                        .flatten()
                        .map(|d| d.as_secs_f64());
                    self.telemetry.storage_upload(len, latency);
                    return Ok(Some(len));
                }
                Err(e) if attempt < ATTEMPTS && e.retryable() => {
                    tracing::debug!("storage: {key}: {e}; retrying");
                    tokio::time::sleep(BACKOFF * 2u32.pow(attempt - 1)).await;
                }
                Err(e) => {
                    self.telemetry.storage_failure();
                    return Err(e);
                }
            }
        }
    }

    /// Bring the master playlist up to date.
    async fn sync_master(&self, target: &Target) -> Result<(), ClientError> {
        if self.private() {
            return Ok(());
        }
        let meta = PutMeta { content_type: PLAYLIST_TYPE, cache_control: crate::hls::PLAYLIST_CACHE };
        self.upload(target, "stream.m3u8", &meta).await.map(drop)
    }

    /// After the channel's stream ended (shutdown, or the channel closing): upload what is still queued
    /// and the final playlists, waiting at most `limit`. What could not be uploaded in time is logged
    /// with its count (never dropped silently); the next start clears the channel's live folder anyway
    /// (`spawn_clean_up`). Returns the segments left.
    pub async fn drain(self: &Arc<Self>, limit: Duration) -> usize {
        if self.target().is_none() {
            return 0;
        }
        let deadline = Instant::now() + limit;
        // A stream ran: first every event of it must have reached this uploader.
        while self.current.read().is_some() && !self.ended.load(Ordering::Acquire) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.tick_all();
        loop {
            let queued: usize = self.queued_segments.lock().values().map(Vec::len).sum();
            let pending = {
                let done = self.done.lock();
                self.workers.lock().iter().any(|(task, tx)| done.get(task).is_none_or(|d| *d < *tx.borrow()))
            };
            let idle = queued == 0 && !pending;
            if idle {
                tracing::info!(channel = %self.channel, "storage: every segment and playlist is uploaded");
                return 0;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    channel = %self.channel,
                    queued,
                    "storage: shutting down with {queued} segments not uploaded (the store is too slow)"
                );
                return queued;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The channel is deleted (its tasks were told to stop by its scope's close): once its drain is
    /// over and its upload tasks have ended (at most `CLOSE_WAIT` each), its live objects leave the
    /// bucket, so nothing of it stays public and a channel made later with its slug starts from an
    /// empty folder. Its replays' objects stay while its files are kept (moved aside, restorable); a
    /// purge removes them too ([`Storage::purge_channel`]). A store that fails now leaves them (logged):
    /// the clean-up of a channel made with the slug later removes them.
    pub async fn close(&self) {
        let _ = tokio::time::timeout(CLOSE_WAIT, self.drained.cancelled()).await;
        self.drained.cancel();
        let ended = async {
            while Arc::strong_count(&self.running) > 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, ended).await;
        self.served.write().clear();
        let Some(target) = self.target() else { return };
        if let Err(e) = self.remove_live(&target).await {
            tracing::warn!(channel = %self.channel, "storage: the deleted channel's live objects stay in the bucket: {e}");
        }
    }

    /// A segment was written: hold it and queue its upload (storage on).
    fn on_segment(&self, seg: &SegmentWritten) {
        let Some(b) = self.current.read().clone() else { return };
        let Some(hold) = b.retention.hold(seg.variant, &seg.file) else { return };
        let mut q = self.queued_segments.lock();
        let list = q.entry(seg.variant).or_default();
        if list.iter().any(|x| x.segment.file == seg.file) {
            return;
        }
        list.push(Queued { segment: seg.clone(), _hold: hold });
        if list.len() > MAX_QUEUED {
            let dropped = list.len() - MAX_QUEUED;
            list.drain(..dropped);
            tracing::warn!(
                channel = %self.channel,
                variant = seg.variant,
                dropped,
                "storage: the store is behind; oldest segments not uploaded"
            );
        }
    }

    /// The feed lagged: queue what the live window holds that is not known to be uploaded, then sync.
    /// (Segments already in the bucket are uploaded again: harmless, and lagging is rare.)
    fn resync(self: &Arc<Self>) {
        let Some(b) = self.current.read().clone() else { return };
        for n in b.retention.variants() {
            for seg in b.retention.window(n) {
                self.on_segment(&seg);
            }
            self.tick(Some(n), Instant::now());
        }
        self.tick(None, Instant::now());
    }

    /// Bring variant `n` up to date (see the module doc); `revision`: when the playlist was written.
    async fn sync_variant(
        self: &Arc<Self>,
        target: &Arc<Target>,
        n: usize,
        state: &mut VariantState,
        revision: Instant,
    ) -> Result<(), ClientError> {
        let rel = format!("{n}/stream.m3u8");
        if self.private() {
            // Served from castd while a viewing pass is needed (see the module doc): nothing new goes
            // to the bucket, and what retention retired still leaves it.
            self.queued_segments.lock().remove(&n);
            self.served.write().remove(&rel);
            self.delete_retired(target, n, state).await;
            return Ok(());
        }
        let queued: Vec<Queued> = self.queued_segments.lock().remove(&n).unwrap_or_default();
        self.set_queue(queued.len() as i64);
        // Concurrent within this task (the server's pool bounds them); awaited here, not long-running tasks.
        let uploads = FuturesUnordered::new();
        for q in queued {
            let (me, target, pool) = (self.clone(), target.clone(), self.storage.pool.clone());
            uploads.push(async move {
                let _permit = pool.acquire_owned().await;
                let name = q.segment.file.clone();
                let meta = PutMeta { content_type: content_type(&name), cache_control: SEGMENT_CACHE };
                let r = me.upload(&target, &format!("{n}/{name}"), &meta).await;
                me.set_queue(-1);
                (q, r)
            });
        }
        let mut first_error = None;
        let mut failed = Vec::new();
        let mut uploads = uploads;
        while let Some(joined) = uploads.next().await {
            match joined {
                // Uploaded: the hold goes with `q`.
                (q, Ok(Some(_))) => {
                    state.uploaded.insert(q.segment.file);
                }
                (_, Ok(None)) => {}
                (q, Err(e)) => {
                    failed.push(q);
                    first_error.get_or_insert(e);
                }
            }
        }
        if !failed.is_empty() {
            // Kept (and held) for the next revision, before anything queued since.
            failed.sort_by_key(|q| q.segment.msn);
            let mut q = self.queued_segments.lock();
            let list = q.entry(n).or_default();
            failed.append(list);
            *list = failed;
            let excess = list.len().saturating_sub(MAX_QUEUED);
            list.drain(..excess);
        }
        if let Some(e) = first_error {
            self.served.write().remove(&rel);
            return Err(e);
        }
        // The playlist, once every segment it names is in the bucket.
        let path = self.hls_dir.join(&rel);
        let Ok(Ok(bytes)) = tokio::task::spawn_blocking(move || MappedFile::load(&path)).await else { return Ok(()) };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let listed = playlist::segments(&text);
        if listed.iter().any(|s| !state.uploaded.contains(s)) {
            // Named but not uploaded (given up, or from before storage was on): not published.
            return Ok(());
        }
        let meta = PutMeta { content_type: PLAYLIST_TYPE, cache_control: crate::hls::PLAYLIST_CACHE };
        if let Err(e) = self.upload(target, &rel, &meta).await {
            self.served.write().remove(&rel);
            return Err(e);
        }
        let served = playlist::rewrite(&text, &self.public_folder(target, n));
        let max_lag = Duration::from_secs_f64(playlist::target_duration(&text).unwrap_or(2.0).clamp(1.0, 30.0) * 2.0);
        let body =
            FileBody::from_content(Bytes::from(served), SystemTime::now(), PLAYLIST_TYPE, crate::hls::PLAYLIST_CACHE);
        // Only a still-current generation may publish what it uploaded.
        if self.target().is_some_and(|t| t.generation == target.generation) {
            self.served.write().insert(rel, Served { body, revision, max_lag, generation: target.generation });
        }
        self.delete_retired(target, n, state).await;
        Ok(())
    }

    /// Segments retention retired leave the bucket (tried again with the next revision on failure).
    async fn delete_retired(&self, target: &Target, n: usize, state: &mut VariantState) {
        let retired: Vec<String> = self.retired.lock().remove(&n).unwrap_or_default();
        let expired: Vec<String> = retired.into_iter().filter(|s| state.uploaded.contains(s)).collect();
        if !expired.is_empty() {
            let keys: Vec<String> = expired.iter().map(|s| self.key(target, &format!("{n}/{s}"))).collect();
            match target.client.delete_batch(&keys).await {
                Ok(deleted) => {
                    self.telemetry.storage_deleted(deleted as u64);
                    for s in &expired {
                        state.uploaded.remove(s);
                    }
                }
                Err(e) => {
                    // Tried again with the next revision.
                    self.retired.lock().entry(n).or_default().extend(expired);
                    self.telemetry.storage_failure();
                    tracing::warn!(channel = %self.channel, "storage: deleting {} expired segments: {e}", keys.len());
                }
            }
        }
    }

    /// Whether the channel needs a viewing pass: its stream is then served from castd only (public
    /// bucket URLs carry no pass), and nothing new is uploaded.
    fn private(&self) -> bool {
        self.settings.get().access.visibility.needs_pass()
    }
}

impl PlaylistOverride for ChannelStorage {
    fn playlist(&self, rel: &str) -> Option<FileBody> {
        if self.private() {
            return None;
        }
        let generation = self.target()?.generation;
        let served = self.served.read();
        let s = served.get(rel).filter(|s| s.generation == generation)?;
        let newest = self.newest.read().get(rel).copied().unwrap_or(s.revision);
        (newest.saturating_duration_since(s.revision) <= s.max_lag).then(|| s.body.clone())
    }
}

/// What a variant's task knows of the bucket.
#[derive(Default)]
struct VariantState {
    generation: u64,
    /// Segment file names in the bucket.
    uploaded: HashSet<String>,
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, e)| e) {
        Some("ts") => "video/mp2t",
        Some("m4s") => "video/iso.segment",
        Some("mp4") => "video/mp4",
        Some("m3u8") => PLAYLIST_TYPE,
        _ => "application/octet-stream",
    }
}

/// One variant's (or the master playlist's, `None`) task: sync on each revision until `drain` is over
/// (shutdown, or the channel closed); a sync under way is finished first.
async fn worker(storage: Arc<ChannelStorage>, variant: Option<usize>, mut rx: watch::Receiver<Instant>) {
    let stop = storage.drained.clone();
    let name = variant.map_or_else(|| "master playlist".to_string(), |n| format!("variant {n}"));
    let mut state = VariantState::default();
    loop {
        let revision = *rx.borrow_and_update();
        if let Some(target) = storage.target() {
            if state.generation != target.generation {
                state = VariantState { generation: target.generation, ..VariantState::default() };
            }
            let result = match variant {
                Some(n) => storage.sync_variant(&target, n, &mut state, revision).await,
                None => storage.sync_master(&target).await,
            };
            // Logged when the state changes, not on every revision of a long outage.
            match result {
                Ok(()) => {
                    if storage.notice(&name, None) {
                        tracing::info!(channel = %storage.channel, "storage: {name}: uploads work again");
                    }
                }
                Err(e) => {
                    if storage.notice(&name, Some(e.to_string())) {
                        tracing::warn!(channel = %storage.channel, "storage: {name}: {e}");
                    } else {
                        tracing::debug!(channel = %storage.channel, "storage: {name}: {e}");
                    }
                }
            }
        }
        storage.done.lock().insert(variant, revision);
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = stop.cancelled() => return,
        }
    }
}

/// Follow the server's storage settings (`s3`, `videoServingEndpoint`) on the bus: each change
/// rebuilds the bucket every channel's uploader follows. A task of the daemon's `Outputs` stage.
pub fn start(storage: Arc<Storage>) {
    let mut sub = storage.bus.subscribe("storage");
    let s = storage.clone();
    storage.tasks.spawn_until_stopped(Stage::Outputs, "storage: settings", async move {
        while let Some(event) = sub.recv().await {
            if let Event::SettingsChanged(change) = &*event {
                if change.changed(|s| &s.storage.s3) || change.changed(|s| &s.server.video_serving_endpoint) {
                    s.reload();
                }
            }
        }
    });
}

/// Follow channel `cs`'s broadcasts (segments to hold and upload, playlists, retired segments, the
/// end: each broadcast's feed, one broadcast after the other) and the server's bucket (settings
/// changes); remove the channel's leftovers at start-up and with each new bucket.
///
/// Tasks of the channel's `Outputs` stage: when it stops (at shutdown, after the stream has ended, or
/// when the channel closes), the stream's last segments and final playlists are uploaded (`drain`,
/// within the server's drain limit), then the tasks end.
pub fn start_channel(cs: Arc<ChannelStorage>) {
    let Some(mut reader) = cs.reader.lock().take() else { return };
    let mut bucket = cs.storage.bucket.subscribe();
    let tasks = cs.tasks.clone();
    let (s, stop, limit) = (cs.clone(), tasks.token(Stage::Outputs), cs.storage.drain_limit);
    tasks.spawn(Stage::Outputs, "storage: drain", async move {
        stop.cancelled().await;
        s.drain(limit).await;
        s.drained.cancel();
    });
    let drained = cs.drained.clone();
    tasks.spawn(Stage::Outputs, "storage: media feed", async move {
        let first = bucket.borrow_and_update().clone();
        cs.on_bucket(&first);
        let mut feed: Option<crate::media::Subscription> = None;
        loop {
            tokio::select! {
                _ = drained.cancelled() => return,
                // A new broadcast is taken once the one followed has ended (its feed is over).
                attached = reader.next(), if feed.is_none() => {
                    let Some(Attached { broadcast, feed: f }) = attached else { return };
                    *cs.current.write() = Some(broadcast);
                    feed = Some(f);
                }
                delivery = async { match feed.as_mut() { Some(f) => f.recv().await, None => std::future::pending().await } } => {
                    let Some(delivery) = delivery else {
                        feed = None;
                        continue;
                    };
                    if cs.target().is_none() {
                        continue;
                    }
                    match delivery {
                        Delivery::Event(ev) => match &*ev {
                            MediaEvent::Started(_) => {
                                cs.ended.store(false, Ordering::Release);
                                cs.served.write().clear();
                                cs.newest.write().clear();
                            }
                            MediaEvent::SegmentWritten(seg) if !cs.private() => cs.on_segment(seg),
                            MediaEvent::SegmentWritten(_) => {}
                            MediaEvent::PlaylistWritten { variant } => cs.tick(*variant, Instant::now()),
                            MediaEvent::SegmentRetired { variant, file } => {
                                cs.retired.lock().entry(*variant).or_default().push(file.clone())
                            }
                            MediaEvent::StreamEnded => {
                                cs.ended.store(true, Ordering::Release);
                                cs.tick_all();
                            }
                            MediaEvent::PartWritten(_) | MediaEvent::InitWritten { .. } => {}
                        },
                        Delivery::Lagged => cs.resync(),
                    }
                }
                changed = bucket.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let next = bucket.borrow_and_update().clone();
                    cs.on_bucket(&next);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_channel_has_a_folder_of_its_own() {
        let default = ChannelId::default_channel();
        let c1 = ChannelId::new("c1").unwrap();
        let c12 = ChannelId::new("c12").unwrap();
        // The default channel's keys are where they were before channels.
        assert_eq!(channel_folder(&default), "");
        assert_eq!(channel_folder(&c1), "c/c1/");
        // The same replay id in two channels: two keys, and neither folder holds the other's.
        let rel = format!("{REPLAYS_FOLDER}abc/0/seg-1.ts");
        let (a, b) = (format!("{}{rel}", channel_folder(&default)), format!("{}{rel}", channel_folder(&c1)));
        assert_ne!(a, b);
        let live = |id: &ChannelId| playlist::key(&channel_folder(id), "");
        let folders =
            [live(&default), live(&c1), live(&c12), REPLAYS_FOLDER.to_string(), format!("c/c1/{REPLAYS_FOLDER}")];
        for (i, x) in folders.iter().enumerate() {
            for (j, y) in folders.iter().enumerate() {
                assert!(i == j || !y.starts_with(x.as_str()), "{x} is a prefix of {y}");
            }
        }
    }
}
