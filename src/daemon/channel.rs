//! A channel's stack: every feature that is a channel's own (settings, stream keys, chat, webhooks,
//! tokens, federation actor, schedule, replays, simulcast, HLS, WHEP, the API and the web UI), built
//! from the channel's own database, settings and bus. The default channel's stack is today's castd at
//! the root; every other channel's is served under `/c/{slug}` (`channels`), built here through
//! [`DaemonHost`] (the `channels::ChannelHost` of the composition root).
//!
//! What a stack is given from the server ([`Shared`]): the media plane, the encoder list, object
//! storage (the stack makes its channel's uploader: its live HLS and finished replays go to the bucket,
//! under the channel's folder; a deleted channel's live objects leave it), ingest (WHIP and the
//! disconnect route), the server admin's check (a channel's admin routes take the server admin's
//! password too), the flags and the configs.
//!
//! What a stack is given of the other channels, at construction ([`Links`], the registry's answers:
//! `daemon::server`): stream keys and fediverse user names are unique across the server (each stack's
//! setter asks its `key_taken` and `username_taken`); what a channel reads of the server's settings
//! (ports, SRT, the encoder, ...) is the server's, its server URL the server's under `/c/{slug}` (so
//! its federation actor's IRIs live under its prefix), laid over when it opens and kept so
//! ([`channel_view`], [`follow_server_settings`]; its database holds channel keys only); its actor is
//! named after its slug when it opens unless its admin chose a name; the root's WebFinger finds every
//! channel's actor. Every open channel, the default included, is a [`ChannelHandle`] in the registry
//! (`channels::Channels`); [`stack_of`] reads its stack back.
//!
//! Whether a stack is a tenant's or the server's own is decided once, in [`ChannelStack::build`], from
//! its id: the features ask their own handles after that (their `is_channel`), the URL and folders
//! come from the id (`ChannelId::base_path`, `ChannelId::folder_in`).

use std::path::PathBuf;
use std::sync::Arc;

use hwaccel::EncoderInfo;
use tokio::sync::watch;

use super::error::DaemonError;
use super::links::{Every, Links};
use crate::api::Server;
use crate::channels::{Channel, ChannelHost, ChannelRow, ChannelStatus, ChannelsError};
use crate::chat::{Chat, ChatDeps};
use crate::config::ServerSettings;
use crate::config::StreamKey;
use crate::events::Bus;
use crate::federation::{Federation, FederationConfig};
use crate::health::HealthHub;
use crate::hls::Hls;
use crate::http::{AdminAuth, Registry};
use crate::indieauth::{IndieAuth, IndieAuthConfig};
use crate::ingest::Ingest;
use crate::media::{ChannelId, MediaPlane};
use crate::metrics::{Metrics, MetricsConfig, MetricsDeps};
use crate::notifications::{Notifications, NotifyState};
use crate::outbound::{PrivateTargets, Reach};
use crate::public_files::PublicFiles;
use crate::replays::{Replays, ReplaysDeps};
use crate::schedule::Schedule;
use crate::simulcast::{Simulcast, SimulcastDeps};
use crate::storage::Storage;
use crate::store::settings::{ServerSettingsStore, SettingsStore};
use crate::store::Store;
use crate::stream::{StreamWatch, StreamWriter, Viewers};
use crate::tasks::{Stage, Tasks};
use crate::telemetry::Telemetry;
use crate::tokens::Tokens;
use crate::transcode::{TranscodeDeps, Transcoder};
use crate::webhooks::Webhooks;

/// What every channel's stack is given by the server.
#[derive(Clone)]
pub struct Shared {
    pub media: Arc<MediaPlane>,
    pub encoders: watch::Receiver<Vec<EncoderInfo>>,
    pub storage: Arc<Storage>,
    pub debug_encoder_fault: Option<f64>,
    pub llhls_part_ms: u32,
    pub federation: FederationConfig,
    pub metrics: MetricsConfig,
    /// On a cluster origin, the mark its edges send (see `hls::FROM_EDGE_HEADER`).
    pub edge_mark: Option<String>,
    /// The WebRTC stack (WHEP playback; none when WebRTC is off).
    pub webrtc: Option<Arc<crate::webrtc::WebRtc>>,
    /// The server's hardware (a channel's `/api/admin/hardwarestats` shows its series).
    pub hardware: Arc<crate::hardware::Hardware>,
    /// The server admin's `allowPrivateTargets`: whether channels' URLs may reach loopback and
    /// private addresses (the default channel's go anywhere: [`Reach::for_channel`]).
    pub private_targets: PrivateTargets,
}

/// The first pieces of a channel: its identity, storage and runtime state.
pub struct ChannelCore {
    pub id: ChannelId,
    /// The channel's data folder (the data dir for the default channel).
    pub data_dir: PathBuf,
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream_writer: StreamWriter,
    pub stream: StreamWatch,
    pub viewers: Viewers,
    pub health: Arc<HealthHub>,
    pub telemetry: Arc<Telemetry>,
}

impl ChannelCore {
    pub fn new(id: ChannelId, data_dir: PathBuf, store: Store, settings: SettingsStore, bus: Bus) -> ChannelCore {
        let (stream_writer, stream) = StreamWriter::new();
        ChannelCore {
            id,
            data_dir,
            store,
            settings,
            health: HealthHub::new(bus.clone()),
            bus,
            stream_writer,
            stream,
            viewers: Arc::default(),
            telemetry: Arc::default(),
        }
    }
}

/// Every feature of one channel (see the module doc).
pub struct ChannelStack {
    pub id: ChannelId,
    /// A tenant's stack (a channel under `/c/{slug}`), not the server's own (the default channel).
    pub tenant: bool,
    pub data_dir: PathBuf,
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    pub viewers: Viewers,
    pub health: Arc<HealthHub>,
    pub telemetry: Arc<Telemetry>,
    pub tokens: Tokens,
    pub admin: AdminAuth,
    pub metrics: Arc<Metrics>,
    pub schedule: Arc<Schedule>,
    pub chat: Arc<Chat>,
    pub transcoder: Arc<Transcoder>,
    pub webhooks: Arc<Webhooks>,
    pub notify: NotifyState,
    pub public_files: Arc<PublicFiles>,
    pub federation: Arc<Federation>,
    pub server: Arc<Server>,
    pub indieauth: Arc<IndieAuth>,
    pub simulcast: Arc<Simulcast>,
    pub replays: Arc<Replays>,
    pub hls: Arc<Hls>,
    /// The channel's object storage uploader (live HLS to the bucket; its playlists served by `hls`).
    pub storage: Arc<crate::storage::ChannelStorage>,
    pub whep: Arc<crate::whep::Whep>,
    /// Who may watch (the gate in front of the channel's routes).
    pub access: Arc<crate::access::Access>,
    /// The channel's tasks (a scope of the daemon's for a channel; the daemon's own for the default).
    pub tasks: Tasks,
    /// The server's hardware (a channel's hardware stats; the root adds the server's own routes).
    pub hardware: Arc<crate::hardware::Hardware>,
}

impl ChannelStack {
    /// Build the channel's features (no task started; see [`ChannelStack::start`]). `admin` is the
    /// channel's admin check; `stream_key_overridden`: a `--streamkey` is in force (default channel);
    /// `links`: what the registry answers of the other channels.
    pub fn build(
        core: ChannelCore,
        shared: &Shared,
        admin: AdminAuth,
        tasks: Tasks,
        stream_key_overridden: bool,
        links: Links,
    ) -> Result<ChannelStack, DaemonError> {
        let Links { key_taken, names, other_channels } = links;
        let ChannelCore { id, data_dir, store, settings, bus, stream_writer, stream, viewers, health, telemetry } =
            core;
        let media = &shared.media;
        // The one place a stack learns whose it is: a tenant's (a channel under `/c/{slug}`, its admin
        // less trusted than the server admin) or the server's own (the default channel, its admin the
        // server admin). Each feature asks its own handle from here on.
        let tenant = !id.is_default();
        // Where the URLs the channel's admin sets may lead (the default channel's admin is the server's).
        let reach = Reach::for_channel(!tenant, &shared.private_targets);
        let hls_dir = media.channel(&id).dir.clone();
        let tokens = Tokens::open(store.clone())?;
        let metrics = Metrics::open(
            shared.metrics,
            MetricsDeps {
                store: store.clone(),
                settings: settings.clone(),
                bus: bus.clone(),
                stream: stream.clone(),
                media: media.clone(),
                channel: id.clone(),
                counts: viewers.clone(),
                health: health.clone(),
                telemetry: telemetry.clone(),
                other_channels,
            },
        )?;
        let schedule = Schedule::open(store.clone(), settings.clone(), bus.clone(), stream.clone())?;
        let schedule_watch = schedule.watch();
        let chat = Chat::open(ChatDeps {
            store: store.clone(),
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
            tokens: tokens.clone(),
            telemetry: telemetry.clone(),
            emoji_dir: data_dir.join("emoji"),
            base_path: id.base_path(),
            scheduled_chat_open: Arc::new(move |online| schedule_watch.chat_open(online, chrono::Utc::now())),
            tasks: tasks.clone(),
        })?;
        let transcoder = Transcoder::new(TranscodeDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream_writer,
            viewers: viewers.clone(),
            health: health.clone(),
            telemetry: telemetry.clone(),
            encoders: shared.encoders.clone(),
            media: media.clone(),
            channel: id.clone(),
            debug_encoder_fault: shared.debug_encoder_fault,
            llhls_part_ms: shared.llhls_part_ms,
            tasks: tasks.clone(),
        });
        let webhooks =
            Arc::new(Webhooks::open_reaching(store.clone(), telemetry.clone(), tasks.clone(), reach.clone())?);
        let notifications = Arc::new(Notifications::open(store.clone())?.reaching(&reach)?);
        // A channel's files are a tenant's: served with an inert type only (`public_files`).
        let public_files = PublicFiles::open_for(data_dir.join("public"), tenant)?;
        let federation = Federation::open(
            store.clone(),
            settings.clone(),
            bus.clone(),
            chat.clone(),
            shared.federation.clone(),
            tasks.clone(),
            names,
        )?;
        let server = Arc::new(Server {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
            media: media.clone(),
            channel: id.clone(),
            viewers: viewers.clone(),
            health: health.clone(),
            encoders: shared.encoders.clone(),
            tokens: tokens.clone(),
            data_dir: data_dir.clone(),
            stream_key_overridden,
            vapid_public_key: notifications.public_key().to_string(),
            follower_count: federation.follower_count.clone(),
            schedule: schedule.watch(),
            key_taken,
            key_guesses: crate::throttle::Backoff::new(crate::api::KEY_GUESSES),
        });
        let indieauth = IndieAuth::new(IndieAuthConfig::from_env(), settings.clone(), chat.clone())?;
        let simulcast = Simulcast::new(SimulcastDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            media: media.clone(),
            channel: id.clone(),
            health: health.clone(),
            tasks: tasks.clone(),
            reach: reach.clone(),
        });
        let replays = Replays::open(ReplaysDeps {
            store: store.clone(),
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
            health: health.clone(),
            media: media.clone(),
            channel: id.clone(),
            base_path: id.base_path(),
            data_dir: data_dir.clone(),
            hls_dir: hls_dir.clone(),
            users: chat.clone(),
            admin: admin.clone(),
            storage: shared.storage.clone(),
            tasks: tasks.clone(),
        })?;
        let notify = NotifyState { notifications, settings: settings.clone(), users: chat.clone() };
        let storage = shared.storage.channel(crate::storage::ChannelDeps {
            channel: id.clone(),
            settings: settings.clone(),
            stream: stream.clone(),
            health: health.clone(),
            hls_dir: hls_dir.clone(),
            media: media.clone(),
            tasks: tasks.clone(),
        });
        let hls = Arc::new(Hls {
            channel: id.clone(),
            ll: crate::llhls::LlHls::new(hls_dir.clone()),
            disk: Arc::new(crate::http::diskcache::DiskCache::new(hls_dir.clone())),
            hls_dir,
            images_dir: media.channel(&id).images_dir.clone(),
            metrics: metrics.clone(),
            live: Default::default(),
            // Object storage serves every channel's video (its playlists naming the bucket).
            remote: Some(storage.clone() as Arc<dyn crate::hls::PlaylistOverride>),
            // Edges count the default channel's viewers themselves; a channel's are counted here.
            edge_mark: shared.edge_mark.clone().filter(|_| !tenant),
        });
        let whep = Arc::new(crate::whep::Whep {
            settings: settings.clone(),
            stream: stream.clone(),
            media: media.clone(),
            channel: id.clone(),
            store: store.clone(),
            metrics: metrics.clone(),
            webrtc: shared.webrtc.clone().map(|w| (w, tasks.clone())),
            per_address: crate::whep::per_address_caps(),
        });
        let access = crate::access::Access::open(
            id.clone(),
            store.clone(),
            settings.clone(),
            stream.clone(),
            admin.clone(),
            reach,
            &data_dir,
        )?;
        Ok(ChannelStack {
            id,
            tenant,
            data_dir,
            store,
            settings,
            bus,
            stream,
            viewers,
            health,
            telemetry,
            tokens,
            admin,
            metrics,
            schedule,
            chat,
            transcoder,
            webhooks,
            notify,
            public_files,
            federation,
            server,
            indieauth,
            simulcast,
            replays,
            hls,
            storage,
            whep,
            access,
            tasks,
            hardware: shared.hardware.clone(),
        })
    }

    /// The channel's routes (the server-wide ones are the daemon's to add for the default channel).
    pub fn registry(&self, ingest: &Arc<Ingest>) -> Registry {
        let mut reg = Registry::new(self.admin.clone());
        crate::api::routes(&mut reg, self.server.clone());
        crate::chat::api::routes(&mut reg, self.chat.clone());
        crate::chat::integrations::routes(&mut reg, self.chat.clone());
        crate::metrics::api::routes(&mut reg, self.metrics.clone());
        crate::tokens::routes(&mut reg, self.tokens.clone());
        crate::webhooks::routes(&mut reg, self.webhooks.clone());
        crate::notifications::routes(&mut reg, self.notify.clone());
        crate::indieauth::routes(&mut reg, self.indieauth.clone());
        crate::federation::routes(&mut reg, self.federation.clone());
        let measurer = if self.tenant {
            crate::ingest::channel_routes(&mut reg, ingest.clone(), self.id.clone());
            crate::hardware::api::channel_routes(&mut reg, self.hardware.clone(), self.health.clone());
            crate::hardware::fit::Measurer::Channel(self.id.clone())
        } else {
            crate::ingest::routes(&mut reg, ingest.clone());
            crate::hardware::fit::Measurer::Server
        };
        crate::hardware::fit::api::routes(&mut reg, self.hardware.clone(), self.settings.clone(), measurer);
        crate::hls::routes(&mut reg, self.hls.clone());
        crate::public_files::routes(&mut reg, self.public_files.clone());
        crate::schedule::routes(&mut reg, self.schedule.clone());
        crate::whep::routes(&mut reg, self.whep.clone());
        crate::simulcast::routes(&mut reg, self.simulcast.clone());
        crate::replays::routes(&mut reg, self.replays.clone(), self.tokens.clone());
        // The channel's pages carry its base path (the default channel's are at the root).
        crate::web::routes(&mut reg, &self.id.base_path());
        crate::access::api::routes(&mut reg, self.access.clone());
        // Every way out of the channel passes its gate (nothing to check while it is public).
        reg.gate(Arc::new(crate::access::gate::ChannelGate::new(self.access.clone())));
        reg
    }

    /// Start the channel's tasks. The media plane's readers register here, before any publisher can go
    /// live on the channel (the transcoder first, then every output).
    pub fn start(&self, media: &MediaPlane) {
        let tasks = &self.tasks;
        crate::webhooks::start(self.webhooks.clone(), &self.bus);
        crate::notifications::start(self.notify.clone(), &self.bus, tasks);
        crate::federation::start(self.federation.clone(), &self.bus);
        crate::chat::start(&self.chat);
        crate::indieauth::start(self.indieauth.clone(), tasks);
        let transcode = self.transcoder.reader();
        tasks.spawn_until_stopped(Stage::Stream, "transcode: broadcasts", self.transcoder.clone().run(transcode));
        crate::hls::start(self.hls.clone(), media, tasks);
        crate::llhls::start(self.hls.ll.clone(), &self.id, media, tasks);
        crate::storage::start_channel(self.storage.clone());
        crate::simulcast::start(self.simulcast.clone(), tasks);
        crate::replays::start(self.replays.clone());
        crate::api::warnings::start(self.server.clone(), tasks);
        crate::schedule::start(self.schedule.clone(), tasks);
        crate::metrics::start(self.metrics.clone(), tasks);
        crate::access::start(self.access.clone(), &self.bus, tasks);
        // WHEP playback, on the WebRTC stack (none when WebRTC is off).
        if self.whep.webrtc.is_some() {
            crate::whep::start(self.whep.clone(), tasks);
        }
    }

    /// What the channel lists say of it.
    pub fn status(&self) -> ChannelStatus {
        let s = self.settings.get();
        let st = self.stream.borrow();
        ChannelStatus {
            name: s.instance.name.clone(),
            online: st.online,
            stream_title: s.instance.stream_title.clone(),
            viewer_count: self.viewers.everywhere().0,
            visibility: s.access.visibility,
        }
    }
}

/// An open channel as the registry holds it: its stack, and (a channel under `/c/{slug}`) its router
/// and fast lanes. The default channel's routes are the root's: its router here is empty.
pub struct ChannelHandle {
    pub stack: ChannelStack,
    router: axum::Router,
    /// Its fast lanes behind its gate (the root's channels' lane hands them their requests).
    lanes: crate::http::lanes::Lanes,
    media: Arc<MediaPlane>,
    /// On a cluster origin: the channel's chat is linked to it while open.
    cluster: Option<Arc<crate::cluster::Cluster>>,
}

impl ChannelHandle {
    /// The default channel's entry in the registry (its routes are the root's, merged by the daemon).
    pub fn root(stack: ChannelStack, media: Arc<MediaPlane>) -> ChannelHandle {
        ChannelHandle { stack, router: axum::Router::new(), lanes: Vec::new(), media, cluster: None }
    }
}

/// The composition root's own stack behind a registry entry (every entry is a [`ChannelHandle`]).
pub fn stack_of(channel: &dyn Channel) -> Option<&ChannelStack> {
    let any: &dyn std::any::Any = channel;
    any.downcast_ref::<ChannelHandle>().map(|h| &h.stack)
}

impl Channel for ChannelHandle {
    fn router(&self) -> axum::Router {
        self.router.clone()
    }

    fn lane(&self, path: &str) -> Option<Arc<dyn crate::http::lanes::Lane>> {
        self.lanes.iter().find(|(prefix, lane)| path.starts_with(prefix) && lane.takes(path)).map(|(_, l)| l.clone())
    }

    fn status(&self) -> ChannelStatus {
        self.stack.status()
    }

    fn stream_keys(&self) -> Vec<String> {
        self.stack.settings.get().server.stream_keys.iter().map(|k| k.key.clone()).collect()
    }

    fn set_admin_password(&self, hash: String) -> Result<(), ChannelsError> {
        self.stack
            .settings
            .update_blocking(|s| {
                s.server.admin_password_hash = hash;
                s.server.admin_password_weak = false;
            })
            .map_err(|e| ChannelsError::Open(e.to_string()))
    }

    fn set_name(&self, name: String) -> Result<(), ChannelsError> {
        self.stack.settings.update_blocking(|s| s.instance.name = name).map_err(|e| ChannelsError::Open(e.to_string()))
    }

    fn is_live(&self) -> bool {
        self.media.current(&self.stack.id).is_some()
    }

    fn settings(&self) -> SettingsStore {
        self.stack.settings.clone()
    }

    fn telemetry(&self) -> Arc<Telemetry> {
        self.stack.telemetry.clone()
    }

    fn close(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if let Some(cluster) = &self.cluster {
                cluster.unlink_channel(&self.stack.id);
            }
            self.stack.tasks.close(std::time::Duration::from_secs(1)).await;
            // Its last uploads end, then its live objects leave the bucket.
            self.stack.storage.close().await;
            self.media.forget(&self.stack.id);
            if let Err(e) = self.stack.store.checkpoint() {
                tracing::warn!(channel = %self.stack.id, "closing the channel's database: {e}");
            }
        })
    }
}

/// The composition root's `ChannelHost`: opens a channel's stack in its own data folder.
pub struct DaemonHost {
    pub data_dir: PathBuf,
    pub shared: Shared,
    pub ingest: Arc<Ingest>,
    pub server_admin: AdminAuth,
    /// The server's settings (what each channel reads of the server's: [`channel_view`]).
    pub server_settings: ServerSettingsStore,
    pub tasks: Tasks,
    /// The registry of channels (each channel's stack is given its answers: [`Links`]).
    pub every: Every,
    /// The cluster, when this node is an origin: each channel's chat is linked to it (its room).
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// Ingest's publish check (#42): the admission hook of the channel a right key publishes to, when its
/// `onPublish` is on. The hook is told the key's comment, never the key. A hook that does not answer
/// lets the publisher in (a valid key fails open), logged as a warning.
/// A channel's hook is asked through the guarded client ([`Reach::for_channel`]): a hook it cannot
/// reach is an unreachable hook.
pub fn publish_check(every: Every, private_targets: PrivateTargets) -> crate::ingest::PublishCheck {
    let server_hook = Arc::new(crate::access::hook::AdmissionHook::new());
    let channel_hook = Arc::new(crate::access::hook::AdmissionHook::reaching(Reach::Guarded(private_targets)));
    Arc::new(move |channel: ChannelId, attempt: crate::ingest::PublishAttempt| {
        let entry = every.channel(&channel);
        let stack = entry.as_deref().and_then(stack_of);
        let hook = if stack.is_some_and(|s| s.tenant) { channel_hook.clone() } else { server_hook.clone() };
        let settings = stack.map(|s| s.settings.get());
        Box::pin(async move {
            use crate::access::hook::{Action, AdmissionRequest, Verdict};
            let Some(settings) = settings else { return Ok(()) };
            let cfg = &settings.access.admission_hook;
            if !cfg.on_publish || cfg.url.trim().is_empty() {
                return Ok(());
            }
            let comment = settings
                .server
                .stream_keys
                .iter()
                .find(|k| k.key == attempt.key)
                .map(|k| k.comment.trim().to_string())
                .filter(|c| !c.is_empty());
            let req = AdmissionRequest {
                channel: channel.to_string(),
                action: Action::Publish,
                subject: comment,
                address: Some(attempt.address),
                user_agent: attempt.user_agent,
            };
            match hook.ask(cfg, &req).await {
                Verdict::Allow => Ok(()),
                Verdict::Deny(reason) => Err(reason),
                Verdict::Unreachable(why) => {
                    tracing::warn!(%channel, "admission hook unreachable; the publisher (a valid key) is let in: {why}");
                    Ok(())
                }
            }
        })
    })
}

/// The settings key of the channel's visibility (`AccessSettings::visibility`).
const VISIBILITY_KEY: &str = "visibility";

/// The settings key of the fediverse user name (`FederationSettings::federation_username`).
const FEDERATION_USERNAME_KEY: &str = "federationUsername";

/// What channel `slug` reads of the server's settings: the server's values, its server URL the
/// server's under the channel's prefix.
pub fn channel_view(server: &ServerSettings, slug: &ChannelId) -> ServerSettings {
    ServerSettings { server_url: channel_url(&server.server_url, slug), ..server.clone() }
}

/// Keep what every open channel reads of the server's settings the server's: when the server admin
/// changes a server-wide setting (ports, the server URL, the encoder, SRT, storage, ...), each open
/// channel's settings take it in memory ([`channel_view`]; a channel's database holds none of them).
pub fn follow_server_settings(channels: Arc<crate::channels::Channels>, bus: &Bus, tasks: &Tasks) {
    let mut sub = bus.subscribe("channels: server settings");
    tasks.spawn_until_stopped(Stage::Background, "channels: server settings", async move {
        while let Some(ev) = sub.recv().await {
            let crate::events::Event::SettingsChanged(change) = &*ev else { continue };
            let server = ServerSettings::of(change.after());
            if ServerSettings::of(change.before()) == server {
                continue;
            }
            for (row, ch) in channels.all() {
                match ch.settings().follow_server(&channel_view(&server, &row.slug)).await {
                    Ok(()) => tracing::debug!(channel = %row.slug, "the channel follows the server's settings"),
                    Err(e) => tracing::warn!(channel = %row.slug, "cannot update the channel's server settings: {e}"),
                }
            }
        }
    });
}

impl DaemonHost {
    /// Channel `slug`'s data folder.
    pub fn folder(&self, slug: &ChannelId) -> PathBuf {
        slug.folder_in(&self.data_dir)
    }

    fn open_stack(&self, row: &ChannelRow) -> Result<ChannelHandle, DaemonError> {
        let dir = self.folder(&row.slug);
        std::fs::create_dir_all(&dir)?;
        let store = Store::open(&dir.join("castd.db"))?;
        let bus = Bus::default();
        // The channel's own keys, with the server's settings laid over (its URL under its prefix).
        let server = channel_view(&self.server_settings.get(), &row.slug);
        let settings = SettingsStore::open_channel(store.clone(), bus.clone(), &server)?;
        // A new channel: its name and a stream key.
        let slug = row.slug.clone();
        let name = row.name.clone();
        // Its actor's name, unless its admin chose one: the slug's (one no other channel has).
        let username = match settings.is_stored(FEDERATION_USERNAME_KEY)? {
            true => None,
            false => {
                let others = self.every.usernames(&slug);
                Some(crate::federation::username_for_slug(slug.as_str(), |n| {
                    others.iter().any(|o| o.eq_ignore_ascii_case(n))
                }))
            }
        };
        // A channel made before its visibility was a setting of its own takes the table's.
        let visibility = (!settings.is_stored(VISIBILITY_KEY)?).then_some(row.visibility);
        settings.update_blocking(|s| {
            if let Some(v) = visibility {
                s.access.visibility = v;
            }
            if let Some(username) = username {
                s.federation.federation_username = username;
            }
            if s.instance.name.is_empty() || s.instance.name == crate::config::Settings::default().instance.name {
                s.instance.name = name;
            }
            if s.server.stream_keys.is_empty() {
                let key = crate::password::random_token(24);
                s.server.stream_keys = vec![StreamKey { key, comment: "Default stream key".into() }];
            }
        })?;
        let core = ChannelCore::new(row.slug.clone(), dir, store, settings.clone(), bus);
        let admin = AdminAuth::for_channel(settings, &self.server_admin);
        let links = Links::of(&self.every, &row.slug);
        let stack = ChannelStack::build(core, &self.shared, admin, self.tasks.scope(), false, links)?;
        // The channel's chat is a room of the cluster's (on an origin) before its first connection.
        if let Some(cluster) = &self.cluster {
            cluster.link_channel(&row.slug, row.created_at, stack.chat.clone());
        }
        stack.start(&self.shared.media);
        let (router, lanes) = stack.registry(&self.ingest).into_service_parts();
        Ok(ChannelHandle { stack, router, lanes, media: self.shared.media.clone(), cluster: self.cluster.clone() })
    }
}

/// A channel's public URL: the server's, under `/c/{slug}` (empty while the server's is not set).
pub fn channel_url(server_url: &str, slug: &ChannelId) -> String {
    let base = server_url.trim().trim_end_matches('/');
    if base.is_empty() {
        String::new()
    } else {
        format!("{base}/c/{slug}")
    }
}

impl ChannelHost for DaemonHost {
    fn open(&self, row: &ChannelRow) -> Result<Arc<dyn Channel>, ChannelsError> {
        let handle = self.open_stack(row).map_err(|e| ChannelsError::Open(e.to_string()))?;
        tracing::info!(channel = %row.slug, "channel open: /c/{}/", row.slug);
        Ok(Arc::new(handle))
    }

    fn purge(&self, slug: &ChannelId) -> Result<(), ChannelsError> {
        // Its objects in the bucket go with its files (its replays' too).
        self.shared.storage.purge_channel(slug);
        let dir = self.folder(slug);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ChannelsError::Open(format!("removing {}: {e}", dir.display()))),
        }
    }

    fn retire(&self, slug: &ChannelId) -> Result<Option<PathBuf>, ChannelsError> {
        let dir = self.folder(slug);
        if std::fs::symlink_metadata(&dir).is_err() {
            return Ok(None);
        }
        // `.deleted` is no slug (a slug has no dot): never a channel's folder.
        let aside_root = self.data_dir.join("channels").join(".deleted");
        std::fs::create_dir_all(&aside_root)
            .map_err(|e| ChannelsError::Open(format!("creating {}: {e}", aside_root.display())))?;
        let stamp = chrono::Utc::now().timestamp();
        let mut aside = aside_root.join(format!("{slug}-{stamp}"));
        let mut n = 1;
        while std::fs::symlink_metadata(&aside).is_ok() {
            n += 1;
            aside = aside_root.join(format!("{slug}-{stamp}-{n}"));
        }
        std::fs::rename(&dir, &aside)
            .map_err(|e| ChannelsError::Open(format!("moving {} to {}: {e}", dir.display(), aside.display())))?;
        tracing::info!(channel = %slug, "the channel's files were moved aside to {}", aside.display());
        Ok(Some(aside))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_federation_user_name_key_is_a_settings_key() {
        let s = crate::config::Settings::default();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v[FEDERATION_USERNAME_KEY], serde_json::json!(s.federation.federation_username));
    }

    #[test]
    fn a_channels_url_is_the_servers_under_its_prefix() {
        let ch = ChannelId::new("church-2").unwrap();
        assert_eq!(channel_url("https://box.example/", &ch), "https://box.example/c/church-2");
        assert_eq!(channel_url("", &ch), "");
    }
}
