// A replay's chat in the browser, in time with the video: a 26 s broadcast with a bot's messages sent during it
// (one of them hidden by the admin afterwards) becomes a public replay; on the viewer page's "Past broadcasts" the
// chat panel shows each message once the playhead passes its offset and none before, and a seek back or forward
// shows the chat of the new position; a link to the replay (`/?replay={id}`) opens it; a clip's page shows the chat
// of its window. Screenshot: replay-chat.png.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, publishTestStream, sleep, waitFor } from './castd.mjs';

const STREAM_KEY = 'e2e-replay-chat-key';
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
  return { status: res.status, body: await res.json().catch(() => null) };
};

/** The message texts the chat panel shows now. */
const shown = (page) =>
  page.$$eval('#replay-chat .replay-chat-message .body', (els) => els.map((e) => e.textContent.trim()));

/** Waits until the panel shows exactly the messages whose offset is at or before the video's playhead. */
async function showsChatAtPlayhead(page, offsets, what) {
  try {
    await page.waitForFunction(
      (offs) => {
        const v = document.querySelector('#replay-player');
        if (!v || v.seeking) return false;
        const want = offs.filter(([, o]) => o <= v.currentTime).map(([b]) => b);
        const got = [...document.querySelectorAll('#replay-chat .replay-chat-message .body')].map((e) => e.textContent.trim());
        return JSON.stringify(want) === JSON.stringify(got);
      },
      offsets,
      { timeout: 10_000 },
    );
  } catch {
    const t = await page.evaluate(() => document.querySelector('#replay-player').currentTime);
    assert.fail(`${what}: at ${t} s the panel shows ${JSON.stringify(await shown(page))}, offsets ${JSON.stringify(offsets)}`);
  }
  return page.evaluate(() => document.querySelector('#replay-player').currentTime);
}

const seek = (page, t) =>
  page.evaluate((to) => {
    const v = document.querySelector('#replay-player');
    v.pause();
    v.currentTime = to;
  }, t);

test('a replay shows its chat as the playhead passes it, seeking jumps the chat, a clip carries its window', { timeout: 240_000 }, async () => {
  await castd.setConfig('video/streamoutputvariants', [{ name: 'source', videoPassthrough: true, audioPassthrough: true }]);
  await castd.setConfig('video/streamlatencylevel', 1);
  await castd.setConfig('streamkeys', [{ key: STREAM_KEY, comment: 'e2e' }]);
  const token = (await post('/api/admin/accesstokens/create', { name: 'chatbot', scopes: ['CAN_SEND_MESSAGES'] })).body.accessToken;
  publisher = publishTestStream(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${STREAM_KEY}`, { seconds: 26 });
  await waitFor(async () => (await castd.getJson('/api/admin/replays', { admin: true })).some((r) => r.durationSeconds > 1), {
    timeoutMs: 60_000,
    message: 'the broadcast records',
  });
  // A message every 4 s from 4 s in; "hidden" is hidden by the admin afterwards.
  for (const body of ['first', 'second', 'hidden', 'third', 'fourth']) {
    await sleep(4000);
    const r = await post('/api/integrations/chat/send', { body }, { Authorization: `Bearer ${token}` });
    assert.equal(r.status, 200, `send ${body}: ${JSON.stringify(r.body)}`);
  }
  const replay = await waitFor(
    async () => (await castd.getJson('/api/admin/replays', { admin: true })).find((r) => r.status === 'finished'),
    { timeoutMs: 90_000, message: 'a finished replay' },
  );
  const hidden = (await castd.getJson('/api/admin/chat/messages', { admin: true })).find((m) => m.body.includes('hidden'));
  assert.equal((await post('/api/admin/chat/messagevisibility', { idArray: [hidden.id], visible: false })).status, 200);
  assert.equal((await post('/api/admin/replays/update', { id: replay.id, public: true, title: 'With chat' })).status, 200);
  const chat = await castd.getJson(`/api/replays/${replay.id}/chat`);
  const offsets = chat.messages.map((m) => [m.body.replace(/<[^>]+>/g, '').trim(), m.offset]);
  assert.deepEqual(offsets.map(([b]) => b), ['first', 'second', 'third', 'fourth'], JSON.stringify(chat));
  const at = Object.fromEntries(offsets);

  const page = await (await newContext(browser)).newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/'));
  await page.waitForSelector('#past-broadcasts');
  await page.getByRole('button', { name: 'With chat' }).click();
  await page.waitForFunction(() => {
    const v = document.querySelector('#replay-player');
    return v && v.readyState >= 2 && Number.isFinite(v.duration) && v.duration > 0;
  }, null, { timeout: 30_000 });
  await page.waitForSelector('#replay-chat');
  assert.deepEqual(await shown(page), [], 'nothing before the first message');

  // Playing: each message appears once the playhead passes it (2x speed), not before.
  await page.evaluate(() => {
    const v = document.querySelector('#replay-player');
    v.muted = true;
    v.playbackRate = 2;
    return v.play();
  });
  await page.waitForFunction((t) => document.querySelector('#replay-player').currentTime > t, at.first - 1, { timeout: 30_000 });
  assert.deepEqual(await shown(page), [], `1 s before "first" (${at.first} s) nothing shows`);
  await page.waitForFunction((t) => document.querySelector('#replay-player').currentTime > t, at.second + 0.5, { timeout: 30_000 });
  await page.evaluate(() => document.querySelector('#replay-player').pause());
  const t1 = await showsChatAtPlayhead(page, offsets, 'while playing');
  assert.ok((await shown(page)).includes('second'), `"second" (${at.second} s) shows at ${t1} s`);

  // Seeking back: the panel clears and shows the chat of the new position.
  await seek(page, (at.first + at.second) / 2);
  await showsChatAtPlayhead(page, offsets, 'after a seek back');
  assert.deepEqual(await shown(page), ['first']);
  // Forward past the last message, then to the start.
  await seek(page, at.fourth + 0.5);
  await showsChatAtPlayhead(page, offsets, 'after a seek forward');
  assert.deepEqual(await shown(page), ['first', 'second', 'third', 'fourth'], 'the hidden message never shows');
  await page.screenshot({ path: screenshotPath('replay-chat.png'), fullPage: true });
  await seek(page, 0);
  await showsChatAtPlayhead(page, offsets, 'after a seek to the start');
  assert.deepEqual(await shown(page), []);
  // And playing on from between "second" and "third" shows "third" when the playhead gets there.
  await seek(page, (at.second + at.third) / 2);
  await showsChatAtPlayhead(page, offsets, 'between second and third');
  assert.deepEqual(await shown(page), ['first', 'second']);
  await page.evaluate(() => document.querySelector('#replay-player').play());
  await page.waitForFunction((t) => document.querySelector('#replay-player').currentTime > t, at.third + 0.5, { timeout: 30_000 });
  await page.waitForFunction(
    () => [...document.querySelectorAll('#replay-chat .replay-chat-message .body')].some((e) => e.textContent.includes('third')),
    null,
    { timeout: 5_000 },
  );

  // A link to the replay (`/?replay={id}`) opens it with its chat.
  const linked = await (await newContext(browser)).newPage();
  await linked.goto(castd.url(`/?replay=${encodeURIComponent(replay.id)}`));
  await linked.waitForSelector('#past-broadcasts #replay-player');
  await linked.waitForSelector('#past-broadcasts #replay-chat');

  // A clip's page carries the chat of its window.
  const made = await post('/api/admin/clips/create', {
    streamId: replay.id,
    clipTitle: 'Second',
    relativeStartTimeSeconds: (at.first + at.second) / 2,
    relativeEndTimeSeconds: (at.second + at.third) / 2,
  });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const clipPage = await (await newContext(browser)).newPage();
  await clipPage.goto(castd.url(`/clips/${made.body.id}`));
  await clipPage.waitForSelector('#clip-player');
  await clipPage.evaluate(() => {
    const v = document.querySelector('#clip-player');
    v.muted = true;
    return new Promise((resolve) => {
      const go = () => {
        v.currentTime = Math.max(0, v.duration - 0.2);
        resolve();
      };
      if (v.readyState >= 1 && Number.isFinite(v.duration)) go();
      else v.addEventListener('loadedmetadata', go, { once: true });
    });
  });
  await clipPage.waitForFunction(
    () => [...document.querySelectorAll('#replay-chat .replay-chat-message .body')].map((e) => e.textContent.trim()).join() === 'second',
    null,
    { timeout: 15_000 },
  );
  assert.deepEqual(errors.filter((e) => !e.includes('favicon')), []);
});
