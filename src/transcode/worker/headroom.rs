//! The worker's side of capacity-aware ladders (`transcode::capacity`): measures the software ladder
//! once a report interval — its speed and lag growth from the frames the main thread dispatched (wall
//! time since the first frame minus media time since it, minus the smallest value so far, or the value
//! while every stage mostly waits for its pictures: the live edge), each x264
//! stage's busy fraction from its `StageControl` — feeds the policy, hands a new step's presets to the
//! stages (each switches at its next segment boundary) and reports the change as a
//! `WorkerEvent::LadderChanged`. Hardware ladders and copies are not stepped.

use std::sync::Arc;
use std::time::Instant;

use hwaccel::recipe::X264_PRESETS;

use super::emit::emit;
use super::stage::StageControl;
use crate::transcode::capacity::{self, Change, Policy, Reason, Sample};
use crate::transcode::{LadderChange, WorkerEvent};

/// Below this busy fraction on every x264 stage, the worker is at the live edge (the lag re-bases).
const IDLE_BUSY: f64 = 0.5;

/// One x264 rung: its variant, configured preset and stage.
struct Rung {
    variant: usize,
    configured: usize,
    control: Arc<StageControl>,
}

/// A variant as the reports name it.
pub(super) struct VariantName {
    pub(super) name: String,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) fps: f64,
}

/// What one interval measured, per variant, for the progress report.
pub(super) struct Measured {
    /// Per variant: busy fraction (0 where there is no stage).
    pub(super) busy: Vec<f64>,
    /// Per variant: the x264 preset now (`None`: not an x264 rung).
    pub(super) presets: Vec<Option<String>>,
    pub(super) lag: f64,
    pub(super) headroom: Option<f64>,
}

/// See the module doc.
pub(super) struct Headroom {
    policy: Policy,
    rungs: Vec<Rung>,
    names: Vec<VariantName>,
    /// Wall time of the first frame, and the media time (seconds since the first frame) of the last.
    first_wall: Option<Instant>,
    media: f64,
    /// Media time at the last sample.
    sampled_media: f64,
    lag_min: Option<f64>,
    /// `WorkerConfig::debug_ladder_step_at`, until it is taken.
    forced: Option<(f64, u32)>,
}

impl Headroom {
    /// The ladder's x264 rungs (`controls` of the stages, `configured` presets per variant: `None` for
    /// the variants that are not x264 rungs), starting at `step`; `None` without any x264 rung.
    pub(super) fn new(
        controls: &[(usize, Arc<StageControl>)],
        configured: &[Option<usize>],
        names: Vec<VariantName>,
        step: u32,
        forced: Option<(f64, u32)>,
    ) -> Option<Headroom> {
        let rungs: Vec<Rung> = controls
            .iter()
            .filter(|(_, c)| c.applied().is_some())
            .filter_map(|(v, c)| {
                configured.get(*v).copied().flatten().map(|configured| Rung {
                    variant: *v,
                    configured,
                    control: c.clone(),
                })
            })
            .collect();
        if rungs.is_empty() {
            return None;
        }
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let policy = Policy::new(rungs.iter().map(|r| r.configured).collect(), step, cores);
        Some(Headroom { policy, rungs, names, first_wall: None, media: 0.0, sampled_media: 0.0, lag_min: None, forced })
    }

    /// A frame at `t` (input seconds; the run's first at `t0`) was handed to the stages.
    pub(super) fn on_frame(&mut self, t: f64, t0: f64) {
        self.first_wall.get_or_insert_with(Instant::now);
        self.media = self.media.max(t - t0);
        if let Some((_, step)) = self.forced.filter(|(at, _)| self.media >= *at) {
            self.forced = None;
            let change = self.policy.force(step);
            let idle = Sample { interval: 0.0, speed: 1.0, lag: 0.0, busy: vec![0.0; self.rungs.len()], applied: true };
            self.apply(&change, &idle, 1.0);
        }
    }

    /// Measure the `dt` seconds since the last call, run the policy, and apply and report a change.
    pub(super) fn sample(&mut self, dt: f64) -> Measured {
        let n = self.names.len();
        let mut busy = vec![0.0; n];
        let mut rung_busy = Vec::with_capacity(self.rungs.len());
        for r in &self.rungs {
            let b = if dt > 0.0 { (r.control.take_work().as_secs_f64() / dt).min(1.0) } else { 0.0 };
            if let Some(slot) = busy.get_mut(r.variant) {
                *slot = b;
            }
            rung_busy.push(b);
        }
        let mut presets = vec![None; n];
        for r in &self.rungs {
            if let (Some(slot), Some(p)) = (presets.get_mut(r.variant), r.control.applied()) {
                *slot = X264_PRESETS.get(p).map(|s| s.to_string());
            }
        }
        let Some(first) = self.first_wall else {
            return Measured { busy, presets, lag: 0.0, headroom: None };
        };
        let lag_now = first.elapsed().as_secs_f64() - self.media;
        let mut lag_min = self.lag_min.unwrap_or(lag_now).min(lag_now);
        // Stages mostly waiting for their pictures: the worker is at the live edge, whatever the lag says
        // (the publisher's clock drifts from ours over hours; a stalled input resumes late).
        if rung_busy.iter().all(|b| *b < IDLE_BUSY) {
            lag_min = lag_now;
        }
        self.lag_min = Some(lag_min);
        let lag = (lag_now - lag_min).max(0.0);
        let speed = if dt > 0.0 { (self.media - self.sampled_media) / dt } else { 1.0 };
        self.sampled_media = self.media;
        let sample = Sample {
            interval: dt,
            speed,
            lag,
            busy: rung_busy,
            applied: self.rungs.iter().all(|r| r.control.settled()),
        };
        let headroom = 1.0 - self.policy.load(&sample);
        tracing::debug!(speed = sample.speed, lag = sample.lag, busy = ?sample.busy, applied = sample.applied, "capacity sample");
        if let Some(change) = self.policy.observe(&sample) {
            self.apply(&change, &sample, headroom);
        }
        Measured { busy, presets, lag, headroom: Some(headroom) }
    }

    /// Hand the new step's presets to the stages and report the change.
    fn apply(&self, change: &Change, sample: &Sample, headroom: f64) {
        let n = self.names.len();
        let mut presets = vec![None; n];
        let mut configured = vec![None; n];
        let mut speeds = vec![sample.speed; n];
        for (r, busy) in self.rungs.iter().zip(&sample.busy) {
            let preset = capacity::preset_at(r.configured, change.step);
            r.control.want(preset);
            let name = |i: usize| X264_PRESETS.get(i).map(|s| s.to_string());
            if r.variant < n {
                presets[r.variant] = name(preset);
                configured[r.variant] = name(r.configured);
                speeds[r.variant] = if *busy > 0.01 { (sample.speed / busy).min(99.0) } else { 99.0 };
            }
        }
        let (reason, speed) = match change.reason {
            Reason::Behind { speed } => ("behind", speed),
            Reason::DoesNotFit { speed } => ("doesNotFit", speed),
            Reason::Fits => ("fits", sample.speed),
            Reason::Headroom { .. } => ("headroom", sample.speed),
            Reason::Forced => ("forced", sample.speed),
        };
        let heaviest = self
            .rungs
            .iter()
            .filter_map(|r| self.names.get(r.variant))
            .max_by(|a, b| {
                let cost = |v: &VariantName| f64::from(v.width) * f64::from(v.height) * v.fps;
                cost(a).total_cmp(&cost(b))
            })
            .map(|v| format!("{} ({}x{} at {} fps)", v.name, v.width, v.height, v.fps.round()))
            .unwrap_or_default();
        tracing::warn!(step = change.step, fits = change.fits, reason, speed, ?presets, "ladder changed");
        emit(&WorkerEvent::LadderChanged(LadderChange {
            step: change.step,
            fits: change.fits,
            presets,
            configured,
            speeds,
            speed,
            headroom,
            reason: reason.to_string(),
            heaviest,
        }));
    }
}
