//! Admin routes for the hardware: Owncast's hardware stats, and castd's encoder list and re-probe.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::encoders;
use crate::api::{Auth, BodyDoc, Registry};
use crate::app::App;

const GROUP: &str = "admin";

pub fn register(reg: &mut Registry) {
    reg.get(
        "/api/admin/hardwarestats",
        GROUP,
        Auth::Admin,
        "CPU, memory, disk (and GPU) utilization series with the health overview",
        hardware_stats,
    );
    reg.get("/api/admin/encoders", GROUP, Auth::Admin, "Video encoders found on this server", list_encoders);
    reg.post(
        "/api/admin/encoders/probe",
        GROUP,
        Auth::Admin,
        "Probe the video encoders again and answer the new list",
        BodyDoc::None,
        probe_encoders,
    );
}

/// `{cpu, memory, disk, gpu?, message, healthPercentage, representation, healthy}`.
pub fn hardware_stats_json(app: &App) -> Value {
    let health = app.health.read().clone();
    let series = app.hardware.stats.read();
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

async fn hardware_stats(State(app): State<Arc<App>>) -> Json<Value> {
    Json(hardware_stats_json(&app))
}

/// `{encoders: [{name, kind, available, device, reason}], videoCodec, selected, inUse, probedAt}`.
pub fn encoders_json(app: &App) -> Value {
    json!({
        "encoders": *app.encoders.read(),
        "videoCodec": app.settings.get().video_codec,
        "selected": encoders::selected(app).name,
        "inUse": app.stream.read().encoders,
        "probedAt": *app.hardware.probed_at.read(),
    })
}

async fn list_encoders(State(app): State<Arc<App>>) -> Json<Value> {
    Json(encoders_json(&app))
}

async fn probe_encoders(State(app): State<Arc<App>>) -> Json<Value> {
    encoders::refresh(&app).await;
    Json(encoders_json(&app))
}
