//! Output frame timing, shared by the software stages (`stage`) and the worker's hardware path: which
//! output frame slot an input frame fills (frame-rate conversion drops the frames whose slot does not
//! advance) and its output timestamp; segment boundaries are counted in the same slots.

/// The output frame slot (in 1/`fps`) an input frame at `t` seconds fills: slot n takes frames from a
/// quarter interval before its time up to three quarters after, so with an exact ratio (30 → 15 fps)
/// the frames on the slot times are the ones kept, whatever the millisecond rounding of FLV timestamps,
/// and the last input frame never lands in a slot (and segment) after the input's end.
pub fn output_slot(t: f64, fps: f64) -> i64 {
    (t * fps - 0.25).round() as i64
}

/// The output timestamp (in 1/`fps`) of an input frame at `t`: the run's first frame `t0` on its nearest
/// slot, then `output_slot` of the time since, so frame selection and segment boundaries (both counted
/// from `t0`) agree whatever the input's start offset.
pub fn output_pts(t: f64, t0: f64, fps: f64) -> i64 {
    (t0 * fps).round() as i64 + output_slot(t - t0, fps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_slots_keep_the_frames_on_the_slot_times() {
        // FLV timestamps are whole milliseconds.
        let t = |k: u32| f64::from((f64::from(k) * 1000.0 / 30.0).round() as u32) / 1000.0;
        let same: Vec<i64> = (0..90).map(|k| output_slot(t(k), 30.0)).collect();
        assert_eq!(same, (0..90).collect::<Vec<i64>>(), "30 → 30 keeps every frame in its own slot");
        let mut last = None;
        let mut kept = Vec::new();
        for k in 0..90 {
            let s = output_slot(t(k), 15.0);
            if last.is_none_or(|l| s > l) {
                kept.push(k);
                last = Some(s);
            }
        }
        assert_eq!(kept, (0..90).step_by(2).collect::<Vec<u32>>(), "30 → 15 keeps the even frames");
        assert_eq!(output_slot(t(89), 15.0), 44, "the last frame stays in the last slot");
        // An input starting at 21 ms keeps the same frames, and slot 0 is the first frame's.
        let t0 = 0.021;
        let kept: Vec<i64> = (0..6).map(|k| output_pts(t0 + t(k), t0, 15.0)).collect();
        assert_eq!(kept, [0, 0, 1, 1, 2, 2]);
    }
}
