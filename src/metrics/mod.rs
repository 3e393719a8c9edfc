//! Playback metrics: who is watching (viewers), how playback goes (CMCD and legacy player reports,
//! per-client entries, time series reduced every window), stream health, and the Prometheus
//! exposition. `Metrics` is reachable as `App.metrics`.
//!
//! Seams for other modules (all cheap, callable from any thread):
//! * HLS handler: `viewers::touch` / `viewers::touch_request` on every playlist fetch,
//!   `cmcd::harvest_request` on every HLS request, `playback::record_server_download` when it timed a
//!   segment download;
//! * transcoder: `Metrics::set_encoder_stats`, `set_encoder_in_use`, `set_ingest_bitrate_kbps`,
//!   `set_health_notice`, `clear_stream`;
//! * chat: `set_chat_clients`, `set_chat_users`, `set_chat_messages`;
//! * webhooks: `webhook_delivery`;
//! * hardware stats: `set_cpu_percent`, `set_gpu_utilization`; the health they show is `App.health`.
//!
//! Background work (`start`): one task prunes idle viewers and sessions every `prune_interval`, and
//! at every window (30 s) samples the viewer count, reduces the player reports into the series,
//! recomputes health and saves the overall viewer peak (at most once a minute); it also follows the
//! bus for stream start/stop. It stops when `Tasks::stop` is called at shutdown.
//!
//! Test/debug switches (environment, read once at start-up; they exist so tests are deterministic
//! and quick, not for production): `CASTD_METRICS_WINDOW_SECS` (window length, default 30) and
//! `CASTD_VIEWER_IDLE_SECS` (viewer expiry, default 15). Both take seconds, fractions allowed.

pub mod api;
pub mod cmcd;
pub mod health;
pub mod playback;
pub mod prometheus;
pub mod series;
pub mod viewers;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::events::EventType;
use crate::store::StoreError;

/// Errors of the metrics module.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("metrics task failed: {0}")]
    Task(String),
}

/// Intervals (see the module doc for the switches).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricsConfig {
    /// Reduction window of the series, viewer-count sampling and health (Owncast: 2 min).
    pub window: Duration,
    /// A viewer not seen for this long is no longer active (Owncast: 15 s).
    pub viewer_idle: Duration,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { window: Duration::from_secs(30), viewer_idle: Duration::from_secs(15) }
    }
}

fn env_secs(name: &str) -> Option<Duration> {
    let raw = std::env::var(name).ok()?;
    match raw.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Some(Duration::from_secs_f64(s)),
        _ => {
            tracing::warn!("ignoring {name}={raw}: expected seconds between 0 and 86400");
            None
        }
    }
}

impl MetricsConfig {
    /// The defaults, overridden by the test/debug environment switches.
    pub fn from_env() -> Self {
        let d = Self::default();
        Self {
            window: env_secs("CASTD_METRICS_WINDOW_SECS").unwrap_or(d.window),
            viewer_idle: env_secs("CASTD_VIEWER_IDLE_SECS").unwrap_or(d.viewer_idle),
        }
    }

    /// How often idle viewers are pruned: every 5 s (Owncast), more often for short idle times.
    pub fn prune_interval(&self) -> Duration {
        (self.viewer_idle / 3).clamp(Duration::from_millis(100), Duration::from_secs(5))
    }

    /// A playback session without reports for this long is dropped.
    pub fn session_timeout(&self) -> Duration {
        self.viewer_idle * 4
    }
}

/// The metrics state hung off `App`.
pub struct Metrics {
    pub config: MetricsConfig,
    pub viewers: viewers::Viewers,
    pub playback: playback::Playback,
    pub series: Mutex<series::VideoSeries>,
    pub signals: health::Signals,
    pub prom: prometheus::Prom,
    /// The encoder of each variant, as last set (so a change replaces its Prometheus series).
    encoders_in_use: Mutex<std::collections::HashMap<usize, String>>,
    /// Webhook delivery totals already counted (delivered, failed).
    webhooks_seen: Mutex<(u64, u64)>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(MetricsConfig::default())
    }
}

impl Metrics {
    pub fn new(config: MetricsConfig) -> Self {
        Self {
            config,
            viewers: viewers::Viewers::default(),
            playback: playback::Playback::default(),
            series: Mutex::new(series::VideoSeries::default()),
            signals: health::Signals::default(),
            prom: prometheus::Prom::new(),
            encoders_in_use: Mutex::new(std::collections::HashMap::new()),
            webhooks_seen: Mutex::new((0, 0)),
        }
    }

    /// Transcoder seam: the latest frames per second and speed (realtime factor) of `variant`.
    pub fn set_encoder_stats(&self, variant: usize, fps: f64, speed: f64) {
        let label = prometheus::variant_label(variant);
        if fps.is_finite() {
            self.prom.encode_fps.get_or_create(&label).set(fps);
        }
        if speed.is_finite() {
            self.prom.encode_speed.get_or_create(&label).set(speed);
        }
        self.signals.encoder_speed(variant, speed);
    }

    /// Transcoder seam: the encoder `variant` uses (`libx264`, `h264_nvenc`, ...).
    pub fn set_encoder_in_use(&self, variant: usize, encoder: &str) {
        let labels =
            |enc: &str| vec![("variant".to_string(), variant.to_string()), ("encoder".to_string(), enc.to_string())];
        let previous = self.encoders_in_use.lock().insert(variant, encoder.to_string());
        if let Some(old) = previous.filter(|old| old != encoder) {
            self.prom.encoder_in_use.remove(&labels(&old));
        }
        self.prom.encoder_in_use.get_or_create(&labels(encoder)).set(1);
    }

    /// Transcoder/ingest seam: the broadcaster's inbound bitrate in kbps.
    pub fn set_ingest_bitrate_kbps(&self, kbps: f64) {
        if kbps.is_finite() && kbps >= 0.0 {
            self.prom.ingest_bitrate_kbps.set(kbps);
            self.signals.set_ingest_kbps(Some(kbps));
        }
    }

    /// Transcoder seam: the stream stopped; drops the per-variant encoder figures. (Also done on the
    /// bus's STREAM_STOPPED.)
    pub fn clear_stream(&self) {
        self.encoders_in_use.lock().clear();
        self.prom.clear_stream();
        self.signals.clear_stream();
    }

    /// Transcoder/hardware seam: a note for the health message while the stream runs (for instance
    /// that a hardware encoder failed and software took over); `None` clears it. Cleared when the
    /// stream stops. It does not by itself make the stream unhealthy.
    pub fn set_health_notice(&self, notice: Option<&str>) {
        self.signals.set_notice(notice.map(str::to_string));
    }

    /// Chat seam: connected chat clients.
    pub fn set_chat_clients(&self, n: u64) {
        self.prom.chat_clients.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Chat seam: chat users ever registered.
    pub fn set_chat_users(&self, n: u64) {
        self.prom.chat_users_total.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Chat seam: messages kept in history now, and sent in total.
    pub fn set_chat_messages(&self, current: u64, total: u64) {
        self.prom.chat_messages_current.set(i64::try_from(current).unwrap_or(i64::MAX));
        self.prom.chat_messages_total.set(i64::try_from(total).unwrap_or(i64::MAX));
    }

    /// Webhooks seam: bring the delivery counters up to the webhook module's running totals.
    pub fn sync_webhook_counters(&self, delivered: u64, failed: u64) {
        let mut seen = self.webhooks_seen.lock();
        self.prom.webhook_deliveries.inc_by(delivered.saturating_sub(seen.0));
        self.prom.webhook_failures.inc_by(failed.saturating_sub(seen.1));
        *seen = (delivered.max(seen.0), failed.max(seen.1));
    }

    /// Webhooks seam: one delivery attempt finished.
    pub fn webhook_delivery(&self, ok: bool) {
        if ok {
            self.prom.webhook_deliveries.inc();
        } else {
            self.prom.webhook_failures.inc();
        }
    }

    /// Hardware seam: GPU `gpu` (an index or name) is `pct` percent busy.
    pub fn set_gpu_utilization(&self, gpu: &str, pct: f64) {
        if pct.is_finite() {
            self.prom.gpu_utilization.get_or_create(&vec![("gpu".to_string(), gpu.to_string())]).set(pct);
        }
    }

    /// Hardware seam: a CPU-use sample in percent (health uses the average of the last two).
    pub fn set_cpu_percent(&self, pct: f64) {
        if pct.is_finite() {
            self.prom.cpu_usage.set(pct);
            self.prom.cpu_use_pct.set(pct);
            self.signals.cpu_sample(pct);
        }
    }
}

/// Start-up: apply this module's migrations and load the persisted overall viewer peak.
pub fn init(app: &App) -> Result<(), MetricsError> {
    viewers::load(app)?;
    Ok(())
}

/// One window: sample viewers, reduce the player reports into the series, recompute health.
pub fn window_tick(app: &App) {
    viewers::sample(app);
    let summary = app.metrics.playback.reduce_window();
    let online = app.stream.read().online;
    app.metrics.series.lock().record(Utc::now(), &summary, online);
    app.metrics.prom.playback_errors.set(summary.errors.round() as i64);
    app.metrics.prom.playback_clients.set(i64::try_from(app.metrics.playback.len()).unwrap_or(i64::MAX));
    health::update(app, &summary);
}

/// Chat users and messages, counted in SQLite once a window.
async fn chat_counts(app: &App) {
    let counts = app
        .store
        .call(|c| {
            let users: i64 = c.query_row("SELECT COUNT(*) FROM chat_users WHERE is_bot = 0", [], |r| r.get(0))?;
            let visible: i64 =
                c.query_row("SELECT COUNT(*) FROM chat_messages WHERE hidden_at IS NULL", [], |r| r.get(0))?;
            let total: i64 = c.query_row("SELECT COUNT(*) FROM chat_messages", [], |r| r.get(0))?;
            Ok((users, visible, total))
        })
        .await;
    match counts {
        Ok((users, visible, total)) => {
            let n = |v: i64| u64::try_from(v).unwrap_or(0);
            app.metrics.set_chat_users(n(users));
            app.metrics.set_chat_messages(n(visible), n(total));
        }
        Err(e) => tracing::warn!("counting chat users and messages: {e}"),
    }
}

/// The running background task.
pub struct Tasks {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
    app: Arc<App>,
}

impl Tasks {
    /// Stop the task, wait for it, and save the overall viewer peak.
    pub async fn stop(self) -> Result<(), MetricsError> {
        let _ = self.stop.send(true);
        self.handle.await.map_err(|e| MetricsError::Task(e.to_string()))?;
        viewers::save_blocking(&self.app)?;
        Ok(())
    }
}

/// Start the background task (see the module doc).
pub fn start(app: Arc<App>) -> Tasks {
    let (tx, mut rx) = watch::channel(false);
    let mut bus = app.bus.subscribe("metrics");
    let task_app = app.clone();
    let handle = tokio::spawn(async move {
        let app = task_app;
        let cfg = app.metrics.config;
        let mut prune = tokio::time::interval(cfg.prune_interval());
        let mut window = tokio::time::interval_at(tokio::time::Instant::now() + cfg.window, cfg.window);
        let mut save = tokio::time::interval(Duration::from_secs(60));
        for t in [&mut prune, &mut window, &mut save] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        loop {
            tokio::select! {
                _ = rx.changed() => break,
                _ = prune.tick() => {
                    viewers::prune(&app, cfg.viewer_idle);
                    app.metrics.playback.prune(cfg.session_timeout());
                    app.metrics.set_chat_clients(app.chat.hub.len() as u64);
                    let c = &app.webhooks.counters;
                    app.metrics.sync_webhook_counters(c.delivered.load(Ordering::Relaxed), c.failed.load(Ordering::Relaxed));
                }
                _ = window.tick() => {
                    window_tick(&app);
                    chat_counts(&app).await;
                }
                _ = save.tick() => {
                    if let Err(e) = viewers::save(&app).await {
                        tracing::warn!("saving the viewer peak: {e}");
                    }
                }
                event = bus.recv() => match event.map(|e| e.kind) {
                    Some(EventType::StreamStarted) => viewers::stream_started(&app),
                    Some(EventType::StreamStopped) => {
                        viewers::stream_stopped(&app);
                        app.metrics.clear_stream();
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
    });
    Tasks { stop: tx, handle, app }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::settings::SettingsStore;
    use crate::store::Store;

    fn app() -> (tempfile::TempDir, Arc<App>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let settings = SettingsStore::open(store.clone()).unwrap();
        let app = Arc::new(App::new(dir.path().to_path_buf(), store, settings, None).unwrap());
        init(&app).unwrap();
        (dir, app)
    }

    #[tokio::test]
    async fn slow_encoder_makes_the_stream_unhealthy_and_alerts() {
        let (_dir, app) = app();
        let mut sub = app.bus.subscribe("test");
        app.stream.write().online = true;
        app.metrics.set_encoder_stats(0, 30.0, 1.4);
        app.metrics.set_encoder_stats(1, 18.0, 0.6);
        app.metrics.set_encoder_stats(1, 20.0, 0.7);
        window_tick(&app);
        let h = app.health.read().clone();
        assert!(!h.healthy);
        assert!(h.message.contains("variant 1 encodes at 0.65"), "{}", h.message);
        let e = sub.recv().await.unwrap();
        assert_eq!(e.kind, EventType::HealthAlert);
        assert_eq!(e.data["message"], serde_json::json!(h.message));
        // the encoder catches up: healthy again, and a second alert says so
        app.metrics.set_encoder_stats(1, 30.0, 1.1);
        window_tick(&app);
        assert!(app.health.read().healthy);
        let e = sub.recv().await.unwrap();
        assert_eq!((e.kind, e.data["message"].as_str()), (EventType::HealthAlert, Some("")));
        let text = app.metrics.prom.encode().unwrap();
        assert!(text.contains("castd_encode_speed{variant=\"1\"} 1.1"), "{text}");
    }

    #[test]
    fn legacy_counts_add_up_within_a_window() {
        let (_dir, app) = app();
        let ctx = playback::ClientCtx::new(std::net::IpAddr::from([192, 0, 2, 1]), "ua");
        let other = playback::ClientCtx::new(std::net::IpAddr::from([192, 0, 2, 2]), "ua");
        let v = |errors, latency| playback::LegacyValues {
            errors,
            quality_variant_changes: 1.0,
            latency_seconds: Some(latency),
            bandwidth_kbps: Some(latency * 1000.0),
            download_seconds: None,
        };
        playback::record_legacy(&app, &ctx, &v(1.0, 2.0));
        playback::record_legacy(&app, &ctx, &v(2.0, 4.0)); // same client: counts add, latest latency wins
        playback::record_legacy(&app, &other, &v(0.0, 8.0));
        window_tick(&app);
        let s = app.metrics.series.lock().clone();
        assert_eq!(s.errors.0.last().map(|p| p.value), Some(3.0));
        assert_eq!(s.quality_variant_changes.0.last().map(|p| p.value), Some(3.0));
        assert_eq!(s.lowest_latency.0.last().map(|p| p.value), Some(4.0));
        assert_eq!(s.median_latency.0.last().map(|p| p.value), Some(6.0));
        assert_eq!(s.highest_latency.0.last().map(|p| p.value), Some(8.0));
        assert_eq!(s.max_player_bitrate.0.last().map(|p| p.value), Some(8000.0));
        assert!(s.median_segment_download_duration.0.is_empty(), "no download times reported");
        assert!(app.metrics.prom.encode().unwrap().contains("owncast_instance_playback_error_count 3"));
        // the next window starts empty: offline and without reports, no points are added
        window_tick(&app);
        assert_eq!(app.metrics.series.lock().errors.0.len(), 1);
    }

    #[test]
    fn cmcd_on_hls_requests_is_harvested() {
        use axum::http::HeaderMap;
        let (_dir, app) = app();
        let peer: std::net::SocketAddr = "198.51.100.5:40000".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("user-agent", "hls.js".parse().unwrap());
        // hls.js's v1 query form on a segment request, then a switch to another rendition
        let q1 = "CMCD=bl%3D21300%2Cbr%3D3200%2Cd%3D4004%2Cmtp%3D25400%2Cot%3Dv%2Csid%3D%22abc%22%2Ctb%3D6000";
        let q2 = "CMCD=br%3D1200%2Cmtp%3D9000%2Cot%3Dv%2Csid%3D%22abc%22";
        assert_eq!(cmcd::harvest_request(&app, peer, &headers, Some(q1)).as_deref(), Some("abc"));
        assert_eq!(cmcd::harvest_request(&app, peer, &headers, Some(q2)).as_deref(), Some("abc"));
        // no CMCD, or broken CMCD: nothing recorded, never an error
        assert_eq!(cmcd::harvest_request(&app, peer, &headers, Some("v=1")), None);
        assert_eq!(cmcd::harvest_request(&app, peer, &headers, Some("CMCD=br%3D")), None);
        // the server timed a download for a viewer without CMCD
        let viewer = viewers::touch_request(&app, peer, &HeaderMap::new());
        playback::record_server_download(&app, &viewer, 500_000, 2.0);
        playback::record_server_download(&app, "unknown-client", 1, 1.0);
        let clients = playback::clients(&app);
        assert_eq!(clients.len(), 2, "{clients:?}");
        let abc = clients.iter().find(|c| c.client_id == "abc").unwrap();
        let p = abc.playback.as_ref().unwrap();
        assert_eq!(p.source, playback::Source::Request);
        assert_eq!((p.bitrate_kbps, p.bandwidth_kbps, p.quality_variant_changes), (1200.0, 9000.0, 1));
        assert_eq!(abc.ip_address, "198.51.100.5");
        let timed = clients.iter().find(|c| c.client_id == viewer).unwrap().playback.as_ref().unwrap();
        assert_eq!((timed.source, timed.measurement_status), (playback::Source::Server, "estimated"));
        assert_eq!((timed.bandwidth_kbps, timed.download_seconds), (2000.0, 2.0));
    }

    #[tokio::test]
    async fn overall_peak_is_persisted_and_session_peak_resets_after_a_gap() {
        let (dir, app) = app();
        for i in 0..3u8 {
            viewers::touch(&app, std::net::IpAddr::from([10, 0, 0, i]), "ua");
        }
        assert_eq!(app.viewers.get(), (3, 3, 3));
        viewers::prune(&app, Duration::ZERO);
        assert_eq!(app.viewers.get(), (0, 3, 3));
        // a stream starting long after the previous one is a new session
        app.stream.write().last_disconnect_time = Some(Utc::now() - chrono::Duration::minutes(10));
        viewers::stream_started(&app);
        assert_eq!(app.viewers.get(), (0, 0, 3));
        // a quick reconnect keeps the session peak
        viewers::touch(&app, std::net::IpAddr::from([10, 0, 0, 9]), "ua");
        viewers::stream_stopped(&app);
        viewers::stream_started(&app);
        assert_eq!(app.viewers.get().1, 1);
        viewers::save(&app).await.unwrap();
        drop(app);
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let settings = SettingsStore::open(store.clone()).unwrap();
        let again = App::new(dir.path().to_path_buf(), store, settings, None).unwrap();
        init(&again).unwrap();
        assert_eq!(again.viewers.get(), (0, 0, 3));
    }
}
