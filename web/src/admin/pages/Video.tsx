import { useEffect, useRef, useState } from 'preact/hooks';
import { admin, type EncoderInfo, type LadderFit, type OutputVariant } from '../../api';
import { basePath } from '../../lib/base';
import { ConfigField, FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';

const LATENCY = [
  'Lowest latency (1 s segments, least reliable)',
  'Low latency (2 s segments)',
  'Balanced (3 s segments, default)',
  'Reliable (4 s segments)',
  'Most reliable (5 s segments, highest latency)',
];
const CPU = ['fastest', 'fast', 'balanced', 'better', 'best'];

const newVariant = (): OutputVariant => ({
  name: '',
  videoPassthrough: false,
  audioPassthrough: true,
  videoBitrate: 1200,
  audioBitrate: 128,
  scaledWidth: 0,
  scaledHeight: 0,
  framerate: 24,
  cpuUsageLevel: 2,
});

/** How long the editor's ladder must stay unchanged before it is judged again (each new rung is measured). */
const FIT_DEBOUNCE_MS = 700;

const cores = (n: number) => (n === 0 ? '0' : n.toFixed(n < 1 ? 2 : 1));

/** Whether the editor's ladder fits this box: the saved ladder on load, the edited one after each change
 * settles (each a `POST`; nothing is saved). A slower answer to an older ladder never replaces a newer one. */
function LadderFitBox({ variants, saved }: { variants: OutputVariant[]; saved: boolean }) {
  const [fit, setFit] = useState<LadderFit | null>(null);
  const [measuring, setMeasuring] = useState(true);
  const [error, setError] = useState('');
  const asked = useRef(0);
  const key = JSON.stringify(variants);
  useEffect(() => {
    const n = ++asked.current;
    setMeasuring(true);
    const timer = setTimeout(
      () => {
        admin.videoFit(variants).then(
          (answer) => {
            if (n !== asked.current) return;
            setFit(answer);
            setError('');
            setMeasuring(false);
          },
          (e: unknown) => {
            if (n !== asked.current) return;
            setError(e instanceof Error ? e.message : String(e));
            setMeasuring(false);
          },
        );
      },
      saved ? 0 : FIT_DEBOUNCE_MS,
    );
    return () => clearTimeout(timer);
  }, [key, saved]);
  const state = measuring ? 'measuring' : error ? 'error' : fit?.fits ? 'fits' : 'does-not-fit';
  // The server's message: the verdict's sentence ("This ladder fits this box (uses ~X of Y cores)." or "This ladder
  // does not fit this box: needs ~X cores, Y available — …"), then what it rests on.
  const [, verdict = '', details = ''] = /^(.+?\.)(?=\s|$)\s*(.*)$/s.exec(fit?.message ?? '') ?? [];
  return (
    <div class={`ladder-fit ${state}`} id="ladder-fit" data-state={state} role="status" aria-live="polite">
      {measuring && <p class="ladder-fit-measuring">Measuring what this ladder costs on this box…</p>}
      {!measuring && error && <p class="bad">Could not tell whether this ladder fits: {error}</p>}
      {!measuring && !error && fit && (
        <>
          <p class={fit.fits ? 'ok ladder-fit-verdict' : 'bad ladder-fit-verdict'} id="ladder-fit-verdict">{verdict}</p>
          {details && <p class="help" id="ladder-fit-message">{details}</p>}
          <table class="table ladder-fit-rungs">
            <thead><tr><th>Variant</th><th>Size</th><th>Encoder</th><th>Cores</th><th>Speed</th></tr></thead>
            <tbody>
              {fit.variants.map((r) => (
                <tr key={r.index}>
                  <td>{r.name || `Variant ${r.index + 1}`}</td>
                  <td class="mono">{r.width}×{r.height}@{r.framerate}</td>
                  <td class="mono">{r.encoder === 'copy' ? 'passthrough' : `${r.encoder} ${r.preset}`}</td>
                  <td>{r.encoder === 'copy' ? '–' : `${cores(r.cpuCoresNeeded)}${r.measured ? '' : ' (est.)'}`}</td>
                  <td>{r.speed ? `${r.speed.toFixed(r.speed < 1 ? 2 : 1)}×` : '–'}</td>
                </tr>
              ))}
              {fit.decodeCores > 0 && (
                <tr><td>Decoding the source</td><td class="mono">source</td><td class="mono">h264</td><td>{cores(fit.decodeCores)}</td><td>–</td></tr>
              )}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}

function Variants({ initial }: { initial: OutputVariant[] }) {
  const { reload } = useServerConfig();
  const [variants, setVariants] = useState<OutputVariant[]>(initial);
  const [state, run] = useSave();
  useEffect(() => setVariants(initial.map((v) => ({ ...v }))), [initial]);
  const update = (i: number, patch: Partial<OutputVariant>) => setVariants(variants.map((v, j) => (j === i ? { ...v, ...patch } : v)));
  const num = (e: Event) => Math.max(0, Math.round(Number((e.currentTarget as HTMLInputElement).value) || 0));
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('video/streamoutputvariants', variants), 'Output variants saved; they apply to the next stream.')) void reload();
  };
  return (
    <form onSubmit={save} id="variants-form">
      <div class="table-scroll">
        <table class="table variants">
          <thead>
            <tr>
              <th>Name</th><th>Video kbps</th><th>Video passthrough</th><th>Audio kbps</th><th>Audio passthrough</th>
              <th>Width</th><th>Height</th><th>FPS</th><th>Encoder effort</th><th />
            </tr>
          </thead>
          <tbody>
            {variants.map((v, i) => (
              <tr key={i} class="variant-row">
                <td><input value={v.name ?? ''} aria-label="Name" placeholder={`Variant ${i + 1}`} onInput={(e) => update(i, { name: e.currentTarget.value })} /></td>
                <td><input type="number" min={0} value={v.videoBitrate} aria-label="Video bitrate" disabled={v.videoPassthrough} onInput={(e) => update(i, { videoBitrate: num(e) })} /></td>
                <td><input type="checkbox" checked={v.videoPassthrough} aria-label="Video passthrough" onChange={(e) => update(i, { videoPassthrough: e.currentTarget.checked })} /></td>
                <td><input type="number" min={0} value={v.audioBitrate} aria-label="Audio bitrate" disabled={v.audioPassthrough} onInput={(e) => update(i, { audioBitrate: num(e) })} /></td>
                <td><input type="checkbox" checked={v.audioPassthrough} aria-label="Audio passthrough" onChange={(e) => update(i, { audioPassthrough: e.currentTarget.checked })} /></td>
                <td><input type="number" min={0} value={v.scaledWidth} aria-label="Width" title="0 = keep" onInput={(e) => update(i, { scaledWidth: num(e) })} /></td>
                <td><input type="number" min={0} value={v.scaledHeight} aria-label="Height" title="0 = keep" onInput={(e) => update(i, { scaledHeight: num(e) })} /></td>
                <td><input type="number" min={0} value={v.framerate} aria-label="Framerate" onInput={(e) => update(i, { framerate: num(e) })} /></td>
                <td>
                  <select value={String(v.cpuUsageLevel)} aria-label="Encoder effort" onChange={(e) => update(i, { cpuUsageLevel: Number(e.currentTarget.value) })}>
                    {CPU.map((label, n) => <option key={n} value={String(n)}>{n} · {label}</option>)}
                  </select>
                </td>
                <td><button type="button" class="danger" disabled={variants.length <= 1} onClick={() => setVariants(variants.filter((_, j) => j !== i))}>Remove</button></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p class="help">Width/height 0 keeps the source size (set one to keep the aspect ratio).</p>
      <LadderFitBox variants={variants} saved={JSON.stringify(variants) === JSON.stringify(initial)} />
      <div class="form-actions">
        <button type="button" id="variant-add" onClick={() => setVariants([...variants, newVariant()])}>+ Add variant</button>
        <button type="submit" class="primary" id="variants-save" disabled={state.kind === 'saving'}>Save variants</button>
      </div>
      <FormStatus state={state} />
    </form>
  );
}

function Latency({ level }: { level: number }) {
  const { reload } = useServerConfig();
  const [value, setValue] = useState(level);
  const [state, run] = useSave();
  useEffect(() => setValue(level), [level]);
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('video/streamlatencylevel', value))) void reload();
  };
  return (
    <form onSubmit={save} class="config-field" id="latency-form">
      <label for="latency-level">Latency level</label>
      <div class="field-row">
        <select id="latency-level" value={String(value)} onChange={(e) => setValue(Number(e.currentTarget.value))}>
          {LATENCY.map((label, n) => <option key={n} value={String(n)}>{n} · {label}</option>)}
        </select>
        <button type="submit" class="primary" id="latency-save" disabled={state.kind === 'saving'}>Save</button>
      </div>
      <FormStatus state={state} />
    </form>
  );
}

function Encoder({ current, supported }: { current: string; supported: string[] }) {
  const { reload } = useServerConfig();
  const [value, setValue] = useState(current || 'auto');
  const [encoders, setEncoders] = useState<EncoderInfo[] | null>(null);
  const [selected, setSelected] = useState('');
  const [state, run] = useSave();
  useEffect(() => setValue(current || 'auto'), [current]);
  useEffect(() => {
    admin.encoders().then(
      (answer) => {
        setEncoders(Array.isArray(answer?.encoders) ? answer.encoders : null);
        setSelected(answer?.selectedLabel || answer?.selected || '');
      },
      () => setEncoders(null),
    );
  }, []);
  const options = ['auto', ...supported.filter((c) => c !== 'auto')];
  if (value && !options.includes(value)) options.push(value);
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('video/codec', value), 'Encoder saved; it applies to the next stream.')) void reload();
  };
  return (
    <>
      <form onSubmit={save} class="config-field" id="codec-form">
        <label for="codec-select">Encoder</label>
        <div class="field-row">
          <select id="codec-select" value={value} onChange={(e) => setValue(e.currentTarget.value)}>
            {options.map((c) => <option key={c} value={c}>{c === 'auto' ? 'auto (best available)' : c}</option>)}
          </select>
          <button type="submit" class="primary" id="codec-save" disabled={state.kind === 'saving'}>Save</button>
        </div>
        <FormStatus state={state} />
      </form>
      {selected && <p class="hint" id="encoder-selected">The next stream uses: <span class="mono">{selected}</span></p>}
      {encoders && encoders.length > 0 && (
        <table class="table" id="encoders-table">
          <thead><tr><th>Encoder</th><th>Kind</th><th>Available</th><th>Device</th><th>Notes</th></tr></thead>
          <tbody>
            {encoders.map((enc) => (
              <tr key={`${enc.name}-${enc.decode ?? ''}-${enc.device ?? ''}`}>
                <td class="mono">{enc.name}</td>
                <td>{enc.decode ? `GPU decode and scaling (${enc.decode}) + CPU encode` : enc.kind}</td>
                <td>{enc.available ? <span class="ok">yes</span> : <span class="bad">no</span>}</td>
                <td class="mono">{enc.device || '–'}</td>
                <td>{enc.reason || ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** Video: output quality variants, latency level and encoder (the encoder and ffmpeg are the server's: not on a
 * channel's admin). */
export function Video() {
  const { config, error } = useServerConfig();
  if (!config) return <LoadError error={error} />;
  const serverWide = !basePath();
  return (
    <>
      <Section title="Output quality variants" description="Each variant is one rendition viewers (or the player's automatic mode) can pick.">
        <Variants initial={config.videoSettings?.videoQualityVariants ?? []} />
      </Section>
      <Section title="Latency">
        <Latency level={config.videoSettings?.latencyLevel ?? 2} />
      </Section>
      {serverWide && (
        <Section title="Encoder" description="auto picks the best encoder this machine has (hardware first), falling back to software.">
          <Encoder current={config.videoCodec} supported={config.supportedCodecs ?? []} />
        </Section>
      )}
      {serverWide && (
        <Section title="ffmpeg">
          <ConfigField
            name="ffmpegpath"
            label="ffmpeg path"
            value={config.ffmpegPath ?? ''}
            id="ffmpeg-path-input"
            placeholder="/usr/bin/ffmpeg"
            help={<span id="ffmpeg-path-note">castd transcodes with libav inside its own worker process; this path is accepted for compatibility with Owncast and is not used.</span>}
          />
        </Section>
      )}
    </>
  );
}
