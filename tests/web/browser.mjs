/**
 * Browser side of the end-to-end tests: launches Debian's chromium (`/usr/bin/chromium`, or `$CHROMIUM`) through
 * playwright-core — no browser is ever downloaded — headless, offline-friendly, with a fresh profile per launch
 * (Playwright creates and deletes a temporary user-data dir). Also decides where screenshots go.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { REPO_ROOT } from './castd.mjs';

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
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...ARGS, ...extraArgs], timeout: 60_000 });
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
