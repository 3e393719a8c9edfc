import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { admin, type Schemas } from '../../api';
import { ExternalLink } from '../../components/ExternalLink';
import { formatDateTime } from '../../lib/format';
import { ConfigField, ConfigToggle, FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';
import { useAdminGet } from '../useAdmin';

type Follower = Schemas['Follower'];

function FollowerTable({ id, rows, actions, empty }: { id: string; rows: Follower[]; actions: (f: Follower) => ComponentChildren; empty: string }) {
  return (
    <div class="table-scroll">
      <table class="table" id={id}>
        <thead><tr><th>Account</th><th>Name</th><th>Since</th><th /></tr></thead>
        <tbody>
          {rows.map((f) => (
            <tr key={f.link} data-actor={f.link}>
              <td class="mono"><ExternalLink href={f.link}>{f.username || f.link}</ExternalLink></td>
              <td>{f.name}</td>
              <td class="nowrap">{formatDateTime(f.timestamp)}</td>
              <td class="nowrap">{actions(f)}</td>
            </tr>
          ))}
          {rows.length === 0 && <tr><td colSpan={4} class="muted">{empty}</td></tr>}
        </tbody>
      </table>
    </div>
  );
}

/** Federation: settings, followers (approve, deny, remove), federated servers, a post to followers, and the activity list. */
export function Federation() {
  const { config, error } = useServerConfig();
  const approved = useAdminGet<Schemas['FollowerPage']>('followers', { limit: 200 });
  const pending = useAdminGet<Schemas['FollowerPage']>('followers/pending', { limit: 200 });
  const activity = useAdminGet<Schemas['ActivityPage']>('federation/actions', { limit: 50 });
  const servers = useAdminGet<Schemas['FederatedServers']>('federation/servers');
  const [state, run] = useSave();
  const [serverUrl, setServerUrl] = useState('');
  const [post, setPost] = useState('');
  if (!config) return <LoadError error={error} />;
  const fed = config.federation ?? ({} as Partial<typeof config.federation>);
  const reloadFollowers = () => {
    void approved.reload();
    void pending.reload();
  };
  const decide = async (f: Follower, ok: boolean) => {
    if (await run(() => admin.post('followers/approve', { actorIRI: f.link, approved: ok }), ok ? 'Follower approved.' : 'Follower denied.')) reloadFollowers();
  };
  const remove = async (f: Follower) => {
    if (await run(() => admin.post('followers/remove', { actorIRI: f.link }), 'Follower removed.')) reloadFollowers();
  };
  const addServer = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.post('federation/servers', { url: serverUrl.trim() }), 'Following the server.')) {
      setServerUrl('');
      void servers.reload();
    }
  };
  const dropServer = async (id: number) => {
    if (await run(() => admin.del(`federation/servers/${id}`), 'Stopped following.')) void servers.reload();
  };
  const send = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.post('federation/send', { value: post }), 'Sent to your followers.')) setPost('');
  };
  return (
    <>
      <Section title="Federation (ActivityPub)" description={<>Your stream is the fediverse account <strong class="mono">@{fed.username}</strong>; followers get a post when you go live. Needs the server URL (Server page).</>}>
        <ConfigToggle name="federation/enable" label="Enable federation" value={fed.enabled} id="fed-enable" />
        <ConfigToggle name="federation/private" label="Private: approve followers by hand" value={fed.isPrivate} id="fed-private" />
        <ConfigToggle name="federation/showengagement" label="Show follows, likes and boosts in chat" value={fed.showEngagement} />
        <ConfigField name="federation/livemessage" label="Go-live post" value={fed.goLiveMessage} />
        <ConfigField name="federation/blockdomains" label="Blocked domains" value={fed.blockedDomains ?? []} kind="list" help="Comma separated." />
      </Section>
      <FormStatus state={state} />
      <Section title={`Waiting for approval (${pending.data?.total ?? 0})`}>
        <FollowerTable
          id="pending-followers"
          rows={pending.data?.results ?? []}
          empty="No follow requests."
          actions={(f) => (
            <>
              <button type="button" class="primary" onClick={() => void decide(f, true)}>Approve</button>{' '}
              <button type="button" class="danger" onClick={() => void decide(f, false)}>Deny</button>
            </>
          )}
        />
      </Section>
      <Section title={`Followers (${approved.data?.total ?? 0})`}>
        {approved.error && <div class="form-error">{approved.error}</div>}
        <FollowerTable
          id="followers"
          rows={approved.data?.results ?? []}
          empty="No followers yet."
          actions={(f) => <button type="button" class="danger" onClick={() => void remove(f)}>Remove</button>}
        />
      </Section>
      <Section title="Post to your followers">
        <form onSubmit={send} class="stack" id="fed-post-form">
          <textarea value={post} required maxLength={5000} placeholder="Markdown" onInput={(e) => setPost(e.currentTarget.value)} />
          <div><button type="submit" class="primary" disabled={!post.trim() || state.kind === 'saving'}>Send</button></div>
        </form>
      </Section>
      <Section title="Federated servers" description="Other Owncast-compatible servers you follow; their go-live posts mark them online.">
        <div class="table-scroll">
          <table class="table" id="federated-servers">
            <thead><tr><th>Server</th><th>Status</th><th>Last seen live</th><th /></tr></thead>
            <tbody>
              {(servers.data?.servers ?? []).map((s) => (
                <tr key={s.id}>
                  <td><ExternalLink href={s.url}>{s.name || s.url}</ExternalLink></td>
                  <td>{s.isOnline ? <span class="badge">live: {s.streamTitle}</span> : s.followedAt ? 'offline' : 'follow pending'}</td>
                  <td class="nowrap">{formatDateTime(s.lastSeenOnline ?? undefined)}</td>
                  <td><button type="button" class="danger" onClick={() => void dropServer(s.id)}>Unfollow</button></td>
                </tr>
              ))}
              {servers.data && servers.data.servers.length === 0 && <tr><td colSpan={4} class="muted">No federated servers.</td></tr>}
            </tbody>
          </table>
        </div>
        <form onSubmit={addServer} class="field-row" id="fed-server-form">
          <input type="url" required value={serverUrl} placeholder="https://other-stream.example" onInput={(e) => setServerUrl(e.currentTarget.value)} />
          <button type="submit" class="primary">Follow server</button>
        </form>
      </Section>
      <Section title="Activity">
        <div class="table-scroll">
          <table class="table" id="fed-activity">
            <thead><tr><th>When</th><th>Type</th><th>From</th></tr></thead>
            <tbody>
              {(activity.data?.results ?? []).map((a, i) => (
                <tr key={`${a.iri}-${i}`}>
                  <td class="nowrap">{formatDateTime(a.timestamp)}</td>
                  <td>{a.type}</td>
                  <td class="mono"><ExternalLink href={a.actorIRI}>{a.actorIRI}</ExternalLink></td>
                </tr>
              ))}
              {activity.data && activity.data.results.length === 0 && <tr><td colSpan={3} class="muted">Nothing yet.</td></tr>}
            </tbody>
          </table>
        </div>
      </Section>
    </>
  );
}
