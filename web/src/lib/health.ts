/** The health summary the admin's Overview and Health pages show, from the health overview castd reports
 *  (Owncast's `{healthy, healthPercentage, message}`). As in Owncast, `healthy` and the percentage judge
 *  playback only (the share of viewers without errors), while the message is the first notice of any kind
 *  (a hardware alert such as a full disk, an encoder fallback, a ladder stepped down, a failing upload, a
 *  weak password): healthy playback with a message is shown as a warning, not as all good. */

export type HealthTone = 'ok' | 'warn' | 'bad';

export interface HealthOverview {
  healthy?: boolean | null;
  healthPercentage?: number | null;
  message?: string | null;
}

export interface HealthSummary {
  tone: HealthTone;
  title: string;
}

export function healthSummary(h: HealthOverview): HealthSummary {
  const pct = typeof h.healthPercentage === 'number' ? ` (${h.healthPercentage}%)` : '';
  if (h.healthy === false) return { tone: 'bad', title: `Needs attention${pct}` };
  if (h.message && h.message.trim() !== '') return { tone: 'warn', title: `Playback healthy${pct}, but:` };
  return { tone: 'ok', title: `Healthy${pct}` };
}
