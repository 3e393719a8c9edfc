import { admin, type GpuStats, type PlaybackClient, type PlaybackMeasurement, type TimePoint, type VideoMetrics } from '../../api';
import { formatBitrate, formatDateTime, formatMiB, formatSince } from '../../lib/format';
import { healthSummary } from '../../lib/health';
import { latestValue, roundTo } from '../../lib/series';
import { TimeChart, type ChartSeries } from '../charts';
import { LoadError, Section } from '../forms';
import { usePoll } from '../useAdmin';

const LOW = '#2fb67c';
const MID = '#7c5cff';
const HIGH = '#e5484d';

const seconds = (decimals: number) => (v: number) => `${roundTo(v, decimals)} s`;
const range = (low: TimePoint[] | undefined, mid: TimePoint[] | undefined, high: TimePoint[] | undefined, names: [string, string, string]): ChartSeries[] => [
  { label: names[0], points: low, color: LOW },
  { label: names[1], points: mid, color: MID },
  { label: names[2], points: high, color: HIGH },
];

/** CPU, memory, disk and (when there are GPUs) each GPU's health from `/api/admin/hardwarestats`, refreshed every 30 s. */
function Hardware() {
  const { data: stats, error } = usePoll(() => admin.hardwareStats(), 30_000);
  if (!stats) return <LoadError error={error} />;
  const summary = healthSummary(stats);
  return (
    <>
      {error && <div class="form-error">{error}</div>}
      {(stats.message || stats.healthy !== undefined) && (
        <div class={`card health-summary ${summary.tone}`} id="health-message">
          <strong>{summary.title}</strong>
          {stats.message && <p>{stats.message}</p>}
        </div>
      )}
      <div class="charts">
        <TimeChart id="cpu" title="CPU" points={stats.cpu} max={100} color="#7c5cff" />
        <TimeChart id="memory" title="Memory" points={stats.memory} max={100} color="#2fb67c" />
        <TimeChart id="disk" title="Disk" points={stats.disk} max={100} color="#e3a008" />
      </div>
      {(stats.gpu ?? []).map((g, i) => (
        <Gpu key={g.index ?? i} gpu={g} position={i} />
      ))}
    </>
  );
}

/** A figure's latest value with its unit, '–' while there is none (the GPU does not report it). */
const latest = (points: TimePoint[] | undefined, unit: string, decimals = 0) => {
  const v = latestValue(points);
  return v === undefined ? '–' : `${roundTo(v, decimals)} ${unit}`;
};

/** One GPU of the hardware stats: its temperature, power and memory now, and its utilization, encoder,
 *  decoder and memory charts. */
function Gpu({ gpu: g, position: i }: { gpu: GpuStats; position: number }) {
  const label = `GPU ${g.index ?? i}`;
  const memory =
    typeof g.memoryTotalMiB === 'number' ? `${formatMiB(g.memoryUsedMiB)} / ${formatMiB(g.memoryTotalMiB)}` : '–';
  return (
    <div class="gpu-health" data-gpu={g.index ?? i}>
      <h3 class="gpu-name">
        {label}: {g.name}
      </h3>
      <div class="stats">
        <div class="stat" data-stat="temperature">
          <div class="stat-label">Temperature</div>
          <div class="stat-value">{latest(g.temperature, '°C')}</div>
        </div>
        <div class="stat" data-stat="power">
          <div class="stat-label">Power</div>
          <div class="stat-value">{latest(g.power, 'W', 1)}</div>
        </div>
        <div class="stat" data-stat="memory">
          <div class="stat-label">Memory</div>
          <div class="stat-value">{memory}</div>
        </div>
      </div>
      <div class="charts">
        <TimeChart id={`gpu${i}-utilization`} title={`${label} · utilization`} points={g.utilization} max={100} color="#6fd8e8" />
        <TimeChart id={`gpu${i}-encoder`} title={`${label} · encoder (NVENC)`} points={g.encoder} max={100} color="#ff8ad8" />
        <TimeChart id={`gpu${i}-decoder`} title={`${label} · decoder (NVDEC)`} points={g.decoder} max={100} color="#8ad88a" />
        <TimeChart id={`gpu${i}-memory`} title={`${label} · memory`} points={g.memory} max={100} color="#ffb86b" />
      </div>
    </div>
  );
}

/** The playback series of `/api/admin/metrics/video`, as reported by the players, refreshed every 30 s. */
function Playback() {
  const { data, error } = usePoll(() => admin.videoMetrics(), 30_000);
  if (!data) return <LoadError error={error} />;
  const m: VideoMetrics = data;
  const empty = 'No player has reported yet.';
  return (
    <>
      {error && <div class="form-error">{error}</div>}
      {(m.segmentLength || (m.availableBitrates ?? []).length > 0) && (
        <p class="muted" id="playback-settings">
          {m.segmentLength ? `Segment length ${m.segmentLength} s. ` : ''}
          {(m.availableBitrates ?? []).length > 0 ? `Variant bitrates: ${(m.availableBitrates ?? []).map((b) => formatBitrate(b)).join(', ')}.` : ''}
        </p>
      )}
      <div class="charts" id="playback-charts">
        <TimeChart
          id="latency"
          title="Latency behind live"
          series={range(m.lowestLatency, m.medianLatency, m.highestLatency, ['Lowest', 'Median', 'Highest'])}
          format={seconds(1)}
          minTop={5}
          empty={empty}
        />
        <TimeChart
          id="segment-download"
          title="Segment download time"
          series={range(m.minimumSegmentDownloadDuration, m.medianSegmentDownloadDuration, m.maximumSegmentDownloadDuration, ['Fastest', 'Median', 'Slowest'])}
          format={seconds(2)}
          empty={empty}
        />
        <TimeChart
          id="player-bitrate"
          title="Player bandwidth"
          series={range(m.minPlayerBitrate, m.medianPlayerBitrate, m.maxPlayerBitrate, ['Lowest', 'Median', 'Highest'])}
          format={(v) => formatBitrate(v)}
          minTop={1000}
          empty={empty}
        />
        <TimeChart id="errors" title="Playback errors" points={m.errors} unit="" decimals={0} color={HIGH} empty={empty} />
        <TimeChart id="quality-variant-changes" title="Quality variant changes" points={m.qualityVariantChanges} unit="" decimals={0} color="#e3a008" empty={empty} />
      </div>
    </>
  );
}

const dash = (v: number | null | undefined, f: (n: number) => string) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? f(v) : '–');

/** A WebRTC viewer's loss and round-trip time ("0.4 % · 23 ms"); '–' for HLS players (they report neither). */
function lossRtt(p: PlaybackMeasurement): string {
  const parts = [];
  if (typeof p.packetLossPercent === 'number') parts.push(`${p.packetLossPercent} %`);
  if (typeof p.roundTripSeconds === 'number') parts.push(`${Math.round(p.roundTripSeconds * 1000)} ms`);
  return parts.length ? parts.join(' · ') : '–';
}

/** Playback clients from `/api/admin/viewers/playback` and their latest measurements, refreshed every 10 s. */
function Clients() {
  const { data, error } = usePoll(() => admin.playbackClients(), 10_000);
  if (!data) return <LoadError error={error} />;
  const clients: PlaybackClient[] = Array.isArray(data) ? data : [];
  return (
    <>
      {error && <div class="form-error">{error}</div>}
      {clients.length === 0 ? (
        <p class="muted" id="playback-clients-empty">No one is watching right now.</p>
      ) : (
        <div class="table-scroll">
          <table class="table" id="playback-clients">
            <thead>
              <tr>
                <th>Client</th><th>Address</th><th>Player</th><th>Watching for</th><th>State</th><th>Bandwidth</th>
                <th>Latency</th><th>Download</th><th>Bitrate</th><th>Errors</th><th>Quality changes</th>
                <th title="WebRTC viewers: packet loss and round-trip time from their RTCP reports">Loss · RTT</th><th>Updated</th>
              </tr>
            </thead>
            <tbody>
              {clients.map((c) => {
                const p = c.playback;
                return (
                  <tr key={c.clientID} class="playback-client" data-client={c.clientID}>
                    <td class="mono nowrap" title={`client ${c.clientID}\nviewer ${c.viewerID}`}>{c.clientID.slice(0, 10)}</td>
                    <td class="mono">{c.ipAddress || '–'}</td>
                    <td><span class="ellipsis" title={c.userAgent}>{c.userAgent || '–'}</span></td>
                    <td class="nowrap" title={formatDateTime(c.firstSeen)}>{formatSince(c.firstSeen)}</td>
                    {p ? (
                      <>
                        <td class="nowrap">
                          {p.playerState || '–'}
                          <div class="muted small" title="measurement status · source of the figures">
                            {[p.measurementStatus, p.source].filter(Boolean).join(' · ')}
                          </div>
                        </td>
                        <td class="nowrap">{dash(p.bandwidthKbps, formatBitrate)}</td>
                        <td class="nowrap">{dash(p.latencySeconds, seconds(1))}</td>
                        <td class="nowrap">{dash(p.downloadSeconds, seconds(2))}</td>
                        <td class="nowrap">{dash(p.bitrateKbps, formatBitrate)}</td>
                        <td>{p.errorCount ?? 0}</td>
                        <td>{p.qualityVariantChanges ?? 0}</td>
                        <td class="nowrap webrtc-loss-rtt">{lossRtt(p)}</td>
                        <td class="nowrap" title={formatDateTime(p.lastUpdate)}>{formatSince(p.lastUpdate)} ago</td>
                      </>
                    ) : (
                      <td colSpan={9} class="muted">No measurements yet</td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

/** Health: the machine (hardware series), playback as the players report it, and the clients watching now. */
export function Health() {
  return (
    <div data-testid="health">
      <Section title="Hardware">
        <Hardware />
      </Section>
      <Section title="Playback" description="What the players report: how far behind live they are, how long segments take to download, and their bandwidth, per metrics window.">
        <Playback />
      </Section>
      <Section title="Playback clients">
        <Clients />
      </Section>
    </div>
  );
}
