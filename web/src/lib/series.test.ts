import { describe, expect, it } from 'vitest';
import { alignSeries, latestValue, roundTo } from './series';

const at = (s: number, value: number) => ({ time: new Date(s * 1000).toISOString(), value });

describe('alignSeries', () => {
  it('puts series on the union of their timestamps, null where one has no point', () => {
    const [xs, a, b] = alignSeries([
      [at(20, 2), at(10, 1)],
      [at(10, 5), at(30, 7)],
    ]);
    expect(xs).toEqual([10, 20, 30]);
    expect(a).toEqual([1, 2, null]);
    expect(b).toEqual([5, null, 7]);
  });
  it('skips bad points and copes with missing series', () => {
    const [xs, a, b] = alignSeries([[{ time: 'nope', value: 1 }, at(5, Number.NaN), at(6, 3)], undefined]);
    expect(xs).toEqual([6]);
    expect(a).toEqual([3]);
    expect(b).toEqual([null]);
    expect(alignSeries([])).toEqual([[]]);
  });
  it('finds the latest value by time', () => {
    expect(latestValue([at(30, 3), at(10, 1)])).toBe(3);
    expect(latestValue([])).toBeUndefined();
    expect(latestValue(undefined)).toBeUndefined();
  });
  it('rounds for display', () => {
    expect(roundTo(12.345, 1)).toBe(12.3);
    expect(roundTo(12.345, 0)).toBe(12);
    expect(roundTo(0.456, 2)).toBe(0.46);
  });
});
