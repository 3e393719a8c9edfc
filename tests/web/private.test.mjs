// Private channels in the browser: a password channel's page shows only the prompt (nothing of the stream: no title,
// no player, no chat, not even a request for them), a wrong password its message, the right one the playing stream and
// a working chat; an invite link made on the admin's Privacy page opens the page unlocked; a JWT from a small local
// issuer (test-made RSA key, its JWKS served on loopback), the channel set to token visibility on the Privacy page,
// opens the page and chats under the name in its claims; an admission hook that denies shows its reason on the prompt.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { generateKeyPairSync, sign } from 'node:crypto';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, waitForPlayback } from './browser.mjs';
import { Castd, publishTestStream, waitFor } from './castd.mjs';

const SLUG = 'vip';
const BASE = `/c/${SLUG}`;
const KEY = 'e2e-private-vip-key-1';
const NAME = 'VIP Room';
const TITLE = 'Secret rehearsal 7f3a';
const PASSWORD = 'opensesame-42';
const ISSUER = 'https://members.example';
const AUDIENCE = 'castd-vip';

let castd;
let browser;
let publisher;
/** Loopback servers of the test: the JWKS issuer and the admission hook receiver. */
const servers = [];

/** POST JSON as the server admin (its credentials work on the channel's admin API); the parsed answer. */
async function adminPost(path, body) {
  const res = await castd.fetch(path, { admin: true, method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${path} → ${res.status}: ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}
const setChannel = (name, value) => adminPost(`${BASE}/api/admin/config/${name}`, { value });

/** Listen on 127.0.0.1 (port 0) with `handler`; resolves with the server's base URL. */
async function listen(handler) {
  const server = createServer(handler);
  servers.push(server);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${server.address().port}`;
}

const b64url = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await adminPost('/api/admin/channels/create', { slug: SLUG, name: NAME, adminPassword: 'vip-admin-password' });
  // The test's JWKS issuer and hook listen on 127.0.0.1: the server admin lets channels reach loopback.
  await adminPost('/api/admin/config/allowprivatetargets', { value: true });
  // Passthrough, one variant: the least work for the machine.
  await setChannel('video/streamoutputvariants', [
    { name: 'source', videoPassthrough: true, audioPassthrough: true, videoBitrate: 1200, scaledWidth: 0, scaledHeight: 0, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await setChannel('video/streamlatencylevel', 1);
  await setChannel('streamkeys', [{ key: KEY, comment: 'e2e' }]);
  await setChannel('streamtitle', TITLE);
  await setChannel('visibility', 'password');
  await adminPost(`${BASE}/api/admin/viewer/passwords/create`, { password: PASSWORD, comment: 'e2e audience' });
  assert.ok(castd.rtmpPort, 'castd logged no rtmp listener');
  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${KEY}`, { seconds: 300 });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;
  try {
    // Without a pass, status answers online and nothing else.
    await waitFor(async () => (await (await castd.fetch(`${BASE}/api/status`)).json()).online === true, { timeoutMs: 30_000, message: `${BASE}/api/status online` });
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
  for (const s of servers) s.close();
});

/** Send `text` in the page's chat; resolves with the line it became. */
async function chat(page, text) {
  await page.locator('#chat-send:enabled').waitFor({ timeout: 20_000 });
  await page.locator('#chat-input').fill(text);
  await page.locator('#chat-input').press('Enter');
  const line = page.locator('#chat-messages .chat-message[data-type="CHAT"]').filter({ hasText: text });
  await line.first().waitFor({ timeout: 10_000 });
  return line.first();
}

test('a password channel shows only its prompt; a wrong password its message; the right one plays and chats', { timeout: 150_000 }, async () => {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const requests = [];
  page.on('request', (r) => requests.push(new URL(r.url()).pathname));
  await page.goto(castd.url(`${BASE}/`));
  await page.locator('#access-prompt').waitFor();
  assert.equal((await page.locator('#access-channel-name').textContent()).trim(), NAME);
  await page.waitForTimeout(1500);
  // Nothing of the stream: not in the document, not asked for.
  const html = await page.content();
  assert.ok(!html.includes(TITLE), 'the stream title is nowhere in the document');
  for (const sel of ['video', '#chat-panel', '[data-testid="chat-panel"]', '#stream-title', 'img.thumbnail']) {
    assert.equal(await page.locator(sel).count(), 0, `no ${sel} before the password`);
  }
  const asked = requests.filter((p) => /\/(api\/config|api\/status|api\/chat|ws|hls\/|thumbnail\.jpg|preview\.gif|api\/emoji)/.test(p));
  assert.deepEqual(asked, [], 'the prompt asks for nothing of the stream');

  // A wrong password: its message, still no stream.
  await page.locator('#access-password').fill('not-the-password');
  await page.locator('#access-watch').click();
  await waitFor(async () => /wrong password/i.test((await page.locator('#access-message').textContent()) ?? ''), { message: 'the wrong-password message' });
  assert.equal(await page.locator('video').count(), 0);

  // The right one: the page itself, playing, with its chat.
  await page.locator('#access-password').fill(PASSWORD);
  await page.locator('#access-watch').click();
  await page.locator('#access-prompt').waitFor({ state: 'detached' });
  await waitFor(async () => (await page.locator('#stream-title').textContent()) === TITLE, { message: 'the stream title after unlocking' });
  await waitForPlayback(page);
  const text = `hello vip ${Date.now()}`;
  await chat(page, text);
  // A second unlocked viewer sees the message (the chat socket works behind the pass).
  const other = await newContext(browser);
  const p2 = await other.newPage();
  await p2.goto(castd.url(`${BASE}/`));
  await p2.locator('#access-password').fill(PASSWORD);
  await p2.locator('#access-watch').click();
  await p2.locator('#chat-messages .chat-message[data-type="CHAT"]').filter({ hasText: text }).waitFor({ timeout: 20_000 });
  await other.close();

  // Leave: back to the prompt, and a reload stays there.
  await page.locator('#access-leave').click();
  await page.locator('#access-prompt').waitFor();
  await page.reload();
  await page.locator('#access-prompt').waitFor();
  assert.ok(!(await page.content()).includes(TITLE), 'no title after leaving');
  assert.deepEqual(errors.filter((e) => !/401|Unauthorized|Failed to load resource/i.test(e)), [], 'no page errors');
  await ctx.close();
});

test('the directory lists the private channel as private, with nothing of its stream', { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url('/channels'));
  const card = page.locator(`#channel-list .channel-card[data-slug="${SLUG}"]`);
  await card.waitFor();
  assert.equal((await card.locator('.channel-name').textContent()).trim(), NAME);
  assert.equal((await card.locator('.channel-private').textContent()).trim(), 'Private');
  assert.equal(await card.locator('.live-badge').count(), 1, 'it says it is live');
  assert.equal(await card.locator('img').count(), 0, 'no thumbnail');
  assert.equal(await card.locator('.channel-title').count(), 0, 'no title');
  assert.equal(await card.locator('.channel-viewers').count(), 0, 'no viewer count');
  assert.ok(!(await page.content()).includes(TITLE), 'the title is nowhere on the page');
  await ctx.close();
});

test('an invite link made on the Privacy page opens the page unlocked', { timeout: 120_000 }, async () => {
  const adminCtx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const admin = await adminCtx.newPage();
  await admin.goto(castd.url(`${BASE}/admin/privacy`));
  await admin.locator('#viewer-invite-form').waitFor();
  assert.equal(await admin.locator('#visibility-password').isChecked(), true, 'the page shows the password visibility');
  // The password made in before() is listed by its comment only.
  await admin.locator('#viewer-passwords-table').getByText('e2e audience').waitFor();
  await admin.locator('#viewer-invite-comment').fill('press pass');
  await admin.locator('#viewer-invite-max-uses').fill('1');
  await admin.locator('#viewer-invite-create').click();
  const link = await admin.locator('#viewer-invite-link').inputValue({ timeout: 10_000 });
  assert.match(link, new RegExp(`^${castd.url(BASE).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/\\?invite=.+`), `an absolute invite link (${link})`);
  await admin.locator('#viewer-invites-table').getByText('press pass').waitFor();
  // The dashboard took the admin's own viewing pass (its replay player and thumbnails are ways out too).
  await waitFor(async () => (await adminCtx.cookies()).some((c) => c.name === `castd_pass_${SLUG}`), { message: "the admin's pass cookie" });
  await adminCtx.close();

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(link);
  await waitFor(async () => (await page.locator('#stream-title').textContent()) === TITLE, { message: 'the stream title through the invite' });
  assert.equal(await page.locator('#access-prompt').count(), 0, 'no prompt');
  assert.ok(!new URL(page.url()).searchParams.has('invite'), `the invite is gone from the address (${page.url()})`);
  await waitForPlayback(page, { seconds: 1 });
  await ctx.close();

  // Used once (max uses 1): a second browser gets the prompt and the server's message.
  const ctx2 = await newContext(browser);
  const p2 = await ctx2.newPage();
  await p2.goto(link);
  await p2.locator('#access-prompt').waitFor();
  await ctx2.close();
});

test('a JWT of a local issuer opens a token channel and chats under the name in its claims', { timeout: 150_000 }, async () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = 'e2e-rsa-1';
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  let jwksFetches = 0;
  const issuer = await listen((req, res) => {
    if (req.url === '/jwks.json') {
      jwksFetches++;
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    } else {
      res.writeHead(404).end();
    }
  });

  // The admin sets token visibility and the issuer on the Privacy page.
  const adminCtx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const admin = await adminCtx.newPage();
  await admin.goto(castd.url(`${BASE}/admin/privacy`));
  await admin.locator('#visibility-token').check();
  await admin.locator('#visibility-save').click();
  await admin.locator('#visibility-form .form-success').waitFor();
  await admin.locator('#jwt-jwks-url').fill(`${issuer}/jwks.json`);
  await admin.locator('#jwt-issuer').fill(ISSUER);
  await admin.locator('#jwt-audience').fill(AUDIENCE);
  await admin.locator('#jwt-login-url').fill('https://members.example/login');
  await admin.locator('#viewer-jwt-save').click();
  await admin.locator('#viewer-jwt-form .form-success').waitFor();
  await adminCtx.close();
  const access = (await castd.getJson(`${BASE}/api/admin/serverconfig`, { admin: true })).access;
  assert.equal(access.visibility, 'token');
  assert.equal(access.viewerJwt.jwksUrl, `${issuer}/jwks.json`);
  assert.equal(access.viewerJwt.audience, AUDIENCE);

  // Without a token: the prompt, with the Sign in link to the issuer's login page.
  const ctx0 = await newContext(browser);
  const p0 = await ctx0.newPage();
  await p0.goto(castd.url(`${BASE}/`));
  await p0.locator('#access-prompt').waitFor();
  assert.equal(await p0.locator('#access-signin').getAttribute('href'), 'https://members.example/login');
  await ctx0.close();

  const member = `Member Ada ${Date.now() % 10000}`;
  const now = Math.floor(Date.now() / 1000);
  const signed = `${b64url({ alg: 'RS256', typ: 'JWT', kid })}.${b64url({ iss: ISSUER, aud: AUDIENCE, sub: 'member-17', name: member, iat: now, exp: now + 600 })}`;
  const jwt = `${signed}.${sign('sha256', Buffer.from(signed), privateKey).toString('base64url')}`;

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url(`${BASE}/?jwt=${jwt}`));
  try {
    await waitFor(async () => (await page.locator('#stream-title').textContent({ timeout: 1000 })) === TITLE, { timeoutMs: 15_000, message: 'the stream title with the token' });
  } catch (e) {
    const said = await page.locator('#access-message').allTextContents();
    assert.fail(`${e.message}; the prompt says: ${said.join(' | ') || '(nothing)'}; JWKS fetched ${jwksFetches} times`);
  }
  assert.ok(jwksFetches >= 1, 'castd fetched the JWKS');
  assert.ok(!new URL(page.url()).searchParams.has('jwt'), 'the token is gone from the address');
  await waitForPlayback(page, { seconds: 1 });
  const text = `member says hi ${Date.now()}`;
  const line = await chat(page, text);
  // The author's own text (its badges are elements of their own).
  const author = await line.locator('.author').evaluate((el) => [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('').trim());
  assert.equal(author, member, 'the message is under the name in the claims');
  assert.equal(await line.locator('.author .auth-badge').count(), 1, 'as an authenticated chat user');
  assert.equal((await page.locator('#chat-display-name').textContent()).trim(), member);
  await ctx.close();
});

test('an admission hook that denies shows its reason on the prompt', { timeout: 90_000 }, async () => {
  const asked = [];
  const hook = await listen((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      asked.push(body);
      res.writeHead(403, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ message: 'Tickets are sold out' }));
    });
  });
  await setChannel('visibility', 'password');
  await setChannel('viewer/admissionhook', { url: `${hook}/admit`, secret: 'hook-secret-e2e', onPlay: true, onPublish: false, cacheSeconds: 0 });

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url(`${BASE}/`));
  await page.locator('#access-password').fill(PASSWORD);
  await page.locator('#access-watch').click();
  await waitFor(async () => ((await page.locator('#access-message').textContent({ timeout: 1000 })) ?? '').includes('Tickets are sold out'), {
    message: `the hook's reason on the prompt (the hook was asked ${asked.length} times)`,
  });
  assert.ok(asked.length >= 1, 'the hook was asked');
  assert.equal(await page.locator('video').count(), 0, 'no player');
  assert.ok(!(await page.content()).includes(TITLE), 'no title');
  await ctx.close();
});
