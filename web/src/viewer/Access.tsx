/**
 * The door of a private channel (password or token visibility), in front of the viewer page and the embeds: asks
 * `GET /api/viewer/access` first, and while the channel is locked shows only the prompt — the channel's name, a
 * password field, a "Sign in" link, the server's message on failure — and renders nothing of the stream (its children
 * are not even mounted, so neither `/api/config`, `/api/status` nor the chat are fetched). Once unlocked (the server
 * sets the pass cookie) the page itself mounts. A later 401 from any call (pass revoked or expired) checks again and
 * goes back to the prompt.
 *
 * A `?invite=` / `?jwt=` still in the page's URL (the server normally redeems it and redirects) is redeemed here
 * (`POST /api/viewer/invite|token`) and taken out of the address bar.
 */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, viewer, type UnlockResult } from '../api';
import { failureText, mustPrompt, needsPass, onUnauthorized, promptLead, promptOptions, urlCredential, withoutCredential, type ViewerAccess } from '../lib/access';

interface AccessCtx {
  /** The access answer (null on a server without private channels). */
  access: ViewerAccess | null;
  /** Sign out of this channel (`POST /api/viewer/lock`), back to the prompt. */
  leave: () => Promise<void>;
}

const AccessContext = createContext<AccessCtx>({ access: null, leave: async () => undefined });
export const useAccess = () => useContext(AccessContext);

type State = { kind: 'checking' } | { kind: 'error'; message: string } | { kind: 'prompt'; access: ViewerAccess } | { kind: 'open'; access: ViewerAccess | null };

/** The "Leave" button of an unlocked private channel (nothing on a public one). */
export function LeaveButton() {
  const { access, leave } = useAccess();
  if (!access || !needsPass(access.visibility) || !access.unlocked) return null;
  return (
    <button type="button" id="access-leave" title="Forget this channel's pass on this browser" onClick={() => void leave()}>
      Leave
    </button>
  );
}

async function fetchAccess(): Promise<ViewerAccess | null> {
  try {
    return await viewer.access();
  } catch (e) {
    // A server from before private channels has no such route: every channel is public there.
    if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return null;
    throw e;
  }
}

export function AccessGate({ children }: { children: ComponentChildren }) {
  const [state, setState] = useState<State>({ kind: 'checking' });
  const [urlFailure, setUrlFailure] = useState<string | null>(null);
  const checking = useRef(false);

  /** Ask the server again; resolves with whether the page is open now (undefined: a check was already running). */
  const check = useCallback(async (): Promise<boolean | undefined> => {
    if (checking.current) return undefined;
    checking.current = true;
    try {
      const access = await fetchAccess();
      if (access && mustPrompt(access)) {
        setState({ kind: 'prompt', access });
        if (access.channelName) document.title = access.channelName;
        return false;
      }
      setState({ kind: 'open', access });
      return true;
    } catch (e) {
      setState((s) => (s.kind === 'open' ? s : { kind: 'error', message: (e as Error).message }));
      return false;
    } finally {
      checking.current = false;
    }
  }, []);

  useEffect(() => {
    let live = true;
    (async () => {
      const cred = typeof location === 'undefined' ? null : urlCredential(location.search);
      if (cred) {
        const res = cred.kind === 'invite' ? await viewer.invite(cred.value) : await viewer.token(cred.value);
        try {
          history.replaceState(history.state, '', withoutCredential(location.pathname + location.search + location.hash));
        } catch {
          /* a sandboxed frame: leave the address alone */
        }
        if (!res.ok && live) setUrlFailure(failureText(res.status, res.message));
      }
      if (live) await check();
    })();
    return () => {
      live = false;
    };
  }, [check]);

  // A 401 anywhere: is the pass still good? (Only while the page is open; the prompt makes no such calls.)
  useEffect(() => onUnauthorized(() => void check()), [check]);

  // Re-check once the pass should have run out, so a page left open goes back to the prompt.
  const expiresAt = state.kind === 'open' ? state.access?.expiresAt : undefined;
  useEffect(() => {
    if (!expiresAt) return;
    const ms = Date.parse(expiresAt) - Date.now();
    if (!Number.isFinite(ms)) return;
    const t = setTimeout(() => void check(), Math.min(Math.max(ms + 1000, 1000), 2 ** 31 - 1));
    return () => clearTimeout(t);
  }, [expiresAt, check]);

  const leave = useCallback(async () => {
    await viewer.lock().catch(() => undefined);
    await check();
  }, [check]);

  if (state.kind === 'checking') return null;
  if (state.kind === 'error') {
    return (
      <div class="chat-notice error" id="access-error">
        Cannot reach the server ({state.message}).{' '}
        <button type="button" onClick={() => void check()}>
          Retry
        </button>
      </div>
    );
  }
  if (state.kind === 'prompt') return <AccessPrompt access={state.access} initialError={urlFailure} onUnlocked={check} />;
  return <AccessContext.Provider value={{ access: state.access, leave }}>{children}</AccessContext.Provider>;
}

const NO_COOKIE = "Your browser did not keep the viewing pass (cookies blocked, or this page is embedded on another site). Open the channel's own page to watch.";

/** The prompt: the channel's name and the ways in it offers. */
export function AccessPrompt({
  access,
  initialError,
  onUnlocked,
}: {
  access: ViewerAccess;
  initialError?: string | null;
  /** Check again after a pass was given; resolves false when the page is still locked. */
  onUnlocked: () => Promise<boolean | undefined>;
}) {
  const { password: askPassword, signIn } = promptOptions(access);
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(initialError ?? null);
  const inputRef = useRef<HTMLInputElement>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    const pw = inputRef.current?.value ?? password;
    if (!pw) return;
    setBusy(true);
    setError(null);
    const res: UnlockResult = await viewer.unlock(pw);
    setBusy(false);
    if (res.ok) {
      // Still locked with a pass in hand: the browser kept no cookie (an embed on another site blocks it).
      if ((await onUnlocked()) === false) setError(NO_COOKIE);
      return;
    }
    setError(failureText(res.status, res.message));
    setPassword('');
    if (inputRef.current) inputRef.current.value = '';
  };

  return (
    <main class="access-page">
      <div class="card access-prompt" id="access-prompt" data-visibility={access.visibility}>
        <h1 id="access-channel-name">{access.channelName}</h1>
        <p class="muted" id="access-lead">
          {promptLead(access)}
        </p>
        <p>
          {access.online ? (
            <span class="badge live" id="access-live">
              Live now
            </span>
          ) : (
            <span class="badge" id="access-offline">
              Offline
            </span>
          )}
        </p>
        {askPassword && (
          <form class="access-form" id="access-form" onSubmit={(e) => void submit(e)}>
            <label for="access-password">Password</label>
            <div class="access-row">
              <input
                id="access-password"
                ref={inputRef}
                type="password"
                autocomplete="current-password"
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
                required
              />
              <button type="submit" class="primary" id="access-watch" disabled={busy}>
                Watch
              </button>
            </div>
          </form>
        )}
        {signIn && (
          <p>
            <a class="button" id="access-signin" href={signIn}>
              Sign in
            </a>
          </p>
        )}
        {error && (
          <div class="access-error" id="access-message" role="alert">
            {error}
          </div>
        )}
      </div>
    </main>
  );
}
