import { useEffect, useState } from 'preact/hooks';
import { admin, type StreamKey } from '../../api';
import { FormStatus, LoadError, Section, randomKey, useSave, useServerConfig } from '../forms';
import { StatusWarnings } from '../Warnings';

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
