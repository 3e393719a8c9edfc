/**
 * The chat identity of this browser: the access token from `POST /api/chat/register`, kept in localStorage
 * (in memory when storage is blocked, e.g. a third-party embed), and the display name to ask for next time.
 */
import { api } from '../api';
import { basePath } from '../lib/base';

/** The token is the channel's (each channel has its own chat users); the name to ask for is the browser's. */
const tokenKey = () => `castd.chat.accessToken${basePath()}`;
const NAME_KEY = 'castd.chat.displayName';
const memory = new Map<string, string>();

function read(key: string): string | null {
  try {
    return window.localStorage.getItem(key);
  } catch {
    return memory.get(key) ?? null;
  }
}

function write(key: string, value: string | null) {
  try {
    if (value === null) window.localStorage.removeItem(key);
    else window.localStorage.setItem(key, value);
  } catch {
    if (value === null) memory.delete(key);
    else memory.set(key, value);
  }
}

let pending: Promise<string> | null = null;

export const storedToken = () => read(tokenKey());
export const clearToken = () => write(tokenKey(), null);
export const rememberName = (name: string) => write(NAME_KEY, name);

/** The stored access token, or a new registration when there is none (or `force`). Concurrent callers share one request. */
export function ensureToken(force = false): Promise<string> {
  if (!force) {
    const token = storedToken();
    if (token) return Promise.resolve(token);
  }
  if (!pending) {
    pending = api
      .register(read(NAME_KEY) ?? undefined)
      .then((res) => {
        write(tokenKey(), res.accessToken);
        if (res.displayName) write(NAME_KEY, res.displayName);
        return res.accessToken;
      })
      .finally(() => {
        pending = null;
      });
  }
  return pending;
}
