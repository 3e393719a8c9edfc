import { useState } from 'preact/hooks';
import { admin, type ChatMessage, type IpBan, type Schemas, type User } from '../../api';
import { isModerator } from '../../lib/chatState';
import { formatDateTime } from '../../lib/format';
import { FormStatus, Section, useSave } from '../forms';
import { useAdminGet } from '../useAdmin';

const colorOf = (u?: User) => `var(--chat-user-color-${(((u?.displayColor ?? 0) % 8) + 8) % 8})`;

function UserName({ user }: { user?: User }) {
  if (!user) return <span class="muted">–</span>;
  return (
    <span style={{ color: colorOf(user) }} title={user.id}>
      {user.displayName}
      {isModerator(user) && <span class="chat-badge">MOD</span>}
      {user.isBot && <span class="chat-badge">BOT</span>}
    </span>
  );
}

/** All chat messages (hidden ones included) with hide/show. */
export function Messages() {
  const { data, error, reload } = useAdminGet<ChatMessage[]>('chat/messages');
  const [state, run] = useSave();
  const setVisible = async (id: string, visible: boolean) => {
    if (await run(() => admin.post('chat/messagevisibility', { idArray: [id], visible }), visible ? 'Message shown.' : 'Message hidden.')) void reload();
  };
  const messages = [...(data ?? [])].reverse();
  return (
    <Section title="Messages">
      {error && <div class="form-error">{error}</div>}
      <FormStatus state={state} />
      <div class="form-actions"><button type="button" onClick={() => void reload()}>Refresh</button></div>
      <div class="table-scroll">
        <table class="table" id="admin-chat-messages">
          <thead><tr><th>Time</th><th>User</th><th>Message</th><th /></tr></thead>
          <tbody>
            {messages.map((m) => {
              const hidden = Boolean(m.hiddenAt) || m.visible === false;
              return (
                <tr key={m.id} data-id={m.id} class={hidden ? 'hidden-row' : ''}>
                  <td class="nowrap">{formatDateTime(m.timestamp)}</td>
                  <td><UserName user={m.user} /></td>
                  <td class="html-content" dangerouslySetInnerHTML={{ __html: m.body ?? '' }} />
                  <td>
                    <button type="button" onClick={() => void setVisible(m.id, hidden)}>{hidden ? 'Show' : 'Hide'}</button>
                  </td>
                </tr>
              );
            })}
            {data && messages.length === 0 && <tr><td colSpan={4} class="muted">No messages.</td></tr>}
          </tbody>
        </table>
      </div>
    </Section>
  );
}

function UserActions({ user, onDone }: { user: User; onDone: () => void }) {
  const [state, run] = useSave();
  const mod = isModerator(user);
  const disabled = Boolean(user.disabledAt);
  return (
    <>
      <button type="button" onClick={async () => (await run(() => admin.post('chat/users/setmoderator', { userId: user.id, isModerator: !mod }))) && onDone()}>
        {mod ? 'Remove moderator' : 'Make moderator'}
      </button>{' '}
      <button
        type="button"
        class={disabled ? '' : 'danger'}
        onClick={async () => (await run(() => admin.post('chat/users/setenabled', { userId: user.id, enabled: disabled }))) && onDone()}
      >
        {disabled ? 'Enable' : 'Disable'}
      </button>
      <FormStatus state={state} />
    </>
  );
}

const PAGE = 25;

/** Paged user list with search, status filter and sort. */
export function Users() {
  const [search, setSearch] = useState('');
  const [query, setQuery] = useState('');
  const [status, setStatus] = useState('all');
  const [sort, setSort] = useState('desc');
  const [offset, setOffset] = useState(0);
  const { data, error, reload } = useAdminGet<Schemas['UserPage']>('users', { offset, limit: PAGE, search: query, status, sort });
  const total = data?.total ?? 0;
  return (
    <Section title="Users">
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setQuery(search.trim());
        }}
      >
        <input type="search" placeholder="Search names" value={search} id="users-search" onInput={(e) => setSearch(e.currentTarget.value)} />
        <select value={status} aria-label="Status" onChange={(e) => { setOffset(0); setStatus(e.currentTarget.value); }}>
          <option value="all">All</option>
          <option value="active">Active</option>
          <option value="bots">Bots</option>
        </select>
        <select value={sort} aria-label="Sort" onChange={(e) => setSort(e.currentTarget.value)}>
          <option value="desc">Newest first</option>
          <option value="asc">Oldest first</option>
        </select>
        <button type="submit">Search</button>
      </form>
      {error && <div class="form-error">{error}</div>}
      <div class="table-scroll">
        <table class="table" id="admin-users">
          <thead><tr><th>Name</th><th>Created</th><th>Previous names</th><th>Status</th><th /></tr></thead>
          <tbody>
            {(data?.results ?? []).map((u) => (
              <tr key={u.id} data-id={u.id}>
                <td><UserName user={u} /></td>
                <td class="nowrap">{formatDateTime(u.createdAt)}</td>
                <td>{(u.previousNames ?? []).filter((n) => n !== u.displayName).join(', ')}</td>
                <td>
                  {u.disabledAt ? <span class="bad">disabled</span> : 'enabled'}
                  {u.authenticated && <span class="muted signed-in"> · signed in{u.authProvider ? ` (${u.authProvider})` : ''}</span>}
                </td>
                <td class="nowrap"><UserActions user={u} onDone={() => void reload()} /></td>
              </tr>
            ))}
            {data && data.results.length === 0 && <tr><td colSpan={5} class="muted">No users.</td></tr>}
          </tbody>
        </table>
      </div>
      <div class="pager">
        <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>← Previous</button>
        <span class="muted">
          {total ? `${offset + 1}–${Math.min(total, offset + PAGE)} of ${total}` : '0 users'}
        </span>
        <button type="button" disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)}>Next →</button>
      </div>
    </Section>
  );
}

export function Moderators() {
  const { data, error, reload } = useAdminGet<User[]>('chat/users/moderators');
  return (
    <Section title="Moderators">
      {error && <div class="form-error">{error}</div>}
      <table class="table" id="admin-moderators">
        <tbody>
          {(data ?? []).map((u) => (
            <tr key={u.id}>
              <td><UserName user={u} /></td>
              <td class="nowrap"><UserActions user={u} onDone={() => void reload()} /></td>
            </tr>
          ))}
          {data && data.length === 0 && <tr><td class="muted">No moderators. Make someone a moderator from the Users tab.</td></tr>}
        </tbody>
      </table>
    </Section>
  );
}

export function DisabledUsers() {
  const { data, error, reload } = useAdminGet<User[]>('chat/users/disabled');
  return (
    <Section title="Disabled users">
      {error && <div class="form-error">{error}</div>}
      <table class="table" id="admin-disabled-users">
        <tbody>
          {(data ?? []).map((u) => (
            <tr key={u.id}>
              <td><UserName user={u} /></td>
              <td>{formatDateTime(u.disabledAt)}</td>
              <td class="nowrap"><UserActions user={u} onDone={() => void reload()} /></td>
            </tr>
          ))}
          {data && data.length === 0 && <tr><td class="muted">No disabled users.</td></tr>}
        </tbody>
      </table>
    </Section>
  );
}

export function IpBans() {
  const { data, error, reload } = useAdminGet<IpBan[]>('chat/users/ipbans');
  const [ip, setIp] = useState('');
  const [state, run] = useSave();
  const add = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.post('chat/users/ipbans/create', { value: ip.trim() }), 'Address banned.')) {
      setIp('');
      void reload();
    }
  };
  const remove = async (value: string) => {
    if (await run(() => admin.post('chat/users/ipbans/remove', { value }), 'Ban removed.')) void reload();
  };
  return (
    <Section title="Banned IP addresses">
      {error && <div class="form-error">{error}</div>}
      <table class="table" id="admin-ipbans">
        <tbody>
          {(data ?? []).map((b) => (
            <tr key={b.ipAddress}>
              <td class="mono">{b.ipAddress}</td>
              <td>{b.notes}</td>
              <td>{formatDateTime(b.createdAt)}</td>
              <td><button type="button" onClick={() => void remove(b.ipAddress)}>Remove</button></td>
            </tr>
          ))}
          {data && data.length === 0 && <tr><td class="muted">No banned addresses.</td></tr>}
        </tbody>
      </table>
      <form class="field-row" onSubmit={add}>
        <input placeholder="IP address" value={ip} id="ipban-input" onInput={(e) => setIp(e.currentTarget.value)} required />
        <button type="submit" class="primary" disabled={state.kind === 'saving'}>Ban</button>
      </form>
      <FormStatus state={state} />
    </Section>
  );
}
