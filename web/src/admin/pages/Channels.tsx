/**
 * The server admin's channels (`/admin/channels`, root only): the list (`GET /api/admin/channels`), create
 * `{slug, name, adminPassword}`, change a channel's name, visibility or admin password, and delete `{slug, purge}`.
 * Each channel's own admin is at `/c/{slug}/admin/` (the server admin's credentials work there too).
 */
import { useEffect, useState } from 'preact/hooks';
import { serverAdmin, type AdminChannel, type Visibility } from '../../api';
import { FormStatus, Section, useSave } from '../forms';
import { usePoll } from '../useAdmin';
import { basePath } from '../../lib/base';

/** The admin of channel `c`: the root's for the default channel, `/c/{slug}/admin/` for another. */
export const channelAdminHref = (c: Pick<AdminChannel, 'slug' | 'default'>) => (c.default ? '/admin/' : `/c/${encodeURIComponent(c.slug)}/admin/`);

function ChannelRow({ c, onChanged }: { c: AdminChannel; onChanged: () => void }) {
  const [name, setName] = useState(c.name);
  const [visibility, setVisibility] = useState<Visibility>(c.visibility);
  const [password, setPassword] = useState('');
  const [purge, setPurge] = useState(false);
  const [state, run] = useSave();
  const save = async (e: Event) => {
    e.preventDefault();
    const body: { slug: string; name?: string; visibility?: Visibility; adminPassword?: string } = { slug: c.slug };
    if (name.trim() !== c.name) body.name = name.trim();
    if (visibility !== c.visibility) body.visibility = visibility;
    if (password) body.adminPassword = password;
    if (await run(() => serverAdmin.updateChannel(body), 'Channel saved.')) {
      setPassword('');
      onChanged();
    }
  };
  const remove = async () => {
    if (!window.confirm(`Delete the channel ${c.slug}?${purge ? ' Its recordings and data are deleted too.' : ''}`)) return;
    if (await run(() => serverAdmin.deleteChannel({ slug: c.slug, purge }), 'Channel deleted.')) onChanged();
  };
  return (
    <tr data-slug={c.slug}>
      <td class="mono">{c.slug}</td>
      <td>
        <span class={`badge${c.online ? ' live' : ''}`}>{c.online ? 'Live' : 'Offline'}</span>
      </td>
      <td>
        {c.default ? (
          <span>{c.name}</span>
        ) : (
          <form class="channel-edit" onSubmit={save}>
            <input aria-label="Name" class="channel-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
            <select aria-label="Visibility" class="channel-visibility" value={visibility} onChange={(e) => setVisibility(e.currentTarget.value as Visibility)}>
              <option value="public">Public</option>
              <option value="unlisted">Unlisted</option>
              <option value="password">Password</option>
              <option value="token">Token</option>
            </select>
            <input aria-label="New admin password" type="password" class="channel-password" placeholder="New admin password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
            <button type="submit" class="channel-save">Save</button>
          </form>
        )}
        <FormStatus state={state} />
      </td>
      <td>
        <a href={c.url}>Page</a> · <a href={channelAdminHref(c)} class="channel-admin-link">Admin</a>
      </td>
      <td>
        {!c.default && (
          <>
            <label>
              <input type="checkbox" class="channel-purge" checked={purge} onChange={(e) => setPurge(e.currentTarget.checked)} /> with its files
            </label>{' '}
            <button type="button" class="danger channel-delete" onClick={remove} disabled={c.online} title={c.online ? 'A live channel cannot be deleted' : undefined}>
              Delete
            </button>
          </>
        )}
      </td>
    </tr>
  );
}

export function Channels() {
  const { data, error, reload } = usePoll(() => serverAdmin.channels(), 10_000);
  const [slug, setSlug] = useState('');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [state, run] = useSave();
  const create = async (e: Event) => {
    e.preventDefault();
    if (await run(() => serverAdmin.createChannel({ slug: slug.trim(), name: name.trim(), adminPassword: password }), 'Channel created.')) {
      setSlug('');
      setName('');
      setPassword('');
      void reload();
    }
  };
  return (
    <>
      <Section title="Channels" description="Each channel is a stream of its own, with its own page, chat, stream key and admin.">
        {error && <div class="form-error">{error}</div>}
        <div class="table-scroll">
          <table class="table" id="channels-table">
            <thead>
              <tr>
                <th>Slug</th>
                <th>State</th>
                <th>Name, visibility, admin password</th>
                <th />
                <th />
              </tr>
            </thead>
            <tbody>
              {(data ?? []).map((c) => (
                <ChannelRow key={`${c.slug}:${c.name}:${c.visibility}`} c={c} onChanged={() => void reload()} />
              ))}
            </tbody>
          </table>
        </div>
      </Section>
      <Section title="New channel" description="The slug is the channel's address: /c/slug/. Its admin signs in as admin with the password given here.">
        <form id="channel-create" onSubmit={create}>
          <label>
            Slug <input id="channel-slug" required value={slug} pattern="[a-z0-9-]+" onInput={(e) => setSlug(e.currentTarget.value)} />
          </label>
          <label>
            Name <input id="channel-new-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </label>
          <label>
            Admin password <input id="channel-admin-password" type="password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
          </label>
          <button type="submit" class="primary" id="channel-create-submit">
            Create
          </button>
          <FormStatus state={state} />
        </form>
      </Section>
    </>
  );
}

/**
 * The channel switcher of the admin's navigation: shown only when `/api/admin/channels` answers (to the server admin);
 * a channel admin's credentials get 401 there (without a password prompt: `probeChannels`), which hides it quietly. Choosing a channel opens that channel's admin.
 */
export function ChannelSwitcher({ current }: { current: string }) {
  const [list, setList] = useState<AdminChannel[] | null>(null);
  useEffect(() => {
    // At the root only the server admin gets in, so the plain request (its 401 challenge lets the browser send
    // the credentials it holds); on a channel's admin the probe, whose 401 asks a channel admin's browser for nothing.
    (basePath() ? serverAdmin.probeChannels() : serverAdmin.channels()).then(
      (l) => setList(Array.isArray(l) ? l : null),
      () => setList(null),
    );
  }, []);
  if (!list || !list.length) return null;
  return (
    <label class="channel-switcher">
      <span>Channel</span>
      <select
        id="channel-switcher"
        value={current}
        onChange={(e) => {
          const c = list.find((x) => x.slug === e.currentTarget.value);
          if (c) window.location.assign(channelAdminHref(c));
        }}
      >
        {list.map((c) => (
          <option key={c.slug} value={c.slug}>
            {c.name} ({c.default ? '/' : `/c/${c.slug}`})
          </option>
        ))}
      </select>
    </label>
  );
}
