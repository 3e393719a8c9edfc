//! The composition root: builds every feature's state from the handles it needs, wires the narrow
//! handles between them, merges their routes into one router, and runs the daemon's lifecycle.
//!
//! The order of construction: the [`Server`]'s pieces and the one registry of channels
//! (`channels::Channels`, `server`) first, the WebRTC stack already bound; then the default
//! channel's stack (`channel`), given its answers of the registry at construction, and put in the
//! registry; every other channel's stack is opened through the [`DaemonHost`] when `run` starts (and
//! when the server admin creates one). No handle is filled in after a feature is built.
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
//! 3. `Outputs` ([`STORAGE_DRAIN_TIMEOUT`] and a margin): object storage uploads every channel's last
//!    segments and final playlists (`ChannelStorage::drain`, the channels at once); the HLS and LL-HLS
//!    live windows stop; simulcast targets stop (they unpublished when the stream ended in `Ingest`).
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

pub mod channel;
pub mod edge;
pub mod error;
pub mod links;
pub mod server;

pub use error::DaemonError;

use crate::channels::Channels;
use crate::cluster::{Cluster, ClusterConfig, ClusterDeps};
use crate::events::Bus;
use crate::federation::FederationConfig;
use crate::hardware::Hardware;
use crate::http::{AdminAuth, Registry};
use crate::ingest::Ingest;
use crate::logs::LogRing;
use crate::media::{ChannelId, MediaPlane};
use crate::metrics::MetricsConfig;
use crate::storage::{Storage, StorageDeps};
use crate::store::settings::{ServerSettingsStore, SettingsStore};
use crate::store::Store;
use crate::tasks::{Stage, Tasks};
use crate::yp::{Directory, YpConfig};
pub use channel::DaemonHost;
use channel::{ChannelCore, ChannelHandle, ChannelStack, Shared};
use links::Every;
use server::Capacity;
pub use server::Server;

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
    // `ChannelStorage::drain` returns within its limit; the margin is for the uploads it waits on to end.
    (Stage::Outputs, STORAGE_DRAIN_TIMEOUT.saturating_add(Duration::from_millis(500))),
    (Stage::Delivery, DELIVERY_STOP_TIMEOUT),
    (Stage::Connections, HTTP_STOP_TIMEOUT),
    (Stage::Background, BACKGROUND_STOP_TIMEOUT),
];

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
    /// `--debug-gpu-sample` (test switch): GPU readings the hardware sampler reports instead of NVML's.
    pub debug_gpu_sample: Option<Vec<hwaccel::gpu::GpuSample>>,
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

/// The daemon: the server (its server-wide pieces and the registry of channels) and the default
/// channel's stack, which serves the root.
pub struct Daemon {
    pub server: Server,
    /// The default channel's entry in the registry (its routes are the root's).
    pub default: Arc<ChannelHandle>,
    /// How the server admin's channel routes open, purge and retire a channel's stack.
    host: Arc<DaemonHost>,
}

impl Daemon {
    /// Build the features (no task is started yet). `webrtc`: the WebRTC stack on its bound socket
    /// (none when WebRTC is off).
    pub fn build(config: Config, webrtc: Option<Arc<crate::webrtc::WebRtc>>) -> Result<Daemon, DaemonError> {
        let Config {
            data_dir,
            store,
            settings,
            bus,
            temp_stream_key,
            debug_encoder_fault,
            debug_gpu_sample,
            llhls_part_ms,
            metrics: metrics_config,
            yp: yp_config,
            logs,
            federation: federation_config,
            cluster: cluster_config,
        } = config;
        let tasks = Tasks::new();
        let server_settings = ServerSettingsStore::new(settings.clone());
        // The one registry of channels, before any stack: each is handed its answers.
        let channels = Channels::open(store.clone())?;
        let every = Every::new(&channels);
        let default_id = ChannelId::default_channel();
        let core = ChannelCore::new(default_id.clone(), data_dir.clone(), store.clone(), settings.clone(), bus.clone());
        let media = MediaPlane::new(data_dir.join("hls"), data_dir.clone());
        // The server's capacity: its limits from the server's settings, each channel's planned ladder.
        media.set_capacity(Arc::new(Capacity { server: server_settings.clone(), every: every.clone() }));
        let hardware = Hardware::new(
            settings.clone(),
            core.stream.clone(),
            core.health.clone(),
            core.telemetry.clone(),
            data_dir.clone(),
            debug_gpu_sample,
        );
        // Server-wide: the settings, bucket and upload pool; each channel's stack makes its uploader.
        let storage = Storage::new(StorageDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            telemetry: core.telemetry.clone(),
            tasks: tasks.clone(),
            drain_limit: STORAGE_DRAIN_TIMEOUT,
        });
        let directory = Directory::open(
            settings.clone(),
            bus.clone(),
            core.stream.clone(),
            core.viewers.clone(),
            store.clone(),
            yp_config,
        )?;
        // The server admin's switch for channels' URLs, read from the server settings at each request.
        let private_targets = {
            let server = server_settings.clone();
            crate::outbound::PrivateTargets::new(move || server.get().allow_private_targets)
        };
        let ingest = Arc::new(Ingest {
            settings: settings.clone(),
            temp_stream_key: temp_stream_key.clone(),
            media: media.clone(),
            telemetry: core.telemetry.clone(),
            keys: Arc::new(every.clone()),
            whip: webrtc.clone().map(|webrtc| crate::ingest::whip::Whip { webrtc, tasks: tasks.clone() }),
            key_backoff: crate::ingest::key_backoff(),
            // #42 access: the key's channel's admission hook asked before a publisher goes live.
            publish_check: Some(channel::publish_check(every.clone(), private_targets.clone())),
        });
        let shared = Shared {
            media: media.clone(),
            encoders: hardware.encoders(),
            storage: storage.clone(),
            debug_encoder_fault,
            llhls_part_ms,
            federation: federation_config,
            metrics: metrics_config,
            edge_mark: cluster_config.as_ref().filter(|c| !c.is_edge()).map(|c| c.edge_mark()),
            webrtc: webrtc.clone(),
            hardware: hardware.clone(),
            private_targets,
        };
        let admin = AdminAuth::new(settings.clone());
        // The default channel's stack serves the root: its WebFinger and Prometheus answer for every channel.
        let links = server::root_links(&every, &default_id);
        let stack = ChannelStack::build(core, &shared, admin.clone(), tasks.clone(), temp_stream_key.is_some(), links)?;
        let cluster = match cluster_config {
            Some(c) => {
                // An edge holds every channel's chat sockets, each channel's in a room of its own.
                let open_room = c.is_edge().then(|| edge::open_room(data_dir.clone(), tasks.clone()));
                let deps = ClusterDeps {
                    chat: stack.chat.clone(),
                    viewers: stack.viewers.clone(),
                    metrics: stack.metrics.clone(),
                    open_room,
                    // An origin publishes every open channel's viewer access to its edges (they check passes).
                    directory: Some(server::access_directory(every.clone())),
                };
                Some(Cluster::attach(c, deps)?)
            }
            None => None,
        };
        let default = Arc::new(ChannelHandle::root(stack, media.clone()));
        channels.add_default(default.clone());
        let host = Arc::new(DaemonHost {
            data_dir: data_dir.clone(),
            shared,
            ingest: ingest.clone(),
            server_admin: admin,
            server_settings: server_settings.clone(),
            tasks: tasks.clone(),
            every,
            cluster: cluster.clone(),
        });
        let server = Server {
            store,
            settings,
            server_settings,
            bus,
            media,
            hardware,
            ingest,
            directory,
            logs,
            storage,
            webrtc,
            cluster,
            channels,
            tasks,
        };
        Ok(Daemon { server, default, host })
    }

    /// Every route: the default channel's, the server-wide ones, and the dispatcher of `/c/{slug}`.
    pub fn registry(&self) -> Registry {
        let s = &self.server;
        let mut reg = self.default.stack.registry(&s.ingest);
        crate::hardware::api::routes(&mut reg, s.hardware.clone());
        crate::yp::routes(&mut reg, s.directory.clone());
        crate::logs::routes(&mut reg, s.logs.clone());
        crate::storage::routes(&mut reg, s.storage.clone());
        crate::channels::api::routes(&mut reg, s.channels.clone(), self.host.clone());
        reg.merge(crate::channels::api::dispatcher(s.channels.clone()));
        if let Some(cluster) = s.cluster.as_ref().filter(|c| !c.is_edge()) {
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
    // WebRTC first: WHIP and every channel's WHEP are built on it.
    let webrtc = match listeners.webrtc {
        Some(socket) => Some(crate::webrtc::WebRtc::new(socket, listeners.webrtc_public_ip)?),
        None => None,
    };
    let d = Daemon::build(config, webrtc)?;
    let listen_url = format!("http://{}", listeners.web.local_addr()?);
    info!("web server listening on {listen_url}");
    info!("rtmp server listening on rtmp://{}", listeners.rtmp.local_addr()?);
    if let Some(srt) = &listeners.srt {
        info!("srt server listening on srt://{}", srt.local_addr()?);
    }

    let s = &d.server;
    let tasks = s.tasks.clone();
    if let Some(webrtc) = &s.webrtc {
        crate::webrtc::start(webrtc.clone(), &tasks);
    }
    // Every channel's media readers register before any publisher can go live (ingest starts below).
    d.default.stack.start(&s.media);
    crate::storage::start(s.storage.clone());
    crate::yp::start(s.directory.clone(), &tasks);
    if let Err(e) = crate::hardware::stats::start(s.hardware.clone(), &tasks) {
        warn!("no hardware statistics: {e}");
    }
    let edge = s.cluster.as_ref().filter(|c| c.is_edge());
    if edge.is_none() {
        match s.channels.open_all(d.host.as_ref()) {
            Ok(0) => {}
            Ok(n) => info!(channels = n, "channels open"),
            Err(e) => warn!("cannot read the channel table: {e}"),
        }
        channel::follow_server_settings(s.channels.clone(), &s.bus, &tasks);
    }
    // An edge takes no broadcast: its RTMP listener is closed, SRT is not started, and it does not probe
    // the encoders (it transcodes nothing; its admin API is the origin's).
    if edge.is_none() {
        crate::hardware::encoders::spawn_startup_probe(s.hardware.clone(), &tasks);
        crate::ingest::start(s.ingest.clone(), listeners.rtmp, &tasks);
        if let Some(srt) = listeners.srt {
            crate::ingest::srt::start(s.ingest.clone(), srt, &tasks);
        }
    }
    if let Some(cluster) = &s.cluster {
        crate::cluster::start(cluster, &tasks);
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
    crate::systemd::announce_ready(d.default.stack.server.stream.clone(), listen_url, &tasks);
    crate::systemd::spawn_watchdog(&tasks);

    shutdown.await;
    crate::systemd::stopping();
    // The stages stop in order (see the module doc); overruns are logged by `Tasks::stop`.
    tasks.shutdown(&SHUTDOWN_PLAN, BACKGROUND_STOP_TIMEOUT).await;
    d.server.store.checkpoint()?;
    info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stage at its limit (and overrunning it) still ends before systemd kills castd.
    #[test]
    fn the_shutdown_plan_fits_in_systemds_stop_timeout() {
        let unit = include_str!("../../systemd/castd.service");
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
