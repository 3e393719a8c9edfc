//! Hardware health sampling: CPU %, memory %, disk % of the data dir's filesystem (sysinfo) and, when an
//! NVIDIA driver is present, per GPU its utilization, memory (% and MiB), encoder and decoder utilization,
//! temperature (°C) and power draw (W) (NVML via hwaccel). A GPU figure NVML does not answer adds no
//! point to that series; the GPU's other series go on. With `--debug-gpu-sample FILE` (a test switch) the
//! sampler reports the file's readings instead of NVML's (`GpuSource::Fixed`), so the GPU series, the
//! metrics and the admin page can be tested on a box without a GPU.
//!
//! One sampler thread (the readings block) takes a sample at start and then every `SAMPLE_INTERVAL`,
//! appending to series capped at `MAX_POINTS` (the oldest point is dropped: 12 h at 10 s). After each
//! sample it applies Owncast's alerts: when the average of the last two samples is above 85 % (CPU),
//! 85 % (memory) or 90 % (disk), the admin health message says so, the log warns and HEALTH_ALERT goes
//! on the bus; when it falls back under the threshold the message is cleared (if it is still ours).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sysinfo::{Disks, System};
use tracing::{debug, info, warn};

use super::Hardware;
use super::HardwareError;
use crate::health::HealthInput;
use crate::tasks::{Stage, Tasks};
use crate::telemetry::GpuFigures;

/// Time between samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
/// Points kept per series (12 h at 10 s; the issue asks for at least 10 h).
pub const MAX_POINTS: usize = 4320;
/// Owncast's alert thresholds, percent.
pub const CPU_ALERT: f64 = 85.0;
pub const MEMORY_ALERT: f64 = 85.0;
pub const DISK_ALERT: f64 = 90.0;

/// One point of a series, Owncast's `{time, value}`: a percentage (a GPU's temperature: °C, power: W).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = UtilizationPoint)]
pub struct Point {
    pub time: DateTime<Utc>,
    pub value: f64,
}

/// A capped series.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(transparent)]
#[schema(value_type = Vec<Point>)]
pub struct Points(VecDeque<Point>);

impl Points {
    /// Append a percentage (clamped to 0..=100).
    pub fn push(&mut self, time: DateTime<Utc>, value: f64) {
        self.push_value(time, value.clamp(0.0, 100.0));
    }

    /// Append a figure in its own unit (°C, W); a value that is not finite is not recorded.
    pub fn push_value(&mut self, time: DateTime<Utc>, value: f64) {
        if !value.is_finite() {
            return;
        }
        if self.0.len() >= MAX_POINTS {
            self.0.pop_front();
        }
        self.0.push_back(Point { time, value });
    }

    /// The newest value.
    pub fn latest(&self) -> Option<f64> {
        self.0.back().map(|p| p.value)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Owncast's `recentAverage`: the mean of the last two values, once there are two.
    pub fn recent_average(&self) -> Option<f64> {
        let n = self.0.len();
        (n >= 2).then(|| (self.0[n - 1].value + self.0[n - 2].value) / 2.0)
    }
}

/// One GPU's series. A figure the GPU does not answer (no power sensor, say) leaves its series without
/// points; the MiB figures are the latest reading, `null` until one was read.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuSeries {
    /// NVML's index of the GPU (the `gpu` label of the Prometheus series).
    pub index: u32,
    pub name: String,
    /// Device memory installed, MiB.
    #[serde(rename = "memoryTotalMiB")]
    pub memory_total_mib: Option<u64>,
    /// Device memory allocated at the latest sample, MiB.
    #[serde(rename = "memoryUsedMiB")]
    pub memory_used_mib: Option<u64>,
    /// Percent of time a kernel ran.
    pub utilization: Points,
    /// Percent of NVENC (encoder) capacity in use.
    pub encoder: Points,
    /// Percent of NVDEC (decoder) capacity in use.
    pub decoder: Points,
    /// Percent of device memory allocated.
    pub memory: Points,
    /// GPU temperature, degrees Celsius.
    pub temperature: Points,
    /// Board power draw, watts.
    pub power: Points,
}

/// Every series.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    pub cpu: Points,
    pub memory: Points,
    pub disk: Points,
    pub gpu: Vec<GpuSeries>,
}

/// Which metric an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Cpu,
    Memory,
    Disk,
}

impl Metric {
    fn label(self) -> &'static str {
        match self {
            Metric::Cpu => "CPU",
            Metric::Memory => "memory",
            Metric::Disk => "disk",
        }
    }

    fn threshold(self) -> f64 {
        match self {
            Metric::Cpu => CPU_ALERT,
            Metric::Memory => MEMORY_ALERT,
            Metric::Disk => DISK_ALERT,
        }
    }
}

/// A change of alert state.
#[derive(Debug, Clone, PartialEq)]
pub enum AlertChange {
    Raised { metric: Metric, average: f64, message: String },
    Cleared { metric: Metric },
}

/// Alert state per metric (pure logic, no I/O).
#[derive(Debug, Default)]
pub struct Alerts {
    raised: [Option<String>; 3],
}

impl Alerts {
    /// Compare the recent averages with the thresholds and report what changed.
    pub fn update(&mut self, series: &Series) -> Vec<AlertChange> {
        let mut changes = Vec::new();
        for (slot, (metric, points)) in
            [(Metric::Cpu, &series.cpu), (Metric::Memory, &series.memory), (Metric::Disk, &series.disk)]
                .into_iter()
                .enumerate()
        {
            let Some(avg) = points.recent_average() else { continue };
            let over = avg > metric.threshold();
            match (over, self.raised[slot].is_some()) {
                (true, false) => {
                    let message = format!(
                        "The {} utilization of {avg:.1}% could cause problems with video generation and delivery.",
                        metric.label()
                    );
                    self.raised[slot] = Some(message.clone());
                    changes.push(AlertChange::Raised { metric, average: avg, message });
                }
                (false, true) => {
                    self.raised[slot] = None;
                    changes.push(AlertChange::Cleared { metric });
                }
                _ => {}
            }
        }
        changes
    }

    /// The message of a raised alert for `metric`.
    pub fn message(&self, metric: Metric) -> Option<&str> {
        self.raised[metric as usize].as_deref()
    }
}

/// The readings of one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub cpu: f64,
    pub memory: f64,
    pub disk: Option<f64>,
    pub gpus: Vec<hwaccel::gpu::GpuSample>,
}

/// Disk % used of the filesystem holding `dir`: the mount point that is the longest prefix of its
/// canonical path.
pub fn disk_percent(disks: &Disks, dir: &Path) -> Option<f64> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let disk =
        disks.iter().filter(|d| dir.starts_with(d.mount_point())).max_by_key(|d| d.mount_point().as_os_str().len())?;
    let total = disk.total_space();
    (total > 0).then(|| (total.saturating_sub(disk.available_space())) as f64 * 100.0 / total as f64)
}

/// Where the GPU readings come from.
enum GpuSource {
    /// No NVIDIA driver: no GPU series.
    None,
    Nvml(Box<hwaccel::gpu::GpuMonitor>),
    /// `--debug-gpu-sample`: these readings at every sample (test switch).
    Fixed(Vec<hwaccel::gpu::GpuSample>),
}

/// The sampler's readers.
struct Sampler {
    system: System,
    disks: Disks,
    gpu: GpuSource,
    data_dir: PathBuf,
}

impl Sampler {
    fn new(data_dir: PathBuf) -> Result<Self, HardwareError> {
        let mut system = System::new().map_err(HardwareError::Sysinfo)?;
        system.refresh_cpu_usage();
        let disks = Disks::new_with_refreshed_list().map_err(HardwareError::Sysinfo)?;
        Ok(Self { system, disks, gpu: GpuSource::None, data_dir })
    }

    /// Load NVML (on the sampler thread), or take the fixed readings of `--debug-gpu-sample`; absent
    /// driver: one debug line, no GPU series.
    fn load_gpu(&mut self, fixed: Option<Vec<hwaccel::gpu::GpuSample>>) {
        if let Some(gpus) = fixed {
            warn!("--debug-gpu-sample: reporting {} fabricated GPU reading(s) instead of NVML's", gpus.len());
            self.gpu = GpuSource::Fixed(gpus);
            return;
        }
        self.gpu = match hwaccel::gpu::GpuMonitor::init() {
            Ok(m) => {
                info!("GPU statistics: NVML loaded");
                GpuSource::Nvml(Box::new(m))
            }
            Err(e) => {
                debug!("no GPU statistics: {e}");
                GpuSource::None
            }
        };
    }

    fn read(&mut self) -> Reading {
        self.system.refresh_cpu_usage();
        self.system.refresh_memory();
        self.disks.refresh(true);
        let total = self.system.total_memory();
        let memory = if total == 0 {
            0.0
        } else {
            total.saturating_sub(self.system.available_memory()) as f64 * 100.0 / total as f64
        };
        let gpus = match &self.gpu {
            GpuSource::Nvml(m) => m.sample().unwrap_or_else(|e| {
                debug!("GPU sample failed: {e}");
                Vec::new()
            }),
            GpuSource::Fixed(gpus) => gpus.clone(),
            GpuSource::None => Vec::new(),
        };
        Reading {
            cpu: f64::from(self.system.global_cpu_usage()),
            memory,
            disk: disk_percent(&self.disks, &self.data_dir),
            gpus,
        }
    }
}

/// Append a reading to the series.
pub fn record(series: &mut Series, time: DateTime<Utc>, r: &Reading) {
    series.cpu.push(time, r.cpu);
    series.memory.push(time, r.memory);
    if let Some(d) = r.disk {
        series.disk.push(time, d);
    }
    for g in &r.gpus {
        let pos = match series.gpu.iter().position(|s| s.index == g.index) {
            Some(p) => p,
            None => {
                series.gpu.push(GpuSeries { index: g.index, name: g.name.clone(), ..Default::default() });
                series.gpu.len() - 1
            }
        };
        let s = &mut series.gpu[pos];
        s.name.clone_from(&g.name);
        for (points, value) in [
            (&mut s.utilization, g.utilization),
            (&mut s.encoder, g.encoder),
            (&mut s.decoder, g.decoder),
            (&mut s.memory, g.memory),
        ] {
            if let Some(v) = value {
                points.push(time, v);
            }
        }
        if let Some(c) = g.temperature {
            s.temperature.push_value(time, c);
        }
        if let Some(w) = g.power.filter(|w| *w >= 0.0) {
            s.power.push_value(time, w);
        }
        if g.memory_total_mib.is_some() {
            s.memory_total_mib = g.memory_total_mib;
        }
        s.memory_used_mib = g.memory_used_mib;
    }
}

/// A reading's GPU figures as telemetry carries them to metrics, keyed by the GPU's index.
pub fn gpu_figures(gpus: &[hwaccel::gpu::GpuSample]) -> BTreeMap<String, GpuFigures> {
    gpus.iter()
        .map(|g| {
            let figures = GpuFigures {
                utilization: g.utilization,
                memory: g.memory,
                encoder: g.encoder,
                decoder: g.decoder,
                temperature: g.temperature,
                power: g.power,
            };
            (g.index.to_string(), figures)
        })
        .collect()
}

/// Apply alert changes: log them and report them to the health hub.
fn apply_alerts(hw: &Hardware, changes: Vec<AlertChange>) {
    for change in changes {
        match change {
            AlertChange::Raised { metric, message, .. } => {
                warn!("{message}");
                hw.health.submit(HealthInput::Hardware { metric: metric.label(), alert: Some(message) });
            }
            AlertChange::Cleared { metric } => {
                info!("{} utilization is back under {}%", metric.label(), metric.threshold());
                hw.health.submit(HealthInput::Hardware { metric: metric.label(), alert: None });
            }
        }
    }
}

/// Start sampling into `Hardware::stats`: one sample right away, then one every `SAMPLE_INTERVAL`, on
/// its own thread (sysinfo blocks); a task of the `Background` stage stops the thread and joins it.
pub fn start(hw: Arc<Hardware>, tasks: &Tasks) -> Result<(), HardwareError> {
    let (stop_tx, stop_rx) = mpsc::sync_channel::<()>(1);
    let mut sampler = Sampler::new(hw.data_dir.clone())?;
    let thread = std::thread::Builder::new()
        .name("hardware-stats".into())
        .spawn(move || {
            sampler.load_gpu(hw.debug_gpu_sample.clone());
            // sysinfo needs two CPU readings some time apart before usage means anything.
            std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL.max(Duration::from_millis(250)));
            let mut alerts = Alerts::default();
            loop {
                let reading = sampler.read();
                hw.telemetry.cpu_sample(reading.cpu);
                hw.telemetry.set_gpus(gpu_figures(&reading.gpus));
                let changes = {
                    let mut series = hw.stats.write();
                    record(&mut series, Utc::now(), &reading);
                    alerts.update(&series)
                };
                apply_alerts(&hw, changes);
                match stop_rx.recv_timeout(SAMPLE_INTERVAL) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
        })
        .map_err(HardwareError::Thread)?;
    let stop = tasks.token(Stage::Background);
    tasks.spawn(Stage::Background, "hardware statistics", async move {
        stop.cancelled().await;
        drop(stop_tx);
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap_or_default()
    }

    fn reading(cpu: f64, memory: f64, disk: f64) -> Reading {
        Reading { cpu, memory, disk: Some(disk), gpus: Vec::new() }
    }

    #[test]
    fn series_are_capped_and_clamped() {
        let mut p = Points::default();
        for i in 0..(MAX_POINTS + 10) {
            p.push(t(i as i64), 150.0);
        }
        assert_eq!(p.len(), MAX_POINTS);
        assert_eq!(p.0[0].time, t(10));
        assert_eq!(p.0[0].value, 100.0);
        assert!(MAX_POINTS as u64 * SAMPLE_INTERVAL.as_secs() >= 10 * 3600);
    }

    #[test]
    fn alerts_follow_owncast_average_of_two() {
        let mut s = Series::default();
        let mut a = Alerts::default();
        record(&mut s, t(0), &reading(95.0, 10.0, 50.0));
        assert!(a.update(&s).is_empty(), "one sample is not enough");
        record(&mut s, t(10), &reading(80.0, 10.0, 50.0));
        // (95 + 80) / 2 = 87.5 > 85
        let changes = a.update(&s);
        assert_eq!(changes.len(), 1);
        assert!(matches!(&changes[0], AlertChange::Raised { metric: Metric::Cpu, average, .. } if *average == 87.5));
        assert!(a.message(Metric::Cpu).unwrap_or("").contains("CPU utilization of 87.5%"));
        record(&mut s, t(20), &reading(95.0, 86.0, 91.0));
        // still raised for CPU: no repeat; memory average 48 stays quiet; disk average 70.5 quiet.
        assert!(a.update(&s).is_empty());
        record(&mut s, t(30), &reading(10.0, 90.0, 95.0));
        let changes = a.update(&s);
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert!(changes.contains(&AlertChange::Cleared { metric: Metric::Cpu }));
        assert!(changes.iter().any(|c| matches!(c, AlertChange::Raised { metric: Metric::Memory, .. })));
        assert!(changes.iter().any(|c| matches!(c, AlertChange::Raised { metric: Metric::Disk, .. })));
    }

    #[test]
    fn gpu_series_are_created_per_gpu() {
        let mut s = Series::default();
        let r = Reading { cpu: 1.0, memory: 2.0, disk: None, gpus: vec![gpu(0), gpu(1)] };
        record(&mut s, t(0), &r);
        record(&mut s, t(10), &r);
        assert_eq!(s.gpu.len(), 2);
        assert_eq!(s.gpu[1].encoder.len(), 2);
        assert!(s.disk.is_empty());
    }

    /// A fabricated H200 reading.
    fn gpu(index: u32) -> hwaccel::gpu::GpuSample {
        hwaccel::gpu::GpuSample {
            index,
            name: format!("GPU {index}"),
            utilization: Some(50.0),
            memory: Some(30.0),
            memory_used_mib: Some(43_131),
            memory_total_mib: Some(143_771),
            encoder: Some(20.0),
            decoder: Some(65.0),
            temperature: Some(41.0),
            power: Some(312.5),
        }
    }

    #[test]
    fn every_gpu_figure_has_its_series_in_its_unit() {
        let mut s = Series::default();
        let r = Reading { cpu: 1.0, memory: 2.0, disk: None, gpus: vec![gpu(3)] };
        record(&mut s, t(0), &r);
        let g = &s.gpu[0];
        assert_eq!((g.index, g.name.as_str()), (3, "GPU 3"));
        assert_eq!(g.utilization.latest(), Some(50.0));
        assert_eq!(g.memory.latest(), Some(30.0));
        assert_eq!(g.encoder.latest(), Some(20.0));
        assert_eq!(g.decoder.latest(), Some(65.0));
        assert_eq!(g.temperature.latest(), Some(41.0));
        assert_eq!(g.power.latest(), Some(312.5), "watts are not clamped to 100");
        assert_eq!((g.memory_used_mib, g.memory_total_mib), (Some(43_131), Some(143_771)));
        let json = serde_json::to_value(&s.gpu).unwrap();
        for key in [
            "index",
            "name",
            "memoryTotalMiB",
            "memoryUsedMiB",
            "utilization",
            "encoder",
            "decoder",
            "memory",
            "temperature",
            "power",
        ] {
            assert!(json[0].get(key).is_some(), "{key} missing: {json}");
        }
        assert_eq!(json[0]["power"][0]["value"], 312.5);
        assert_eq!(json[0]["temperature"][0]["time"], serde_json::to_value(t(0)).unwrap());
    }

    #[test]
    fn a_figure_the_gpu_does_not_answer_adds_no_point_and_keeps_the_gpu() {
        let mut s = Series::default();
        let no_power = hwaccel::gpu::GpuSample { power: None, temperature: None, decoder: None, ..gpu(0) };
        record(&mut s, t(0), &Reading { cpu: 1.0, memory: 2.0, disk: None, gpus: vec![no_power.clone()] });
        record(&mut s, t(10), &Reading { cpu: 1.0, memory: 2.0, disk: None, gpus: vec![gpu(0)] });
        let g = &s.gpu[0];
        assert_eq!(g.utilization.len(), 2);
        assert_eq!(g.power.len(), 1, "only the reading that had a power figure");
        assert_eq!(g.decoder.len(), 1);
        assert_eq!(g.temperature.len(), 1);
        let figures = gpu_figures(&[no_power]);
        assert_eq!(figures["0"].power, None);
        assert_eq!(figures["0"].utilization, Some(50.0));
    }

    #[test]
    fn disk_percent_of_the_data_dir_is_a_percentage() {
        let disks = Disks::new_with_refreshed_list().unwrap();
        let dir = std::env::temp_dir();
        let pct = disk_percent(&disks, &dir).expect("the temp dir is on some listed filesystem");
        assert!((0.0..=100.0).contains(&pct), "{pct}");
    }
}
