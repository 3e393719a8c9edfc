// The Video page says whether the ladder fits this box: on load the saved ladder (POST /api/admin/video/fit: the
// route's GET is for tools only and refused to a browser), a
// "measuring" state while it is worked out, then "This ladder fits this box (uses ~X of Y cores)"; edited into a
// ladder far beyond the box (one 8K120 rung at the slowest preset), the box measures again (POST with the edited,
// unsaved ladder) and says it does not fit, with the cores needed and available. Nothing is saved by asking.
// Screenshot `admin-video-fit.png` (the editor with the verdict).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd } from './castd.mjs';

const SMALL = [
  { name: 'low', videoPassthrough: false, audioPassthrough: true, videoBitrate: 800, audioBitrate: 0, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
];
let castd;
let browser;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await castd.setConfig('video/streamoutputvariants', SMALL);
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

test('the Video page says whether the ladder fits this box', { timeout: 120_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  const asked = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/api/admin/video/fit')) asked.push({ method: r.method(), body: r.postData() });
  });
  await page.goto(castd.url('/admin/video'));
  const box = page.locator('#ladder-fit');
  await box.waitFor();
  await page.locator('#ladder-fit[data-state="fits"]').waitFor({ timeout: 60_000 });
  const verdict = (await page.locator('#ladder-fit-verdict').textContent()).trim();
  assert.match(verdict, /^This ladder fits this box \(uses ~[\d.]+ of \d+ cores?\)\.$/, verdict);
  assert.deepEqual(asked.map((a) => a.method), ['POST'], 'the saved ladder is judged on load');
  assert.equal(JSON.parse(asked[0].body).variants[0].scaledWidth, 640, 'the saved ladder is the one sent');
  assert.match(await box.locator('.ladder-fit-rungs').textContent(), /640×360@30/);

  // Edited into one 8K120 rung at cpuUsageLevel 4: measuring, then "does not fit".
  const row = page.locator('.variant-row').first();
  await row.locator('input[aria-label="Width"]').fill('7680');
  await row.locator('input[aria-label="Height"]').fill('4320');
  await row.locator('input[aria-label="Framerate"]').fill('120');
  await row.locator('select[aria-label="Encoder effort"]').selectOption('4');
  assert.equal(await box.getAttribute('data-state'), 'measuring', 'a changed ladder shows the measuring state');
  await page.locator('#ladder-fit-measuring, .ladder-fit-measuring').first().waitFor();
  await page.locator('#ladder-fit[data-state="does-not-fit"]').waitFor({ timeout: 90_000 });
  const no = (await page.locator('#ladder-fit-verdict').textContent()).trim();
  assert.match(
    no,
    /^This ladder does not fit this box: needs ~[\d.]+ cores, \d+ available — use fewer or smaller rungs, a faster CPU usage level, or passthrough\.$/,
    no,
  );
  const posts = asked.slice(1).filter((a) => a.method === 'POST');
  assert.ok(posts.length >= 1, 'the edited ladder was sent');
  const sent = JSON.parse(posts.at(-1).body).variants;
  assert.deepEqual(
    [sent[0].scaledWidth, sent[0].scaledHeight, sent[0].framerate, sent[0].cpuUsageLevel],
    [7680, 4320, 120, 4],
    'the last ladder asked about is the edited one',
  );
  assert.ok(posts.length <= 3, `edits close together are asked about once they settle (${posts.length} POSTs)`);
  assert.match(await box.locator('.ladder-fit-rungs').textContent(), /7680×4320@120/);
  await page.locator('#variants-form').screenshot({ path: screenshotPath('admin-video-fit.png') });
  const cfg = await castd.getJson('/api/admin/serverconfig', { admin: true });
  assert.equal(cfg.videoSettings.videoQualityVariants[0].scaledWidth, 640, 'asking saves nothing');
  await ctx.close();
});
