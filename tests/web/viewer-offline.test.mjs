// The viewer page while no one is streaming: the server name and the owner's offline message (Markdown, rendered by
// the server) are shown. Screenshot: viewer-offline.png.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
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

test('viewer page shows the server name and the rendered offline message', { timeout: 60_000 }, async () => {
  const name = 'E2E Test Cast';
  await castd.setConfig('name', name);
  await castd.setConfig('streamtitle', 'Nothing on right now');
  await castd.setConfig('offlinemessage', 'We are **offline** for now. See [the schedule](/schedule) and come back later.');

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/'));

  await page.locator('#server-name').filter({ hasText: name }).waitFor();
  assert.equal((await page.locator('#server-name').textContent()).trim(), name);

  const message = page.locator('#offline-message');
  await message.waitFor();
  // Rendered from Markdown, not shown as source text.
  assert.equal((await message.locator('strong').textContent()).trim(), 'offline');
  assert.equal(await message.locator('a').getAttribute('href'), '/schedule');
  const text = (await message.textContent()).replace(/\s+/g, ' ').trim();
  assert.equal(text, 'We are offline for now. See the schedule and come back later.');
  assert.doesNotMatch(await message.innerHTML(), /\*\*/, 'the Markdown source leaked into the page');

  assert.equal(await page.locator('#offline-badge').isVisible(), true, 'the offline badge is shown');
  assert.equal(await page.locator('video#player').count(), 0, 'no player while offline');
  assert.equal((await page.locator('#stream-title').textContent()).trim(), 'Nothing on right now');

  // Let the chat panel connect before the screenshot (the chat is not what this test checks).
  await page.locator('#chat-send:enabled').waitFor({ timeout: 10_000 }).catch(() => undefined);
  await page.screenshot({ path: screenshotPath('viewer-offline.png') });
  await ctx.close();
  assert.deepEqual(
    errors.filter((e) => !/WebSocket|\/ws|chat|404|Failed to load resource/i.test(e)),
    [],
    'the page logged errors',
  );
});
