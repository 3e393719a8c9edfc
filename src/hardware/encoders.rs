//! Encoder discovery from the daemon's side, and the encoder choice the transcoder asks for.
//!
//! The hwaccel probe opens vendor drivers, which may hang or crash, so the daemon never probes in its
//! own process: it runs its own executable as `castd encoders --json --only NAME` once per known encoder,
//! all at once, each killed after `PROBE_TIMEOUT`. A probe that crashes, hangs or prints garbage marks
//! that encoder unavailable with the reason. Probing runs once at start, in the background (until it
//! finishes the list holds libx264 alone), and again on `POST /api/admin/encoders/probe`. Which encoder
//! a stream uses is the transcoder's choice (`transcode::encoders`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use hwaccel::{EncoderInfo, EncoderKind, KNOWN_DECODE_PATHS, KNOWN_ENCODERS};
use tokio::process::Command;
use tracing::{info, warn};

use super::{Hardware, HardwareError};
use crate::tasks::{Stage, Tasks};

/// Time limit of one encoder's probe process.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Probe `name` in a child process running `exe`.
pub async fn probe_in_child(exe: &Path, name: &str) -> Result<Vec<EncoderInfo>, HardwareError> {
    let child = Command::new(exe)
        .args(["encoders", "--json", "--only", name])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(HardwareError::Spawn)?;
    let output = tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| HardwareError::Timeout(PROBE_TIMEOUT.as_secs()))?
        .map_err(HardwareError::Spawn)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
        return Err(HardwareError::Failed { status: output.status.to_string(), stderr: tail });
    }
    serde_json::from_slice(&output.stdout).map_err(HardwareError::Output)
}

/// Probe every known encoder and decode path (`hwaccel::probe::probe_names`), each in its own child
/// process, concurrently; results in preference order.
pub async fn probe_all() -> Vec<EncoderInfo> {
    let names = hwaccel::probe::probe_names();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            let reason = HardwareError::OwnExe(e).to_string();
            return names.iter().map(|name| unavailable(name, &reason)).collect();
        }
    };
    let probes = names.into_iter().map(|name| {
        let exe = exe.clone();
        async move {
            match probe_in_child(&exe, name).await {
                Ok(found) if !found.is_empty() => found,
                Ok(_) => vec![unavailable(name, "the probe reported nothing")],
                Err(e) => vec![unavailable(name, &e.to_string())],
            }
        }
    });
    let mut all = Vec::new();
    // Concurrent within this call (each probe waits on its child process).
    for found in futures_util::future::join_all(probes).await {
        all.extend(found);
    }
    all
}

/// An unavailable entry for probe name `name` (an encoder, or a decode path of libx264).
fn unavailable(name: &str, reason: &str) -> EncoderInfo {
    let decode = KNOWN_DECODE_PATHS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k);
    let kind = KNOWN_ENCODERS.iter().find(|(n, _)| *n == name).map_or(EncoderKind::Software, |(_, k)| *k);
    let name = if decode.is_some() { hwaccel::SOFTWARE_ENCODER } else { name };
    EncoderInfo { name: name.into(), kind, available: false, device: String::new(), reason: reason.into(), decode }
}

/// Probe now (waiting for a probe already running), publish the result and log it.
pub async fn refresh(hw: &Hardware) -> Vec<EncoderInfo> {
    let _guard = hw.probe_lock.lock().await;
    let found = probe_all().await;
    for e in &found {
        let device =
            if e.device.is_empty() || e.decode.is_some() { String::new() } else { format!(" on {}", e.device) };
        let what = if e.decode.is_some() { "decode path" } else { "encoder" };
        let name = e.label();
        if e.available {
            info!("{what} {name}{device}: available");
        } else {
            info!("{what} {name}{device}: unavailable: {}", e.reason);
        }
    }
    hw.encoders.send_replace(found.clone());
    *hw.probed_at.write() = Some(Utc::now());
    let wanted = hw.settings.get().video.video_codec.clone();
    match hwaccel::select(&wanted, &found) {
        Some(e) => info!("video codec '{wanted}' uses {}", e.label()),
        None if wanted != "auto" => warn!("the configured encoder '{wanted}' is not available here; using libx264"),
        None => warn!("no encoder works on this box, not even libx264: streams cannot be transcoded"),
    }
    found
}

/// Start the first probe in the background (its child processes are killed if the `Background`
/// stage stops first).
pub fn spawn_startup_probe(hw: Arc<Hardware>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "encoder probe", async move {
        refresh(&hw).await;
    });
}
