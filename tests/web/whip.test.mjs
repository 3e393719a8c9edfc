// WHIP ingest: headless chromium publishes its fake camera and microphone (H.264 + Opus) with RTCPeerConnection and a
// WHIP fetch (`POST /whip`, `Authorization: Bearer <stream key>`). castd goes live, every HLS variant probes with
// H.264 video and AAC audio (ffprobe) and decodes, `broadcaster.streamDetails` names the codecs and the picture size,
// and DELETE on the session's Location ends the stream; a second publish ends with the admin's disconnect.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { collectErrors, launchBrowser, newContext, publishWhip } from './browser.mjs';
import { Castd, sleep, waitFor } from './castd.mjs';

const run = promisify(execFile);
const STREAM_KEY = 'whip-e2e-key-1';
let castd;
let browser;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser({
    extraArgs: [
      '--use-fake-device-for-media-stream',
      '--use-fake-ui-for-media-stream',
      // castd listens on 127.0.0.1 in tests: let WebRTC use the loopback interface.
      '--allow-loopback-in-peer-connection',
    ],
  });
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

/** ffprobe's streams of a URL: [{codec_type, codec_name, height}]. */
async function probe(url) {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_type,codec_name,height', '-of', 'json', url], {
    timeout: 30_000,
  });
  return JSON.parse(stdout).streams ?? [];
}

test('chromium publishes over WHIP: live, HLS with AAC, stream details, DELETE ends it', { timeout: 180_000 }, async () => {
  await castd.setConfig('video/streamoutputvariants', [
    { name: 'source', videoPassthrough: true, audioPassthrough: true, videoBitrate: 0, framerate: 30 },
    { name: '240p', videoPassthrough: false, audioPassthrough: false, audioBitrate: 96, videoBitrate: 400, scaledWidth: 320, scaledHeight: 240, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'whip' }]);

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  // Same origin as the endpoint; getUserMedia needs a secure context, which 127.0.0.1 is.
  await page.goto(castd.url('/'));
  const posted = await publishWhip(page, STREAM_KEY);
  const publishedAt = Date.now();
  const diag = () => `\nbrowser errors: ${errors.join('; ') || '(none)'}\ncastd log (tail):\n${castd.log.slice(-30).join('\n')}`;
  assert.ok(!posted.error, posted.error);
  assert.equal(posted.status, 201, `POST /whip answered ${posted.status}: ${posted.answer}${diag()}`);
  assert.match(posted.location, /^\/whip\/[A-Za-z0-9]+$/);
  assert.equal(posted.contentType, 'application/sdp');
  assert.ok(posted.etag, 'an ETag');

  try {
    await waitFor(() => page.evaluate(() => window.whipPc.connectionState === 'connected'), {
      timeoutMs: 20_000,
      message: 'the peer connection to connect',
    });
    await waitFor(async () => (await castd.getJson('/api/status')).online === true, { timeoutMs: 30_000, message: 'online' });
    for (const n of [0, 1]) {
      await waitFor(
        async () => {
          const res = await castd.fetch(`/hls/${n}/stream.m3u8`);
          return res.status === 200 && ((await res.text()).match(/#EXTINF/g) ?? []).length >= 2;
        },
        { timeoutMs: 60_000, message: `two segments of variant ${n}` },
      );
    }
  } catch (e) {
    const lists = [];
    for (const path of ['/hls/stream.m3u8', '/hls/0/stream.m3u8', '/hls/1/stream.m3u8']) {
      const res = await castd.fetch(path);
      lists.push(`${path} ${res.status}: ${(await res.text()).slice(0, 400)}`);
    }
    assert.fail(`${e.message}\n${lists.join('\n')}${diag()}`);
  }

  for (const n of [0, 1]) {
    const url = castd.url(`/hls/${n}/stream.m3u8`);
    const streams = await probe(url);
    const kinds = Object.fromEntries(streams.map((s) => [s.codec_type, s]));
    assert.equal(kinds.video?.codec_name, 'h264', `variant ${n} video: ${JSON.stringify(streams)}`);
    assert.equal(kinds.audio?.codec_name, 'aac', `variant ${n} has AAC audio: ${JSON.stringify(streams)}`);
    assert.equal(kinds.video?.height, n === 0 ? 480 : 240, `variant ${n} height`);
    // The first seconds decode without errors.
    const { stderr } = await run('ffmpeg', ['-hide_banner', '-v', 'error', '-i', url, '-t', '3', '-f', 'null', '-'], { timeout: 60_000 });
    assert.equal(stderr.trim(), '', `variant ${n} decodes cleanly`);
  }

  const status = await castd.getJson('/api/admin/status', { admin: true });
  const details = status.broadcaster?.streamDetails ?? {};
  assert.equal(details.videoCodec, 'H.264', JSON.stringify(status.broadcaster));
  assert.equal(details.audioCodec, 'Opus');
  assert.equal(details.width, 640);
  assert.equal(details.height, 480);
  assert.ok(details.framerate > 5, `a measured framerate: ${details.framerate}`);
  assert.match(status.broadcaster.remoteAddr ?? '', /127\.0\.0\.1/);

  // Still live past the connect timeout (15 s: a session that never connects ends then; this one did).
  await sleep(Math.max(0, 20_000 - (Date.now() - publishedAt)));
  assert.equal((await castd.getJson('/api/status')).online, true, `still live 20 s after the publish${diag()}`);

  // DELETE on the resource ends the publish.
  const del = await castd.fetch(posted.location, { method: 'DELETE' });
  assert.equal(del.status, 200, 'WHIP DELETE answers 200 (what FFmpeg and OBS read as a clean end)');
  await waitFor(async () => (await castd.getJson('/api/status')).online === false, {
    timeoutMs: 30_000,
    message: 'offline after DELETE',
  });
  assert.equal((await castd.fetch(posted.location, { method: 'DELETE' })).status, 404, 'the session is gone');

  // Publish again: the admin's disconnect ends a WHIP publish too (the browser sees its connection end).
  await page.evaluate(() => window.whipPc.close());
  const again = await publishWhip(page, STREAM_KEY);
  assert.equal(again.status, 201, `second POST /whip: ${again.status} ${again.answer}${diag()}`);
  await waitFor(async () => (await castd.getJson('/api/status')).online === true, { timeoutMs: 30_000, message: 'online again' });
  const disconnect = await castd.fetch('/api/admin/disconnect', { admin: true, method: 'POST' });
  assert.equal(disconnect.status, 200);
  await waitFor(async () => (await castd.getJson('/api/status')).online === false, {
    timeoutMs: 30_000,
    message: 'offline after the admin disconnect',
  });
  assert.equal((await castd.fetch(again.location, { method: 'DELETE' })).status, 404, 'the session ended');
  await ctx.close();
});
