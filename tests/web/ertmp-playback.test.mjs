// Enhanced RTMP in the browser: an HEVC source (the Rust test publisher in tests/ertmp.rs, run through cargo, since
// Debian's ffmpeg 5.1 cannot send Enhanced RTMP) is transcoded to the H.264 ladder, and castd also lists the source
// as an `hvc1` fMP4 rendition. Chromium plays the stream through hls.js: it must play the H.264 rendition (hls.js
// leaves out a rendition whose CODECS this browser cannot decode), not fail on the HEVC one.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd, REPO_ROOT, terminate, waitFor } from './castd.mjs';

const STREAM_KEY = 'e2e-ertmp-key-1';
let castd;
let browser;
let publisher;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  if (publisher) await terminate(publisher, 5000);
  await browser?.close();
  await castd?.stop();
});

test('Chromium plays the H.264 ladder of an HEVC source', { timeout: 240_000 }, async (t) => {
  await castd.setConfig('video/streamoutputvariants', [
    { name: '360p', videoPassthrough: false, audioPassthrough: true, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await castd.setConfig('video/streamlatencylevel', 1);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);

  const err = [];
  publisher = spawn('cargo', ['test', '--quiet', '--test', 'ertmp', 'publish_hevc_for_the_browser_test', '--', '--ignored', '--exact'], {
    cwd: REPO_ROOT,
    env: { ...process.env, ERTMP_PORT: String(castd.rtmpPort), ERTMP_KEY: STREAM_KEY, ERTMP_SECS: '120' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  publisher.stdout.on('data', (d) => err.push(String(d)));
  publisher.stderr.on('data', (d) => err.push(String(d)));
  const diag = () => `\npublisher: ${err.join('').slice(-2000) || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;

  let master = '';
  try {
    await waitFor(
      async () => {
        const r = await castd.fetch('/hls/stream.m3u8');
        master = r.status === 200 ? await r.text() : '';
        return master.includes('hvc1.');
      },
      { timeoutMs: 150_000, message: 'a master playlist with the H.264 rung and the hvc1 rung' },
    );
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }
  t.diagnostic(master.replace(/\n/g, ' | '));
  const renditions = [...master.matchAll(/CODECS="([^"]+)"[^\n]*\n(\d+)\//g)].map((m) => ({ codecs: m[1], n: m[2] }));
  const hevc = renditions.find((r) => r.codecs.startsWith('hvc1.'));
  assert.ok(hevc && renditions.some((r) => r.codecs.startsWith('avc1.')), `both renditions listed: ${master}`);

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const hlsRequests = [];
  page.on('request', (r) => {
    const p = new URL(r.url()).pathname;
    if (p.startsWith('/hls/')) hlsRequests.push(p);
  });
  await page.goto('about:blank');
  const hevcInMse = await page.evaluate(
    (c) => typeof MediaSource !== 'undefined' && MediaSource.isTypeSupported(`video/mp4; codecs="${c}"`),
    hevc.codecs,
  );
  t.diagnostic(`this Chromium decodes ${hevc.codecs} in MSE: ${hevcInMse}`);
  await page.goto(castd.url('/'));
  await page.locator('#live-badge').waitFor({ timeout: 15_000 });
  const video = page.locator('video#player');
  await video.waitFor({ timeout: 15_000 });
  const state = () =>
    video.evaluate((v) => ({ currentTime: v.currentTime, paused: v.paused, error: v.error ? `${v.error.code} ${v.error.message}` : null, width: v.videoWidth, height: v.videoHeight }));
  const playButton = page.locator('#play-button');
  let last;
  let startedAt = null;
  try {
    await waitFor(
      async () => {
        if (await playButton.isVisible()) await playButton.click({ timeout: 2000 });
        last = await state();
        if (startedAt === null && !last.paused && last.currentTime > 0) startedAt = last.currentTime;
        return startedAt !== null && last.currentTime > startedAt + 3;
      },
      { timeoutMs: 60_000, intervalMs: 500, message: 'video#player to play for 3 s' },
    );
  } catch (e) {
    assert.fail(`${e.message}; video: ${JSON.stringify(last)}; hls requests: ${hlsRequests.slice(0, 15).join(', ')}; page errors: ${errors.join(' | ') || 'none'}${diag()}`);
  }
  assert.equal(last.error, null, 'no media error');
  const segmentsOf = (n) => hlsRequests.filter((p) => p.startsWith(`/hls/${n}/`) && /\.(ts|m4s|mp4)$/.test(p));
  const h264 = renditions.find((r) => r.codecs.startsWith('avc1.'));
  assert.ok(segmentsOf(h264.n).length > 0, `played H.264 segments (${hlsRequests.join(', ')})`);
  if (!hevcInMse) {
    assert.equal(segmentsOf(hevc.n).length, 0, `no HEVC segment fetched by a browser that cannot decode it (${hlsRequests.join(', ')})`);
    assert.deepEqual([last.width, last.height], [640, 360], 'the decoded picture is the H.264 rung');
  }
  await ctx.close();
});
