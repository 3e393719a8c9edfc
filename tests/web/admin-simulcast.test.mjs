// The admin's Simulcast page: a target added from a preset (YouTube's ingest URL filled in, the key pasted) is saved
// and its key is never shown again (only "set"); while live, the target's state shows on the page — here a target
// nothing listens on (sending the ladder's first variant): Retrying, with the connection error and a reconnect
// count. Screenshot `admin-simulcast.png`.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, publishTestStream, waitFor } from './castd.mjs';

const STREAM_KEY = 'simulcast-source-key';
let browser;
let castd;
let publisher;

before(async () => {
  browser = await launchBrowser();
  castd = await Castd.start({ args: ['--streamkey', STREAM_KEY] });
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
});

/** A TCP port nobody listens on right now. */
async function closedPort() {
  const srv = createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

test('targets from presets, keys write-only, live state per target', { timeout: 90_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/'));
  await page.locator('nav a[data-page="simulcast"]').click();
  await page.locator('#simulcast-form').waitFor();

  await page.locator('button[data-preset="youtube"]').click();
  const row = page.locator('.simulcast-target-row').first();
  assert.equal(await row.locator('input[aria-label="Ingest URL"]').inputValue(), 'rtmps://a.rtmps.youtube.com:443/live2');
  await row.locator('input[aria-label="Stream key"]').fill('yt-secret-key-1');
  await page.locator('#simulcast-save').click();
  await page.getByText('Simulcast targets saved.').waitFor();
  const config = await castd.getJson('/api/admin/serverconfig', { admin: true });
  assert.equal(config.simulcastTargets.length, 1);
  assert.equal(config.simulcastTargets[0].streamKey, '********', 'the key is write-only');
  assert.equal(config.simulcastTargets[0].url, 'rtmps://a.rtmps.youtube.com:443/live2');
  assert.equal(config.simulcastTargets[0].variant, 'source', "the broadcaster's own stream by default");
  await page.reload();
  await page.locator('.simulcast-target-row').first().waitFor();
  assert.equal(await page.locator('input[aria-label="Stream key"]').inputValue(), '', 'never shown again');
  assert.match(await page.locator('input[aria-label="Stream key"]').getAttribute('placeholder'), /^set/);
  await page.locator('#simulcast-status [data-target] [data-state="off"]').waitFor();

  // Point it at a port nothing listens on and go live: Retrying, with the error. The saved key is not sent to
  // the new URL: the field asks for it again.
  const port = await closedPort();
  await page.locator('input[aria-label="Name"]').fill('Nobody home');
  await page.locator('input[aria-label="Ingest URL"]').fill(`rtmp://127.0.0.1:${port}/live`);
  assert.match(await page.locator('input[aria-label="Stream key"]').getAttribute('placeholder'), /again/);
  await page.locator('input[aria-label="Stream key"]').fill('local-key-2');
  await page.locator('select[aria-label="Sends"]').selectOption('0');
  await page.locator('#simulcast-save').click();
  await page.getByText('Simulcast targets saved.').waitFor();
  const saved = await castd.getJson('/api/admin/serverconfig', { admin: true });
  assert.equal(saved.simulcastTargets[0].streamKey, '********', 'the key stays set');
  assert.equal(saved.simulcastTargets[0].variant, 0, 'the first variant of the ladder');
  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 40 });
  const badge = page.locator('#simulcast-status [data-state="retrying"]');
  await badge.waitFor({ timeout: 30_000 });
  const rowText = await page.locator('#simulcast-status tr[data-target]').first().textContent();
  assert.match(rowText, /Nobody home/);
  assert.match(rowText.toLowerCase(), /refused/);
  await waitFor(async () => {
    const [s] = await castd.getJson('/api/admin/simulcast/status', { admin: true });
    return s.reconnects >= 1;
  }, { timeoutMs: 15_000, message: 'a reconnect' });
  await page.screenshot({ path: screenshotPath('admin-simulcast.png') });
  await ctx.close();
});
