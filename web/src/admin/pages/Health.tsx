import { Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { admin, type HardwareStats } from '../../api';
import { TimeChart } from '../charts';
import { LoadError } from '../forms';

/** CPU, memory, disk and (when present) GPU series from `/api/admin/hardwarestats`, one chart per series. */
export function Health() {
  const [stats, setStats] = useState<HardwareStats | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    const load = () =>
      admin.hardwareStats().then(
        (s) => {
          if (!live) return;
          setStats(s);
          setError(null);
        },
        (e: Error) => live && setError(e.message),
      );
    void load();
    const t = setInterval(load, 30_000);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, []);

  if (!stats) return <LoadError error={error} />;
  return (
    <div data-testid="health">
      {error && <div class="form-error">{error}</div>}
      {(stats.message || stats.healthy !== undefined) && (
        <div class={`card health-summary ${stats.healthy === false ? 'bad' : 'ok'}`} id="health-message">
          <strong>
            {stats.healthy === false ? 'Needs attention' : 'Healthy'}
            {typeof stats.healthPercentage === 'number' ? ` (${stats.healthPercentage}%)` : ''}
          </strong>
          {stats.message && <p>{stats.message}</p>}
        </div>
      )}
      <div class="charts">
        <TimeChart id="cpu" title="CPU" points={stats.cpu} max={100} color="#7c5cff" />
        <TimeChart id="memory" title="Memory" points={stats.memory} max={100} color="#2fb67c" />
        <TimeChart id="disk" title="Disk" points={stats.disk} max={100} color="#e3a008" />
        {(stats.gpu ?? []).map((g, i) => (
          <Fragment key={i}>
            <TimeChart id={`gpu${i}-utilization`} title={`${g.name} · utilization`} points={g.utilization} max={100} color="#6fd8e8" />
            <TimeChart id={`gpu${i}-encoder`} title={`${g.name} · encoder`} points={g.encoder} max={100} color="#ff8ad8" />
            <TimeChart id={`gpu${i}-memory`} title={`${g.name} · memory`} points={g.memory} max={100} color="#ffb86b" />
          </Fragment>
        ))}
      </div>
    </div>
  );
}
