/**
 * Browser side of the end-to-end tests: launches Debian's chromium (`/usr/bin/chromium`, or `$CHROMIUM`) through
 * playwright-core — no browser is ever downloaded — headless, offline-friendly, with a fresh profile per launch
 * (Playwright creates and deletes a temporary user-data dir). Also decides where screenshots go.
 *
 * Content-Security-Policy watch: every context made by `browser.newContext` (so every `newContext`) reports each CSP
 * violation of its pages and frames (the `securitypolicyviolation` event, and chromium's own "Content Security Policy"
 * console errors). Under the test runner, a test with a violation fails (an `afterEach` hook), so every page every
 * test opens runs under castd's policy without violations. A test that provokes one on purpose (a page framing the
 * admin) names it with `allowCspViolations(pattern)` for its own duration.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { REPO_ROOT, waitFor } from './castd.mjs';

/** CSP violations seen since the last check, and the patterns the running test expects. */
const cspViolations = [];
let cspAllowed = [];

/** Let violations whose report matches `pattern` (a RegExp) pass, until the end of the running test. */
export function allowCspViolations(pattern) {
  cspAllowed.push(pattern);
}

/** Take the violations seen so far that no allowed pattern matches (and forget them all). */
export function takeCspViolations() {
  const seen = cspViolations.splice(0);
  return seen.filter((v) => !cspAllowed.some((p) => p.test(v)));
}

const CSP_PREFIX = '[csp-violation]';

function watchPage(page) {
  page.on('console', (m) => {
    const text = m.text();
    if (m.type() !== 'error') return;
    if (text.startsWith(CSP_PREFIX) || /Content[- ]Security[- ]Policy/i.test(text)) {
      cspViolations.push(`${page.url()}: ${text}`);
    }
  });
}

async function watchContext(ctx) {
  // Runs in every frame of every page, before the page's own scripts.
  await ctx.addInitScript((prefix) => {
    document.addEventListener('securitypolicyviolation', (e) => {
      const sample = e.sample ? ` sample: ${e.sample}` : '';
      console.error(`${prefix} ${e.effectiveDirective} blocked ${e.blockedURI || '(inline)'} in ${e.documentURI}${sample}`);
    });
  }, CSP_PREFIX);
  ctx.on('page', watchPage);
}

const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) || process.execArgv.some((a) => a.startsWith('--test'));
if (underTestRunner) {
  const { afterEach } = await import('node:test');
  afterEach(async () => {
    // Console events may still be on their way from the browser.
    await new Promise((r) => setTimeout(r, 100));
    const found = takeCspViolations();
    cspAllowed = [];
    if (found.length) throw new Error(`Content-Security-Policy violations:\n${found.join('\n')}`);
  });
}

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

const ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // Let the player start with sound without a user gesture, as a viewer who clicked play would.
  '--autoplay-policy=no-user-gesture-required',
];

/** Launch chromium (with `extraArgs` besides the usual ones); `await browser.close()` when done. */
export async function launchBrowser({ extraArgs = [] } = {}) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`chromium not found at ${CHROMIUM}: run ./packaging/deps.sh (installs Debian's chromium) or set CHROMIUM`);
  }
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...ARGS, ...extraArgs], timeout: 60_000 });
  const newContextRaw = browser.newContext.bind(browser);
  browser.newContext = async (options) => {
    const ctx = await newContextRaw(options);
    await watchContext(ctx);
    return ctx;
  };
  // `browser.newPage` makes a context of its own: watch it through a watched one.
  browser.newPage = async (options) => {
    const ctx = await browser.newContext(options);
    const page = await ctx.newPage();
    page.on('close', () => void ctx.close().catch(() => undefined));
    return page;
  };
  return browser;
}

/**
 * A new context with a 1280x800 viewport (and admin credentials when given); default action timeout 15 s. The viewer
 * page's Real-time (WebRTC) switch starts off, so the page plays HLS as these tests expect, unless `realtime` is set.
 */
export async function newContext(browser, { httpCredentials, realtime = false } = {}) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, httpCredentials });
  ctx.setDefaultTimeout(15_000);
  if (!realtime) {
    await ctx.addInitScript(() => {
      try {
        if (localStorage.getItem('castd.realtime') === null) localStorage.setItem('castd.realtime', 'off');
      } catch {
        // opaque origins have no storage
      }
    });
  }
  return ctx;
}

/**
 * Where screenshots are written: `$CASTD_SCREENSHOT_DIR`, else `tests/web/out/screenshots` (ignored by git) so that a
 * plain test run leaves the committed `docs/screenshots/` alone. `./run.sh --update-screenshots` points it at
 * `docs/screenshots`.
 */
export function screenshotPath(name) {
  const dir = process.env.CASTD_SCREENSHOT_DIR
    ? resolve(process.env.CASTD_SCREENSHOT_DIR)
    : join(REPO_ROOT, 'tests', 'web', 'out', 'screenshots');
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}

/** Collect a page's console errors and uncaught exceptions, for failure messages. */
export function collectErrors(page) {
  const errors = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return errors;
}

/**
 * Publish `page`'s fake camera and microphone over WHIP to `path` (`/whip`, or a channel's `/c/{slug}/whip`) with
 * stream key `key`: H.264 (packetization-mode 1) and Opus, no trickle ICE (the candidates, gathered for at most 3 s,
 * go in the offer). Resolves with the POST's answer (`status`, `location`, `contentType`, `etag`; `answer` when it is
 * not 201; `error` when this Chromium offers no such H.264). The peer connection stays in `window.whipPc`.
 */
export function publishWhip(page, key, path = '/whip') {
  return page.evaluate(
    async ({ key, path }) => {
      const stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480, frameRate: 30 }, audio: true });
      const pc = new RTCPeerConnection();
      const video = pc.addTransceiver(stream.getVideoTracks()[0], { direction: 'sendonly' });
      pc.addTransceiver(stream.getAudioTracks()[0], { direction: 'sendonly' });
      const h264 = RTCRtpSender.getCapabilities('video').codecs.filter(
        (c) => c.mimeType === 'video/H264' && /packetization-mode=1/.test(c.sdpFmtpLine ?? ''),
      );
      if (h264.length === 0) return { error: 'this chromium offers no H.264 (packetization-mode 1) for WebRTC' };
      video.setCodecPreferences(h264);
      await pc.setLocalDescription(await pc.createOffer());
      await new Promise((resolve) => {
        if (pc.iceGatheringState === 'complete') return resolve();
        pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
        setTimeout(resolve, 3000);
      });
      const res = await fetch(path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${key}` },
        body: pc.localDescription.sdp,
      });
      const answer = await res.text();
      if (res.status !== 201) return { status: res.status, answer };
      await pc.setRemoteDescription({ type: 'answer', sdp: answer });
      window.whipPc = pc;
      return {
        status: res.status,
        location: res.headers.get('Location'),
        contentType: res.headers.get('Content-Type'),
        etag: res.headers.get('ETag'),
      };
    },
    { key, path },
  );
}

/**
 * Wait until the page's `video#player` plays and advances `seconds` past where it started (pressing the play button
 * when the page shows one); `what` names the video in the failure message.
 */
export async function waitForPlayback(page, { seconds = 2, what = 'the video' } = {}) {
  const video = page.locator('video#player');
  await video.waitFor({ timeout: 30_000 });
  const playButton = page.locator('#play-button');
  let startedAt = null;
  let last;
  await waitFor(
    async () => {
      if (await playButton.isVisible()) await playButton.click({ timeout: 2000 });
      last = await video.evaluate((v) => ({ t: v.currentTime, paused: v.paused }));
      if (startedAt === null && !last.paused && last.t > 0) startedAt = last.t;
      return startedAt !== null && last.t > startedAt + seconds;
    },
    { timeoutMs: 60_000, intervalMs: 500, message: `${what} to advance ${seconds} s (last ${JSON.stringify(last)})` },
  );
}
