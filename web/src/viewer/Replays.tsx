import { useEffect, useState } from 'preact/hooks';
import { api, type PublicConfig, type PublicStatus, type Replay } from '../api';
import { storedToken } from '../chat/session';
import { HlsPlayer } from '../components/HlsPlayer';
import { ReplayChatPanel } from '../components/ReplayChatPanel';
import { withBase } from '../lib/base';
import { formatDateTime } from '../lib/format';
import { replayFromLink } from '../lib/replayLink';

/** Length of a viewer's clip: the last 30 s (the server clamps to what is recorded and to its maximum). */
const CLIP_SECONDS = 30;

/** The Clip button while live: shown when clipping is on and this browser has joined chat (the server
 * checks the permission level and answers why not). */
export function ClipButton({ config, status }: { config: PublicConfig; status: PublicStatus | null }) {
  const [message, setMessage] = useState<string | null>(null);
  const [link, setLink] = useState<string | null>(null);
  const token = storedToken();
  if (!config.clips?.enabled || !status?.online || !status.streamId || !token) return null;
  const clip = async () => {
    const since = status.lastConnectTime ? (Date.now() - Date.parse(status.lastConnectTime)) / 1000 : CLIP_SECONDS;
    const end = Math.max(1, since);
    try {
      const r = await api.clip(token, {
        streamId: status.streamId ?? '',
        clipTitle: status.streamTitle || config.streamTitle || '',
        relativeStartTimeSeconds: Math.max(0, end - Math.min(CLIP_SECONDS, config.clips?.maxDurationSeconds ?? CLIP_SECONDS)),
        relativeEndTimeSeconds: end,
      });
      if (r.success) {
        setMessage(`Clipped ${r.durationSeconds} s.`);
        setLink(withBase(`/clips/${r.id}`));
      } else setMessage(r.message);
    } catch (e) {
      setMessage(e instanceof Error ? e.message : String(e));
    }
  };
  return (
    <div class="clip-bar">
      <button type="button" id="clip-button" onClick={() => void clip()}>
        Clip the last {CLIP_SECONDS} s
      </button>{' '}
      {message && <span id="clip-message">{message}</span>}{' '}
      {link && (
        <a id="clip-link" href={link}>
          Open the clip
        </a>
      )}
    </div>
  );
}

/** "Past broadcasts": the replays the owner made public, each played with its chat in time with it; the viewer page
 * with `?replay={id}` opens that one (a link to a replay). */
export function PastBroadcasts() {
  const [replays, setReplays] = useState<Replay[]>([]);
  const [playing, setPlaying] = useState<Replay | null>(null);
  useEffect(() => {
    api
      .replays()
      .catch(() => [] as Replay[])
      .then(async (list) => {
        setReplays(list);
        // `?replay={id}` (a link to one replay) opens it, listed or not.
        const found = await replayFromLink(window.location.search, list, api.replay);
        if (found) {
          setPlaying(found);
          requestAnimationFrame(() => document.getElementById('past-broadcasts')?.scrollIntoView());
        }
      });
  }, []);
  if (replays.length === 0 && !playing) return null;
  return (
    <section class="past-broadcasts" id="past-broadcasts">
      <h3>Past broadcasts</h3>
      {playing && (
        <div class="replay-with-chat">
          <HlsPlayer src={withBase(playing.manifest)} id="replay-player" />
          <ReplayChatPanel
            key={playing.id}
            videoId="replay-player"
            windowed
            load={(from, to) => api.replayChat(playing.id, from, to)}
          />
        </div>
      )}
      <ul>
        {replays.map((r) => (
          <li key={r.id}>
            <button type="button" class="link" onClick={() => setPlaying(r)}>
              {r.title || r.streamTitle || formatDateTime(r.startTime)}
            </button>{' '}
            <span class="muted">
              {formatDateTime(r.startTime)} · {Math.round(r.durationSeconds / 60)} min
            </span>{' '}
            <a href={withBase(r.download)} download>
              Download
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}
