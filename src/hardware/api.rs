//! Admin routes for the hardware: Owncast's hardware stats, and castd's encoder list and re-probe (the
//! root's: the server's); a channel's API serves the hardware stats only, the server's series with the
//! channel's own health overview (`channel_routes`).

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::stats::{GpuSeries, Points};
use super::{encoders, Hardware};
use crate::health::HealthHub;
use crate::http::{Auth, BodyDoc, Registry, ResponseDoc};

const GROUP: &str = "admin";

/// `encoders_json` as a schema: every field it writes (an entry is `hwaccel::EncoderInfo` serialised).
const ENCODERS_SCHEMA: &str = r#"{"type":"object",
  "required":["encoders","videoCodec","selected","selectedLabel","inUse","probedAt"],"properties":{
  "encoders":{"type":"array","items":{"type":"object","required":["name","kind","available","device","reason"],
    "properties":{"name":{"type":"string"},
      "kind":{"type":"string","enum":["software","nvenc","vaapi","qsv"]},
      "available":{"type":"boolean"},
      "device":{"type":"string","description":"The device it runs on (`/dev/dri/renderD128`, `cuda:0`), empty for software."},
      "reason":{"type":"string","description":"Why it is unavailable (the driver's own error), empty when available."},
      "decode":{"type":"string","enum":["cuda","vaapi","qsv"],
        "description":"Set on a decode path: libx264 on pictures decoded and scaled on this device."}}}},
  "videoCodec":{"type":"string","description":"The configured encoder (`auto` or a name)."},
  "selected":{"type":"string","description":"The encoder the next stream uses."},
  "selectedLabel":{"type":"string","description":"The choice as people read it, e.g. `libx264 (decode and scaling on cuda:0)`."},
  "inUse":{"type":"array","items":{"type":"string"},"description":"The encoders the running stream uses."},
  "probedAt":{"type":["string","null"],"format":"date-time","description":"When the encoders were last probed."}}}"#;

pub fn routes(reg: &mut Registry, hw: Arc<Hardware>) {
    let mut reg = reg.scope(hw);
    reg.get(
        "/api/admin/hardwarestats",
        GROUP,
        Auth::Admin,
        "CPU, memory, disk (and GPU) utilization series with the health overview",
        hardware_stats,
    )
    .returns::<HardwareStats>();
    reg.get("/api/admin/encoders", GROUP, Auth::Admin, "Video encoders found on this server", list_encoders)
        .answers(ResponseDoc::JsonSchema(ENCODERS_SCHEMA));
    reg.post(
        "/api/admin/encoders/probe",
        GROUP,
        Auth::Admin,
        "Probe the video encoders again and answer the new list",
        BodyDoc::None,
        probe_encoders,
    )
    .answers(ResponseDoc::JsonSchema(ENCODERS_SCHEMA));
}

/// A channel's `GET /api/admin/hardwarestats` (under `/c/{slug}`): the server's utilization series (the
/// box is shared; its load is what a channel's stream runs on) with that channel's own health overview.
pub fn channel_routes(reg: &mut Registry, hw: Arc<Hardware>, health: Arc<HealthHub>) {
    let mut reg = reg.scope((hw, health));
    reg.get(
        "/api/admin/hardwarestats",
        GROUP,
        Auth::Admin,
        "CPU, memory, disk (and GPU) utilization of the server, with this channel's health overview",
        channel_hardware_stats,
    )
    .returns::<HardwareStats>();
}

async fn channel_hardware_stats(State((hw, health)): State<(Arc<Hardware>, Arc<HealthHub>)>) -> Json<HardwareStats> {
    Json(stats_with_health(&hw, health.get()))
}

/// `GET /api/admin/hardwarestats`: the utilization series (percentages) with the health overview.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HardwareStats {
    pub cpu: Points,
    pub memory: Points,
    pub disk: Points,
    /// One entry per GPU (NVIDIA, through NVML): utilization, encoder, decoder and memory in percent,
    /// temperature in °C, power in W, each a `{time, value}` series; left out when there is no GPU.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu: Vec<GpuSeries>,
    pub message: String,
    pub health_percentage: u32,
    pub representation: u32,
    pub healthy: bool,
}

/// The hardware series and the health overview.
pub fn hardware_stats_of(hw: &Hardware) -> HardwareStats {
    stats_with_health(hw, hw.health.get())
}

/// The hardware series with `health`'s overview.
fn stats_with_health(hw: &Hardware, health: crate::health::Health) -> HardwareStats {
    let series = hw.stats.read().clone();
    HardwareStats {
        cpu: series.cpu,
        memory: series.memory,
        disk: series.disk,
        gpu: series.gpu,
        message: health.message,
        health_percentage: health.health_percentage,
        representation: health.representation,
        healthy: health.healthy,
    }
}

async fn hardware_stats(State(hw): State<Arc<Hardware>>) -> Json<HardwareStats> {
    Json(hardware_stats_of(&hw))
}

/// `{encoders: [{name, kind, available, device, reason, decode?}], videoCodec, selected, selectedLabel,
/// inUse, probedAt}`: an entry with `decode` (`cuda`, `vaapi`) is a decode path (libx264 on pictures decoded
/// and scaled on that device); `selectedLabel` says which (`libx264 (decode and scaling on cuda:0)`).
pub fn encoders_json(hw: &Hardware) -> Value {
    let found = hw.encoders.borrow().clone();
    let wanted = hw.settings.get().video.video_codec.clone();
    let chosen = hwaccel::select(&wanted, &found);
    let selected = chosen.map_or(hwaccel::recipe::SOFTWARE_ENCODER, |e| e.name.as_str());
    let label = chosen.map_or(hwaccel::recipe::SOFTWARE_ENCODER.to_string(), |e| e.label());
    json!({
        "encoders": found,
        "videoCodec": wanted,
        "selected": selected,
        "selectedLabel": label,
        "inUse": hw.stream.borrow().encoders,
        "probedAt": *hw.probed_at.read(),
    })
}

async fn list_encoders(State(hw): State<Arc<Hardware>>) -> Json<Value> {
    Json(encoders_json(&hw))
}

async fn probe_encoders(State(hw): State<Arc<Hardware>>) -> Json<Value> {
    encoders::refresh(&hw).await;
    Json(encoders_json(&hw))
}
