/** Time-series helpers for the admin charts (`[{time, value}]` from the API). */

export interface Point {
  time: string;
  value: number;
}

/**
 * Put several series on one time axis, as uPlot wants them: the sorted union of their timestamps (unix seconds) and,
 * per series, its value at each of them (`null` where it has none). Points with an unparsable time or a non-numeric
 * value are skipped; of two points of one series at the same time the later one wins.
 */
export function alignSeries(lists: ReadonlyArray<ReadonlyArray<Point> | null | undefined>): [number[], ...(number | null)[][]] {
  const maps = lists.map((list) => {
    const m = new Map<number, number>();
    for (const p of Array.isArray(list) ? list : []) {
      const t = Date.parse(p?.time);
      const v = Number(p?.value);
      if (Number.isNaN(t) || p?.value === null || !Number.isFinite(v)) continue;
      m.set(t / 1000, v);
    }
    return m;
  });
  const xs = [...new Set(maps.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
  return [xs, ...maps.map((m) => xs.map((x) => m.get(x) ?? null))];
}

/** The value of the newest point of a series (by time), or undefined when it has none. */
export function latestValue(list: ReadonlyArray<Point> | null | undefined): number | undefined {
  const [xs, ys] = alignSeries([list]);
  return xs.length ? (ys[ys.length - 1] ?? undefined) : undefined;
}

/** Round for display: `decimals` digits after the point at most, no trailing zeros. */
export function roundTo(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}
