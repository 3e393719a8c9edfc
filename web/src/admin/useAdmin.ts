import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { admin } from '../api';

export interface Polled<T> {
  data: T | null;
  error: string | null;
  reload: () => Promise<void>;
}

/**
 * Run `load` now, again whenever `deps` change, and every `intervalMs` while the page is visible (`null`: no timer).
 * A failed load keeps the last data and sets `error`; an answer that arrives after a newer load started is dropped.
 */
export function usePoll<T>(load: () => Promise<T>, intervalMs: number | null, deps: unknown[] = []): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const loadRef = useRef(load);
  loadRef.current = load;
  const seq = useRef(0);
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );

  const reload = useCallback(async () => {
    const n = ++seq.current;
    try {
      const next = await loadRef.current();
      if (!mounted.current || n !== seq.current) return;
      setData(next);
      setError(null);
    } catch (e) {
      if (!mounted.current || n !== seq.current) return;
      setError((e as Error).message || 'Request failed');
    }
  }, []);

  useEffect(() => {
    void reload();
  }, deps);

  useEffect(() => {
    if (!intervalMs) return;
    const t = setInterval(() => {
      if (typeof document === 'undefined' || document.visibilityState !== 'hidden') void reload();
    }, intervalMs);
    return () => clearInterval(t);
  }, [intervalMs, reload]);

  return { data, error, reload };
}

/** GET an admin endpoint, with a reload function; `params` changes refetch. */
export function useAdminGet<T>(path: string, params?: Record<string, string | number | boolean | undefined>): Polled<T> {
  return usePoll(() => admin.get<T>(path, params), null, [path, JSON.stringify(params ?? {})]);
}
