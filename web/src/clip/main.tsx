/** A clip's page at `/clips/{clipId}` (a channel's at `/c/{slug}/clips/{clipId}`): the clip (hls.js) with the chat of
 * its window in time with it, its title, who clipped it and a download link. castd serves this page with OpenGraph tags for link previews filled in. */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import '../styles.css';
import { api, apiUrl, type Clip } from '../api';
import { BASE_META, basePath, withBase } from '../lib/base';
import { HlsPlayer } from '../components/HlsPlayer';
import { ReplayChatPanel } from '../components/ReplayChatPanel';
import { formatDateTime } from '../lib/format';

/** `{base}/clips/{id}`: the base path of the channel (the page's own path says it) and the clip id. */
const CLIP_PATH = /^((?:\/c\/[a-z0-9-]+)?)\/clips\/([^/]+)\/?$/;
const [, pathBase = '', pathId = ''] = CLIP_PATH.exec(window.location.pathname) ?? [];
// The clip page is filled in by the replays feature, which names no channel: the base comes from the path.
if (pathBase && !document.querySelector(`meta[name="${BASE_META}"]`)) {
  const meta = document.createElement('meta');
  meta.name = BASE_META;
  meta.content = pathBase;
  document.head.prepend(meta);
}
const clipId = () => decodeURIComponent(pathId);

function ClipPage() {
  const [clip, setClip] = useState<Clip | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    fetch(apiUrl(`/api/clips/${encodeURIComponent(clipId())}`))
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.status === 404 ? 'This clip does not exist.' : `HTTP ${r.status}`))))
      .then((c: Clip) => {
        setClip(c);
        document.title = c.title || 'Clip';
      })
      .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
  }, []);
  if (error) return <main class="clip-main"><p id="clip-error">{error}</p></main>;
  if (!clip) return <main class="clip-main"><p>Loading…</p></main>;
  return (
    <main class="clip-main" style={{ maxWidth: '960px', margin: 'auto', padding: '1rem' }}>
      <h1 id="clip-title">{clip.title || 'Clip'}</h1>
      <div class="replay-with-chat">
        <HlsPlayer src={withBase(clip.manifest)} id="clip-player" />
        <ReplayChatPanel key={clip.id} videoId="clip-player" windowed={false} load={() => api.clipChat(clip.id)} />
      </div>
      <p class="muted">
        {clip.clippedBy && <>Clipped by {clip.clippedBy} · </>}
        {clip.streamTitle && <>{clip.streamTitle} · </>}
        {clip.durationSeconds} s · {formatDateTime(clip.timestamp)}
      </p>
      <p>
        <a href={withBase(clip.download)} download id="clip-download">
          Download MP4
        </a>{' '}
        · <a href={`${basePath()}/`}>Watch live</a>
      </p>
    </main>
  );
}

const root = document.getElementById('app');
if (root) render(<ClipPage />, root);
