import { useState } from 'preact/hooks';
import { api } from '../api';
import { navigateTo } from '../lib/safeUrl';

/** Fediverse follow: shows the server's account and offers a remote follow through `/api/remotefollow`. */
export function FollowForm({ account }: { account: string }) {
  const [mine, setMine] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await api.remoteFollow(mine.trim());
      // The follow page comes from the viewer's server (its WebFinger template): only an http(s) address is opened.
      if (res.redirectUrl && navigateTo(res.redirectUrl)) return;
      if (res.redirectUrl) setError('Your server offered a follow page that is not a web address.');
      else setError(res.message || 'Your server did not offer a follow page.');
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} class="user-settings">
      <p>
        Follow <strong>@{account.replace(/^@/, '')}</strong> from your fediverse account to hear when the stream goes live.
      </p>
      <label>
        Your account (user@server)
        <br />
        <input value={mine} required placeholder="you@example.social" onInput={(e) => setMine(e.currentTarget.value)} />
      </label>
      {error && <div class="chat-notice error">{error}</div>}
      <div>
        <button type="submit" class="primary" disabled={busy || !mine.includes('@')}>
          Follow
        </button>
      </div>
    </form>
  );
}
