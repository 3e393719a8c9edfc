// Low-latency HLS in the browser: castd at latency level 0 serves LL-HLS (CMAF parts, blocking reload); the viewer
// page plays it with hls.js in low-latency mode, and the glass-to-glass latency (see latency.mjs) stays under 3 s.
// Then, on the same playing page: the back buffer is trimmed only while no segment is partly appended (the boundary
// stalls found after issue 44).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';
import { firstSegmentDate, publishClocked, sampleLatency, startPlayback, summary } from './latency.mjs';

const STREAM_KEY = 'e2e-llhls-key-1';
let castd;
let browser;
let publisher;
let ctx;
let page;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  await ctx?.close();
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
});

test('the viewer page plays LL-HLS with hls.js in low-latency mode, under 3 s behind live', { timeout: 150_000 }, async (t) => {
  assert.ok(castd.rtmpPort, 'this build has no RTMP ingest');
  await castd.setConfig('video/streamoutputvariants', [
    { name: '360p', audioPassthrough: true, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await castd.setConfig('video/streamlatencylevel', 0);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);

  publisher = publishClocked(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 150 });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;
  let firstPdt;
  try {
    firstPdt = await firstSegmentDate(castd);
    await waitFor(async () => (await castd.fetch('/hls/stream.m3u8')).status === 200, {
      timeoutMs: 30_000,
      message: '/hls/stream.m3u8 to exist',
    });
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }

  ctx = await newContext(browser);
  page = await ctx.newPage();
  const errors = collectErrors(page);
  const requests = [];
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/hls/')) requests.push(u.pathname + u.search);
  });
  await page.goto(castd.url('/'));
  try {
    await startPlayback(page);
  } catch (e) {
    assert.fail(`${e.message}; requests: ${requests.slice(0, 12).join(', ')}; page errors: ${errors.join(' | ') || 'none'}${diag()}`);
  }
  await recordBackBufferFlushes(page);
  // Let hls.js settle on its target latency, then measure.
  await new Promise((r) => setTimeout(r, 4000));
  const samples = await sampleLatency(page, { sourceOffset: publisher.sourceOffset, firstPdt, seconds: 10 });
  const s = summary(samples);
  t.diagnostic(
    `${s.n} samples: glass-to-glass p50 ${s.glass.p50.toFixed(2)} s p95 ${s.glass.p95.toFixed(2)} s; ` +
      `PDT p50 ${s.pdt.p50.toFixed(2)} s; hls.latency p50 ${s.hlsjs.p50.toFixed(2)} s`,
  );

  assert.ok(s.n >= 10, `enough samples while playing (${s.n})`);
  assert.equal(samples.at(-1).lowLatencyMode, true, 'hls.js runs in low-latency mode');
  assert.equal(samples.at(-1).catchUpRate, 1.5, 'the page set the LL catch-up rate (it saw an LL playlist)');
  assert.ok(requests.some((p) => /_HLS_msn=\d+&_HLS_part=\d+/.test(p)), `blocking playlist reloads: ${requests.slice(0, 12).join(', ')}`);
  assert.ok(requests.some((p) => /\/part-[^/?]+\.m4s(\?|$)/.test(p)), 'hls.js loaded parts');
  assert.ok(s.glass.p95 < 3, `glass-to-glass latency p95 ${s.glass.p95.toFixed(2)} s must be under 3 s`);
  // The PDT-based figure cross-checks the source clock: it cannot be larger.
  assert.ok(s.pdt.p50 <= s.glass.p50 + 0.1, `PDT latency ${s.pdt.p50} vs glass ${s.glass.p50}`);
  assert.deepEqual(errors, [], 'no page errors');
});

/**
 * From now on, each back-buffer flush the player asks for (hls.js's BUFFER_FLUSHING) is recorded with the segments
 * of the playlist's part list that were partly appended then: some parts loaded and another part of that segment
 * listed but not loaded, or the segment not finished yet.
 */
async function recordBackBufferFlushes(p) {
  await p.evaluate(() => {
    const hls = window.castdHls;
    window.e2eFlushes = [];
    hls.on('hlsBufferFlushing', (_e, data) => {
      const details = hls.levels[Math.max(hls.loadLevel, 0)]?.details;
      const parts = details?.partList || [];
      const finished = new Set((details?.fragments || []).map((f) => f.sn));
      const partial = [...new Set(parts.map((part) => part.fragment.sn))].filter((sn) => {
        const mine = parts.filter((part) => part.fragment.sn === sn);
        return mine.some((part) => part.loaded) && (!finished.has(sn) || mine.some((part) => !part.loaded));
      });
      window.e2eFlushes.push({
        end: data.endOffset,
        at: document.querySelector('video#player').currentTime,
        newest: parts.slice(-6).map((part) => `${part.fragment.sn}/${part.index}${part.loaded ? 'L' : ''}`).join(' '),
        partial,
      });
    });
  });
}

// The stalls at segment boundaries found after issue 44: hls.js trims the back buffer as the playhead enters a
// segment, which a few parts behind live is in the middle of the newest segment. A flush that completes while one of
// that segment's parts is between load and append makes hls.js forget the parts it already appended; at the
// segment's end it then never asks for the next segment's first part, and playback stalls. The page trims instead
// right after the newest part has been appended, when that part ends its segment. Without that, every flush here
// finds the newest segment partly appended. The first flush comes once 30 s are buffered behind the playhead; the
// test waits for two.
test('the back buffer of an LL-HLS stream is trimmed only while no segment is partly appended', { timeout: 120_000 }, async () => {
  assert.ok(page, 'the first test left a playing page');
  let flushes = [];
  await waitFor(
    async () => {
      flushes = await page.evaluate(() => window.e2eFlushes);
      return flushes.length >= 2;
    },
    { timeoutMs: 90_000, message: 'two back-buffer flushes (30 s behind the playhead)' },
  );
  const bad = flushes.filter((f) => f.partial.length > 0);
  assert.deepEqual(bad, [], `flushes while a segment was partly appended, of ${JSON.stringify(flushes)}`);
  assert.ok(flushes.every((f) => f.end > 0 && f.end <= f.at - 30 + 1e-6), `30 s kept behind the playhead: ${JSON.stringify(flushes)}`);
});
