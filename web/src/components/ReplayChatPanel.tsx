/** A replay's (or a clip's) chat in time with its video: each message appears as the playhead passes its
 * offset. Windows of the chat are fetched ahead of the playhead; a seek clears the panel and fetches the
 * window around the new position (what a viewer would have seen scroll by before it, and what comes). */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ReplayChat, ReplayChatMessage } from '../api';
import { userColor } from '../chat/ChatMessageView';
import { rebaseEmoji } from '../lib/base';
import { merged, nextWindow, shownAt } from '../lib/replayChat';

interface Props {
  /** The id of the `<video>` the chat follows. */
  videoId: string;
  /** Fetches a window (`from`/`to` in seconds; both absent: everything there is). */
  load: (from?: number, to?: number) => Promise<ReplayChat>;
  /** Whether `load` takes windows (a replay); a clip's chat comes whole. */
  windowed: boolean;
}

const clock = (s: number) => {
  const t = Math.max(0, Math.floor(s));
  const h = Math.floor(t / 3600);
  const mm = String(Math.floor((t % 3600) / 60)).padStart(h ? 2 : 1, '0');
  return `${h ? `${h}:` : ''}${mm}:${String(t % 60).padStart(2, '0')}`;
};

export function ReplayChatPanel({ videoId, load, windowed }: Props) {
  const [messages, setMessages] = useState<ReplayChatMessage[]>([]);
  const [now, setNow] = useState(0);
  const [failed, setFailed] = useState(false);
  const list = useRef<HTMLOListElement>(null);
  // The latest `load` (callers pass a new closure each render; give the panel a `key` per replay).
  const loader = useRef(load);
  loader.current = load;

  useEffect(() => {
    const video = document.getElementById(videoId) as HTMLVideoElement | null;
    if (!video) return undefined;
    let all: ReplayChatMessage[] = [];
    let loaded: { from: number; to: number } | null = null;
    // Answers to an older generation (before a seek) are dropped.
    let generation = 0;
    let busy = false;
    const fetchFor = (t: number) => {
      if (busy) return;
      if (!windowed) {
        if (loaded) return;
        busy = true;
        loader.current().then(
          (r) => {
            all = r.messages;
            loaded = { from: 0, to: Infinity };
            setMessages(all);
          },
          () => setFailed(true),
        ).finally(() => (busy = false));
        return;
      }
      const w = nextWindow(t, loaded);
      if (!w) return;
      const gen = generation;
      busy = true;
      loader.current(w.from, w.to)
        .then(
          (r) => {
            if (gen !== generation) return;
            all = w.reset ? merged([], r.messages) : merged(all, r.messages);
            const last = r.messages[r.messages.length - 1];
            const to = r.truncated && last ? last.offset : w.to;
            loaded = { from: w.reset ? w.from : (loaded?.from ?? w.from), to };
            setFailed(false);
            setMessages(all);
          },
          () => {
            if (gen === generation) setFailed(true);
          },
        )
        .finally(() => {
          if (gen === generation) busy = false;
        });
    };
    const onTime = () => {
      setNow(video.currentTime);
      fetchFor(video.currentTime);
    };
    const onSeeking = () => {
      if (windowed) {
        generation += 1;
        busy = false;
        loaded = null;
        all = [];
        setMessages([]);
      }
      onTime();
    };
    video.addEventListener('timeupdate', onTime);
    video.addEventListener('seeking', onSeeking);
    video.addEventListener('seeked', onTime);
    fetchFor(video.currentTime);
    return () => {
      generation += 1;
      video.removeEventListener('timeupdate', onTime);
      video.removeEventListener('seeking', onSeeking);
      video.removeEventListener('seeked', onTime);
    };
  }, [videoId, windowed]);

  const shown = shownAt(messages, now);
  useEffect(() => {
    const el = list.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [shown.length, shown[shown.length - 1]?.id]);

  return (
    <aside class="replay-chat" id="replay-chat" aria-label="Chat of this broadcast">
      <h4>Chat</h4>
      {failed && <p class="muted">The chat could not be loaded.</p>}
      <ol ref={list} class="replay-chat-messages">
        {shown.map((m) => (
          <li key={m.id} class="replay-chat-message" data-offset={m.offset}>
            <span class="muted replay-chat-time">{clock(m.offset)}</span>{' '}
            {m.user && (
              <span class="author" style={{ color: userColor(m.user) }}>
                {m.user.displayName}
              </span>
            )}
            <div class="body html-content" dangerouslySetInnerHTML={{ __html: rebaseEmoji(m.body) }} />
          </li>
        ))}
      </ol>
    </aside>
  );
}
