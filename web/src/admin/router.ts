/**
 * Path routing under `/admin/` (a channel's: `/c/{slug}/admin/`): `/admin/` is the overview, `/admin/<page>` the
 * others. The server admin (at the root) also has the `channels` page; a channel's admin has no server-wide pages.
 */
import { useEffect, useState } from 'preact/hooks';
import { basePath } from '../lib/base';

export const PAGES = [
  { id: 'overview', label: 'Overview' },
  { id: 'health', label: 'Health' },
  { id: 'logs', label: 'Logs' },
  { id: 'stream-keys', label: 'Stream keys' },
  { id: 'video', label: 'Video' },
  { id: 'general', label: 'General' },
  { id: 'chat', label: 'Chat' },
  { id: 'privacy', label: 'Privacy' },
  { id: 'access-tokens', label: 'Access tokens' },
  { id: 'webhooks', label: 'Webhooks' },
  { id: 'notifications', label: 'Notifications' },
  { id: 'federation', label: 'Federation' },
  { id: 'schedule', label: 'Schedule' },
  { id: 'simulcast', label: 'Simulcast' },
  { id: 'replays', label: 'Replays & clips' },
  { id: 'server', label: 'Server' },
  { id: 'channels', label: 'Channels' },
] as const;

export type PageId = (typeof PAGES)[number]['id'];

const ALIASES: Record<string, PageId> = {
  'hardware-info': 'health',
  hardware: 'health',
  'stream-health': 'health',
  playback: 'health',
  'config-video': 'video',
};

/**
 * Pages of the server as a whole: on a channel's admin they are not shown (their setters answer 403 there): hardware
 * and stream health, the server's logs, the server settings (ports, server URL, encoder, object storage), and the
 * channel list.
 */
export const SERVER_WIDE_PAGES: readonly PageId[] = ['health', 'logs', 'server', 'channels'];

/** The pages of the admin under `base` ('' for the server admin, `/c/{slug}` for a channel's). */
export const pagesFor = (base: string = basePath()) => PAGES.filter((p) => !base || !SERVER_WIDE_PAGES.includes(p.id));

export function pageFromPath(pathname: string, hash = '', base: string = basePath()): PageId {
  const fromHash = hash.replace(/^#\/?/, '');
  const path = base && pathname.startsWith(`${base}/`) ? pathname.slice(base.length) : pathname;
  const slug = (fromHash || path.replace(/^\/admin\/?/, '')).split('/')[0];
  if (!slug) return 'overview';
  const id = slug in ALIASES ? ALIASES[slug] : PAGES.find((p) => p.id === slug)?.id;
  return (id && pagesFor(base).some((p) => p.id === id) ? id : 'overview') as PageId;
}

export const pageHref = (id: PageId, base: string = basePath()) => (id === 'overview' ? `${base}/admin/` : `${base}/admin/${id}`);

export function navigate(id: PageId) {
  const href = pageHref(id);
  if (window.location.pathname !== href) window.history.pushState({}, '', href);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

export function usePage(): PageId {
  const [page, setPage] = useState<PageId>(() => pageFromPath(window.location.pathname, window.location.hash));
  useEffect(() => {
    const onPop = () => setPage(pageFromPath(window.location.pathname, window.location.hash));
    window.addEventListener('popstate', onPop);
    window.addEventListener('hashchange', onPop);
    return () => {
      window.removeEventListener('popstate', onPop);
      window.removeEventListener('hashchange', onPop);
    };
  }, []);
  return page;
}
