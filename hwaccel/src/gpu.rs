//! GPU statistics through NVML (NVIDIA's management library), loaded at run time.
//!
//! [`GpuMonitor::init`] loads `libnvidia-ml.so.1`; on a box without the NVIDIA driver it fails once with
//! [`GpuError::NoDriver`] and the caller simply has no GPU series. [`GpuMonitor::sample`] reads, per GPU,
//! the utilization, the encoder (NVENC) utilization and the memory in use, all in percent.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::Serialize;

use crate::recipe::nvenc_session_cap;

/// Why GPU statistics are not available.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no NVIDIA driver (NVML could not be loaded): {0}")]
    NoDriver(String),
    #[error("NVML error: {0}")]
    Nvml(#[from] NvmlError),
}

/// One reading of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSample {
    pub index: u32,
    pub name: String,
    /// Percent of time a kernel ran.
    pub utilization: f64,
    /// Percent of NVENC capacity in use.
    pub encoder: f64,
    /// Percent of device memory allocated.
    pub memory: f64,
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

    /// Read every GPU; a GPU whose reading fails is left out.
    pub fn sample(&self) -> Result<Vec<GpuSample>, GpuError> {
        let count = self.nvml.device_count()?;
        let mut out = Vec::with_capacity(count as usize);
        for index in 0..count {
            let Ok(dev) = self.nvml.device_by_index(index) else { continue };
            let name = dev.name().unwrap_or_else(|_| format!("GPU {index}"));
            let utilization = dev.utilization_rates().map(|u| f64::from(u.gpu)).unwrap_or(0.0);
            let encoder = dev.encoder_utilization().map(|u| f64::from(u.utilization)).unwrap_or(0.0);
            let memory = dev
                .memory_info()
                .map(|m| if m.total == 0 { 0.0 } else { m.used as f64 * 100.0 / m.total as f64 })
                .unwrap_or(0.0);
            out.push(GpuSample { index, name, utilization, encoder, memory });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_never_panics_and_samples_are_percentages() {
        match GpuMonitor::init() {
            Ok(m) => {
                for s in m.sample().unwrap() {
                    for v in [s.utilization, s.encoder, s.memory] {
                        assert!((0.0..=100.0).contains(&v), "{s:?}");
                    }
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}
