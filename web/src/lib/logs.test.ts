import { describe, expect, it } from 'vitest';
import { formatLogTime, levelClass, visibleLogs, wantsWarningsOnly } from './logs';

const entries = ['trace', 'debug', 'info', 'warning', 'error', 'WARN', 'something'].map((level, i) => ({
  level,
  message: `m${i}`,
  time: new Date(Date.UTC(2025, 0, 1, 12, 0, i)).toISOString(),
}));

describe('logs', () => {
  it('maps levels', () => {
    expect(levelClass('warning')).toBe('warning');
    expect(levelClass('WARN')).toBe('warning');
    expect(levelClass('fatal')).toBe('error');
    expect(levelClass('odd')).toBe('info');
    expect(levelClass(undefined)).toBe('info');
  });
  it('filters by minimum level, newest first', () => {
    expect(visibleLogs(entries, 'all').map((e) => e.message)).toEqual(['m6', 'm5', 'm4', 'm3', 'm2', 'm1', 'm0']);
    expect(visibleLogs(entries, 'info').map((e) => e.message)).toEqual(['m6', 'm5', 'm4', 'm3', 'm2']);
    expect(visibleLogs(entries, 'warning').map((e) => e.message)).toEqual(['m5', 'm4', 'm3']);
    expect(visibleLogs(entries, 'error').map((e) => e.message)).toEqual(['m4']);
    expect(visibleLogs(null, 'all')).toEqual([]);
  });
  it('does not change the list it is given', () => {
    const copy = [...entries];
    visibleLogs(entries, 'all');
    expect(entries).toEqual(copy);
  });
  it('knows which filters the warnings endpoint covers', () => {
    expect(wantsWarningsOnly('all')).toBe(false);
    expect(wantsWarningsOnly('info')).toBe(false);
    expect(wantsWarningsOnly('warning')).toBe(true);
    expect(wantsWarningsOnly('error')).toBe(true);
  });
  it('formats times', () => {
    const now = new Date(2025, 0, 2, 10, 0, 0);
    expect(formatLogTime(new Date(2025, 0, 2, 9, 8, 7).toISOString(), now)).not.toContain('2025');
    expect(formatLogTime(new Date(2025, 0, 1, 9, 8, 7).toISOString(), now)).toMatch(/2025/);
    expect(formatLogTime('bad', now)).toBe('bad');
  });
});
