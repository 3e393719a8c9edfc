/** Reconnect delay for attempt n (0-based): exponential from `baseMs`, capped at `maxMs`, with up to 25 % jitter. */
export function backoffDelay(attempt: number, baseMs = 1000, maxMs = 30000, random: () => number = Math.random): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(attempt, 30)));
  const jitter = exp * 0.25 * random();
  return Math.round(Math.min(maxMs, exp - exp * 0.125 + jitter));
}
