// WHEP playback: ffmpeg publishes the clocked test pattern over RTMP (tests/web/latency.mjs), headless chromium plays
// it over WebRTC (RTCPeerConnection, recvonly H.264 + Opus, `POST /whep`), frames decode, and glass-to-glass is
// measured per presented frame with requestVideoFrameCallback (its `now`): the frame's RTP timestamp is the worker's output pts
// (90 kHz, the publisher's timeline), so the frame left ffmpeg at sourceOffset + rtp/90; glass = display time − that.
// Asserted loosely (p95 < 1.5 s); p50/p95 are printed. The viewer counts in /api/status viewerCount, is a playback
// client with source "webrtc" (loss, RTT) and in castd_webrtc_viewers; DELETE on the session's Location ends it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd, waitFor } from './castd.mjs';
import { goLiveForWebrtc, playWhep, quantile, sampleWhepGlass, WEBRTC_PLAYER_ARGS } from './latency.mjs';

const STREAM_KEY = 'whep-e2e-key-1';
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

test('chromium plays over WHEP, glass-to-glass p95 under 1.5 s', { timeout: 150_000 }, async () => {
  let diag;
  ({ publisher, diag } = await goLiveForWebrtc(castd, STREAM_KEY, { seconds: 90 }));

  const ctx = await newContext(browser);
  const page = await ctx.newPage();
  await page.goto(castd.url('/api/status'));
  const joinedAt = Date.now();
  const res = await playWhep(page);
  assert.equal(res.status, 201, `POST /whep: ${JSON.stringify(res)}${diag()}`);
  await waitFor(async () => (await page.evaluate(() => window.whepSamples.length)) > 0, {
    timeoutMs: 15_000,
    message: 'a decoded WebRTC frame',
  }).catch((e) => assert.fail(`${e.message}${diag()}`));
  const firstFrameMs = Date.now() - joinedAt;
  const decoded = await page.evaluate(async () => {
    const stats = await window.whepPc.getStats();
    let frames = 0;
    stats.forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'video') frames = s.framesDecoded;
    });
    return frames;
  });
  assert.ok(decoded > 0, 'getStats framesDecoded > 0');

  // Skip the first seconds (jitter buffer settling), then measure for 15 s.
  await new Promise((r) => setTimeout(r, 3000));
  const glass = await sampleWhepGlass(page, { sourceOffset: publisher.sourceOffset, seconds: 15 });
  const p50 = quantile(glass, 0.5);
  const p95 = quantile(glass, 0.95);
  console.log(
    `WHEP glass-to-glass over ${glass.length} frames: p50 ${p50.toFixed(3)} s, p95 ${p95.toFixed(3)} s; first frame ${firstFrameMs} ms after the POST`,
  );
  assert.ok(glass.length > 100, `frames decoded in 15 s: ${glass.length}`);
  assert.ok(p50 > 0, `glass-to-glass is positive (${p50})`);
  assert.ok(p95 < 1.5, `glass-to-glass p95 ${p95} s < 1.5 s${diag()}`);

  // The WebRTC viewer counts as a viewer.
  const status = await castd.getJson('/api/status');
  assert.ok(status.viewerCount >= 1, `viewerCount ${status.viewerCount}`);
  // ... and is a playback client of its own (source "webrtc") with the loss and round-trip time its receiver
  // reports give; Prometheus counts it.
  let entry;
  await waitFor(
    async () => {
      const clients = await castd.getJson('/api/admin/viewers/playback', { admin: true });
      entry = clients.find((c) => c.playback?.source === 'webrtc');
      return typeof entry?.playback?.roundTripSeconds === 'number' && typeof entry.playback.packetLossPercent === 'number';
    },
    { timeoutMs: 10_000, message: 'a webrtc playback client with loss and RTT' },
  ).catch((e) => assert.fail(`${e.message}: ${JSON.stringify(entry)}`));
  assert.ok(entry.playback.roundTripSeconds < 0.5, `RTT on loopback ${entry.playback.roundTripSeconds} s`);
  assert.ok(entry.playback.packetLossPercent <= 1, `loss on loopback ${entry.playback.packetLossPercent} %`);
  assert.ok(entry.playback.bitrateKbps > 100, `bitrate sent ${entry.playback.bitrateKbps} kbps`);
  const prom = await (await castd.fetch('/api/admin/prometheus', { admin: true })).text();
  assert.match(prom, /^castd_webrtc_viewers\{channel="default"\} 1$/m);
  // Datagrams the WebRTC socket dropped are exported (none expected from one viewer on loopback).
  assert.match(prom, /^castd_webrtc_dropped_datagrams_total\{reason="queue_full"\} 0$/m);
  // The admin's Health page lists the WebRTC viewer with its loss and round-trip time.
  const adminCtx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const admin = await adminCtx.newPage();
  await admin.goto(castd.url('/admin/health'));
  const row = admin.locator(`tr.playback-client[data-client="${entry.clientID}"]`);
  await row.waitFor({ timeout: 15_000 });
  assert.match(await row.locator('.webrtc-loss-rtt').innerText(), /^[\d.]+ % · \d+ ms$/);
  assert.match(await row.innerText(), /webrtc/);
  await adminCtx.close();

  const del = await castd.fetch(res.location, { method: 'DELETE' });
  assert.equal(del.status, 204, `DELETE ${res.location}${diag()}`);
  await waitFor(async () => /^castd_webrtc_viewers\{channel="default"\} 0$/m.test(await (await castd.fetch('/api/admin/prometheus', { admin: true })).text()), {
    timeoutMs: 5000,
    message: 'castd_webrtc_viewers back to 0 after DELETE',
  });
  const left = await castd.getJson('/api/admin/viewers/playback', { admin: true });
  assert.ok(!left.some((c) => c.playback?.source === 'webrtc'), `the session's entry is gone: ${JSON.stringify(left)}`);
  await ctx.close();
});

test('the viewer page plays in real time by default and falls back to LL-HLS over the WebRTC viewer cap', { timeout: 90_000 }, async () => {
  const mode = (page) => page.evaluate(() => document.querySelector('video#player')?.dataset.mode ?? '');
  const ctx = await newContext(browser, { realtime: true });
  const page = await ctx.newPage();
  await page.goto(castd.url('/'));
  await waitFor(async () => (await mode(page)) === 'webrtc', { timeoutMs: 20_000, message: 'the viewer page on WebRTC' });
  assert.ok(await page.locator('#realtime-switch').isChecked(), 'the Real-time switch is on');
  await ctx.close();

  // Over the cap (503): LL-HLS, within 5 s of the page asking.
  await castd.setConfig('webrtc/maxviewers', 0);
  const ctx2 = await newContext(browser, { realtime: true });
  const page2 = await ctx2.newPage();
  let asked = null;
  page2.on('request', (r) => {
    if (r.url().endsWith('/whep') && asked === null) asked = Date.now();
  });
  await page2.goto(castd.url('/'));
  await waitFor(async () => (await mode(page2)) === 'hls' && (await page2.evaluate(() => Boolean(window.castdHls))), {
    timeoutMs: 20_000,
    message: 'the viewer page falls back to LL-HLS',
  });
  const fellBackMs = Date.now() - asked;
  console.log(`fell back to LL-HLS ${fellBackMs} ms after POST /whep (503)`);
  assert.ok(fellBackMs < 5000, `fell back within 5 s (${fellBackMs} ms)`);
  await ctx2.close();
});
