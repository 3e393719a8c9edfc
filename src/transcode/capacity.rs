//! Capacity-aware ladders: when the software ladder falls behind real time, step its x264 rungs down to
//! faster presets, and back up when the headroom returns. Pure policy and wording, no libav: the worker
//! measures and acts (`worker::pipeline`, `worker::stage`), the supervisor reports (`supervisor`).
//!
//! **What is measured** (once a second, by the worker): the ladder's `speed` (input media seconds the
//! worker took per wall second over the interval: below 1 it falls behind), its `lag` growth (wall time
//! minus media time since the first frame, minus the smallest such value so far: how far it is behind
//! real time now) and each x264 rung's `busy` fraction (scale + encode wall time over the interval; a
//! stage that never waits for its next picture is at 1.0).
//!
//! **Step down** when the ladder is behind for `BEHIND_FOR` in a row: its lag has grown past `LAG_BEHIND`
//! and it is still losing ground while a rung works most of the time (`BUSY_BEHIND`: a stalled input or
//! a decoder at its limit is nothing a preset fixes), or a rung is busy at least `BUSY_HIGH` while the ladder does not gain
//! on real time. A step is one x264 preset faster on every x264 rung (`ultrafast` is the floor, never
//! below); when the shortfall is large the policy jumps several presets at once, to the first step whose
//! predicted cost (the rungs' busy time weighted by `X264_COST` ratios) fits `TARGET_LOAD` of what the
//! measured speed allows against the speed it needs (`required_speed`: real time plus the lag worked off
//! within `CATCH_UP`; speed 0.5 from `fast` goes straight to `superfast`). Rungs are never dropped: a
//! dropped rung's playlist would stall its players mid-stream. At the floor and still behind, the ladder
//! does not fit this box (`Change::fits` false) and the health message says what to reduce.
//!
//! **Step up** one preset when, for `up_hold` (starting at `UP_HOLD`) in a row, the ladder keeps up, has
//! no lag left and the load predicted at the slower preset (each rung's busy × the presets' cost ratio;
//! the larger of the busiest rung and the rungs' sum over the cores) stays under `UP_LOAD`. Hysteresis:
//! a step down within `FLAP_WINDOW` of a step up doubles `up_hold` (up to `MAX_UP_HOLD`), so a ladder at
//! the edge settles instead of flapping. After every change the policy waits until every rung runs the
//! new preset (the worker switches at the rung's next segment boundary) and `SETTLE` more before it
//! judges again.

use hwaccel::recipe::X264_PRESETS;

/// Relative CPU cost of libx264's presets `ultrafast, superfast, veryfast, faster, fast` (index =
/// cpuUsageLevel), with `tune zerolatency`, measured on this project's 2-core box (720p30, one thread:
/// testsrc2 1 : 1.55 : 2.4 : 3.75 : 5.5; with temporal noise 1 : 1.7 : 2.7 : 3.7 : 5.1). `ultrafast` is
/// the preset as a step reaches it, under the configured preset's parameter sets (CABAC, 8x8 transforms,
/// weighted prediction kept: `hwaccel::recipe::stepped_x264_recipe`), 1.3× plain `ultrafast`.
pub const X264_COST: [f64; 5] = [1.3, 1.6, 2.5, 3.7, 5.3];
/// Lag growth (seconds) past which a ladder that still loses ground is behind.
pub const LAG_BEHIND: f64 = 1.0;
/// Lag growth (seconds) under which the ladder counts as caught up (a step up needs it).
pub const LAG_CAUGHT_UP: f64 = 0.5;
/// A rung this busy, while the ladder does not gain on real time, is at its limit.
pub const BUSY_HIGH: f64 = 0.95;
/// A lagging ladder counts as behind only when its busiest rung works at least this much of the time:
/// otherwise its input stalled (the publisher's network) or the decoder is the limit, and no x264
/// preset would help.
pub const BUSY_BEHIND: f64 = 0.8;
/// How long the ladder must be behind before it steps down (seconds).
pub const BEHIND_FOR: f64 = 2.5;
/// Load a step down aims for, as a fraction of what the measured speed allows.
pub const TARGET_LOAD: f64 = 0.8;
/// A ladder with lag should work it off within about this long (seconds): one that gains on real time
/// more slowly than that counts as behind, and a step down aims for it.
pub const CATCH_UP: f64 = 20.0;
/// Predicted load at the slower preset under which a step up is taken.
pub const UP_LOAD: f64 = 0.75;
/// How long the predicted load must stay under `UP_LOAD` before a step up (seconds).
pub const UP_HOLD: f64 = 15.0;
/// The longest `up_hold` grows to after failed step ups (seconds).
pub const MAX_UP_HOLD: f64 = 240.0;
/// A step down this soon after a step up (seconds) counts as a failed step up.
pub const FLAP_WINDOW: f64 = 60.0;
/// Time after a change is applied before the policy judges again (seconds).
pub const SETTLE: f64 = 2.0;

// Hysteresis: a step up needs a clear margin under what a step down aims for.
const _: () = assert!(UP_LOAD < BUSY_HIGH * TARGET_LOAD);

/// The index of an x264 preset name in `X264_PRESETS` (`None`: not one of castd's presets).
pub fn preset_index(name: &str) -> Option<usize> {
    X264_PRESETS.iter().position(|p| *p == name)
}

/// The preset of a rung configured at `configured` (an index in `X264_PRESETS`) at ladder step `step`.
pub fn preset_at(configured: usize, step: u32) -> usize {
    configured.saturating_sub(step as usize)
}

/// One measurement interval of the ladder (about a second).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Wall seconds the interval lasted.
    pub interval: f64,
    /// Input media seconds per wall second over the interval.
    pub speed: f64,
    /// Lag growth now (seconds, ≥ 0).
    pub lag: f64,
    /// Busy fraction of each x264 rung, in the order the policy was built with.
    pub busy: Vec<f64>,
    /// Whether every rung runs the preset of the current step (a change is applied at segment
    /// boundaries, so it takes up to a segment).
    pub applied: bool,
}

/// Why the ladder changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// Behind real time: the speed over the time it was behind.
    Behind { speed: f64 },
    /// Still behind at the fastest preset: the ladder does not fit this box.
    DoesNotFit { speed: f64 },
    /// Keeps up again at the fastest preset (after `DoesNotFit`).
    Fits,
    /// Headroom returned: the load predicted at the slower preset.
    Headroom { predicted: f64 },
    /// Set from outside (`WorkerConfig::debug_ladder_step_at`; tests only).
    Forced,
}

/// A decision: the ladder's new step and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Presets faster than configured (0: as configured).
    pub step: u32,
    /// Whether the ladder keeps up at this step (false: behind at the fastest preset).
    pub fits: bool,
    pub reason: Reason,
}

/// The step policy of one ladder (see the module doc).
#[derive(Debug, Clone)]
pub struct Policy {
    /// Each x264 rung's configured preset (index in `X264_PRESETS`).
    configured: Vec<usize>,
    cores: f64,
    step: u32,
    fits: bool,
    behind_for: f64,
    /// Media and wall seconds over the current behind streak.
    behind_media: f64,
    behind_wall: f64,
    calm_for: f64,
    settle_left: f64,
    up_hold: f64,
    /// Wall seconds since the last step up (None: none yet).
    since_up: Option<f64>,
}

impl Policy {
    /// A policy for x264 rungs configured at `configured` presets (indices in `X264_PRESETS`), starting
    /// at `step`, on a box with `cores` cores.
    pub fn new(configured: Vec<usize>, step: u32, cores: usize) -> Policy {
        let mut p = Policy {
            configured,
            cores: cores.max(1) as f64,
            step: 0,
            fits: true,
            behind_for: 0.0,
            behind_media: 0.0,
            behind_wall: 0.0,
            calm_for: 0.0,
            settle_left: 0.0,
            up_hold: UP_HOLD,
            since_up: None,
        };
        p.step = step.min(p.max_step());
        p
    }

    /// The step at which every rung is at `ultrafast`.
    pub fn max_step(&self) -> u32 {
        self.configured.iter().copied().max().unwrap_or(0) as u32
    }

    pub fn step(&self) -> u32 {
        self.step
    }

    /// Each rung's preset index at the current step.
    pub fn presets(&self) -> Vec<usize> {
        self.configured.iter().map(|&c| preset_at(c, self.step)).collect()
    }

    /// How long the predicted headroom must last before the next step up (seconds).
    pub fn up_hold(&self) -> f64 {
        self.up_hold
    }

    /// The ladder's load in a sample: the busiest rung, the rungs' sum over the cores, and, when it
    /// falls behind, the shortfall (1 / speed); 1 − load is the headroom.
    pub fn load(&self, s: &Sample) -> f64 {
        let load = load_of(s.busy.iter().copied(), self.cores);
        if is_behind(s) && s.speed > 0.0 {
            load.max(1.0 / s.speed)
        } else {
            load
        }
    }

    /// The load predicted at `step` from a sample taken at the current step.
    pub fn predicted_load(&self, s: &Sample, step: u32) -> f64 {
        let scaled = self.configured.iter().zip(&s.busy).map(|(&c, &b)| b * self.cost_ratio(c, step));
        load_of(scaled, self.cores)
    }

    fn cost_ratio(&self, configured: usize, step: u32) -> f64 {
        let cost = |i: usize| X264_COST.get(i).copied().unwrap_or(1.0);
        cost(preset_at(configured, step)) / cost(preset_at(configured, self.step))
    }

    /// Move to `step` now (tests: `WorkerConfig::debug_ladder_step_at`), as if the policy had decided it.
    pub fn force(&mut self, step: u32) -> Change {
        self.step = step.min(self.max_step());
        self.reset_streaks();
        self.settle_left = SETTLE;
        Change { step: self.step, fits: true, reason: Reason::Forced }
    }

    /// Take one sample; a `Change` when the ladder should move to another step (or its fit changed).
    pub fn observe(&mut self, s: &Sample) -> Option<Change> {
        let dt = s.interval.max(0.0);
        if let Some(t) = self.since_up.as_mut() {
            *t += dt;
        }
        if !s.applied {
            self.reset_streaks();
            self.settle_left = SETTLE;
            return None;
        }
        if self.settle_left > 0.0 {
            self.settle_left -= dt;
            return None;
        }
        if is_behind(s) {
            self.calm_for = 0.0;
            self.behind_for += dt;
            self.behind_media += s.speed * dt;
            self.behind_wall += dt;
            if self.behind_for + 1e-9 < BEHIND_FOR {
                return None;
            }
            let speed = if self.behind_wall > 0.0 { self.behind_media / self.behind_wall } else { s.speed };
            self.reset_streaks();
            return self.step_down(s, speed);
        }
        self.behind_for = 0.0;
        self.behind_media = 0.0;
        self.behind_wall = 0.0;
        if !self.fits {
            // At the floor and keeping up again: the ladder fits after all.
            self.calm_for += dt;
            if self.calm_for + 1e-9 >= UP_HOLD {
                self.fits = true;
                self.calm_for = 0.0;
                return Some(Change { step: self.step, fits: true, reason: Reason::Fits });
            }
            return None;
        }
        if self.step == 0 || s.lag >= LAG_CAUGHT_UP || s.speed < 0.9 {
            self.calm_for = 0.0;
            return None;
        }
        let predicted = self.predicted_load(s, self.step - 1);
        if predicted >= UP_LOAD {
            self.calm_for = 0.0;
            return None;
        }
        self.calm_for += dt;
        if self.calm_for + 1e-9 < self.up_hold {
            return None;
        }
        self.reset_streaks();
        self.step -= 1;
        self.since_up = Some(0.0);
        self.settle_left = SETTLE;
        Some(Change { step: self.step, fits: true, reason: Reason::Headroom { predicted } })
    }

    fn step_down(&mut self, s: &Sample, speed: f64) -> Option<Change> {
        let max = self.max_step();
        if self.step >= max {
            if !self.fits {
                return None;
            }
            self.fits = false;
            return Some(Change { step: self.step, fits: false, reason: Reason::DoesNotFit { speed } });
        }
        // What the ladder may cost, relative to now: the speed it reached, with room to spare (a rung
        // at its limit while keeping up still gets one preset) and to work off the lag it has.
        let allowed = (speed / required_speed(s.lag)).min(1.0) * TARGET_LOAD;
        let weight: f64 = s.busy.iter().sum();
        let mut next = self.step + 1;
        while next < max {
            let cost = if weight > 0.0 {
                self.configured.iter().zip(&s.busy).map(|(&c, &b)| b * self.cost_ratio(c, next)).sum::<f64>() / weight
            } else {
                let n = self.configured.len().max(1) as f64;
                self.configured.iter().map(|&c| self.cost_ratio(c, next)).sum::<f64>() / n
            };
            if cost <= allowed {
                break;
            }
            next += 1;
        }
        if self.since_up.is_some_and(|t| t <= FLAP_WINDOW) {
            self.up_hold = (self.up_hold * 2.0).min(MAX_UP_HOLD);
        }
        self.since_up = None;
        self.step = next;
        self.settle_left = SETTLE;
        Some(Change { step: next, fits: true, reason: Reason::Behind { speed } })
    }

    fn reset_streaks(&mut self) {
        self.behind_for = 0.0;
        self.behind_media = 0.0;
        self.behind_wall = 0.0;
        self.calm_for = 0.0;
    }
}

/// The speed a ladder with `lag` seconds of lag needs: real time, and the lag worked off within
/// `CATCH_UP`.
pub fn required_speed(lag: f64) -> f64 {
    1.0 + lag.max(0.0) / CATCH_UP
}

/// Whether a sample shows the ladder behind: its lag has grown past `LAG_BEHIND` and it does not gain
/// on real time fast enough to work it off within `CATCH_UP`, while a rung works most of the time
/// (`BUSY_BEHIND`); or a rung is at its limit while the ladder does not gain on real time.
pub fn is_behind(s: &Sample) -> bool {
    let busiest = s.busy.iter().copied().fold(0.0, f64::max);
    let slow = s.speed < 0.99 * required_speed(s.lag);
    (s.lag >= LAG_BEHIND && slow && busiest >= BUSY_BEHIND) || (busiest >= BUSY_HIGH && s.speed <= 1.0)
}

fn load_of(busy: impl Iterator<Item = f64> + Clone, cores: f64) -> f64 {
    let max = busy.clone().fold(0.0, f64::max);
    let sum: f64 = busy.sum();
    max.max(sum / cores)
}

/// One rung as the health message names it.
#[derive(Debug, Clone, PartialEq)]
pub struct RungPreset {
    pub name: String,
    pub preset: String,
    pub configured: String,
}

/// The health message for a ladder whose rungs run `rungs`' presets (`None` when it runs as configured
/// and fits), after a change for `reason` (`LadderChange::reason`: `behind`, `doesNotFit`, `fits`,
/// `headroom`).
pub fn health_message(rungs: &[RungPreset], fits: bool, reason: &str, speed: f64, heaviest: &str) -> Option<String> {
    let changed: Vec<&RungPreset> = rungs.iter().filter(|r| r.preset != r.configured).collect();
    if fits && changed.is_empty() {
        return None;
    }
    if !fits {
        return Some(format!(
            "The transcoder cannot keep up with this ladder even at x264 preset ultrafast (speed {speed:.2}×): \
             the ladder does not fit this box. Reduce {heaviest} (its size or frame rate), or remove a rung."
        ));
    }
    // Group the rungs by (new, configured) preset, in ladder order.
    let mut groups: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for r in changed {
        match groups.iter_mut().find(|(p, c, _)| *p == r.preset && *c == r.configured) {
            Some(g) => g.2.push(&r.name),
            None => groups.push((&r.preset, &r.configured, vec![&r.name])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(p, c, names)| {
            let verb = if names.len() == 1 { "uses" } else { "use" };
            format!("{} now {verb} x264 preset {p} instead of {c}", join_names(names))
        })
        .collect();
    let parts = parts.join("; ");
    Some(match reason {
        "headroom" => {
            format!("The transcoder has headroom again and is stepping back up to the configured presets; {parts}.")
        }
        "fits" => format!("The transcoder keeps up again at the faster presets; {parts}."),
        _ => format!("The transcoder fell behind real time (speed {speed:.2}×); {parts}."),
    })
}

/// "a", "a and b", "a, b and c".
fn join_names(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(speed: f64, lag: f64, busy: &[f64]) -> Sample {
        Sample { interval: 1.0, speed, lag, busy: busy.to_vec(), applied: true }
    }

    /// Feed `s` `n` times; the changes it made.
    fn feed(p: &mut Policy, s: &Sample, n: usize) -> Vec<Change> {
        (0..n).filter_map(|_| p.observe(s)).collect()
    }

    const FAST: usize = 4;

    #[test]
    fn steps_down_after_sustained_lag_not_before() {
        let mut p = Policy::new(vec![FAST, FAST, FAST], 0, 2);
        let behind = sample(0.95, 1.5, &[1.0, 0.6, 0.3]);
        assert!(is_behind(&behind));
        assert_eq!(p.observe(&behind), None);
        assert_eq!(p.observe(&behind), None, "two seconds are not sustained");
        let c = p.observe(&behind).expect("a decision after three seconds behind");
        assert_eq!((c.step, c.fits), (1, true), "speed 0.95 needs one preset: {c:?}");
        assert!(matches!(c.reason, Reason::Behind { speed } if (speed - 0.95).abs() < 1e-9));
        assert_eq!(p.presets(), [3, 3, 3], "faster instead of fast on every rung");
        // A blip of lag that catches up again is not behind; lag alone while gaining is not either.
        let mut q = Policy::new(vec![FAST], 0, 2);
        assert!(feed(&mut q, &sample(0.95, 1.2, &[0.9]), 2).is_empty());
        assert!(feed(&mut q, &sample(1.3, 1.1, &[1.0]), 10).is_empty(), "catching up: busy but gaining");
        // Gaining too slowly on a large lag (6 s at 1.1×: a minute) is behind; at 1.35× it is not.
        assert!(is_behind(&sample(1.1, 6.0, &[1.0])));
        assert!(!is_behind(&sample(1.35, 6.0, &[1.0])));
        assert!(feed(&mut q, &sample(0.95, 1.2, &[0.9]), 2).is_empty(), "the streak started again");
        assert_eq!(q.step(), 0);
        // The input stalls (the publisher's network): lag grows while the stages wait. Not behind.
        let stalled = sample(0.0, 5.0, &[0.1]);
        assert!(!is_behind(&stalled));
        assert!(feed(&mut q, &stalled, 10).is_empty());
    }

    #[test]
    fn a_rung_at_its_limit_steps_down_while_keeping_up() {
        let mut p = Policy::new(vec![FAST, FAST], 0, 2);
        let edge = sample(1.0, 0.1, &[0.97, 0.4]);
        let c = feed(&mut p, &edge, 3);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].step, 1, "one preset for a rung at its limit");
    }

    #[test]
    fn a_large_shortfall_jumps_several_presets() {
        let mut p = Policy::new(vec![FAST, FAST, FAST], 0, 2);
        let c = feed(&mut p, &sample(0.5, 2.0, &[1.0, 1.0, 1.0]), 3);
        // Allowed cost 0.4 of fast's: superfast (1.6 / 5.3 = 0.30) fits, veryfast (0.47) does not.
        assert_eq!(c[0].step, 3, "{c:?}");
        assert_eq!(p.presets(), [1, 1, 1]);
        let mut q = Policy::new(vec![FAST, FAST, FAST], 0, 2);
        assert_eq!(feed(&mut q, &sample(0.7, 2.0, &[1.0, 1.0, 1.0]), 3)[0].step, 2, "0.53 allowed: veryfast");
        // The same speed with 10 s of lag to work off (1.5× needed): 0.37 allowed, superfast.
        let mut r = Policy::new(vec![FAST, FAST, FAST], 0, 2);
        assert_eq!(feed(&mut r, &sample(0.7, 10.0, &[1.0, 1.0, 1.0]), 3)[0].step, 3, "with the lag: superfast");
    }

    #[test]
    fn never_below_ultrafast_and_says_when_the_ladder_does_not_fit() {
        let mut p = Policy::new(vec![2, 1], 0, 2);
        assert_eq!(p.max_step(), 2);
        let c = feed(&mut p, &sample(0.2, 5.0, &[1.0, 1.0]), 3);
        assert_eq!(c[0].step, 2, "straight to the floor");
        assert_eq!(p.presets(), [0, 0], "a rung configured faster stops at ultrafast too");
        let c = feed(&mut p, &sample(0.5, 5.0, &[1.0, 1.0]), 10);
        assert_eq!(c.len(), 1, "said once: {c:?}");
        assert_eq!((c[0].step, c[0].fits), (2, false));
        assert!(matches!(c[0].reason, Reason::DoesNotFit { .. }));
        assert_eq!(p.presets(), [0, 0]);
        // Keeping up again at the floor for a while: it fits after all.
        let c = feed(&mut p, &sample(1.0, 0.0, &[0.5, 0.3]), 20);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].step, c[0].fits, c[0].reason), (2, true, Reason::Fits));
        // A ladder that starts at the floor (cpuUsageLevel 0) can only say it does not fit.
        let mut u = Policy::new(vec![0, 0], 0, 2);
        let c = feed(&mut u, &sample(0.6, 3.0, &[1.0, 1.0]), 3);
        assert_eq!((c[0].step, c[0].fits), (0, false));
    }

    #[test]
    fn steps_up_only_with_predicted_headroom_held() {
        let mut p = Policy::new(vec![FAST, FAST, FAST], 2, 2);
        assert_eq!(p.presets(), [2, 2, 2]);
        // veryfast → faster costs 1.48×: busy 0.6 predicts 0.89, too much, however long it lasts.
        assert!(feed(&mut p, &sample(1.0, 0.0, &[0.6, 0.3, 0.2]), 60).is_empty());
        // The sum over the cores counts too: 3 × 0.45 × 1.48 / 2 = 1.0.
        assert!(feed(&mut p, &sample(1.0, 0.0, &[0.45, 0.45, 0.45]), 60).is_empty());
        // Lag not yet worked off: no step up either.
        assert!(feed(&mut p, &sample(1.2, 0.8, &[0.3, 0.2, 0.1]), 60).is_empty());
        // 0.3 predicts 0.44: after UP_HOLD seconds, one preset slower.
        let calm = sample(1.0, 0.0, &[0.3, 0.2, 0.1]);
        assert!(feed(&mut p, &calm, 14).is_empty(), "not before {UP_HOLD} s");
        let c = p.observe(&calm).expect("a step up");
        assert_eq!(c.step, 1);
        assert!(matches!(c.reason, Reason::Headroom { predicted } if predicted < UP_LOAD));
        // An interrupted calm restarts the count.
        assert!(feed(&mut p, &calm, 10).is_empty());
        assert!(feed(&mut p, &sample(1.0, 0.0, &[0.7, 0.2, 0.1]), 1).is_empty());
        assert!(feed(&mut p, &calm, 14).is_empty());
    }

    #[test]
    fn waits_for_a_change_to_apply_and_settle() {
        let mut p = Policy::new(vec![FAST], 0, 2);
        let behind = sample(0.8, 2.0, &[1.0]);
        assert_eq!(feed(&mut p, &behind, 3).len(), 1);
        let pending = Sample { applied: false, ..behind.clone() };
        assert!(feed(&mut p, &pending, 10).is_empty(), "not judged before every rung switched");
        assert!(feed(&mut p, &behind, 4).is_empty(), "settle, then a new streak");
        assert_eq!(feed(&mut p, &behind, 1).len(), 1, "still behind on the new preset: down again");
    }

    #[test]
    fn hysteresis_a_failed_step_up_doubles_the_wait() {
        let mut p = Policy::new(vec![FAST], 1, 2);
        let calm = sample(1.0, 0.0, &[0.4]);
        let behind = sample(0.95, 1.5, &[1.0]);
        // Calm enough to step up, then behind on the slower preset; for 10 minutes.
        let mut ups = Vec::new();
        for t in 0..600 {
            let s = if p.step() == 0 { &behind } else { &calm };
            if let Some(c) = p.observe(s) {
                if matches!(c.reason, Reason::Headroom { .. }) {
                    ups.push(t);
                }
            }
        }
        let gaps: Vec<i32> = ups.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(ups.len() <= 5, "up holds of 15, 30, 60, 120 and 240 s: {ups:?}");
        assert!(gaps.windows(2).all(|g| g[1] > g[0] * 3 / 2), "each failed try waits longer: {gaps:?}");
        assert_eq!(p.up_hold(), MAX_UP_HOLD);
    }

    #[test]
    fn health_messages_name_rungs_and_presets() {
        let r = |name: &str, preset: &str, configured: &str| RungPreset {
            name: name.into(),
            preset: preset.into(),
            configured: configured.into(),
        };
        let degraded = [r("720p", "superfast", "fast"), r("480p", "superfast", "fast"), r("360p", "superfast", "fast")];
        assert_eq!(
            health_message(&degraded, true, "behind", 0.71, "720p").as_deref(),
            Some(
                "The transcoder fell behind real time (speed 0.71×); 720p, 480p and 360p now use x264 preset \
                 superfast instead of fast."
            )
        );
        let mixed = [r("720p", "veryfast", "fast"), r("360p", "ultrafast", "superfast"), r("copy", "", "")];
        assert_eq!(
            health_message(&mixed, true, "behind", 0.9, "720p").unwrap(),
            "The transcoder fell behind real time (speed 0.90×); 720p now uses x264 preset veryfast instead of \
             fast; 360p now uses x264 preset ultrafast instead of superfast."
        );
        assert_eq!(health_message(&[r("720p", "fast", "fast")], true, "headroom", 1.0, "720p"), None);
        let up = health_message(&degraded[..1], true, "headroom", 1.0, "720p").unwrap();
        assert_eq!(
            up,
            "The transcoder has headroom again and is stepping back up to the configured presets; 720p now uses \
             x264 preset superfast instead of fast."
        );
        let fits = health_message(&degraded[..1], true, "fits", 1.0, "720p").unwrap();
        assert!(fits.starts_with("The transcoder keeps up again at the faster presets; 720p now uses"), "{fits}");
        let no_fit = health_message(&degraded, false, "doesNotFit", 0.8, "720p (1280x720 at 60 fps)").unwrap();
        assert!(no_fit.contains("does not fit this box") && no_fit.contains("Reduce 720p (1280x720 at 60 fps)"));
    }
}
