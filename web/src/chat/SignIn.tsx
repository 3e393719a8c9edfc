import { useState } from 'preact/hooks';
import { api } from '../api';
import { ensureToken } from './session';

/**
 * "Sign in" from the chat user menu: prove who you are with an external provider, so the streamer's
 * "require authentication" lets you chat and your messages carry the signed-in badge. Each provider is one
 * section; IndieAuth (your own website) is here, Fediverse sign-in goes in the marked slot below.
 */
export function SignIn({ indieAuthEnabled }: { indieAuthEnabled: boolean }) {
  return (
    <div class="sign-in">
      {indieAuthEnabled ? (
        <IndieAuthSignIn />
      ) : (
        <p class="muted" id="indieauth-unavailable">
          Sign-in with your website is not available: the streamer has not set this server's URL.
        </p>
      )}
      {/* Fediverse sign-in slot: a <section class="sign-in-provider" data-provider="fediverse"> goes here. */}
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
      window.location.assign(redirect);
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
