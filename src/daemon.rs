//! The composition root: builds every feature's state from the handles it needs, wires the narrow
//! handles between them, merges their routes into one router, and runs the daemon's lifecycle.
//!
//! This is the only module that knows every feature. `main.rs` (and the tests) call `prepare` (open the
//! database, apply the saved flags and first-start secrets), bind the listeners, then `run`.
//!
//! Shutdown, when the `shutdown` future resolves (SIGTERM): the RTMP listener stops and the live
//! broadcaster is dropped, so the transcode supervisor finishes the stream the normal way (the worker's
//! stdin is closed, it writes its last segments, every playlist gets `#EXT-X-ENDLIST`, STREAM_STOPPED is
//! published); the webhook dispatcher delivers what is on the bus (or keeps it in the outbox for the next
//! start); chat sockets get a close frame; the web server stops after its open requests; the metrics
//! task saves the viewer peak; the database is checkpointed. Every step has a time limit so the whole
//! stays within systemd's stop timeout.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::api::Server;
use crate::chat::{Chat, ChatDeps};
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
use crate::schedule::Schedule;
use crate::storage::{Storage, StorageDeps};
use crate::store::settings::SettingsStore;
use crate::store::Store;
use crate::stream::{StreamWriter, Viewers};
use crate::telemetry::Telemetry;
use crate::tokens::Tokens;
use crate::transcode::{TranscodeDeps, Transcoder};
use crate::webhooks::Webhooks;
use crate::yp::{Directory, YpConfig};

/// Longest wait for a live stream to finish at shutdown (worker flush + ENDLIST).
pub const STREAM_STOP_TIMEOUT: Duration = Duration::from_secs(6);
/// Longest wait at shutdown for object storage to upload the stream's last segments and playlists.
pub const STORAGE_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait at shutdown for go-live notifications being sent.
pub const NOTIFY_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for open HTTP requests at shutdown.
pub const HTTP_STOP_TIMEOUT: Duration = Duration::from_secs(2);

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
}

/// What the daemon runs with (the command line, resolved).
pub struct Config {
    pub data_dir: PathBuf,
    pub store: Store,
    pub settings: SettingsStore,
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
}

/// The bound listeners.
pub struct Listeners {
    pub web: TcpListener,
    pub rtmp: TcpListener,
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
}

impl Daemon {
    /// Build the features (no task is started yet).
    pub fn build(config: Config) -> Result<Daemon, DaemonError> {
        let Config {
            data_dir,
            store,
            settings,
            temp_stream_key,
            debug_encoder_fault,
            llhls_part_ms,
            metrics: metrics_config,
            yp: yp_config,
            logs,
            federation: federation_config,
        } = config;
        let bus = Bus::default();
        let telemetry = Arc::new(Telemetry::default());
        let health = HealthHub::new(bus.clone());
        let viewers: Viewers = Arc::default();
        let (stream_writer, stream) = StreamWriter::new();
        let tokens = Tokens::open(store.clone())?;
        let admin = AdminAuth::new(settings.clone(), bus.clone());
        let hardware =
            Hardware::new(settings.clone(), stream.clone(), health.clone(), telemetry.clone(), data_dir.clone());
        let metrics = Metrics::open(
            metrics_config,
            MetricsDeps {
                store: store.clone(),
                settings: settings.clone(),
                bus: bus.clone(),
                stream: stream.clone(),
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
        })?;
        let hls_dir = data_dir.join("hls");
        let media = MediaPlane::new(hls_dir.clone());
        let transcoder = Transcoder::new(TranscodeDeps {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream_writer,
            viewers: viewers.clone(),
            health: health.clone(),
            telemetry: telemetry.clone(),
            encoders: hardware.encoders(),
            hls_dir: hls_dir.clone(),
            media: media.clone(),
            images_dir: data_dir.clone(),
            debug_encoder_fault,
            llhls_part_ms,
        });
        let ingest = Arc::new(Ingest {
            settings: settings.clone(),
            temp_stream_key: temp_stream_key.clone(),
            media: media.clone(),
            transcoder: transcoder.clone(),
            telemetry: telemetry.clone(),
        });
        let webhooks = Arc::new(Webhooks::open(store.clone(), telemetry.clone())?);
        let notifications = Arc::new(Notifications::open(store.clone())?);
        let directory =
            Directory::open(settings.clone(), bus.clone(), stream.clone(), viewers.clone(), store.clone(), yp_config)?;
        let public_files = PublicFiles::open(data_dir.join("public"))?;
        let federation =
            Federation::open(store.clone(), settings.clone(), bus.clone(), chat.clone(), federation_config)?;
        let server = Arc::new(Server {
            settings: settings.clone(),
            bus: bus.clone(),
            stream: stream.clone(),
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
        });
        let notify = NotifyState { notifications, settings, bus: bus.clone(), users: chat.clone() };
        let ll = crate::llhls::LlHls::new(hls_dir.clone());
        let hls = Arc::new(Hls {
            hls_dir,
            images_dir: data_dir,
            metrics: metrics.clone(),
            live: Default::default(),
            ll,
            remote: Some(storage.clone()),
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
        crate::web::routes(&mut reg);
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

    let dispatcher = crate::webhooks::start(d.webhooks.clone(), &d.bus);
    let stop_notify = CancellationToken::new();
    let notify_task = crate::notifications::start(d.notify.clone(), &d.bus, stop_notify.clone());
    let federation_tasks = crate::federation::start(d.federation.clone(), &d.bus);
    let chat_task = crate::chat::start(&d.chat);
    let indieauth_task = crate::indieauth::start(d.indieauth.clone());
    let hls_task = crate::hls::start(d.hls.clone(), &d.media, &d.bus);
    let llhls_task = crate::llhls::start(d.hls.ll.clone(), &d.media, &d.bus);
    let storage_task = crate::storage::start(d.storage.clone());
    let warnings_task = crate::api::warnings::start(d.server.clone());
    let yp_task = crate::yp::start(d.directory.clone());
    let schedule_task = crate::schedule::start(d.schedule.clone());
    let sampler = match crate::hardware::stats::start(d.hardware.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!("no hardware statistics: {e}");
            None
        }
    };
    let probe_task = crate::hardware::encoders::spawn_startup_probe(d.hardware.clone());
    let metrics_tasks = crate::metrics::start(d.metrics.clone());
    let stop_ingest = CancellationToken::new();
    let rtmp_task = tokio::spawn(crate::ingest::serve(d.ingest.clone(), listeners.rtmp, stop_ingest.clone()));

    let web = d.registry().into_service();
    let stop_http = CancellationToken::new();
    // Connections send in-memory segments with sendfile (`http::zerocopy`); the HLS requests take the
    // fast lane (`http::lanes`).
    let listener = crate::http::zerocopy::ZeroCopyListener(listeners.web);
    let serve =
        axum::serve(listener, web.into_make_service()).with_graceful_shutdown(stop_http.clone().cancelled_owned());
    let http_task = tokio::spawn(async move { serve.await });
    info!("castd is ready");
    // READY=1 + STATUS= (stream state) and WATCHDOG=1 keep-alives when run by systemd; no-ops otherwise.
    let status_task = crate::systemd::announce_ready(d.server.stream.clone(), listen_url);
    let watchdog_task = crate::systemd::spawn_watchdog();

    shutdown.await;
    crate::systemd::stopping();

    // 1. The stream ends the normal way: ENDLIST, STREAM_STOPPED.
    stop_ingest.cancel();
    let _ = rtmp_task.await;
    if tokio::time::timeout(STREAM_STOP_TIMEOUT, d.transcoder.wait_idle()).await.is_err() {
        warn!("the stream did not finish within {STREAM_STOP_TIMEOUT:?}; stopping anyway");
    }
    // 2. Object storage uploads the stream's last segments and final playlists (time-limited).
    d.storage.drain(STORAGE_DRAIN_TIMEOUT).await;
    // 3. Webhooks: deliver what is on the bus, keep the rest for the next start. Go-live notifications
    //    being sent are finished (time-limited), not cut off.
    dispatcher.shutdown().await;
    stop_notify.cancel();
    let mut notify_task = notify_task;
    if tokio::time::timeout(NOTIFY_DRAIN_TIMEOUT, &mut notify_task).await.is_err() {
        warn!("go-live notifications still sending after {NOTIFY_DRAIN_TIMEOUT:?}; stopping them");
        notify_task.abort();
    }
    // 4. Chat sockets get a close frame; then the web server stops after its open requests.
    d.chat.close_all();
    stop_http.cancel();
    match tokio::time::timeout(HTTP_STOP_TIMEOUT, http_task).await {
        Ok(Ok(Err(e))) => warn!("web server: {e}"),
        Err(_) => warn!("open requests did not finish within {HTTP_STOP_TIMEOUT:?}"),
        _ => {}
    }
    let tasks = [
        Some(chat_task),
        Some(indieauth_task),
        Some(hls_task),
        Some(llhls_task),
        Some(probe_task),
        Some(warnings_task),
        Some(yp_task),
        Some(storage_task),
        Some(schedule_task),
    ];
    for task in tasks.into_iter().chain([status_task, watchdog_task]).flatten() {
        task.abort();
    }
    federation_tasks.stop();
    if let Some(s) = sampler {
        s.stop();
    }
    metrics_tasks.stop().await?;
    d.store.checkpoint()?;
    info!("stopped");
    Ok(())
}
