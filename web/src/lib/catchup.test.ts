import { describe, expect, it } from 'vitest';
import { catchUpRate } from './catchup';

describe('catchUpRate', () => {
  it('plays at normal speed on target or ahead of it', () => {
    expect(catchUpRate(0.6, 0.6, 0.6, 0.2, 1.5)).toBe(1);
    expect(catchUpRate(0.64, 0.6, 0.6, 0.2, 1.5)).toBe(1);
    expect(catchUpRate(0.4, 0.6, 0.6, 0.2, 1.5)).toBe(1);
  });

  it('speeds up a little when behind, more when further behind, never beyond the cap', () => {
    expect(catchUpRate(0.9, 0.6, 0.8, 0.2, 1.5)).toBe(1.1);
    expect(catchUpRate(1.6, 0.6, 1.5, 0.2, 1.5)).toBe(1.25);
    expect(catchUpRate(5, 0.6, 4.9, 0.2, 1.5)).toBe(1.5);
    expect(catchUpRate(5, 0.6, 4.9, 0.2, 1.2)).toBe(1.2);
  });

  it('only spends buffer it has: two parts must be left once caught up', () => {
    // 0.4 s behind with 0.79 s buffered: catching up would leave 0.39 s.
    expect(catchUpRate(1.0, 0.6, 0.79, 0.2, 1.5)).toBe(1);
    expect(catchUpRate(1.0, 0.6, 0.8, 0.2, 1.5)).toBeGreaterThan(1);
    // Parts arriving late: behind, with little buffered.
    expect(catchUpRate(1.2, 0.8, 0.3, 0.2, 1.5)).toBe(1);
  });

  it('treats unknown figures as on target', () => {
    expect(catchUpRate(Number.NaN, 0.6, 1, 0.2, 1.5)).toBe(1);
    expect(catchUpRate(1, 0.6, Number.NaN, 0.2, 1.5)).toBe(1);
  });
});
