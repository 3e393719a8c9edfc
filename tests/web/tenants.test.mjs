// Channels are tenants (issue 52, finding 1), in Chromium: a channel admin's hostile custom JavaScript, CSS and HTML
// (a script that changes the server admin's password and reads another channel's config, CSS and HTML that load from
// elsewhere or point at the admin API) do nothing to the people who open the channel's page:
// (a) the server admin, signed in to /admin/ (Basic credentials the browser answers every challenge with), opens the
//     channel's page: no request reaches an admin route, the old password still works, nothing changed;
// (b) a viewer of a private channel (its pass cookie, a chat token in localStorage) opens the hostile channel's page:
//     no request touches the private channel.
// Every request that would leave loopback is aborted in the browser (and counted as a failure).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd, publishTestStream, waitFor } from './castd.mjs';

const HOSTILE = 'hostile';
const HOSTILE_PW = 'hostile-channel-admin-pw';
const VIP = 'vip';
const VIP_PASSWORD = 'vip-viewer-password-1';
const STOLEN = 'pwned-by-the-tenant';

const SCRIPT = `
fetch('/api/admin/config/adminpass', {method: 'POST', headers: {'Content-Type': 'application/json'},
  body: JSON.stringify({value: '${STOLEN}'})}).then((r) => { document.documentElement.dataset.pwned = String(r.status); });
fetch('/c/${VIP}/api/config').then((r) => r.text()).then((t) => { document.documentElement.dataset.leak = t.slice(0, 40); });
document.documentElement.dataset.tokens = JSON.stringify(Object.keys(localStorage));
`;
const CSS = `@import url(https://evil.example/a.css);
body { background: url(https://evil.example/t.png); }
#extra-page-content { background-image: u\\72l(/api/admin/disconnect); }
</style><script>document.documentElement.dataset.css = 'ran'</script>`;
const HTML = `**hello** <img src="/api/admin/disconnect"><img src="/img/emoji/%2e%2e/%2e%2e/api/admin/yp/reset">
<img src=x onerror="fetch('/api/admin/config/adminpass')"><iframe src="/api/admin/serverconfig"></iframe>
<form action="/api/admin/config/adminpass" method="post"><input name="value" value="${STOLEN}"><button id="go">go</button></form>
<link rel="stylesheet" href="https://evil.example/x.css"><meta http-equiv="refresh" content="0;url=/c/${VIP}/api/config">`;

let castd;
let browser;
let customJsAnswer;

async function post(path, body, auth) {
  const headers = { 'Content-Type': 'application/json' };
  if (auth) headers.Authorization = `Basic ${Buffer.from(`admin:${auth}`).toString('base64')}`;
  return castd.fetch(path, { method: 'POST', headers, body: JSON.stringify(body) });
}
async function ok(res) {
  const text = await res.text();
  assert.ok(res.ok, `${res.url} → ${res.status}: ${text.slice(0, 300)}`);
}
const adminStatus = (password) =>
  castd.fetch('/api/admin/status', { headers: { Authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}` } });

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await ok(await post('/api/admin/channels/create', { slug: HOSTILE, name: 'Hostile', adminPassword: HOSTILE_PW }, castd.password));
  await ok(await post('/api/admin/channels/create', { slug: VIP, name: 'VIP', adminPassword: 'vip-channel-admin-pw' }, castd.password));
  // The tenant writes its hostile content, as its own admin. Custom JavaScript is refused (it is the server admin's).
  const set = (name, value) => post(`/c/${HOSTILE}/api/admin/config/${name}`, { value }, HOSTILE_PW);
  // (Checked in the first test, after the page is opened, so that a castd that takes it shows what the script does.)
  customJsAnswer = await set('customjavascript', SCRIPT);
  await ok(await set('customstyles', CSS));
  await ok(await set('pagecontent', HTML));
  await ok(await set('offlinemessage', HTML));
  await ok(await set('serversummary', `<img src="/api/admin/disconnect"> summary`));
  await ok(await set('externalactions', [{ url: '', html: HTML, title: 'Open me', description: '', icon: '/api/admin/disconnect', color: '', openExternally: false }]));
  // The private channel: a viewer password.
  const vip = (name, value) => post(`/c/${VIP}/api/admin/config/${name}`, { value }, castd.password);
  await ok(await vip('visibility', 'password'));
  await ok(await post(`/c/${VIP}/api/admin/viewer/passwords/create`, { password: VIP_PASSWORD, comment: 'e2e' }, castd.password));
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

/** A context whose requests are recorded (path and host) and never leave loopback (those are aborted and kept). */
async function recordingContext(options = {}) {
  const ctx = await newContext(browser, options);
  const requests = [];
  const outside = [];
  await ctx.route(
    (url) => url.hostname !== '127.0.0.1',
    (route) => {
      outside.push(route.request().url());
      return route.abort();
    },
  );
  ctx.on('request', (r) => requests.push(new URL(r.url())));
  return { ctx, requests, outside };
}

/** Open the hostile channel's page and wait until it has shown the tenant's content and the network is quiet. */
async function openHostile(page) {
  await page.goto(castd.url(`/c/${HOSTILE}/`));
  await page.locator('#extra-page-content').waitFor({ timeout: 20_000 });
  await waitFor(async () => (await page.locator('#custom-styles').count()) === 1, { message: 'the custom styles applied' });
  await page.locator('.external-actions button').first().click();
  await page.locator('.modal .html-content, [role="dialog"] .html-content').first().waitFor({ timeout: 10_000 });
  await page.waitForLoadState('networkidle');
}

async function nothingRan(page) {
  const data = await page.evaluate(() => ({ ...document.documentElement.dataset }));
  assert.deepEqual(data, {}, 'none of the tenant\'s script ran');
  assert.equal(await page.locator('#custom-javascript').count(), 0, 'a channel page loads no custom JavaScript');
  const hostileHtml = await page.locator('#extra-page-content').innerHTML();
  for (const bad of ['<script', 'onerror', '<form', '<iframe', '<link', '<meta', 'api/admin']) {
    assert.ok(!hostileHtml.toLowerCase().includes(bad), `${bad} in the page content: ${hostileHtml}`);
  }
}

test('the server admin, signed in, opens a hostile channel page: nothing of the admin changes', { timeout: 90_000 }, async () => {
  const { ctx, requests, outside } = await recordingContext({ httpCredentials: { username: 'admin', password: castd.password } });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/'));
  await page.waitForLoadState('networkidle');
  assert.ok(requests.some((u) => u.pathname.startsWith('/api/admin/')), 'the admin pages used the admin API (credentials cached)');
  requests.length = 0;
  await openHostile(page);
  await nothingRan(page);
  const admin = requests.filter((u) => /(^|\/)api\/admin\//.test(u.pathname));
  assert.deepEqual(admin.map((u) => u.pathname), [], 'the channel page made no request to an admin route');
  assert.deepEqual(outside, [], 'nothing was asked of another site');
  assert.equal((await adminStatus(castd.password)).status, 200, 'the server admin password still works');
  assert.equal((await adminStatus(STOLEN)).status, 401, 'the tenant did not set it');
  assert.equal(customJsAnswer.status, 403, 'a channel admin may not set custom JavaScript');
  assert.match((await customJsAnswer.json()).message, /only for the server admin/);
  await ctx.close();
});

test('a viewer of a private channel opens a hostile channel page: nothing of the private channel is read', { timeout: 90_000 }, async () => {
  const { ctx, requests, outside } = await recordingContext();
  const page = await ctx.newPage();
  await page.goto(castd.url(`/c/${VIP}/`));
  await page.locator('#access-password').fill(VIP_PASSWORD);
  await page.locator('#access-watch').click();
  await page.locator('#access-prompt').waitFor({ state: 'detached', timeout: 20_000 });
  const cookies = await ctx.cookies();
  assert.ok(cookies.length > 0, 'the viewer holds the private channel\'s pass cookie');
  // A chat token of the private channel in localStorage (the page's own, or one written as the page would).
  const key = `castd.chat.accessToken/c/${VIP}`;
  await page.evaluate((k) => {
    if (!localStorage.getItem(k)) localStorage.setItem(k, 'vip-chat-token');
  }, key);
  await page.close();
  // A new tab of the same browser (its cookies and storage), whose every request is recorded.
  const hostile = await ctx.newPage();
  const asked = [];
  hostile.on('request', (r) => asked.push(new URL(r.url())));
  await openHostile(hostile);
  await nothingRan(hostile);
  assert.ok(requests.length > 0 && asked.some((u) => u.pathname.startsWith(`/c/${HOSTILE}/api/config`)), 'the hostile page was recorded');
  const vip = asked.filter((u) => u.pathname.startsWith(`/c/${VIP}/`) || u.pathname === `/c/${VIP}`);
  assert.deepEqual(vip.map((u) => u.pathname), [], 'the hostile page made no request to the private channel');
  assert.deepEqual(outside, [], 'nothing was asked of another site');
  assert.ok(await hostile.evaluate((k) => localStorage.getItem(k), key), 'the token is still there (nothing read it, nothing was sent)');
  await ctx.close();
});

// Finding 3: a chat user's hostile emoji (a src that, percent-decoded or path-normalised, is an admin route) makes the
// admin's browser call nothing when the admin opens Chat → Messages, and the live stream stays up.
const HOSTILE_EMOJI = [
  '<img src="/img/emoji/%2e%2e/%2e%2e/api/admin/disconnect">',
  '<img src="/img/emoji/..%2f..%2fapi/admin/disconnect">',
  '<img src="/img/emoji/%252e%252e/%252e%252e/api/admin/yp/reset">',
  '<img src="/img/emoji/\\..\\..\\api\\admin\\disconnect">',
  '<img src="/img/emoji/./../../api/admin/update/start">',
  '<img src="//127.0.0.1/api/admin/disconnect">',
  '<img src="/img/emoji/smile.png" srcset="/api/admin/disconnect 1x">',
  '<img src="/c/x/img/emoji/%2e%2e/%2e%2e/%2e%2e/api/admin/disconnect">',
];

test('the admin opens chat moderation with hostile emoji in the list: no request leaves for an admin route, the stream stays up', { timeout: 150_000 }, async () => {
  const status = async () => (await (await castd.fetch('/api/status')).json()).online;
  const key = 'tenants-e2e-stream-key-1';
  await castd.setConfig('streamkeys', [{ key, comment: 'e2e' }]);
  const publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${key}`, { seconds: 120 });
  try {
    await waitFor(status, { timeoutMs: 60_000, message: 'the stream went live' });
    // The hostile chat user: a chat page of its own whose websocket sends every form, then a marker.
    const { ctx: userCtx } = await recordingContext();
    const chatPage = await userCtx.newPage();
    await chatPage.goto(castd.url('/'));
    await chatPage.locator('#chat-send:enabled').waitFor({ timeout: 30_000 });
    const marker = `hostile-emoji-marker-${Date.now()}`;
    const reg = await (await castd.fetch('/api/chat/register', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' })).json();
    const sent = await chatPage.evaluate(
      async ({ url, bodies }) => {
        const ws = new WebSocket(url);
        await new Promise((ok, fail) => {
          ws.onopen = ok;
          ws.onerror = () => fail(new Error('the websocket failed'));
        });
        // Paced under the chat's rate limit (a burst of 5, then 1.5 a second).
        for (const body of bodies) {
          ws.send(JSON.stringify({ type: 'CHAT', body }));
          await new Promise((ok) => setTimeout(ok, 800));
        }
        ws.close();
        return bodies.length;
      },
      { url: `${castd.url('/ws').replace(/^http/, 'ws')}?accessToken=${encodeURIComponent(reg.accessToken)}`, bodies: [...HOSTILE_EMOJI.map((b) => `look ${b}`), marker] },
    );
    assert.equal(sent, HOSTILE_EMOJI.length + 1);
    await userCtx.close();

    // What castd stored points at no admin route, however it is decoded.
    await waitFor(async () => {
      const rows = await (await castd.fetch('/api/admin/chat/messages', { admin: true })).json();
      return rows.some((m) => (m.body ?? '').includes(marker));
    }, { timeoutMs: 20_000, message: 'the marker reached the admin\'s list' });
    const stored = await (await castd.fetch('/api/admin/chat/messages', { admin: true })).json();
    assert.ok(stored.length >= 2, `the hostile messages are in the list (some emoji may be dropped): ${JSON.stringify(stored)}`);
    for (const m of stored) {
      const body = decodeURIComponent(decodeURIComponent(m.body ?? '')).replaceAll('\\', '/');
      assert.ok(!/api\/admin/.test(body), `a stored body points at the admin API: ${m.body}`);
    }

    // The server admin opens Chat → Messages, signed in.
    const { ctx, requests, outside } = await recordingContext({ httpCredentials: { username: 'admin', password: castd.password } });
    const images = [];
    ctx.on('request', (r) => {
      if (r.resourceType() === 'image') images.push(new URL(r.url()).pathname);
    });
    const page = await ctx.newPage();
    await page.goto(castd.url('/admin/chat'));
    await page.getByRole('tab', { name: 'Messages' }).or(page.getByRole('button', { name: 'Messages', exact: true })).first().click();
    await page.locator('#admin-chat-messages').getByText(marker).first().waitFor({ timeout: 30_000 });
    await page.waitForLoadState('networkidle');
    const changes = requests.filter((u) => /\/api\/admin\/(disconnect|yp\/reset|update\/start)/.test(u.pathname));
    assert.deepEqual(changes.map((u) => u.pathname), [], 'no request to an admin action');
    assert.deepEqual(images.filter((p) => /api\/admin/.test(p)), [], 'no image points at the admin API');
    assert.deepEqual(outside, [], 'nothing was asked of another site');
    assert.equal(await status(), true, 'the stream is still live');
    await ctx.close();
  } finally {
    await publisher.stop();
  }
});

// Design risk 1: what channels' URLs may reach is the server admin's decision, on the Server page; a channel's
// admin has no such page and its API refuses the setting.
test('only the server admin lets channels reach private addresses, on the Server page', { timeout: 60_000 }, async () => {
  const setting = async () => (await (await castd.fetch('/api/admin/serverconfig', { admin: true })).json()).allowPrivateTargets;
  assert.equal(await setting(), false, 'off by default');
  const refused = await post(`/c/${HOSTILE}/api/admin/config/allowprivatetargets`, { value: true }, HOSTILE_PW);
  // A server-wide setter is not on a channel's API at all (404, not 403): it is the server's, not a channel's.
  assert.equal(refused.status, 404, 'a channel admin may not set it');
  assert.equal((await refused.json()).success, false, 'the refusal is the API\'s error shape');
  assert.equal(await setting(), false, 'still off after the channel admin tried');
  const ctx = await newContext(browser, { httpCredentials: { username: 'admin', password: castd.password } });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/server'));
  const toggle = page.locator('#allow-private-targets-toggle');
  await toggle.waitFor({ timeout: 20_000 });
  assert.equal(await toggle.isChecked(), false);
  await toggle.check();
  await waitFor(async () => (await setting()) === true, { message: 'the setting saved' });
  await toggle.uncheck();
  await waitFor(async () => (await setting()) === false, { message: 'the setting saved off again' });
  await ctx.close();
});
