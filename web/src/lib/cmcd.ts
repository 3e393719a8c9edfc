/**
 * CMCD (CTA-5004) reports posted by the player to `/api/metrics/cmcd`.
 * Keys: v (version), sid (session), sta (player state), mtp (measured throughput, kbps, rounded to 100),
 * ltc (live latency, ms), bs (buffer starvation since the last report), sn (sequence number), ts (epoch ms).
 */

export type CmcdState = 's' | 'p' | 'k' | 'r' | 'a' | 'w' | 'e' | 'f' | 'q' | 'd';

export interface CmcdReport {
  v: number;
  sid: string;
  sta: CmcdState;
  ts: number;
  sn: number;
  mtp?: number;
  ltc?: number;
  bs?: boolean;
}

export interface PlaybackSample {
  state: CmcdState;
  /** Bandwidth estimate in bits per second (hls.js `bandwidthEstimate`). */
  throughputBps?: number;
  /** Seconds behind the live edge (hls.js `latency`). */
  latencySeconds?: number;
  /** Whether playback stalled for lack of data since the previous report. */
  starved: boolean;
}

export const CMCD_VERSION = 2;

export function buildCmcdReport(sid: string, sn: number, sample: PlaybackSample, now: number = Date.now()): CmcdReport {
  const report: CmcdReport = { v: CMCD_VERSION, sid, sta: sample.state, ts: Math.round(now), sn };
  if (sample.throughputBps !== undefined && Number.isFinite(sample.throughputBps) && sample.throughputBps > 0) {
    report.mtp = Math.max(100, Math.round(sample.throughputBps / 1000 / 100) * 100);
  }
  if (sample.latencySeconds !== undefined && Number.isFinite(sample.latencySeconds) && sample.latencySeconds >= 0) {
    report.ltc = Math.round(sample.latencySeconds * 1000);
  }
  if (sample.starved) report.bs = true;
  return report;
}

/** Maps an HTML media element's state to a CMCD `sta` token. */
export function videoState(v: {
  ended: boolean;
  paused: boolean;
  seeking: boolean;
  readyState: number;
  error: unknown;
  currentTime: number;
}): CmcdState {
  if (v.error) return 'f';
  if (v.ended) return 'e';
  if (v.seeking) return 'k';
  if (v.paused) return v.currentTime > 0 ? 'a' : 's';
  // HAVE_FUTURE_DATA = 3: below that a playing element is waiting for data.
  if (v.readyState < 3) return v.currentTime > 0 ? 'r' : 's';
  return 'p';
}

/** A random player session id (CMCD `sid`). */
export function newSessionId(): string {
  if (typeof crypto !== 'undefined' && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  return 'xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx'.replace(/[xy]/g, (c) => {
    const r = (Math.random() * 16) | 0;
    return (c === 'x' ? r : (r & 0x3) | 0x8).toString(16);
  });
}
