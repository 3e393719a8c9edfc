/** The chat model and how each server event changes it. Pure functions, so they can be unit-tested. */
import type { ChatMessage, User } from '../api';
import type { RawEvent } from './frame';

export interface ChatItem {
  id: string;
  type: string;
  timestamp?: string;
  /** Server-rendered, already sanitized HTML. */
  body?: string;
  user?: User;
  oldName?: string;
  hidden?: boolean;
  title?: string;
  link?: string;
  image?: string;
}

export interface ChatModel {
  items: ChatItem[];
  me: User | null;
  /** Set once the server says this user was removed from chat. */
  disabled: boolean;
}

export const MAX_ITEMS = 500;

export const emptyChat = (): ChatModel => ({ items: [], me: null, disabled: false });

export function isModerator(user: User | null | undefined): boolean {
  if (!user) return false;
  return Boolean(user.isModerator) || (user.scopes ?? []).includes('MODERATOR');
}

/** Event types that are rendered as lines in the message list. */
const RENDERED = new Set([
  'CHAT',
  'SYSTEM',
  'CHAT_ACTION',
  // A cluster edge could not hand the message to the origin (Redis down): shown so it is not lost silently.
  'ERROR_CHAT_UNAVAILABLE',
  'USER_JOINED',
  'USER_PARTED',
  'NAME_CHANGE',
  'FEDIVERSE_ENGAGEMENT_FOLLOW',
  'FEDIVERSE_ENGAGEMENT_LIKE',
  'FEDIVERSE_ENGAGEMENT_REPOST',
]);

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export function toItem(ev: RawEvent | ChatMessage): ChatItem {
  const e = ev as Record<string, unknown>;
  const id = str(e.id) ?? `${ev.type}-${str(e.timestamp) ?? ''}-${Math.random().toString(36).slice(2)}`;
  const hidden = Boolean(e.hiddenAt) || e.visible === false;
  return {
    id,
    type: ev.type,
    timestamp: str(e.timestamp),
    body: str(e.body),
    user: (e.user as User | undefined) ?? undefined,
    oldName: str(e.oldName),
    hidden,
    title: str(e.title),
    link: str(e.link),
    image: str(e.image),
  };
}

function trim(items: ChatItem[]): ChatItem[] {
  return items.length > MAX_ITEMS ? items.slice(items.length - MAX_ITEMS) : items;
}

const time = (i: ChatItem) => (i.timestamp ? Date.parse(i.timestamp) || 0 : 0);

/** Merge chat history into the model: de-duplicated by id, ordered by timestamp (stable). */
export function mergeHistory(model: ChatModel, history: ChatMessage[]): ChatModel {
  const byId = new Map<string, ChatItem>();
  for (const item of model.items) byId.set(item.id, item);
  for (const msg of history) {
    if (!msg || typeof msg.type !== 'string') continue;
    const item = toItem(msg);
    byId.set(item.id, { ...byId.get(item.id), ...item });
  }
  const items = [...byId.values()]
    .map((item, index) => ({ item, index }))
    .sort((a, b) => time(a.item) - time(b.item) || a.index - b.index)
    .map(({ item }) => item);
  return { ...model, items: trim(items) };
}

/** Apply one server event. Events the model does not care about return the model unchanged. */
export function applyEvent(model: ChatModel, ev: RawEvent): ChatModel {
  switch (ev.type) {
    case 'CONNECTED_USER_INFO': {
      const user = ev.user as User | undefined;
      return user ? { ...model, me: user } : model;
    }
    case 'ERROR_USER_DISABLED':
      return { ...model, disabled: true };
    case 'VISIBILITY-UPDATE': {
      const ids = new Set(Array.isArray(ev.ids) ? (ev.ids as string[]) : []);
      const visible = ev.visible === true;
      if (!ids.size) return model;
      return { ...model, items: model.items.map((i) => (ids.has(i.id) ? { ...i, hidden: !visible } : i)) };
    }
    case 'COLOR_CHANGE': {
      const user = ev.user as User | undefined;
      if (user && model.me && user.id === model.me.id) return { ...model, me: { ...model.me, ...user } };
      return model;
    }
    default:
      break;
  }
  if (!RENDERED.has(ev.type)) return model;
  const item = toItem(ev);
  let me = model.me;
  if (ev.type === 'NAME_CHANGE' && item.user && me && item.user.id === me.id) me = { ...me, ...item.user };
  if (model.items.some((i) => i.id === item.id)) return { ...model, me };
  return { ...model, me, items: trim([...model.items, item]) };
}
