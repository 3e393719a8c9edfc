import { useState } from 'preact/hooks';
import { admin, type paths, type Webhook } from '../../api';
import { formatDateTime } from '../../lib/format';
import { FormStatus, Section, useSave } from '../forms';
import { useAdminGet } from '../useAdmin';

export const WEBHOOK_EVENTS = [
  'CHAT',
  'USER_JOINED',
  'USER_PARTED',
  'NAME_CHANGE',
  'VISIBILITY-UPDATE',
  'STREAM_STARTED',
  'STREAM_STOPPED',
  'STREAM_TITLE_UPDATED',
  'SYSTEM',
  'CHAT_ACTION',
  'FEDIVERSE_ENGAGEMENT_FOLLOW',
  'FEDIVERSE_ENGAGEMENT_LIKE',
  'FEDIVERSE_ENGAGEMENT_REPOST',
  'PING',
  'PONG',
  'SCHEDULED_EVENTS',
  'SIMULCAST_STATE_CHANGED',
  'REPLAY_READY',
  'CLIP_CREATED',
  'TRANSCODE_DEGRADED',
] as const;

/** The event types a webhook may subscribe to, as castd's OpenAPI document lists them for `webhooks/create`. */
type WebhookEventType = paths['/api/admin/webhooks/create']['post']['requestBody']['content']['application/json']['events'][number];
/** Compile-time: the list above is exactly the document's (a type castd adds fails the type check until it is listed). */
type Unlisted = Exclude<WebhookEventType, (typeof WEBHOOK_EVENTS)[number]>;
type Unknown = Exclude<(typeof WEBHOOK_EVENTS)[number], WebhookEventType>;
export const WEBHOOK_EVENTS_COMPLETE: [Unlisted, Unknown] extends [never, never] ? true : { unlisted: Unlisted; unknown: Unknown } = true;

/** Outbound webhooks: list, create `{url, events, secret}`, delete `{id}`. */
export function Webhooks() {
  const { data, error, reload } = useAdminGet<Webhook[]>('webhooks');
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState('');
  const [events, setEvents] = useState<string[]>(['STREAM_STARTED', 'STREAM_STOPPED']);
  const [state, run] = useSave();

  const create = async (e: Event) => {
    e.preventDefault();
    const ok = await run(async () => {
      if (!events.length) throw new Error('Choose at least one event.');
      await admin.post('webhooks/create', { url: url.trim(), events, secret });
    }, 'Webhook created.');
    if (ok) {
      setUrl('');
      setSecret('');
      void reload();
    }
  };
  const remove = async (id: number) => {
    if (await run(() => admin.post('webhooks/delete', { id }), 'Webhook deleted.')) void reload();
  };
  const toggle = (ev: string, on: boolean) => setEvents(on ? [...events, ev] : events.filter((x) => x !== ev));

  return (
    <>
      <Section title="Webhooks" description="castd POSTs {type, eventData} JSON to each URL for the events it subscribes to.">
        {error && <div class="form-error">{error}</div>}
        <div class="table-scroll">
          <table class="table" id="webhooks-table">
            <thead><tr><th>URL</th><th>Events</th><th>Last used</th><th /></tr></thead>
            <tbody>
              {(data ?? []).map((w) => (
                <tr key={w.id}>
                  <td class="mono">{w.url}</td>
                  <td>{(w.events ?? []).join(', ')}</td>
                  <td class="nowrap">{formatDateTime(w.lastUsed)}</td>
                  <td><button type="button" class="danger" onClick={() => void remove(w.id)}>Delete</button></td>
                </tr>
              ))}
              {data && data.length === 0 && <tr><td colSpan={4} class="muted">No webhooks.</td></tr>}
            </tbody>
          </table>
        </div>
      </Section>
      <Section title="Add a webhook">
        <form onSubmit={create} id="webhook-form" class="stack">
          <label>
            URL
            <br />
            <input type="url" required value={url} id="webhook-url" placeholder="https://example.com/hook" onInput={(e) => setUrl(e.currentTarget.value)} />
          </label>
          <label>
            Secret (optional, used to sign deliveries)
            <br />
            <input value={secret} id="webhook-secret" onInput={(e) => setSecret(e.currentTarget.value)} />
          </label>
          <fieldset class="checkbox-grid">
            <legend>Events</legend>
            {WEBHOOK_EVENTS.map((ev) => (
              <label key={ev} class="toggle">
                <input type="checkbox" value={ev} checked={events.includes(ev)} onChange={(e) => toggle(ev, e.currentTarget.checked)} />
                <span class="mono">{ev}</span>
              </label>
            ))}
          </fieldset>
          <div><button type="submit" class="primary" id="webhook-create" disabled={state.kind === 'saving'}>Add webhook</button></div>
          <FormStatus state={state} />
        </form>
      </Section>
    </>
  );
}
