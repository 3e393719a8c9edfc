/** uPlot line charts for time series `[{time, value}]`: one series, or several sharing the time axis. */
import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { TimePoint } from '../api';
import { alignSeries, latestValue, roundTo } from '../lib/series';

export interface ChartSeries {
  label: string;
  points: TimePoint[] | undefined;
  color: string;
}

interface Props {
  id: string;
  title: string;
  /** One series (drawn in `color`) ... */
  points?: TimePoint[] | undefined;
  /** ... or several, with a legend showing each one's latest value. */
  series?: ChartSeries[];
  /** Appended to values (default '%'); ignored when `format` is given. */
  unit?: string;
  color?: string;
  /** Fixed y range maximum (e.g. 100 for percentages); otherwise the range is 0 to a little above the data. */
  max?: number;
  /** Without `max`: the y range reaches at least this high (default 1), e.g. while there is no data. */
  minTop?: number;
  /** Digits after the decimal point of the values shown (default 1). */
  decimals?: number;
  /** Formats a value for the axis and the latest-value labels (overrides `unit` and `decimals`). */
  format?: (value: number) => string;
  /** Shown over the (empty) chart while no series has a point. */
  empty?: ComponentChildren;
}

export function TimeChart({ id, title, points, series, unit = '%', color = '#7c5cff', max, minTop = 1, decimals = 1, format, empty }: Props) {
  const ref = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const lines: ChartSeries[] = series ?? [{ label: title, points, color }];
  const fmt = format ?? ((v: number) => `${roundTo(v, decimals)}${unit}`);
  const fmtRef = useRef(fmt);
  fmtRef.current = fmt;

  const lists = lines.map((l) => l.points);
  const data = useMemo(() => alignSeries(lists), lists);
  const hasData = data[0].length > 0;
  // The plot is rebuilt when its shape changes, and only given new data otherwise.
  const shape = JSON.stringify([lines.map((l) => [l.label, l.color]), unit, decimals, max, minTop, Boolean(format)]);

  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const width = () => Math.max(240, el.clientWidth || 600);
    const axis = { stroke: '#9aa3b2', grid: { stroke: '#2b3240' }, ticks: { stroke: '#2b3240' } };
    const opts: uPlot.Options = {
      width: width(),
      height: 180,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: { range: max !== undefined ? [0, max] : (_u, _min, dataMax) => [0, Math.max(minTop, dataMax > 0 ? dataMax * 1.15 : 0)] },
      },
      axes: [
        axis,
        {
          ...axis,
          values: (_u, vals) => vals.map((v) => fmtRef.current(v)),
          size: (_u, values) => Math.max(50, 20 + 8 * Math.max(0, ...(values ?? []).map((v) => String(v).length))),
          // Whole-number series (counts) get whole-number ticks.
          ...(decimals === 0 && !format ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 100_000, 1_000_000] } : {}),
        },
      ],
      series: [
        {},
        ...lines.map((l) => ({
          label: l.label,
          stroke: l.color,
          width: 2,
          fill: lines.length === 1 ? `${l.color}22` : undefined,
          spanGaps: true,
          points: { show: data[0].length < 3 },
        })),
      ],
    };
    const plot = new uPlot(opts, data, el);
    plotRef.current = plot;
    const ro = typeof ResizeObserver !== 'undefined' ? new ResizeObserver(() => plot.setSize({ width: width(), height: 180 })) : null;
    ro?.observe(el);
    return () => {
      ro?.disconnect();
      plot.destroy();
      plotRef.current = null;
    };
  }, [shape]);

  useEffect(() => {
    plotRef.current?.setData(data);
  }, [data]);

  const latest = lines.map((l) => latestValue(l.points));
  return (
    <div class="health-chart" data-series={id}>
      <div class="chart-head">
        <h3>{title}</h3>
        {lines.length === 1 ? (
          <span class="chart-value">{latest[0] !== undefined ? fmt(latest[0]) : 'no data yet'}</span>
        ) : (
          !hasData && <span class="chart-value">no data yet</span>
        )}
      </div>
      {lines.length > 1 && hasData && (
        <ul class="chart-legend">
          {lines.map((l, i) => (
            <li key={l.label} data-series={l.label}>
              <span class="swatch" style={{ background: l.color }} />
              {l.label} <span class="chart-value">{latest[i] !== undefined ? fmt(latest[i]) : '–'}</span>
            </li>
          ))}
        </ul>
      )}
      <div class="chart-canvas">
        <div ref={ref} />
        {!hasData && empty && <div class="chart-empty">{empty}</div>}
      </div>
    </div>
  );
}
