/** The addresses broadcasting software (OBS, ffmpeg, GStreamer) publishes to. */
export interface PublishUrls {
  /** OBS "Server" for RTMP; the stream key goes in its own field. */
  rtmp: string;
  /** The whole SRT URL, stream key (and passphrase) included; null when SRT is off (port 0). */
  srt: string | null;
}

/** `host` as it goes in a URL (IPv6 addresses in brackets). */
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * The RTMP server URL and the SRT URL for a server reached at `host`: SRT carries the stream key in
 * `streamid` (`live/KEY`) and the passphrase, when one is set, as `passphrase=`.
 */
export function publishUrls(host: string, rtmpPort: number, srtPort: number, key: string, passphrase = ''): PublishUrls {
  const h = urlHost(host || 'localhost');
  const rtmp = `rtmp://${h}:${rtmpPort}/live`;
  if (!srtPort) return { rtmp, srt: null };
  const pass = passphrase ? `&passphrase=${encodeURIComponent(passphrase)}` : '';
  return { rtmp, srt: `srt://${h}:${srtPort}?streamid=live/${key}${pass}` };
}

/**
 * The WHIP endpoint of a server whose web pages are at `origin` (`https://live.example.com`): OBS 30+ takes it as the
 * Server of its WHIP service, with a stream key as the Bearer Token.
 */
export function whipUrl(origin: string): string {
  return `${origin.replace(/\/+$/, '')}/whip`;
}
