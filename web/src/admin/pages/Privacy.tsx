/**
 * Who may watch this channel (private channels): the visibility, the passwords and invite links that give a viewing
 * pass, how long a pass lasts, the JWT issuer of a token channel, the admission hook, what federation posts while the
 * channel is private, and "End every pass" (a new signing key). Current values from `serverconfig.access`.
 */
import { useEffect, useState } from 'preact/hooks';
import { admin, pageOrigin, type AccessConfig, type AdmissionHookConfig, type ViewerInvite, type ViewerJwtConfig, type ViewerPassword, type Schemas } from '../../api';
import { formatDateTime } from '../../lib/format';
import { absoluteLink, formatSeconds, INVITE_EXPIRIES, MASKED, PASS_SECONDS, usesText, VISIBILITY_CHOICES, type Visibility } from '../../lib/access';
import { FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';
import { useAdminGet } from '../useAdmin';

const DEFAULT_JWT: ViewerJwtConfig = { secret: '', jwksUrl: '', issuer: '', audience: '', nameClaim: '', loginUrl: '' };
const DEFAULT_HOOK: AdmissionHookConfig = { url: '', secret: '', onPlay: true, onPublish: false, cacheSeconds: 30 };

function VisibilityForm({ value }: { value: Visibility }) {
  const { reload } = useServerConfig();
  const [choice, setChoice] = useState<Visibility>(value);
  const [state, run] = useSave();
  useEffect(() => setChoice(value), [value]);
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('visibility', choice))) void reload();
  };
  return (
    <form id="visibility-form" onSubmit={(e) => void save(e)}>
      <fieldset>
        <legend>Visibility</legend>
        {VISIBILITY_CHOICES.map((c) => (
          <label key={c.value} class="toggle radio-choice">
            <input type="radio" name="visibility" value={c.value} id={`visibility-${c.value}`} checked={choice === c.value} onChange={() => setChoice(c.value)} />
            <span>
              <strong>{c.label}</strong> — <span class="muted">{c.help}</span>
            </span>
          </label>
        ))}
      </fieldset>
      <div class="form-actions">
        <button type="submit" class="primary" id="visibility-save" disabled={state.kind === 'saving' || choice === value}>
          Save
        </button>
      </div>
      <FormStatus state={state} />
    </form>
  );
}

function Passwords() {
  const { data, error, reload } = useAdminGet<ViewerPassword[]>('viewer/passwords');
  const [password, setPassword] = useState('');
  const [comment, setComment] = useState('');
  const [state, run] = useSave();
  const create = async (e: Event) => {
    e.preventDefault();
    const ok = await run(() => admin.post('viewer/passwords/create', { password, comment: comment.trim() }), 'Password added.');
    if (ok) {
      setPassword('');
      setComment('');
      void reload();
    }
  };
  const remove = async (p: ViewerPassword) => {
    if (!window.confirm(`Delete the password "${p.comment || p.id}"? The passes it gave end within a minute.`)) return;
    if (await run(() => admin.post('viewer/passwords/delete', { id: p.id }), 'Password deleted.')) void reload();
  };
  return (
    <Section title="Passwords" description="One password per audience; deleting one ends the passes it gave. castd keeps only a hash of each.">
      {error && <div class="form-error">{error}</div>}
      <div class="table-scroll">
        <table class="table" id="viewer-passwords-table">
          <thead><tr><th>Comment</th><th>Created</th><th /></tr></thead>
          <tbody>
            {(data ?? []).map((p) => (
              <tr key={p.id} data-id={String(p.id)}>
                <td>{p.comment || <span class="muted">(no comment)</span>}</td>
                <td class="nowrap">{formatDateTime(p.createdAt)}</td>
                <td><button type="button" class="danger" onClick={() => void remove(p)}>Delete</button></td>
              </tr>
            ))}
            {data && data.length === 0 && <tr><td colSpan={3} class="muted">No passwords.</td></tr>}
          </tbody>
        </table>
      </div>
      <form id="viewer-password-form" class="stack" onSubmit={(e) => void create(e)}>
        <div class="grid-2">
          <label>
            Password
            <br />
            <input type="password" autocomplete="new-password" required value={password} id="viewer-password" onInput={(e) => setPassword(e.currentTarget.value)} />
          </label>
          <label>
            Comment (who it is for)
            <br />
            <input value={comment} id="viewer-password-comment" placeholder="Subscribers" onInput={(e) => setComment(e.currentTarget.value)} />
          </label>
        </div>
        <div><button type="submit" class="primary" id="viewer-password-create" disabled={state.kind === 'saving'}>Add password</button></div>
        <FormStatus state={state} />
      </form>
    </Section>
  );
}

function Invites() {
  const { data, error, reload } = useAdminGet<ViewerInvite[]>('viewer/invites');
  const [comment, setComment] = useState('');
  const [expires, setExpires] = useState(INVITE_EXPIRIES[2].seconds);
  const [maxUses, setMaxUses] = useState('0');
  const [created, setCreated] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const [state, run] = useSave();
  const create = async (e: Event) => {
    e.preventDefault();
    let link = '';
    const ok = await run(async () => {
      const n = Number(maxUses || '0');
      if (!Number.isInteger(n) || n < 0) throw new Error('Max uses must be a whole number (0: no limit).');
      const res = await admin.post<Schemas['CreatedInvite']>('viewer/invites/create', {
        comment: comment.trim(),
        expiresInSeconds: expires,
        maxUses: n,
      });
      link = absoluteLink(res.url || `?invite=${encodeURIComponent(res.invite)}`, pageOrigin());
    }, 'Invite link created.');
    if (ok) {
      setCreated(link);
      setCopied(false);
      setComment('');
      void reload();
    }
  };
  const remove = async (i: ViewerInvite) => {
    if (!window.confirm(`Revoke the invite link "${i.comment || i.id}"? The passes it gave end within a minute.`)) return;
    if (await run(() => admin.post('viewer/invites/delete', { id: i.id }), 'Invite link revoked.')) void reload();
  };
  const copy = async () => {
    if (!created) return;
    try {
      await navigator.clipboard.writeText(created);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <Section title="Invite links" description="A link that opens the channel without a password, until it expires or is used up. Revoking one ends the passes it gave.">
      {error && <div class="form-error">{error}</div>}
      <div class="table-scroll">
        <table class="table" id="viewer-invites-table">
          <thead><tr><th>Comment</th><th>Created</th><th>Expires</th><th>Uses</th><th /></tr></thead>
          <tbody>
            {(data ?? []).map((i) => (
              <tr key={i.id} data-id={String(i.id)}>
                <td>{i.comment || <span class="muted">(no comment)</span>}</td>
                <td class="nowrap">{formatDateTime(i.createdAt)}</td>
                <td class="nowrap">{i.expiresAt ? formatDateTime(i.expiresAt) : 'never'}</td>
                <td class="nowrap">{usesText(i.uses ?? 0, i.maxUses ?? 0)}</td>
                <td><button type="button" class="danger" onClick={() => void remove(i)}>Revoke</button></td>
              </tr>
            ))}
            {data && data.length === 0 && <tr><td colSpan={5} class="muted">No invite links.</td></tr>}
          </tbody>
        </table>
      </div>
      <form id="viewer-invite-form" class="stack" onSubmit={(e) => void create(e)}>
        <div class="grid-2">
          <label class="span-2">
            Comment (who it is for)
            <br />
            <input value={comment} id="viewer-invite-comment" placeholder="Press" onInput={(e) => setComment(e.currentTarget.value)} />
          </label>
          <label>
            Expires after
            <br />
            <select id="viewer-invite-expires" value={String(expires)} onChange={(e) => setExpires(Number(e.currentTarget.value))}>
              {INVITE_EXPIRIES.map((x) => (
                <option key={x.seconds} value={String(x.seconds)}>{x.label}</option>
              ))}
            </select>
          </label>
          <label>
            Max uses (0: no limit)
            <br />
            <input type="number" min={0} step={1} value={maxUses} id="viewer-invite-max-uses" onInput={(e) => setMaxUses(e.currentTarget.value)} />
          </label>
        </div>
        <div><button type="submit" class="primary" id="viewer-invite-create" disabled={state.kind === 'saving'}>Create invite link</button></div>
        <FormStatus state={state} />
      </form>
      {created && (
        <div class="card notice" id="viewer-invite-created">
          <div class="field-row">
            <input readOnly value={created} id="viewer-invite-link" class="mono" onFocus={(e) => e.currentTarget.select()} />
            <button type="button" id="viewer-invite-copy" onClick={() => void copy()}>{copied ? 'Copied' : 'Copy'}</button>
          </div>
          <p class="muted">Copy it now: the link is shown only once.</p>
        </div>
      )}
    </Section>
  );
}

function PassLifetime({ value }: { value: number }) {
  const { reload } = useServerConfig();
  const [text, setText] = useState(String(value));
  const [state, run] = useSave();
  useEffect(() => setText(String(value)), [value]);
  const n = Number(text);
  const save = async (e: Event) => {
    e.preventDefault();
    const ok = await run(async () => {
      if (!Number.isInteger(n) || n < PASS_SECONDS.min || n > PASS_SECONDS.max) {
        throw new Error(`The pass lifetime is ${PASS_SECONDS.min} to ${PASS_SECONDS.max} seconds.`);
      }
      await admin.setConfig('viewer/passlifetime', n);
    });
    if (ok) void reload();
  };
  return (
    <form class="config-field" id="pass-lifetime-form" onSubmit={(e) => void save(e)}>
      <label for="pass-lifetime">Pass lifetime (seconds)</label>
      <div class="field-row">
        <input type="number" id="pass-lifetime" min={PASS_SECONDS.min} max={PASS_SECONDS.max} value={text} onInput={(e) => setText(e.currentTarget.value)} />
        <div class="field-actions"><button type="submit" class="primary" id="pass-lifetime-save" disabled={state.kind === 'saving'}>Save</button></div>
      </div>
      <div class="help">
        {Number.isFinite(n) && n > 0 ? `${formatSeconds(n)}. ` : ''}How long a viewer stays in after entering a password or opening a link; a token's pass ends with
        the token, if sooner.
      </div>
      <FormStatus state={state} />
    </form>
  );
}

/** A text input bound to one key of a settings object. */
function Text<T extends object>({ obj, set, k, label, id, type = 'text', placeholder }: { obj: T; set: (o: T) => void; k: keyof T & string; label: string; id: string; type?: string; placeholder?: string }) {
  return (
    <label>
      {label}
      <br />
      <input
        type={type as 'text'}
        id={id}
        value={String(obj[k] ?? '')}
        placeholder={placeholder}
        autocomplete={type === 'password' ? 'new-password' : 'off'}
        onInput={(e) => set({ ...obj, [k]: e.currentTarget.value })}
      />
    </label>
  );
}

function JwtForm({ value }: { value: ViewerJwtConfig }) {
  const { reload } = useServerConfig();
  const [jwt, setJwt] = useState<ViewerJwtConfig>(value);
  const [state, run] = useSave();
  useEffect(() => setJwt(value), [JSON.stringify(value)]);
  const save = async (e: Event) => {
    e.preventDefault();
    const trimmed = Object.fromEntries(Object.entries(jwt).map(([k, v]) => [k, k === 'secret' ? v : String(v ?? '').trim()])) as unknown as ViewerJwtConfig;
    if (await run(() => admin.setConfig('viewer/jwt', trimmed))) void reload();
  };
  return (
    <Section
      title="Token issuer (JWT)"
      description={
        <>
          For a token channel: your site signs a JWT (HS256 with the shared secret, or RS256/ES256 with a key of its JWKS) and sends the viewer to{' '}
          <code>this page/?jwt=&lt;token&gt;</code>. Empty issuer or audience: not checked.
        </>
      }
    >
      <form id="viewer-jwt-form" class="stack" onSubmit={(e) => void save(e)}>
        <div class="grid-2">
          <Text obj={jwt} set={setJwt} k="secret" id="jwt-secret" type="password" label={`Shared secret (HS256)${value.secret === MASKED ? ': set' : ''}`} />
          <Text obj={jwt} set={setJwt} k="jwksUrl" id="jwt-jwks-url" type="url" label="JWKS URL (RS256 / ES256)" placeholder="https://example.com/.well-known/jwks.json" />
          <Text obj={jwt} set={setJwt} k="issuer" id="jwt-issuer" label="Issuer (iss)" />
          <Text obj={jwt} set={setJwt} k="audience" id="jwt-audience" label="Audience (aud)" />
          <Text obj={jwt} set={setJwt} k="nameClaim" id="jwt-name-claim" label="Chat name claim (empty: name)" placeholder="name" />
          <Text obj={jwt} set={setJwt} k="loginUrl" id="jwt-login-url" type="url" label="Login URL (the prompt's Sign in link)" placeholder="https://example.com/login" />
        </div>
        <div><button type="submit" class="primary" id="viewer-jwt-save" disabled={state.kind === 'saving'}>Save</button></div>
        <FormStatus state={state} />
      </form>
    </Section>
  );
}

function HookForm({ value }: { value: AdmissionHookConfig }) {
  const { reload } = useServerConfig();
  const [hook, setHook] = useState<AdmissionHookConfig>(value);
  const [cache, setCache] = useState(String(value.cacheSeconds));
  const [state, run] = useSave();
  useEffect(() => {
    setHook(value);
    setCache(String(value.cacheSeconds));
  }, [JSON.stringify(value)]);
  const save = async (e: Event) => {
    e.preventDefault();
    const ok = await run(async () => {
      const n = Number(cache);
      if (!Number.isInteger(n) || n < 0 || n > 3600) throw new Error('Cache seconds must be 0 to 3600.');
      await admin.setConfig('viewer/admissionhook', { ...hook, url: (hook.url ?? '').trim(), cacheSeconds: n });
    });
    if (ok) void reload();
  };
  return (
    <Section
      title="Admission hook"
      description="castd POSTs the channel, the viewer's pass subject (or the stream key), address and user agent to this URL before a viewer plays or a publisher goes live: a 2xx answer lets them in, anything else keeps them out and its message is shown. A hook that cannot be reached keeps viewers of a private channel out, and lets a publisher with a valid key in."
    >
      <form id="admission-hook-form" class="stack" onSubmit={(e) => void save(e)}>
        <div class="grid-2">
          <Text obj={hook} set={setHook} k="url" id="hook-url" type="url" label="URL (empty: no hook)" placeholder="https://tickets.example.com/castd" />
          <Text obj={hook} set={setHook} k="secret" id="hook-secret" type="password" label={`Secret (signs each request)${value.secret === MASKED ? ': set' : ''}`} />
          <label class="toggle">
            <input type="checkbox" id="hook-on-play" checked={hook.onPlay} onChange={(e) => setHook({ ...hook, onPlay: e.currentTarget.checked })} />
            <span>Ask before a viewer plays</span>
          </label>
          <label class="toggle">
            <input type="checkbox" id="hook-on-publish" checked={hook.onPublish} onChange={(e) => setHook({ ...hook, onPublish: e.currentTarget.checked })} />
            <span>Ask before a publisher goes live</span>
          </label>
          <label>
            Keep an answer for (seconds)
            <br />
            <input type="number" min={0} max={3600} id="hook-cache-seconds" value={cache} onInput={(e) => setCache(e.currentTarget.value)} />
          </label>
        </div>
        <div><button type="submit" class="primary" id="admission-hook-save" disabled={state.kind === 'saving'}>Save</button></div>
        <FormStatus state={state} />
      </form>
    </Section>
  );
}

function FederationPosts({ value }: { value: 'followers' | 'none' }) {
  const { reload } = useServerConfig();
  const [state, run] = useSave();
  const change = async (v: 'followers' | 'none') => {
    if (await run(() => admin.setConfig('viewer/federationposts', v))) void reload();
  };
  return (
    <div class="config-field" id="federation-posts">
      <label>Go-live posts while the channel is not public</label>
      <div>
        <label class="toggle">
          <input type="radio" name="federation-posts" id="federation-posts-followers" checked={value === 'followers'} onChange={() => void change('followers')} />
          <span>To followers only (not public)</span>
        </label>
        <label class="toggle">
          <input type="radio" name="federation-posts" id="federation-posts-none" checked={value === 'none'} onChange={() => void change('none')} />
          <span>None</span>
        </label>
      </div>
      <FormStatus state={state} />
    </div>
  );
}

function EndEveryPass() {
  const [state, run] = useSave();
  const rotate = async () => {
    if (!window.confirm('End every viewing pass of this channel? Every viewer, including those who came with a link or a token, must get in again.')) return;
    await run(() => admin.post('viewer/rotatekey', {}), 'Every pass has ended.');
  };
  return (
    <Section title="End every pass" description="A new signing key: every pass given so far stops working within a minute (open players and chats included).">
      <button type="button" class="danger" id="viewer-rotate-key" disabled={state.kind === 'saving'} onClick={() => void rotate()}>
        End every pass
      </button>
      <FormStatus state={state} />
    </Section>
  );
}

export function Privacy() {
  const { config, error } = useServerConfig();
  if (!config) return <LoadError error={error} />;
  const access: AccessConfig | undefined = config.access;
  if (!access) return <p class="muted">This server has no private channels.</p>;
  return (
    <>
      <Section title="Who may watch">
        <VisibilityForm value={access.visibility} />
        <PassLifetime value={access.viewerPassSeconds} />
        <FederationPosts value={access.privateFederationPosts} />
      </Section>
      <Passwords />
      <Invites />
      <JwtForm value={{ ...DEFAULT_JWT, ...access.viewerJwt }} />
      <HookForm value={{ ...DEFAULT_HOOK, ...access.admissionHook }} />
      <EndEveryPass />
    </>
  );
}
