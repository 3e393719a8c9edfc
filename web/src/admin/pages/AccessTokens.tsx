import { useState } from 'preact/hooks';
import { admin, type AccessToken } from '../../api';
import { formatDateTime } from '../../lib/format';
import { FormStatus, Section, useSave } from '../forms';
import { useAdminGet } from '../useAdmin';

export const SCOPES = [
  { id: 'CAN_SEND_SYSTEM_MESSAGES', label: 'Send system messages and chat actions' },
  { id: 'CAN_SEND_MESSAGES', label: 'Send chat messages as a bot user' },
  { id: 'HAS_ADMIN_ACCESS', label: 'Admin: message visibility, chat history, clients, stream title' },
];

/**
 * Integration access tokens: list, create `{name, scopes}`, delete `{token}`. castd keeps only a token's hash: the
 * whole token is shown once, after creating it; the list shows each token's first characters.
 */
export function AccessTokens() {
  const { data, error, reload } = useAdminGet<AccessToken[]>('accesstokens');
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [created, setCreated] = useState<AccessToken | null>(null);
  const [state, run] = useSave();

  const create = async (e: Event) => {
    e.preventDefault();
    let token: AccessToken | null = null;
    const ok = await run(async () => {
      if (!scopes.length) throw new Error('Choose at least one scope.');
      token = await admin.post<AccessToken>('accesstokens/create', { name: name.trim(), scopes });
    }, 'Token created.');
    if (ok) {
      setCreated(token);
      setName('');
      setScopes([]);
      void reload();
    }
  };
  const remove = async (t: AccessToken) => {
    if (!window.confirm('Delete this access token? Integrations using it stop working.')) return;
    // By its id (the list holds only the token's display form).
    if (await run(() => admin.post('accesstokens/delete', { token: t.id ?? t.accessToken }), 'Token deleted.')) void reload();
  };
  const toggleScope = (id: string, on: boolean) => setScopes(on ? [...scopes, id] : scopes.filter((s) => s !== id));

  return (
    <>
      <Section title="Access tokens" description={<>Integrations send <code>Authorization: Bearer &lt;token&gt;</code> to <code>/api/integrations/…</code>.</>}>
        {error && <div class="form-error">{error}</div>}
        <div class="table-scroll">
          <table class="table" id="access-tokens-table">
            <thead><tr><th>Name</th><th>Token</th><th>Scopes</th><th>Created</th><th>Last used</th><th /></tr></thead>
            <tbody>
              {(data ?? []).map((t) => (
                <tr key={t.id ?? t.accessToken}>
                  <td>{t.displayName}</td>
                  <td class="mono" title="Only the first characters: the token itself was shown once, when it was created">
                    {t.accessToken}
                  </td>
                  <td>{(t.scopes ?? []).join(', ')}</td>
                  <td class="nowrap">{formatDateTime(t.createdAt)}</td>
                  <td class="nowrap">{formatDateTime(t.lastUsedAt)}</td>
                  <td><button type="button" class="danger" onClick={() => void remove(t)}>Delete</button></td>
                </tr>
              ))}
              {data && data.length === 0 && <tr><td colSpan={6} class="muted">No access tokens.</td></tr>}
            </tbody>
          </table>
        </div>
      </Section>
      <Section title="Create a token">
        <form onSubmit={create} id="access-token-form" class="stack">
          <label>
            Name
            <br />
            <input value={name} required id="access-token-name" onInput={(e) => setName(e.currentTarget.value)} />
          </label>
          <fieldset>
            <legend>Scopes</legend>
            {SCOPES.map((s) => (
              <label key={s.id} class="toggle">
                <input type="checkbox" value={s.id} checked={scopes.includes(s.id)} onChange={(e) => toggleScope(s.id, e.currentTarget.checked)} />
                <span><code>{s.id}</code> — {s.label}</span>
              </label>
            ))}
          </fieldset>
          <div><button type="submit" class="primary" id="access-token-create" disabled={state.kind === 'saving'}>Create token</button></div>
          <FormStatus state={state} />
        </form>
        {created && (
          <div class="card notice" id="access-token-created">
            New token for <strong>{created.displayName}</strong>: <code class="mono">{created.accessToken}</code>
            <p class="muted">Copy it now: castd keeps only its hash, so it is never shown again.</p>
          </div>
        )}
      </Section>
    </>
  );
}
