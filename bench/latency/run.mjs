// Glass-to-glass latency of castd in Debian's chromium, per latency level: LL-HLS (level 0) and classic HLS
// (levels 1-4), side by side. For each level: a fresh castd, one 360p30 libx264 variant, ffmpeg publishing a
// clocked test pattern in real time (tests/web/latency.mjs: the wall clock of every packet ffmpeg sends, and the
// clock burnt into the picture), the viewer page playing through hls.js; after a warm-up, the latency is sampled
// every 500 ms for SECONDS. Prints p50/p95 of glass-to-glass, of now − PROGRAM-DATE-TIME and of hls.latency.
// `whep` among the levels: the same stream played over WebRTC (WHEP) in a bare page, glass-to-glass of every
// presented frame (tests/web/latency.mjs `playWhep`, `sampleWhepGlass`), in the same run.
// `0@334`: level 0 with `--llhls-part-ms 334`, to put two part lengths side by side (issue 44: `0@334,0@200`);
// `before:0`: level 0 on the castd build BEFORE_BIN names (its own viewer page is embedded in it).
// Stalls: the player's `waiting` events while sampling, also per minute. BENCH_STALL_LOG=1 prints each stall
// with the player's buffer and its last 200 steps before it (hls.js events and stream-controller log).
//   node bench/latency/run.mjs [SECONDS] [LEVELS]   e.g. node bench/latency/run.mjs 60 whep,0,1,2,3,4
import { launchBrowser, newContext } from '../../tests/web/browser.mjs';
import { Castd } from '../../tests/web/castd.mjs';
import {
  firstSegmentDate,
  playWhep,
  publishClocked,
  quantile,
  sampleLatency,
  sampleWhepGlass,
  startPlayback,
  summary,
  WEBRTC_PLAYER_ARGS,
} from '../../tests/web/latency.mjs';

const SECONDS = Number(process.argv[2] || 60);
// A level may name castd's LL-HLS part length: `0@334` is level 0 with `--llhls-part-ms 334` (castd's default
// otherwise), so two part lengths are measured side by side in one run.
const LEVELS = (process.argv[3] || 'whep,0,1,2,3,4').split(',');

const SEGMENT = [1, 2, 3, 4, 5];
const KEY = 'bench-latency-key';

const browser = await launchBrowser({ extraArgs: WEBRTC_PLAYER_ARGS });
const rows = [];
for (const name of LEVELS) {
  // `before:0`: the row runs BEFORE_BIN (another castd build, with its own embedded viewer page).
  const before = name.startsWith('before:');
  const [levelName, partMs] = name.replace(/^before:/, '').split('@');
  const level = levelName === 'whep' ? 'whep' : Number(levelName);
  if (before && !process.env.BEFORE_BIN) throw new Error(`${name}: set BEFORE_BIN`);
  const castd = await Castd.start({
    args: partMs ? ['--llhls-part-ms', partMs] : [],
    ...(before ? { bin: process.env.BEFORE_BIN } : {}),
  });
  let publisher;
  try {
    await castd.setConfig('video/streamoutputvariants', [
      { name: '360p', audioPassthrough: true, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
    ]);
    await castd.setConfig('video/streamlatencylevel', level === 'whep' ? 0 : level);
    await castd.setConfig('streamkeys', [{ key: KEY, comment: 'bench' }]);
    // A keyframe a second, as castd's encoders cut them anyway; the broadcaster's GOP only matters for passthrough.
    publisher = publishClocked(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${KEY}`, { seconds: SECONDS + 90 });
    const firstPdt = await firstSegmentDate(castd, { timeoutMs: 60_000 });
    const ctx = await newContext(browser);
    const page = await ctx.newPage();
    if (level === 'whep') {
      await page.goto(castd.url('/api/status'));
      const res = await playWhep(page);
      if (res.status !== 201) throw new Error(`POST /whep: ${JSON.stringify(res)}`);
      await new Promise((r) => setTimeout(r, 5000));
      const glass = await sampleWhepGlass(page, { sourceOffset: publisher.sourceOffset, seconds: SECONDS });
      const none = { p50: NaN, p95: NaN };
      const row = { p50: quantile(glass, 0.5), p95: quantile(glass, 0.95) };
      rows.push({ level, name, mode: 'WebRTC (WHEP), per frame', segment: '-', n: glass.length, glass: row, pdt: none, hlsjs: none, stalls: 0, waits: 0 });
      await ctx.close();
      continue;
    }
    // newContext starts the viewer page's Real-time switch off: this row is HLS.
    await page.goto(castd.url('/'));
    await startPlayback(page, { timeoutMs: 90_000 });
    // Warm-up: hls.js settles on its target latency (LL: PART-HOLD-BACK; classic: three target durations).
    await new Promise((r) => setTimeout(r, Math.max(5, 2 * SEGMENT[level]) * 1000));
    // Stalls: the video element's `waiting` events while sampling (playback ran out of buffer).
    await page.evaluate((trace) => {
      window.benchWaits = 0;
      window.benchWaitLog = [];
      const v = document.querySelector('video#player');
      const t0 = Date.now();
      const state = (what) => {
        const hls = window.castdHls;
        const r = v.buffered;
        return {
          what,
          t: (Date.now() - t0) / 1000,
          cur: v.currentTime.toFixed(3),
          buffered: Array.from({ length: r.length }, (_, i) => `${r.start(i).toFixed(3)}-${r.end(i).toFixed(3)}`).join(' '),
          rate: v.playbackRate,
          latency: hls ? hls.latency.toFixed(3) : null,
          target: hls ? hls.targetLatency : null,
        };
      };
      // BENCH_STALL_LOG: the player's last 200 steps (hls.js events, the stream controller's own log, the
      // playlist's newest parts with L = loaded) go with each stall, to see which step was missing.
      window.benchTrail = [];
      const H = trace ? window.castdHls : null;
      if (H) {
        const step = (what, extra) => {
          window.benchTrail.push({ what, wall: Date.now(), ...extra });
          if (window.benchTrail.length > 200) window.benchTrail.shift();
        };
        const which = (d) => ({ sn: d.frag?.sn, part: d.part ? d.part.index : -1 });
        H.on('hlsFragLoading', (_e, d) => step('fragLoading', which(d)));
        H.on('hlsFragBuffered', (_e, d) => step('fragBuffered', { ...which(d), buffered: state('').buffered, cur: v.currentTime.toFixed(3) }));
        H.on('hlsBufferFlushed', () => step('bufferFlushed', { buffered: state('').buffered }));
        H.on('hlsLevelLoading', (_e, d) => step('levelLoading', { query: d.url.replace(/^[^?]*/, '').replace(/&CMCD=.*/, '') }));
        H.on('hlsLevelLoaded', (_e, d) => {
          const parts = (d.details.partList || []).slice(-7);
          step('levelLoaded', { parts: parts.map((p) => `${p.fragment.sn}/${p.index}${p.loaded ? 'L' : ''}`).join(' ') });
        });
        // hls.js's logger is off; the stream controller's log methods are its own properties.
        const sc = H.streamController;
        if (sc) {
          sc.log = (...a) => step('log', { msg: a.join(' ') });
          sc.warn = (...a) => step('warn', { msg: a.join(' ') });
        }
      }
      v?.addEventListener('waiting', () => {
        window.benchWaits += 1;
        window.benchWaitLog.push({ ...state('waiting'), wall: Date.now(), trail: window.benchTrail.splice(0) });
      });
      window.castdHls?.on('hlsError', (_e, d) => window.benchWaitLog.push({ ...state('hls error'), details: d.details, fatal: d.fatal }));
    }, Boolean(process.env.BENCH_STALL_LOG));
    const samples = await sampleLatency(page, { sourceOffset: publisher.sourceOffset, firstPdt, seconds: SECONDS });
    const waits = await page.evaluate(() => window.benchWaits);
    // Each stall and hls.js error with the player's state then (BENCH_STALL_LOG=1), to see why.
    if (process.env.BENCH_STALL_LOG) {
      for (const w of await page.evaluate(() => window.benchWaitLog)) {
        const { trail, ...at } = w;
        console.error(`${name}: ${JSON.stringify(at)}`);
        for (const t of trail || []) console.error(`${name}:   ${t.wall - w.wall} ms ${JSON.stringify({ ...t, wall: undefined })}`);
      }
    }
    const s = summary(samples);
    const stalls = samples.filter((x, i) => i > 0 && x.playing === samples[i - 1].playing).length;
    const mode = level === 0 ? `LL-HLS (CMAF, ${partMs || 'default'} ms parts)` : 'classic HLS (MPEG-TS)';
    rows.push({ level, name, mode, segment: SEGMENT[level], ...s, stalls, waits });
    await ctx.close();
  } catch (e) {
    console.error(`level ${name}: ${e.message}\n${castd.log.slice(-15).join('\n')}`);
  } finally {
    await publisher?.stop();
    await castd.stop();
  }
}
await browser.close();

const f = (x) => (Number.isFinite(x) ? x.toFixed(2) : '-');
console.log(`\nglass-to-glass latency, ${SECONDS} s per level, samples every 500 ms (seconds)`);
console.log('| level | mode | segment | samples | glass p50 | glass p95 | PDT p50 | PDT p95 | hls.latency p50 | hls.latency p95 | frozen samples | stalls (waiting) | stalls / min |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.mode} | ${r.segment}${r.level === 'whep' ? '' : ' s'} | ${r.n} | ${f(r.glass.p50)} | ${f(r.glass.p95)} | ${f(r.pdt.p50)} | ${f(r.pdt.p95)} | ${f(r.hlsjs.p50)} | ${f(r.hlsjs.p95)} | ${r.stalls} | ${r.waits} | ${f((r.waits * 60) / SECONDS)} |`,
  );
}
const rt = rows.find((r) => r.level === 'whep');
if (rt) {
  console.log(`\ntarget: WHEP glass p50 <= 0.5 s (${f(rt.glass.p50)}), p95 <= 0.8 s (${f(rt.glass.p95)}): ${rt.glass.p50 <= 0.5 && rt.glass.p95 <= 0.8 ? 'met' : 'NOT met'}`);
}
for (const ll of rows.filter((r) => r.level === 0)) {
  const met = ll.glass.p50 <= 1.0 && ll.glass.p95 <= 1.2 && ll.waits === 0;
  console.log(`\ntarget (issue 44): LL-HLS ${ll.name} glass p50 <= 1.0 s (${f(ll.glass.p50)}), p95 <= 1.2 s (${f(ll.glass.p95)}), no stall (${ll.waits}): ${met ? 'met' : 'NOT met'}`);
}
