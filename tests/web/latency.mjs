// Live latency as a viewer sees it, measured in the viewer page (hls.js) while ffmpeg publishes in real time.
// Shared by tests/web/llhls.test.mjs, tests/web/whep.test.mjs and bench/latency/run.mjs. WHEP (WebRTC) playback:
// `playWhep` plays in a bare page with RTCPeerConnection and `sampleWhepGlass` measures each presented frame.
//
// Three figures per sample:
// - glass: wall clock now − the wall-clock time at which the broadcaster's ffmpeg sent the frame on screen.
//   `publishClocked` runs ffmpeg with -re and -debug_ts and reads, from each "muxer <-" line as it is printed, the
//   wall clock of every video packet sent: `sourceOffset()` is the smallest (wall − pts), so frame t left the
//   encoder at sourceOffset + t. The frame on screen is t = playingDate − PDT(first segment) (PROGRAM-DATE-TIME is
//   the transcoder's wall clock of each segment's first frame; the first segment starts at the first frame, t = 0).
// - pdt: now − hls.playingDate (the PROGRAM-DATE-TIME of the position on screen; misses the ingest path).
// - hlsjs: hls.latency (hls.js's own distance to the live edge of the playlist).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { terminate, waitFor } from './castd.mjs';

const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf';

/**
 * Publish a 640x360 30 fps test pattern (with the wall clock burnt in when the DejaVu font is there) and a tone to
 * `rtmpUrl`, like castd.mjs's publishTestStream, and track when each video packet left ffmpeg.
 */
export function publishClocked(rtmpUrl, { seconds = 60, gop = 30, ffmpeg = process.env.FFMPEG || 'ffmpeg' } = {}) {
  const clock = existsSync(FONT)
    ? `,drawtext=fontfile=${FONT}:text='%{localtime\\:%T}':x=20:y=20:fontsize=48:fontcolor=white:box=1:boxcolor=black`
    : '';
  const args = [
    '-hide_banner', '-loglevel', 'info', '-nostdin', '-debug_ts',
    '-re', '-f', 'lavfi', '-i', `testsrc2=size=640x360:rate=30${clock}`,
    '-re', '-f', 'lavfi', '-i', 'sine=frequency=440',
    '-t', String(seconds),
    '-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', String(gop), '-pix_fmt', 'yuv420p',
    '-c:a', 'aac',
    '-f', 'flv', rtmpUrl,
  ];
  const child = spawn(ffmpeg, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let offset = Infinity;
  const errors = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    const m = line.match(/^muxer <- type:video .*pkt_dts_time:([\d.]+)/);
    if (m) offset = Math.min(offset, Date.now() - Number(m[1]) * 1000);
    else if (/error/i.test(line)) errors.push(line);
  });
  return {
    child,
    /** ms: the wall clock at which the source's t = 0 left ffmpeg (Infinity until a packet was sent). */
    sourceOffset: () => offset,
    stderr: () => errors.join('\n'),
    stop: () => terminate(child, 5000),
  };
}

/**
 * The WebRTC tests' stream: one 640x360 30 fps encoded variant (the real-time feed) at LL-HLS latency, the clocked
 * test pattern published to `key` for `seconds`, and castd online. Returns the publisher and `diag()` (ffmpeg's
 * errors and castd's log tail, for assertion messages); throws with them when castd does not go online in 40 s.
 */
export async function goLiveForWebrtc(castd, key, { seconds = 90, videoBitrate = 800 } = {}) {
  await castd.setConfig('video/streamoutputvariants', [
    { name: '360p', audioPassthrough: true, videoBitrate, scaledWidth: 640, scaledHeight: 360, framerate: 30, cpuUsageLevel: 0 },
  ]);
  await castd.setConfig('video/streamlatencylevel', 0);
  await castd.setConfig('streamkeys', [{ key, comment: 'e2e' }]);
  const publisher = publishClocked(`rtmp://127.0.0.1:${castd.rtmpPort}/live/${key}`, { seconds });
  const diag = () => `\nffmpeg: ${publisher.stderr().trim() || '(no output)'}\ncastd log (tail):\n${castd.log.slice(-30).join('\n')}`;
  const deadline = Date.now() + 40_000;
  while (!(await castd.getJson('/api/status')).online) {
    if (Date.now() > deadline) throw new Error(`castd did not go online within 40 s${diag()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return { publisher, diag };
}

/** The PROGRAM-DATE-TIME (ms) of media sequence 0 of variant 0, once it is listed. */
export async function firstSegmentDate(castd, { timeoutMs = 30_000 } = {}) {
  let date = null;
  await waitFor(
    async () => {
      const res = await castd.fetch('/hls/0/stream.m3u8');
      if (res.status !== 200) return false;
      const text = await res.text();
      if (!/#EXT-X-MEDIA-SEQUENCE:0\b/.test(text)) throw new Error(`segment 0 left the playlist before it was read:\n${text}`);
      const m = text.match(/#EXT-X-PROGRAM-DATE-TIME:(\S+)/);
      if (!m) return false;
      date = Date.parse(m[1]);
      return Number.isFinite(date);
    },
    { timeoutMs, intervalMs: 100, message: 'the first PROGRAM-DATE-TIME in /hls/0/stream.m3u8' },
  );
  return date;
}

/** Press play if asked, and wait until the page's hls.js plays. */
export async function startPlayback(page, { timeoutMs = 60_000 } = {}) {
  const playButton = page.locator('#play-button');
  await waitFor(
    async () => {
      if (await playButton.isVisible()) await playButton.click({ timeout: 2000 }).catch(() => undefined);
      return page.evaluate(() => {
        const v = document.querySelector('video#player');
        return Boolean(window.castdHls && v && !v.paused && v.currentTime > 0 && window.castdHls.playingDate);
      });
    },
    { timeoutMs, intervalMs: 250, message: 'the viewer page to play through hls.js' },
  );
}

/** Sample the latency every `intervalMs` for `seconds`. */
export async function sampleLatency(page, { sourceOffset, firstPdt, seconds, intervalMs = 500 }) {
  const samples = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const s = await page.evaluate(() => {
      const hls = window.castdHls;
      const v = document.querySelector('video#player');
      const d = hls?.playingDate;
      return {
        now: Date.now(),
        playing: d ? d.getTime() : null,
        hlsjs: hls ? hls.latency : null,
        lowLatencyMode: hls ? hls.config.lowLatencyMode : null,
        // The viewer page's own catch-up (web/src/lib/catchup.ts) for a low-latency playlist.
        catchUpRate: v && v.dataset.llCatchUp ? Number(v.dataset.llCatchUp) : null,
        paused: v ? v.paused : true,
        rate: v ? v.playbackRate : 1,
      };
    });
    if (s.playing !== null && !s.paused) {
      const frameMadeAt = sourceOffset() + (s.playing - firstPdt);
      samples.push({ ...s, glass: (s.now - frameMadeAt) / 1000, pdt: (s.now - s.playing) / 1000 });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return samples;
}

/** Chromium flags for a page that plays over WebRTC from castd on loopback, with sound, without a click. */
export const WEBRTC_PLAYER_ARGS = ['--allow-loopback-in-peer-connection', '--autoplay-policy=no-user-gesture-required'];

/** Play over WHEP in the page; resolves with { status, location } of the POST. */
export function playWhep(page) {
  return page.evaluate(async () => {
    const pc = new RTCPeerConnection();
    pc.addTransceiver('video', { direction: 'recvonly' });
    pc.addTransceiver('audio', { direction: 'recvonly' });
    const video = document.createElement('video');
    video.muted = true;
    video.autoplay = true;
    video.playsInline = true;
    document.body.appendChild(video);
    window.whepSamples = [];
    pc.ontrack = (e) => {
      if (e.track.kind !== 'video') return;
      video.srcObject = new MediaStream([e.track]);
      // `now` is when the frame is presented (expectedDisplayTime is derived from the RTP clock itself).
      const onFrame = (now, meta) => {
        window.whepSamples.push({ shown: performance.timeOrigin + now, rtp: meta.rtpTimestamp });
        video.requestVideoFrameCallback(onFrame);
      };
      video.requestVideoFrameCallback(onFrame);
      video.play().catch(() => undefined);
    };
    window.whepPc = pc;
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((resolve) => {
      if (pc.iceGatheringState === 'complete') return resolve();
      pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
      setTimeout(resolve, 3000);
    });
    const res = await fetch('/whep', { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
    if (res.status !== 201) return { status: res.status, body: await res.text() };
    await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
    return { status: res.status, location: res.headers.get('Location') };
  });
}

/**
 * Glass-to-glass of the frames a WHEP page (`playWhep`) presents during `seconds`: the RTP timestamp of a frame is
 * the worker's output pts (90 kHz, the publisher's timeline), so it left ffmpeg at sourceOffset + rtp/90.
 */
export async function sampleWhepGlass(page, { sourceOffset, seconds }) {
  const from = await page.evaluate(() => window.whepSamples.length);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const samples = await page.evaluate((n) => window.whepSamples.slice(n), from);
  const offset = sourceOffset();
  return samples.map((s) => (s.shown - (offset + s.rtp / 90)) / 1000);
}

/** The q-quantile (0..1) of numbers (nearest rank). */
export function quantile(values, q) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil(q * v.length) - 1))];
}

/** p50/p95 of each figure. */
export function summary(samples) {
  const pick = (k) => samples.map((s) => s[k]);
  const row = (k) => ({ p50: quantile(pick(k), 0.5), p95: quantile(pick(k), 0.95) });
  return { n: samples.length, glass: row('glass'), pdt: row('pdt'), hlsjs: row('hlsjs') };
}
