/**
 * The directory of channels at `/channels` (the root's page): every public channel from `GET /api/channels` (live
 * first, as the server sorts them) as a card linking to the channel's page: its thumbnail while live, its name, stream
 * title, viewer count and a "Live" badge. A private channel (password or token) shows its name, "Live" and a
 * "Private" mark only: the server gives nothing else of it.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import '../styles.css';
import { channels, rootUrl, type PublicChannel } from '../api';
import { needsPass } from '../lib/access';

function Card({ c }: { c: PublicChannel }) {
  const locked = needsPass(c.visibility);
  return (
    <a class={`channel-card${c.online ? ' live' : ''}`} href={c.url} data-slug={c.slug}>
      <div class="channel-thumb">
        {c.online && c.thumbnail ? <img src={rootUrl(c.thumbnail)} alt="" loading="lazy" /> : <div class="channel-offline">Offline</div>}
        {c.online && <span class="live-badge">Live</span>}
      </div>
      <div class="channel-info">
        <strong class="channel-name">{c.name}</strong>
        {locked && (
          <span class="channel-private muted" title="Needs a password or a sign-in">
            Private
          </span>
        )}
        {c.online && c.streamTitle && <span class="channel-title">{c.streamTitle}</span>}
        {c.online && !locked && (
          <span class="channel-viewers muted">
            {c.viewerCount} {c.viewerCount === 1 ? 'viewer' : 'viewers'}
          </span>
        )}
      </div>
    </a>
  );
}

function Directory() {
  const [list, setList] = useState<PublicChannel[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      channels.list().then(
        (l) => {
          setList(l);
          setError(null);
        },
        (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
      );
    void load();
    const t = setInterval(load, 15_000);
    return () => clearInterval(t);
  }, []);
  return (
    <main class="channels-main">
      <h1>Channels</h1>
      {error && <div class="form-error">{error}</div>}
      {list && !list.length && <p class="muted">No channels.</p>}
      <div class="channel-grid" id="channel-list">
        {(list ?? []).map((c) => (
          <Card key={c.slug} c={c} />
        ))}
      </div>
    </main>
  );
}

const root = document.getElementById('app');
if (root) render(<Directory />, root);
