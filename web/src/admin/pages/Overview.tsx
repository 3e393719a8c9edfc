import { admin } from '../../api';
import { formatBitrate, formatDateTime, formatSince } from '../../lib/format';
import { healthSummary } from '../../lib/health';
import { TimeChart } from '../charts';
import { LoadError, Section } from '../forms';
import { usePoll } from '../useAdmin';
import { WarningBanner, warningsOf } from '../Warnings';

const LATENCY = ['Lowest latency', 'Low latency', 'Balanced', 'Reliable', 'Most reliable'];

function Stat({ label, value, id }: { label: string; value: string | number; id?: string }) {
  return (
    <div class="stat" id={id}>
      <div class="stat-label">{label}</div>
      <div class="stat-value">{value}</div>
    </div>
  );
}

/** Viewer count over time from `/api/admin/viewersOverTime`, refreshed every 30 s. */
function ViewersChart() {
  const { data, error } = usePoll(() => admin.viewersOverTime(), 30_000);
  return (
    <div class="chart-wide" id="overview-viewers-chart">
      <TimeChart
        id="viewers"
        title="Viewers over time"
        points={Array.isArray(data) ? data : []}
        unit=""
        decimals={0}
        color="#6fd8e8"
        empty={error ? `Could not load the viewer history: ${error}` : data ? 'No viewer counts recorded yet.' : 'Loading…'}
      />
    </div>
  );
}

/** Server status from `/api/admin/status`, refreshed every 5 s, with its warnings and the viewer history. */
export function Overview() {
  const { data: status, error } = usePoll(() => admin.status(), 5000);

  if (!status) return <LoadError error={error} />;
  const b = status.broadcaster;
  const d = b?.streamDetails;
  const cb = status.currentBroadcast;
  const latency = typeof cb?.latencyLevel === 'number' ? cb.latencyLevel : cb?.latencyLevel?.level;
  const health = status.health;

  return (
    <div data-testid="overview">
      <WarningBanner warnings={warningsOf(status)} />
      {error && <div class="form-error">{error}</div>}
      <div class="stats">
        <div class="stat" id="overview-online">
          <div class="stat-label">Stream</div>
          <div class="stat-value">{status.online ? <span class="badge live">Live</span> : <span class="badge">Offline</span>}</div>
        </div>
        <Stat label="Viewers" value={status.viewerCount ?? 0} id="overview-viewers" />
        <Stat label="Session peak" value={status.sessionPeakViewerCount ?? 0} />
        <Stat label="All-time peak" value={status.overallPeakViewerCount ?? 0} />
        {status.online && <Stat label="Live for" value={formatSince(b?.time)} />}
      </div>

      {health && (
        <div class={`card health-summary ${healthSummary(health).tone}`} id="overview-health">
          <strong>Health: {healthSummary(health).title}</strong>
          {health.message && <p>{health.message}</p>}
        </div>
      )}

      <ViewersChart />

      {status.online && b ? (
        <Section title="Inbound stream">
          <table class="table kv">
            <tbody>
              <tr><th>From</th><td>{b.remoteAddr}</td></tr>
              <tr><th>Started</th><td>{formatDateTime(b.time)}</td></tr>
              {d && (
                <>
                  <tr><th>Resolution</th><td>{d.width}×{d.height} @ {Math.round(d.framerate * 100) / 100} fps</td></tr>
                  <tr><th>Video</th><td>{d.videoCodec} · {formatBitrate(d.videoBitrate)}</td></tr>
                  <tr><th>Audio</th><td>{d.audioCodec} · {formatBitrate(d.audioBitrate)}</td></tr>
                  <tr><th>Encoder</th><td>{d.encoder || '–'}</td></tr>
                </>
              )}
            </tbody>
          </table>
        </Section>
      ) : (
        <Section title="No one is streaming">
          <p class="muted">Point your broadcasting software at <code>rtmp://&lt;this server&gt;:&lt;RTMP port&gt;/live</code> or <code>srt://&lt;this server&gt;:&lt;SRT port&gt;?streamid=live/&lt;key&gt;</code> with one of your stream keys, or publish over WHIP to <code>/whip</code> on this server with a key as Bearer Token (the URLs to copy are under Stream keys).</p>
        </Section>
      )}

      {cb && (
        <Section title="Current output">
          <p>
            Encoder: <strong>{cb.videoCodec || '–'}</strong>
            {latency !== undefined && (
              <>
                {' '}· Latency level: <strong>{latency}</strong> ({LATENCY[latency] ?? ''})
              </>
            )}
          </p>
          <table class="table">
            <thead>
              <tr><th>Variant</th><th>Video</th><th>Audio</th><th>Size</th><th>FPS</th></tr>
            </thead>
            <tbody>
              {(cb.outputSettings ?? []).map((v, i) => (
                <tr key={i}>
                  <td>{v.name || `Variant ${i + 1}`}</td>
                  <td>{v.videoPassthrough ? 'passthrough' : formatBitrate(v.videoBitrate)}</td>
                  <td>{v.audioPassthrough ? 'passthrough' : formatBitrate(v.audioBitrate)}</td>
                  <td>{v.scaledWidth || v.scaledHeight ? `${v.scaledWidth || 'auto'}×${v.scaledHeight || 'auto'}` : 'source'}</td>
                  <td>{v.framerate || '–'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      )}
      {status.versionNumber && <p class="muted">castd {status.versionNumber}</p>}
    </div>
  );
}
