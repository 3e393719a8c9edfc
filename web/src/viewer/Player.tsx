/**
 * The live player: hls.js (with CMCD on segment requests and a CMCD JSON report every 10 s) where Media Source
 * Extensions exist, native HLS otherwise; quality selection; autoplay (muted fallback when the browser blocks sound).
 */
import Hls, { type Level } from 'hls.js';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, apiUrl } from '../api';
import { Icon } from '../components/Icon';
import { BACK_BUFFER_S, backBufferFlushEnd } from '../lib/backbuffer';
import { catchUpRate } from '../lib/catchup';
import { buildCmcdReport, newSessionId, videoState } from '../lib/cmcd';
import { levelLabel } from '../lib/format';
import { choosePlaybackEngine, isLowLatency } from '../lib/urls';
import { playWhep, webrtcSupported, type WhepSession } from '../lib/whep';

export const STREAM_URL = '/hls/stream.m3u8';
const REPORT_INTERVAL_MS = 10_000;
/** Largest playback rate the player uses to get back to the target latency of a low-latency stream
 * (`lib/catchup`; hls.js's own catch-up needs more buffer than such a stream has). */
const LL_CATCH_UP_RATE = 1.5;
/** Seconds beyond PART-HOLD-BACK after which hls.js seeks back to the live edge of a low-latency stream. */
const LL_MAX_BEHIND_TARGET = 1.5;
/**
 * Start-up of a low-latency stream: stalls in this long after playback first starts are the buffer
 * filling, not the network. hls.js adds a target duration to its target latency for every stall it sees
 * (`liveSyncOnStallIncrease`), so one at start-up would keep the viewer a whole second further behind
 * live for good; once this has passed, the target is set back to PART-HOLD-BACK (later stalls count as
 * hls.js counts them).
 */
const LL_STARTUP_GRACE_MS = 3000;
/** WebRTC must play within this long, else the player falls back to LL-HLS. */
const WEBRTC_TIMEOUT_MS = 3000;
const REALTIME_KEY = 'castd.realtime';

/** The viewer's "Real-time" choice (on by default where WebRTC exists). */
function realtimeDefault(): boolean {
  if (!webrtcSupported()) return false;
  try {
    return localStorage.getItem(REALTIME_KEY) !== 'off';
  } catch {
    return true;
  }
}

interface Props {
  /** Start playback when true; tear the player down when false. */
  active: boolean;
  /** Owncast's autoplay setting: 'off' disables it; 'muted' starts muted; anything else tries with sound. */
  autoplay?: string;
}

export function Player({ active, autoplay }: Props) {
  const videoRef = useRef<HTMLVideoElement>(null);
  const hlsRef = useRef<Hls | null>(null);
  const [levels, setLevels] = useState<Level[]>([]);
  const [selected, setSelected] = useState(-1);
  const [needsClick, setNeedsClick] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const [realtime, setRealtime] = useState(realtimeDefault);
  /** What is playing: WebRTC (real time) or HLS. */
  const [mode, setMode] = useState<'webrtc' | 'hls' | null>(null);

  useEffect(() => {
    const video = videoRef.current;
    if (!active || !video) return;
    const sid = newSessionId();
    let seq = 0;
    let starved = false;
    let destroyed = false;
    let retryTimer: ReturnType<typeof setTimeout> | undefined;
    setFailure(null);

    const tryPlay = async () => {
      if (autoplay === 'off') {
        setNeedsClick(true);
        return;
      }
      if (autoplay === 'muted') video.muted = true;
      try {
        await video.play();
        setNeedsClick(false);
      } catch {
        // Autoplay with sound blocked: retry muted, else wait for a click.
        try {
          video.muted = true;
          await video.play();
          setNeedsClick(false);
        } catch {
          setNeedsClick(true);
        }
      }
    };

    const onWaiting = () => {
      if (!video.seeking && video.currentTime > 0) starved = true;
    };
    // PART-HOLD-BACK and PART-TARGET of the low-latency playlist being played (null: a classic playlist).
    let partHoldBack: number | null = null;
    let partTarget = 0;
    // A low-latency stream behind its target plays slightly faster until it is back (lib/catchup).
    const onTimeUpdate = () => {
      const hls = hlsRef.current;
      if (!hls || partHoldBack === null || video.paused || video.seeking) return;
      const ranges = video.buffered;
      const ahead = ranges.length ? ranges.end(ranges.length - 1) - video.currentTime : 0;
      const target = hls.targetLatency ?? partHoldBack;
      const rate = catchUpRate(hls.latency, target, ahead, partTarget, LL_CATCH_UP_RATE);
      if (video.playbackRate !== rate) video.playbackRate = rate;
    };
    let startupTimer: ReturnType<typeof setTimeout> | undefined;
    const onPlay = () => {
      setNeedsClick(false);
      if (startupTimer !== undefined) return;
      startupTimer = setTimeout(() => {
        const hls = hlsRef.current;
        if (hls && partHoldBack !== null) hls.targetLatency = partHoldBack;
      }, LL_STARTUP_GRACE_MS);
    };
    video.addEventListener('waiting', onWaiting);
    video.addEventListener('playing', onPlay);
    video.addEventListener('timeupdate', onTimeUpdate);

    const engine = choosePlaybackEngine(video.canPlayType('application/vnd.apple.mpegurl') !== '', Hls.isSupported());
    const start = () => {
      if (destroyed) return;
      if (engine === 'hlsjs') {
        const hls = new Hls({
          cmcd: { sessionId: sid, contentId: 'live', useHeaders: false },
          liveDurationInfinity: true,
          // A low-latency stream trims its back buffer itself (LEVEL_LOADED, FRAG_BUFFERED: lib/backbuffer).
          backBufferLength: BACK_BUFFER_S,
          // LL-HLS (castd's lowest latency level): parts, blocking reload and preload hints.
          lowLatencyMode: true,
        });
        hlsRef.current = hls;
        // Diagnostics (and the browser tests): the player's hls.js instance.
        (window as unknown as { castdHls?: Hls }).castdHls = hls;
        hls.on(Hls.Events.LEVEL_LOADED, (_e, data) => {
          // A low-latency playlist: stay at PART-HOLD-BACK behind live, catching up by playing faster
          // (onTimeUpdate; hls.js's own catch-up is off, so it leaves the rate alone) rather than
          // stalling when it drifts.
          // Further behind than that (a late press on play, a stall), jump back to the live edge.
          if (isLowLatency(data.details)) {
            partHoldBack = data.details.partHoldBack || 1;
            partTarget = data.details.partTarget || partHoldBack / 3;
            hls.config.maxLiveSyncPlaybackRate = 1;
            // After a stall hls.js plays further behind by this much (default: a whole second, which
            // is more than the target latency itself): one part at a time instead.
            hls.config.liveSyncOnStallIncrease = partTarget;
            hls.config.liveMaxLatencyDuration = (data.details.partHoldBack || 1) + LL_MAX_BEHIND_TARGET;
            // hls.js trims the back buffer as the playhead enters a segment, which a few parts behind live
            // is mid-segment and can make it skip the next segment (a stall): trimmed on FRAG_BUFFERED instead.
            hls.config.backBufferLength = Infinity;
            video.dataset.llCatchUp = String(LL_CATCH_UP_RATE);
          }
        });
        // A low-latency stream's back buffer: trimmed once the newest part, ending its segment, is in
        // (lib/backbuffer says why only then).
        hls.on(Hls.Events.FRAG_BUFFERED, (_e, data) => {
          if (partHoldBack === null || !data.part) return;
          const details = hls.levels[data.frag.level]?.details;
          const parts = details?.partList;
          const last = parts?.[parts.length - 1];
          const lastSegment = details?.fragments[details.fragments.length - 1];
          if (!details || !last || !lastSegment) return;
          const newest = last.fragment.sn === data.frag.sn && last.index === data.part.index;
          const ranges = video.buffered;
          const end = backBufferFlushEnd(
            { newest, endsSegment: lastSegment.sn === data.frag.sn },
            video.currentTime,
            ranges.length ? ranges.start(0) : null,
            details.levelTargetDuration,
          );
          if (end !== null) hls.trigger(Hls.Events.BUFFER_FLUSHING, { startOffset: 0, endOffset: end, type: null });
        });
        hls.on(Hls.Events.MANIFEST_PARSED, (_e, data) => {
          setLevels(data.levels);
          void tryPlay();
        });
        hls.on(Hls.Events.LEVEL_SWITCHED, () => setSelected(hls.autoLevelEnabled ? -1 : hls.currentLevel));
        hls.on(Hls.Events.ERROR, (_e, data) => {
          if (data.details === Hls.ErrorDetails.BUFFER_STALLED_ERROR) starved = true;
          if (!data.fatal) return;
          if (data.type === Hls.ErrorTypes.MEDIA_ERROR) {
            hls.recoverMediaError();
            return;
          }
          // Network or other fatal error: rebuild the player after a pause (the stream may be restarting).
          hls.destroy();
          hlsRef.current = null;
          setFailure('Reconnecting to the stream…');
          retryTimer = setTimeout(() => {
            setFailure(null);
            // The new player starts up again: its start-up stalls are forgiven too.
            clearTimeout(startupTimer);
            startupTimer = undefined;
            partHoldBack = null;
            start();
          }, 4000);
        });
        hls.loadSource(apiUrl(STREAM_URL));
        hls.attachMedia(video);
      } else if (engine === 'native') {
        video.src = apiUrl(STREAM_URL);
        video.addEventListener('loadedmetadata', () => void tryPlay(), { once: true });
      } else {
        setFailure('This browser cannot play HLS video.');
      }
    };
    let whep: WhepSession | null = null;
    if (realtime && webrtcSupported()) {
      video.muted = true;
      playWhep(video, WEBRTC_TIMEOUT_MS).then(
        (session) => {
          if (destroyed) return session.close();
          whep = session;
          setMode('webrtc');
          void tryPlay();
        },
        () => {
          // Not within 3 s (UDP blocked, the viewer cap, WebRTC off): LL-HLS.
          if (destroyed) return;
          video.srcObject = null;
          setMode('hls');
          start();
        },
      );
      void video.play().catch(() => undefined);
    } else {
      setMode('hls');
      start();
    }

    const report = window.setInterval(() => {
      if (video.paused && video.currentTime === 0) return; // never started: nothing to report
      const hls = hlsRef.current;
      const body = buildCmcdReport(sid, seq++, {
        state: videoState(video),
        throughputBps: hls?.bandwidthEstimate,
        latencySeconds: hls ? hls.latency : undefined,
        starved,
      });
      starved = false;
      api.cmcd(body).catch(() => undefined);
    }, REPORT_INTERVAL_MS);

    return () => {
      destroyed = true;
      clearInterval(report);
      clearTimeout(retryTimer);
      clearTimeout(startupTimer);
      video.removeEventListener('waiting', onWaiting);
      video.removeEventListener('playing', onPlay);
      video.removeEventListener('timeupdate', onTimeUpdate);
      video.playbackRate = 1;
      delete video.dataset.llCatchUp;
      hlsRef.current?.destroy();
      hlsRef.current = null;
      whep?.close();
      video.srcObject = null;
      setMode(null);
      delete (window as unknown as { castdHls?: Hls }).castdHls;
      video.removeAttribute('src');
      video.load();
      setLevels([]);
      setSelected(-1);
      setNeedsClick(false);
    };
  }, [active, autoplay, realtime]);

  const chooseRealtime = (on: boolean) => {
    try {
      localStorage.setItem(REALTIME_KEY, on ? 'on' : 'off');
    } catch {
      // storage unavailable: the choice lasts for this page
    }
    setRealtime(on);
  };

  const chooseLevel = (value: number) => {
    setSelected(value);
    const hls = hlsRef.current;
    if (hls) hls.currentLevel = value; // -1 = automatic
  };

  const clickToPlay = () => {
    const video = videoRef.current;
    if (!video) return;
    video.muted = false;
    video.play().then(
      () => setNeedsClick(false),
      () => undefined,
    );
  };

  const sorted = levels.map((level, index) => ({ level, index })).sort((a, b) => (b.level.bitrate ?? 0) - (a.level.bitrate ?? 0));

  return (
    <>
      <video id="player" ref={videoRef} controls playsInline preload="auto" aria-label="Live stream" data-mode={mode ?? ''} />
      {webrtcSupported() && (
        <div class="player-controls">
          <label title="Play over WebRTC, under a second behind live (LL-HLS when it cannot)">
            <input id="realtime-switch" type="checkbox" checked={realtime} onChange={(e) => chooseRealtime(e.currentTarget.checked)} /> Real-time
          </label>
        </div>
      )}
      {levels.length > 1 && mode === 'hls' && (
        <div class="player-controls">
          <label class="sr-only" for="quality-select">
            Quality
          </label>
          <select id="quality-select" value={String(selected)} onChange={(e) => chooseLevel(Number(e.currentTarget.value))}>
            <option value="-1">Auto</option>
            {sorted.map(({ level, index }) => (
              <option key={index} value={String(index)}>
                {levelLabel(level)}
              </option>
            ))}
          </select>
        </div>
      )}
      {(needsClick || failure) && (
        <div class="player-overlay">
          {failure ? (
            <span>{failure}</span>
          ) : (
            <button type="button" class="primary" onClick={clickToPlay} id="play-button">
              <Icon name="play" /> Play
            </button>
          )}
        </div>
      )}
    </>
  );
}
