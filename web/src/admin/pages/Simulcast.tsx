import { useEffect, useState } from 'preact/hooks';
import { admin, type SimulcastStatus, type SimulcastTarget } from '../../api';
import { formatDateTime } from '../../lib/format';
import { SIMULCAST_PRESETS, formatKbps, presetFor, stateBadge, validTargetUrl } from '../../lib/simulcast';
import { FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';
import { usePoll } from '../useAdmin';

const MASKED = '********';

/** Live state per target, polled every 2 s. */
function TargetStates() {
  const { data, error } = usePoll(() => admin.get<SimulcastStatus[]>('simulcast/status'), 2000);
  return (
    <div class="table-scroll">
      {error && <div class="form-error">{error}</div>}
      <table class="table" id="simulcast-status">
        <thead><tr><th>Target</th><th>State</th><th>Since</th><th>Bitrate</th><th>Sent</th><th>Reconnects</th><th>Last error</th></tr></thead>
        <tbody>
          {(data ?? []).map((s) => {
            const b = stateBadge(s.state);
            return (
              <tr key={s.id} data-target={s.id}>
                <td>{s.name}</td>
                <td><span class={`badge simulcast-${b.tone}`} data-state={s.state}>{b.label}</span></td>
                <td class="nowrap">{formatDateTime(s.since)}</td>
                <td class="nowrap">{s.state === 'live' ? formatKbps(s.bitrateKbps) : '—'}</td>
                <td class="nowrap">{(s.bytesSent / 1e6).toFixed(1)} MB</td>
                <td>{s.reconnects}</td>
                <td class="muted">{s.lastError ?? ''}</td>
              </tr>
            );
          })}
          {data && data.length === 0 && <tr><td colSpan={7} class="muted">No targets yet.</td></tr>}
        </tbody>
      </table>
    </div>
  );
}

/** Simulcast: targets (presets for the common platforms; the key is pasted and never shown again) and their live state. */
export function Simulcast() {
  const { config, error, reload } = useServerConfig();
  const [targets, setTargets] = useState<SimulcastTarget[]>([]);
  const [state, run] = useSave();
  useEffect(() => setTargets((config?.simulcastTargets ?? []).map((t) => ({ ...t }))), [config]);
  if (!config) return <LoadError error={error} />;
  const ladder = config.videoSettings?.videoQualityVariants ?? [];

  // A saved key is kept (sent back as MASKED) only while the target's URL is the one it was saved with.
  const savedKey = (t: SimulcastTarget) => Boolean(t.id && config.simulcastTargets?.find((x) => x.id === t.id && x.streamKey === MASKED));
  const keyKept = (t: SimulcastTarget) => savedKey(t) && config.simulcastTargets?.find((x) => x.id === t.id)?.url === t.url.trim();
  const update = (i: number, patch: Partial<SimulcastTarget>) => setTargets(targets.map((t, j) => (j === i ? { ...t, ...patch } : t)));
  const add = (presetId: string) => {
    const p = SIMULCAST_PRESETS.find((x) => x.id === presetId) ?? SIMULCAST_PRESETS[0];
    setTargets([...targets, { id: '', name: p.label, url: p.url, streamKey: '', enabled: true, variant: 'source' }]);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const ok = await run(async () => {
      const bad = targets.find((t) => !validTargetUrl(t.url.trim()));
      if (bad) throw new Error(`"${bad.name}": the URL must be rtmp://host/app, rtmps://host/app or srt://host:port.`);
      await admin.setConfig('simulcast/targets', targets.map((t) => ({ ...t, url: t.url.trim() })));
    }, 'Simulcast targets saved.');
    if (ok) void reload();
  };

  return (
    <>
      <Section title="Live state" description="Each target connects when the stream goes live and stops when it ends; a failing target retries (1 s, doubling up to 60 s) without affecting the stream here or the other targets.">
        <TargetStates />
      </Section>
      <Section title="Targets" description="castd forwards the broadcaster's own stream (no extra encode), or one variant of its video ladder (its segments, remuxed: no extra encode, a few seconds more latency), to every enabled target. Paste the platform's stream key; it is never shown again.">
        <form onSubmit={save} id="simulcast-form">
          <div class="table-scroll">
            <table class="table">
              <thead><tr><th>On</th><th>Name</th><th>Ingest URL</th><th>Stream key</th><th>Sends</th><th /></tr></thead>
              <tbody>
                {targets.map((t, i) => {
                  const preset = presetFor(t.url);
                  return (
                    <tr key={i} class="simulcast-target-row">
                      <td><input type="checkbox" aria-label="Enabled" checked={t.enabled} onChange={(e) => update(i, { enabled: e.currentTarget.checked })} /></td>
                      <td><input value={t.name} aria-label="Name" onInput={(e) => update(i, { name: e.currentTarget.value })} /></td>
                      <td>
                        <input class="mono" value={t.url} aria-label="Ingest URL" onInput={(e) => update(i, { url: e.currentTarget.value })} />
                        {preset.keyHelp && <div class="muted">{preset.keyHelp}</div>}
                      </td>
                      <td>
                        <input
                          class="mono"
                          type="password"
                          aria-label="Stream key"
                          placeholder={keyKept(t) ? 'set (paste to replace)' : savedKey(t) ? 'enter it again for the new URL' : 'not set'}
                          value={t.streamKey === MASKED ? '' : t.streamKey}
                          onInput={(e) => update(i, { streamKey: e.currentTarget.value || (savedKey(t) ? MASKED : '') })}
                        />
                      </td>
                      <td>
                        <select aria-label="Sends" value={String(t.variant)} onChange={(e) => update(i, { variant: e.currentTarget.value === 'source' ? 'source' : Number(e.currentTarget.value) })}>
                          <option value="source">The broadcaster's stream</option>
                          {ladder.map((v, n) => (
                            <option key={n} value={String(n)}>Variant {n + 1}{v.name ? `: ${v.name}` : ''}</option>
                          ))}
                        </select>
                      </td>
                      <td><button type="button" class="danger" onClick={() => setTargets(targets.filter((_, j) => j !== i))}>Remove</button></td>
                    </tr>
                  );
                })}
                {targets.length === 0 && <tr><td colSpan={6} class="muted">No targets: add one below.</td></tr>}
              </tbody>
            </table>
          </div>
          <div class="form-actions">
            {SIMULCAST_PRESETS.map((p) => (
              <button type="button" key={p.id} data-preset={p.id} onClick={() => add(p.id)}>+ {p.label}</button>
            ))}
            <button type="submit" class="primary" id="simulcast-save" disabled={state.kind === 'saving'}>Save targets</button>
          </div>
          <FormStatus state={state} />
        </form>
      </Section>
    </>
  );
}
