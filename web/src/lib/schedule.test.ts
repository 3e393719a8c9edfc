import { describe, expect, it } from 'vitest';
import { countdown, webcalUrl, weeklyRule } from './schedule';

describe('schedule helpers', () => {
  const now = Date.parse('2030-01-01T12:00:00Z');
  it('counts down', () => {
    expect(countdown('2030-01-03T15:30:00Z', now)).toBe('starts in 2d 3h');
    expect(countdown('2030-01-01T13:05:00Z', now)).toBe('starts in 1h 05m');
    expect(countdown('2030-01-01T12:04:09Z', now)).toBe('starts in 4m 09s');
    expect(countdown('2030-01-01T11:00:00Z', now)).toBe('starting now');
    expect(countdown('nonsense', now)).toBe('');
  });
  it('builds calendar links and weekly rules', () => {
    expect(webcalUrl('https://live.example')).toBe('webcal://live.example/api/schedule.ics');
    expect(webcalUrl('http://127.0.0.1:8080')).toBe('webcal://127.0.0.1:8080/api/schedule.ics');
    expect(weeklyRule('2030-03-17T19:00', 'Europe/Berlin')).toBe('DTSTART;TZID=Europe/Berlin:20300317T190000\nRRULE:FREQ=WEEKLY');
    expect(weeklyRule('2030-03-17T19:00', 'UTC', 2)).toBe('DTSTART;TZID=UTC:20300317T190000\nRRULE:FREQ=WEEKLY;INTERVAL=2');
    expect(weeklyRule('', 'UTC')).toBe('');
  });
});
