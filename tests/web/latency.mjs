// Live latency as a viewer sees it, measured in the viewer page (hls.js) while ffmpeg publishes in real time.
// Shared by tests/web/llhls.test.mjs and bench/latency/run.mjs.
//
// Three figures per sample:
// - glass: wall clock now − the wall-clock time at which ffmpeg produced the frame on screen. ffmpeg runs with -re
//   from `sourceStart` (ms, taken just before it was spawned), so frame t of the source was made at
//   sourceStart + t; the frame on screen is t = playingDate − PDT(first segment) (PROGRAM-DATE-TIME is the
//   transcoder's wall clock of each segment's first frame). ffmpeg's start-up delay makes this an overestimate.
// - pdt: now − hls.playingDate (the PROGRAM-DATE-TIME of the position on screen; misses the ingest path).
// - hlsjs: hls.latency (hls.js's own distance to the live edge of the playlist).
import { waitFor } from './castd.mjs';

/** The PROGRAM-DATE-TIME (ms) of media sequence 0 of variant 0, once it is listed. */
export async function firstSegmentDate(castd, { timeoutMs = 30_000 } = {}) {
  let date = null;
  await waitFor(
    async () => {
      const res = await castd.fetch('/hls/0/stream.m3u8');
      if (res.status !== 200) return false;
      const text = await res.text();
      if (!/#EXT-X-MEDIA-SEQUENCE:0\b/.test(text)) throw new Error(`segment 0 left the playlist before it was read:\n${text}`);
      const m = text.match(/#EXT-X-PROGRAM-DATE-TIME:(\S+)/);
      if (!m) return false;
      date = Date.parse(m[1]);
      return Number.isFinite(date);
    },
    { timeoutMs, intervalMs: 100, message: 'the first PROGRAM-DATE-TIME in /hls/0/stream.m3u8' },
  );
  return date;
}

/** Press play if asked, and wait until the page's hls.js plays. */
export async function startPlayback(page, { timeoutMs = 60_000 } = {}) {
  const playButton = page.locator('#play-button');
  await waitFor(
    async () => {
      if (await playButton.isVisible()) await playButton.click({ timeout: 2000 }).catch(() => undefined);
      return page.evaluate(() => {
        const v = document.querySelector('video#player');
        return Boolean(window.castdHls && v && !v.paused && v.currentTime > 0 && window.castdHls.playingDate);
      });
    },
    { timeoutMs, intervalMs: 250, message: 'the viewer page to play through hls.js' },
  );
}

/** Sample the latency every `intervalMs` for `seconds`. */
export async function sampleLatency(page, { sourceStart, firstPdt, seconds, intervalMs = 500 }) {
  const samples = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const s = await page.evaluate(() => {
      const hls = window.castdHls;
      const v = document.querySelector('video#player');
      const d = hls?.playingDate;
      return {
        now: Date.now(),
        playing: d ? d.getTime() : null,
        hlsjs: hls ? hls.latency : null,
        lowLatencyMode: hls ? hls.config.lowLatencyMode : null,
        catchUpRate: hls ? hls.config.maxLiveSyncPlaybackRate : null,
        paused: v ? v.paused : true,
        rate: v ? v.playbackRate : 1,
      };
    });
    if (s.playing !== null && !s.paused) {
      const frameMadeAt = sourceStart + (s.playing - firstPdt);
      samples.push({ ...s, glass: (s.now - frameMadeAt) / 1000, pdt: (s.now - s.playing) / 1000 });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return samples;
}

/** The q-quantile (0..1) of numbers (nearest rank). */
export function quantile(values, q) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil(q * v.length) - 1))];
}

/** p50/p95 of each figure. */
export function summary(samples) {
  const pick = (k) => samples.map((s) => s[k]);
  const row = (k) => ({ p50: quantile(pick(k), 0.5), p95: quantile(pick(k), 0.95) });
  return { n: samples.length, glass: row('glass'), pdt: row('pdt'), hlsjs: row('hlsjs') };
}
