/**
 * Keeping a low-latency (LL-HLS) stream at its target latency by playing slightly faster.
 *
 * hls.js adjusts the playback rate only while more than a second is buffered ahead of the playhead
 * (its latency controller), which a stream played at PART-HOLD-BACK (three parts: 0.6 s with castd's
 * 200 ms parts) never has. So a viewer that starts, or falls, a few hundred milliseconds behind the
 * target would stay there for good; the player uses this instead (hls.js's own catch-up is turned off
 * for such streams, so the two never fight over the rate).
 */

/** Within this many seconds of the target latency the stream plays at normal speed. */
export const ON_TARGET_S = 0.05;

/**
 * The playback rate for a low-latency stream `latency` seconds behind live whose target is `target`,
 * with `ahead` seconds buffered and parts of `partTarget` seconds: 1 on target, else 1.05 plus a tenth
 * for each half second behind, in steps of 0.05, up to `max` — but only while the lag is in the
 * buffer: catching up spends `behind` seconds of it, and at least two parts must be left afterwards.
 * When parts arrive late (the box is busy), latency grows while the buffer does not; speeding up then
 * would run it dry and stall.
 */
export function catchUpRate(latency: number, target: number, ahead: number, partTarget: number, max: number): number {
  const behind = latency - target;
  if (!Number.isFinite(behind) || behind <= ON_TARGET_S || !(ahead - behind >= 2 * partTarget)) return 1;
  const rate = Math.round((1.05 + behind * 0.2) * 20) / 20;
  return Math.min(Math.max(1, max), Math.max(1, rate));
}
