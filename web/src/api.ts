/**
 * Typed fetch helpers for castd's HTTP API (Owncast-compatible paths).
 * Public calls are plain GETs; chat-user calls carry `?accessToken=`; admin calls rely on the browser's
 * HTTP Basic credentials for this same-origin page (`credentials: 'same-origin'`).
 *
 * Every URL the pages fetch, or open a socket to, is built here by `apiUrl` / `chatSocketUrl` from `location.origin`
 * and a path, never resolved against the document URL: a page opened as `http://admin:password@host/admin/` has the
 * credentials in its document URL, and `fetch` refuses any URL that carries them ("Request cannot be constructed from a
 * URL that includes credentials"). `location.origin` is `scheme://host[:port]` and never has a user or password.
 *
 * Channels: a page of a channel other than the default calls that channel's API, under its base path (`/c/{slug}`,
 * `lib/base.ts`): `apiUrl` and everything built on it put the base in front. The server-wide routes (`/api/channels`,
 * `/api/admin/channels`) are called at the root (`rootUrl`, `channels`, `serverAdmin`).
 */
import { passMayHaveEnded, reportUnauthorized, type ViewerAccess, type ViewerPassAnswer } from './lib/access';
import { basePath, withBase } from './lib/base';
import { withQuery } from './lib/urls';
import type { components, paths } from './api.gen';

// ---------- the API's shapes ----------
//
// Generated, not copied: each is a schema of castd's OpenAPI document (`castd openapi`, the document castd serves at
// /api/openapi.json), which web/scripts/gen-api.sh turns into api.gen.ts (`npm run gen:api`; `make lint` fails when
// the committed file is not current). Where a shape here is wrong, the document is: fix the Rust type's schema.

/** The document's schemas, by name, and its routes by path (for shapes the document writes out in place). */
export type Schemas = components['schemas'];
export type { paths };
/** The JSON body of a route's 200 answer (`Answer<'/api/admin/encoders', 'get'>`), for answers without a schema name. */
export type Answer<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: { 200: { content: { 'application/json': infer T } } };
}
  ? T
  : never;

export type StatusResponse = Schemas['StatusResponse'];
export type SocialHandle = Schemas['SocialHandle'];
/** An entry of `GET /api/socialplatforms` (keyed by platform). */
export type SocialPlatform = Schemas['SocialPlatform'];
export type ExternalAction = Schemas['ExternalAction'];
export type User = Schemas['User'];
export type ChatMessage = Schemas['ChatMessage'];
export type PublicConfig = Schemas['PublicConfig'];
/** The current or next scheduled stream, as `/api/status` gives it. */
export type ScheduledStatus = Schemas['ScheduledStatus'];
/** One scheduled stream (`/api/schedule`, `/api/admin/schedule`). */
export type ScheduledEvent = Schemas['ScheduledEvent'];
/** A recurring series. */
export type ScheduledEventSeries = Schemas['ScheduledEventSeries'];
export type AdminSchedule = Schemas['AdminSchedule'];
export type PublicStatus = Schemas['PublicStatus'];
export type RegisterResponse = Schemas['RegisterResponse'];
export type CustomEmoji = Schemas['Emoji'];

// ---------- admin shapes ----------

export type StreamKey = Schemas['StreamKey'];
/** A simulcast target as `serverconfig` shows it (`streamKey`: `********` when set, empty when not). */
export type SimulcastTarget = Schemas['SimulcastTarget'];
/** `GET /api/admin/simulcast/status`: one per target. */
export type SimulcastStatus = Schemas['TargetStatus'];
export type OutputVariant = Schemas['StreamOutputVariant'];
/** One rung of `LadderFit`: its size as counted, its encoder and preset, and the CPU it keeps busy. */
export type RungFit = Schemas['RungFit'];
/** `GET|POST /api/admin/video/fit`: whether a ladder fits this box (measured once per box and rung). */
export type LadderFit = Schemas['LadderFit'];
export type AdminStatus = Schemas['AdminStatus'];
export type TimePoint = Schemas['Point'];
/** One GPU of `/api/admin/hardwarestats`: percent series, temperature (°C) and power (W) series. */
export type GpuStats = Schemas['GpuSeries'];
export type HardwareStats = Schemas['HardwareStats'];
/** `GET /api/admin/metrics/video`: playback series (seconds, kbps, counts) per metrics window. */
export type VideoMetrics = Schemas['VideoMetrics'];
/** A playback client's latest measurements. */
export type PlaybackMeasurement = Schemas['PlaybackJson'];
/** One entry of `GET /api/admin/viewers/playback`. */
export type PlaybackClient = Schemas['ClientEntry'];

/** The levels the log view filters by (`LogEntry.level`). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warning' | 'error';

/** One entry of `GET /api/admin/logs` and `GET /api/admin/logs/warnings` (both oldest first). */
export type LogEntry = Schemas['LogEntry'];
export type S3Info = Schemas['S3Info'];
export type ServerConfig = Schemas['ServerConfig'];
/** The JWT issuer a token channel trusts (`secret` masked as `********` when set). */
export type ViewerJwtConfig = Schemas['JwtSettings'];
/** The admission hook (`secret` masked as `********` when set). */
export type AdmissionHookConfig = Schemas['HookSettings'];
/** `serverconfig.access`. */
export type AccessConfig = Schemas['AccessConfig'];
/** `GET /api/admin/viewer/passwords`. */
export type ViewerPassword = Schemas['PasswordRow'];
/** `GET /api/admin/viewer/invites` (`maxUses` 0: unlimited). */
export type ViewerInvite = Schemas['InviteRow'];
/** `GET /api/admin/encoders`. */
export type EncodersAnswer = Answer<'/api/admin/encoders', 'get'>;
/** An encoder of `EncodersAnswer`; with `decode`, a decode path (libx264 on pictures decoded and scaled there). */
export type EncoderInfo = EncodersAnswer['encoders'][number];

export type IpBan = Schemas['IpBan'];
export type AccessToken = Schemas['AccessToken'];
export type Webhook = Schemas['Webhook'];

// ---------- URLs ----------

/** This page's origin (`scheme://host[:port]`); '' outside a browser or in an opaque-origin (sandboxed) frame. */
export function pageOrigin(): string {
  const origin = typeof location !== 'undefined' ? location.origin : '';
  return origin && origin !== 'null' ? origin : '';
}

/**
 * The absolute URL of a path at the root of this server: `origin` + `path`. Any user:password in `origin` is dropped,
 * and leading slashes of `path` are collapsed so that `//other.host/x` stays on this server. Without an origin (tests,
 * sandboxed frames) the path itself is returned.
 */
export function rootUrl(path: string, origin: string = pageOrigin()): string {
  const p = `/${path.replace(/^\/+/, '')}`;
  if (!origin) return p;
  let base: string;
  try {
    const u = new URL(origin);
    base = `${u.protocol}//${u.host}`;
  } catch {
    return p;
  }
  return base + p;
}

/**
 * The absolute URL of a path on this page's channel: `rootUrl` of the path under the channel's base path (`base`,
 * '' on the default channel: then it is the root's).
 */
export function apiUrl(path: string, origin: string = pageOrigin(), base: string = basePath()): string {
  return rootUrl(withBase(`/${path.replace(/^\/+/, '')}`, base), origin);
}

/**
 * The chat websocket URL. `override` is the admin's `socketHostOverride` (e.g. `wss://chat.example.com`,
 * `https://chat.example.com` or `chat.example.com`); without it the socket goes to this page's origin. Either way
 * the path is this page's channel's `/ws` (`base` + `/ws`).
 */
export function chatSocketUrl(override: string | undefined, accessToken: string, origin: string = pageOrigin(), base: string = basePath()): string {
  const o = (override ?? '').trim().replace(/\/+$/, '');
  const secure = origin ? origin.startsWith('https:') : typeof location !== 'undefined' && location.protocol === 'https:';
  let host: string;
  if (/^wss?:\/\//i.test(o)) host = o;
  else if (/^https?:\/\//i.test(o)) host = o.replace(/^http/i, 'ws');
  else if (o) host = `${secure ? 'wss' : 'ws'}://${o}`;
  else host = rootUrl('', origin).replace(/\/$/, '').replace(/^http/i, 'ws');
  // Never a user:password@ in a socket URL either.
  host = host.replace(/^(wss?:\/\/)[^/@]*@/i, '$1');
  return `${host}${withBase('/ws', base)}?accessToken=${encodeURIComponent(accessToken)}`;
}

// ---------- fetch helpers ----------

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

async function errorFrom(res: Response): Promise<ApiError> {
  let message = `${res.status} ${res.statusText}`.trim();
  try {
    const text = await res.text();
    if (text) {
      try {
        const body = JSON.parse(text) as Partial<StatusResponse> & { error?: string };
        message = body.message || body.error || message;
      } catch {
        message = text.length < 300 ? text.trim() : message;
      }
    }
  } catch {
    /* keep the status line */
  }
  return new ApiError(message, res.status);
}

/**
 * `url` is a path on this page's channel (`/api/...`; `apiUrl` makes it absolute), or at the server's root with
 * `root` (`rootUrl`).
 */
async function request<T>(
  method: string,
  url: string,
  body?: unknown,
  root = false,
  extraHeaders: Record<string, string> = {},
): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { Accept: 'application/json', ...extraHeaders } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { ...init.headers, 'Content-Type': 'application/json' };
  }
  const res = await fetch(root ? rootUrl(url) : apiUrl(url), init);
  // On a private channel a 401 may mean the viewing pass ended: the viewer pages go back to their prompt.
  if (res.status === 401 && !root && passMayHaveEnded(url)) reportUnauthorized();
  if (!res.ok) throw await errorFrom(res);
  const text = await res.text();
  if (!text) return undefined as T;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text as T;
  }
  // A StatusResponse with success:false is an error even on a 2xx.
  if (parsed && typeof parsed === 'object' && (parsed as StatusResponse).success === false) {
    throw new ApiError((parsed as StatusResponse).message || 'request failed', res.status);
  }
  return parsed as T;
}

export const getJSON = <T>(url: string) => request<T>('GET', url);
export const postJSON = <T = StatusResponse>(url: string, body: unknown) => request<T>('POST', url, body);

// ---------- public / chat ----------

export const api = {
  config: () => getJSON<PublicConfig>('/api/config'),
  status: () => getJSON<PublicStatus>('/api/status'),
  replays: () => getJSON<Replay[]>('/api/replays'),
  /** One replay (what a link to it opens; the replay's own rules). */
  replay: (id: string) => getJSON<Replay>(`/api/replays/${encodeURIComponent(id)}`),
  /** A replay's chat from `from` to `to` seconds of it (each message with its offset). */
  replayChat: (id: string, from?: number, to?: number) =>
    getJSON<ReplayChat>(withQuery(`/api/replays/${encodeURIComponent(id)}/chat`, { from, to })),
  /** The chat of a clip's window (offsets from the clip's start). */
  clipChat: (id: string) => getJSON<ReplayChat>(`/api/clips/${encodeURIComponent(id)}/chat`),
  clip: (accessToken: string, body: Schemas['AddClip']) =>
    postJSON<Schemas['ClipCreated']>(withQuery('/api/clip', { accessToken }), body),
  ping: () => fetch(apiUrl('/api/ping'), { credentials: 'same-origin', cache: 'no-store' }).then(() => undefined),
  emoji: () => getJSON<CustomEmoji[]>('/api/emoji'),
  register: (displayName?: string) =>
    postJSON<RegisterResponse>('/api/chat/register', displayName ? { displayName } : {}),
  chatHistory: (accessToken: string) => getJSON<ChatMessage[]>(withQuery('/api/chat', { accessToken })),
  hideMessage: (accessToken: string, id: string, visible = false) =>
    postJSON(withQuery('/api/chat/messagevisibility', { accessToken }), { idArray: [id], visible }),
  setUserEnabled: (accessToken: string, userId: string, enabled: boolean) =>
    postJSON(withQuery('/api/chat/users/setenabled', { accessToken }), { userId, enabled }),
  registerNotification: (accessToken: string, channel: string, destination: string) =>
    postJSON(withQuery('/api/notifications/register', { accessToken }), { channel, destination }),
  /** Start an IndieAuth chat sign-in with the user's website; answers where to send the browser. */
  indieAuthStart: (accessToken: string, authHost: string) =>
    postJSON<{ redirect: string }>(withQuery('/api/auth/indieauth', { accessToken }), { authHost }),
  /** Fediverse chat sign-in, step 1: castd sends a one-time code by direct message to `account` (`user@host`). */
  fediverseSignInStart: (accessToken: string, account: string) =>
    postJSON<StatusResponse>(withQuery('/api/auth/fediverse', { accessToken }), { account }),
  /** Fediverse chat sign-in, step 2: the code the account received; signs this chat user in (403 when wrong or expired). */
  fediverseSignInVerify: (accessToken: string, code: string) =>
    postJSON<StatusResponse>(withQuery('/api/auth/fediverse/verify', { accessToken }), { code }),
  /** Platform key → `{name, icon}` for social handles. */
  socialPlatforms: () => getJSON<Record<string, SocialPlatform>>('/api/socialplatforms'),
  remoteFollow: (account: string) => postJSON<{ redirectUrl?: string } & Partial<StatusResponse>>('/api/remotefollow', { account }),
  cmcd: (report: unknown) =>
    fetch(apiUrl('/api/metrics/cmcd'), {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(report),
      keepalive: true,
    }).then(() => undefined),
};

// ---------- viewer access (private channels) ----------

/** The answer of a way in: the pass, or the status and the server's message. */
export type UnlockResult = { ok: true; answer: ViewerPassAnswer } | { ok: false; status: number; message: string };

async function viewerPost(path: string, body: unknown): Promise<UnlockResult> {
  let res: Response;
  try {
    res = await fetch(apiUrl(path), {
      method: 'POST',
      credentials: 'same-origin',
      headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch (e) {
    return { ok: false, status: 0, message: (e as Error).message };
  }
  if (res.ok) {
    const answer = (await res.json().catch(() => ({}))) as ViewerPassAnswer;
    return { ok: true, answer };
  }
  const err = await errorFrom(res);
  // errorFrom falls back to the status line; the prompt wants only a server-given message.
  const statusLine = `${res.status} ${res.statusText}`.trim();
  return { ok: false, status: res.status, message: err.message === statusLine ? '' : err.message };
}

/** `/api/viewer/*`: what the prompt needs, and the ways in (each sets the pass cookie on success). */
export const viewer = {
  access: () => getJSON<ViewerAccess>('/api/viewer/access'),
  unlock: (password: string) => viewerPost('/api/viewer/unlock', { password }),
  invite: (invite: string) => viewerPost('/api/viewer/invite', { invite }),
  token: (jwt: string) => viewerPost('/api/viewer/token', { jwt }),
  lock: () => postJSON('/api/viewer/lock', {}),
};

// ---------- channels ----------

/** A channel of the public list (`GET /api/channels`, live first). */
export type PublicChannel = Schemas['PublicChannel'];

/** Who may watch a channel (`password`/`token`: a viewing pass; see the channel's Privacy page). */
export type Visibility = Schemas['Visibility'];

/** A channel as the server admin's list shows it (`GET /api/admin/channels`). */
export type AdminChannel = Schemas['AdminChannel'];

/** The server-wide channel routes: at the root of the server, whichever channel's page calls them. */
export const channels = {
  list: () => request<PublicChannel[]>('GET', '/api/channels', undefined, true),
};

/** The server admin's channel routes (root only; a channel admin's credentials get 401 there). */
export const serverAdmin = {
  channels: () => request<AdminChannel[]>('GET', '/api/admin/channels', undefined, true),
  /**
   * The list if this browser's credentials are the server admin's; a 401 otherwise, which castd sends without its
   * `WWW-Authenticate` challenge for this header, so a channel admin's browser asks for no other password.
   */
  probeChannels: () =>
    request<AdminChannel[]>('GET', '/api/admin/channels', undefined, true, { 'X-Castd-No-Challenge': '1' }),
  createChannel: (body: Schemas['CreateChannel']) =>
    request<StatusResponse>('POST', '/api/admin/channels/create', body, true),
  updateChannel: (body: Schemas['UpdateChannel']) =>
    request<StatusResponse>('POST', '/api/admin/channels/update', body, true),
  deleteChannel: (body: Schemas['DeleteChannel']) => request<StatusResponse>('POST', '/api/admin/channels/delete', body, true),
};

// ---------- replays and clips ----------

/** A recorded broadcast (`/api/admin/replays`, `/api/replays`). */
export type Replay = Schemas['Replay'];

/** A clip (`/api/clips`). */
export type Clip = Schemas['Clip'];

/** A window of a replay's (or a clip's) chat (`/api/replays/{id}/chat`, `/api/clips/{id}/chat`). */
export type ReplayChat = Schemas['ReplayChat'];
export type ReplayChatMessage = Schemas['ReplayChatMessage'];

// ---------- admin ----------

const A = '/api/admin';

export const admin = {
  get: <T>(path: string, params?: Record<string, string | number | boolean | undefined>) =>
    getJSON<T>(withQuery(`${A}/${path}`, params ?? {})),
  post: <T = StatusResponse>(path: string, body: unknown) => postJSON<T>(`${A}/${path}`, body),
  del: <T = StatusResponse>(path: string) => request<T>('DELETE', `${A}/${path}`),
  /** Every setting is `POST /api/admin/config/<name>` with `{value}`. */
  setConfig: (name: string, value: unknown) => postJSON(`${A}/config/${name}`, { value }),

  status: () => getJSON<AdminStatus>(`${A}/status`),
  serverConfig: () => getJSON<ServerConfig>(`${A}/serverconfig`),
  hardwareStats: () => getJSON<HardwareStats>(`${A}/hardwarestats`),
  encoders: () => getJSON<EncodersAnswer>(`${A}/encoders`),
  /** Whether a ladder (the saved one or an edited one) fits this box. Always POST: the route's GET is
   * for tools only and refused to a browser (it makes the box measure). */
  videoFit: (variants: OutputVariant[]) => postJSON<LadderFit>(`${A}/video/fit`, { variants }),
  viewersOverTime: () => getJSON<TimePoint[]>(`${A}/viewersOverTime`),
  videoMetrics: () => getJSON<VideoMetrics>(`${A}/metrics/video`),
  playbackClients: () => getJSON<PlaybackClient[]>(`${A}/viewers/playback`),
  logs: () => getJSON<LogEntry[]>(`${A}/logs`),
  logWarnings: () => getJSON<LogEntry[]>(`${A}/logs/warnings`),
};
