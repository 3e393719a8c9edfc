// Federation in the browser, on loopback only: server B's admin follows server A from the Federation page;
// A is in private mode, so its admin approves the request on A's Federation page; B's page then shows the
// follow accepted. A viewer's Follow button on A's page sends them to their own server's follow page
// (a small local WebFinger server stands in for the viewer's Fediverse server).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';

let a;
let b;
let browser;
let home;
let homeBase;

const ARGS = { args: ['--federation-allow-http-loopback'], env: { CASTD_FEDERATION_RETRY_BASE_MS: '300' } };

before(async () => {
  [a, b] = await Promise.all([Castd.start(ARGS), Castd.start(ARGS)]);
  for (const s of [a, b]) {
    await s.setConfig('serverurl', s.base);
    await s.setConfig('federation/enable', true);
  }
  await a.setConfig('name', 'Server A');
  await a.setConfig('federation/private', true);
  browser = await launchBrowser();
  // the viewer's own Fediverse server: WebFinger with a remote-follow template, and the page it points to
  home = createServer((req, res) => {
    if (req.url.startsWith('/.well-known/webfinger')) {
      res.writeHead(200, { 'content-type': 'application/jrd+json' });
      res.end(JSON.stringify({ links: [{ rel: 'http://ostatus.org/schema/1.0/subscribe', template: `${homeBase}/authorize_interaction?uri={uri}` }] }));
    } else if (req.url.startsWith('/authorize_interaction')) {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<h1 id="authorize">Follow?</h1>');
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise((r) => home.listen(0, '127.0.0.1', r));
  homeBase = `http://127.0.0.1:${home.address().port}`;
});

after(async () => {
  await browser?.close();
  await Promise.all([a?.stop(), b?.stop()]);
  home?.close();
});

test('B follows A from the Federation page; A approves the request', { timeout: 90_000 }, async () => {
  const bCtx = await newContext(browser, { httpCredentials: b.httpCredentials });
  const bPage = await bCtx.newPage();
  const bErrors = collectErrors(bPage);
  await bPage.goto(b.url('/admin/federation'));
  await bPage.locator('#fed-server-form input').fill(a.base);
  await bPage.locator('#fed-server-form button').click();
  await bPage.locator('.form-success').filter({ hasText: 'Following the server.' }).waitFor();
  await bPage.locator('#federated-servers').filter({ hasText: 'Server A' }).waitFor();

  const aCtx = await newContext(browser, { httpCredentials: a.httpCredentials });
  const aPage = await aCtx.newPage();
  const bActor = `${b.base}/federation/user/streamer`;
  await waitFor(async () => (await a.getJson('/api/admin/followers/pending', { admin: true })).total === 1, { message: 'a pending follow on A' });
  await aPage.goto(a.url('/admin/federation'));
  const row = aPage.locator(`#pending-followers tr[data-actor="${bActor}"]`);
  await row.waitFor();
  await aPage.screenshot({ path: screenshotPath('admin-federation.png') });
  await row.locator('button', { hasText: 'Approve' }).click();
  await aPage.locator(`#followers tr[data-actor="${bActor}"]`).waitFor();
  // the page reloads its two lists one after the other: the followers table may show B before the
  // pending one has dropped it, so wait (with a deadline) for the pending list to empty
  await waitFor(async () => (await aPage.locator('#pending-followers tr[data-actor]').count()) === 0, {
    message: 'the approved request gone from the pending list',
  });
  // B learns of the Accept: the server is no longer "follow pending"
  await waitFor(async () => Boolean((await b.getJson('/api/admin/federation/servers', { admin: true })).servers[0]?.followedAt), {
    message: 'the Accept reached B',
  });
  await bPage.reload();
  await bPage.locator('#federated-servers').filter({ hasText: 'offline' }).waitFor();
  assert.deepEqual(bErrors, []);
  await aCtx.close();
  await bCtx.close();
});

test("a viewer's Follow button leads to their server's follow page", { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(a.url('/'));
  await page.locator('#follow-button').click();
  const host = a.base.replace('http://', '');
  await page.locator('.modal').filter({ hasText: `@streamer@${host}` }).waitFor();
  await page.locator('.modal input').fill(`viewer@${homeBase.replace('http://', '')}`);
  await page.locator('.modal button[type="submit"]').click();
  await page.waitForURL(/\/authorize_interaction\?uri=/);
  assert.equal(decodeURIComponent(new URL(page.url()).searchParams.get('uri')), `${a.base}/federation/user/streamer`);
  await ctx.close();
});
