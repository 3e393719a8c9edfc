/**
 * Trimming the back buffer of a low-latency (LL-HLS) stream at a moment when it cannot stall playback.
 *
 * hls.js (1.7) trims the back buffer itself each time the playhead enters a new segment
 * (`backBufferLength`). Played a few parts behind live, that moment falls in the middle of the newest
 * segment, while its parts are still arriving. When the flush completes while one of those parts is
 * between being loaded and being appended, hls.js's fragment tracker drops the whole segment it is
 * loading (`detectEvictedFragments`: a part's load resets the segment's entry to "neither loaded nor
 * buffered") and with it the "loaded" mark of the parts of that segment already appended. At the end
 * of that segment hls.js then still counts those parts as missing, keeps picking the segment it has
 * already buffered, and never asks for the next segment's first part: playback stalls at the segment
 * boundary until the buffer runs dry (found after castd issue 44; every stall logged at three and four parts of
 * PART-HOLD-BACK was this).
 *
 * So for such a stream the player turns hls.js's trimming off and trims here, only right after the
 * newest listed part has been appended and that part ends a segment: nothing of the next segment has
 * been loaded yet, so there is nothing the tracker could lose, and the next part is a part away.
 */

/** Seconds of media kept behind the playhead (as hls.js's `backBufferLength`). */
export const BACK_BUFFER_S = 30;

/** What the player knows when a part has been appended. */
export interface AppendedPart {
  /** Whether the appended part is the newest part the playlist lists. */
  newest: boolean;
  /** Whether its segment is finished in the playlist (the part is that segment's last). */
  endsSegment: boolean;
}

/**
 * Where to flush the back buffer to (from 0), or null to leave it: only at a safe moment (`part`, see
 * the module doc), and only when more than `keep` seconds plus a segment lie behind `currentTime`
 * (`bufferStart`: the start of the buffered media). The end falls on the segment grid
 * (`targetDuration`), as hls.js's own does.
 */
export function backBufferFlushEnd(
  part: AppendedPart,
  currentTime: number,
  bufferStart: number | null,
  targetDuration: number,
  keep: number = BACK_BUFFER_S,
): number | null {
  if (!part.newest || !part.endsSegment || bufferStart === null) return null;
  if (!(targetDuration > 0) || !Number.isFinite(currentTime)) return null;
  const end = Math.floor(currentTime / targetDuration) * targetDuration - Math.max(keep, targetDuration);
  return end > 0 && end > bufferStart ? end : null;
}
