import { useEffect, useState } from 'preact/hooks';
import { admin, type StreamKey } from '../../api';
import { FormStatus, LoadError, Section, randomKey, useSave, useServerConfig } from '../forms';
import { StatusWarnings } from '../Warnings';
import { publishUrls, whipUrl } from '../../lib/ingest';

/** How the server configuration shows a secret that is set (the SRT passphrase). */
const MASKED = '********';

/** The server addresses to copy into OBS: RTMP's server URL, the SRT URL with the first key, the WHIP endpoint. */
function PublishTargets({ rtmpPort, srtPort, passphrase, firstKey }: { rtmpPort: number; srtPort: number; passphrase: string; firstKey: string }) {
  // The passphrase is never sent back to the page (only whether one is set): the URL holds a placeholder for it.
  const masked = passphrase === MASKED;
  const urls = publishUrls(window.location.hostname, rtmpPort, srtPort, firstKey || 'STREAM-KEY', masked ? 'PASSPHRASE' : passphrase);
  const whip = whipUrl(window.location.origin);
  const copy = (text: string) => void navigator.clipboard?.writeText(text);
  return (
    <table class="table kv" id="publish-urls">
      <tbody>
        <tr>
          <th>RTMP server</th>
          <td>
            <div class="field-row">
              <code id="publish-url-rtmp">{urls.rtmp}</code>
              <button type="button" onClick={() => copy(urls.rtmp)}>Copy</button>
            </div>
            <span class="muted">Stream key: one of the keys below.</span>
          </td>
        </tr>
        <tr>
          <th>SRT URL</th>
          <td>
            {urls.srt ? (
              <>
                <div class="field-row">
                  <code id="publish-url-srt">{firstKey ? urls.srt.replace(`streamid=live/${firstKey}`, 'streamid=live/••••••••') : urls.srt}</code>
                  <button type="button" id="publish-url-srt-copy" onClick={() => copy(urls.srt ?? '')}>Copy</button>
                </div>
                <span class="muted">The whole URL goes in OBS's Server field (Service: Custom), with the Stream Key left empty; it carries the first key below.{masked && <> Replace <code>PASSPHRASE</code> with the SRT passphrase set under Server.</>}</span>
              </>
            ) : (
              <span class="muted" id="publish-url-srt">SRT is off (its port is 0 under Server settings).</span>
            )}
          </td>
        </tr>
        <tr>
          <th>WHIP URL</th>
          <td>
            <div class="field-row">
              <code id="publish-url-whip">{whip}</code>
              <button type="button" onClick={() => copy(whip)}>Copy</button>
            </div>
            <span class="muted">
              OBS 30+: Service <em>WHIP</em>, this URL as Server, one of the keys below as Bearer Token (H.264 and Opus). Media
              goes over WebRTC on one UDP port (8189 unless castd runs with <code>--webrtc-udp-port</code>), which must be
              reachable; behind NAT, start castd with <code>--webrtc-public-ip</code>.
            </span>
          </td>
        </tr>
      </tbody>
    </table>
  );
}

/** Stream keys: edit the list and save it whole (`config/streamkeys`). */
export function StreamKeys() {
  const { config, error, reload } = useServerConfig();
  const [keys, setKeys] = useState<StreamKey[]>([]);
  const [shown, setShown] = useState<Set<number>>(new Set());
  const [state, run] = useSave();
  useEffect(() => setKeys((config?.streamKeys ?? []).map((k) => ({ ...k }))), [config]);
  if (!config) return <LoadError error={error} />;

  const update = (i: number, patch: Partial<StreamKey>) => setKeys(keys.map((k, j) => (j === i ? { ...k, ...patch } : k)));
  const toggle = (i: number) => {
    const next = new Set(shown);
    if (next.has(i)) next.delete(i);
    else next.add(i);
    setShown(next);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('streamkeys', keys), 'Stream keys saved.')) void reload();
  };

  return (
    <>
      <StatusWarnings />
      <Section title="Where to stream" description="What to enter in OBS (Settings → Stream, Service: Custom, or WHIP) or any RTMP/SRT/WHIP encoder.">
        <PublishTargets rtmpPort={config.rtmpServerPort} srtPort={config.srtServerPort ?? 0} passphrase={config.srtPassphrase ?? ''} firstKey={config.streamKeys?.[0]?.key ?? ''} />
      </Section>
      <Section title="Stream keys" description="Broadcasters authenticate with any of these keys. Keep them secret.">
        {config.streamKeyOverridden && <div class="card notice">A temporary stream key was given on the command line; it overrides these keys until restart.</div>}
        <form onSubmit={save} id="stream-keys-form">
          <div class="table-scroll">
          <table class="table">
            <thead>
              <tr><th>Key</th><th>Comment</th><th /></tr>
            </thead>
            <tbody>
              {keys.map((k, i) => (
                <tr key={i} class="stream-key-row">
                  <td>
                    <div class="field-row">
                      <input class="mono" type={(shown.has(i) ? 'text' : 'password') as 'text' /* preact 11 narrows props per input type */} value={k.key} aria-label="Stream key" onInput={(e) => update(i, { key: e.currentTarget.value })} />
                      <button type="button" onClick={() => toggle(i)}>{shown.has(i) ? 'Hide' : 'Show'}</button>
                      <button type="button" onClick={() => void navigator.clipboard?.writeText(k.key)}>Copy</button>
                    </div>
                  </td>
                  <td>
                    <input value={k.comment} aria-label="Comment" onInput={(e) => update(i, { comment: e.currentTarget.value })} />
                  </td>
                  <td>
                    <button type="button" class="danger" onClick={() => setKeys(keys.filter((_, j) => j !== i))}>Remove</button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          </div>
          <div class="form-actions">
            <button type="button" id="stream-key-add" onClick={() => { setKeys([...keys, { key: randomKey(), comment: '' }]); setShown(new Set([...shown, keys.length])); }}>
              + Generate key
            </button>
            <button type="submit" class="primary" id="stream-keys-save" disabled={state.kind === 'saving'}>Save keys</button>
          </div>
          <FormStatus state={state} />
        </form>
      </Section>
    </>
  );
}
