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
    expect(catchUpRate(5, 0.6, 4, 0.2, 1.5)).toBe(1.5);
    expect(catchUpRate(5, 0.6, 4, 0.2, 1.2)).toBe(1.2);
  });

  it('never speeds up with less than two parts buffered', () => {
    expect(catchUpRate(1.0, 0.6, 0.39, 0.2, 1.5)).toBe(1);
    expect(catchUpRate(1.0, 0.6, 0.4, 0.2, 1.5)).toBeGreaterThan(1);
  });

  it('treats unknown figures as on target', () => {
    expect(catchUpRate(Number.NaN, 0.6, 1, 0.2, 1.5)).toBe(1);
    expect(catchUpRate(1, 0.6, Number.NaN, 0.2, 1.5)).toBe(1);
  });
});
