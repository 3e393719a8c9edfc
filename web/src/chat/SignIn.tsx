import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { navigateTo } from '../lib/safeUrl';
import { ensureToken } from './session';

/**
 * "Sign in" from the chat user menu: prove who you are with an external provider, so the streamer's
 * "require authentication" lets you chat and your messages carry the signed-in badge. Each provider is one
 * section: IndieAuth (your own website) and the Fediverse (a one-time code sent to your account by direct message).
 * `onSignedIn` gets the message to show once a sign-in completes without leaving the page (the Fediverse one).
 */
export function SignIn({
  indieAuthEnabled,
  fediverseEnabled = false,
  onSignedIn,
}: {
  indieAuthEnabled: boolean;
  fediverseEnabled?: boolean;
  onSignedIn?: (message: string) => void;
}) {
  return (
    <div class="sign-in">
      {indieAuthEnabled ? (
        <IndieAuthSignIn />
      ) : (
        <p class="muted" id="indieauth-unavailable">
          Sign-in with your website is not available: the streamer has not set this server's URL.
        </p>
      )}
      <FediverseSignIn enabled={fediverseEnabled} onSignedIn={onSignedIn} />
    </div>
  );
}

function IndieAuthSignIn() {
  const [url, setUrl] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    const authHost = url.trim();
    if (!authHost) {
      setError('Enter the address of your website, for example https://example.com');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const token = await ensureToken();
      const { redirect } = await api.indieAuthStart(token, authHost);
      // The authorization endpoint was discovered on the viewer's website: only an http(s) address is opened.
      if (!navigateTo(redirect)) {
        setError('Your website named a sign-in address that is not a web address.');
        setBusy(false);
      }
    } catch (err) {
      setError(`Could not start the sign-in: ${(err as Error).message}`);
      setBusy(false);
    }
  };

  return (
    <section class="sign-in-provider" data-provider="indieauth">
      <h3>Your website (IndieAuth)</h3>
      <p class="muted">Sign in with a website that supports IndieAuth; you will be sent there to approve.</p>
      <form onSubmit={submit}>
        <input
          id="indieauth-url"
          type="text"
          inputMode="url"
          placeholder="https://example.com"
          value={url}
          maxLength={2048}
          onInput={(e) => setUrl(e.currentTarget.value)}
        />{' '}
        <button type="submit" class="primary" id="indieauth-submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      {error && (
        <div class="chat-notice error" id="indieauth-error" role="alert">
          {error}
        </div>
      )}
    </section>
  );
}

/** `user@host` from what was typed: `@user@host`, `user@host`, or a profile URL `https://host/@user`; else an error. */
export function parseFediverseAccount(input: string): { account: string } | { error: string } {
  const s = input.trim();
  if (!s) return { error: 'Enter your Fediverse account, for example you@mastodon.social' };
  const profile = /^https?:\/\/([^/?#@\s]+)\/@([^/?#@\s]+)\/?$/i.exec(s);
  if (profile) return { account: `${profile[2]}@${profile[1]}` };
  const m = /^@?([^@\s/?#]+)@([^@\s/?#]+)$/.exec(s);
  if (!m) return { error: 'Enter your account as user@host, for example you@mastodon.social' };
  return { account: `${m[1]}@${m[2]}` };
}

/**
 * The code as castd expects it (ten letters and digits, sent as `ABCDE-12345`; spaces and dashes typed or pasted
 * with it are dropped, case does not matter), or an error.
 */
export function parseSignInCode(input: string): { code: string } | { error: string } {
  const code = input.replace(/[\s-]/g, '').toUpperCase();
  if (!code) return { error: 'Enter the code from the direct message.' };
  if (!/^[0-9A-Z]{10}$/.test(code)) return { error: 'The code is the ten characters from the direct message.' };
  return { code };
}

/** A readable message for a failed Fediverse sign-in step, from the server's `{success:false, message}` answer. */
export function fediverseErrorMessage(step: 'send' | 'verify', err: unknown): string {
  const lead = step === 'send' ? 'Could not send the code' : 'Could not sign in';
  if (err instanceof ApiError) {
    if (err.status === 405) return `${lead}: Fediverse sign-in is not enabled on this server.`;
    if (err.status === 401) return `${lead}: your chat session has expired. Reload the page and try again.`;
    if (step === 'verify' && err.status === 403) {
      const why = err.message && err.message !== 'Forbidden' ? err.message : 'the code is not valid';
      return `${lead}: ${why}. Check the code, or send a new one.`;
    }
    if (err.status === 429) return `${lead}: too many attempts. Wait a moment and try again.`;
    if (err.status >= 500) return `${lead}: the server had a problem (${err.message}). Please try again later.`;
    return `${lead}: ${err.message}`;
  }
  return `${lead}: ${err instanceof Error ? err.message : String(err)}`;
}

function FediverseSignIn({ enabled, onSignedIn }: { enabled: boolean; onSignedIn?: (message: string) => void }) {
  const [account, setAccount] = useState('');
  const [code, setCode] = useState('');
  /** The account a code was sent to (the second step), with the server's confirmation. */
  const [sent, setSent] = useState<{ account: string; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const send = async (e: Event) => {
    e.preventDefault();
    const parsed = parseFediverseAccount(account);
    if ('error' in parsed) {
      setError(parsed.error);
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const token = await ensureToken();
      const res = await api.fediverseSignInStart(token, parsed.account);
      setSent({ account: parsed.account, message: res?.message || `a code was sent to ${parsed.account}` });
      setCode('');
    } catch (err) {
      setError(fediverseErrorMessage('send', err));
    } finally {
      setBusy(false);
    }
  };

  const verify = async (e: Event) => {
    e.preventDefault();
    const parsed = parseSignInCode(code);
    if ('error' in parsed) {
      setError(parsed.error);
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const token = await ensureToken();
      const res = await api.fediverseSignInVerify(token, parsed.code);
      const who = sent?.account ?? '';
      const message = res?.message ? `You are ${res.message}.` : `You are signed in${who ? ` as ${who}` : ''}.`;
      setBusy(false);
      onSignedIn?.(message);
    } catch (err) {
      setError(fediverseErrorMessage('verify', err));
      setBusy(false);
    }
  };

  const startOver = () => {
    setSent(null);
    setCode('');
    setError(null);
  };

  return (
    <section class="sign-in-provider" data-provider="fediverse" aria-disabled={!enabled}>
      <h3>Fediverse account</h3>
      {!enabled ? (
        <p class="muted" id="fediverse-unavailable">
          Sign-in with a Fediverse account is not available: the streamer has not enabled federation.
        </p>
      ) : sent ? (
        <p class="muted" id="fediverse-sent" role="status">
          {capitalize(sent.message)}. Enter the code from the direct message:
        </p>
      ) : (
        <p class="muted">Sign in with your Mastodon (or other Fediverse) account; you will get a code by direct message.</p>
      )}
      {!sent ? (
        <form onSubmit={send} id="fediverse-account-form">
          <input
            id="fediverse-account"
            type="text"
            autocomplete="username"
            placeholder="you@mastodon.social"
            aria-label="Fediverse account"
            value={account}
            maxLength={320}
            disabled={!enabled}
            onInput={(e) => setAccount(e.currentTarget.value)}
          />{' '}
          <button type="submit" class="primary" id="fediverse-send" disabled={!enabled || busy}>
            {busy ? 'Sending…' : 'Send code'}
          </button>
        </form>
      ) : (
        <>
          <form onSubmit={verify} id="fediverse-code-form">
            <input
              id="fediverse-code"
              type="text"
              inputMode="text"
              autocomplete="one-time-code"
              autocapitalize="characters"
              spellcheck={false}
              placeholder="ABCDE-12345"
              aria-label="One-time code"
              value={code}
              maxLength={16}
              onInput={(e) => setCode(e.currentTarget.value)}
            />{' '}
            <button type="submit" class="primary" id="fediverse-verify" disabled={busy}>
              {busy ? 'Verifying…' : 'Verify'}
            </button>
          </form>
          <button type="button" class="sign-in-again" id="fediverse-start-over" onClick={startOver} disabled={busy}>
            Use another account or send a new code
          </button>
        </>
      )}
      {error && (
        <div class="chat-notice error" id="fediverse-error" role="alert">
          {error}
        </div>
      )}
    </section>
  );
}

const capitalize = (s: string) => (s ? s[0].toUpperCase() + s.slice(1) : s);

/** Readable messages for the `indieauthError` code the sign-in callback redirects back with. */
const SIGN_IN_ERRORS: Record<string, string> = {
  invalid_state: 'The sign-in expired or was already used. Please start it again.',
  access_denied: 'The sign-in was not approved on your website.',
  authorization_failed: 'Your website refused the sign-in.',
  invalid_grant: 'Your website did not confirm the sign-in (the code was refused or expired). Please try again.',
  invalid_me: 'Your website vouched for a different address than the one you entered.',
  invalid_issuer: 'The answer came from a different server than your website names.',
  invalid_user: 'Your chat user is no longer allowed to chat.',
  forbidden_address: 'Your website is on a private address that this server will not contact.',
  server_error: 'Your website could not be reached to confirm the sign-in.',
};

/** The outcome in this page's URL after a sign-in redirect (`?indieauth=signedin` / `?indieauthError=`). */
export function signInOutcome(search: string): { ok: boolean; message: string } | null {
  const q = new URLSearchParams(search);
  if (q.get('indieauth') === 'signedin') return { ok: true, message: 'You are signed in.' };
  const code = q.get('indieauthError');
  if (code === null) return null;
  return { ok: false, message: `Sign-in failed: ${SIGN_IN_ERRORS[code] ?? 'the sign-in could not be completed.'}` };
}

/** Remove the sign-in outcome from the address bar (so a reload does not show it again). */
export function clearSignInOutcome() {
  try {
    const u = new URL(window.location.href);
    u.searchParams.delete('indieauth');
    u.searchParams.delete('indieauthError');
    window.history.replaceState(null, '', u.pathname + u.search + u.hash);
  } catch {
    /* not in a browser */
  }
}
