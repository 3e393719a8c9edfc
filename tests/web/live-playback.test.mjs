// Live playback: ffmpeg publishes a test pattern over RTMP, castd transcodes it to HLS, and the viewer page plays it
// through hls.js (Media Source Extensions) until currentTime passes 3 s. Screenshot: viewer-live.png.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, publishTestStream, waitFor } from './castd.mjs';

const STREAM_KEY = 'e2e-test-key-1';
let castd;
let browser;
let publisher;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
});

test('the viewer page plays a live ffmpeg publish through hls.js', { timeout: 150_000 }, async (t) => {
  assert.ok(
    castd.rtmpPort,
    'castd logged no "rtmp server listening on rtmp://127.0.0.1:PORT" line: this build has no RTMP ingest',
  );

  // Can this chromium decode H.264 + AAC in MSE at all? If not, say so rather than pretend.
  const probeCtx = await newContext(browser);
  const probe = await probeCtx.newPage();
  await probe.goto('about:blank');
  const support = await probe.evaluate(() => ({
    mse: typeof MediaSource !== 'undefined',
    avc: typeof MediaSource !== 'undefined' && MediaSource.isTypeSupported('video/mp4; codecs="avc1.42E01E"'),
    aac: typeof MediaSource !== 'undefined' && MediaSource.isTypeSupported('audio/mp4; codecs="mp4a.40.2"'),
  }));
  await probeCtx.close();
  assert.deepEqual(support, { mse: true, avc: true, aac: true }, 'this chromium build cannot play H.264/AAC through MSE');

  await castd.setConfig('video/streamoutputvariants', [
    {
      name: '360p',
      videoPassthrough: false,
      audioPassthrough: true,
      videoBitrate: 800,
      scaledWidth: 640,
      scaledHeight: 360,
      framerate: 30,
      cpuUsageLevel: 0,
    },
  ]);
  await castd.setConfig('video/streamlatencylevel', 1);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);
  await castd.setConfig('streamtitle', 'Test pattern');

  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 90 });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;

  try {
    await waitFor(async () => (await castd.getJson('/api/status')).online === true, {
      timeoutMs: 30_000,
      message: '/api/status to report online',
    });
    await waitFor(async () => (await castd.fetch('/hls/stream.m3u8')).status === 200, {
      timeoutMs: 30_000,
      message: '/hls/stream.m3u8 to exist',
    });
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const hlsRequests = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname.startsWith('/hls/')) hlsRequests.push(new URL(r.url()).pathname);
  });
  await page.goto(castd.url('/'));
  // The page polls /api/status; it was online before the page loaded, so the player appears at once.
  await page.locator('#live-badge').waitFor({ timeout: 15_000 });
  const video = page.locator('video#player');
  await video.waitFor({ timeout: 15_000 });

  const state = () =>
    video.evaluate((v) => ({
      currentTime: v.currentTime,
      paused: v.paused,
      readyState: v.readyState,
      error: v.error ? `${v.error.code} ${v.error.message}` : null,
      src: v.currentSrc || v.src,
      width: v.videoWidth,
      height: v.videoHeight,
    }));
  // castd's default autoplay setting is "off": the viewer presses the play button, as a person would.
  const playButton = page.locator('#play-button');
  let last;
  let startedAt = null;
  try {
    await waitFor(
      async () => {
        if (await playButton.isVisible()) await playButton.click({ timeout: 2000 });
        last = await state();
        if (startedAt === null && !last.paused && last.currentTime > 0) startedAt = last.currentTime;
        // Past 3 s, and at least 3 s of real playback (a live stream may start at a later position).
        return startedAt !== null && last.currentTime > Math.max(3, startedAt + 3);
      },
      { timeoutMs: 60_000, intervalMs: 500, message: 'video#player to play for 3 s (currentTime > 3)' },
    );
  } catch (e) {
    const overlay = await page.locator('.player-overlay').allTextContents();
    assert.fail(
      `${e.message}; started at: ${startedAt}; video: ${JSON.stringify(last)}; overlay: ${overlay.join(' | ') || 'none'}; ` +
        `hls requests: ${hlsRequests.slice(0, 10).join(', ') || 'none'}; page errors: ${errors.join(' | ') || 'none'}${diag()}`,
    );
  }

  assert.equal(last.paused, false, 'the video is playing');
  assert.equal(last.error, null, 'no media error');
  assert.match(last.src, /^blob:/, 'played through Media Source Extensions (hls.js), not a native HLS src');
  assert.deepEqual([last.width, last.height], [640, 360], 'the decoded picture has the variant size');
  assert.ok(hlsRequests.includes('/hls/stream.m3u8'), 'hls.js loaded the master playlist');
  assert.ok(hlsRequests.some((p) => /\.(ts|m4s|mp4)$/.test(p)), `hls.js loaded media segments (${hlsRequests.join(', ')})`);
  t.diagnostic(`played from ${startedAt.toFixed(1)} s to ${last.currentTime.toFixed(1)} s; ${hlsRequests.length} /hls requests`);
  assert.equal((await page.locator('#stream-title').textContent()).trim(), 'Test pattern');

  await page.screenshot({ path: screenshotPath('viewer-live.png') });
  await ctx.close();
  await publisher.stop();
});
