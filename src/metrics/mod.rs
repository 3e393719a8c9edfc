//! Playback metrics: who is watching (viewers), how playback goes (CMCD and legacy player reports,
//! per-client entries, time series reduced every window), the playback side of stream health, and the
//! Prometheus exposition. `Metrics` is this feature's state (handlers take `State<Arc<Metrics>>`).
//!
//! Inputs, all through handles given at construction, never by importing another feature:
//! * the HLS handler calls `Viewers::mark_request` on every playlist fetch, `playback::harvest_request`
//!   on every HLS request, `playback::record_server_download` when it timed a segment download;
//! * `Telemetry` carries the transcoder's encoder figures, the ingest bitrate, CPU/GPU samples, the
//!   chat client count and webhook deliveries; they are copied into Prometheus at every prune tick
//!   and before every scrape, and feed the health evaluation;
//! * the stream snapshot (`StreamWatch`) says whether the stream is online.
//!
//! Outputs: the viewer counters (`ViewerCounts`, written here only), the playback health of each
//! window (`HealthInput::Playback` to the health hub), and the HTTP routes in `api`.
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

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use parking_lot::Mutex;

use crate::events::{Bus, Event};
use crate::health::HealthHub;
use crate::store::settings::SettingsStore;
use crate::store::{Store, StoreError};
use crate::stream::{StreamWatch, Viewers};
use crate::tasks::{Stage, Tasks};
use crate::telemetry::Telemetry;

/// Errors of the metrics module.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(transparent)]
    Store(#[from] StoreError),
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

/// What metrics was handed at construction.
pub struct MetricsDeps {
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    /// The media plane: what is running (the live broadcast's profile) is read there.
    pub media: Arc<crate::media::MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    pub counts: Viewers,
    pub health: Arc<HealthHub>,
    pub telemetry: Arc<Telemetry>,
    /// The root's (the default channel's metrics only): every other channel's exposition
    /// ([`Metrics::other_channels`]).
    pub other_channels: Option<OtherChannels>,
}

/// The metrics feature's state.
pub struct Metrics {
    pub config: MetricsConfig,
    pub viewers: viewers::Viewers,
    pub playback: playback::Playback,
    pub series: Mutex<series::VideoSeries>,
    pub prom: prometheus::Prom,
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    pub media: Arc<crate::media::MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    /// The viewer counters this module writes.
    pub counts: Viewers,
    pub health: Arc<HealthHub>,
    pub telemetry: Arc<Telemetry>,
    /// The encoder of each variant, as last copied (so a change replaces its Prometheus series).
    encoders_in_use: Mutex<std::collections::HashMap<usize, String>>,
    /// Webhook delivery totals already counted (delivered, failed).
    webhooks_seen: Mutex<(u64, u64)>,
    /// The slow chat clients dropped that are already counted.
    chat_slow_seen: Mutex<u64>,
    /// The storage totals already added to the Prometheus counters.
    storage_seen: Mutex<crate::telemetry::StorageTotals>,
    /// On the root (the default channel's metrics): every other channel's exposition, which the root's
    /// `/api/admin/prometheus` merges with its own and the server-wide series (given by the composition
    /// root: `MetricsDeps::other_channels`). `None`: a channel's own metrics.
    pub other_channels: Option<OtherChannels>,
}

/// Every other channel's own Prometheus exposition (`Metrics::channel_exposition` of each), for the
/// root's merged exposition.
pub type OtherChannels = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

impl Metrics {
    /// Build the state, apply this module's migrations and load the persisted overall viewer peak.
    pub fn open(config: MetricsConfig, deps: MetricsDeps) -> Result<Arc<Self>, MetricsError> {
        let prom = prometheus::Prom::for_channel(deps.channel.as_str());
        let m = Self {
            config,
            viewers: viewers::Viewers::new(
                deps.counts.clone(),
                prom.active_viewers.clone(),
                deps.stream.clone(),
                deps.store.clone(),
            ),
            playback: playback::Playback::default(),
            series: Mutex::new(series::VideoSeries::default()),
            prom,
            store: deps.store,
            settings: deps.settings,
            bus: deps.bus,
            stream: deps.stream,
            media: deps.media,
            channel: deps.channel,
            counts: deps.counts,
            health: deps.health,
            telemetry: deps.telemetry,
            encoders_in_use: Mutex::new(std::collections::HashMap::new()),
            webhooks_seen: Mutex::new((0, 0)),
            chat_slow_seen: Mutex::new(0),
            storage_seen: Mutex::default(),
            other_channels: deps.other_channels,
        };
        m.viewers.load()?;
        Ok(Arc::new(m))
    }

    /// Copy the telemetry (encoders, ingest, CPU/GPU, chat clients, webhook deliveries) into the
    /// Prometheus families.
    pub fn sync_telemetry(&self) {
        let t = &self.telemetry;
        let encoders = t.encoders();
        {
            let mut in_use = self.encoders_in_use.lock();
            let labels = |variant: usize, enc: &str| {
                vec![("variant".to_string(), variant.to_string()), ("encoder".to_string(), enc.to_string())]
            };
            for (variant, old) in in_use.iter() {
                if encoders.get(variant).is_none_or(|f| f.encoder != *old) {
                    self.prom.encoder_in_use.remove(&labels(*variant, old));
                }
            }
            in_use.clear();
            for (variant, f) in &encoders {
                let label = prometheus::variant_label(*variant);
                self.prom.encode_fps.get_or_create(&label).set(f.fps);
                self.prom.encode_speed.get_or_create(&label).set(f.speed);
                self.prom.encoder_in_use.get_or_create(&labels(*variant, &f.encoder)).set(1);
                match f.capacity {
                    Some(c) => {
                        self.prom.transcode_speed.get_or_create(&label).set(c);
                    }
                    None => {
                        self.prom.transcode_speed.remove(&label);
                    }
                }
                in_use.insert(*variant, f.encoder.clone());
            }
            self.prom.transcode_headroom.set(t.transcode_headroom().unwrap_or(0.0));
            if encoders.is_empty() {
                self.prom.clear_stream();
            }
        }
        if let Some(kbps) = t.ingest_kbps() {
            self.prom.ingest_bitrate_kbps.set(kbps);
        }
        if let Some(cpu) = t.cpu_latest() {
            self.prom.cpu_usage.set(cpu);
            self.prom.cpu_use_pct.set(cpu);
        }
        self.prom.set_gpus(&t.gpus());
        self.prom.chat_clients.set(i64::try_from(t.chat_clients()).unwrap_or(i64::MAX));
        let slow = t.chat_slow_dropped_total();
        let mut seen = self.chat_slow_seen.lock();
        self.prom.chat_slow_dropped.inc_by(slow.saturating_sub(*seen));
        *seen = slow.max(*seen);
        drop(seen);
        let (delivered, failed) = t.webhook_totals();
        let mut seen = self.webhooks_seen.lock();
        self.prom.webhook_deliveries.inc_by(delivered.saturating_sub(seen.0));
        self.prom.webhook_failures.inc_by(failed.saturating_sub(seen.1));
        *seen = (delivered.max(seen.0), failed.max(seen.1));
        drop(seen);
        let st = t.storage_totals();
        let mut seen = self.storage_seen.lock();
        self.prom.storage_uploads.inc_by(st.uploads.saturating_sub(seen.uploads));
        self.prom.storage_failures.inc_by(st.failures.saturating_sub(seen.failures));
        self.prom.storage_bytes.inc_by(st.bytes.saturating_sub(seen.bytes));
        self.prom.storage_deletes.inc_by(st.deletes.saturating_sub(seen.deletes));
        *seen = st;
        self.prom.storage_queue_depth.set(i64::try_from(st.queue_depth).unwrap_or(i64::MAX));
        for l in t.take_storage_latencies() {
            self.prom.storage_latency.observe(l);
        }
    }

    /// The Prometheus exposition this channel's `/api/admin/prometheus` serves: a channel's own series;
    /// the default channel's (the root's) with the server-wide series and, once the composition root
    /// gave it the other channels, theirs merged in (see `prometheus`).
    pub fn exposition(&self) -> Result<String, std::fmt::Error> {
        let Some(others) = &self.other_channels else { return self.channel_exposition() };
        self.sync_telemetry();
        let mut parts = vec![self.prom.encode_server()?, self.prom.encode_channel()?];
        parts.extend(others());
        Ok(prometheus::merge(&parts))
    }

    /// This channel's own series (telemetry copied first).
    pub fn channel_exposition(&self) -> Result<String, std::fmt::Error> {
        self.sync_telemetry();
        self.prom.encode_channel()
    }

    /// Chat users ever registered.
    pub fn set_chat_users(&self, n: u64) {
        self.prom.chat_users_total.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Messages kept in history now, and sent in total.
    pub fn set_chat_messages(&self, current: u64, total: u64) {
        self.prom.chat_messages_current.set(i64::try_from(current).unwrap_or(i64::MAX));
        self.prom.chat_messages_total.set(i64::try_from(total).unwrap_or(i64::MAX));
    }
}

/// One window: sample viewers, reduce the player reports into the series, recompute health.
pub fn window_tick(metrics: &Metrics) {
    metrics.viewers.sample();
    let summary = metrics.playback.reduce_window();
    let online = metrics.stream.borrow().online;
    metrics.series.lock().record(Utc::now(), &summary, online);
    metrics.prom.playback_errors.set(summary.errors.round() as i64);
    metrics.prom.playback_clients.set(i64::try_from(metrics.playback.len()).unwrap_or(i64::MAX));
    let sources = health::Sources {
        telemetry: &metrics.telemetry,
        stream: &metrics.stream,
        settings: &metrics.settings,
        hub: &metrics.health,
        media: &metrics.media,
        channel: &metrics.channel,
    };
    health::update(&sources, metrics.viewers.count(), &summary);
}

/// Chat users and messages, counted in SQLite once a window.
async fn chat_counts(metrics: &Metrics) {
    let counts = metrics
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
            metrics.set_chat_users(n(users));
            metrics.set_chat_messages(n(visible), n(total));
        }
        Err(e) => tracing::warn!("counting chat users and messages: {e}"),
    }
}

/// Start the background task (see the module doc), in the `Background` stage: when it stops, the
/// overall viewer peak is saved.
pub fn start(metrics: Arc<Metrics>, tasks: &Tasks) {
    let mut bus = metrics.bus.subscribe("metrics");
    let stop = tasks.token(Stage::Background);
    tasks.spawn(Stage::Background, "metrics", async move {
        let cfg = metrics.config;
        let mut prune = tokio::time::interval(cfg.prune_interval());
        let mut window = tokio::time::interval_at(tokio::time::Instant::now() + cfg.window, cfg.window);
        let mut save = tokio::time::interval(Duration::from_secs(60));
        for t in [&mut prune, &mut window, &mut save] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = prune.tick() => {
                    metrics.viewers.prune(cfg.viewer_idle);
                    metrics.playback.prune(cfg.session_timeout());
                    metrics.sync_telemetry();
                }
                _ = window.tick() => {
                    window_tick(&metrics);
                    chat_counts(&metrics).await;
                }
                _ = save.tick() => {
                    if let Err(e) = metrics.viewers.save().await {
                        tracing::warn!("saving the viewer peak: {e}");
                    }
                }
                event = bus.recv() => match event.as_deref() {
                    Some(Event::StreamStarted(_)) => metrics.viewers.stream_started(),
                    Some(Event::StreamStopped(_)) => metrics.viewers.stream_stopped(),
                    Some(_) => {}
                    None => break,
                },
            }
        }
        if let Err(e) = metrics.viewers.save().await {
            tracing::warn!("saving the viewer peak: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::StreamWriter;

    fn open(dir: &std::path::Path) -> (Arc<Metrics>, StreamWriter) {
        let store = Store::open(&dir.join("t.db")).unwrap();
        let bus = Bus::default();
        let settings = SettingsStore::open(store.clone(), bus.clone()).unwrap();
        let (writer, stream) = StreamWriter::new();
        let deps = MetricsDeps {
            store,
            settings,
            bus: bus.clone(),
            stream,
            media: crate::media::MediaPlane::new(dir.join("hls"), dir.to_path_buf()),
            channel: crate::media::ChannelId::default_channel(),
            counts: Arc::default(),
            health: HealthHub::new(bus),
            telemetry: Arc::default(),
            // The root's metrics, on a server with no other channel.
            other_channels: Some(Arc::new(Vec::new)),
        };
        (Metrics::open(MetricsConfig::default(), deps).unwrap(), writer)
    }

    /// A live broadcast on the default channel running `variants` (what health reads), as ingest and the
    /// transcoder make one; keep the writer while it is live.
    fn go_live(m: &Metrics, variants: usize) -> crate::media::SourceWriter {
        use crate::media::{ChannelId, Container, Profile, Protocol, Source};
        let source = Source { protocol: Protocol::Rtmp, container: Container::Flv, remote: ([127, 0, 0, 1], 1).into() };
        let guard = m.media.claim(&ChannelId::default_channel(), source).unwrap();
        let writer = m.media.go_live(guard);
        writer.broadcast().start(Profile {
            stream_id: "s".into(),
            started_at: chrono::Utc::now(),
            variants: vec![crate::config::StreamOutputVariant::default(); variants],
            segment_seconds: 2,
            list_size: 4,
            latency_level: 2,
            low_latency: false,
            realtime_variant: None,
            encoders: vec!["libx264".into(); variants],
        });
        writer
    }

    fn metrics() -> (tempfile::TempDir, Arc<Metrics>, StreamWriter) {
        let dir = tempfile::tempdir().unwrap();
        let (m, w) = open(dir.path());
        (dir, m, w)
    }

    fn alert(e: &Event) -> String {
        match e {
            Event::HealthAlert(a) => a.message.clone(),
            other => panic!("expected HEALTH_ALERT, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn slow_encoder_makes_the_stream_unhealthy_and_alerts() {
        let (_dir, metrics, stream) = metrics();
        let mut sub = metrics.bus.subscribe("test");
        stream.update(|s| s.online = true);
        let _live = go_live(&metrics, 2);
        let t = &metrics.telemetry;
        t.encoder_progress(0, "libx264", 30.0, 1.4);
        t.encoder_progress(1, "libx264", 18.0, 0.6);
        t.encoder_progress(1, "libx264", 20.0, 0.7);
        window_tick(&metrics);
        let h = metrics.health.get();
        assert!(!h.healthy);
        assert!(h.message.contains("variant 1 encodes at 0.65"), "{}", h.message);
        assert_eq!(alert(&sub.recv().await.unwrap()), h.message);
        // the encoder catches up: healthy again, and a second alert says so
        t.encoder_progress(1, "libx264", 30.0, 1.1);
        window_tick(&metrics);
        assert!(metrics.health.get().healthy);
        assert_eq!(alert(&sub.recv().await.unwrap()), "");
        metrics.sync_telemetry();
        let text = metrics.prom.encode().unwrap();
        assert!(text.contains("castd_encode_speed{channel=\"default\",variant=\"1\"} 1.1"), "{text}");
        // The capacity policy's figures: what each x264 rung can sustain, and the ladder's headroom.
        t.encoder_capacity(1, Some(1.25));
        t.set_transcode_headroom(Some(-0.5));
        metrics.sync_telemetry();
        let text = metrics.prom.encode().unwrap();
        assert!(text.contains("castd_transcode_speed{channel=\"default\",variant=\"1\"} 1.25"), "{text}");
        assert!(!text.contains("castd_transcode_speed{channel=\"default\",variant=\"0\"}"), "not measured: {text}");
        assert!(text.contains("castd_transcode_headroom{channel=\"default\"} -0.5"), "{text}");
        t.clear_stream();
        metrics.sync_telemetry();
        assert!(!metrics.prom.encode().unwrap().contains("castd_transcode_speed{"));
    }

    #[test]
    fn legacy_counts_add_up_within_a_window() {
        let (_dir, metrics, _stream) = metrics();
        let ctx = playback::ClientCtx::new(std::net::IpAddr::from([192, 0, 2, 1]), "ua");
        let other = playback::ClientCtx::new(std::net::IpAddr::from([192, 0, 2, 2]), "ua");
        let v = |errors, latency| playback::LegacyValues {
            errors,
            quality_variant_changes: 1.0,
            latency_seconds: Some(latency),
            bandwidth_kbps: Some(latency * 1000.0),
            download_seconds: None,
        };
        playback::record_legacy(&metrics.playback, &ctx, &v(1.0, 2.0));
        playback::record_legacy(&metrics.playback, &ctx, &v(2.0, 4.0)); // same client: counts add, latest latency wins
        playback::record_legacy(&metrics.playback, &other, &v(0.0, 8.0));
        window_tick(&metrics);
        let s = metrics.series.lock().clone();
        assert_eq!(s.errors.0.last().map(|p| p.value), Some(3.0));
        assert_eq!(s.quality_variant_changes.0.last().map(|p| p.value), Some(3.0));
        assert_eq!(s.lowest_latency.0.last().map(|p| p.value), Some(4.0));
        assert_eq!(s.median_latency.0.last().map(|p| p.value), Some(6.0));
        assert_eq!(s.highest_latency.0.last().map(|p| p.value), Some(8.0));
        assert_eq!(s.max_player_bitrate.0.last().map(|p| p.value), Some(8000.0));
        assert!(s.median_segment_download_duration.0.is_empty(), "no download times reported");
        assert!(metrics
            .prom
            .encode()
            .unwrap()
            .contains("owncast_instance_playback_error_count{channel=\"default\"} 3"));
        // the next window starts empty: offline and without reports, no points are added
        window_tick(&metrics);
        assert_eq!(metrics.series.lock().errors.0.len(), 1);
    }

    #[test]
    fn cmcd_on_hls_requests_is_harvested() {
        use axum::http::HeaderMap;
        let (_dir, metrics, _stream) = metrics();
        let peer: std::net::SocketAddr = "198.51.100.5:40000".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("user-agent", "hls.js".parse().unwrap());
        // hls.js's v1 query form on a segment request, then a switch to another rendition
        let q1 = "CMCD=bl%3D21300%2Cbr%3D3200%2Cd%3D4004%2Cmtp%3D25400%2Cot%3Dv%2Csid%3D%22abc%22%2Ctb%3D6000";
        let q2 = "CMCD=br%3D1200%2Cmtp%3D9000%2Cot%3Dv%2Csid%3D%22abc%22";
        assert_eq!(playback::harvest_request(&metrics.playback, peer, &headers, Some(q1)).as_deref(), Some("abc"));
        assert_eq!(playback::harvest_request(&metrics.playback, peer, &headers, Some(q2)).as_deref(), Some("abc"));
        // no CMCD, or broken CMCD: nothing recorded, never an error
        assert_eq!(playback::harvest_request(&metrics.playback, peer, &headers, Some("v=1")), None);
        assert_eq!(playback::harvest_request(&metrics.playback, peer, &headers, Some("CMCD=br%3D")), None);
        // the server timed a download for a viewer without CMCD
        let viewer = metrics.viewers.touch_request(peer, &HeaderMap::new());
        playback::record_server_download(&metrics.playback, &metrics.viewers, &viewer, 500_000, 2.0);
        playback::record_server_download(&metrics.playback, &metrics.viewers, "unknown-client", 1, 1.0);
        let clients = playback::clients(&metrics.playback, &metrics.viewers);
        assert_eq!(clients.len(), 2, "{clients:?}");
        let abc = clients.iter().find(|c| c.client_id == "abc").unwrap();
        let p = abc.playback.as_ref().unwrap();
        assert_eq!(p.source, playback::Source::Request);
        assert_eq!((p.bitrate_kbps, p.bandwidth_kbps, p.quality_variant_changes), (1200.0, 9000.0, 1));
        assert_eq!(abc.ip_address, "198.51.100.5");
        let timed = clients.iter().find(|c| c.client_id == viewer).unwrap().playback.as_ref().unwrap();
        assert_eq!((timed.source, timed.measurement_status), (playback::Source::Server, "estimated"));
        assert_eq!((timed.bandwidth_kbps, timed.download_seconds), (2000.0, Some(2.0)));
    }

    #[test]
    fn a_webrtc_viewer_is_its_own_entry_with_loss_and_round_trip() {
        let (_dir, metrics, _stream) = metrics();
        let ip = std::net::IpAddr::from([198, 51, 100, 9]);
        let ctx = playback::ClientCtx::new(ip, "Chromium");
        metrics.viewers.touch(ip, "Chromium");
        let first = playback::WebrtcSample { loss: None, rtt_seconds: Some(0.02), sent_kbps: Some(900.0) };
        playback::record_webrtc(&metrics.playback, &ctx, "webrtc-1", first);
        // a later report: loss arrives, the round-trip time stays the last measured
        let later = playback::WebrtcSample { loss: Some(0.0314), rtt_seconds: None, sent_kbps: Some(1100.0) };
        playback::record_webrtc(&metrics.playback, &ctx, "webrtc-1", later);
        let clients = playback::clients(&metrics.playback, &metrics.viewers);
        assert_eq!(clients.len(), 1, "the viewer is the WebRTC session's entry, not a second one: {clients:?}");
        let p = clients[0].playback.as_ref().unwrap();
        assert_eq!((p.source, p.measurement_status), (playback::Source::Webrtc, "measured"));
        assert_eq!((p.packet_loss_percent, p.round_trip_seconds), (Some(3.1), Some(0.02)));
        assert_eq!((p.bitrate_kbps, p.bandwidth_kbps), (1100.0, 1100.0));
        let json = serde_json::to_value(&clients[0]).unwrap();
        assert_eq!(json["playback"]["source"], "webrtc");
        assert_eq!(json["playback"]["packetLossPercent"], 3.1);
        // an HLS entry has neither field
        let hls = playback::ClientCtx::new(std::net::IpAddr::from([198, 51, 100, 10]), "hls.js");
        playback::record_legacy(&metrics.playback, &hls, &playback::LegacyValues::default());
        let clients = playback::clients(&metrics.playback, &metrics.viewers);
        let hls = clients.iter().find(|c| c.ip_address == "198.51.100.10").unwrap();
        let json = serde_json::to_value(hls).unwrap();
        assert!(json["playback"].get("packetLossPercent").is_none(), "{json}");
        // the session ends: the entry goes (the viewer itself expires with the viewer list)
        metrics.playback.remove("webrtc-1");
        let clients = playback::clients(&metrics.playback, &metrics.viewers);
        assert!(clients.iter().all(|c| c.client_id != "webrtc-1"), "{clients:?}");
    }

    #[tokio::test]
    async fn overall_peak_is_persisted_and_session_peak_resets_after_a_gap() {
        let (dir, metrics, stream) = metrics();
        for i in 0..3u8 {
            metrics.viewers.touch(std::net::IpAddr::from([10, 0, 0, i]), "ua");
        }
        assert_eq!(metrics.counts.get(), (3, 3, 3));
        metrics.viewers.prune(Duration::ZERO);
        assert_eq!(metrics.counts.get(), (0, 3, 3));
        // a stream starting long after the previous one is a new session
        stream.update(|s| s.last_disconnect_time = Some(Utc::now() - chrono::Duration::minutes(10)));
        metrics.viewers.stream_started();
        assert_eq!(metrics.counts.get(), (0, 0, 3));
        // a quick reconnect keeps the session peak
        metrics.viewers.touch(std::net::IpAddr::from([10, 0, 0, 9]), "ua");
        metrics.viewers.stream_stopped();
        metrics.viewers.stream_started();
        assert_eq!(metrics.counts.get().1, 1);
        metrics.viewers.save().await.unwrap();
        drop(metrics);
        let (again, _stream) = open(dir.path());
        assert_eq!(again.counts.get(), (0, 0, 3));
    }
}
