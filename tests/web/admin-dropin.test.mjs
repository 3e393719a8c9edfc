// Owncast drop-in pieces of the web UI against the real daemon: the admin opened with the credentials in the address,
// the Logs page, the playback charts of the Health page, the weak-secret warnings banner, the ffmpeg/updates notes,
// the platform icons of the social links, and the viewer's SVG (not font glyph) icons.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd, sleep } from './castd.mjs';

let castd;
let browser;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

/** Record the status of every response whose path starts with `prefix`. */
function watchResponses(page, prefix = '/api/') {
  const seen = [];
  page.on('response', (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith(prefix)) seen.push({ path, status: r.status() });
  });
  return seen;
}

test('the admin works when opened as http://admin:password@host/admin/', { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser); // no httpCredentials: only the ones in the address
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const seen = watchResponses(page, '/api/admin/');
  const url = new URL(castd.url('/admin/'));
  url.username = 'admin';
  url.password = castd.password;
  await page.goto(url.href);
  await page.locator('[data-testid="overview"]').waitFor();
  await page.locator('.health-chart[data-series="viewers"] canvas').waitFor();
  assert.equal(await page.locator('.form-error').count(), 0, `no request error on the page: ${await page.locator('.form-error').allTextContents()}`);
  assert.ok(seen.some((r) => r.path === '/api/admin/status' && r.status === 200), `status loaded (${JSON.stringify(seen)})`);
  assert.ok(seen.some((r) => r.path === '/api/admin/viewersOverTime' && r.status === 200), `viewersOverTime loaded (${JSON.stringify(seen)})`);
  assert.deepEqual(errors.filter((e) => /credentials/i.test(e)), [], 'no "URL that includes credentials" errors');
  await ctx.close();
});

test('the Logs page lists the log newest first, filters by level and refreshes every 5 s', { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  const requests = [];
  page.on('request', (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith('/api/admin/logs')) requests.push(path);
  });
  await page.goto(castd.url('/admin/'));
  await page.locator('a[data-page="logs"]').click();
  await page.waitForURL(/\/admin\/logs$/);
  await page.locator('#logs-table, #logs-empty').first().waitFor();
  assert.ok(requests.includes('/api/admin/logs'), 'GET /api/admin/logs');

  const times = await page.locator('#logs-table .log-row td:first-child').evaluateAll((cells) => cells.map((c) => Date.parse(c.getAttribute('title'))));
  for (let i = 1; i < times.length; i++) assert.ok(times[i - 1] >= times[i], `newest first (row ${i})`);

  await page.selectOption('#log-level-filter', 'error');
  await page.locator('#logs-table, #logs-empty').first().waitFor();
  await sleep(500);
  assert.ok(requests.includes('/api/admin/logs/warnings'), 'errors only reads GET /api/admin/logs/warnings');
  const levels = await page.locator('#logs-table .log-row').evaluateAll((rows) => rows.map((r) => r.dataset.level));
  assert.ok(levels.every((l) => l === 'error'), `only errors shown (${levels.join(', ')})`);

  // Auto-refresh: at least one more load in 6 s; none once it is switched off.
  let before = requests.length;
  await sleep(6000);
  assert.ok(requests.length > before, 'refreshed within 6 s');
  await page.locator('#logs-autorefresh').uncheck();
  await sleep(300);
  before = requests.length;
  await sleep(6000);
  assert.equal(requests.length, before, 'no refresh while auto-refresh is off');
  await ctx.close();
});

test('the Health page draws the playback charts and the playback clients', { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  const seen = watchResponses(page, '/api/admin/');
  await page.goto(castd.url('/admin/health'));
  for (const series of ['latency', 'segment-download', 'player-bitrate', 'errors', 'quality-variant-changes']) {
    const canvas = page.locator(`.health-chart[data-series="${series}"] canvas`);
    await canvas.first().waitFor({ timeout: 20_000 });
    const box = await canvas.first().boundingBox();
    assert.ok(box && box.width > 100 && box.height > 50, `the ${series} chart has a visible canvas`);
  }
  await page.locator('#playback-clients, #playback-clients-empty').first().waitFor();
  for (const path of ['/api/admin/metrics/video', '/api/admin/viewers/playback']) {
    assert.ok(seen.some((r) => r.path === path && r.status === 200), `${path} loaded (${JSON.stringify(seen)})`);
  }
  await ctx.close();
});

test('weak secrets show a warning banner on Overview, Stream keys and Server', { timeout: 60_000 }, async () => {
  const config = await castd.getJson('/api/admin/serverconfig', { admin: true });
  const keys = config.streamKeys;
  await castd.setConfig('streamkeys', [{ key: 'abc123', comment: 'too short' }]);
  try {
    const status = await castd.getJson('/api/admin/status', { admin: true });
    // the warning names the key by its comment, never the key itself
    assert.ok(Array.isArray(status.warnings) && status.warnings.some((w) => w.includes('too short')), `status.warnings names the short key's comment (${JSON.stringify(status.warnings)})`);
    assert.ok(!status.warnings.some((w) => w.includes('abc123')), `status.warnings shows no key (${JSON.stringify(status.warnings)})`);
    const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
    const page = await ctx.newPage();
    for (const path of ['/admin/', '/admin/stream-keys', '/admin/server']) {
      await page.goto(castd.url(path));
      await page.locator('[data-testid="config-warnings"]').filter({ hasText: 'too short' }).waitFor();
    }
    await ctx.close();
  } finally {
    await castd.setConfig('streamkeys', keys);
  }
});

test('the ffmpeg path and updates notes are shown', { timeout: 60_000 }, async () => {
  const config = await castd.getJson('/api/admin/serverconfig', { admin: true });
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/video'));
  await page.locator('#ffmpeg-path-note').filter({ hasText: 'is not used' }).waitFor();
  assert.equal(await page.locator('#ffmpeg-path-input').inputValue(), config.ffmpegPath ?? '');
  await page.goto(castd.url('/admin/server'));
  await page.locator('#updates-note').filter({ hasText: 'package manager (apt)' }).waitFor();
  await ctx.close();
});

test('platform icons are served and used by the viewer page; its icons are SVG, not font glyphs', { timeout: 60_000 }, async () => {
  const platforms = await castd.getJson('/api/socialplatforms');
  assert.ok(Object.keys(platforms).length >= 24, 'the platform list');
  for (const [key, p] of Object.entries(platforms)) {
    const res = await castd.fetch(p.icon);
    assert.equal(res.status, 200, `GET ${p.icon} (${key})`);
    assert.match(res.headers.get('content-type') ?? '', /image\/svg\+xml/, `${p.icon} is served as SVG`);
  }

  await castd.setConfig('socialhandles', [{ platform: 'github', url: 'https://example.com/me' }]);
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url('/'));
  const img = page.locator('#social-handles a[data-platform="github"] img');
  await img.waitFor();
  assert.match(await img.getAttribute('src'), /\/img\/platformlogos\/github\.svg$/);
  await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, await img.elementHandle());
  await page.locator('#chat-emoji-button svg').waitFor();
  await ctx.close();
});
