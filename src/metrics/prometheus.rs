//! Prometheus metrics served at `/api/admin/prometheus`, built with the `prometheus-client` crate
//! (OpenMetrics text exposition).
//!
//! Owncast's gauges keep their names (`owncast_instance_*`, as existing Grafana dashboards expect);
//! castd's own metrics are under `castd_`. Values are set by their owners through the setters on
//! `Metrics` (encoder, chat, webhooks, hardware sampling) and by the viewers and window tasks here.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of a per-variant or per-device series.
pub type Labels = Vec<(String, String)>;

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric castd exports.
pub struct Prom {
    registry: Registry,
    pub active_viewers: Gauge,
    pub chat_clients: Gauge,
    pub chat_users_total: Gauge,
    pub chat_messages_current: Gauge,
    pub chat_messages_total: Gauge,
    pub chat_slow_dropped: Counter,
    pub playback_errors: Gauge,
    pub cpu_usage: FloatGauge,
    /// Owncast's older name of `cpu_usage`.
    pub cpu_use_pct: FloatGauge,
    pub encode_fps: Family<Labels, FloatGauge>,
    pub encode_speed: Family<Labels, FloatGauge>,
    pub encoder_in_use: Family<Labels, Gauge>,
    pub ingest_bitrate_kbps: FloatGauge,
    pub webhook_deliveries: Counter,
    pub webhook_failures: Counter,
    pub gpu_utilization: Family<Labels, FloatGauge>,
    pub playback_clients: Gauge,
    /// WebRTC (WHEP) viewers connected now (they also count in the active viewers).
    pub webrtc_viewers: Gauge,
    /// Inbound WebRTC datagrams dropped, by `reason`: `queue_full` (a session did not keep up) or `unclaimed`.
    pub webrtc_dropped: Family<Labels, Counter>,
    pub storage_uploads: Counter,
    pub storage_failures: Counter,
    pub storage_bytes: Counter,
    pub storage_deletes: Counter,
    pub storage_queue_depth: Gauge,
    pub storage_latency: Histogram,
}

/// Bucket bounds (seconds) of the storage upload latency histogram.
const STORAGE_LATENCY_BUCKETS: [f64; 12] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];

impl Default for Prom {
    fn default() -> Self {
        Self::new()
    }
}

impl Prom {
    pub fn new() -> Self {
        let mut r = Registry::default();
        let p = Prom {
            registry: Registry::default(),
            active_viewers: Gauge::default(),
            chat_clients: Gauge::default(),
            chat_users_total: Gauge::default(),
            chat_messages_current: Gauge::default(),
            chat_messages_total: Gauge::default(),
            chat_slow_dropped: Counter::default(),
            playback_errors: Gauge::default(),
            cpu_usage: FloatGauge::default(),
            cpu_use_pct: FloatGauge::default(),
            encode_fps: Family::default(),
            encode_speed: Family::default(),
            encoder_in_use: Family::default(),
            ingest_bitrate_kbps: FloatGauge::default(),
            webhook_deliveries: Counter::default(),
            webhook_failures: Counter::default(),
            gpu_utilization: Family::default(),
            playback_clients: Gauge::default(),
            webrtc_viewers: Gauge::default(),
            webrtc_dropped: Family::default(),
            storage_uploads: Counter::default(),
            storage_failures: Counter::default(),
            storage_bytes: Counter::default(),
            storage_deletes: Counter::default(),
            storage_queue_depth: Gauge::default(),
            storage_latency: Histogram::new(STORAGE_LATENCY_BUCKETS),
        };
        r.register("owncast_instance_active_viewer_count", "Number of active viewers", p.active_viewers.clone());
        r.register(
            "owncast_instance_active_chat_client_count",
            "Number of connected chat clients",
            p.chat_clients.clone(),
        );
        r.register(
            "owncast_instance_total_chat_users",
            "Number of chat users ever registered",
            p.chat_users_total.clone(),
        );
        r.register(
            "owncast_instance_current_chat_message_count",
            "Number of chat messages kept in history",
            p.chat_messages_current.clone(),
        );
        r.register(
            "owncast_instance_total_chat_message_count",
            "Number of chat messages ever sent",
            p.chat_messages_total.clone(),
        );
        r.register(
            "owncast_instance_playback_error_count",
            "Playback errors reported by players in the last window",
            p.playback_errors.clone(),
        );
        r.register("owncast_instance_cpu_usage", "Server CPU use in percent", p.cpu_usage.clone());
        r.register("owncast_instance_cpu_use_pct", "Server CPU use in percent (older name)", p.cpu_use_pct.clone());
        r.register("castd_encode_fps", "Frames per second encoded, per output variant", p.encode_fps.clone());
        r.register(
            "castd_encode_speed",
            "Encoder realtime factor per output variant (below 1 cannot keep up)",
            p.encode_speed.clone(),
        );
        r.register("castd_encoder_in_use", "1 for the encoder each output variant uses", p.encoder_in_use.clone());
        r.register(
            "castd_ingest_bitrate_kbps",
            "Inbound bitrate from the broadcaster, kbps",
            p.ingest_bitrate_kbps.clone(),
        );
        r.register(
            "castd_chat_slow_clients_dropped",
            "Chat clients disconnected because they did not read what the room sent",
            p.chat_slow_dropped.clone(),
        );
        r.register("castd_webhook_deliveries", "Webhook deliveries that succeeded", p.webhook_deliveries.clone());
        r.register("castd_webhook_failures", "Webhook deliveries that failed", p.webhook_failures.clone());
        r.register("castd_gpu_utilization_percent", "GPU utilization in percent, per GPU", p.gpu_utilization.clone());
        r.register("castd_playback_clients", "Playback clients with a live session", p.playback_clients.clone());
        r.register(
            "castd_webrtc_viewers",
            "WebRTC (WHEP) viewers connected now; they are also counted in the active viewers",
            p.webrtc_viewers.clone(),
        );
        r.register(
            "castd_webrtc_dropped_datagrams",
            "Inbound WebRTC datagrams dropped: reason queue_full (a session's queue was full), unclaimed (no session)",
            p.webrtc_dropped.clone(),
        );
        r.register("castd_storage_uploads", "Objects uploaded to object storage", p.storage_uploads.clone());
        r.register(
            "castd_storage_failures",
            "Object storage requests that failed after their retries",
            p.storage_failures.clone(),
        );
        r.register("castd_storage_uploaded_bytes", "Bytes uploaded to object storage", p.storage_bytes.clone());
        r.register("castd_storage_deletes", "Objects deleted from object storage", p.storage_deletes.clone());
        r.register("castd_storage_queue_depth", "Objects waiting for upload", p.storage_queue_depth.clone());
        r.register(
            "castd_storage_upload_latency_seconds",
            "Seconds from a segment being ready on disk to the object being visible in storage",
            p.storage_latency.clone(),
        );
        Prom { registry: r, ..p }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// The stream stopped: drop the per-variant encoder series and the ingest bitrate.
    pub fn clear_stream(&self) {
        self.encode_fps.clear();
        self.encode_speed.clear();
        self.encoder_in_use.clear();
        self.ingest_bitrate_kbps.set(0.0);
    }
}

/// `[("variant", "0")]`.
pub fn variant_label(variant: usize) -> Labels {
    vec![("variant".to_string(), variant.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_owncast_and_castd_names() {
        let p = Prom::new();
        p.active_viewers.set(3);
        p.encode_speed.get_or_create(&variant_label(1)).set(0.75);
        p.webhook_failures.inc();
        let text = p.encode().unwrap();
        assert!(text.contains("owncast_instance_active_viewer_count 3"), "{text}");
        assert!(text.contains("castd_encode_speed{variant=\"1\"} 0.75"), "{text}");
        assert!(text.contains("castd_webhook_failures_total 1"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
        p.clear_stream();
        assert!(!p.encode().unwrap().contains("castd_encode_speed{"));
    }
}
