// Replays in the browser: a 12 s broadcast becomes a replay; the admin's "Replays & clips" page plays it start to end
// through hls.js (admin only) and cuts a clip on the player, a bot's clip plays on its /clips/<id> page (with its OpenGraph title), and once the
// replay is public the viewer page lists it under "Past broadcasts". Screenshot: admin-replays.png.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, publishTestStream, waitFor } from './castd.mjs';

const STREAM_KEY = 'e2e-replay-key';
let castd;
let browser;
let publisher;

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
});

after(async () => {
  await publisher?.stop();
  await browser?.close();
  await castd?.stop();
});

const post = async (path, body, headers = {}) => {
  const res = await castd.fetch(path, {
    admin: !headers.Authorization,
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
};

/** Play the page's `selector` video to its end (8x speed); returns its duration. */
async function playToEnd(page, selector) {
  await page.waitForFunction((s) => {
    const v = document.querySelector(s);
    return v && v.readyState >= 2 && Number.isFinite(v.duration) && v.duration > 0;
  }, selector, { timeout: 30_000 });
  await page.evaluate((s) => {
    const v = document.querySelector(s);
    v.muted = true;
    v.playbackRate = 8;
    return v.play();
  }, selector);
  await page.waitForFunction((s) => document.querySelector(s)?.ended === true, selector, { timeout: 60_000 });
  return page.evaluate((s) => {
    const v = document.querySelector(s);
    return { duration: v.duration, currentTime: v.currentTime, src: v.currentSrc };
  }, selector);
}

test('a replay plays start to end in the admin, a clip on its page, public replays on the viewer page', { timeout: 180_000 }, async () => {
  await castd.setConfig('video/streamoutputvariants', [{ name: 'source', videoPassthrough: true, audioPassthrough: true }]);
  await castd.setConfig('video/streamlatencylevel', 1);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);
  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 12 });
  const replay = await waitFor(
    async () => (await castd.getJson('/api/admin/replays', { admin: true })).find((r) => r.status === 'finished'),
    { timeoutMs: 60_000, message: 'a finished replay' },
  );

  const ctx = await newContext(browser, { httpCredentials: { username: 'admin', password: castd.password } });
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/admin/'));
  await page.click('nav a[data-page="replays"]');
  const row = page.locator(`#replays tr[data-id="${replay.id}"]`);
  await row.getByRole('button', { name: 'Play' }).click();
  const played = await playToEnd(page, '#replay-player');
  assert.ok(played.src.startsWith('blob:'), `hls.js (MSE) plays it: ${played.src}`);
  assert.ok(Math.abs(played.duration - 12) <= 2, `duration ${played.duration} s (published 12 s)`);
  assert.ok(played.currentTime >= played.duration - 0.5, `played to the end: ${played.currentTime} of ${played.duration}`);
  // Cut a clip on the player: 4 s from 2 s in.
  await page.evaluate(() => {
    document.querySelector('#replay-player').currentTime = 2;
  });
  await page.fill('#cut-clip input[aria-label="Clip title"]', 'From the admin');
  await page.fill('#cut-clip input[aria-label="Seconds"]', '4');
  await page.click('#cut-clip button[type="submit"]');
  await page.waitForSelector('#cut-clip >> text=Clip created.');
  const cut = (await castd.getJson('/api/clips')).find((c) => c.title === 'From the admin');
  assert.ok(cut && cut.durationSeconds === 4, JSON.stringify(cut));
  await page.screenshot({ path: screenshotPath('admin-replays.png'), fullPage: true });

  // A bot's clip (clips are public: a bot may clip the live broadcast or a public replay) and its page.
  assert.equal((await post('/api/admin/replays/update', { id: replay.id, public: true, title: 'Yesterday' })).status, 200);
  const token = (await post('/api/admin/accesstokens/create', { name: 'clipbot', scopes: ['HAS_ADMIN_ACCESS'] })).body.accessToken;
  const made = await post(
    '/api/integrations/clips',
    { streamId: replay.id, clipTitle: 'Best bit', relativeStartTimeSeconds: 2, relativeEndTimeSeconds: 8 },
    { Authorization: `Bearer ${token}` },
  );
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const clipPage = await ctx.newPage();
  await clipPage.goto(castd.url(`/clips/${made.body.id}`));
  assert.equal(await clipPage.getAttribute('meta[property="og:title"]', 'content'), 'Best bit');
  await clipPage.waitForSelector('#clip-title');
  const clip = await playToEnd(clipPage, '#clip-player');
  assert.ok(Math.abs(clip.duration - 6) <= 2.5, `clip duration ${clip.duration} s`);

  // Public: the viewer page lists it under "Past broadcasts".
  const viewer = await (await newContext(browser)).newPage();
  await viewer.goto(castd.url('/'));
  await viewer.waitForSelector('#past-broadcasts');
  assert.match(await viewer.textContent('#past-broadcasts'), /Yesterday/);
  assert.deepEqual(errors.filter((e) => !e.includes('favicon')), []);
});
