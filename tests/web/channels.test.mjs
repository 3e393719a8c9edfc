// Channels in the browser: the directory `/channels` lists the live channel first and links to each channel's page; a
// channel's viewer page (`/c/music/`) plays its own live stream and chats on its own chat only; the server admin
// switches to a channel's admin through the switcher, and a channel admin (the channel's own password) gets no
// switcher and no server-wide pages.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, waitForPlayback } from './browser.mjs';
import { Castd, publishTestStream, waitFor } from './castd.mjs';

const MUSIC_KEY = 'e2e-channel-music-key-1';
const MUSIC_PW = 'music-admin-password';
let castd;
let browser;
let publisher;

/** POST JSON as the server admin; throws with the body unless it is a 2xx. */
async function adminPost(path, body) {
  const res = await castd.fetch(path, { admin: true, method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${path} → ${res.status}: ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await castd.setConfig('name', 'Root Stream');
  await adminPost('/api/admin/channels/create', { slug: 'music', name: 'Music', adminPassword: MUSIC_PW });
  await adminPost('/api/admin/channels/create', { slug: 'talk', name: 'Talk', adminPassword: 'talk-admin-password' });
  // The music channel's own settings, through its own API (the server admin's credentials work there).
  await adminPost('/c/music/api/admin/config/video/streamoutputvariants', {
    value: [{ name: '360p', videoPassthrough: false, audioPassthrough: true, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 }],
  });
  await adminPost('/c/music/api/admin/config/video/streamlatencylevel', { value: 1 });
  await adminPost('/c/music/api/admin/config/streamkeys', { value: [{ key: MUSIC_KEY, comment: 'e2e' }] });
  await adminPost('/c/music/api/admin/config/streamtitle', { value: 'Music pattern' });
  assert.ok(castd.rtmpPort, 'castd logged no rtmp listener');
  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${MUSIC_KEY}`, { seconds: 150 });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-25).join('\n')}`;
  try {
    await waitFor(async () => (await castd.getJson('/c/music/api/status')).online === true, { timeoutMs: 30_000, message: '/c/music/api/status online' });
    await waitFor(async () => (await castd.fetch('/c/music/hls/stream.m3u8')).status === 200, { timeoutMs: 30_000, message: '/c/music/hls/stream.m3u8' });
  } catch (e) {
    assert.fail(`${e.message}${diag()}`);
  }
  assert.equal((await castd.getJson('/api/status')).online, false, 'the default channel stays offline');
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
});

test('the directory lists the live channel first and links to each channel', { timeout: 90_000 }, async () => {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const failed = [];
  page.on('response', (r) => {
    if (r.status() >= 400) failed.push(`${r.status()} ${new URL(r.url()).pathname}`);
  });
  // The root viewer page links to the directory (there is more than one channel).
  await page.goto(castd.url('/'));
  await page.locator('#all-channels').click();
  await page.waitForURL(castd.url('/channels'));
  const cards = page.locator('#channel-list .channel-card');
  await waitFor(async () => (await cards.count()) === 3, { message: 'three channel cards' });
  // Live first, then by name.
  assert.deepEqual(await cards.evaluateAll((els) => els.map((e) => e.dataset.slug)), ['music', 'default', 'talk']);
  const first = cards.first();
  assert.equal(await first.getAttribute('data-slug'), 'music', 'the live channel comes first');
  assert.equal((await first.locator('.channel-name').textContent()).trim(), 'Music');
  assert.equal((await first.locator('.live-badge').textContent()).trim(), 'Live');
  assert.equal((await first.locator('.channel-title').textContent()).trim(), 'Music pattern');
  assert.match(await first.locator('.channel-viewers').textContent(), /\d+ viewers?/);
  assert.equal(await first.locator('img').getAttribute('src'), castd.url('/c/music/thumbnail.jpg'));
  const talk = cards.filter({ hasText: 'Talk' });
  assert.equal(await talk.locator('.live-badge').count(), 0, 'an idle channel has no Live badge');
  assert.equal(await talk.locator('img').count(), 0, 'nor a thumbnail');
  // The links go to each channel's page, which is that channel's.
  await talk.click();
  await page.waitForURL(castd.url('/c/talk/'));
  await waitFor(async () => (await page.locator('#server-name').textContent()) === 'Talk', { message: 'the Talk page' });
  assert.equal(await page.locator('#all-channels').count(), 0, "a channel's page has no directory link");
  await page.goBack();
  await cards.filter({ hasText: 'Root Stream' }).click();
  await page.waitForURL(castd.url('/'));
  await waitFor(async () => (await page.locator('#server-name').textContent()) === 'Root Stream', { message: 'the root page' });
  // The offline viewer pages try their thumbnail (and hide it on 404); nothing else may fail.
  assert.deepEqual(failed.filter((f) => !/^404 (\/c\/[a-z]+)?\/thumbnail\.jpg$/.test(f)), [], `failed requests (${errors.join(' | ')})`);
  await ctx.close();
});

/** Open `path` in a fresh context (its own chat user) and wait for the chat socket. */
async function openChat(path) {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(new URL(r.url()).pathname));
  await page.goto(castd.url(path));
  await page.locator('#chat-send:enabled').waitFor({ timeout: 20_000 });
  return { ctx, page, requests };
}

test("a channel's viewer page plays its stream and chats on its own chat", { timeout: 120_000 }, async () => {
  const music = await openChat('/c/music/');
  const root = await openChat('/');
  const { page } = music;
  await waitFor(async () => (await page.locator('#server-name').textContent()) === 'Music', { message: 'the Music page' });
  await page.locator('#live-badge').waitFor({ timeout: 15_000 });
  await waitForPlayback(page, { what: "the music channel's video" });

  // Everything the page asked for was its channel's (or the shared assets at the root).
  const own = music.requests.filter((p) => !p.startsWith('/assets/') && p !== '/favicon.ico');
  const stray = own.filter((p) => !p.startsWith('/c/music/') && p !== '/api/channels');
  assert.deepEqual(stray, [], `requests outside /c/music/: ${stray.join(', ')}`);
  assert.ok(own.some((p) => p.startsWith('/c/music/hls/')), 'the video came from the channel');

  const text = `hello music ${Date.now()}`;
  await page.locator('#chat-input').fill(text);
  await page.locator('#chat-input').press('Enter');
  const line = (p) => p.locator('#chat-messages .chat-message[data-type="CHAT"]').filter({ hasText: text });
  await line(page).waitFor({ timeout: 10_000 });
  // A second viewer of the channel sees it; the default channel's page does not.
  const other = await openChat('/c/music/');
  await line(other.page).waitFor({ timeout: 10_000 });
  const rootText = `hello root ${Date.now()}`;
  await root.page.locator('#chat-input').fill(rootText);
  await root.page.locator('#chat-input').press('Enter');
  await root.page.locator('#chat-messages .chat-message').filter({ hasText: rootText }).waitFor({ timeout: 10_000 });
  assert.equal(await line(root.page).count(), 0, "the music channel's message is not on the default channel's page");
  await page.waitForTimeout(1000);
  assert.equal(await page.locator('#chat-messages .chat-message').filter({ hasText: rootText }).count(), 0, "nor the default's on the channel's");
  for (const s of [music, root, other]) await s.ctx.close();
});

test('the server admin switches channels; a channel admin has no switcher', { timeout: 90_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/'));
  const switcher = page.locator('#channel-switcher');
  await switcher.waitFor();
  assert.deepEqual(await switcher.locator('option').evaluateAll((os) => os.map((o) => o.value)).then((v) => v.sort()), ['default', 'music', 'talk']);
  assert.equal(await page.locator('nav a[data-page="channels"]').count(), 1, 'the server admin has the Channels page');
  await switcher.selectOption('music');
  await page.waitForURL(castd.url('/c/music/admin/'));
  await waitFor(async () => (await page.locator('.admin-brand span').textContent()).trim() === 'Music', { message: "the music channel's admin" });
  // The server admin's switcher is there on the channel's admin too, on the channel.
  await waitFor(async () => (await page.locator('#channel-switcher').inputValue()) === 'music', { message: 'the switcher on music' });
  // Its side bar stays on the channel.
  await page.locator('nav a[data-page="general"]').click();
  await page.waitForURL(castd.url('/c/music/admin/general'));
  await ctx.close();

  const chCtx = await newContext(browser, { httpCredentials: { username: 'admin', password: MUSIC_PW } });
  const ch = await chCtx.newPage();
  const statuses = [];
  ch.on('response', (r) => statuses.push(`${r.status()} ${new URL(r.url()).pathname}`));
  await ch.goto(castd.url('/c/music/admin/'));
  await waitFor(async () => (await ch.locator('.admin-brand span').textContent()).trim() === 'Music', { message: "the channel admin's dashboard" });
  await waitFor(() => statuses.includes('401 /api/admin/channels'), { message: 'the switcher query answered 401' });
  await ch.waitForTimeout(500);
  assert.equal(await ch.locator('#channel-switcher').count(), 0, 'a channel admin sees no switcher');
  for (const p of ['server', 'logs', 'health', 'channels']) {
    assert.equal(await ch.locator(`nav a[data-page="${p}"]`).count(), 0, `no ${p} page on a channel's admin`);
  }
  assert.equal(await ch.locator('nav a[data-page="stream-keys"]').count(), 1);
  assert.equal(await ch.locator('.form-error').count(), 0, 'no error shown for the 401');
  // The Video page has the channel's variants and latency, not the server's encoder nor ffmpeg path.
  await ch.locator('nav a[data-page="video"]').click();
  await ch.waitForURL(castd.url('/c/music/admin/video'));
  await ch.locator('#latency-save').waitFor();
  assert.equal(await ch.locator('#codec-select').count(), 0, "no encoder choice on a channel's admin");
  assert.equal(await ch.locator('#ffmpeg-path-input').count(), 0, "no ffmpeg path on a channel's admin");
  await chCtx.close();
});
