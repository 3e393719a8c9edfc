// Issue 41: three channels live at once, one per ingest protocol. Channel `rtmp` gets an RTMP publish (ffmpeg),
// channel `srt` an SRT publish (ffmpeg's libsrt, MPEG-TS) and channel `whip` a WHIP publish from headless chromium's
// fake camera (`POST /c/whip/whip`, Bearer: that channel's stream key). Each channel has its own tiny ladder (its own
// sizes); every channel's HLS variant probes with ffprobe at that channel's size; ending the WHIP session
// (DELETE on its Location, which is under `/c/whip/`) takes that channel offline and leaves the other two live.
// (tests/channels_live.rs does the same with RTMP, SRT and a second RTMP publisher, without a browser.)
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { collectErrors, launchBrowser, newContext, publishWhip } from './browser.mjs';
import { Castd, publishTestStream, terminate, waitFor } from './castd.mjs';

const run = promisify(execFile);
let castd;
let browser;
const children = [];

async function freeUdpPort() {
  const sock = createSocket('udp4');
  await new Promise((resolve) => sock.bind(0, '127.0.0.1', resolve));
  const { port } = sock.address();
  await new Promise((resolve) => sock.close(resolve));
  return port;
}

before(async () => {
  const srt = await freeUdpPort();
  castd = await Castd.start({ args: ['--srtport', String(srt)] });
  castd.srtPort = srt;
  browser = await launchBrowser({
    extraArgs: ['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream', '--allow-loopback-in-peer-connection'],
  });
});

after(async () => {
  for (const c of children) await terminate(c, 2000);
  await browser?.close();
  await castd?.stop();
});

/** POST JSON to `path` with the server admin's password; throws unless it succeeds. */
async function adminPost(path, body) {
  const res = await castd.fetch(path, {
    admin: true,
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${path} → ${res.status}: ${text.slice(0, 300)}`);
  return text;
}

/** One transcoded rung per height (width from 4:3 or 16:9 as given), tiny and fast. */
function ladder(sizes) {
  return sizes.map(([w, h]) => ({
    name: `${h}p`,
    videoPassthrough: false,
    audioPassthrough: false,
    audioBitrate: 64,
    videoBitrate: 200,
    scaledWidth: w,
    scaledHeight: h,
    framerate: 15,
    cpuUsageLevel: 0,
  }));
}

/** ffprobe's video (width, height) of a playlist URL. */
async function probeVideo(url) {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=width,height', '-of', 'json', url], {
    timeout: 30_000,
  });
  const s = JSON.parse(stdout).streams?.[0] ?? {};
  return [s.width, s.height];
}

const online = async (slug) => (await castd.getJson(`/c/${slug}/api/status`)).online === true;

test('RTMP, SRT and WHIP to three channels at once, each with its ladder; one ending leaves the others live', { timeout: 240_000 }, async () => {
  const sizes = { rtmp: [[256, 144]], srt: [[192, 108]], whip: [[160, 120]] };
  const keys = {};
  for (const slug of Object.keys(sizes)) {
    await adminPost('/api/admin/channels/create', { slug, name: `Channel ${slug}`, adminPassword: `${slug}-admin-password` });
    await adminPost(`/c/${slug}/api/admin/config/video/streamoutputvariants`, { value: ladder(sizes[slug]) });
    keys[slug] = (await castd.getJson(`/c/${slug}/api/admin/serverconfig`, { admin: true })).streamKeys[0].key;
  }

  const rtmp = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${keys.rtmp}`, { seconds: 180 });
  children.push(rtmp.child);
  const srt = spawn(
    'ffmpeg',
    [
      '-hide_banner', '-loglevel', 'error', '-nostdin', '-re', '-f', 'lavfi', '-i', 'testsrc2=size=320x180:rate=30',
      '-f', 'lavfi', '-i', 'sine=frequency=440', '-t', '180', '-c:v', 'libx264', '-preset', 'ultrafast', '-g', '60',
      '-c:a', 'aac', '-f', 'mpegts', `srt://127.0.0.1:${castd.srtPort}?streamid=${keys.srt}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(srt);

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/c/whip/'));
  const posted = await publishWhip(page, keys.whip, '/c/whip/whip');
  const diag = () => `\nbrowser errors: ${errors.join('; ') || '(none)'}\ncastd log (tail):\n${castd.log.slice(-30).join('\n')}`;
  assert.ok(!posted.error, posted.error);
  assert.equal(posted.status, 201, `POST /c/whip/whip answered ${posted.status}: ${posted.answer}${diag()}`);
  assert.match(posted.location, /^\/c\/whip\/whip\/[A-Za-z0-9]+$/, 'the session is under the channel');

  for (const slug of Object.keys(sizes)) {
    await waitFor(() => online(slug), { timeoutMs: 30_000, message: `${slug} online${diag()}` });
  }
  assert.equal((await castd.getJson('/api/status')).online, false, 'the default channel stays offline');
  for (const [slug, [[w, h]]] of Object.entries(sizes)) {
    await waitFor(
      async () => {
        const res = await castd.fetch(`/c/${slug}/hls/0/stream.m3u8`);
        return res.status === 200 && ((await res.text()).match(/#EXTINF/g) ?? []).length >= 2;
      },
      { timeoutMs: 60_000, message: `two segments of ${slug}${diag()}` },
    );
    assert.deepEqual(await probeVideo(castd.url(`/c/${slug}/hls/0/stream.m3u8`)), [w, h], `${slug} at its ladder's size`);
  }

  // Ending the WHIP session ends that channel's stream only.
  const del = await castd.fetch(posted.location, { method: 'DELETE' });
  assert.equal(del.status, 200, 'WHIP DELETE answers 200 (what FFmpeg and OBS read as a clean end)');
  await waitFor(async () => !(await online('whip')), { timeoutMs: 30_000, message: 'whip offline after DELETE' });
  assert.equal(await online('rtmp'), true, 'rtmp stays live');
  assert.equal(await online('srt'), true, 'srt stays live');
  await page.evaluate(() => window.whipPc.close());
  await ctx.close();
  await rtmp.stop();
});
