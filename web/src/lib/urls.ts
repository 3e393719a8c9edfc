/** Small URL helpers shared by the viewer and the embeds. */

/**
 * The chat websocket URL. `override` is the admin's `socketHostOverride` (e.g. `wss://chat.example.com` or
 * `https://chat.example.com`); without it the socket goes to this page's host.
 */
export function chatSocketUrl(loc: { protocol: string; host: string }, override: string | undefined, accessToken: string): string {
  let base: string;
  const o = (override ?? '').trim().replace(/\/+$/, '');
  if (o) {
    if (/^wss?:\/\//i.test(o)) base = o;
    else if (/^https?:\/\//i.test(o)) base = o.replace(/^http/i, 'ws');
    else base = `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${o}`;
  } else {
    base = `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${loc.host}`;
  }
  return `${base}/ws?accessToken=${encodeURIComponent(accessToken)}`;
}

/** CSS custom property name for an appearance variable key (`--` is added when missing). */
export function cssVarName(key: string): string | null {
  const k = key.trim();
  if (!/^(--)?[A-Za-z0-9_-]+$/.test(k)) return null;
  return k.startsWith('--') ? k : `--${k}`;
}

/**
 * Playback engine choice. hls.js is used wherever Media Source Extensions exist, because quality selection and CMCD
 * reporting need it; the browser's native HLS (Safari on older iOS) is the fallback.
 */
export function choosePlaybackEngine(nativeHls: boolean, mseSupported: boolean): 'hlsjs' | 'native' | 'none' {
  if (mseSupported) return 'hlsjs';
  if (nativeHls) return 'native';
  return 'none';
}

/** Add query parameters to a path. */
export function withQuery(path: string, params: Record<string, string | number | boolean | undefined>): string {
  const q = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  return q ? `${path}${path.includes('?') ? '&' : '?'}${q}` : path;
}
