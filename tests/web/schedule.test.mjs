// Scheduled streams in the browser: the admin turns the schedule on and schedules a stream on /admin/schedule (with a
// preview of a weekly rule first); the viewer page shows it with a ticking countdown and "Add to calendar" (the
// webcal feed, whose file has the event); the event's own page /schedule/<id> shows it with its countdown and an
// "Add to calendar" file of that one event; cancelling it in the admin shows "cancelled" on its page. Screenshots:
// admin-schedule.png, viewer-next-stream.png, schedule-event-page.png.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { collectErrors, launchBrowser, newContext, screenshotPath } from './browser.mjs';
import { Castd, sleep } from './castd.mjs';

let castd;
let browser;
let eventId;
const NAME = 'E2E launch party';

before(async () => {
  castd = await Castd.start();
  browser = await launchBrowser();
  await castd.setConfig('name', 'E2E Schedule Cast');
});

after(async () => {
  await browser?.close();
  await castd?.stop();
});

/** `YYYY-MM-DDTHH:MM` in the local zone (what a datetime-local input takes), `minutes` from now. */
function localInput(minutes) {
  const t = new Date(Date.now() + minutes * 60_000);
  const p = (n) => String(n).padStart(2, '0');
  return `${t.getFullYear()}-${p(t.getMonth() + 1)}-${p(t.getDate())}T${p(t.getHours())}:${p(t.getMinutes())}`;
}

test('the admin schedules a stream on the Schedule page', { timeout: 90_000 }, async () => {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/admin/'));
  await page.locator('[data-testid="overview"]').waitFor();
  await page.locator('a[data-page="schedule"]').click();
  await page.waitForURL(/\/admin\/schedule$/);

  for (const id of ['#schedule-enabled', '#schedule-showcountdown']) {
    const box = page.locator(id);
    await box.waitFor();
    if (!(await box.isChecked())) await box.click();
    await page.waitForFunction((sel) => document.querySelector(sel)?.checked === true, id);
  }
  const cfg = await castd.getJson('/api/config');
  assert.deepEqual([cfg.schedule.enabled, cfg.schedule.showCountdown], [true, true], 'the toggles were saved');

  await page.locator('#schedule-name').fill(NAME);
  await page.locator('#schedule-description').fill('Cake at the start.');
  await page.locator('#schedule-start').fill(localInput(12));
  await page.locator('#schedule-zone').fill('Europe/Berlin');
  await page.locator('#schedule-duration').fill('45');

  // A weekly series is previewed before anything is saved ...
  await page.locator('#schedule-repeat').selectOption('weekly');
  await page.locator('#schedule-preview').click();
  await page.locator('#schedule-preview-list li').first().waitFor();
  assert.equal(await page.locator('#schedule-preview-list li').count(), 5, 'five upcoming occurrences');
  assert.deepEqual((await castd.getJson('/api/admin/schedule', { admin: true })).series, [], 'a preview saves nothing');

  // ... then saved as a one-off event.
  await page.locator('#schedule-repeat').selectOption('once');
  await page.locator('#schedule-save').click();
  const row = page.locator('#schedule-events tr', { hasText: NAME });
  await row.waitFor();
  const all = await castd.getJson('/api/admin/schedule', { admin: true });
  const ev = all.events.find((e) => e.name === NAME);
  assert.ok(ev, `saved: ${JSON.stringify(all)}`);
  assert.equal(ev.timezone, 'Europe/Berlin');
  assert.equal(ev.durationMinutes, 45);
  assert.equal(ev.description, 'Cake at the start.');
  assert.equal(await row.getAttribute('data-id'), ev.id);
  eventId = ev.id;
  await page.screenshot({ path: screenshotPath('admin-schedule.png') });
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('the viewer page shows the next stream with a countdown and Add to calendar', { timeout: 60_000 }, async () => {
  assert.ok(eventId, 'the admin test scheduled the event');
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url('/'));
  const card = page.locator('#next-stream');
  await card.waitFor();
  assert.equal(await card.getAttribute('data-event-id'), eventId);
  assert.equal(await page.locator('#next-stream-name').textContent(), NAME);
  const countdown = page.locator('#next-stream-countdown');
  const first = await countdown.textContent();
  assert.match(first, /^starts in 1[01]m \d\ds$/);
  await page.waitForFunction((t) => document.querySelector('#next-stream-countdown')?.textContent !== t, first);

  const href = await page.locator('#add-to-calendar').getAttribute('href');
  assert.equal(href, `webcal://127.0.0.1:${castd.webPort}/api/schedule.ics`);
  const ics = await (await castd.fetch('/api/schedule.ics')).text();
  assert.ok(ics.includes(`UID:${eventId}@owncast\r\n`) && ics.includes(`SUMMARY:${NAME}\r\n`), ics);
  await page.screenshot({ path: screenshotPath('viewer-next-stream.png') });
  await ctx.close();
});

test("the event's page shows it, counts down and adds this one event to a calendar", { timeout: 60_000 }, async () => {
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  const res = await page.goto(castd.url(`/schedule/${eventId}`));
  assert.equal(res.status(), 200);
  assert.equal(await page.locator('#event-name').textContent(), NAME);
  assert.equal(await page.title(), `${NAME} · E2E Schedule Cast`);
  assert.equal(await page.locator('meta[property="og:title"]').getAttribute('content'), NAME);
  assert.match(await page.locator('#event-when').textContent(), /(CET|CEST) · 45 minutes$/);
  assert.match(await page.locator('#event-local-time').textContent(), /^Your time: /);
  const countdown = page.locator('#event-countdown');
  const first = await countdown.textContent();
  assert.match(first, /^00:1[01]:\d\d$/);
  await page.waitForFunction((t) => document.querySelector('#event-countdown')?.textContent !== t, first);

  const link = page.locator('#add-to-calendar');
  assert.equal(await link.textContent(), 'Add to calendar');
  const href = await link.getAttribute('href');
  assert.equal(href, `/schedule/${eventId}/calendar.ics`);
  const file = await page.request.get(castd.url(href));
  assert.equal(file.headers()['content-type'], 'text/calendar; charset=utf-8');
  const ics = await file.text();
  assert.equal(ics.match(/BEGIN:VEVENT/g)?.length, 1, ics);
  assert.ok(ics.includes(`UID:${eventId}@owncast\r\n`), ics);
  await page.screenshot({ path: screenshotPath('schedule-event-page.png') });
  assert.deepEqual(errors, []);

  // Cancelled in the admin: the page says so.
  const adminCtx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const admin = await adminCtx.newPage();
  await admin.goto(castd.url('/admin/schedule'));
  const row = admin.locator(`#schedule-events tr[data-id="${eventId}"]`);
  await row.getByRole('button', { name: 'Cancel' }).click();
  await row.filter({ hasText: 'cancelled' }).waitFor();
  await page.reload();
  await page.locator('#event-cancelled').waitFor();
  assert.equal(await page.locator('#event-countdown').count(), 0);
  await adminCtx.close();

  // An unknown event is a 404 page.
  const missing = await page.goto(castd.url('/schedule/nosuchevent'));
  assert.equal(missing.status(), 404);
  await page.locator('#schedule-not-found').waitFor();
  await ctx.close();
  await sleep(0);
});
