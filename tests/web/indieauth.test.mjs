// IndieAuth chat sign-in in Chromium across two castd servers on loopback: a viewer on B opens "Sign in" in the chat
// user menu, enters A's URL, is sent to A where A's admin approves, comes back to B signed in (badge, profile name)
// and can chat while B requires authentication. Refusals come back as readable messages in the chat panel.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd } from './castd.mjs';

const env = { CASTD_INDIEAUTH_ALLOW_LOOPBACK: '1' };
let a;
let b;
let browser;

before(async () => {
  [a, b] = await Promise.all([Castd.start({ env }), Castd.start({ env })]);
  await a.setConfig('serverurl', a.base);
  await a.setConfig('name', 'Stream A');
  await b.setConfig('serverurl', b.base);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await Promise.all([a?.stop(), b?.stop()]);
});

/** B's viewer page in a context that holds A's admin credentials (A's approval page asks for them). */
async function openViewer() {
  const ctx = await newContext(browser, { httpCredentials: a.httpCredentials });
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(b.url('/'));
  await page.locator('#chat-send:enabled').waitFor({ timeout: 20_000 });
  return { ctx, page, errors };
}

/** Open the sign-in dialog and submit `website`. */
async function signIn(page, website) {
  await page.locator('#chat-signin-button').click();
  await page.locator('#indieauth-url').fill(website);
  await page.locator('#indieauth-submit').click();
}

test('a viewer signs in on B with A, approved by A\'s admin, and may chat when authentication is required', { timeout: 120_000 }, async () => {
  await b.setConfig('chat/requireauthentication', true);
  const { ctx, page, errors } = await openViewer();
  assert.equal(await page.locator('#chat-display-name .auth-badge, .chat-me .auth-badge').count(), 0, 'not signed in yet');

  await signIn(page, a.base);
  // A's approval page, behind A's admin password.
  await page.waitForURL((u) => u.href.startsWith(a.url('/api/auth/provider/indieauth')), { timeout: 20_000 });
  await page.locator('#indieauth-approval').waitFor();
  assert.equal((await page.locator('#me').textContent()).trim(), `${a.base}/`);
  assert.equal((await page.locator('#client-id').textContent()).trim(), `${b.base}/`);
  await page.getByRole('button', { name: 'Approve' }).click();

  // Back on B, signed in.
  await page.waitForURL((u) => u.origin === new URL(b.base).origin && u.pathname === '/', { timeout: 20_000 });
  await page.locator('#chat-signin-notice').filter({ hasText: 'You are signed in' }).waitFor({ timeout: 20_000 });
  assert.ok(!page.url().includes('indieauth='), `the outcome is removed from the address bar: ${page.url()}`);
  await page.locator('#chat-send:enabled').waitFor({ timeout: 20_000 });
  await page.locator('.chat-me .auth-badge').waitFor({ timeout: 10_000 });
  assert.equal((await page.locator('#chat-display-name').textContent()).trim(), 'Stream A', 'the profile name is taken');
  assert.equal(await page.locator('#chat-signin-button').count(), 0, 'no "Sign in" once signed in');

  const text = `signed-in hello ${Date.now()}`;
  await page.locator('#chat-input').fill(text);
  await page.locator('#chat-input').press('Enter');
  const line = page.locator('#chat-messages .chat-message[data-type="CHAT"]').filter({ hasText: text });
  await line.first().waitFor({ timeout: 10_000 });
  assert.equal(await line.locator('.author .auth-badge').count(), 1, 'the message carries the signed-in badge');

  const users = await b.getJson('/api/admin/users?limit=50', { admin: true });
  const me = users.results.find((u) => u.displayName === 'Stream A');
  assert.ok(me?.authenticated, `B lists the user as authenticated: ${JSON.stringify(users.results)}`);
  assert.equal(me.authProvider, 'indieauth');
  // (Resource 404s, such as the offline thumbnail, are not page errors.)
  assert.deepEqual(errors.filter((e) => e.startsWith('pageerror')), [], 'no uncaught page errors');
  await ctx.close();
  await b.setConfig('chat/requireauthentication', false);
});

test('refusals are readable messages in the chat panel', { timeout: 120_000 }, async () => {
  const { ctx, page } = await openViewer();

  // An address this server will not contact: refused before leaving B.
  await signIn(page, 'http://10.20.30.40/');
  const startError = page.locator('#indieauth-error');
  await startError.waitFor({ timeout: 15_000 });
  assert.match(await startError.textContent(), /private or local address/);
  await page.getByRole('button', { name: 'Close' }).click();

  // A vouches for 127.0.0.1, but the viewer entered localhost: B refuses after the round trip.
  const port = new URL(a.base).port;
  await signIn(page, `http://localhost:${port}/`);
  await page.locator('#indieauth-approval').waitFor({ timeout: 20_000 });
  await page.getByRole('button', { name: 'Approve' }).click();
  const notice = page.locator('#chat-signin-notice');
  await notice.waitFor({ timeout: 20_000 });
  assert.match(await notice.textContent(), /Sign-in failed: Your website vouched for a different address/);
  // The page has just come back from A: the user menu appears once chat has reconnected.
  await page.locator('#chat-signin-button').waitFor({ state: 'visible', timeout: 20_000 });
  assert.equal(await page.locator('.chat-me .auth-badge').count(), 0, 'not signed in after a refusal');

  // Denied by A's admin.
  await signIn(page, a.base);
  await page.locator('#indieauth-approval').waitFor({ timeout: 20_000 });
  await page.getByRole('button', { name: 'Deny' }).click();
  await page.locator('#chat-signin-notice').filter({ hasText: 'was not approved' }).waitFor({ timeout: 20_000 });
  await ctx.close();
});
