// WHEP fallback with UDP blocked (issue 30): the viewer page plays over WebRTC, then an nftables rule drops UDP to
// castd's WebRTC port and a new viewer page is on LL-HLS within 5 s of asking for WHEP (its POST still answers 201:
// it is the media path that fails, as behind a firewall that lets only HTTP through).
//
// The rule must not touch the machine's other traffic, so everything (castd, ffmpeg, chromium and the test runner)
// runs in a network namespace of its own: this file re-runs itself under `ip netns exec` with CASTD_NETNS set. It
// needs root for `ip netns` and `nft` (nftables, installed by packaging/deps.sh): skipped with the reason otherwise.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';
import { goLiveForWebrtc, WEBRTC_PLAYER_ARGS } from './latency.mjs';

const STREAM_KEY = 'whep-udp-blocked-key-1';
const FALLBACK_LIMIT_MS = 5000;

if (!process.env.CASTD_NETNS) {
  test('UDP to the WebRTC port blocked: the viewer page is on LL-HLS within 5 s (own network namespace)', { timeout: 240_000 }, (t) => {
    if (process.getuid?.() !== 0) {
      t.skip('needs root for ip netns and nftables');
      return;
    }
    const ns = `castd-udpblock-${process.pid}`;
    execFileSync('ip', ['netns', 'add', ns]);
    try {
      execFileSync('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      // Chromium gathers no ICE candidates on a host with loopback only: give the namespace a network (a veth
      // pair, both ends inside it) with a default route, as a real viewer's machine has.
      execFileSync('ip', ['-n', ns, 'link', 'add', 'veth0', 'type', 'veth', 'peer', 'name', 'veth1']);
      execFileSync('ip', ['-n', ns, 'addr', 'add', '10.231.0.1/24', 'dev', 'veth0']);
      execFileSync('ip', ['-n', ns, 'link', 'set', 'veth0', 'up']);
      execFileSync('ip', ['-n', ns, 'link', 'set', 'veth1', 'up']);
      execFileSync('ip', ['-n', ns, 'route', 'add', 'default', 'dev', 'veth0']);
      // NODE_TEST_CONTEXT would make the inner runner skip its tests as "called recursively".
      const env = { ...process.env, CASTD_NETNS: ns };
      delete env.NODE_TEST_CONTEXT;
      const inner = spawnSync(
        'ip',
        ['netns', 'exec', ns, process.execPath, '--test-reporter=tap', fileURLToPath(import.meta.url)],
        { env, stdio: ['ignore', 'pipe', 'inherit'], timeout: 230_000, encoding: 'utf8' },
      );
      const out = inner.stdout ?? '';
      process.stderr.write(out.replace(/^/gm, `[${ns}] `));
      assert.equal(inner.status, 0, `the test inside namespace ${ns} failed (its output is above): ${inner.error ?? ''}`);
      assert.match(out, /^# pass 1$/m, 'the inner test ran and passed');
      assert.match(out, /^# fail 0$/m);
    } finally {
      execFileSync('ip', ['netns', 'del', ns]);
    }
  });
} else {
  let castd;
  let browser;
  let publisher;

  before(async () => {
    castd = await Castd.start();
    browser = await launchBrowser({ extraArgs: WEBRTC_PLAYER_ARGS });
  });

  after(async () => {
    await publisher?.stop();
    await browser?.close();
    await castd?.stop();
  });

  test(`inside ${process.env.CASTD_NETNS}: WebRTC plays, then with UDP dropped the page falls back to LL-HLS`, { timeout: 200_000 }, async () => {
    const webrtcPort = Number(castd.log.map((l) => l.match(/webrtc listening on udp:\/\/[^\s]*:(\d+)/)?.[1]).find(Boolean));
    assert.ok(webrtcPort > 0, `castd logged its WebRTC UDP port:\n${castd.log.join('\n')}`);
    let diag;
    ({ publisher, diag } = await goLiveForWebrtc(castd, STREAM_KEY, { seconds: 120, videoBitrate: 600 }));
    const mode = (page) => page.evaluate(() => document.querySelector('video#player')?.dataset.mode ?? '');

    // With UDP open the page plays over WebRTC (so what follows is the rule's doing, not a page that never could).
    const open = await newContext(browser, { realtime: true });
    const page = await open.newPage();
    await page.goto(castd.url('/'));
    await waitFor(async () => (await mode(page)) === 'webrtc', { timeoutMs: 30_000, message: 'the viewer page on WebRTC with UDP open' }).catch(
      (e) => assert.fail(`${e.message}${diag()}`),
    );
    await open.close();

    // Drop UDP to the WebRTC port (inbound on this namespace's loopback: STUN, DTLS and SRTP alike).
    const rules = `table inet castd_test {\n  chain input {\n    type filter hook input priority 0; policy accept;\n    udp dport ${webrtcPort} drop\n  }\n}\n`;
    execFileSync('nft', ['-f', '-'], { input: rules });
    assert.match(execFileSync('nft', ['list', 'ruleset']).toString(), new RegExp(`udp dport ${webrtcPort} drop`));

    const blocked = await newContext(browser, { realtime: true });
    const page2 = await blocked.newPage();
    let asked = null;
    let whepStatus = null;
    page2.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/whep') && asked === null) asked = Date.now();
    });
    page2.on('response', (r) => {
      if (r.request().method() === 'POST' && r.url().endsWith('/whep')) whepStatus = r.status();
    });
    await page2.goto(castd.url('/'));
    await waitFor(async () => (await mode(page2)) === 'hls' && (await page2.evaluate(() => Boolean(window.castdHls))), {
      timeoutMs: 30_000,
      message: 'the viewer page falls back to LL-HLS',
    }).catch((e) => assert.fail(`${e.message}${diag()}`));
    const fellBackMs = Date.now() - asked;
    console.log(`UDP blocked: POST /whep answered ${whepStatus}; on LL-HLS ${fellBackMs} ms after the page asked for WHEP`);
    assert.equal(whepStatus, 201, 'the WHEP offer itself is accepted: only the UDP media path is blocked');
    assert.ok(fellBackMs < FALLBACK_LIMIT_MS, `fell back within 5 s (${fellBackMs} ms)`);
    // and it plays: the video advances on LL-HLS
    const t0 = await page2.evaluate(() => document.querySelector('video#player')?.currentTime ?? 0);
    await waitFor(async () => (await page2.evaluate(() => document.querySelector('video#player')?.currentTime ?? 0)) > t0 + 1, {
      timeoutMs: 20_000,
      message: 'LL-HLS playback advances',
    });
    await blocked.close();
  });
}
