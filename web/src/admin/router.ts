/** Path routing under `/admin/`: `/admin/` is the overview, `/admin/<page>` the others. */
import { useEffect, useState } from 'preact/hooks';

export const PAGES = [
  { id: 'overview', label: 'Overview' },
  { id: 'health', label: 'Health' },
  { id: 'logs', label: 'Logs' },
  { id: 'stream-keys', label: 'Stream keys' },
  { id: 'video', label: 'Video' },
  { id: 'general', label: 'General' },
  { id: 'chat', label: 'Chat' },
  { id: 'access-tokens', label: 'Access tokens' },
  { id: 'webhooks', label: 'Webhooks' },
  { id: 'notifications', label: 'Notifications' },
  { id: 'federation', label: 'Federation' },
  { id: 'schedule', label: 'Schedule' },
  { id: 'simulcast', label: 'Simulcast' },
  { id: 'replays', label: 'Replays & clips' },
  { id: 'server', label: 'Server' },
] as const;

export type PageId = (typeof PAGES)[number]['id'];

const ALIASES: Record<string, PageId> = {
  'hardware-info': 'health',
  hardware: 'health',
  'stream-health': 'health',
  playback: 'health',
  'config-video': 'video',
};

export function pageFromPath(pathname: string, hash = ''): PageId {
  const fromHash = hash.replace(/^#\/?/, '');
  const slug = (fromHash || pathname.replace(/^\/admin\/?/, '')).split('/')[0];
  if (!slug) return 'overview';
  if (slug in ALIASES) return ALIASES[slug];
  return (PAGES.find((p) => p.id === slug)?.id ?? 'overview') as PageId;
}

export const pageHref = (id: PageId) => (id === 'overview' ? '/admin/' : `/admin/${id}`);

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
