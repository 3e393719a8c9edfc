// Secrets the server configuration shows masked (the Discord webhook URL, the SRT passphrase) still work in the
// admin: the Discord form starts with an empty field that says a URL is set, and saving it with another go-live
// message sends the masked value back, so the saved URL stays (and never reaches the page); the SRT passphrase
// field shows the mask and saving it unchanged keeps the passphrase.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd } from './castd.mjs';

const HOOK = 'https://discord.com/api/webhooks/123/hook-secret-token';
let castd;
let browser;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await castd.setConfig('notifications/discord', { enabled: true, webhook: HOOK, goLiveMessage: 'up' });
  await castd.setConfig('srt/passphrase', 'srt-secret-passphrase');
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

/** The `value` of every setter call the page makes to `name`. */
function setterCalls(page, name) {
  const sent = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url().endsWith(`/api/admin/config/${name}`)) sent.push(JSON.parse(r.postData()).value);
  });
  return sent;
}

test('the Discord form and the SRT passphrase field keep the saved secrets', { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  const discord = setterCalls(page, 'notifications/discord');
  const srt = setterCalls(page, 'srt/passphrase');

  await page.goto(castd.url('/admin/notifications'));
  const field = page.locator('#discord-webhook-input');
  await field.waitFor();
  assert.equal(await field.inputValue(), '', 'the saved URL is not shown');
  assert.match(await field.getAttribute('placeholder'), /set/);
  const form = page.locator('#discord-notifications-form');
  await form.locator('input:not([type=checkbox]):not([type=url])').fill('we are up');
  await form.locator('button[type=submit]').click();
  await form.locator('.form-success').waitFor();
  assert.deepEqual(discord, [{ enabled: true, webhook: '********', goLiveMessage: 'we are up' }]);
  const cfg = await castd.getJson('/api/admin/serverconfig', { admin: true });
  assert.deepEqual(cfg.notifications.discord, { enabled: true, webhook: '********', goLiveMessage: 'we are up' });

  await page.goto(castd.url('/admin/server'));
  const pass = page.locator('#srt-passphrase-input');
  await pass.waitFor();
  assert.equal(await pass.inputValue(), '********');
  await page.locator('form[data-setting="srt/passphrase"] button[type=submit]').click();
  await page.locator('form[data-setting="srt/passphrase"] .form-success').waitFor();
  assert.deepEqual(srt, ['********']);
  assert.equal((await castd.getJson('/api/admin/serverconfig', { admin: true })).srtPassphrase, '********');

  const html = await page.content();
  assert.ok(!html.includes('hook-secret-token') && !html.includes('srt-secret-passphrase'), 'no secret in the page');
  await ctx.close();
});

test('an access token is shown once, listed by its first characters, and deleted from the list', { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/access-tokens'));
  await page.locator('#access-token-form').waitFor();
  await page.fill('#access-token-name', 'owlbot');
  await page.locator('#access-token-form input[value="CAN_SEND_MESSAGES"]').check();
  await page.click('#access-token-create');
  const created = page.locator('#access-token-created code');
  await created.waitFor();
  const token = await created.textContent();
  assert.equal(token.length, 44, 'the whole token, once');
  const row = page.locator('#access-tokens-table tbody tr').filter({ hasText: 'owlbot' });
  await row.waitFor();
  assert.equal((await row.locator('td.mono').textContent()).trim(), `${token.slice(0, 8)}…`);
  const list = await castd.getJson('/api/admin/accesstokens', { admin: true });
  assert.ok(!JSON.stringify(list).includes(token), 'the list never holds the token');
  page.once('dialog', (d) => void d.accept());
  await row.getByRole('button', { name: 'Delete' }).click();
  await page.getByText('Token deleted.').waitFor();
  assert.deepEqual(await castd.getJson('/api/admin/accesstokens', { admin: true }), []);
  await ctx.close();
});
