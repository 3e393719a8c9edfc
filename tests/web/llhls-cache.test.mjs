// LL-HLS behind ordinary HTTP caches (issue 33): two nginx proxy_cache instances (Debian's nginx, configured as the
// README's "More viewers than one box" example) in front of castd. Chromium plays the viewer page through each cache
// and straight from castd at once: glass-to-glass p50 (latency.mjs) through a cache is within 0.5 s of the direct one.
// Twenty simulated LL-HLS players (the blocking playlist reloads hls.js makes: _HLS_msn/_HLS_part of the next part,
// then the part) share the two caches: castd sees at most 2 playlist requests per part per cache, read from the
// caches' logs ($upstream_cache_status: a MISS or EXPIRED is a request to castd).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd, sleep, terminate, waitFor } from './castd.mjs';
import { firstSegmentDate, publishClocked, sampleLatency, startPlayback, summary } from './latency.mjs';

const STREAM_KEY = 'e2e-llhls-cache-1';
const NGINX = process.env.NGINX || '/usr/sbin/nginx';
const PLAYERS = 20;
let castd;
let browser;
let publisher;
const caches = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** An nginx with proxy_cache in front of castd on 127.0.0.1:upstreamPort (the README's configuration). */
async function startNginx(upstreamPort) {
  const dir = mkdtempSync(join(tmpdir(), 'castd-nginx-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const user = process.getuid?.() === 0 ? 'user root root;' : '';
  const conf = `${user}
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  log_format cache '$request_uri $upstream_cache_status $status';
  access_log ${dir}/access.log cache;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=castd:10m max_size=500m inactive=10m;
  types { text/html html; }
  server {
    listen 127.0.0.1:${port};
    location /hls/ {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_cache castd;
      proxy_cache_key $scheme$host$request_uri;
      proxy_cache_lock on;
      proxy_cache_lock_timeout 10s;
      proxy_cache_lock_age 10s;
      proxy_read_timeout 15s;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
    location /ws {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 120s;
    }
    location / {
      proxy_pass http://127.0.0.1:${upstreamPort};
    }
  }
}
`;
  writeFileSync(join(dir, 'nginx.conf'), conf);
  const child = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], { stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/api/status`).catch(() => null))?.ok, {
    timeoutMs: 10_000,
    message: `nginx on ${port}${(() => { try { return `: ${readFileSync(join(dir, 'error.log'), 'utf8')}`; } catch { return ''; } })()}`,
  });
  return {
    base,
    child,
    dir,
    log: () => readFileSync(join(dir, 'access.log'), 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')),
    stop: async () => {
      await terminate(child, 3000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The (msn, part) of the next part after an LL-HLS media playlist's newest one, as hls.js asks for it. */
function nextPart(text) {
  const lines = text.split('\n');
  let msn = Number((text.match(/#EXT-X-MEDIA-SEQUENCE:(\d+)/) || [])[1] || 0);
  const skipped = Number((text.match(/#EXT-X-SKIP:SKIPPED-SEGMENTS=(\d+)/) || [])[1] || 0);
  msn += skipped;
  let parts = 0;
  for (const l of lines) {
    if (l.startsWith('#EXTINF')) {
      msn += 1;
      parts = 0;
    } else if (l.startsWith('#EXT-X-PART:')) {
      parts += 1;
    }
  }
  return { msn, part: parts };
}

/** A simulated LL-HLS player on `base` until `stopAt`: blocking reload for the next part, then the hinted part. */
async function simulatedPlayer(base, stopAt) {
  let text = await (await fetch(`${base}/hls/0/stream.m3u8`)).text();
  let errors = 0;
  while (Date.now() < stopAt) {
    const { msn, part } = nextPart(text);
    const res = await fetch(`${base}/hls/0/stream.m3u8?_HLS_msn=${msn}&_HLS_part=${part}`).catch(() => null);
    if (!res || res.status !== 200) {
      errors += 1;
      await sleep(200);
      text = await (await fetch(`${base}/hls/0/stream.m3u8`)).text();
      continue;
    }
    text = await res.text();
    const hint = (text.match(/#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/) || [])[1];
    if (hint) await fetch(`${base}/hls/0/${hint}`).then((r) => r.arrayBuffer()).catch(() => null);
  }
  return errors;
}

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  for (const c of caches) await c.stop();
  await castd?.stop();
});

test('LL-HLS through two nginx caches: latency as direct, a bounded number of playlist requests to castd', { timeout: 240_000 }, async (t) => {
  assert.ok(castd.rtmpPort, 'this build has no RTMP ingest');
  await castd.setConfig('video/streamoutputvariants', [
    { name: '360p', audioPassthrough: true, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await castd.setConfig('video/streamlatencylevel', 0);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);
  for (let i = 0; i < 2; i++) caches.push(await startNginx(castd.webPort));

  publisher = publishClocked(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 120 });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;
  let firstPdt;
  try {
    firstPdt = await firstSegmentDate(castd);
    await waitFor(async () => (await castd.fetch('/hls/stream.m3u8')).status === 200, { timeoutMs: 30_000, message: '/hls/stream.m3u8' });
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }

  // Twenty players over the two caches for 15 s.
  const simStart = Date.now();
  const stopAt = simStart + 15_000;
  const sims = Array.from({ length: PLAYERS }, (_, i) => simulatedPlayer(caches[i % 2].base, stopAt));
  const simErrors = (await Promise.all(sims)).reduce((a, b) => a + b, 0);
  for (const [i, c] of caches.entries()) {
    const lines = c.log().filter(([uri]) => /^\/hls\/0\/stream\.m3u8\?_HLS_msn=\d+&_HLS_part=\d+$/.test(uri));
    const toCastd = lines.filter(([, status]) => status === 'MISS' || status === 'EXPIRED' || status === 'BYPASS');
    const parts = new Set(lines.map(([uri]) => uri)).size;
    const perPart = toCastd.length / Math.max(1, parts);
    t.diagnostic(`cache ${i}: ${lines.length} blocking reloads from ${PLAYERS / 2} players, ${toCastd.length} to castd, ${parts} parts: ${perPart.toFixed(2)} per part`);
    assert.ok(parts >= 10, `the players followed the stream through cache ${i} (${parts} parts)`);
    assert.ok(perPart <= 2, `castd saw ${perPart.toFixed(2)} playlist requests per part from cache ${i}`);
    const hits = lines.filter(([, status]) => status === 'HIT').length;
    assert.ok(hits > lines.length / 2, `most reloads are answered by cache ${i} (${hits} of ${lines.length})`);
  }
  assert.ok(simErrors <= 4, `simulated players' failed reloads: ${simErrors}`);

  // Chromium: the viewer page straight from castd and through each cache, at the same time.
  const bases = [castd.url(''), ...caches.map((c) => c.base)];
  const pages = [];
  for (const base of bases) {
    const ctx = await newContext(browser);
    const page = await ctx.newPage();
    const errors = collectErrors(page);
    await page.goto(`${base}/`);
    pages.push({ base, ctx, page, errors });
  }
  try {
    await Promise.all(pages.map(({ page }) => startPlayback(page)));
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }
  await sleep(4000);
  const results = await Promise.all(
    pages.map(({ page }) => sampleLatency(page, { sourceOffset: publisher.sourceOffset, firstPdt, seconds: 10 })),
  );
  const s = results.map(summary);
  const names = ['direct', 'cache 0', 'cache 1'];
  t.diagnostic(s.map((x, i) => `${names[i]}: glass p50 ${x.glass.p50.toFixed(2)} s p95 ${x.glass.p95.toFixed(2)} s (${x.n} samples)`).join('; '));
  for (let i = 1; i < s.length; i++) {
    assert.ok(s[i].n >= 10, `${names[i]}: enough samples (${s[i].n})`);
    assert.ok(
      s[i].glass.p50 <= s[0].glass.p50 + 0.5,
      `${names[i]}: glass-to-glass p50 ${s[i].glass.p50.toFixed(2)} s within 0.5 s of direct ${s[0].glass.p50.toFixed(2)} s`,
    );
  }
  for (const { base, ctx, errors } of pages) {
    assert.deepEqual(errors, [], `no page errors on ${base}`);
    await ctx.close();
  }
});
