/** Display formatting shared by the viewer and the admin. */

export function formatBitrate(kbps: number | undefined | null): string {
  if (kbps === undefined || kbps === null || !Number.isFinite(kbps)) return '–';
  return kbps >= 1000 ? `${(kbps / 1000).toFixed(kbps % 1000 === 0 ? 0 : 1)} Mbps` : `${Math.round(kbps)} kbps`;
}

/** Device memory: "512 MiB" below 1 GiB, else GiB with one decimal ("140.4 GiB"); '–' when unknown. */
export function formatMiB(mib: number | undefined | null): string {
  if (mib === undefined || mib === null || !Number.isFinite(mib)) return '–';
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`;
}

export function formatTime(iso: string | undefined | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

export function formatDateTime(iso: string | undefined | null): string {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return '–';
  return d.toLocaleString();
}

/** "1h 02m" style duration since a timestamp. */
export function formatSince(iso: string | undefined | null, now: number = Date.now()): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '–';
  let s = Math.max(0, Math.floor((now - t) / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (h) return `${h}h ${String(m).padStart(2, '0')}m`;
  if (m) return `${m}m ${String(s).padStart(2, '0')}s`;
  return `${s}s`;
}

/** Split a comma- or newline-separated list, trimming blanks. */
export function parseList(text: string): string[] {
  return text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A quality level label, e.g. "720p · 2.5 Mbps". */
export function levelLabel(level: { height?: number; width?: number; bitrate?: number; name?: string }): string {
  const parts: string[] = [];
  if (level.height) parts.push(`${level.height}p`);
  else if (level.name) parts.push(level.name);
  if (level.bitrate) parts.push(formatBitrate(Math.round(level.bitrate / 1000)));
  return parts.join(' · ') || 'Variant';
}
