//! Does a ladder fit this box? Answered before going live, for the admin's Video page, from a short
//! measurement of each encoder at each rung's size, cached per box.
//!
//! - `measure`: the measurement, in a child process (`castd measure --json <spec>`, like the transcode
//!   worker: a codec crash takes the child down, never the daemon): each rung encoded for about a
//!   second with the worker's own recipe and threads, and the decode of a 1080p30 H.264 source.
//! - `cache`: the figures of this box in `<data-dir>/ladder-fit.json`, keyed by the box's fingerprint
//!   and the rung (encoder, preset, size, frame rate); a rung measured once is not measured again.
//! - `verdict`: the arithmetic: each rung's cores, the decode's, against the box's cores less one.
//! - `api`: `GET /api/admin/video/fit` (the configured ladder) and `POST` (a ladder from the editor).
//!
//! [`FitState::evaluate`] runs one answer: it plans the rungs' encoders as the transcoder does
//! (`hwaccel::plan_sessions` on the encoder the video codec selects, with the NVENC session cap NVML
//! gives, as at stream start: rungs past the cap are x264's and measured), takes what the cache has, measures
//! the rest in one child (at most `MEASURE_BUDGET` of measuring, then the rungs left are estimated; the
//! child is killed after `MEASURE_TIMEOUT`) and judges. One answer is worked out at a time, server-wide
//! (a lock on the box's one state), so two pages asking at once measure once and never compete for the
//! CPU they measure.
//!
//! The box is shared by every channel, so a channel's ask is bounded ([`Measurer::Channel`]): at most
//! [`CHANNEL_RUNGS_PER_ASK`] new rungs are measured per answer and [`CHANNEL_RUNGS_PER_WINDOW`] per
//! [`CHANNEL_WINDOW`] per channel; the rest are estimated, and the answer says so. Only the server
//! admin's asks (the root's routes) measure whatever the ladder needs (within `MEASURE_BUDGET`).

pub mod api;
pub mod cache;
pub mod measure;
pub mod verdict;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;
use hwaccel::EncoderInfo;
use tokio::process::Command;
use tracing::{info, warn};

use self::cache::{BoxId, Cache};
use self::measure::{MeasureLine, MeasureSpec, RungSpec};
use self::verdict::{Cost, Inputs, LadderFit, Made, Rung};
use crate::config::StreamOutputVariant;
use crate::media::ChannelId;

/// Time limit of one measurement child.
pub const MEASURE_TIMEOUT: Duration = Duration::from_secs(60);
/// Measuring time per answer: after it, the rungs not yet measured are estimated (and measured the next
/// time they are asked for).
pub const MEASURE_BUDGET: Duration = Duration::from_secs(5);

/// New rungs one answer to a channel measures at most.
pub const CHANNEL_RUNGS_PER_ASK: usize = 2;
/// New rungs a channel's answers measure at most per [`CHANNEL_WINDOW`].
pub const CHANNEL_RUNGS_PER_WINDOW: usize = 6;
/// The window of [`CHANNEL_RUNGS_PER_WINDOW`].
pub const CHANNEL_WINDOW: Duration = Duration::from_secs(600);

/// Who asks: the server admin (the root's routes) or a channel (its admin, or the server admin on the
/// channel's routes), whose new measurements are limited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measurer {
    Server,
    Channel(ChannelId),
}

/// What can go wrong running the measurement child.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("cannot find castd's own executable: {0}")]
    OwnExe(std::io::Error),
    #[error("cannot start the measurement: {0}")]
    Spawn(std::io::Error),
    #[error("the measurement did not finish within {0} s")]
    Timeout(u64),
    #[error("the measurement failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
}

/// The fit feature's state: where the cache is, and the lock that makes one answer at a time.
pub struct FitState {
    path: PathBuf,
    lock: tokio::sync::Mutex<()>,
    /// When each channel's recent new rungs were measured (for the per-window limit).
    measured_for: parking_lot::Mutex<HashMap<ChannelId, VecDeque<Instant>>>,
}

impl FitState {
    /// The state of a data dir (its cache file is `cache::FILE_NAME` there).
    pub fn new(data_dir: &Path) -> FitState {
        FitState {
            path: Cache::path(data_dir),
            lock: tokio::sync::Mutex::new(()),
            measured_for: parking_lot::Mutex::default(),
        }
    }

    /// How many of `wanted` new rungs `who` may have measured now; those allowed are counted.
    fn allow(&self, who: &Measurer, wanted: usize) -> usize {
        let Measurer::Channel(id) = who else { return wanted };
        let now = Instant::now();
        let mut table = self.measured_for.lock();
        table.retain(|_, times| {
            while times.front().is_some_and(|t| now.duration_since(*t) >= CHANNEL_WINDOW) {
                times.pop_front();
            }
            !times.is_empty()
        });
        let times = table.entry(id.clone()).or_default();
        let allowed = wanted.min(CHANNEL_RUNGS_PER_ASK).min(CHANNEL_RUNGS_PER_WINDOW.saturating_sub(times.len()));
        times.extend(std::iter::repeat_n(now, allowed));
        allowed
    }

    /// Whether `ladder` fits this box on `chosen` (the encoder the video codec selects), with segments
    /// of `segment_seconds` (see the module doc).
    pub async fn evaluate(
        &self,
        ladder: &[StreamOutputVariant],
        chosen: &EncoderInfo,
        segment_seconds: u32,
        who: &Measurer,
    ) -> LadderFit {
        let specs: Vec<_> = ladder.iter().map(|v| measure::variant_spec(v, segment_seconds)).collect();
        let encoder = chosen.clone();
        let cap = tokio::task::spawn_blocking(move || hwaccel::gpu::GpuMonitor::cap_for(&encoder)).await.ok().flatten();
        let plan = hwaccel::plan_sessions(&specs, &chosen.name, cap);
        let rungs = verdict::rungs(ladder, &plan.encoders);
        let _one_at_a_time = self.lock.lock().await;
        let path = self.path.clone();
        let mut cache = tokio::task::spawn_blocking(move || Cache::load(&path, &BoxId::here()))
            .await
            .unwrap_or_else(|_| Cache::new(BoxId::here()));
        let mut missing: Vec<&Rung> = Vec::new();
        for r in rungs.iter().filter(|r| r.made == Made::Software) {
            let key = r.key();
            if cache.rung(&key).is_none() && !missing.iter().any(|m| m.key() == key) {
                missing.push(r);
            }
        }
        // A channel's ask measures a few new rungs; the others are estimated (see the module doc).
        let allowed = self.allow(who, missing.len());
        let held_back = missing.len() - allowed;
        missing.truncate(allowed);
        let any_software = rungs.iter().any(|r| r.made == Made::Software);
        // A decode path: the GPU decodes (and scales); the CPU only encodes.
        let gpu_decode = chosen.decode.is_some();
        let need_decode = any_software && !gpu_decode && cache.decode.is_none();
        let mut note = None;
        let cached = missing.is_empty() && !need_decode;
        if !cached {
            let spec = MeasureSpec {
                rungs: missing
                    .iter()
                    .map(|r| RungSpec {
                        key: r.key(),
                        encoder: r.encoder.clone(),
                        variant: r.variant.clone(),
                        segment_seconds,
                    })
                    .collect(),
                decode: need_decode,
                budget_ms: MEASURE_BUDGET.as_millis() as u64,
            };
            let started = std::time::Instant::now();
            let (lines, error) = match run_child(&spec).await {
                Ok(lines) => (lines, None),
                Err((lines, e)) => (lines, Some(e)),
            };
            note = record(&mut cache, &lines, error.as_ref());
            info!(
                rungs = spec.rungs.len(),
                decode = spec.decode,
                seconds = format!("{:.1}", started.elapsed().as_secs_f64()),
                "measured the ladder's rungs on this box"
            );
            let (path, to_save) = (self.path.clone(), cache.clone());
            match tokio::task::spawn_blocking(move || to_save.save(&path)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn!("cannot write the ladder measurements to {}: {e}", self.path.display()),
                Err(e) => warn!("cannot write the ladder measurements: {e}"),
            }
        }
        if held_back > 0 {
            let limit = format!(
                "{held_back} new rung(s) were not measured but estimated: a channel's ask measures at most \
                 {CHANNEL_RUNGS_PER_ASK} new rungs, and {CHANNEL_RUNGS_PER_WINDOW} every {} minutes (the box is \
                 shared); ask again later, or the server admin measures any ladder on /api/admin/video/fit.",
                CHANNEL_WINDOW.as_secs() / 60
            );
            note = Some(match note {
                Some(n) => format!("{limit} {n}"),
                None => limit,
            });
        }
        // The rungs used keep their place in the cache (least recently used go first); written when
        // that is news and nothing was measured (a measurement writes the file anyway).
        let now = Utc::now();
        let mut touched = false;
        for r in rungs.iter().filter(|r| r.made == Made::Software) {
            touched |= cache.touch(&r.key(), now);
        }
        if touched && cached {
            let (path, to_save) = (self.path.clone(), cache.clone());
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || to_save.save(&path)).await {
                warn!("cannot write the ladder measurements to {}: {e}", self.path.display());
            }
        }
        let costs: Vec<Option<Cost>> =
            rungs.iter().map(|r| if r.made == Made::Software { cache.rung(&r.key()) } else { None }).collect();
        verdict::judge(Inputs {
            rungs: &rungs,
            costs: &costs,
            decode: cache.decode,
            cores: cache.id.cores,
            encoder: chosen.label(),
            gpu_decode,
            cached,
            note,
        })
    }
}

/// Put what the child measured into `cache`; say what could not be measured (and is estimated).
fn record(cache: &mut Cache, lines: &[MeasureLine], error: Option<&FitError>) -> Option<String> {
    let now = Utc::now();
    let mut problems = Vec::new();
    let mut skipped = 0;
    for line in lines {
        match line {
            MeasureLine::Rung { key, cpu_per_frame, wall_per_frame, frames } => cache.insert(
                key.clone(),
                Cost {
                    cpu_per_frame: *cpu_per_frame,
                    wall_per_frame: *wall_per_frame,
                    frames: *frames,
                    measured_at: now,
                },
            ),
            MeasureLine::Decode { cpu_per_frame, wall_per_frame, frames } => {
                cache.decode = Some(Cost {
                    cpu_per_frame: *cpu_per_frame,
                    wall_per_frame: *wall_per_frame,
                    frames: *frames,
                    measured_at: now,
                })
            }
            MeasureLine::Skipped { .. } => skipped += 1,
            MeasureLine::Failed { key, message } => {
                warn!("measuring {key} failed: {message}");
                problems.push(format!("{key}: {message}"));
            }
        }
    }
    if let Some(e) = error {
        warn!("{e}");
        problems.push(e.to_string());
    }
    let mut note = Vec::new();
    if skipped > 0 {
        note.push(format!(
            "{skipped} rung(s) were estimated from the others (measuring stops after {} s; they are measured \
             when asked again).",
            MEASURE_BUDGET.as_secs()
        ));
    }
    if !problems.is_empty() {
        note.push(format!("Some figures are estimates: {}.", problems.join("; ")));
    }
    (!note.is_empty()).then(|| note.join(" "))
}

/// Run `castd measure --json <spec>`: the lines it printed, and the error when it did not end well.
async fn run_child(spec: &MeasureSpec) -> Result<Vec<MeasureLine>, (Vec<MeasureLine>, FitError)> {
    let exe = std::env::current_exe().map_err(|e| (Vec::new(), FitError::OwnExe(e)))?;
    let json = serde_json::to_string(spec).map_err(|e| (Vec::new(), FitError::Spawn(std::io::Error::other(e))))?;
    let child = Command::new(exe)
        .args(["measure", "--json", &json])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| (Vec::new(), FitError::Spawn(e)))?;
    let output = match tokio::time::timeout(MEASURE_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err((Vec::new(), FitError::Spawn(e))),
        Err(_) => return Err((Vec::new(), FitError::Timeout(MEASURE_TIMEOUT.as_secs()))),
    };
    let lines: Vec<MeasureLine> =
        String::from_utf8_lossy(&output.stdout).lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    if output.status.success() {
        Ok(lines)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
        Err((lines, FitError::Failed { status: output.status.to_string(), stderr: tail }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_child_measured_goes_into_the_cache_and_the_rest_is_said() {
        let id = BoxId { cpu_model: "cpu".into(), cores: 2, version: "0".into() };
        let mut cache = Cache::new(id);
        let lines = [
            MeasureLine::Decode { cpu_per_frame: 0.002, wall_per_frame: 0.003, frames: 30 },
            MeasureLine::Rung { key: "a".into(), cpu_per_frame: 0.01, wall_per_frame: 0.02, frames: 29 },
            MeasureLine::Skipped { key: "b".into() },
            MeasureLine::Failed { key: "c".into(), message: "opening libx264: Invalid argument".into() },
        ];
        let note = record(&mut cache, &lines, None).expect("a note");
        assert_eq!(cache.rung("a").map(|c| (c.cpu_per_frame, c.frames)), Some((0.01, 29)));
        assert_eq!(cache.decode.map(|c| c.cpu_per_frame), Some(0.002));
        assert!(cache.rung("b").is_none() && cache.rung("c").is_none(), "nothing kept for what was not measured");
        assert!(note.contains("1 rung(s) were estimated") && note.contains("c: opening libx264"), "{note}");
        let crashed = FitError::Failed { status: "signal: 11".into(), stderr: "boom".into() };
        let note = record(&mut cache, &lines[..2], Some(&crashed)).expect("a note");
        assert!(note.contains("signal: 11") && !note.contains("were estimated"), "{note}");
        assert_eq!(record(&mut cache, &lines[..2], None), None, "all measured: nothing to say");
    }
}
