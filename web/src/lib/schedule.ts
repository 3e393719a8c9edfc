/** Scheduled streams on the page: the countdown text and the calendar links. Pure functions, unit-tested. */

/** The iCalendar feed of the whole schedule (`webcal:` opens it in a calendar app). */
export const SCHEDULE_ICS_PATH = '/api/schedule.ics';

/** "starts in 2d 3h", "starts in 1h 05m", "starts in 4m 09s", "live now" / "starting now". */
export function countdown(startIso: string, now: number = Date.now()): string {
  const start = Date.parse(startIso);
  if (Number.isNaN(start)) return '';
  let s = Math.floor((start - now) / 1000);
  if (s <= 0) return 'starting now';
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return `starts in ${d}d ${h}h`;
  if (h) return `starts in ${h}h ${String(m).padStart(2, '0')}m`;
  return `starts in ${m}m ${String(s).padStart(2, '0')}s`;
}

/** `webcal://host/api/schedule.ics` for a page served from `origin` (http or https). */
export function webcalUrl(origin: string): string {
  return `${origin.replace(/^https?:/, 'webcal:')}${SCHEDULE_ICS_PATH}`;
}

/** A recurrence value for a weekly series: `DTSTART;TZID=<zone>:YYYYMMDDTHHMMSS` + `RRULE:FREQ=WEEKLY`. */
export function weeklyRule(localDateTime: string, timezone: string, interval = 1): string {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})/.exec(localDateTime);
  if (!m) return '';
  const stamp = `${m[1]}${m[2]}${m[3]}T${m[4]}${m[5]}00`;
  const every = interval > 1 ? `;INTERVAL=${interval}` : '';
  return `DTSTART;TZID=${timezone}:${stamp}\nRRULE:FREQ=WEEKLY${every}`;
}
