/** The replay chat's bookkeeping, kept apart from the component so it can be tested: which messages a
 * playhead shows, and which window of the chat to fetch next. */
import type { ReplayChatMessage } from '../api';

/** Seconds of chat fetched ahead of the playhead. */
export const AHEAD = 60;
/** Seconds of chat before the playhead fetched after a seek (what a viewer would have seen scroll by). */
export const BEHIND = 120;
/** The most messages shown at once (the newest). */
export const SHOWN = 100;

/** The messages at or before `t` seconds, the newest `max`, oldest first. */
export function shownAt(messages: ReplayChatMessage[], t: number, max = SHOWN): ReplayChatMessage[] {
  const passed = messages.filter((m) => m.offset <= t);
  return passed.slice(Math.max(0, passed.length - max));
}

/** `into` with `more` added (by id, kept in offset order). */
export function merged(into: ReplayChatMessage[], more: ReplayChatMessage[]): ReplayChatMessage[] {
  const seen = new Set(into.map((m) => m.id));
  const all = into.concat(more.filter((m) => !seen.has(m.id)));
  return all.sort((a, b) => a.offset - b.offset);
}

/** The window to fetch for playhead `t` when `[from, to)` is loaded: `null` while what is loaded still
 * covers `t` and half of `AHEAD` beyond it; `reset` when `t` left the loaded window (a seek). */
export function nextWindow(
  t: number,
  loaded: { from: number; to: number } | null,
): { from: number; to: number; reset: boolean } | null {
  if (!loaded || t < loaded.from || t > loaded.to) {
    return { from: Math.max(0, t - BEHIND), to: t + AHEAD, reset: true };
  }
  if (loaded.to - t >= AHEAD / 2) return null;
  return { from: loaded.to, to: loaded.to + AHEAD, reset: false };
}
