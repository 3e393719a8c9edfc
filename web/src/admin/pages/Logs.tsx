import { useState } from 'preact/hooks';
import { admin, type LogEntry } from '../../api';
import { LOG_FILTERS, formatLogTime, levelClass, visibleLogs, wantsWarningsOnly, type LogFilter } from '../../lib/logs';
import { LoadError } from '../forms';
import { usePoll } from '../useAdmin';

const REFRESH_MS = 5000;

/**
 * The server log: `GET /api/admin/logs` (everything castd keeps), or `GET /api/admin/logs/warnings` when only warnings
 * and errors are wanted; newest first, refreshed every 5 s unless auto-refresh is off.
 */
export function Logs() {
  const [filter, setFilter] = useState<LogFilter>('all');
  const [auto, setAuto] = useState(true);
  const warningsOnly = wantsWarningsOnly(filter);
  const { data, error, reload } = usePoll<LogEntry[]>(() => (warningsOnly ? admin.logWarnings() : admin.logs()), auto ? REFRESH_MS : null, [warningsOnly]);
  const now = new Date();
  const rows = visibleLogs(data, filter);

  return (
    <div data-testid="logs">
      <div class="filters logs-toolbar">
        <label class="inline-label">
          Level
          <select id="log-level-filter" value={filter} onChange={(e) => setFilter(e.currentTarget.value as LogFilter)}>
            {LOG_FILTERS.map((f) => (
              <option key={f.id} value={f.id}>
                {f.label}
              </option>
            ))}
          </select>
        </label>
        <label class="toggle">
          <input type="checkbox" id="logs-autorefresh" checked={auto} onChange={(e) => setAuto(e.currentTarget.checked)} />
          <span>Refresh every 5 s</span>
        </label>
        <button type="button" id="logs-refresh" onClick={() => void reload()}>
          Refresh now
        </button>
        {data && (
          <span class="muted" id="logs-count">
            {rows.length === (Array.isArray(data) ? data.length : 0) ? `${rows.length} entries` : `${rows.length} of ${Array.isArray(data) ? data.length : 0} entries`}
          </span>
        )}
      </div>
      {error && data && <div class="form-error">{error}</div>}
      {!data ? (
        <LoadError error={error} />
      ) : rows.length === 0 ? (
        <p class="muted" id="logs-empty">
          {filter === 'all' ? 'The log is empty.' : 'No entries at this level.'}
        </p>
      ) : (
        <div class="table-scroll">
          <table class="table logs-table" id="logs-table">
            <thead>
              <tr>
                <th>Time</th>
                <th>Level</th>
                <th>Message</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e, i) => {
                const level = levelClass(e.level);
                return (
                  <tr key={`${e.time}-${i}`} class={`log-row log-${level}`} data-level={level}>
                    <td class="nowrap mono" title={e.time}>
                      {formatLogTime(e.time, now)}
                    </td>
                    <td>
                      <span class={`log-level ${level}`}>{e.level || level}</span>
                    </td>
                    <td class="log-message">{e.message}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
