/** Small URL helpers shared by the viewer and the embeds. */

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

/** Whether a loaded media playlist is LL-HLS (it lists parts, or the server holds playlist reloads). */
export function isLowLatency(details: { partList?: unknown[] | null; canBlockReload?: boolean }): boolean {
  return (details.partList?.length ?? 0) > 0 || details.canBlockReload === true;
}
