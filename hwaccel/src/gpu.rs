//! GPU statistics through NVML (NVIDIA's management library), loaded at run time.
//!
//! [`GpuMonitor::init`] loads `libnvidia-ml.so.1`; on a box without the NVIDIA driver it fails once with
//! [`GpuError::NoDriver`] and the caller simply has no GPU series. [`GpuMonitor::sample`] reads, per GPU,
//! the utilization, memory (percent, and used/total MiB), the encoder (NVENC) and decoder (NVDEC)
//! utilization, the GPU's temperature and its power draw. A reading the GPU does not answer (a card
//! without a power sensor, a query the driver does not support) is `None` for that field alone; the
//! GPU is still reported. [`GpuMonitor::report`] is the whole answer with the driver version, as
//! `castd gpus` prints it.

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};

use crate::recipe::nvenc_session_cap;

/// Why GPU statistics are not available.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no NVIDIA driver (NVML could not be loaded): {0}")]
    NoDriver(String),
    #[error("NVML error: {0}")]
    Nvml(#[from] NvmlError),
}

/// Bytes in a MiB.
const MIB: u64 = 1024 * 1024;

/// One reading of one GPU. Every figure is `None` (JSON `null`) when the GPU did not answer it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuSample {
    pub index: u32,
    pub name: String,
    /// Percent of time a kernel ran.
    #[serde(default)]
    pub utilization: Option<f64>,
    /// Percent of device memory allocated.
    #[serde(default)]
    pub memory: Option<f64>,
    /// Device memory allocated, MiB.
    #[serde(default, rename = "memoryUsedMiB")]
    pub memory_used_mib: Option<u64>,
    /// Device memory installed, MiB.
    #[serde(default, rename = "memoryTotalMiB")]
    pub memory_total_mib: Option<u64>,
    /// Percent of NVENC capacity in use.
    #[serde(default)]
    pub encoder: Option<f64>,
    /// Percent of NVDEC capacity in use.
    #[serde(default)]
    pub decoder: Option<f64>,
    /// GPU die temperature, degrees Celsius.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Power draw of the board, watts.
    #[serde(default)]
    pub power: Option<f64>,
}

/// What `castd gpus` prints: the driver version and one sample per GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuReport {
    /// The NVIDIA driver's version (`550.54.15`); `None` when NVML did not say.
    #[serde(default)]
    pub driver_version: Option<String>,
    pub gpus: Vec<GpuSample>,
}

/// Memory percent, used MiB and total MiB from NVML's byte counts.
pub fn memory_figures(used: u64, total: u64) -> (Option<f64>, u64, u64) {
    let pct = (total > 0).then(|| used as f64 * 100.0 / total as f64);
    (pct, used / MIB, total / MIB)
}

/// Watts from NVML's milliwatts.
pub fn watts(milliwatts: u32) -> f64 {
    f64::from(milliwatts) / 1000.0
}

/// A loaded NVML.
pub struct GpuMonitor {
    nvml: Nvml,
}

impl GpuMonitor {
    /// Load NVML; fails quietly (one error value) when no NVIDIA driver is installed.
    pub fn init() -> Result<Self, GpuError> {
        match Nvml::init() {
            Ok(nvml) => Ok(Self { nvml }),
            Err(
                e @ (NvmlError::LibloadingError(_) | NvmlError::FailedToLoadSymbol(_) | NvmlError::DriverNotLoaded),
            ) => Err(GpuError::NoDriver(e.to_string())),
            Err(e) => Err(GpuError::Nvml(e)),
        }
    }

    /// The driver version string (`550.54.15`).
    pub fn driver_version(&self) -> Result<String, GpuError> {
        Ok(self.nvml.sys_driver_version()?)
    }

    /// NVENC sessions GPU `index` allows (None: no driver cap), from its name and the driver version.
    pub fn nvenc_session_cap(&self, index: u32) -> Result<Option<u32>, GpuError> {
        let name = self.nvml.device_by_index(index)?.name()?;
        Ok(nvenc_session_cap(&name, &self.driver_version()?))
    }

    /// The NVENC session cap of the GPU encoder `chosen` runs on (`cuda:N`), when it is NVENC and the driver
    /// caps it; `None` otherwise, and on a box without the driver. Blocking (loads NVML): call it off the
    /// async runtime.
    pub fn cap_for(chosen: &crate::EncoderInfo) -> Option<u32> {
        if chosen.kind != crate::EncoderKind::Nvenc {
            return None;
        }
        let index: u32 = chosen.device.strip_prefix("cuda:").and_then(|i| i.parse().ok()).unwrap_or(0);
        GpuMonitor::init().ok().and_then(|m| m.nvenc_session_cap(index).ok().flatten())
    }

    /// Read every GPU. A GPU that cannot be opened is left out; a figure it does not answer is `None`.
    pub fn sample(&self) -> Result<Vec<GpuSample>, GpuError> {
        let count = self.nvml.device_count()?;
        let mut out = Vec::with_capacity(count as usize);
        for index in 0..count {
            let Ok(dev) = self.nvml.device_by_index(index) else { continue };
            let name = dev.name().unwrap_or_else(|_| format!("GPU {index}"));
            let (memory, memory_used_mib, memory_total_mib) = match dev.memory_info() {
                Ok(m) => {
                    let (pct, used, total) = memory_figures(m.used, m.total);
                    (pct, Some(used), Some(total))
                }
                Err(_) => (None, None, None),
            };
            out.push(GpuSample {
                index,
                name,
                utilization: dev.utilization_rates().ok().map(|u| f64::from(u.gpu)),
                memory,
                memory_used_mib,
                memory_total_mib,
                encoder: dev.encoder_utilization().ok().map(|u| f64::from(u.utilization)),
                decoder: dev.decoder_utilization().ok().map(|u| f64::from(u.utilization)),
                temperature: dev.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
                power: dev.power_usage().ok().map(watts),
            });
        }
        Ok(out)
    }

    /// The driver version and every GPU's sample (`castd gpus`).
    pub fn report(&self) -> Result<GpuReport, GpuError> {
        Ok(GpuReport { driver_version: self.driver_version().ok(), gpus: self.sample()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only NVENC has a session cap; on a box without the NVIDIA driver (CI) there is none to apply, and
    /// asking does not fail.
    #[test]
    fn only_nvenc_on_a_driver_has_a_session_cap() {
        let enc = |name: &str, kind| crate::EncoderInfo {
            name: name.into(),
            kind,
            available: true,
            device: "cuda:0".into(),
            reason: String::new(),
            decode: None,
        };
        assert_eq!(GpuMonitor::cap_for(&enc("libx264", crate::EncoderKind::Software)), None);
        assert_eq!(GpuMonitor::cap_for(&enc("h264_vaapi", crate::EncoderKind::Vaapi)), None);
        if GpuMonitor::init().is_err() {
            assert_eq!(GpuMonitor::cap_for(&enc("h264_nvenc", crate::EncoderKind::Nvenc)), None);
        }
    }

    #[test]
    fn init_never_panics_and_samples_are_percentages() {
        match GpuMonitor::init() {
            Ok(m) => {
                for s in m.sample().unwrap() {
                    for v in [s.utilization, s.encoder, s.decoder, s.memory].into_iter().flatten() {
                        assert!((0.0..=100.0).contains(&v), "{s:?}");
                    }
                    assert!(s.power.is_none_or(|w| (0.0..5000.0).contains(&w)), "{s:?}");
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn units_are_converted() {
        assert_eq!(watts(312_456), 312.456);
        let (pct, used, total) = memory_figures(512 * MIB, 2048 * MIB);
        assert_eq!((pct, used, total), (Some(25.0), 512, 2048));
        assert_eq!(memory_figures(0, 0).0, None, "no division by zero");
    }

    #[test]
    fn a_missing_figure_is_null_and_reads_back_as_none() {
        let s = GpuSample { index: 1, name: "H200".into(), utilization: Some(3.0), ..Default::default() };
        let report = GpuReport { driver_version: Some("550.54.15".into()), gpus: vec![s.clone()] };
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains(r#""driverVersion":"550.54.15""#), "{text}");
        assert!(text.contains(r#""power":null"#), "{text}");
        assert!(text.contains(r#""memoryTotalMiB":null"#), "{text}");
        let back: GpuReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, report);
        // Fields left out read as None.
        let sparse: GpuSample = serde_json::from_str(r#"{"index":0,"name":"x","power":250.5}"#).unwrap();
        assert_eq!(sparse.power, Some(250.5));
        assert_eq!(sparse.temperature, None);
    }
}
