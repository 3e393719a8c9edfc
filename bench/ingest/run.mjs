// Ingest side by side: RTMP, SRT and WHIP publish the same source (a y4m test pattern and a wav tone made by run.sh)
// to a fresh castd each, with the same ladder. For each protocol: publish → first playable HLS playlist (the variant
// playlist lists a segment), and castd's own CPU while ingesting (utime+stime of the castd process from /proc, so
// the transcode worker, a child process, is excluded), over SECONDS after the playlist appeared. An idle castd is
// measured the same way as the baseline.
// Usage: node bench/ingest/run.mjs SOURCE_DIR [SECONDS] [RUNS]   (CASTD_BIN picks the binary)
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import { launchBrowser } from '../../tests/web/browser.mjs';
import { Castd, sleep, terminate, waitFor } from '../../tests/web/castd.mjs';

const [SRC = 'bench/out/ingest', SECONDS = '20', RUNS = '3'] = process.argv.slice(2);
const secs = Number(SECONDS);
const KEY = 'bench-ingest-key-1';
const Y4M = join(SRC, 'source.y4m');
const WAV = join(SRC, 'source.wav');
const LADDER = [
  { name: '360p', videoPassthrough: false, audioPassthrough: false, audioBitrate: 128, videoBitrate: 800, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
];
/** USER_HZ: /proc's clock ticks per second (100 on Linux). */
const TICK = 100;

/** utime+stime of `pid` in seconds (its own threads only: children are not counted until reaped). */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK;
}

async function freeUdpPort() {
  const sock = createSocket('udp4');
  await new Promise((resolve) => sock.bind(0, '127.0.0.1', resolve));
  const { port } = sock.address();
  await new Promise((resolve) => sock.close(resolve));
  return port;
}

/** ffmpeg publishing the source in real time, looped, x264 (2 s keyframes) + AAC, to `url` as `format`. */
function ffmpeg(url, format) {
  const args = [
    '-hide_banner', '-loglevel', 'error', '-nostdin',
    '-re', '-stream_loop', '-1', '-i', Y4M, '-re', '-stream_loop', '-1', '-i', WAV,
    '-c:v', 'libx264', '-preset', 'veryfast', '-tune', 'zerolatency', '-g', '60', '-b:v', '1500k', '-pix_fmt', 'yuv420p',
    '-c:a', 'aac', '-b:a', '128k', '-f', format, url,
  ];
  const child = spawn('ffmpeg', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  return { stop: () => terminate(child, 5000) };
}

/**
 * Chromium publishing the same source (its fake capture devices read the files) over WHIP. The browser is started and
 * the page loaded first; the returned `publish()` is the publish itself (capture, offer, POST, connect).
 */
async function whipClient(castd) {
  const browser = await launchBrowser({
    extraArgs: [
      '--use-fake-device-for-media-stream',
      '--use-fake-ui-for-media-stream',
      `--use-file-for-fake-video-capture=${Y4M}`,
      `--use-file-for-fake-audio-capture=${WAV}`,
      '--allow-loopback-in-peer-connection',
    ],
  });
  const page = await browser.newPage();
  await page.goto(castd.url('/'));
  const publish = async () => {
    const status = await page.evaluate(async (key) => {
      const stream = await navigator.mediaDevices.getUserMedia({ video: true, audio: true });
      const pc = new RTCPeerConnection();
      const video = pc.addTransceiver(stream.getVideoTracks()[0], { direction: 'sendonly' });
      pc.addTransceiver(stream.getAudioTracks()[0], { direction: 'sendonly' });
      video.setCodecPreferences(
        RTCRtpSender.getCapabilities('video').codecs.filter((c) => c.mimeType === 'video/H264' && /packetization-mode=1/.test(c.sdpFmtpLine ?? '')),
      );
      await pc.setLocalDescription(await pc.createOffer());
      await new Promise((resolve) => {
        if (pc.iceGatheringState === 'complete') return resolve();
        pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
        setTimeout(resolve, 3000);
      });
      const res = await fetch('/whip', {
        method: 'POST',
        headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${key}` },
        body: pc.localDescription.sdp,
      });
      if (res.status !== 201) return res.status;
      await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
      window.pc = pc;
      return res.status;
    }, KEY);
    if (status !== 201) throw new Error(`POST /whip answered ${status}`);
  };
  return { publish, stop: () => browser.close() };
}

/** One protocol's run: [ms to the first playable playlist, castd CPU % of one core while ingesting]. */
async function measure(protocol) {
  const srtPort = await freeUdpPort();
  const castd = await Castd.start({ args: ['--srtport', String(srtPort)] });
  try {
    await castd.setConfig('video/streamoutputvariants', LADDER);
    await castd.setConfig('video/streamlatencylevel', 1);
    await castd.setConfig('streamkeys', [{ key: KEY, comment: 'bench' }]);
    const pid = castd.child.pid;
    if (protocol === 'idle') {
      const c0 = cpuSeconds(pid);
      await sleep(secs * 1000);
      return [null, ((cpuSeconds(pid) - c0) / secs) * 100];
    }
    // The clock starts when the publisher starts: ffmpeg's launch, or the browser's capture + WHIP POST (chromium is
    // already running with the page loaded).
    const client = protocol === 'whip' ? await whipClient(castd) : null;
    const t0 = performance.now();
    let publisher;
    if (protocol === 'rtmp') publisher = ffmpeg(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${KEY}`, 'flv');
    else if (protocol === 'srt') publisher = ffmpeg(`srt://127.0.0.1:${srtPort}?streamid=live/${KEY}`, 'mpegts');
    else {
      publisher = client;
      await client.publish();
    }
    try {
      await waitFor(
        async () => {
          const res = await castd.fetch('/hls/0/stream.m3u8');
          return res.status === 200 && (await res.text()).includes('#EXTINF');
        },
        { timeoutMs: 60_000, intervalMs: 50, message: `${protocol}: a playable playlist` },
      );
      const ready = performance.now() - t0;
      const c0 = cpuSeconds(pid);
      await sleep(secs * 1000);
      const cpu = ((cpuSeconds(pid) - c0) / secs) * 100;
      if (!(await castd.getJson('/api/status')).online) throw new Error(`${protocol}: went offline while measuring`);
      return [ready, cpu];
    } finally {
      await publisher.stop();
    }
  } finally {
    await castd.stop();
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)];
};

const rows = [];
for (const protocol of (process.env.PROTOCOLS ?? 'idle,rtmp,srt,whip').split(',')) {
  const ready = [];
  const cpu = [];
  for (let i = 0; i < Number(RUNS); i++) {
    const [r, c] = await measure(protocol);
    if (r !== null) ready.push(r);
    cpu.push(c);
    process.stderr.write(`${protocol} run ${i + 1}: ${r === null ? '-' : `${Math.round(r)} ms`}, castd ${c.toFixed(1)}% CPU\n`);
  }
  rows.push({ protocol, ready, cpu });
}
console.log(`| protocol | publish → first playable playlist, median (runs) | castd CPU while ingesting, % of one core, median (runs) |`);
console.log('|---|---|---|');
for (const { protocol, ready, cpu } of rows) {
  const r = ready.length ? `${(median(ready) / 1000).toFixed(2)} s (${ready.map((x) => (x / 1000).toFixed(2)).join(', ')})` : '-';
  console.log(`| ${protocol} | ${r} | ${median(cpu).toFixed(1)} % (${cpu.map((x) => x.toFixed(1)).join(', ')}) |`);
}
