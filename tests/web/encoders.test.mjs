// The admin Video page lists the encoders and decode paths castd probed (GET /api/admin/encoders): on a box
// without a GPU, libx264 works and each GPU path (NVENC, VA-API, QSV, and the decode paths that decode and
// scale on a GPU for libx264) says in the driver's words why it does not, and the page says what the next
// stream uses.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';

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

test('the video page lists the encoders and GPU decode paths with their reasons', { timeout: 90_000 }, async () => {
  // The startup probe runs in the background: wait until it has listed the decode paths.
  let answer;
  await waitFor(async () => {
    answer = await (await castd.fetch('/api/admin/encoders', { admin: true })).json();
    return answer.encoders.some((e) => e.decode === 'cuda');
  }, { timeoutMs: 60_000, message: 'the probe lists the CUDA decode path' });
  const cuda = answer.encoders.find((e) => e.decode === 'cuda');
  assert.equal(cuda.name, 'libx264');
  assert.equal(cuda.available, false, 'no GPU on this box');
  assert.ok(cuda.reason.length > 0, 'an unavailable decode path says why');
  assert.equal(answer.selected, 'libx264');

  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/video'));
  const rows = page.locator('#encoders-table tbody tr');
  await rows.first().waitFor({ timeout: 20_000 });
  const text = await rows.allTextContents();
  assert.ok(text.some((t) => t.startsWith('libx264') && t.includes('software') && t.includes('yes')), text.join(' | '));
  const gpuRow = text.find((t) => t.includes('GPU decode and scaling (cuda)'));
  assert.ok(gpuRow, `a row for the CUDA decode path: ${text.join(' | ')}`);
  assert.ok(gpuRow.includes('no') && gpuRow.includes(cuda.reason.slice(0, 20)), gpuRow);
  assert.match(await page.locator('#encoder-selected').textContent(), /next stream uses: libx264/);
  await ctx.close();
});
