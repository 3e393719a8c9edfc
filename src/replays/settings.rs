//! The replay settings' setters (`POST /api/admin/config/replay/*`, `{"value": ...}`, answered with
//! Owncast's messages: `enable`, `clipsenabled`, `maxclipduration`, `clippermissions`; castd's
//! `maxgigabytes`, `retentiondays`, `announceclips`), the `replay` part of the admin server
//! configuration and the `clips` part of `/api/config`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Replays;
use crate::config::replay::CLIP_PERMISSIONS;
use crate::config::{ReplaySettings, Settings};
use crate::http::{setter_value, ApiError, Auth, BodyDoc, Registry, StatusResponse, ValueDoc};

type Apply = fn(&Value, &mut ReplaySettings) -> Result<(), &'static str>;

/// (path under `/api/admin/config/`, summary, value shape, apply, the success message).
static SETTERS: &[(&str, &str, ValueDoc, Apply, &str)] = &[
    (
        "replay/enable",
        "Record broadcasts and serve replays and clips",
        ValueDoc::Boolean,
        set_enabled,
        "replay features saved",
    ),
    ("replay/clipsenabled", "Let viewers and bots create clips", ValueDoc::Boolean, set_clips, "clip creation saved"),
    (
        "replay/maxclipduration",
        "Longest clip in seconds (1-3600)",
        ValueDoc::Json(r#"{"type":"integer","minimum":1,"maximum":3600}"#),
        set_max_clip,
        "maximum clip duration saved",
    ),
    (
        "replay/clippermissions",
        "Who may clip: moderators, authenticated or established (accounts at least an hour old)",
        ValueDoc::Json(r#"{"type":"string","enum":["moderators","authenticated","established"]}"#),
        set_permissions,
        "clip permissions saved",
    ),
    (
        "replay/maxgigabytes",
        "castd: disk budget of all replays, GB (the oldest unpinned finished replays go first)",
        ValueDoc::Json(r#"{"type":"number","minimum":0,"maximum":1000000}"#),
        set_max_gb,
        "replay disk budget saved",
    ),
    (
        "replay/retentiondays",
        "castd: delete finished unpinned replays older than this many days (0 = keep)",
        ValueDoc::Json(r#"{"type":"integer","minimum":0}"#),
        set_retention,
        "replay retention saved",
    ),
    (
        "replay/announceclips",
        "castd: announce viewers' clips in chat",
        ValueDoc::Boolean,
        set_announce,
        "clip announcements saved",
    ),
];

fn boolean(v: &Value) -> Result<bool, &'static str> {
    v.as_bool().ok_or("a boolean value is required")
}

fn set_enabled(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    s.replay_enabled = boolean(v)?;
    Ok(())
}

fn set_clips(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    s.clips_enabled = boolean(v)?;
    Ok(())
}

fn set_announce(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    s.replay_announce_clips = boolean(v)?;
    Ok(())
}

fn set_max_clip(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    let n = v.as_f64().ok_or("a numeric value is required")?;
    if !(1.0..=3600.0).contains(&n) {
        return Err("clip duration must be between 1 and 3600 seconds");
    }
    s.max_clip_duration_seconds = n as u32;
    Ok(())
}

fn set_permissions(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    let p = v.as_str().map(str::trim).unwrap_or_default();
    if !CLIP_PERMISSIONS.contains(&p) {
        return Err("clip permissions must be one of: moderators, authenticated, established");
    }
    s.clip_permissions = p.to_string();
    Ok(())
}

fn set_max_gb(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    let n = v.as_f64().ok_or("a numeric value is required")?;
    if !(0.0..=1_000_000.0).contains(&n) {
        return Err("the disk budget must be between 0 and 1000000 GB");
    }
    s.replay_max_gigabytes = n;
    Ok(())
}

fn set_retention(v: &Value, s: &mut ReplaySettings) -> Result<(), &'static str> {
    // A whole number, also when written with a fraction of zero (JSON Schema's integer, as 7.0).
    let n = v.as_f64().filter(|n| *n >= 0.0 && n.fract() == 0.0).ok_or("a whole number of days is required")?;
    s.replay_retention_days = n.min(100_000.0) as u32;
    Ok(())
}

pub fn routes(reg: &mut Registry, r: Arc<Replays>) {
    let mut reg = reg.scope(r);
    for (i, (name, summary, value, _, _)) in SETTERS.iter().enumerate() {
        reg.post(
            &format!("/api/admin/config/{name}"),
            "admin",
            Auth::Admin,
            summary,
            BodyDoc::Value(*value),
            move |State(r): State<Arc<Replays>>, body: Bytes| apply(r, i, body),
        );
    }
}

async fn apply(r: Arc<Replays>, i: usize, body: Bytes) -> Result<Response, ApiError> {
    let (_, _, _, f, ok) = SETTERS[i];
    let value = setter_value(&body)?;
    // The store announces the change; the budget task runs when the budget or the retention changed.
    r.settings.update::<ApiError, _>(|s| f(&value, &mut s.replay).map_err(ApiError::bad)).await?;
    Ok(StatusResponse::ok(ok).into_response())
}

/// `replay` of the server configuration (Owncast's fields, then castd's).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayView {
    pub enabled: bool,
    pub clips_enabled: bool,
    pub max_clip_duration_seconds: u32,
    pub clip_permissions: String,
    pub forced_by_command_line: bool,
    pub max_gigabytes: f64,
    pub retention_days: u32,
    pub announce_clips: bool,
}

/// The replays' part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayConfigPart {
    pub replay: ReplayView,
}

pub fn server_config(s: &Settings) -> ReplayConfigPart {
    let r = &s.replay;
    ReplayConfigPart {
        replay: ReplayView {
            enabled: r.replay_enabled,
            clips_enabled: r.clips_enabled,
            max_clip_duration_seconds: r.max_clip_duration_seconds,
            clip_permissions: r.clip_permissions.clone(),
            forced_by_command_line: false,
            max_gigabytes: r.replay_max_gigabytes,
            retention_days: r.replay_retention_days,
            announce_clips: r.replay_announce_clips,
        },
    }
}

/// `clips` of `/api/config`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClipsConfig {
    pub enabled: bool,
    pub max_duration_seconds: u32,
    pub permissions: String,
}

pub fn public_clips(s: &Settings) -> ClipsConfig {
    let r = &s.replay;
    ClipsConfig {
        enabled: r.replay_enabled && r.clips_enabled,
        max_duration_seconds: r.max_clip_duration_seconds,
        permissions: r.clip_permissions.clone(),
    }
}

/// `streamId` of `/api/status`: only while live and clipping is on (Owncast).
pub fn status_stream_id(s: &Settings, stream_id: Option<&String>) -> Option<String> {
    (s.replay.replay_enabled && s.replay.clips_enabled).then(|| stream_id.cloned()).flatten()
}
