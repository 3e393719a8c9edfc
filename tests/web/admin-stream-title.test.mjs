// An admin changes the stream title in the dashboard (/admin/general) and a viewer page that is already open shows
// it after its status poll (10 s). Screenshot of the admin overview: admin-overview.png.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd } from './castd.mjs';

let castd;
let browser;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await castd.setConfig('name', 'E2E Test Cast');
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

test('the admin overview loads behind Basic auth', { timeout: 60_000 }, async () => {
  // Without credentials the dashboard's API calls are refused.
  const res = await castd.fetch('/api/admin/status');
  assert.equal(res.status, 401, 'admin API without credentials');

  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/'));
  await page.locator('[data-testid="overview"]').waitFor();
  assert.equal(await page.locator('a[data-page="overview"]').getAttribute('aria-current'), 'page');
  await page.locator('#overview-online .badge').filter({ hasText: /offline/i }).waitFor();
  await page.locator('.admin-brand').filter({ hasText: 'E2E Test Cast' }).waitFor();
  await page.screenshot({ path: screenshotPath('admin-overview.png') });
  await ctx.close();
});

test('a stream title saved in the dashboard appears on the open viewer page', { timeout: 60_000 }, async () => {
  await castd.setConfig('streamtitle', 'Before the change');
  const viewerCtx = await newContext(browser);
  const viewer = await viewerCtx.newPage();
  await viewer.goto(castd.url('/'));
  await viewer.locator('#stream-title').filter({ hasText: 'Before the change' }).waitFor();

  const adminCtx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const admin = await adminCtx.newPage();
  await admin.goto(castd.url('/admin/'));
  await admin.locator('[data-testid="overview"]').waitFor();
  // Navigate the way a person would: the "General" link in the side bar (client-side routing).
  await admin.locator('a[data-page="general"]').click();
  await admin.waitForURL(/\/admin\/general$/);
  const input = admin.locator('#stream-title-input');
  await input.waitFor();
  assert.equal(await input.inputValue(), 'Before the change', 'the form shows the current title');

  const title = `Live from the e2e test ${Date.now()}`;
  await input.fill(title);
  await admin.locator('#stream-title-save').click();
  await admin.locator('.form-success').first().waitFor();
  assert.equal(await admin.locator('.form-error').count(), 0, 'no error after saving');

  // The server has it ...
  const status = await castd.getJson('/api/status');
  assert.equal(status.streamTitle, title, '/api/status streamTitle');
  // ... and the open viewer page picks it up at its next status poll (every 10 s), without a reload.
  await viewer.locator('#stream-title').filter({ hasText: title }).waitFor({ timeout: 15_000 });

  // A reload of the dashboard shows the saved value too.
  await admin.reload();
  await admin.locator('#stream-title-input').waitFor();
  assert.equal(await admin.locator('#stream-title-input').inputValue(), title);

  await adminCtx.close();
  await viewerCtx.close();
});
