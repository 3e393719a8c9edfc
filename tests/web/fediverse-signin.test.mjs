// Fediverse chat sign-in in Chromium, end to end on loopback: a small node HTTP server stands in for the viewer's
// Fediverse server (WebFinger, an actor document with its own public key, and an inbox). A viewer opens "Sign in" in
// the chat menu, enters that account and presses "Send code"; castd sends the one-time code as a signed direct
// message to the actor's inbox, where the test reads it (after checking castd's HTTP signature) and types it into the
// dialog. The viewer is then signed in (notice, badge, may chat while authentication is required). A wrong account and
// a wrong code show the server's answers; with federation off the section is shown disabled.
import assert from 'node:assert/strict';
import { createHash, createVerify, generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';

let castd;
let browser;
let actor;

/** A one-account Fediverse server on 127.0.0.1: `alice@127.0.0.1:PORT`, whose inbox keeps what it is sent. */
async function startActor(username) {
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = publicKey.export({ type: 'spki', format: 'pem' });
  const inbox = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const u = new URL(req.url, 'http://x');
      const iri = `${self.base}/users/${username}`;
      const json = (status, type, doc) => {
        res.writeHead(status, { 'content-type': type });
        res.end(JSON.stringify(doc));
      };
      if (req.method === 'GET' && u.pathname === '/.well-known/webfinger') {
        if (u.searchParams.get('resource') !== `acct:${self.account}`) return res.writeHead(404).end();
        return json(200, 'application/jrd+json', {
          subject: `acct:${self.account}`,
          links: [{ rel: 'self', type: 'application/activity+json', href: iri }],
        });
      }
      if (req.method === 'GET' && u.pathname === `/users/${username}`) {
        return json(200, 'application/activity+json', {
          '@context': ['https://www.w3.org/ns/activitystreams', 'https://w3id.org/security/v1'],
          id: iri,
          type: 'Person',
          preferredUsername: username,
          name: `${username} (test)`,
          url: `${self.base}/@${username}`,
          inbox: `${iri}/inbox`,
          publicKey: { id: `${iri}#main-key`, owner: iri, publicKeyPem: pem },
        });
      }
      if (req.method === 'POST' && u.pathname === `/users/${username}/inbox`) {
        inbox.push({ method: req.method, path: req.url, headers: req.headers, body });
        return res.writeHead(202).end();
      }
      res.writeHead(404).end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const host = `127.0.0.1:${server.address().port}`;
  const self = { base: `http://${host}`, account: `${username}@${host}`, inbox, close: () => server.close() };
  return self;
}

/** Check a received request's HTTP signature (rsa-sha256, with a digest of the body) against castd's actor key. */
async function verifySignature(r) {
  const sig = r.headers.signature;
  assert.ok(sig, 'the DM is signed');
  const field = (name) => new RegExp(`${name}="([^"]*)"`).exec(sig)?.[1];
  const digest = `SHA-256=${createHash('sha256').update(r.body).digest('base64')}`;
  assert.equal(r.headers.digest, digest, 'the digest matches the body');
  const text = field('headers')
    .split(' ')
    .map((h) => (h === '(request-target)' ? `(request-target): ${r.method.toLowerCase()} ${r.path}` : `${h}: ${r.headers[h]}`))
    .join('\n');
  const keyId = field('keyId');
  const doc = await (await fetch(keyId.split('#')[0], { headers: { accept: 'application/activity+json' } })).json();
  assert.equal(doc.publicKey.id, keyId);
  const ok = createVerify('RSA-SHA256').update(text).verify(doc.publicKey.publicKeyPem, Buffer.from(field('signature'), 'base64'));
  assert.ok(ok, 'castd signed the DM with its actor key');
}

/** The code in the newest direct message (a Create of a Note) the actor received. */
async function codeFromDm(since) {
  let found;
  await waitFor(
    () => {
      found = actor.inbox.slice(since).map((r) => ({ r, v: JSON.parse(r.body) })).find(({ v }) => v.type === 'Create');
      return Boolean(found);
    },
    { timeoutMs: 15_000, message: 'the DM with the code' },
  );
  const { r, v } = found;
  assert.deepEqual(v.object.to, [`${actor.base}/users/alice`], 'addressed to the account only');
  assert.equal(v.object.tag?.[0]?.type, 'Mention');
  await verifySignature(r);
  const code = /<strong>([0-9A-Z]{5}-[0-9A-Z]{5})<\/strong>/.exec(v.object.content)?.[1];
  assert.ok(code, `a ten-character code in ${v.object.content}`);
  return code;
}

before(async () => {
  castd = await Castd.start({ args: ['--federation-allow-http-loopback'], env: { CASTD_FEDERATION_RETRY_BASE_MS: '300' } });
  await castd.setConfig('serverurl', castd.base);
  await castd.setConfig('name', 'Fedi Stream');
  await castd.setConfig('federation/enable', true);
  actor = await startActor('alice');
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await castd?.stop();
  actor?.close();
});

async function openViewer() {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/'));
  await page.locator('#chat-send:enabled').waitFor({ timeout: 20_000 });
  return { ctx, page, errors };
}

test('a viewer signs in with a Fediverse account: the code arrives by DM and is typed into the dialog', { timeout: 120_000 }, async () => {
  await castd.setConfig('chat/requireauthentication', true);
  const { ctx, page, errors } = await openViewer();
  await page.locator('#chat-signin-button').click();
  const section = page.locator('section[data-provider="fediverse"]');
  await section.waitFor();

  // Not an account: refused in the page. An account that does not exist: the server's answer.
  await page.locator('#fediverse-account').fill('alice');
  await page.locator('#fediverse-send').click();
  await page.locator('#fediverse-error').filter({ hasText: 'user@host' }).waitFor();
  await page.locator('#fediverse-account').fill(`nobody@${actor.base.replace('http://', '')}`);
  await page.locator('#fediverse-send').click();
  await page.locator('#fediverse-error').filter({ hasText: /^Could not send the code: .*404/ }).waitFor({ timeout: 15_000 });

  // The right account: the code goes out as a DM.
  const before = actor.inbox.length;
  await page.locator('#fediverse-account').fill(`@${actor.account}`);
  await page.locator('#fediverse-send').click();
  await page.locator('#fediverse-sent').filter({ hasText: `A code was sent to ${actor.account}` }).waitFor({ timeout: 15_000 });
  assert.equal(await page.locator('#fediverse-error').count(), 0, 'the earlier error is gone');
  const code = await codeFromDm(before);
  await page.screenshot({ path: screenshotPath('chat-fediverse-signin.png') });

  // A wrong code: the server's 403 message, and the dialog stays on the code step.
  await page.locator('#fediverse-code').fill(code === '00000-00000' ? '00000-00001' : '00000-00000');
  await page.locator('#fediverse-verify').click();
  await page.locator('#fediverse-error').filter({ hasText: 'Could not sign in: the code is not valid' }).waitFor({ timeout: 10_000 });

  // The right code: signed in.
  await page.locator('#fediverse-code').fill(code);
  await page.locator('#fediverse-verify').click();
  await page.locator('#chat-signin-notice').filter({ hasText: `You are signed in as ${actor.account}` }).waitFor({ timeout: 10_000 });
  assert.equal(await page.locator('.modal').count(), 0, 'the dialog closes');
  await page.locator('.chat-me .auth-badge').waitFor({ timeout: 10_000 });
  assert.equal(await page.locator('#chat-signin-button').count(), 0, 'no "Sign in" once signed in');

  const text = `fediverse hello ${Date.now()}`;
  await page.locator('#chat-send:enabled').waitFor({ timeout: 10_000 });
  await page.locator('#chat-input').fill(text);
  await page.locator('#chat-input').press('Enter');
  const line = page.locator('#chat-messages .chat-message[data-type="CHAT"]').filter({ hasText: text });
  await line.first().waitFor({ timeout: 10_000 });
  assert.equal(await line.locator('.author .auth-badge').count(), 1, 'the message carries the signed-in badge');

  const users = await castd.getJson('/api/admin/users?limit=50', { admin: true });
  const me = users.results.find((u) => u.authenticated);
  assert.ok(me, `the user is listed as authenticated: ${JSON.stringify(users.results)}`);
  assert.equal(me.authProvider, 'fediverse');
  assert.deepEqual(errors.filter((e) => e.startsWith('pageerror')), [], 'no uncaught page errors');
  await ctx.close();
  await castd.setConfig('chat/requireauthentication', false);
});

test('with federation off the Fediverse section is shown disabled', { timeout: 60_000 }, async () => {
  await castd.setConfig('federation/enable', false);
  try {
    const { ctx, page } = await openViewer();
    await page.locator('#chat-signin-button').click();
    await page.locator('#fediverse-unavailable').filter({ hasText: 'not enabled federation' }).waitFor();
    assert.ok(await page.locator('#fediverse-send').isDisabled(), '"Send code" is disabled');
    assert.ok(await page.locator('#fediverse-account').isDisabled(), 'the account field is disabled');
    // IndieAuth is still offered (the server URL is set).
    await page.locator('#indieauth-url').waitFor();
    await ctx.close();
  } finally {
    await castd.setConfig('federation/enable', true);
  }
});
