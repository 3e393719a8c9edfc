// The admin "Hardware health" page draws its CPU, memory and disk charts from GET /api/admin/hardwarestats.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd } from './castd.mjs';

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

test('the health page draws the cpu, memory and disk charts', { timeout: 60_000 }, async () => {
  const res = await castd.fetch('/api/admin/hardwarestats', { admin: true });
  const body = await res.text();
  assert.equal(res.status, 200, `GET /api/admin/hardwarestats → ${res.status} ${body.slice(0, 200)}: this castd has no hardware stats`);
  const stats = JSON.parse(body);
  for (const series of ['cpu', 'memory', 'disk']) {
    assert.ok(Array.isArray(stats[series]), `hardwarestats.${series} is an array (got ${JSON.stringify(stats[series])})`);
  }

  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  const seen = [];
  page.on('response', (r) => {
    if (r.url().includes('/api/admin/hardwarestats')) seen.push(r.status());
  });
  await page.goto(castd.url('/admin/health'));
  assert.equal(await page.locator('a[data-page="health"]').getAttribute('aria-current'), 'page');

  for (const series of ['cpu', 'memory', 'disk']) {
    const canvas = page.locator(`.health-chart[data-series="${series}"] canvas`);
    await canvas.first().waitFor({ timeout: 20_000 });
    const box = await canvas.first().boundingBox();
    assert.ok(box && box.width > 100 && box.height > 50, `the ${series} chart has a visible canvas (${JSON.stringify(box)})`);
  }
  assert.ok(seen.includes(200), `the page loaded /api/admin/hardwarestats (statuses: ${seen.join(', ')})`);

  // Where the server already has samples, the chart heads show the latest value as a percentage.
  for (const series of ['cpu', 'memory', 'disk']) {
    if (!stats[series].length) continue;
    const value = (await page.locator(`.health-chart[data-series="${series}"] .chart-value`).textContent()).trim();
    assert.match(value, /^\d+(\.\d)?%$/, `${series} shows its latest value`);
  }
  await ctx.close();
});
