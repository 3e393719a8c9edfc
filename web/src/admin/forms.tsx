/**
 * Admin form building blocks. Every save shows the server's `{success:false, message}` text in `.form-error`,
 * or a confirmation in `.form-success`.
 */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import { admin, type ServerConfig } from '../api';
import { parseList } from '../lib/format';

// ---------- server config context ----------

interface ConfigCtx {
  config: ServerConfig | null;
  error: string | null;
  reload: () => Promise<void>;
}

export const ServerConfigContext = createContext<ConfigCtx>({ config: null, error: null, reload: async () => undefined });
export const useServerConfig = () => useContext(ServerConfigContext);

export function useServerConfigLoader(): ConfigCtx {
  const [config, setConfig] = useState<ServerConfig | null>(null);
  const [error, setError] = useState<string | null>(null);
  const reload = useCallback(async () => {
    try {
      setConfig(await admin.serverConfig());
      setError(null);
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { config, error, reload };
}

// ---------- save state ----------

export interface SaveState {
  kind: 'idle' | 'saving' | 'ok' | 'error';
  message?: string;
}

export function useSave(): [SaveState, (fn: () => Promise<unknown>, okMessage?: string) => Promise<boolean>] {
  const [state, setState] = useState<SaveState>({ kind: 'idle' });
  useEffect(() => {
    if (state.kind !== 'ok') return;
    const t = setTimeout(() => setState({ kind: 'idle' }), 4000);
    return () => clearTimeout(t);
  }, [state]);
  const run = useCallback(async (fn: () => Promise<unknown>, okMessage = 'Saved.') => {
    setState({ kind: 'saving' });
    try {
      await fn();
      setState({ kind: 'ok', message: okMessage });
      return true;
    } catch (e) {
      setState({ kind: 'error', message: (e as Error).message || 'Request failed' });
      return false;
    }
  }, []);
  return [state, run];
}

export function FormStatus({ state }: { state: SaveState }) {
  if (state.kind === 'error')
    return (
      <div class="form-error" role="alert">
        {state.message}
      </div>
    );
  if (state.kind === 'ok')
    return (
      <div class="form-success" role="status">
        {state.message}
      </div>
    );
  return null;
}

// ---------- layout ----------

export function Section({ title, children, description }: { title: string; description?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section class="admin-section">
      <h2>{title}</h2>
      {description && <p class="muted">{description}</p>}
      {children}
    </section>
  );
}

export function LoadError({ error }: { error: string | null }) {
  return error ? <div class="form-error">{error}</div> : <p class="muted">Loading…</p>;
}

// ---------- single-setting fields ----------

type Kind = 'text' | 'textarea' | 'code' | 'number' | 'list' | 'password' | 'url';

interface FieldProps {
  /** Setter name: POST /api/admin/config/<name>. */
  name: string;
  label: string;
  value: string | number | string[] | undefined;
  kind?: Kind;
  help?: ComponentChildren;
  id?: string;
  saveId?: string;
  placeholder?: string;
  /** Reload the server config after a successful save (default true). */
  reload?: boolean;
}

/** One input + Save button for one setting. */
export function ConfigField({ name, label, value, kind = 'text', help, id, saveId, placeholder, reload = true }: FieldProps) {
  const { reload: reloadConfig } = useServerConfig();
  const initial = Array.isArray(value) ? value.join(', ') : value === undefined || value === null ? '' : String(value);
  const [text, setText] = useState(initial);
  const [state, run] = useSave();
  const inputRef = useRef<HTMLInputElement & HTMLTextAreaElement>(null);
  useEffect(() => setText(initial), [initial]);
  const fieldId = id ?? `cfg-${name.replace(/\W+/g, '-')}`;

  const save = async (e: Event) => {
    e.preventDefault();
    // Read the element itself: its value is current even if a render is still pending.
    const current = inputRef.current?.value ?? text;
    let v: unknown = current;
    if (kind === 'number') {
      const n = Number(current);
      if (!Number.isFinite(n) || current.trim() === '') {
        await run(() => Promise.reject(new Error(`${label} must be a number`)));
        return;
      }
      v = n;
    } else if (kind === 'list') v = parseList(current);
    const ok = await run(() => admin.setConfig(name, v));
    if (ok && reload) void reloadConfig();
  };

  const onInput = (e: Event) => setText((e.currentTarget as HTMLInputElement).value);
  return (
    <form class="config-field" onSubmit={save} data-setting={name}>
      <label for={fieldId}>{label}</label>
      <div class={kind === 'textarea' || kind === 'code' ? 'field-col' : 'field-row'}>
        {kind === 'textarea' || kind === 'code' ? (
          <textarea ref={inputRef} id={fieldId} class={kind === 'code' ? 'code' : ''} value={text} placeholder={placeholder} onInput={onInput} spellcheck={kind !== 'code'} />
        ) : (
          <input
            ref={inputRef}
            id={fieldId}
            type={(kind === 'number' ? 'number' : kind === 'password' ? 'password' : kind === 'url' ? 'url' : 'text') as 'text' /* preact 11 narrows props per input type */}
            value={text}
            placeholder={placeholder}
            onInput={onInput}
          />
        )}
        <div class="field-actions">
          <button type="submit" class="primary" id={saveId} disabled={state.kind === 'saving'}>
            Save
          </button>
        </div>
      </div>
      {help && <div class="help">{help}</div>}
      <FormStatus state={state} />
    </form>
  );
}

/** A switch that saves as soon as it changes. */
export function ConfigToggle({ name, label, value, help, id }: { name: string; label: string; value: boolean | undefined; help?: ComponentChildren; id?: string }) {
  const { reload } = useServerConfig();
  const [checked, setChecked] = useState(Boolean(value));
  const [state, run] = useSave();
  useEffect(() => setChecked(Boolean(value)), [value]);
  const change = async (next: boolean) => {
    setChecked(next);
    const ok = await run(() => admin.setConfig(name, next), next ? 'Enabled.' : 'Disabled.');
    if (ok) void reload();
    else setChecked(!next);
  };
  return (
    <div class="config-field toggle-field" data-setting={name}>
      <label class="toggle">
        <input type="checkbox" id={id ?? `cfg-${name.replace(/\W+/g, '-')}`} checked={checked} disabled={state.kind === 'saving'} onChange={(e) => void change(e.currentTarget.checked)} />
        <span>{label}</span>
      </label>
      {help && <div class="help">{help}</div>}
      <FormStatus state={state} />
    </div>
  );
}

/** Read a file as a base64 data URL. */
export function readDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error('could not read the file'));
    reader.readAsDataURL(file);
  });
}

/** A random URL-safe key. */
export function randomKey(bytes = 18): string {
  const a = new Uint8Array(bytes);
  crypto.getRandomValues(a);
  return btoa(String.fromCharCode(...a))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}
