/** Simulcast targets: the common platforms' ingest URLs and how a target's state reads. */

export interface SimulcastPreset {
  id: string;
  label: string;
  url: string;
  /** Where the streamer finds the key. */
  keyHelp: string;
}

/** Ingest URLs of the common platforms (the user pastes their key). */
export const SIMULCAST_PRESETS: SimulcastPreset[] = [
  { id: 'youtube', label: 'YouTube', url: 'rtmps://a.rtmps.youtube.com:443/live2', keyHelp: 'YouTube Studio → Go live → Stream key' },
  { id: 'twitch', label: 'Twitch', url: 'rtmp://live.twitch.tv/app', keyHelp: 'Twitch Creator Dashboard → Settings → Stream → Primary Stream key' },
  { id: 'kick', label: 'Kick', url: 'rtmps://fa723fc1b171.global-contribute.live-video.net/app', keyHelp: 'Kick Dashboard → Settings → Stream URL & Key (use the URL shown there if it differs)' },
  { id: 'facebook', label: 'Facebook', url: 'rtmps://live-api-s.facebook.com:443/rtmp/', keyHelp: 'Facebook Live Producer → Streaming software → Stream key' },
  { id: 'castd', label: 'castd / Owncast', url: 'rtmp://example.com:1935/live', keyHelp: "The other server's stream key" },
  { id: 'custom', label: 'Other (RTMP/RTMPS)', url: 'rtmp://', keyHelp: '' },
];

/** The preset a URL belongs to (by host), or `custom`. */
export function presetFor(url: string): SimulcastPreset {
  const host = (u: string) => u.replace(/^[a-z]+:\/\//i, '').split(/[/:?]/)[0].toLowerCase();
  const h = host(url);
  return SIMULCAST_PRESETS.find((p) => p.id !== 'custom' && p.id !== 'castd' && host(p.url) === h) ?? SIMULCAST_PRESETS[SIMULCAST_PRESETS.length - 1];
}

/** Whether a URL is one castd can forward to (`rtmp://host/app`, `rtmps://...`, `srt://host:port`). */
export function validTargetUrl(url: string): boolean {
  return /^rtmps?:\/\/[A-Za-z0-9]+([.-][A-Za-z0-9]+)*(:[0-9]{1,5})?(\/[A-Za-z0-9._~-]+)+\/?$/.test(url) || /^srt:\/\/[A-Za-z0-9]+([.-][A-Za-z0-9]+)*:[0-9]{1,5}$/.test(url);
}

export type SimulcastState = 'off' | 'connecting' | 'live' | 'retrying' | 'failed';

/** A state's label and badge class. */
export function stateBadge(state: SimulcastState): { label: string; tone: 'ok' | 'warn' | 'bad' | 'muted' } {
  switch (state) {
    case 'live':
      return { label: 'Live', tone: 'ok' };
    case 'connecting':
      return { label: 'Connecting', tone: 'warn' };
    case 'retrying':
      return { label: 'Retrying', tone: 'warn' };
    case 'failed':
      return { label: 'Failed', tone: 'bad' };
    default:
      return { label: 'Off', tone: 'muted' };
  }
}

/** `1234` kbps as `1.2 Mbps`, under 1000 as `850 kbps`. */
export function formatKbps(kbps: number): string {
  if (!kbps) return '—';
  return kbps >= 1000 ? `${(kbps / 1000).toFixed(1)} Mbps` : `${kbps} kbps`;
}
