/** uPlot line charts for time series `[{time, value}]`. */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { TimePoint } from '../api';

interface Props {
  id: string;
  title: string;
  points: TimePoint[] | undefined;
  unit?: string;
  color?: string;
  /** Fixed y range maximum (e.g. 100 for percentages). */
  max?: number;
}

export function TimeChart({ id, title, points, unit = '%', color = '#7c5cff', max }: Props) {
  const ref = useRef<HTMLDivElement>(null);
  const list = Array.isArray(points) ? points : [];
  const last = list.length ? list[list.length - 1].value : undefined;

  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const xs: number[] = [];
    const ys: number[] = [];
    for (const p of list) {
      const t = Date.parse(p.time);
      if (Number.isNaN(t)) continue;
      xs.push(t / 1000);
      ys.push(Number(p.value));
    }
    const width = () => Math.max(240, el.clientWidth || 600);
    const opts: uPlot.Options = {
      width: width(),
      height: 180,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: max !== undefined ? { range: [0, max] } : { auto: true } },
      axes: [
        { stroke: '#9aa3b2', grid: { stroke: '#2b3240' }, ticks: { stroke: '#2b3240' } },
        { stroke: '#9aa3b2', grid: { stroke: '#2b3240' }, ticks: { stroke: '#2b3240' }, values: (_u, vals) => vals.map((v) => `${v}${unit}`) },
      ],
      series: [{}, { label: title, stroke: color, width: 2, fill: `${color}22`, points: { show: xs.length < 3 } }],
    };
    const plot = new uPlot(opts, [xs, ys], el);
    const ro = typeof ResizeObserver !== 'undefined' ? new ResizeObserver(() => plot.setSize({ width: width(), height: 180 })) : null;
    ro?.observe(el);
    return () => {
      ro?.disconnect();
      plot.destroy();
    };
  }, [points, unit, color, max, title]);

  return (
    <div class="health-chart" data-series={id}>
      <div class="chart-head">
        <h3>{title}</h3>
        <span class="chart-value">{last !== undefined ? `${Math.round(last * 10) / 10}${unit}` : 'no data yet'}</span>
      </div>
      <div ref={ref} class="chart-canvas" />
    </div>
  );
}
