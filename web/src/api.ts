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

// ---------- shared shapes ----------

export interface StatusResponse {
  success: boolean;
  message: string;
}

export interface SocialHandle {
  platform: string;
  url: string;
  icon?: string;
}

/** An entry of `GET /api/socialplatforms` (keyed by platform). */
export interface SocialPlatform {
  name: string;
  icon: string;
}

export interface ExternalAction {
  url: string;
  html?: string;
  title: string;
  description?: string;
  icon?: string;
  color?: string;
  openExternally?: boolean;
}

export interface User {
  id: string;
  displayName: string;
  displayColor: number;
  createdAt?: string;
  previousNames?: string[];
  nameChangedAt?: string;
  scopes?: string[];
  authProviders?: string[];
  /** How an authenticated user signed in (`indieauth`, `fediverse`). */
  authProvider?: string;
  isBot?: boolean;
  authenticated?: boolean;
  isModerator?: boolean;
  disabledAt?: string | null;
}

export interface ChatMessage {
  id: string;
  timestamp: string;
  type: string;
  body?: string;
  user?: User;
  hiddenAt?: string | null;
  visible?: boolean;
  clientId?: number;
}

export interface PublicConfig {
  name: string;
  summary: string;
  streamTitle?: string;
  offlineMessage?: string;
  logo?: string;
  version?: string;
  tags?: string[];
  customStyles?: string;
  extraPageContent?: string;
  socketHostOverride?: string;
  appearanceVariables?: Record<string, string>;
  socialHandles?: SocialHandle[];
  externalActions?: ExternalAction[];
  notifications?: { browser?: { enabled: boolean; publicKey: string } };
  federation?: { enabled: boolean; account: string; followerCount: number; hideFollowersTab?: boolean };
  maxSocketPayloadSize?: number;
  hideViewerCount?: boolean;
  chatDisabled?: boolean;
  chatRequireAuthentication?: boolean;
  nsfw?: boolean;
  autoplay?: string;
  authentication?: { indieAuthEnabled: boolean };
  schedule?: { enabled: boolean; showCountdown: boolean; chatOpenMinutesBefore: number };
  clips?: { enabled: boolean; maxDurationSeconds: number; permissions: string };
}

/** The current or next scheduled stream, as `/api/status` gives it. */
export interface ScheduledStatus {
  id: string;
  name: string;
  description: string;
  startTime: string;
  durationMinutes: number;
  chatOpen: boolean;
}

/** One scheduled stream (`/api/schedule`, `/api/admin/schedule`). */
export interface ScheduledEvent {
  id: string;
  seriesId?: string;
  name: string;
  description: string;
  reminderMessage?: string;
  startTime: string;
  durationMinutes: number;
  timezone: string;
  status: 'scheduled' | 'cancelled';
}

/** A recurring series. */
export interface ScheduledEventSeries {
  id: string;
  name: string;
  description: string;
  reminderMessage?: string;
  recurrence: string;
  durationMinutes: number;
  active: boolean;
}

export interface AdminSchedule {
  series: ScheduledEventSeries[];
  events: ScheduledEvent[];
}

export interface PublicStatus {
  online: boolean;
  viewerCount?: number;
  streamTitle?: string;
  lastConnectTime?: string | null;
  lastDisconnectTime?: string | null;
  serverTime?: string;
  versionNumber?: string;
  scheduledEvent?: ScheduledStatus;
  /** The live broadcast's id, while live and clipping is on. */
  streamId?: string;
}

export interface RegisterResponse {
  id: string;
  accessToken: string;
  displayName: string;
  displayColor?: number;
}

export interface CustomEmoji {
  name: string;
  url: string;
}

// ---------- admin shapes ----------

export interface StreamKey {
  key: string;
  comment: string;
}

/** A simulcast target as `serverconfig` shows it (`streamKey`: `********` when set, empty when not). */
export interface SimulcastTarget {
  id: string;
  name: string;
  url: string;
  streamKey: string;
  enabled: boolean;
  /** `source` (the broadcaster's stream, no encode) or a variant index. */
  variant: 'source' | number;
}

/** `GET /api/admin/simulcast/status`: one per target. */
export interface SimulcastStatus {
  id: string;
  name: string;
  state: 'off' | 'connecting' | 'live' | 'retrying' | 'failed';
  since: string;
  bytesSent: number;
  bitrateKbps: number;
  lastError: string | null;
  reconnects: number;
}

export interface OutputVariant {
  name?: string;
  videoPassthrough: boolean;
  audioPassthrough: boolean;
  videoBitrate: number;
  audioBitrate: number;
  scaledWidth: number;
  scaledHeight: number;
  framerate: number;
  cpuUsageLevel: number;
}

/** One rung of `LadderFit`: its size as counted, its encoder and preset, and the CPU it keeps busy. */
export interface RungFit {
  index: number;
  name: string;
  width: number;
  height: number;
  framerate: number;
  encoder: string;
  preset: string;
  cpuCoresNeeded: number;
  speed?: number | null;
  measured: boolean;
}

/** `GET|POST /api/admin/video/fit`: whether a ladder fits this box (measured once per box and rung). */
export interface LadderFit {
  fits: boolean;
  cores: number;
  budgetCores: number;
  loadCores: number;
  decodeCores: number;
  encoder: string;
  cached: boolean;
  measuredAt?: string | null;
  message: string;
  variants: RungFit[];
}

export interface AdminStatus {
  online: boolean;
  broadcaster?: {
    remoteAddr: string;
    time: string;
    streamDetails?: {
      width: number;
      height: number;
      framerate: number;
      videoBitrate: number;
      audioBitrate: number;
      videoCodec: string;
      audioCodec: string;
      encoder: string;
    };
  } | null;
  currentBroadcast?: {
    outputSettings?: OutputVariant[];
    latencyLevel?: { level: number } | number;
    videoCodec?: string;
  } | null;
  health?: { message: string; healthy: boolean; healthPercentage: number | null; representation?: number } | null;
  streamTitle?: string;
  versionNumber?: string;
  viewerCount?: number;
  overallPeakViewerCount?: number;
  sessionPeakViewerCount?: number;
  /** Weak-secret and similar configuration warnings (missing on older servers: treat as none). */
  warnings?: string[];
}

export interface TimePoint {
  time: string;
  value: number;
}

/** One GPU of `/api/admin/hardwarestats`: percent series, temperature (°C) and power (W) series. */
export interface GpuStats {
  index?: number;
  name: string;
  memoryTotalMiB?: number | null;
  memoryUsedMiB?: number | null;
  utilization?: TimePoint[];
  encoder?: TimePoint[];
  decoder?: TimePoint[];
  memory?: TimePoint[];
  temperature?: TimePoint[];
  power?: TimePoint[];
}

export interface HardwareStats {
  cpu?: TimePoint[];
  memory?: TimePoint[];
  disk?: TimePoint[];
  gpu?: GpuStats[];
  message?: string;
  healthy?: boolean;
  healthPercentage?: number | null;
}

/** `GET /api/admin/metrics/video`: playback series (seconds, kbps, counts) per metrics window. */
export interface VideoMetrics {
  errors?: TimePoint[];
  qualityVariantChanges?: TimePoint[];
  highestLatency?: TimePoint[];
  medianLatency?: TimePoint[];
  lowestLatency?: TimePoint[];
  medianSegmentDownloadDuration?: TimePoint[];
  maximumSegmentDownloadDuration?: TimePoint[];
  minimumSegmentDownloadDuration?: TimePoint[];
  minPlayerBitrate?: TimePoint[];
  medianPlayerBitrate?: TimePoint[];
  maxPlayerBitrate?: TimePoint[];
  availableBitrates?: number[];
  segmentLength?: number;
  representation?: number | null;
}

/** A playback client's latest measurements. */
export interface PlaybackMeasurement {
  source: string;
  lastUpdate: string;
  playerState: string;
  measurementStatus: string;
  bandwidthKbps: number;
  latencySeconds: number | null;
  downloadSeconds: number | null;
  bitrateKbps: number;
  errorCount: number;
  qualityVariantChanges: number;
  /** WebRTC viewers only (`source: "webrtc"`): packet loss from their RTCP receiver reports, percent. */
  packetLossPercent?: number;
  /** WebRTC viewers only: round-trip time, seconds. */
  roundTripSeconds?: number;
}

/** One entry of `GET /api/admin/viewers/playback`. */
export interface PlaybackClient {
  clientID: string;
  viewerID: string;
  firstSeen: string;
  userAgent: string;
  ipAddress: string;
  playback: PlaybackMeasurement | null;
}

export type LogLevel = 'trace' | 'debug' | 'info' | 'warning' | 'error';

/** One entry of `GET /api/admin/logs` and `GET /api/admin/logs/warnings` (both oldest first). */
export interface LogEntry {
  message: string;
  level: LogLevel | string;
  time: string;
}

export interface S3Info {
  enabled: boolean;
  endpoint: string;
  accessKey: string;
  secret: string;
  bucket: string;
  region: string;
  acl: string;
  pathPrefix: string;
  forcePathStyle: boolean;
}

export interface ServerConfig {
  instanceDetails: {
    name: string;
    summary: string;
    welcomeMessage: string;
    offlineMessage: string;
    logo: string;
    tags: string[];
    nsfw: boolean;
    extraPageContent: string;
    streamTitle: string;
    socialHandles: SocialHandle[];
    customStyles: string;
    customJavascript: string;
    appearanceVariables: Record<string, string>;
    version?: string;
  };
  videoSettings: { videoQualityVariants: OutputVariant[]; latencyLevel: number };
  streamKeys: StreamKey[];
  streamKeyOverridden?: boolean;
  /** Accepted for Owncast compatibility; castd does not run ffmpeg. */
  ffmpegPath?: string;
  supportedCodecs: string[];
  videoCodec: string;
  s3: S3Info;
  federation: {
    enabled: boolean;
    isPrivate: boolean;
    username: string;
    goLiveMessage: string;
    showEngagement: boolean;
    blockedDomains: string[];
  };
  notifications: {
    browser: { enabled: boolean; goLiveMessage: string };
    discord: { enabled: boolean; webhook: string; goLiveMessage: string };
  };
  schedule?: {
    enabled: boolean;
    showCountdown: boolean;
    chatOpenMinutesBefore: number;
    reminderMessage: string;
    firstReminderMinutes: number;
    secondReminderMinutes: number;
  };
  replay?: {
    enabled: boolean;
    clipsEnabled: boolean;
    maxClipDurationSeconds: number;
    clipPermissions: string;
    forcedByCommandLine: boolean;
    maxGigabytes: number;
    retentionDays: number;
    announceClips: boolean;
  };
  yp: { enabled: boolean; instanceUrl: string };
  externalActions: ExternalAction[];
  chatDisabled: boolean;
  chatJoinMessagesEnabled: boolean;
  chatEstablishedUserMode: boolean;
  chatRequireAuthentication?: boolean;
  forbiddenUsernames: string[];
  suggestedUsernames: string[];
  hideViewerCount: boolean;
  disableSearchIndexing: boolean;
  socketHostOverride: string;
  videoServingEndpoint: string;
  webServerPort: number;
  webServerIP: string;
  rtmpServerPort: number;
  /** SRT ingest port; 0 when SRT is off. */
  srtServerPort: number;
  /** SRT encryption passphrase; empty when SRT is unencrypted. */
  srtPassphrase: string;
  /** castd: simulcast targets, stream keys masked. */
  simulcastTargets?: SimulcastTarget[];
  /** castd: who may watch this channel (missing on servers without private channels). */
  access?: AccessConfig;
}

/** The JWT issuer a token channel trusts (`secret` masked as `********` when set). */
export interface ViewerJwtConfig {
  secret: string;
  jwksUrl: string;
  issuer: string;
  audience: string;
  nameClaim: string;
  loginUrl: string;
}

/** The admission hook (`secret` masked as `********` when set). */
export interface AdmissionHookConfig {
  url: string;
  secret: string;
  onPlay: boolean;
  onPublish: boolean;
  cacheSeconds: number;
}

/** `serverconfig.access`. */
export interface AccessConfig {
  visibility: ViewerAccess['visibility'];
  viewerPassSeconds: number;
  privateFederationPosts: 'followers' | 'none';
  viewerJwt: ViewerJwtConfig;
  admissionHook: AdmissionHookConfig;
}

/** `GET /api/admin/viewer/passwords`. */
export interface ViewerPassword {
  id: string | number;
  comment: string;
  createdAt?: string;
}

/** `GET /api/admin/viewer/invites` (`maxUses` 0: unlimited). */
export interface ViewerInvite {
  id: string | number;
  comment: string;
  createdAt?: string;
  expiresAt?: string | null;
  maxUses: number;
  uses: number;
}

export interface EncoderInfo {
  name: string;
  kind: string;
  available: boolean;
  device?: string | null;
  reason?: string | null;
  /** Set on a decode path: libx264 encoding pictures decoded and scaled on this device (`cuda`, `vaapi`). */
  decode?: string | null;
}

/** `GET /api/admin/encoders`. */
export interface EncodersAnswer {
  encoders: EncoderInfo[];
  videoCodec: string;
  selected: string;
  /** The choice as people read it, e.g. `libx264 (decode and scaling on cuda:0)`. */
  selectedLabel?: string;
  inUse?: string[];
  probedAt?: string | null;
}

export interface Paged<T> {
  total: number;
  results: T[];
}

export interface IpBan {
  ipAddress: string;
  notes?: string;
  createdAt?: string;
}

export interface AccessToken {
  id?: string;
  accessToken: string;
  displayName: string;
  scopes: string[];
  createdAt?: string;
  lastUsedAt?: string | null;
}

export interface Webhook {
  id: number;
  url: string;
  events: string[];
  timestamp?: string;
  lastUsed?: string | null;
}

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
  clip: (accessToken: string, body: { streamId: string; clipTitle: string; relativeStartTimeSeconds: number; relativeEndTimeSeconds: number }) =>
    postJSON<{ success: boolean; message: string; id: string; durationSeconds: number }>(withQuery('/api/clip', { accessToken }), body),
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
export interface PublicChannel {
  slug: string;
  name: string;
  /** `public`, or `password`/`token`: a viewing pass is needed (no title, thumbnail nor viewer count then). */
  visibility?: Visibility;
  online: boolean;
  streamTitle: string;
  viewerCount: number;
  /** Its viewer page (`/` or `/c/{slug}/`). */
  url: string;
  /** Its thumbnail (meaningful while live). */
  thumbnail: string;
}

/** Who may watch a channel (`password`/`token`: a viewing pass; see the channel's Privacy page). */
export type Visibility = 'public' | 'unlisted' | 'password' | 'token';

/** A channel as the server admin's list shows it (`GET /api/admin/channels`). */
export interface AdminChannel {
  slug: string;
  name: string;
  visibility: Visibility;
  online: boolean;
  streamTitle?: string;
  viewerCount?: number;
  url: string;
  /** The default channel (today's castd, at `/`). */
  default: boolean;
  createdAt?: string;
}

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
  createChannel: (body: { slug: string; name: string; adminPassword: string; visibility?: Visibility }) =>
    request<StatusResponse>('POST', '/api/admin/channels/create', body, true),
  updateChannel: (body: { slug: string; name?: string; visibility?: Visibility; adminPassword?: string }) =>
    request<StatusResponse>('POST', '/api/admin/channels/update', body, true),
  deleteChannel: (body: { slug: string; purge: boolean }) => request<StatusResponse>('POST', '/api/admin/channels/delete', body, true),
};

// ---------- replays and clips ----------

/** A recorded broadcast (`/api/admin/replays`, `/api/replays`). */
export interface Replay {
  id: string;
  title?: string;
  startTime: string;
  endTime?: string;
  inProgress?: boolean;
  manifest: string;
  durationSeconds: number;
  totalBytes: number;
  clipCount: number;
  status: 'recording' | 'finished' | 'interrupted';
  streamTitle: string;
  public: boolean;
  pinned: boolean;
  download: string;
}

/** A clip (`/api/clips`). */
export interface Clip {
  id: string;
  streamId: string;
  clippedBy?: string;
  title?: string;
  streamTitle?: string;
  relativeStartTime: number;
  relativeEndTime: number;
  durationSeconds: number;
  manifest: string;
  thumbnail?: string;
  timestamp: string;
  download: string;
}

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
  /** Whether the configured ladder (no argument) or an unsaved one fits this box. */
  videoFit: (variants?: OutputVariant[]) =>
    variants ? postJSON<LadderFit>(`${A}/video/fit`, { variants }) : getJSON<LadderFit>(`${A}/video/fit`),
  viewersOverTime: () => getJSON<TimePoint[]>(`${A}/viewersOverTime`),
  videoMetrics: () => getJSON<VideoMetrics>(`${A}/metrics/video`),
  playbackClients: () => getJSON<PlaybackClient[]>(`${A}/viewers/playback`),
  logs: () => getJSON<LogEntry[]>(`${A}/logs`),
  logWarnings: () => getJSON<LogEntry[]>(`${A}/logs/warnings`),
};
