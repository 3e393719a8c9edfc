//! Replays and clips: every broadcast kept and replayable, clips for viewers and bots, MP4 downloads
//! and a disk budget, on Owncast's routes and JSON (`/api/admin/replays`, `/replay/{streamId}`,
//! `POST /api/clip`, `/clip/{clipId}`, ...).
//!
//! Owns:
//! - `recorder`: the media plane consumer that holds each segment and hard-links it into
//!   `<data-dir>/replays/<streamId>/<variant>/`, writing the rows as it goes (`kill -9` safe; a replay
//!   left `recording` is `interrupted` at the next start).
//! - `db`: the tables (`replays`, `replay_segments`, `replay_clips`; migrations under `"replays"`).
//! - `playlist`: master and media playlists (EVENT while live, VOD + ENDLIST when finished; clips VOD).
//! - `api`: the replay routes (admin list/update/delete, the public list, a replay's chat placed on its
//!   media time, playback, segment files).
//! - `clips`: clip creation (Owncast's rules, rate limit and permissions; the bot form), clip routes,
//!   thumbnails, a clip's chat (its window's, on the clip's own time).
//! - `download`: `download.mp4` of a replay or a clip (a remux with the ffmpeg CLI, streamed while it
//!   is made; capped per address and in all, since each is a child process).
//! - `serve`: what the replay, clip and download routes share (the 404, who may play a replay,
//!   playlist answers, recorded files with Range and ETag).
//! - `budget`: the disk budget and the retention in days (oldest unpinned finished replays first).
//! - `remote`: finished replays in object storage (uploaded, playlists on the bucket; deleting removes
//!   the objects).
//! - `settings`: the `replay/*` setters and the `replay` part of the server configuration.
//!
//! Uses the media plane (feed, retention holds), `storage` (the bucket), `tokens`, the store, the stream state (the stream id), chat
//! users and messages through `http::UserTokens` (clip permissions; a replay's chat), and publishes REPLAY_READY / CLIP_CREATED on the bus.

pub mod api;
pub mod budget;
pub mod clips;
pub mod db;
pub mod download;
pub mod playlist;
pub mod recorder;
pub mod remote;
pub mod serve;
pub mod settings;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use parking_lot::Mutex;
use tracing::{info, warn};

use crate::events::{Bus, Event};
use crate::health::HealthHub;
use crate::http::{AdminAuth, Registry, UserTokens};
use crate::media::MediaPlane;
use crate::storage::Storage;
use crate::store::settings::SettingsStore;
use crate::store::{Store, StoreError};
use crate::stream::StreamWatch;
use crate::tasks::{Stage, Tasks};

/// How often the budget and the retention in days are checked besides at each broadcast's end.
pub const BUDGET_INTERVAL: Duration = Duration::from_secs(600);

/// Errors of the replays feature.
#[derive(Debug, thiserror::Error)]
pub enum ReplaysError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Refused(String),
}

/// What the replays feature is given.
pub struct ReplaysDeps {
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    pub health: Arc<HealthHub>,
    pub media: Arc<MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    /// The channel's URL path prefix: empty for the default channel, `/c/{slug}` for a channel. Every
    /// URL a replay or clip names (JSON, playlists) starts with it.
    pub base_path: String,
    /// `<data-dir>`: replays live in `<data-dir>/replays`.
    pub data_dir: PathBuf,
    /// `<data-dir>/hls` (the live master playlist).
    pub hls_dir: PathBuf,
    /// Chat users (clip permissions) and messages (a replay's chat).
    pub users: Arc<dyn UserTokens>,
    /// The admin check (replays are admin-only unless public).
    pub admin: AdminAuth,
    /// Object storage (finished replays move to the bucket while it is on).
    pub storage: Arc<Storage>,
    pub tasks: Tasks,
}

/// The replays feature's state; share as `Arc<Replays>`.
pub struct Replays {
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    pub health: Arc<HealthHub>,
    pub media: Arc<MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    /// Empty for the default channel, `/c/{slug}` for a channel (see `ReplaysDeps::base_path`).
    pub base_path: String,
    /// `<data-dir>/replays`.
    pub dir: PathBuf,
    pub hls_dir: PathBuf,
    pub users: Arc<dyn UserTokens>,
    pub admin: AdminAuth,
    pub storage: Arc<Storage>,
    pub tasks: Tasks,
    /// Per-IP clip rate limits.
    pub limits: Mutex<clips::RateLimits>,
    /// The places of `download.mp4` remuxes (per address and in all; see `download`).
    pub downloads: crate::throttle::Caps,
    /// Clip thumbnails are made one at a time (each is an ffmpeg child).
    pub thumbnails: tokio::sync::Semaphore,
    /// Recorded files opened once (`http::diskcache`), after the permission check of each request.
    pub files: crate::http::diskcache::DiskCache,
}

impl Replays {
    /// Open the tables, mark replays a dead daemon left `recording` as `interrupted`, and drop
    /// half-deleted folders.
    pub fn open(deps: ReplaysDeps) -> Result<Arc<Replays>, ReplaysError> {
        deps.store.migrate("replays", db::MIGRATIONS)?;
        let interrupted = deps.store.with(db::recover)?;
        for id in &interrupted {
            warn!(replay = %id, "the replay was interrupted (castd stopped while recording); it is kept up to its last segment");
        }
        let dir = deps.data_dir.join("replays");
        std::fs::create_dir_all(&dir)?;
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(".deleting-") {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        Ok(Arc::new(Replays {
            store: deps.store,
            settings: deps.settings,
            bus: deps.bus,
            stream: deps.stream,
            health: deps.health,
            media: deps.media,
            channel: deps.channel,
            base_path: deps.base_path,
            dir: dir.clone(),
            hls_dir: deps.hls_dir,
            users: deps.users,
            admin: deps.admin,
            storage: deps.storage,
            tasks: deps.tasks,
            limits: Mutex::default(),
            downloads: download::caps(),
            thumbnails: tokio::sync::Semaphore::new(1),
            files: crate::http::diskcache::DiskCache::new(dir.clone()),
        }))
    }

    /// Replay features are on (Owncast answers every route with 404 otherwise).
    pub fn enabled(&self) -> bool {
        self.settings.get().replay.replay_enabled
    }

    /// `<data-dir>/replays/<id>`.
    pub fn replay_dir(&self, id: &str) -> PathBuf {
        self.dir.join(id)
    }

    /// `<data-dir>/replays/<id>/<variant>`.
    pub fn variant_dir(&self, id: &str, variant: usize) -> PathBuf {
        self.replay_dir(id).join(variant.to_string())
    }

    /// `<data-dir>/replays/<streamId>/clips/<clipId>.jpg`.
    pub fn thumbnail_path(&self, stream_id: &str, clip_id: &str) -> PathBuf {
        self.replay_dir(stream_id).join("clips").join(format!("{clip_id}.jpg"))
    }

    /// The broadcast ended: the replay is finished, the budget runs, REPLAY_READY goes out.
    pub async fn finish(self: &Arc<Self>, id: &str) {
        let (store, rid) = (self.store.clone(), id.to_string());
        if let Err(e) = store.call(move |c| db::finish(c, &rid, Utc::now())).await {
            warn!("replays: cannot finish {id}: {e}");
            return;
        }
        // The upload (object storage on), REPLAY_READY and the budget run apart, so the next broadcast's
        // recording never waits for them.
        let (r, id) = (self.clone(), id.to_string());
        self.tasks.spawn(Stage::Background, "replay ready", async move {
            remote::upload(&r, &id).await;
            info!(replay = %id, "replay ready");
            r.replay_ready(&id).await;
            budget::enforce(&r).await;
        });
    }

    /// Delete a replay: its rows (and clips) in one transaction, then its files (renamed away first, so
    /// nothing is left half-deleted: a failure puts the folder back). A replay still recording is
    /// refused.
    pub async fn delete_replay(self: &Arc<Self>, id: &str) -> Result<bool, ReplaysError> {
        let (store, rid) = (self.store.clone(), id.to_string());
        let Some(row) = store.call(move |c| db::replay(c, &rid)).await? else { return Ok(false) };
        if row.status == db::RECORDING {
            return Err(ReplaysError::Refused("the replay is still recording".into()));
        }
        let dir = self.replay_dir(id);
        let trash = self.dir.join(format!(".deleting-{id}"));
        let moved = dir.exists();
        if moved {
            std::fs::rename(&dir, &trash)?;
        }
        let (store, rid) = (self.store.clone(), id.to_string());
        match store.call(move |c| db::delete_replay(c, &rid)).await {
            Ok(_) => {}
            Err(e) => {
                if moved {
                    let _ = std::fs::rename(&trash, &dir);
                }
                return Err(e.into());
            }
        }
        if moved {
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(trash)).await;
        }
        self.remove_remote(&row).await;
        info!(replay = %id, "replay deleted");
        Ok(true)
    }
}

impl Replays {
    /// Publish REPLAY_READY with the replay's JSON.
    async fn replay_ready(&self, id: &str) {
        let (store, rid) = (self.store.clone(), id.to_string());
        if let Ok(Some(row)) = store.call(move |c| db::replay(c, &rid)).await {
            self.bus.publish(Event::ReplayReady(self.replay_json(row)));
        }
    }

    /// Publish CLIP_CREATED; a viewer's clip is announced in chat unless `replayAnnounceClips` is off.
    pub fn clip_created(&self, clip: &db::ClipRow, viewer: bool) {
        let announce = (viewer && self.settings.get().replay.replay_announce_clips && !clip.clipped_by.is_empty())
            .then(|| {
                let title = if clip.title.is_empty() { "a clip" } else { clip.title.as_str() };
                format!("{} clipped {title}", clip.clipped_by)
            });
        self.bus.publish(Event::ClipCreated { clip: self.clip_bare_json(clip.clone()), announce });
    }

    /// Remove a deleted replay's object-storage copies.
    async fn remove_remote(&self, row: &db::ReplayRow) {
        remote::remove(self, row).await;
    }
}

/// Start the recorder and the budget timer (which also runs at once when the settings store announces
/// a new disk budget or retention).
pub fn start(r: Arc<Replays>) {
    let tasks = r.tasks.clone();
    let reader = r.media.reader_for(&r.channel, "replays");
    tasks.spawn_until_stopped(Stage::Outputs, "replay recorder", recorder::run(r.clone(), reader));
    let mut sub = r.bus.subscribe("replay budget");
    tasks.spawn_until_stopped(Stage::Background, "replay budget", async move {
        loop {
            budget::enforce(&r).await;
            let next = tokio::time::Instant::now() + BUDGET_INTERVAL;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => break,
                    ev = sub.recv() => match ev.as_deref() {
                        None => return,
                        Some(Event::SettingsChanged(c))
                            if c.changed(|s| &s.replay.replay_max_gigabytes)
                                || c.changed(|s| &s.replay.replay_retention_days) =>
                        {
                            break
                        }
                        Some(_) => {}
                    },
                }
            }
        }
    });
}

/// Every route of the feature.
pub fn routes(reg: &mut Registry, r: Arc<Replays>, tokens: crate::tokens::Tokens) {
    settings::routes(reg, r.clone());
    api::routes(reg, r.clone());
    download::routes(reg, r.clone());
    clips::routes(reg, r, tokens);
}
