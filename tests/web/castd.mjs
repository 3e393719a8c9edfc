/**
 * Test harness for the browser end-to-end tests: starts the real castd binary on port 0 with a temporary data dir,
 * parses the listening ports from its log, reads the generated admin password, talks to the HTTP API, publishes a
 * test stream with the ffmpeg CLI, and stops everything it started (SIGTERM, then SIGKILL after a grace period).
 *
 * The binary is `$CASTD_BIN`, or `target/debug/castd` at the repository root.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = resolve(here, '..', '..');
export const CASTD_BIN = process.env.CASTD_BIN ? resolve(process.env.CASTD_BIN) : join(REPO_ROOT, 'target', 'debug', 'castd');

const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 20_000;
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

/** Children still running, killed on exit if a test crashes before its cleanup runs. */
const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resolve when `child` exits (immediately if it already has); returns the exit code or signal. */
function exited(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode);
  return new Promise((r) => child.once('exit', (code, signal) => r(code ?? signal)));
}

/** SIGTERM, wait up to `graceMs`, then SIGKILL. Resolves with the exit code (or signal name). */
export async function terminate(child, graceMs = STOP_GRACE_MS) {
  if (!child) return null;
  const done = exited(child);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  let timer;
  const timeout = new Promise((r) => {
    timer = setTimeout(() => r('timeout'), graceMs);
  });
  let result = await Promise.race([done, timeout]);
  clearTimeout(timer);
  if (result === 'timeout') {
    child.kill('SIGKILL');
    result = await done;
  }
  live.delete(child);
  return result;
}

/**
 * Poll `fn` until it returns a truthy value (which is returned) or `timeoutMs` passes (then throws `message`
 * with the last error or value). `fn` may throw; that counts as "not yet".
 */
export async function waitFor(fn, { timeoutMs = 10_000, intervalMs = 250, message = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${message} (last: ${detail})`);
    }
    await sleep(intervalMs);
  }
}

/** A running castd. Create with `Castd.start()`, always `await stop()` (use `after()`). */
export class Castd {
  constructor({ child, dataDir, webPort, rtmpPort, password, log }) {
    this.child = child;
    this.dataDir = dataDir;
    this.webPort = webPort;
    /** The RTMP port, or null when this build has no RTMP listener. */
    this.rtmpPort = rtmpPort;
    this.base = `http://127.0.0.1:${webPort}`;
    this.password = password;
    this.log = log;
  }

  /** Start castd on a fresh temporary data dir; resolves once it logs `castd is ready`. `bin`: another
   * castd binary than CASTD_BIN (a benchmark's "before" build). */
  static async start({ args = [], env = {}, bin = CASTD_BIN } = {}) {
    if (!existsSync(bin)) {
      throw new Error(`castd binary not found at ${bin}: run \`cargo build\` at the repository root, or set CASTD_BIN`);
    }
    const dataDir = mkdtempSync(join(tmpdir(), 'castd-e2e-'));
    const childEnv = { ...process.env, ...env };
    delete childEnv.CASTD_STREAMKEY;
    // SRT off unless a test asks for a port (`--srtport` wins over the environment): parallel daemons would
    // all want 8890. The environment, not a flag, so binaries from before SRT run too (bench/compare).
    childEnv.CASTD_SRTPORT = env.CASTD_SRTPORT ?? '0';
    // WebRTC (WHIP) on an ephemeral UDP port for the same reason (8189 by default); the port is in the log.
    childEnv.CASTD_WEBRTC_UDP_PORT = env.CASTD_WEBRTC_UDP_PORT ?? '0';
    const child = spawn(
      bin,
      // Any free RTMP port unless the test names one.
      ['--data-dir', dataDir, '--webserverip', '127.0.0.1', '--webserverport', '0', ...(args.includes('--rtmpport') ? [] : ['--rtmpport', '0']), ...args],
      { stdio: ['ignore', 'ignore', 'pipe'], env: childEnv },
    );
    live.add(child);
    const log = [];
    let webPort = null;
    let rtmpPort = null;
    const echo = Boolean(process.env.CASTD_TEST_ECHO);
    const ready = new Promise((resolveReady, rejectReady) => {
      const timer = setTimeout(
        () => rejectReady(new Error(`castd did not log "castd is ready" within ${READY_TIMEOUT_MS} ms; log:\n${log.join('\n')}`)),
        READY_TIMEOUT_MS,
      );
      child.once('error', (e) => {
        clearTimeout(timer);
        rejectReady(new Error(`could not start ${CASTD_BIN}: ${e.message}`));
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        rejectReady(new Error(`castd exited (${code ?? signal}) before it was ready; log:\n${log.join('\n')}`));
      });
      createInterface({ input: child.stderr }).on('line', (raw) => {
        const line = raw.replace(ANSI, '');
        log.push(line);
        if (echo) process.stderr.write(`[castd] ${line}\n`);
        const web = line.match(/web server listening on http:\/\/[^\s]*:(\d+)/);
        if (web) webPort = Number(web[1]);
        const rtmp = line.match(/rtmp server listening on rtmp:\/\/[^\s]*:(\d+)/);
        if (rtmp) rtmpPort = Number(rtmp[1]);
        if (line.includes('castd is ready')) {
          clearTimeout(timer);
          resolveReady();
        }
      });
    });
    try {
      await ready;
      if (!webPort) throw new Error(`castd is ready but logged no "web server listening on" line; log:\n${log.join('\n')}`);
    } catch (e) {
      await terminate(child, 2000);
      rmSync(dataDir, { recursive: true, force: true });
      throw e;
    }
    const password = readFileSync(join(dataDir, 'initial-admin-password'), 'utf8').trim();
    return new Castd({ child, dataDir, webPort, rtmpPort, password, log });
  }

  /** Stop with SIGTERM (SIGKILL after 20 s) and delete the data dir. Safe to call twice. */
  async stop() {
    const child = this.child;
    this.child = null;
    if (child) await terminate(child);
    if (this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
    this.dataDir = null;
  }

  url(path) {
    return `${this.base}${path}`;
  }

  logText() {
    return this.log.join('\n');
  }

  /** The value of the Authorization header for the admin user. */
  get authHeader() {
    return `Basic ${Buffer.from(`admin:${this.password}`).toString('base64')}`;
  }

  /** Credentials for a Playwright browser context (`httpCredentials`). */
  get httpCredentials() {
    return { username: 'admin', password: this.password };
  }

  /** `fetch` a path on the server (10 s timeout); `admin: true` adds Basic auth. */
  async fetch(path, { admin = false, headers = {}, ...init } = {}) {
    const h = { ...headers };
    if (admin) h.Authorization = this.authHeader;
    return fetch(this.url(path), { ...init, headers: h, signal: AbortSignal.timeout(10_000) });
  }

  /** GET a path and parse JSON; throws with the body on a non-2xx status. */
  async getJson(path, { admin = false } = {}) {
    const res = await this.fetch(path, { admin });
    const text = await res.text();
    if (!res.ok) throw new Error(`GET ${path} → ${res.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text);
  }

  /** `POST /api/admin/config/<name>` with `{"value": value}`; throws with the response body unless it succeeds. */
  async setConfig(name, value) {
    const res = await this.fetch(`/api/admin/config/${name}`, {
      admin: true,
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ value }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`POST /api/admin/config/${name} → ${res.status}: ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : null;
  }
}

/**
 * Publish a synthetic 640x360 30 fps stream with a 440 Hz tone to `rtmpUrl` with the ffmpeg CLI (real time, at most
 * `seconds`). Returns `{ child, stderr(), stop() }`; `stop()` kills ffmpeg (SIGTERM, SIGKILL after 5 s).
 */
export function publishTestStream(rtmpUrl, { seconds = 60, ffmpeg = process.env.FFMPEG || 'ffmpeg' } = {}) {
  const args = [
    '-hide_banner', '-loglevel', 'error', '-nostdin',
    '-re', '-f', 'lavfi', '-i', 'testsrc2=size=640x360:rate=30',
    '-re', '-f', 'lavfi', '-i', 'sine=frequency=440',
    '-t', String(seconds),
    '-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', '30', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac',
    '-f', 'flv', rtmpUrl,
  ];
  const child = spawn(ffmpeg, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  live.add(child);
  const err = [];
  child.stderr.on('data', (d) => err.push(String(d)));
  child.on('error', (e) => err.push(`could not start ${ffmpeg}: ${e.message}`));
  return {
    child,
    stderr: () => err.join(''),
    running: () => child.exitCode === null && child.signalCode === null,
    stop: () => terminate(child, 5000),
  };
}
