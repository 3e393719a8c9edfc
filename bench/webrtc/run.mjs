// N concurrent WHEP viewers of castd: one headless chromium page holds N recvonly RTCPeerConnections (real ICE,
// DTLS and SRTP; no <video> sink), each a WHEP session. While ffmpeg publishes a 640x360 30 fps test pattern (one
// 30 fps libx264 variant, the real-time variant), the viewers receive for SECONDS; then, per viewer, the frames
// depacketised (getStats inbound-rtp framesReceived) against the frames the variant produced in that time (30 fps),
// castd's CPU (utime+stime of castd and its worker, from /proc) per viewer above the no-viewer baseline, and castd's
// RSS growth per viewer.
//   node bench/webrtc/run.mjs [SECONDS] [N,...]   e.g. node bench/webrtc/run.mjs 20 10,50,100
// This is the `--chromium` variant of bench/webrtc/run.sh: chromium itself needs most of a 2-core machine at N = 50,
// so the default there is whep_load (examples/whep_load.rs), a light str0m client. Here castd's CPU includes its
// transcode worker (whep_load reports the worker apart).
import { readdirSync, readFileSync } from 'node:fs';
import { launchBrowser, newContext } from '../../tests/web/browser.mjs';
import { Castd, waitFor } from '../../tests/web/castd.mjs';
import { publishClocked } from '../../tests/web/latency.mjs';

const SECONDS = Number(process.argv[2] || 20);
const COUNTS = (process.argv[3] || '10,50,100').split(',').map(Number);
const KEY = 'bench-webrtc-key';
const FPS = 30;
const TICK = 100; // clock ticks per second (/proc)

/** utime+stime seconds of a pid and its children that are still alive (the worker). */
function cpuOf(pids) {
  let t = 0;
  for (const pid of pids) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      t += (Number(f[11]) + Number(f[12])) / TICK;
    } catch {
      // gone
    }
  }
  return t;
}
function rssOf(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return m ? Number(m[1]) / 1024 : NaN;
}
/** The children of every thread of pid (the worker is spawned from a runtime thread). */
function childrenOf(pid) {
  const out = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const list = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (list) out.push(...list.split(/\s+/).map(Number));
    }
  } catch {
    // gone
  }
  return out;
}

const browser = await launchBrowser({ extraArgs: ['--allow-loopback-in-peer-connection'] });
const rows = [];
for (const n of COUNTS) {
  const castd = await Castd.start();
  let publisher;
  try {
    await castd.setConfig('video/streamoutputvariants', [
      { name: '360p', audioPassthrough: true, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: FPS, cpuUsageLevel: 0 },
    ]);
    await castd.setConfig('video/streamlatencylevel', 0);
    await castd.setConfig('webrtc/maxviewers', n + 10);
    await castd.setConfig('streamkeys', [{ key: KEY, comment: 'bench' }]);
    publisher = publishClocked(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${KEY}`, { seconds: 3 * SECONDS + 90 });
    await waitFor(async () => (await castd.getJson('/api/status')).online === true, { timeoutMs: 60_000, message: 'online' });
    await new Promise((r) => setTimeout(r, 3000));
    const pid = castd.child.pid;
    const pids = () => [pid, ...childrenOf(pid)];
    // Baseline: no viewers.
    const rss0 = rssOf(pid);
    let c0 = cpuOf(pids());
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const baseCpu = (cpuOf(pids()) - c0) / SECONDS;

    const ctx = await newContext(browser);
    const page = await ctx.newPage();
    await page.goto(castd.url('/api/status'));
    const opened = await page.evaluate(async (count) => {
      window.pcs = [];
      let ok = 0;
      for (let i = 0; i < count; i++) {
        const pc = new RTCPeerConnection();
        pc.addTransceiver('video', { direction: 'recvonly' });
        pc.addTransceiver('audio', { direction: 'recvonly' });
        await pc.setLocalDescription(await pc.createOffer());
        await new Promise((resolve) => {
          if (pc.iceGatheringState === 'complete') return resolve();
          pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
          setTimeout(resolve, 2000);
        });
        // castd caps WHEP sessions per client address: each viewer says it is another host (castd takes
        // X-Forwarded-For from a peer on loopback), as viewers come from many hosts.
        const from = `10.9.${(i >> 8) & 255}.${i & 255}`;
        const headers = { 'Content-Type': 'application/sdp', 'X-Forwarded-For': from };
        const res = await fetch('/whep', { method: 'POST', headers, body: pc.localDescription.sdp });
        if (res.status !== 201) continue;
        await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
        window.pcs.push(pc);
        ok++;
      }
      return ok;
    }, n);
    const frames = () =>
      page.evaluate(async () => {
        const out = [];
        for (const pc of window.pcs) {
          let f = 0;
          (await pc.getStats()).forEach((s) => {
            if (s.type === 'inbound-rtp' && s.kind === 'video') f = s.framesReceived ?? 0;
          });
          out.push(f);
        }
        return out;
      });
    // Warm-up: every viewer connected and past its first keyframe.
    await new Promise((r) => setTimeout(r, 8000));
    const f0 = await frames();
    const t0 = Date.now();
    c0 = cpuOf(pids());
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const f1 = await frames();
    const secs = (Date.now() - t0) / 1000;
    const cpu = (cpuOf(pids()) - c0) / secs;
    const rss1 = rssOf(pid);
    const expected = FPS * secs;
    const delivered = f1.map((x, i) => (x - f0[i]) / expected);
    const mean = delivered.reduce((a, b) => a + b, 0) / Math.max(1, delivered.length);
    const worst = Math.min(...delivered);
    rows.push({ n, opened, baseCpu, cpu, perViewerCpu: (cpu - baseCpu) / Math.max(1, opened), mean, worst, rssPerViewer: (rss1 - rss0) / Math.max(1, opened), rss1 });
    await ctx.close();
  } catch (e) {
    console.error(`N=${n}: ${e.message}\n${castd.log.slice(-15).join('\n')}`);
  } finally {
    await publisher?.stop();
    await castd.stop();
  }
}
await browser.close();

const pct = (x) => `${(x * 100).toFixed(1)} %`;
console.log(`\nWHEP viewers: ${SECONDS} s measured per N, 640x360 30 fps real-time variant`);
console.log('| N | sessions | castd CPU, no viewers | castd CPU with N | CPU per viewer | frames delivered, mean | worst viewer | RSS per viewer | RSS |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.n} | ${r.opened} | ${pct(r.baseCpu)} | ${pct(r.cpu)} | ${pct(r.perViewerCpu)} | ${pct(r.mean)} | ${pct(r.worst)} | ${(r.rssPerViewer * 1024).toFixed(0)} KiB | ${r.rss1.toFixed(0)} MiB |`,
  );
}
