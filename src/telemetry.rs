//! Cross-feature measurements: figures one feature produces and metrics turns into Prometheus series
//! and health inputs, so that producers never import metrics (nor metrics them).
//!
//! Writers: hardware (CPU and GPU samples), ingest (the broadcaster's measured bitrate), transcode
//! (each variant's encoder, fps and speed), chat (connected clients), webhooks (delivery results).
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
}

/// See the module doc; share as `Arc<Telemetry>`.
#[derive(Debug, Default)]
pub struct Telemetry {
    cpu: Mutex<VecDeque<f64>>,
    gpu: Mutex<BTreeMap<String, f64>>,
    ingest_kbps: Mutex<Option<f64>>,
    encoders: Mutex<BTreeMap<usize, EncoderFigures>>,
    /// Per variant: (sum of speeds, samples) since the last `take_speeds`.
    speeds: Mutex<BTreeMap<usize, (f64, u32)>>,
    chat_clients: AtomicU64,
    webhooks_delivered: AtomicU64,
    webhooks_failed: AtomicU64,
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

    /// GPU `gpu` (an index or name) is `pct` percent busy.
    pub fn gpu_utilization(&self, gpu: &str, pct: f64) {
        if pct.is_finite() {
            self.gpu.lock().insert(gpu.to_string(), pct);
        }
    }

    pub fn gpus(&self) -> BTreeMap<String, f64> {
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
        self.speeds.lock().clear();
        *self.ingest_kbps.lock() = None;
    }

    pub fn set_chat_clients(&self, n: u64) {
        self.chat_clients.store(n, Ordering::Relaxed);
    }

    pub fn chat_clients(&self) -> u64 {
        self.chat_clients.load(Ordering::Relaxed)
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

#[cfg(test)]
mod tests {
    use super::*;

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
