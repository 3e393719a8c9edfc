//! The composition root: builds every feature's state from the handles it needs, wires the narrow
//! handles between them, merges their routes into one router, and runs the daemon's lifecycle.
//!
//! This is the only module that knows every feature. `main.rs` (and the tests) call `prepare` (open the
//! database, apply the saved flags and first-start secrets), bind the listeners, then `run`.
//!
//! Every long-running task of every feature runs on one [`Tasks`] (`tasks`): each feature's `start`
//! (or its constructor, for features that spawn per connection or per stream) registers its tasks
//! once, each in its shutdown [`Stage`].
//!
//! Shutdown, when the `shutdown` future resolves (SIGTERM), stops the stages in this order, each within
//! its time limit ([`SHUTDOWN_PLAN`]); a stage that overruns is logged with the names of the tasks it
//! waited for, and those are dropped:
//! 1. `Ingest` ([`INGEST_STOP_TIMEOUT`]): the RTMP listener stops and the live broadcaster is dropped.
//! 2. `Stream` ([`STREAM_STOP_TIMEOUT`]): the transcode supervisor finishes the stream the normal way
//!    (the worker's stdin is closed, it writes its last segments, every playlist gets `#EXT-X-ENDLIST`,
//!    STREAM_STOPPED is published).
//! 3. `Outputs` ([`STORAGE_DRAIN_TIMEOUT`] and a margin): object storage uploads the stream's last
//!    segments and final playlists (`Storage::drain`); the HLS and LL-HLS live windows stop; simulcast
//!    targets stop (they unpublished when the stream ended in `Ingest`).
//! 4. `Delivery` ([`DELIVERY_STOP_TIMEOUT`]): the webhook dispatcher delivers what is on the bus (or
//!    keeps it in the outbox for the next start, within `webhooks::DRAIN_TIMEOUT`); go-live
//!    notifications being sent are finished ([`NOTIFY_DRAIN_TIMEOUT`]); federation's posts in flight
//!    finish (its queue table keeps the rest for the next start).
//! 5. `Connections` ([`HTTP_STOP_TIMEOUT`]): chat sockets get a close frame; the web server stops after
//!    its open requests.
//! 6. `Background` ([`BACKGROUND_STOP_TIMEOUT`]): timers, samplers, probes and pollers stop; the metrics
//!    task saves the viewer peak.
//!
//! Then the database is checkpointed. The limits add up to less than systemd's stop timeout
//! (`TimeoutStopSec` in `systemd/castd.service`; a unit test checks).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::api::Server;
use crate::chat::{Chat, ChatDeps};
use crate::cluster::{Cluster, ClusterConfig};
use crate::events::Bus;
use crate::federation::{Federation, FederationConfig};
use crate::hardware::Hardware;
use crate::health::HealthHub;
use crate::hls::Hls;
use crate::http::{AdminAuth, Registry};
use crate::indieauth::{IndieAuth, IndieAuthConfig};
use crate::ingest::Ingest;
use crate::logs::LogRing;
use crate::media::MediaPlane;
use crate::metrics::{Metrics, MetricsConfig, MetricsDeps};
use crate::notifications::{Notifications, NotifyState};
use crate::public_files::PublicFiles;
use crate::replays::{Replays, ReplaysDeps};
use crate::schedule::Schedule;
use crate::simulcast::{Simulcast, SimulcastDeps};
use crate::storage::{Storage, StorageDeps};
use crate::store::settings::SettingsStore;
use crate::store::Store;
use crate::stream::{StreamWriter, Viewers};
use crate::tasks::{Stage, Tasks};
use crate::telemetry::Telemetry;
use crate::tokens::Tokens;
use crate::transcode::{TranscodeDeps, Transcoder};
use crate::webhooks::Webhooks;
use crate::yp::{Directory, YpConfig};

/// Longest wait at shutdown for the RTMP listener and connections to stop.
pub const INGEST_STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for a live stream to finish at shutdown (worker flush + ENDLIST).
pub const STREAM_STOP_TIMEOUT: Duration = Duration::from_secs(6);
/// Longest wait at shutdown for object storage to upload the stream's last segments and playlists.
pub const STORAGE_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait at shutdown for go-live notifications being sent.
pub const NOTIFY_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait at shutdown for the delivery stage: go-live notifications being sent
/// ([`NOTIFY_DRAIN_TIMEOUT`]) and webhooks (their drain, then the outbox write).
pub const DELIVERY_STOP_TIMEOUT: Duration = {
    let webhooks = crate::webhooks::DRAIN_TIMEOUT.as_millis() as u64 + 2_000;
    let notify = NOTIFY_DRAIN_TIMEOUT.as_millis() as u64;
    Duration::from_millis(if webhooks > notify { webhooks } else { notify })
};
/// Longest wait for open HTTP requests at shutdown.
pub const HTTP_STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait at shutdown for the background tasks (the metrics task saves the viewer peak).
pub const BACKGROUND_STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// The shutdown stages' time limits, in drain order (see the module doc).
pub const SHUTDOWN_PLAN: [(Stage, Duration); 6] = [
    (Stage::Ingest, INGEST_STOP_TIMEOUT),
    (Stage::Stream, STREAM_STOP_TIMEOUT),
    // `Storage::drain` returns within its limit; the margin is for the uploads it waits on to end.
    (Stage::Outputs, STORAGE_DRAIN_TIMEOUT.saturating_add(Duration::from_millis(500))),
    (Stage::Delivery, DELIVERY_STOP_TIMEOUT),
    (Stage::Connections, HTTP_STOP_TIMEOUT),
    (Stage::Background, BACKGROUND_STOP_TIMEOUT),
];

/// Errors of start-up and shutdown.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("chat: {0}")]
    Chat(#[from] crate::chat::ChatError),
    #[error("notifications: {0}")]
    Notify(#[from] crate::notifications::NotifyError),
    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::MetricsError),
    #[error("indieauth: {0}")]
    IndieAuth(#[from] crate::indieauth::IndieAuthError),
    #[error("federation: {0}")]
    Federation(#[from] crate::federation::FedError),
    #[error("directory: {0}")]
    Yp(#[from] crate::yp::YpError),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("replays: {0}")]
    Replays(#[from] crate::replays::ReplaysError),
    #[error("cluster: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
}

/// What the daemon runs with (the command line, resolved).
pub struct Config {
    pub data_dir: PathBuf,
    pub store: Store,
    /// The settings, which announce their changes on `bus`.
    pub settings: SettingsStore,
    /// The control bus.
    pub bus: Bus,
    /// `--streamkey`: valid for this run only.
    pub temp_stream_key: Option<String>,
    /// `--debug-encoder-fault` (test switch).
    pub debug_encoder_fault: Option<f64>,
    /// `--llhls-part-ms`: LL-HLS part length.
    pub llhls_part_ms: u32,
    pub metrics: MetricsConfig,
    /// Directory (YP) ping timing.
    pub yp: YpConfig,
    /// The admin log ring; `main.rs` installed its layer in the logging setup.
    pub logs: LogRing,
    /// Federation switches and timings.
    pub federation: FederationConfig,
    /// `--redis-url`, `--cluster-secret`, `--origin`: `None` on a single box.
    pub cluster: Option<ClusterConfig>,
}

/// The bound listeners.
pub struct Listeners {
    pub web: TcpListener,
    pub rtmp: TcpListener,
    /// The SRT server's UDP socket; `None` when SRT is off.
    pub srt: Option<tokio::net::UdpSocket>,
    /// The WebRTC UDP socket (WHIP); `None` when WebRTC is off.
    pub webrtc: Option<tokio::net::UdpSocket>,
    /// `--webrtc-public-ip`: offered as an ICE candidate beside the socket's address.
    pub webrtc_public_ip: Option<std::net::IpAddr>,
}

/// Every feature's state, built and wired.
pub struct Daemon {
    pub store: Store,
    pub bus: Bus,
    /// The media plane (publisher slot, typed feed, retention).
    pub media: Arc<MediaPlane>,
    pub chat: Arc<Chat>,
    pub metrics: Arc<Metrics>,
    pub hardware: Arc<Hardware>,
    pub transcoder: Arc<Transcoder>,
    pub ingest: Arc<Ingest>,
    pub webhooks: Arc<Webhooks>,
    pub notify: NotifyState,
    pub indieauth: Arc<IndieAuth>,
    pub server: Arc<Server>,
    pub hls: Arc<Hls>,
    pub tokens: Tokens,
    pub admin: AdminAuth,
    pub directory: Arc<Directory>,
    pub public_files: Arc<PublicFiles>,
    pub logs: LogRing,
    pub storage: Arc<Storage>,
    pub federation: Arc<Federation>,
    pub schedule: Arc<Schedule>,
    /// WHEP playback (the WebRTC stack is set once its socket is bound).
    pub whep: Arc<crate::whep::Whep>,
    pub simulcast: Arc<Simulcast>,
    pub replays: Arc<Replays>,
    /// The cluster (origin or edge), when `--redis-url` was given.
    pub cluster: Option<Arc<Cluster>>,
    /// Every long-running task (see the module doc).
    pub tasks: Tasks,
}

impl Daemon {
    /// Build the features (no task is started yet).
    pub fn build(config: Config) -> Result<Daemon, DaemonError> {
        let Config {
            data_dir,
            store,
            settings,
            bus,
            temp_stream_key,
            debug_encoder_fault,
            llhls_part_ms,
            metrics: metrics_config,
            yp: yp_config,
            logs,
            federation: federation_config,
            cluster: cluster_config,
        } = config;
        let tasks = Tasks::new();
        let telemetry = Arc::new(Telemetry::default());
        let health = HealthHub::new(bus.clone());
        let viewers: Viewers = Arc::default();
        let (stream_writer, stream) = StreamWriter::new();
        let hls_dir = data_dir.join("hls");
        let media = MediaPlane::new(hls_dir.clone(), data_dir.clone());
        let tokens = Tokens::open(store.clone())?;
        let admin = AdminAuth::new(settings.clone());
        let hardware =
            Hardware::new(settings.clone(), stream.clone(), health.clone(), telemetry.clone(), data_dir.clone());
        let metrics = Metrics::open(
            metrics_config,
            MetricsDeps {
                store: store.clone(),
                settings: settings.clone(),
                bus: bus.clone(),
                stream: stream.clone(),
                media: media.clone(),
                counts: viewers.clone(),
                health: health.clone(),
                telemetry: telemetry.clone(),
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
            scheduled_chat_open: Arc::new(move |online| schedule_watch.chat_open(online, chrono::Utc::now())),
            tasks: tasks.clone(),
        })?;
        let cluster = match cluster_config {
            Some(c) => Some(Cluster::attach(c, chat.clone(), viewers.clone(), metrics.clone())?),
            None => None,
        };
        let transcoder = Transcoder::new(TranscodeDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream_writer,
            viewers: viewers.clone(),
            health: health.clone(),
            telemetry: telemetry.clone(),
            encoders: hardware.encoders(),
            media: media.clone(),
            debug_encoder_fault,
            llhls_part_ms,
            tasks: tasks.clone(),
        });
        let ingest = Arc::new(Ingest {
            settings: settings.clone(),
            temp_stream_key: temp_stream_key.clone(),
            media: media.clone(),
            telemetry: telemetry.clone(),
            whip: Default::default(),
            key_backoff: crate::ingest::key_backoff(),
        });
        let webhooks = Arc::new(Webhooks::open(store.clone(), telemetry.clone(), tasks.clone())?);
        let notifications = Arc::new(Notifications::open(store.clone())?);
        let directory =
            Directory::open(settings.clone(), bus.clone(), stream.clone(), viewers.clone(), store.clone(), yp_config)?;
        let public_files = PublicFiles::open(data_dir.join("public"))?;
        let federation = Federation::open(
            store.clone(),
            settings.clone(),
            bus.clone(),
            chat.clone(),
            federation_config,
            tasks.clone(),
        )?;
        let server = Arc::new(Server {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
            media: media.clone(),
            viewers,
            health: health.clone(),
            encoders: hardware.encoders(),
            tokens: tokens.clone(),
            data_dir: data_dir.clone(),
            stream_key_overridden: temp_stream_key.is_some(),
            vapid_public_key: notifications.public_key().to_string(),
            follower_count: federation.follower_count.clone(),
            schedule: schedule.watch(),
        });
        let indieauth = IndieAuth::new(IndieAuthConfig::from_env(), settings.clone(), chat.clone())?;
        let storage = Storage::new(StorageDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
            health: health.clone(),
            telemetry: telemetry.clone(),
            hls_dir: hls_dir.clone(),
            media: media.clone(),
            tasks: tasks.clone(),
        });
        let settings_for_whep = settings.clone();
        let simulcast = Simulcast::new(SimulcastDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            media: media.clone(),
            health: health.clone(),
            tasks: tasks.clone(),
        });
        let replays = Replays::open(ReplaysDeps {
            store: store.clone(),
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
            health: health.clone(),
            media: media.clone(),
            data_dir: data_dir.clone(),
            hls_dir: hls_dir.clone(),
            users: chat.clone(),
            admin: admin.clone(),
            storage: storage.clone(),
            tasks: tasks.clone(),
        })?;
        let notify = NotifyState { notifications, settings, users: chat.clone() };
        let ll = crate::llhls::LlChannels::new(hls_dir.clone());
        let hls = Arc::new(Hls {
            hls_dir,
            images_dir: data_dir,
            metrics: metrics.clone(),
            live: Default::default(),
            ll,
            remote: Some(storage.clone()),
            edge_mark: cluster.as_ref().filter(|c| !c.is_edge()).map(|c| c.edge_mark.clone()),
        });
        let whep = Arc::new(crate::whep::Whep {
            settings: settings_for_whep,
            stream: stream.clone(),
            media: media.clone(),
            store: store.clone(),
            metrics: metrics.clone(),
            webrtc: Default::default(),
            per_address: crate::whep::per_address_caps(),
        });
        Ok(Daemon {
            store,
            bus,
            media,
            chat,
            metrics,
            hardware,
            transcoder,
            ingest,
            webhooks,
            notify,
            indieauth,
            server,
            hls,
            tokens,
            admin,
            directory,
            public_files,
            logs,
            storage,
            federation,
            schedule,
            whep,
            simulcast,
            replays,
            cluster,
            tasks,
        })
    }

    /// Every route of every feature.
    pub fn registry(&self) -> Registry {
        let mut reg = Registry::new(self.admin.clone());
        crate::api::routes(&mut reg, self.server.clone());
        crate::chat::api::routes(&mut reg, self.chat.clone());
        crate::chat::integrations::routes(&mut reg, self.chat.clone());
        crate::metrics::api::routes(&mut reg, self.metrics.clone());
        crate::hardware::api::routes(&mut reg, self.hardware.clone());
        crate::tokens::routes(&mut reg, self.tokens.clone());
        crate::webhooks::routes(&mut reg, self.webhooks.clone());
        crate::notifications::routes(&mut reg, self.notify.clone());
        crate::indieauth::routes(&mut reg, self.indieauth.clone());
        crate::federation::routes(&mut reg, self.federation.clone());
        crate::ingest::routes(&mut reg, self.ingest.clone());
        crate::hls::routes(&mut reg, self.hls.clone());
        crate::yp::routes(&mut reg, self.directory.clone());
        crate::public_files::routes(&mut reg, self.public_files.clone());
        crate::logs::routes(&mut reg, self.logs.clone());
        crate::storage::routes(&mut reg, self.storage.clone());
        crate::schedule::routes(&mut reg, self.schedule.clone());
        crate::whep::routes(&mut reg, self.whep.clone());
        crate::simulcast::routes(&mut reg, self.simulcast.clone());
        crate::replays::routes(&mut reg, self.replays.clone(), self.tokens.clone());
        crate::web::routes(&mut reg);
        if let Some(cluster) = self.cluster.as_ref().filter(|c| !c.is_edge()) {
            crate::cluster::api::routes(&mut reg, cluster.clone());
        }
        reg
    }
}

/// Run the daemon on the bound listeners until `shutdown` resolves, then stop as the module doc says.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let d = Daemon::build(config)?;
    let listen_url = format!("http://{}", listeners.web.local_addr()?);
    info!("web server listening on {listen_url}");
    info!("rtmp server listening on rtmp://{}", listeners.rtmp.local_addr()?);
    if let Some(srt) = &listeners.srt {
        info!("srt server listening on srt://{}", srt.local_addr()?);
    }

    let tasks = d.tasks.clone();
    crate::webhooks::start(d.webhooks.clone(), &d.bus);
    crate::notifications::start(d.notify.clone(), &d.bus, &tasks);
    crate::federation::start(d.federation.clone(), &d.bus);
    crate::chat::start(&d.chat);
    crate::indieauth::start(d.indieauth.clone(), &tasks);
    // The media plane's readers register before any publisher can go live (ingest starts below): the
    // transcoder first, then every output.
    let transcode = d.media.reader("transcode");
    tasks.spawn_until_stopped(Stage::Stream, "transcode: broadcasts", d.transcoder.clone().run(transcode));
    crate::hls::start(d.hls.clone(), &d.media, &tasks);
    crate::llhls::start(d.hls.ll.clone(), &d.media, &tasks);
    crate::storage::start(d.storage.clone(), STORAGE_DRAIN_TIMEOUT);
    crate::simulcast::start(d.simulcast.clone(), &tasks);
    crate::replays::start(d.replays.clone());
    crate::api::warnings::start(d.server.clone(), &tasks);
    crate::yp::start(d.directory.clone(), &tasks);
    crate::schedule::start(d.schedule.clone(), &tasks);
    if let Err(e) = crate::hardware::stats::start(d.hardware.clone(), &tasks) {
        warn!("no hardware statistics: {e}");
    }
    crate::metrics::start(d.metrics.clone(), &tasks);
    let edge = d.cluster.as_ref().filter(|c| c.is_edge());
    // An edge takes no broadcast: its RTMP listener is closed, SRT is not started, and it does not probe
    // the encoders (it transcodes nothing; its admin API is the origin's).
    if edge.is_none() {
        crate::hardware::encoders::spawn_startup_probe(d.hardware.clone(), &tasks);
        crate::ingest::start(d.ingest.clone(), listeners.rtmp, &tasks);
        if let Some(srt) = listeners.srt {
            crate::ingest::srt::start(d.ingest.clone(), srt, &tasks);
        }
    }
    if let Some(cluster) = &d.cluster {
        crate::cluster::start(cluster, &tasks);
    }
    if let Some(socket) = listeners.webrtc {
        let webrtc = crate::webrtc::WebRtc::new(socket, listeners.webrtc_public_ip)?;
        crate::webrtc::start(webrtc.clone(), &tasks);
        let _ = d.whep.webrtc.set((webrtc.clone(), tasks.clone()));
        crate::whep::start(d.whep.clone(), &tasks);
        let _ = d.ingest.whip.set(crate::ingest::whip::Whip { webrtc, tasks: tasks.clone() });
    }

    let web = match edge {
        Some(cluster) => {
            let cluster = cluster.clone();
            d.registry().into_service_behind(move |local| crate::cluster::proxy::front(cluster, local))
        }
        None => d.registry().into_service(),
    };
    // Connections send in-memory segments with sendfile (`http::zerocopy`); the HLS requests take the
    // fast lane (`http::lanes`). The server stops after its open requests when `Connections` stops.
    let listener = crate::http::zerocopy::ZeroCopyListener(listeners.web);
    let serve = axum::serve(listener, web.into_make_service())
        .with_graceful_shutdown(tasks.token(Stage::Connections).cancelled_owned());
    tasks.spawn(Stage::Connections, "web server", async move {
        if let Err(e) = serve.await {
            warn!("web server: {e}");
        }
    });
    info!("castd is ready");
    // READY=1 + STATUS= (stream state) and WATCHDOG=1 keep-alives when run by systemd; no-ops otherwise.
    crate::systemd::announce_ready(d.server.stream.clone(), listen_url, &tasks);
    crate::systemd::spawn_watchdog(&tasks);

    shutdown.await;
    crate::systemd::stopping();
    // The stages stop in order (see the module doc); overruns are logged by `Tasks::stop`.
    tasks.shutdown(&SHUTDOWN_PLAN, BACKGROUND_STOP_TIMEOUT).await;
    d.store.checkpoint()?;
    info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stage at its limit (and overrunning it) still ends before systemd kills castd.
    #[test]
    fn the_shutdown_plan_fits_in_systemds_stop_timeout() {
        let unit = include_str!("../systemd/castd.service");
        let secs: u64 = unit
            .lines()
            .find_map(|l| l.strip_prefix("TimeoutStopSec="))
            .and_then(|v| v.trim().trim_end_matches('s').parse().ok())
            .expect("TimeoutStopSec=<n>s in systemd/castd.service");
        let worst: Duration = SHUTDOWN_PLAN.iter().map(|(_, limit)| *limit + crate::tasks::DROP_GRACE).sum();
        assert!(worst + Duration::from_secs(1) < Duration::from_secs(secs), "worst case {worst:?} vs {secs} s");
        let stages: Vec<Stage> = SHUTDOWN_PLAN.iter().map(|(s, _)| *s).collect();
        assert_eq!(stages, Stage::ALL, "one limit per stage, in drain order");
    }
}
