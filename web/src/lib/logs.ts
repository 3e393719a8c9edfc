/** Log entries of `GET /api/admin/logs` and `/api/admin/logs/warnings`: level ranks, the page's filter, time labels. */

export interface LogLine {
  message: string;
  level: string;
  time: string;
}

export type LogFilter = 'all' | 'info' | 'warning' | 'error';

export const LOG_FILTERS: ReadonlyArray<{ id: LogFilter; label: string }> = [
  { id: 'all', label: 'All levels' },
  { id: 'info', label: 'Info and above' },
  { id: 'warning', label: 'Warnings and errors' },
  { id: 'error', label: 'Errors only' },
];

export type LevelClass = 'trace' | 'debug' | 'info' | 'warning' | 'error';

const CLASS: Record<string, LevelClass> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warning',
  warning: 'warning',
  error: 'error',
  fatal: 'error',
  panic: 'error',
  critical: 'error',
};
const RANK: Record<LevelClass, number> = { trace: 0, debug: 1, info: 2, warning: 3, error: 4 };
const MIN_RANK: Record<LogFilter, number> = { all: 0, info: 2, warning: 3, error: 4 };

/** The level as one of the five known ones (an unknown level counts as info). */
export const levelClass = (level: string | undefined | null): LevelClass => CLASS[String(level ?? '').trim().toLowerCase()] ?? 'info';

/** Whether a filter only needs the warnings endpoint (which holds warnings and errors). */
export const wantsWarningsOnly = (filter: LogFilter) => MIN_RANK[filter] >= RANK.warning;

/** The entries the filter lets through, newest first (the API sends them oldest first). */
export function visibleLogs<T extends LogLine>(entries: ReadonlyArray<T> | null | undefined, filter: LogFilter): T[] {
  const min = MIN_RANK[filter];
  const list = Array.isArray(entries) ? entries : [];
  return list.filter((e) => e && RANK[levelClass(e.level)] >= min).reverse();
}

/** A log time: hours to seconds for today's entries, with the date for older ones. */
export function formatLogTime(iso: string, now: Date = new Date()): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso || '–';
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return d.toDateString() === now.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
}
