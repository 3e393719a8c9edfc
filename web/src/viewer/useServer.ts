/** Public config (loaded once, retried until it arrives), `/api/status` every 10 s, and `/api/ping` while watching. */
import { useEffect, useState } from 'preact/hooks';
import { api, type PublicConfig, type PublicStatus } from '../api';

export const POLL_MS = 10_000;

export function useConfig(): { config: PublicConfig | null; error: string | null } {
  const [config, setConfig] = useState<PublicConfig | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let live = true;
    const load = () =>
      api.config().then(
        (c) => live && setConfig(c),
        (e: Error) => {
          if (!live) return;
          setError(e.message);
          timer = setTimeout(load, 5000);
        },
      );
    void load();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, []);
  return { config, error };
}

export function useStatus(): PublicStatus | null {
  const [status, setStatus] = useState<PublicStatus | null>(null);
  useEffect(() => {
    let live = true;
    const load = () =>
      api.status().then(
        (s) => live && setStatus(s),
        () => undefined,
      );
    void load();
    const t = setInterval(load, POLL_MS);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, []);
  return status;
}

/** Marks this viewer active while the stream is online and the page is visible. */
export function usePing(online: boolean) {
  useEffect(() => {
    if (!online) return;
    const ping = () => {
      if (document.visibilityState !== 'hidden') api.ping().catch(() => undefined);
    };
    ping();
    const t = setInterval(ping, POLL_MS);
    return () => clearInterval(t);
  }, [online]);
}
