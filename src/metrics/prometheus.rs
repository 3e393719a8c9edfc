//! Prometheus metrics served at `/api/admin/prometheus`, built with the `prometheus-client` crate
//! (OpenMetrics text exposition).
//!
//! Owncast's gauges keep their names (`owncast_instance_*`, as existing Grafana dashboards expect);
//! castd's own metrics are under `castd_`. Values are set by their owners through the setters on
//! `Metrics` (encoder, chat, webhooks, hardware sampling) and by the viewers and window tasks here.
//!
//! Channels: every channel has its own `Prom`. Its series (viewers, chat, playback, encoders, ingest,
//! webhooks, WebRTC viewers) carry a `channel` label (`channel="default"` for the default channel) and
//! are its channel registry; the server-wide ones (CPU, GPU, object storage, WebRTC datagrams dropped
//! at the shared socket) carry none and are exposed by the root only. A channel's
//! `/c/{slug}/api/admin/prometheus` is its channel registry; the root's is the server-wide registry and
//! every channel's, merged into one exposition ([`merge`]: each family once, with one series per
//! channel).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::telemetry::GpuFigures;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of a per-variant or per-device series.
pub type Labels = Vec<(String, String)>;

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric castd exports (see the module doc).
pub struct Prom {
    /// This channel's series, each labelled with the channel.
    registry: Registry,
    /// The server-wide series (the root exposes them).
    server: Registry,
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
    /// Per x264 rung: the real-time factor it can sustain at its current preset (capacity policy).
    pub transcode_speed: Family<Labels, FloatGauge>,
    /// The software ladder's headroom: 1 − its load (negative: short of real time by that fraction).
    pub transcode_headroom: FloatGauge,
    pub ingest_bitrate_kbps: FloatGauge,
    pub webhook_deliveries: Counter,
    pub webhook_failures: Counter,
    /// Per GPU (label `gpu`, NVML's index): percent of time a kernel ran.
    pub gpu_utilization: Family<Labels, FloatGauge>,
    /// Per GPU: percent of device memory allocated.
    pub gpu_memory: Family<Labels, FloatGauge>,
    /// Per GPU: percent of NVENC capacity in use.
    pub gpu_encoder: Family<Labels, FloatGauge>,
    /// Per GPU: percent of NVDEC capacity in use.
    pub gpu_decoder: Family<Labels, FloatGauge>,
    /// Per GPU: die temperature, °C.
    pub gpu_temperature: Family<Labels, FloatGauge>,
    /// Per GPU: board power draw, W.
    pub gpu_power: Family<Labels, FloatGauge>,
    /// The `gpu` labels set by the last `set_gpus`.
    gpus_seen: parking_lot::Mutex<Vec<String>>,
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

/// The label every series of channel `slug` carries.
pub const CHANNEL_LABEL: &str = "channel";

impl Prom {
    /// The default channel's metrics.
    pub fn new() -> Self {
        Self::for_channel("default")
    }

    /// Channel `slug`'s metrics (its series labelled `channel="<slug>"`).
    pub fn for_channel(slug: &str) -> Self {
        let mut r =
            Registry::with_labels(std::iter::once((Cow::Borrowed(CHANNEL_LABEL), Cow::Owned(slug.to_string()))));
        let mut server = Registry::default();
        let p = Prom {
            registry: Registry::default(),
            server: Registry::default(),
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
            transcode_speed: Family::default(),
            transcode_headroom: FloatGauge::default(),
            ingest_bitrate_kbps: FloatGauge::default(),
            webhook_deliveries: Counter::default(),
            webhook_failures: Counter::default(),
            gpu_utilization: Family::default(),
            gpu_memory: Family::default(),
            gpu_encoder: Family::default(),
            gpu_decoder: Family::default(),
            gpu_temperature: Family::default(),
            gpu_power: Family::default(),
            gpus_seen: parking_lot::Mutex::default(),
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
        server.register("owncast_instance_cpu_usage", "Server CPU use in percent", p.cpu_usage.clone());
        server.register(
            "owncast_instance_cpu_use_pct",
            "Server CPU use in percent (older name)",
            p.cpu_use_pct.clone(),
        );
        r.register("castd_encode_fps", "Frames per second encoded, per output variant", p.encode_fps.clone());
        r.register(
            "castd_encode_speed",
            "Encoder realtime factor per output variant (below 1 cannot keep up)",
            p.encode_speed.clone(),
        );
        r.register("castd_encoder_in_use", "1 for the encoder each output variant uses", p.encoder_in_use.clone());
        r.register(
            "castd_transcode_speed",
            "Real-time factor each x264 rung can sustain at its current preset (below 1 cannot keep up)",
            p.transcode_speed.clone(),
        );
        r.register(
            "castd_transcode_headroom",
            "Headroom of the software ladder: 1 minus its load (negative: short of real time by that fraction)",
            p.transcode_headroom.clone(),
        );
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
        server.register(
            "castd_gpu_utilization_percent",
            "GPU utilization in percent, per GPU",
            p.gpu_utilization.clone(),
        );
        server.register(
            "castd_gpu_memory_used_percent",
            "GPU device memory allocated in percent, per GPU",
            p.gpu_memory.clone(),
        );
        server.register(
            "castd_gpu_encoder_utilization_percent",
            "GPU video encoder (NVENC) utilization in percent, per GPU",
            p.gpu_encoder.clone(),
        );
        server.register(
            "castd_gpu_decoder_utilization_percent",
            "GPU video decoder (NVDEC) utilization in percent, per GPU",
            p.gpu_decoder.clone(),
        );
        server.register(
            "castd_gpu_temperature_celsius",
            "GPU temperature in degrees Celsius, per GPU",
            p.gpu_temperature.clone(),
        );
        server.register("castd_gpu_power_watts", "GPU power draw in watts, per GPU", p.gpu_power.clone());
        r.register("castd_playback_clients", "Playback clients with a live session", p.playback_clients.clone());
        r.register(
            "castd_webrtc_viewers",
            "WebRTC (WHEP) viewers connected now; they are also counted in the active viewers",
            p.webrtc_viewers.clone(),
        );
        server.register(
            "castd_webrtc_dropped_datagrams",
            "Inbound WebRTC datagrams dropped: reason queue_full (a session's queue was full), unclaimed (no session)",
            p.webrtc_dropped.clone(),
        );
        server.register("castd_storage_uploads", "Objects uploaded to object storage", p.storage_uploads.clone());
        server.register(
            "castd_storage_failures",
            "Object storage requests that failed after their retries",
            p.storage_failures.clone(),
        );
        server.register("castd_storage_uploaded_bytes", "Bytes uploaded to object storage", p.storage_bytes.clone());
        server.register("castd_storage_deletes", "Objects deleted from object storage", p.storage_deletes.clone());
        server.register("castd_storage_queue_depth", "Objects waiting for upload", p.storage_queue_depth.clone());
        server.register(
            "castd_storage_upload_latency_seconds",
            "Seconds from a segment being ready on disk to the object being visible in storage",
            p.storage_latency.clone(),
        );
        Prom { registry: r, server, ..p }
    }

    /// The OpenMetrics text of this channel's series and the server-wide ones (a castd with one
    /// channel: the default channel's exposition).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        Ok(merge(&[self.encode_server()?, self.encode_channel()?]))
    }

    /// The OpenMetrics text of this channel's series only.
    pub fn encode_channel(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// The OpenMetrics text of the server-wide series.
    pub fn encode_server(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.server)?;
        Ok(out)
    }

    /// The GPU gauges from the latest sample, by `gpu` label (NVML's index): a figure that was read is
    /// set, one that was not (no power sensor, say) has no series, and a GPU no longer sampled loses all
    /// of its series.
    pub fn set_gpus(&self, gpus: &BTreeMap<String, GpuFigures>) {
        let mut seen = self.gpus_seen.lock();
        for gone in seen.iter().filter(|g| !gpus.contains_key(*g)) {
            let label = gpu_label(gone);
            for family in self.gpu_families() {
                family.remove(&label);
            }
        }
        for (gpu, f) in gpus {
            let label = gpu_label(gpu);
            let values = [f.utilization, f.memory, f.encoder, f.decoder, f.temperature, f.power];
            for (family, value) in self.gpu_families().into_iter().zip(values) {
                match value {
                    Some(v) => {
                        family.get_or_create(&label).set(v);
                    }
                    None => {
                        family.remove(&label);
                    }
                }
            }
        }
        *seen = gpus.keys().cloned().collect();
    }

    /// The GPU families, in the order of `GpuFigures`' fields.
    fn gpu_families(&self) -> [&Family<Labels, FloatGauge>; 6] {
        [
            &self.gpu_utilization,
            &self.gpu_memory,
            &self.gpu_encoder,
            &self.gpu_decoder,
            &self.gpu_temperature,
            &self.gpu_power,
        ]
    }

    /// The stream stopped: drop the per-variant encoder series and the ingest bitrate.
    pub fn clear_stream(&self) {
        self.encode_fps.clear();
        self.encode_speed.clear();
        self.encoder_in_use.clear();
        self.transcode_speed.clear();
        self.transcode_headroom.set(0.0);
        self.ingest_bitrate_kbps.set(0.0);
    }
}

/// The labels of GPU `gpu`'s series.
fn gpu_label(gpu: &str) -> Labels {
    vec![("gpu".to_string(), gpu.to_string())]
}

/// Several OpenMetrics expositions (the server-wide one, each channel's) as one: each family's
/// `# HELP`/`# TYPE`/`# UNIT` once (from the first exposition that has it), followed by the samples of
/// every exposition, families in the order they first appear, one `# EOF` at the end. The channels'
/// expositions come from the same code, so a family's metadata is the same in each; their series
/// differ by the `channel` label.
pub fn merge(parts: &[String]) -> String {
    struct Family {
        meta: Vec<String>,
        samples: Vec<String>,
    }
    let mut order: Vec<String> = Vec::new();
    let mut families: std::collections::HashMap<String, Family> = std::collections::HashMap::new();
    for part in parts {
        let mut current: Option<String> = None;
        // Whether this exposition gave the current family its metadata (else it is a repeat).
        let mut first = false;
        for line in part.lines() {
            if line == "# EOF" || line.is_empty() {
                continue;
            }
            let meta = ["# HELP ", "# TYPE ", "# UNIT "].iter().find_map(|p| line.strip_prefix(p));
            if let Some(rest) = meta {
                let name = rest.split(' ').next().unwrap_or_default().to_string();
                if current.as_deref() != Some(name.as_str()) {
                    first = !families.contains_key(&name);
                    if first {
                        order.push(name.clone());
                        families.insert(name.clone(), Family { meta: Vec::new(), samples: Vec::new() });
                    }
                    current = Some(name.clone());
                }
                if first {
                    if let Some(f) = families.get_mut(&name) {
                        f.meta.push(line.to_string());
                    }
                }
                continue;
            }
            // A sample (or a comment) of the current family; one before any metadata keeps its own.
            let name = current.clone().unwrap_or_default();
            let f = families.entry(name.clone()).or_insert_with(|| {
                order.push(name.clone());
                Family { meta: Vec::new(), samples: Vec::new() }
            });
            f.samples.push(line.to_string());
        }
    }
    let mut out = String::new();
    for name in &order {
        if let Some(f) = families.get(name) {
            for l in f.meta.iter().chain(&f.samples) {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out.push_str("# EOF\n");
    out
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
        assert!(text.contains("owncast_instance_active_viewer_count{channel=\"default\"} 3"), "{text}");
        assert!(text.contains("castd_encode_speed{channel=\"default\",variant=\"1\"} 0.75"), "{text}");
        assert!(text.contains("castd_webhook_failures_total{channel=\"default\"} 1"), "{text}");
        assert!(text.contains("owncast_instance_cpu_usage 0.0"), "server-wide, no channel: {text}");
        assert!(text.trim_end().ends_with("# EOF"));
        p.clear_stream();
        assert!(!p.encode().unwrap().contains("castd_encode_speed{"));
    }

    /// The sampled GPU figures become one series per figure and GPU; unread figures and vanished GPUs
    /// have none.
    #[test]
    fn gpu_figures_map_to_gauges_per_gpu() {
        let p = Prom::new();
        let h200 = GpuFigures {
            utilization: Some(12.0),
            memory: Some(30.5),
            encoder: Some(0.0),
            decoder: Some(65.0),
            temperature: Some(41.0),
            power: Some(312.5),
        };
        let no_sensor = GpuFigures { power: None, temperature: None, ..h200 };
        let gpus = BTreeMap::from([("0".to_string(), h200), ("1".to_string(), no_sensor)]);
        p.set_gpus(&gpus);
        let text = p.encode().unwrap();
        for line in [
            "castd_gpu_utilization_percent{gpu=\"0\"} 12.0",
            "castd_gpu_memory_used_percent{gpu=\"0\"} 30.5",
            "castd_gpu_encoder_utilization_percent{gpu=\"0\"} 0.0",
            "castd_gpu_decoder_utilization_percent{gpu=\"0\"} 65.0",
            "castd_gpu_temperature_celsius{gpu=\"0\"} 41.0",
            "castd_gpu_power_watts{gpu=\"0\"} 312.5",
            "castd_gpu_decoder_utilization_percent{gpu=\"1\"} 65.0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing: {text}");
        }
        assert!(!text.contains("castd_gpu_power_watts{gpu=\"1\"}"), "no power sensor, no series: {text}");
        assert!(!text.contains("castd_gpu_temperature_celsius{gpu=\"1\"}"), "{text}");
        assert!(!p.encode_channel().unwrap().contains("castd_gpu_"), "GPUs are server-wide, not a channel's");

        // GPU 1 is gone, GPU 0 lost its power reading.
        p.set_gpus(&BTreeMap::from([("0".to_string(), GpuFigures { power: None, ..h200 })]));
        let text = p.encode().unwrap();
        assert!(!text.contains("gpu=\"1\""), "{text}");
        assert!(!text.contains("castd_gpu_power_watts{"), "{text}");
        assert!(text.contains("castd_gpu_utilization_percent{gpu=\"0\"} 12.0"), "{text}");
        // No GPU: no GPU series at all.
        p.set_gpus(&BTreeMap::new());
        assert!(!p.encode().unwrap().contains("{gpu="), "no GPU, no GPU series");
    }

    #[test]
    fn channels_merge_into_one_exposition_each_family_once() {
        let a = Prom::new();
        let b = Prom::for_channel("church");
        a.active_viewers.set(3);
        b.active_viewers.set(5);
        b.encode_speed.get_or_create(&variant_label(0)).set(1.5);
        b.storage_uploads.inc();
        assert!(!b.encode_channel().unwrap().contains("castd_storage"), "server-wide series are not a channel's");
        assert!(b.encode_channel().unwrap().contains("owncast_instance_active_viewer_count{channel=\"church\"} 5"));
        let text = merge(&[a.encode_server().unwrap(), a.encode_channel().unwrap(), b.encode_channel().unwrap()]);
        let helps = text.lines().filter(|l| l.starts_with("# HELP owncast_instance_active_viewer_count ")).count();
        assert_eq!(helps, 1, "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.trim_end().ends_with("# EOF"));
        let viewers: Vec<&str> =
            text.lines().filter(|l| l.starts_with("owncast_instance_active_viewer_count{")).collect();
        assert_eq!(
            viewers,
            [
                "owncast_instance_active_viewer_count{channel=\"default\"} 3",
                "owncast_instance_active_viewer_count{channel=\"church\"} 5"
            ]
        );
        // The samples of a family follow its metadata, before the next family's.
        let lines: Vec<&str> = text.lines().collect();
        let help = lines.iter().position(|l| l.starts_with("# HELP castd_encode_speed ")).unwrap();
        let sample = lines.iter().position(|l| l.starts_with("castd_encode_speed{")).unwrap();
        let next =
            lines.iter().skip(help + 1).position(|l| l.starts_with("# HELP ")).map_or(lines.len(), |n| n + help + 1);
        assert!(help < sample && sample < next, "{text}");
        assert!(!lines[help + 1..next].iter().any(|l| l.starts_with("owncast_")), "{text}");
    }
}
