//! Admin routes for the hardware: Owncast's hardware stats, and castd's encoder list and re-probe.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::{encoders, Hardware};
use crate::http::{Auth, BodyDoc, Registry, ResponseDoc};

const GROUP: &str = "admin";

/// `encoders_json` as a schema.
const ENCODERS_SCHEMA: &str = r#"{"type":"object","required":["encoders","videoCodec","selected"],"properties":{
  "encoders":{"type":"array","items":{"type":"object","required":["name","available"],
    "properties":{"name":{"type":"string"},"available":{"type":"boolean"}}}},
  "videoCodec":{"type":"string"},"selected":{"type":"string"}}}"#;

pub fn routes(reg: &mut Registry, hw: Arc<Hardware>) {
    let mut reg = reg.scope(hw);
    reg.get(
        "/api/admin/hardwarestats",
        GROUP,
        Auth::Admin,
        "CPU, memory, disk (and GPU) utilization series with the health overview",
        hardware_stats,
    );
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

/// `{cpu, memory, disk, gpu?, message, healthPercentage, representation, healthy}`.
pub fn hardware_stats_json(hw: &Hardware) -> Value {
    let health = hw.health.get();
    let series = hw.stats.read();
    let mut out = json!({
        "cpu": series.cpu,
        "memory": series.memory,
        "disk": series.disk,
        "message": health.message,
        "healthPercentage": health.health_percentage,
        "representation": health.representation,
        "healthy": health.healthy,
    });
    if !series.gpu.is_empty() {
        out["gpu"] = json!(series.gpu);
    }
    out
}

async fn hardware_stats(State(hw): State<Arc<Hardware>>) -> Json<Value> {
    Json(hardware_stats_json(&hw))
}

/// `{encoders: [{name, kind, available, device, reason}], videoCodec, selected, inUse, probedAt}`.
pub fn encoders_json(hw: &Hardware) -> Value {
    let found = hw.encoders.borrow().clone();
    let wanted = hw.settings.get().video_codec.clone();
    let selected = hwaccel::select(&wanted, &found).map_or(hwaccel::recipe::SOFTWARE_ENCODER, |e| e.name.as_str());
    json!({
        "encoders": found,
        "videoCodec": wanted,
        "selected": selected,
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
