/**
 * The channel a page belongs to. castd serves every channel other than the default under `/c/{slug}`, and puts
 * that base path in `<meta name="castd-base" content="/c/{slug}">` at the top of each of its pages; the default
 * channel's pages (at the root) have no such meta, so their base is ''. Every path the pages request on their own
 * channel (`/api/...`, `/ws`, `/hls/...`, `/logo`, `/replay/...`, `/admin/...`) goes through `withBase`; the few
 * server-wide ones (`/api/channels`, `/api/admin/channels`, `/channels`, the `/assets/` of the build) do not.
 *
 * The meta is read once, on first use.
 */

export const BASE_META = 'castd-base';

/** A base path as the meta may give it: `/seg[/seg...]`, no trailing slash; anything else is no base. */
const BASE_RE = /^(\/[A-Za-z0-9._~-]+)+$/;

/** The base path the meta of `doc` names ('' when there is none, or it is not a plain path). */
export function readBase(doc: Pick<Document, 'querySelector'> | undefined = typeof document === 'undefined' ? undefined : document): string {
  const content = doc?.querySelector(`meta[name="${BASE_META}"]`)?.getAttribute('content') ?? '';
  const base = content.trim().replace(/\/+$/, '');
  return BASE_RE.test(base) ? base : '';
}

let cached: string | null = null;

/** This page's base path: '' on the default channel's pages, `/c/{slug}` on another channel's. */
export function basePath(): string {
  if (cached === null) cached = readBase();
  return cached;
}

/** Forget the base read so far (tests; a page that adds the meta itself before first use needs no call). */
export function resetBase(): void {
  cached = null;
}

/**
 * `path` on this page's channel: a server path (`/api/status`) gets the base in front (`/c/music/api/status`).
 * A path that already starts with the base, a full URL (`https://…`, `//host/…`) and a relative one are returned
 * as they are.
 */
export function withBase(path: string, base: string = basePath()): string {
  if (!base || !path.startsWith('/') || path.startsWith('//')) return path;
  if (path === base || path.startsWith(`${base}/`) || path.startsWith(`${base}?`)) return path;
  return base + path;
}

/** A chat body (server-sanitized HTML) with its custom emoji (`src="/img/emoji/…"`) on this page's channel. */
export function rebaseEmoji(html: string, base: string = basePath()): string {
  if (!base) return html;
  return html.replace(/(\ssrc=")(\/img\/emoji\/)/g, `$1${base}$2`);
}
