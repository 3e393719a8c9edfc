// Security headers in Chromium (issue 39): a page on another site (a node server on its own port) frames castd's
// pages. The admin pages and the IndieAuth approval page are refused (frame-ancestors 'none': nothing of them renders,
// though the browser holds the admin's credentials); the embeds and the viewer page render in the frame. The owner's
// custom CSS, appearance variables, inline HTML and custom JavaScript all work under the page policy (and, as in every
// test here, no CSP violation is reported: browser.mjs). An SVG logo that carries a script, opened in a tab, runs
// nothing and has no access to castd's origin.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { allowCspViolations, collectErrors, launchBrowser, newContext } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';

let castd;
let browser;
let site;
let siteBase;

/** Another site: `/frame?src=URL` is a page that frames URL; `/` is the IndieAuth client's page. */
function startSite() {
  return new Promise((resolve) => {
    const server = http.createServer((req, res) => {
      const url = new URL(req.url, 'http://x');
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      if (url.pathname === '/frame') {
        const src = url.searchParams.get('src') ?? '';
        const esc = src.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
        res.end(`<!doctype html><title>framing site</title><h1>Another site</h1><iframe id="target" src="${esc}" width="1000" height="600"></iframe>`);
      } else {
        res.end('<!doctype html><title>client</title><p>An IndieAuth client.</p>');
      }
    });
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

before(async () => {
  castd = await Castd.start({ env: { CASTD_INDIEAUTH_ALLOW_LOOPBACK: '1' } });
  await castd.setConfig('serverurl', castd.base);
  site = await startSite();
  siteBase = `http://127.0.0.1:${site.address().port}`;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await castd?.stop();
  await new Promise((r) => site?.close(r) ?? r());
});

/** Open `target` framed by the other site; resolves with the page, the frame (once it has navigated) and errors. */
async function framed(ctx, target) {
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(`${siteBase}/frame?src=${encodeURIComponent(target)}`);
  const frame = await waitFor(
    async () => {
      const f = await (await page.locator('#target').elementHandle())?.contentFrame();
      return f && f.url() !== 'about:blank' && f.url() !== '' ? f : null;
    },
    { message: `the frame of ${target} to navigate` },
  );
  await page.waitForLoadState('load');
  return { page, frame, errors };
}

/** An authorization request of a client on the other site (the approval page, behind the admin password). */
function approvalUrl() {
  const challenge = createHash('sha256').update('verifier-verifier-verifier-verifier-verifier').digest('base64url');
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: `${siteBase}/`,
    redirect_uri: `${siteBase}/callback`,
    state: 'st',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    me: `${castd.base}/`,
  });
  return castd.url(`/api/auth/provider/indieauth?${q}`);
}

test('the admin pages and the IndieAuth approval page refuse to be framed by another site', { timeout: 90_000 }, async () => {
  // The context holds the admin's credentials: a frame that were allowed would show the dashboard.
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  // The control: the approval page opened itself works (and the request is a valid one).
  const direct = await ctx.newPage();
  await direct.goto(approvalUrl());
  await direct.locator('#indieauth-approval').waitFor();
  await direct.close();

  // Chromium reports the refusal as a violation of the framed page's policy, on the framing page: expected here.
  allowCspViolations(/frame-ancestors 'none'/);
  for (const [target, marker] of [
    [castd.url('/admin/'), '#app *'],
    [castd.url('/admin/federation'), '#app *'],
    [approvalUrl(), '#indieauth-approval'],
  ]) {
    const { page, frame, errors } = await framed(ctx, target);
    assert.ok(!frame.url().startsWith(castd.base), `${target}: the frame shows chromium's error page, not castd (${frame.url()})`);
    const shown = await frame.locator(marker).count().catch(() => 0);
    assert.equal(shown, 0, `${target}: nothing of the page renders in the frame`);
    assert.ok(
      errors.some((e) => /frame-ancestors 'none'/.test(e)),
      `${target}: refused by frame-ancestors: ${JSON.stringify(errors)}`,
    );
    await page.close();
  }
  await ctx.close();
});

test('the embeds and the viewer page render in another site\'s frame', { timeout: 90_000 }, async () => {
  await castd.setConfig('name', 'Framed Cast');
  const ctx = await newContext(browser);
  for (const [path, marker] of [
    ['/embed/video', '.offline, #offline-message, video'],
    ['/embed/chat/readonly', '#chat-messages'],
    ['/embed/chat/readwrite', '#chat-messages'],
    ['/', '#server-name'],
  ]) {
    const { page, frame } = await framed(ctx, castd.url(path));
    assert.equal(frame.url(), castd.url(path));
    await frame.locator(marker).first().waitFor({ timeout: 15_000 });
    await page.close();
  }
  await ctx.close();
});

test("the owner's custom CSS, appearance, inline HTML and custom JavaScript work under the page policy", { timeout: 60_000 }, async () => {
  await castd.setConfig('customstyles', '#server-name { outline: 3px solid rgb(1, 2, 3); }');
  await castd.setConfig('appearance', { 'theme-color-action': 'rgb(4, 5, 6)' });
  await castd.setConfig('pagecontent', 'Hello <span id="owner-html" style="color: rgb(7, 8, 9)">from the owner</span>');
  await castd.setConfig('customjavascript', "document.documentElement.dataset.customJs = 'ran';");
  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await page.goto(castd.url('/'));
  await page.locator('#server-name').waitFor();
  await waitFor(() => page.evaluate(() => document.documentElement.dataset.customJs === 'ran'), {
    message: 'the custom JavaScript to run',
  });
  const outline = await page.locator('#server-name').evaluate((el) => getComputedStyle(el).outlineColor);
  assert.equal(outline, 'rgb(1, 2, 3)', 'the custom CSS applies');
  const variable = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--theme-color-action').trim());
  assert.equal(variable, 'rgb(4, 5, 6)', 'the appearance variable applies');
  const color = await page.locator('#owner-html').evaluate((el) => getComputedStyle(el).color);
  assert.equal(color, 'rgb(7, 8, 9)', "the owner's inline style applies");
  assert.deepEqual(errors.filter((e) => e.startsWith('pageerror')), []);
  await ctx.close();
  for (const name of ['customstyles', 'customjavascript', 'pagecontent']) await castd.setConfig(name, '');
  await castd.setConfig('appearance', {});
});

test('an SVG logo carrying a script runs nothing when opened, and has no access to castd', { timeout: 60_000 }, async () => {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40" onload="document.documentElement.setAttribute('data-onload', 'ran')">
<script>document.documentElement.setAttribute('data-script', 'ran'); fetch('/api/admin/status');</script>
<rect width="40" height="40" fill="red"/></svg>`;
  await castd.setConfig('logo', `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`);
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  // The sandbox's refusals of the file's own script are what this test wants.
  allowCspViolations(new RegExp(`^${castd.url('/logo').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
  const adminCalls = [];
  page.on('request', (r) => {
    if (r.url().includes('/api/admin/')) adminCalls.push(r.url());
  });
  const res = await page.goto(castd.url('/logo'));
  assert.equal(res.headers()['content-type'], 'image/svg+xml');
  await page.waitForTimeout(500);
  const seen = await page.evaluate(() => ({
    script: document.documentElement.getAttribute('data-script'),
    onload: document.documentElement.getAttribute('data-onload'),
    origin: self.origin,
  }));
  assert.deepEqual(seen, { script: null, onload: null, origin: 'null' }, 'no script ran; the document has an opaque origin');
  assert.deepEqual(adminCalls, [], 'the file called nothing on castd');
  await ctx.close();
});
