// Object storage in the browser: castd uploads a live stream to a real S3 server (s3s-fs, SigV4 checked; installed by
// packaging/deps.sh), and hls.js in Chromium plays it (1) from castd's viewer page, whose variant playlists name the
// segments on the CDN (videoServingEndpoint), and (2) straight from the bucket URL. The "CDN" is a second s3s-fs on the
// same folder without credentials (anonymous reads, as a public-read bucket gives) behind a loopback proxy whose origin
// is the bucket and which adds the CORS headers a CDN would. Also: the admin "Test connection" button shows success, and the store's own error for
// a wrong secret.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd, publishTestStream, REPO_ROOT, terminate, waitFor } from './castd.mjs';

const STREAM_KEY = 'e2e-storage-key-1';
const ACCESS_KEY = 'castdwebaccess';
const SECRET = 'castd-web-secret-0123456789';
const BUCKET = 'castd';
const HLS_JS = join(REPO_ROOT, 'web', 'node_modules', 'hls.js', 'dist', 'hls.min.js');

let castd;
let browser;
let publisher;
let root;
const children = [];
let cdn;
let pageServer;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function startS3(port, credentials) {
  const args = ['--host', '127.0.0.1', '--port', String(port)];
  if (credentials) args.push('--access-key', ACCESS_KEY, '--secret-key', SECRET);
  const child = spawn('s3s-fs', [...args, root], { stdio: 'ignore' });
  children.push(child);
  await waitFor(
    () =>
      new Promise((r) => {
        const c = net.connect(port, '127.0.0.1', () => {
          c.destroy();
          r(true);
        });
        c.on('error', () => r(false));
      }),
    { timeoutMs: 10_000, message: `s3s-fs on ${port} (packaging/deps.sh installs it)` },
  );
  return child;
}

/** A loopback "CDN" whose origin is the bucket: forwards GET /<key> to the upstream's /<bucket>/<key>, adds CORS headers. */
function startCdn(upstreamPort) {
  return new Promise((resolve) => {
    const server = http.createServer((req, res) => {
      const cors = {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'GET, HEAD, OPTIONS',
        'access-control-allow-headers': '*',
      };
      if (req.method === 'OPTIONS') {
        res.writeHead(204, cors);
        res.end();
        return;
      }
      server.requests.push(req.url);
      const up = http.request(
        { host: '127.0.0.1', port: upstreamPort, path: `/${BUCKET}${req.url}`, method: req.method, headers: { range: req.headers.range ?? '' } },
        (r) => {
          res.writeHead(r.statusCode, { ...r.headers, ...cors });
          r.pipe(res);
        },
      );
      up.on('error', () => {
        res.writeHead(502, cors);
        res.end();
      });
      up.end();
    });
    server.requests = [];
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'castd-s3-'));
  mkdirSync(join(root, BUCKET));
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
  cdn?.close();
  pageServer?.close();
  for (const c of children) await terminate(c, 2000);
  if (root) rmSync(root, { recursive: true, force: true });
});

test('hls.js plays a stream offloaded to object storage, from castd and from the bucket URL', { timeout: 180_000 }, async (t) => {
  assert.ok(existsSync(HLS_JS), `hls.js not found at ${HLS_JS}: run 'cd web && npm ci'`);
  const s3Port = await freePort();
  await startS3(s3Port, true);
  const publicPort = await freePort();
  await startS3(publicPort, false);
  cdn = await startCdn(publicPort);
  const cdnUrl = `http://127.0.0.1:${cdn.address().port}`;
  const settings = {
    enabled: true,
    endpoint: `http://127.0.0.1:${s3Port}`,
    accessKey: ACCESS_KEY,
    secret: SECRET,
    bucket: BUCKET,
    region: 'us-east-1',
    acl: 'public-read',
    pathPrefix: 'e2e',
    forcePathStyle: true,
  };

  // The admin page's "Test connection" button, with the saved settings (masked secret) and with a wrong one.
  await castd.setConfig('s3', settings);
  const adminCtx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const admin = await adminCtx.newPage();
  await admin.goto(castd.url('/admin/server'));
  await admin.locator('#s3-test').click();
  await admin.locator('#s3-test-status .form-success').waitFor({ timeout: 15_000 });
  assert.match(await admin.locator('#s3-test-status').textContent(), /PUT, GET and DELETE/);
  await admin.locator('#s3-form input[type=password]').fill('not-the-secret');
  await admin.locator('#s3-test').click();
  await admin.locator('#s3-test-status .form-error').waitFor({ timeout: 15_000 });
  const failure = await admin.locator('#s3-test-status').textContent();
  assert.match(failure, /403/);
  assert.match(failure, /Signature/);
  await adminCtx.close();

  await castd.setConfig('videoservingendpoint', cdnUrl);
  await castd.setConfig('video/streamoutputvariants', [
    { name: '360p', videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await castd.setConfig('video/streamlatencylevel', 1);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);
  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 120 });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(none)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;
  const bucketMaster = `${cdnUrl}/e2e/hls/stream.m3u8`;
  try {
    await waitFor(
      async () => {
        const p = await (await castd.fetch('/hls/0/stream.m3u8')).text();
        return p.includes(`${cdnUrl}/e2e/hls/0/`);
      },
      { timeoutMs: 40_000, message: "castd's playlist to name the segments on the CDN" },
    );
    await waitFor(async () => (await fetch(bucketMaster)).status === 200, { timeoutMs: 10_000, message: 'the master playlist in the bucket' });
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }

  const play = async (page, video, label) => {
    let last;
    let startedAt = null;
    const state = () => video.evaluate((v) => ({ t: v.currentTime, paused: v.paused, error: v.error?.message ?? null, w: v.videoWidth }));
    try {
      await waitFor(
        async () => {
          const button = page.locator('#play-button');
          if (await button.isVisible().catch(() => false)) await button.click({ timeout: 2000 });
          last = await state();
          if (startedAt === null && !last.paused && last.t > 0) startedAt = last.t;
          return startedAt !== null && last.t > startedAt + 3;
        },
        { timeoutMs: 60_000, intervalMs: 500, message: `${label}: 3 s of playback` },
      );
    } catch (e) {
      const hlsErrors = await page.evaluate(() => window.hlsErrors ?? []);
      assert.fail(`${e.message}; video: ${JSON.stringify(last)}; hls.js errors: ${hlsErrors.join(', ') || 'none'}${diag()}`);
    }
    assert.equal(last.error, null);
    assert.equal(last.w, 640);
    return last;
  };

  // 1. castd's viewer page: playlists from castd, segments from the CDN.
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const segments = [];
  page.on('request', (r) => {
    if (/\.(ts|m4s)$/.test(new URL(r.url()).pathname)) segments.push(r.url());
  });
  await page.goto(castd.url('/'));
  await play(page, page.locator('video#player'), 'viewer page');
  assert.ok(segments.length > 0, 'segments were loaded');
  assert.ok(
    segments.every((u) => u.startsWith(`${cdnUrl}/e2e/hls/0/`)),
    `every segment came from the CDN: ${segments.slice(0, 5).join(', ')}; errors: ${errors.join(' | ')}`,
  );
  await ctx.close();

  // 2. Straight from the bucket URL (through the CDN's CORS), hls.js on a blank page.
  const ctx2 = await newContext(browser);
  const bare = await ctx2.newPage();
  const netLog = [];
  bare.on('requestfailed', (r) => netLog.push(`${r.url()} failed: ${r.failure()?.errorText}`));
  bare.on('response', (r) => netLog.push(`${r.url()} → ${r.status()}`));
  bare.on('console', (m) => netLog.push(`console: ${m.text()}`));
  // A blank page served from another loopback origin (Chromium keeps pages that are not on a loopback address off
  // loopback addresses): the bucket is fetched cross-origin, through the CDN's CORS.
  pageServer = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><body></body>');
  });
  await new Promise((r) => pageServer.listen(0, '127.0.0.1', r));
  await bare.goto(`http://127.0.0.1:${pageServer.address().port}/`);
  await bare.addScriptTag({ path: HLS_JS });
  await bare.evaluate((src) => {
    const v = document.createElement('video');
    v.id = 'v';
    v.muted = true;
    document.body.append(v);
    // eslint-disable-next-line no-undef
    const hls = new Hls();
    window.hlsErrors = [];
    // eslint-disable-next-line no-undef
    hls.on(Hls.Events.ERROR, (_e, d) => window.hlsErrors.push(`${d.type}/${d.details}${d.fatal ? ' (fatal)' : ''}`));
    hls.loadSource(src);
    hls.attachMedia(v);
    v.play().catch(() => {});
  }, bucketMaster);
  const played = await play(bare, bare.locator('video#v'), 'bucket URL').catch((e) => assert.fail(`${e.message}\nnetwork: ${netLog.slice(0, 10).join('\n')}`));
  t.diagnostic(`bucket playback reached ${played.t.toFixed(1)} s; CDN requests: ${cdn.requests.length}`);
  await ctx2.close();
});
