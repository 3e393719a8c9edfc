//! Cross-feature measurements: figures one feature produces and metrics turns into Prometheus series
//! and health inputs, so that producers never import metrics (nor metrics them).
//!
//! Writers: hardware (CPU and GPU samples), ingest (the broadcaster's measured bitrate), transcode
//! (each variant's encoder, fps, speed and sustainable speed, the software ladder's headroom), chat
//! (connected clients, slow clients dropped), webhooks
//! (delivery results), storage (object uploads, failures, bytes, queue depth, upload latencies).
//! Reader: metrics. Every method is cheap and callable from any thread; nothing here blocks for long.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The latest figures of one variant's encoder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncoderFigures {
    pub encoder: String,
    pub fps: f64,
    pub speed: f64,
    /// The real-time factor the variant can sustain (speed over its stage's busy fraction; capacity
    /// policy), for x264 rungs of the software ladder.
    pub capacity: Option<f64>,
}

/// One GPU's latest figures (percent, except `temperature` in °C and `power` in W); `None`: not read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuFigures {
    pub utilization: Option<f64>,
    pub memory: Option<f64>,
    pub encoder: Option<f64>,
    pub decoder: Option<f64>,
    pub temperature: Option<f64>,
    pub power: Option<f64>,
}

/// See the module doc; share as `Arc<Telemetry>`.
#[derive(Debug, Default)]
pub struct Telemetry {
    cpu: Mutex<VecDeque<f64>>,
    gpu: Mutex<BTreeMap<String, GpuFigures>>,
    ingest_kbps: Mutex<Option<f64>>,
    encoders: Mutex<BTreeMap<usize, EncoderFigures>>,
    /// The software ladder's headroom (1 − load; negative when behind), while a stream is transcoded.
    transcode_headroom: Mutex<Option<f64>>,
    /// Per variant: (sum of speeds, samples) since the last `take_speeds`.
    speeds: Mutex<BTreeMap<usize, (f64, u32)>>,
    chat_clients: AtomicU64,
    chat_slow_dropped: AtomicU64,
    webhooks_delivered: AtomicU64,
    webhooks_failed: AtomicU64,
    storage: StorageFigures,
}

/// Object storage figures (running totals, the queue depth now, latencies not yet read).
#[derive(Debug, Default)]
struct StorageFigures {
    uploads: AtomicU64,
    failures: AtomicU64,
    bytes: AtomicU64,
    deletes: AtomicU64,
    queue_depth: AtomicU64,
    /// Segment-ready-to-object-visible seconds since the last `take_storage_latencies`; bounded: when
    /// nobody reads, the oldest samples are dropped.
    latencies: Mutex<VecDeque<f64>>,
}

/// Most latency samples kept between two reads.
const STORAGE_LATENCY_SAMPLES: usize = 4096;

/// A snapshot of the storage totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageTotals {
    pub uploads: u64,
    pub failures: u64,
    pub bytes: u64,
    pub deletes: u64,
    pub queue_depth: u64,
}

impl Telemetry {
    /// A CPU-use sample in percent (the last two are kept; health uses their average).
    pub fn cpu_sample(&self, pct: f64) {
        if !pct.is_finite() {
            return;
        }
        let mut cpu = self.cpu.lock();
        if cpu.len() >= 2 {
            cpu.pop_front();
        }
        cpu.push_back(pct);
    }

    /// The newest CPU sample.
    pub fn cpu_latest(&self) -> Option<f64> {
        self.cpu.lock().back().copied()
    }

    /// Average of the last two CPU samples.
    pub fn cpu_average(&self) -> Option<f64> {
        let cpu = self.cpu.lock();
        (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64)
    }

    /// The latest figures of every GPU, by index (replaces the previous sample: a GPU no longer read is
    /// gone). Figures that are not finite are dropped.
    pub fn set_gpus(&self, gpus: BTreeMap<String, GpuFigures>) {
        let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
        let gpus = gpus
            .into_iter()
            .map(|(k, f)| {
                let f = GpuFigures {
                    utilization: finite(f.utilization),
                    memory: finite(f.memory),
                    encoder: finite(f.encoder),
                    decoder: finite(f.decoder),
                    temperature: finite(f.temperature),
                    power: finite(f.power),
                };
                (k, f)
            })
            .collect();
        *self.gpu.lock() = gpus;
    }

    pub fn gpus(&self) -> BTreeMap<String, GpuFigures> {
        self.gpu.lock().clone()
    }

    /// The broadcaster's inbound bitrate in kbps (`None` when nobody publishes).
    pub fn set_ingest_kbps(&self, kbps: Option<f64>) {
        *self.ingest_kbps.lock() = kbps.filter(|k| k.is_finite() && *k >= 0.0);
    }

    pub fn ingest_kbps(&self) -> Option<f64> {
        *self.ingest_kbps.lock()
    }

    /// A progress report of `variant`'s encoder.
    pub fn encoder_progress(&self, variant: usize, encoder: &str, fps: f64, speed: f64) {
        let mut e = self.encoders.lock();
        let f = e.entry(variant).or_default();
        f.encoder = encoder.to_string();
        if fps.is_finite() {
            f.fps = fps;
        }
        if speed.is_finite() {
            f.speed = speed;
        }
        drop(e);
        if speed.is_finite() && speed >= 0.0 {
            let mut s = self.speeds.lock();
            let entry = s.entry(variant).or_insert((0.0, 0));
            entry.0 += speed;
            entry.1 += 1;
        }
    }

    /// `variant` can sustain `capacity` times real time at its preset (`None`: not measured).
    pub fn encoder_capacity(&self, variant: usize, capacity: Option<f64>) {
        self.encoders.lock().entry(variant).or_default().capacity = capacity.filter(|c| c.is_finite());
    }

    /// The software ladder's headroom (`None`: not measured).
    pub fn set_transcode_headroom(&self, headroom: Option<f64>) {
        *self.transcode_headroom.lock() = headroom.filter(|h| h.is_finite());
    }

    pub fn transcode_headroom(&self) -> Option<f64> {
        *self.transcode_headroom.lock()
    }

    pub fn encoders(&self) -> BTreeMap<usize, EncoderFigures> {
        self.encoders.lock().clone()
    }

    /// Each variant's average speed since the last call; starts a new window.
    pub fn take_speeds(&self) -> Vec<(usize, f64)> {
        std::mem::take(&mut *self.speeds.lock())
            .into_iter()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(v, (sum, n))| (v, sum / f64::from(n)))
            .collect()
    }

    /// The stream stopped: forget its encoder and ingest figures.
    pub fn clear_stream(&self) {
        self.encoders.lock().clear();
        *self.transcode_headroom.lock() = None;
        self.speeds.lock().clear();
        *self.ingest_kbps.lock() = None;
    }

    pub fn set_chat_clients(&self, n: u64) {
        self.chat_clients.store(n, Ordering::Relaxed);
    }

    pub fn chat_clients(&self) -> u64 {
        self.chat_clients.load(Ordering::Relaxed)
    }

    /// `n` chat clients were dropped by the slow-consumer policy.
    pub fn chat_slow_dropped(&self, n: u64) {
        self.chat_slow_dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Chat clients dropped by the slow-consumer policy since start.
    pub fn chat_slow_dropped_total(&self) -> u64 {
        self.chat_slow_dropped.load(Ordering::Relaxed)
    }

    /// One webhook delivery finished (delivered, or given up).
    pub fn webhook_delivery(&self, ok: bool) {
        let c = if ok { &self.webhooks_delivered } else { &self.webhooks_failed };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Running totals `(delivered, failed)`.
    pub fn webhook_totals(&self) -> (u64, u64) {
        (self.webhooks_delivered.load(Ordering::Relaxed), self.webhooks_failed.load(Ordering::Relaxed))
    }
}

impl Telemetry {
    /// One object uploaded (`bytes` long); `latency`: seconds from the file being ready to the object
    /// being visible in the store, for segments.
    pub fn storage_upload(&self, bytes: u64, latency: Option<f64>) {
        let f = &self.storage;
        f.uploads.fetch_add(1, Ordering::Relaxed);
        f.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(l) = latency.filter(|l| l.is_finite() && *l >= 0.0) {
            let mut q = f.latencies.lock();
            if q.len() >= STORAGE_LATENCY_SAMPLES {
                q.pop_front();
            }
            q.push_back(l);
        }
    }

    /// One storage request failed (after its retries).
    pub fn storage_failure(&self) {
        self.storage.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` objects deleted from the store.
    pub fn storage_deleted(&self, n: u64) {
        self.storage.deletes.fetch_add(n, Ordering::Relaxed);
    }

    /// Objects waiting for upload now.
    pub fn set_storage_queue(&self, n: u64) {
        self.storage.queue_depth.store(n, Ordering::Relaxed);
    }

    pub fn storage_totals(&self) -> StorageTotals {
        let f = &self.storage;
        StorageTotals {
            uploads: f.uploads.load(Ordering::Relaxed),
            failures: f.failures.load(Ordering::Relaxed),
            bytes: f.bytes.load(Ordering::Relaxed),
            deletes: f.deletes.load(Ordering::Relaxed),
            queue_depth: f.queue_depth.load(Ordering::Relaxed),
        }
    }

    /// The upload latencies recorded since the last call.
    pub fn take_storage_latencies(&self) -> Vec<f64> {
        self.storage.latencies.lock().drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_are_replaced_per_sample_and_keep_finite_figures() {
        let t = Telemetry::default();
        let f = GpuFigures { utilization: Some(5.0), power: Some(f64::NAN), ..Default::default() };
        t.set_gpus(BTreeMap::from([("0".to_string(), f), ("1".to_string(), f)]));
        assert_eq!(t.gpus().len(), 2);
        assert_eq!(t.gpus()["0"].power, None, "NaN is not a reading");
        assert_eq!(t.gpus()["0"].utilization, Some(5.0));
        t.set_gpus(BTreeMap::from([("1".to_string(), f)]));
        assert_eq!(t.gpus().keys().collect::<Vec<_>>(), ["1"], "a GPU no longer sampled is gone");
    }

    #[test]
    fn speeds_average_per_window_and_reset() {
        let t = Telemetry::default();
        t.encoder_progress(1, "libx264", 20.0, 0.6);
        t.encoder_progress(1, "libx264", 20.0, 0.8);
        t.encoder_progress(0, "copy", 30.0, f64::NAN);
        let speeds = t.take_speeds();
        assert_eq!(speeds.len(), 1);
        assert!((speeds[0].1 - 0.7).abs() < 1e-9);
        assert!(t.take_speeds().is_empty());
        assert_eq!(t.encoders()[&0].encoder, "copy");
        t.cpu_sample(10.0);
        t.cpu_sample(20.0);
        t.cpu_sample(40.0);
        assert_eq!(t.cpu_average(), Some(30.0));
        t.clear_stream();
        assert!(t.encoders().is_empty());
    }
}
