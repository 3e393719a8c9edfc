/**
 * Viewer access to a private channel (password or token visibility): the shapes of `/api/viewer/*`, the decisions the
 * viewer pages make from them (prompt or page, which ways in to offer), the `?invite=` / `?jwt=` a page may still find
 * in its own URL, and the "a call answered 401" signal that sends a page back to its prompt.
 *
 * Pure logic, no DOM: `viewer/Access.tsx` renders the prompt from it.
 */
import type { components } from '../api.gen';

/** Who may watch a channel (`password`/`token`: a viewing pass). */
export type Visibility = components['schemas']['Visibility'];

/** `GET /api/viewer/access` (generated from castd's OpenAPI document: see `api.ts`). */
export type ViewerAccess = components['schemas']['AccessInfo'];

/** A way in that the channel offers (`methods` of `GET /api/viewer/access`). */
export type AccessMethod = ViewerAccess['methods'][number];

/** `POST /api/viewer/unlock|invite|token` on success. */
export type ViewerPassAnswer = components['schemas']['PassAnswer'];

/** Whether a channel's visibility asks every viewer for a pass. */
export const needsPass = (v: Visibility | string | undefined): boolean => v === 'password' || v === 'token';

/** Whether the page must show the prompt instead of the stream. */
export function mustPrompt(a: Pick<ViewerAccess, 'visibility' | 'unlocked'> | null | undefined): boolean {
  return Boolean(a && needsPass(a.visibility) && !a.unlocked);
}

/** What the prompt offers: a password field, a "Sign in" link (token channels with a login URL). */
export function promptOptions(a: Pick<ViewerAccess, 'visibility' | 'methods' | 'loginUrl'>): { password: boolean; signIn: string | null } {
  const methods = Array.isArray(a.methods) ? a.methods : [];
  const login = safeLoginUrl(a.loginUrl);
  return {
    password: methods.includes('password'),
    signIn: a.visibility === 'token' && login ? login : null,
  };
}

/** The login URL as a link target: http(s) or a path on this server; anything else (`javascript:`…) is no link. */
export function safeLoginUrl(url: string | undefined | null): string | null {
  const u = (url ?? '').trim();
  if (!u) return null;
  if (/^https?:\/\//i.test(u)) return u;
  if (u.startsWith('/') && !u.startsWith('//')) return u;
  return null;
}

/** The one line under the channel's name on the prompt. */
export function promptLead(a: Pick<ViewerAccess, 'visibility' | 'methods' | 'loginUrl'>): string {
  const { password, signIn } = promptOptions(a);
  if (password && signIn) return 'This stream is private. Enter the password, or sign in, to watch.';
  if (password) return 'This stream is private. Enter the password to watch.';
  if (signIn) return 'This stream is for members. Sign in to watch.';
  return 'This stream is private. Open the invite link you were given to watch.';
}

/** A credential the page found in its own URL: `?invite=` or `?jwt=` (the server usually redeems it first). */
export interface UrlCredential {
  kind: 'invite' | 'jwt';
  value: string;
}

/** The `?invite=` / `?jwt=` of a query string (`location.search`), the invite first. */
export function urlCredential(search: string): UrlCredential | null {
  const q = new URLSearchParams(search);
  const invite = q.get('invite')?.trim();
  if (invite) return { kind: 'invite', value: invite };
  const jwt = q.get('jwt')?.trim();
  if (jwt) return { kind: 'jwt', value: jwt };
  return null;
}

/** `url` (path + query + hash) without its `invite` and `jwt` parameters (so a copied address carries no secret). */
export function withoutCredential(url: string): string {
  const hashAt = url.indexOf('#');
  const hash = hashAt >= 0 ? url.slice(hashAt) : '';
  const rest = hashAt >= 0 ? url.slice(0, hashAt) : url;
  const qAt = rest.indexOf('?');
  if (qAt < 0) return url;
  const q = new URLSearchParams(rest.slice(qAt + 1));
  q.delete('invite');
  q.delete('jwt');
  const s = q.toString();
  return `${rest.slice(0, qAt)}${s ? `?${s}` : ''}${hash}`;
}

/** The text the prompt shows for a failed unlock: the server's message, or a plain one for its status. */
export function failureText(status: number, message: string | undefined): string {
  const m = (message ?? '').trim();
  if (m) return m;
  if (status === 401) return 'wrong password';
  if (status === 429) return 'Too many tries. Wait a moment, then try again.';
  if (status === 403) return 'You may not watch this stream.';
  return `Could not unlock (${status || 'network error'}).`;
}

// ---------- "a call answered 401" ----------

type Listener = () => void;
const listeners = new Set<Listener>();

/** Be told when a call of this page answered 401 (the pass may have ended). Returns the unsubscribe function. */
export function onUnauthorized(fn: Listener): () => void {
  listeners.add(fn);
  return () => {
    listeners.delete(fn);
  };
}

/** A call of this page answered 401 (`api.ts` calls this for every such answer outside the admin API). */
export function reportUnauthorized(): void {
  for (const fn of [...listeners]) fn();
}

/** Whether a 401 from `path` may mean the viewing pass ended (not an admin or viewer-access call). */
export function passMayHaveEnded(path: string): boolean {
  const p = path.replace(/^https?:\/\/[^/]+/i, '').replace(/^\/c\/[^/]+/, '');
  return !p.startsWith('/api/admin/') && !p.startsWith('/api/viewer/');
}

// ---------- the admin's Privacy page ----------

/** The four visibilities, each with its one line for the admin. */
export const VISIBILITY_CHOICES: ReadonlyArray<{ value: Visibility; label: string; help: string }> = [
  { value: 'public', label: 'Public', help: 'Anyone may watch; listed in the channel directory and announced to the fediverse.' },
  { value: 'unlisted', label: 'Unlisted', help: 'Anyone with the link may watch; not in the directory, no public go-live posts.' },
  { value: 'password', label: 'Password', help: 'Viewers enter one of the passwords below (or open an invite link) before anything of the stream is shown.' },
  { value: 'token', label: 'Token', help: "Viewers arrive signed in from your own site with a token (JWT) of the issuer below, or open an invite link." },
];

/** Pass lifetime bounds (seconds), as the server checks them. */
export const PASS_SECONDS = { min: 10, max: 30 * 24 * 3600 } as const;

/** Invite expiries offered when creating a link (`0`: never). */
export const INVITE_EXPIRIES: ReadonlyArray<{ seconds: number; label: string }> = [
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '1 day' },
  { seconds: 7 * 86400, label: '7 days' },
  { seconds: 30 * 86400, label: '30 days' },
  { seconds: 0, label: 'Never' },
];

/** "12 hours", "30 days", "1 day 2 hours", "90 seconds". */
export function formatSeconds(total: number): string {
  if (!Number.isFinite(total) || total < 0) return '';
  const units: Array<[number, string]> = [
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
    [1, 'second'],
  ];
  const parts: string[] = [];
  let rest = Math.floor(total);
  for (const [size, name] of units) {
    const n = Math.floor(rest / size);
    if (n) {
      parts.push(`${n} ${name}${n === 1 ? '' : 's'}`);
      rest -= n * size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(' ') || '0 seconds';
}

/** An invite's uses: "3 / 10", "3 (no limit)". */
export function usesText(uses: number, maxUses: number): string {
  return maxUses > 0 ? `${uses} / ${maxUses}` : `${uses} (no limit)`;
}

/** The invite link to show: the server's `url` made absolute on this page's origin when it is a path. */
export function absoluteLink(url: string, origin: string): string {
  if (/^https?:\/\//i.test(url)) return url;
  if (!origin) return url;
  return `${origin.replace(/\/+$/, '')}/${url.replace(/^\/+/, '')}`;
}

/** A masked secret as serverconfig shows it. */
export const MASKED = '********';
