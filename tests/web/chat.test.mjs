// Chat between two viewers: a message typed on one page appears on the other (and back), over the real websocket.
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

/** Open the viewer page in a fresh context (its own localStorage, so its own chat user) and wait for the socket. */
async function openChat() {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url('/'));
  await page.locator('#chat-input').waitFor();
  try {
    // The send button is enabled once the websocket is open.
    await page.locator('#chat-send:enabled').waitFor({ timeout: 20_000 });
  } catch {
    const notice = await page.locator('.chat-notice.error').allTextContents();
    assert.fail(`the chat did not connect within 20 s (page says: ${notice.join(' | ') || 'nothing'})`);
  }
  const name = (await page.locator('#chat-display-name').textContent()).trim();
  return { ctx, page, name };
}

/** The CHAT lines of a page whose text contains `text`. */
const linesWith = (page, text) => page.locator('#chat-messages .chat-message[data-type="CHAT"]').filter({ hasText: text });

test('a message typed on one page appears on another', { timeout: 90_000 }, async () => {
  const probe = await castd.fetch('/api/chat/register', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: '{}',
  });
  assert.equal(probe.status, 200, `POST /api/chat/register → ${probe.status} ${await probe.text()}: this castd has no chat`);

  const a = await openChat();
  const b = await openChat();
  assert.notEqual(a.name, b.name, 'the two pages are different chat users');

  const fromA = `hello from page A ${Date.now()}`;
  await a.page.locator('#chat-input').fill(fromA);
  await a.page.locator('#chat-input').press('Enter');
  const onB = linesWith(b.page, fromA);
  await onB.first().waitFor({ timeout: 10_000 });
  assert.equal(await onB.count(), 1, 'the message appears once on page B');
  assert.equal((await onB.locator('.author').textContent()).trim(), a.name, 'with the sender as author');
  await linesWith(a.page, fromA).first().waitFor({ timeout: 10_000 });
  assert.equal(await a.page.locator('#chat-input').inputValue(), '', 'the composer is cleared after sending');

  // And the other way, with the send button; markup typed by a viewer must not become elements.
  const fromB = `reply from B <b>not bold</b> ${Date.now()}`;
  await b.page.locator('#chat-input').fill(fromB);
  await b.page.locator('#chat-send').click();
  const onA = linesWith(a.page, 'reply from B');
  await onA.first().waitFor({ timeout: 10_000 });
  assert.equal((await onA.locator('.author').textContent()).trim(), b.name);
  assert.equal(await onA.locator('.body b').count(), 0, 'viewer markup is escaped or stripped, not rendered');

  // A page opened afterwards gets both messages from the history.
  const c = await openChat();
  await linesWith(c.page, fromA).first().waitFor({ timeout: 10_000 });
  await linesWith(c.page, 'reply from B').first().waitFor({ timeout: 10_000 });

  await Promise.all([a.ctx.close(), b.ctx.close(), c.ctx.close()]);
});
