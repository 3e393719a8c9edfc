import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { admin, apiUrl } from '../api';
import { Icon } from '../components/Icon';
import { ServerConfigContext, useServerConfigLoader } from './forms';
import { needsPass } from '../lib/access';
import { basePath } from '../lib/base';
import { PAGES, navigate, pageHref, pagesFor, usePage, type PageId } from './router';
import { ChannelSwitcher, Channels } from './pages/Channels';
import { AccessTokens } from './pages/AccessTokens';
import { Chat } from './pages/Chat';
import { Federation } from './pages/Federation';
import { General } from './pages/General';
import { Health } from './pages/Health';
import { Logs } from './pages/Logs';
import { Notifications } from './pages/Notifications';
import { Overview } from './pages/Overview';
import { Privacy } from './pages/Privacy';
import { Replays } from './pages/Replays';
import { Schedule } from './pages/Schedule';
import { Server } from './pages/Server';
import { Simulcast } from './pages/Simulcast';
import { StreamKeys } from './pages/StreamKeys';
import { Video } from './pages/Video';
import { Webhooks } from './pages/Webhooks';

/** The default channel's slug in the channel list. */
const DEFAULT_SLUG = 'default';

const VIEWS: Record<PageId, () => JSX.Element> = {
  overview: Overview,
  health: Health,
  logs: Logs,
  'stream-keys': StreamKeys,
  video: Video,
  general: General,
  chat: Chat,
  privacy: Privacy,
  'access-tokens': AccessTokens,
  webhooks: Webhooks,
  notifications: Notifications,
  federation: Federation,
  schedule: Schedule,
  simulcast: Simulcast,
  replays: Replays,
  server: Server,
  channels: Channels,
};

/**
 * On a private channel the dashboard's own player (replays, clips) and thumbnails are ways out like any other: the
 * admin takes a viewing pass (`POST /api/admin/viewer/pass`, set as the channel's cookie) whenever the visibility asks
 * for one.
 */
function useAdminPass(visibility: string | undefined) {
  useEffect(() => {
    if (needsPass(visibility)) admin.post('viewer/pass', {}).catch(() => undefined);
  }, [visibility]);
}

/**
 * The admin SPA at /admin/ (a channel's at /c/{slug}/admin/, without the server-wide pages): navigation plus one page
 * at a time; the server config is shared through context. The server admin also gets the channel switcher.
 */
export function AdminApp() {
  const page = usePage();
  const configCtx = useServerConfigLoader();
  useAdminPass(configCtx.config?.access?.visibility);
  const [menuOpen, setMenuOpen] = useState(false);
  const View = VIEWS[page];
  const label = PAGES.find((p) => p.id === page)?.label ?? '';
  useEffect(() => {
    document.title = `${label} · castd admin`;
    setMenuOpen(false);
  }, [label]);

  const go = (e: MouseEvent, id: PageId) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(id);
  };

  return (
    <ServerConfigContext.Provider value={configCtx}>
      <div class={`admin-layout${menuOpen ? ' menu-open' : ''}`}>
        <aside class="admin-nav">
          <div class="admin-brand">
            <a href={`${basePath()}/`} title="Viewer page">
              <img src={apiUrl('/logo')} alt="" /> <span>{configCtx.config?.instanceDetails?.name || 'castd'}</span>
            </a>
            <button type="button" class="icon menu-toggle" aria-label="Menu" onClick={() => setMenuOpen(!menuOpen)}>
              <Icon name="menu" />
            </button>
          </div>
          <ChannelSwitcher current={basePath() ? basePath().replace(/^\/c\//, '') : DEFAULT_SLUG} />
          <nav aria-label="Admin">
            {pagesFor().map((p) => (
              <a key={p.id} href={pageHref(p.id)} data-page={p.id} aria-current={p.id === page ? 'page' : undefined} class={p.id === page ? 'active' : ''} onClick={(e) => go(e, p.id)}>
                {p.label}
              </a>
            ))}
          </nav>
        </aside>
        <main class="admin-main" data-page={page}>
          <h1>{label}</h1>
          <View />
        </main>
      </div>
    </ServerConfigContext.Provider>
  );
}
