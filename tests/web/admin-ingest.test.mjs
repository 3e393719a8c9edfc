// The admin's Stream keys page shows where to stream: the RTMP server URL and the whole SRT URL (the first key in
// `streamid`, masked on screen, whole in the copy; a placeholder for the passphrase once one is set, as the server
// never sends it back), and says when SRT is off. A channel's page gives the server's real addresses (the server's
// ports, not defaults from the channel's own database).
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';

let browser;
const started = [];

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  for (const c of started) await c.stop();
});

/** A UDP port nobody uses right now. */
async function freeUdpPort() {
  const sock = createSocket('udp4');
  await new Promise((resolve) => sock.bind(0, '127.0.0.1', resolve));
  const { port } = sock.address();
  await new Promise((resolve) => sock.close(resolve));
  return port;
}

/** A TCP port nobody uses right now. */
async function freeTcpPort() {
  const srv = createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

async function streamKeysPage(castd, { base = '', httpCredentials = castd.httpCredentials } = {}) {
  const ctx = await newContext(browser, { httpCredentials });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write']);
  const page = await ctx.newPage();
  await page.goto(castd.url(`${base}/admin/stream-keys`));
  await page.locator('#publish-urls').waitFor();
  return { ctx, page };
}

test('the SRT and WHIP URLs to copy into OBS are shown beside the RTMP one', { timeout: 60_000 }, async () => {
  const port = await freeUdpPort();
  const castd = await Castd.start({ args: ['--srtport', String(port)] });
  started.push(castd);
  await castd.setConfig('streamkeys', [{ key: 'first-key-123', comment: '' }]);
  await castd.setConfig('srt/passphrase', 'pass-phrase-42');
  const { ctx, page } = await streamKeysPage(castd);
  const rtmp = await page.locator('#publish-url-rtmp').textContent();
  // The saved RTMP port (the harness's --rtmpport 0 means "any free port", so 0 here).
  assert.match(rtmp, /^rtmp:\/\/127\.0\.0\.1:\d+\/live$/);
  const srt = await page.locator('#publish-url-srt').textContent();
  // The passphrase is a secret the server configuration only says is set: the URL holds a placeholder for it.
  assert.equal(srt, `srt://127.0.0.1:${port}?streamid=live/••••••••&passphrase=PASSPHRASE`, 'the key is masked on screen');
  await page.locator('#publish-url-srt-copy').click();
  const copied = await waitFor(async () => page.evaluate(() => navigator.clipboard.readText()), { message: 'clipboard' });
  assert.equal(copied, `srt://127.0.0.1:${port}?streamid=live/first-key-123&passphrase=PASSPHRASE`);
  assert.doesNotMatch(await page.content(), /pass-phrase-42/);
  // WHIP: the endpoint on the web server (the key goes in OBS's Bearer Token field).
  assert.equal(await page.locator('#publish-url-whip').textContent(), `${castd.base}/whip`);
  await ctx.close();
});

test('with SRT off the page says so', { timeout: 60_000 }, async () => {
  const castd = await Castd.start();
  started.push(castd);
  const { ctx, page } = await streamKeysPage(castd);
  const text = await page.locator('#publish-url-srt').textContent();
  assert.match(text, /SRT is off/);
  await ctx.close();
});

test("a channel's Stream keys page gives the server's real RTMP, SRT and WHIP addresses", { timeout: 90_000 }, async () => {
  const [rtmpPort, srtPort] = [await freeTcpPort(), await freeUdpPort()];
  const castd = await Castd.start({ args: ['--rtmpport', String(rtmpPort), '--srtport', String(srtPort)] });
  started.push(castd);
  assert.equal(castd.rtmpPort, rtmpPort, 'castd listens on the RTMP port it was given');
  const password = 'tv-channel-admin-password';
  const res = await castd.fetch('/api/admin/channels/create', {
    admin: true,
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ slug: 'tv', name: 'TV', adminPassword: password }),
  });
  assert.equal(res.status, 200, await res.text());
  // The channel's admin, with the channel's own password.
  const { ctx, page } = await streamKeysPage(castd, { base: '/c/tv', httpCredentials: { username: 'admin', password } });
  const key = (await castd.getJson('/c/tv/api/admin/serverconfig', { admin: true })).streamKeys[0].key;
  assert.equal(await page.locator('#publish-url-rtmp').textContent(), `rtmp://127.0.0.1:${rtmpPort}/live`);
  assert.equal(await page.locator('#publish-url-srt').textContent(), `srt://127.0.0.1:${srtPort}?streamid=live/••••••••`);
  await page.locator('#publish-url-srt-copy').click();
  const copied = await waitFor(async () => page.evaluate(() => navigator.clipboard.readText()), { message: 'clipboard' });
  assert.equal(copied, `srt://127.0.0.1:${srtPort}?streamid=live/${key}`);
  assert.equal(await page.locator('#publish-url-whip').textContent(), `${castd.base}/whip`);
  await page.screenshot({ path: screenshotPath('channel-stream-keys.png'), fullPage: true });
  await ctx.close();
});
