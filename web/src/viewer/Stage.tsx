import { useState } from 'preact/hooks';
import { apiUrl, type PublicConfig, type PublicStatus } from '../api';
import { Icon } from '../components/Icon';
import { Player } from './Player';

/** Offline card: the admin's offline message (rendered HTML) over the last thumbnail, when there is one. */
export function Offline({ config }: { config: PublicConfig }) {
  const [thumb, setThumb] = useState(true);
  return (
    <div class="offline" data-testid="offline">
      {thumb && <img class="thumbnail" src={apiUrl('/thumbnail.jpg')} alt="" onError={() => setThumb(false)} />}
      <div class="offline-card">
        <h2>The stream is offline</h2>
        <div id="offline-message" class="html-content" dangerouslySetInnerHTML={{ __html: config.offlineMessage || '<p>Check back soon.</p>' }} />
      </div>
    </div>
  );
}

/** The video area: the player while online, the offline card otherwise. */
export function Stage({ config, status }: { config: PublicConfig; status: PublicStatus | null }) {
  const online = Boolean(status?.online);
  return (
    <div class="player-wrap">
      {online ? <Player active={online} autoplay={config.autoplay} /> : status ? <Offline config={config} /> : null}
    </div>
  );
}

/** Live badge, stream title and viewer count. */
export function StreamBar({ config, status }: { config: PublicConfig; status: PublicStatus | null }) {
  const online = Boolean(status?.online);
  const title = status?.streamTitle || config.streamTitle || '';
  return (
    <div class="stream-bar">
      {online ? (
        <span id="live-badge" class="badge live">
          Live
        </span>
      ) : (
        <span class="badge" id="offline-badge">
          Offline
        </span>
      )}
      <h2 id="stream-title">{title}</h2>
      {online && !config.hideViewerCount && typeof status?.viewerCount === 'number' && (
        <span id="viewer-count" class="viewer-count" title="Viewers">
          <Icon name="eye" /> {status.viewerCount} {status.viewerCount === 1 ? 'viewer' : 'viewers'}
        </span>
      )}
    </div>
  );
}
