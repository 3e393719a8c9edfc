import { useEffect, useState } from 'preact/hooks';
import { admin } from '../../api';
import { FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';

function BrowserForm({ initial }: { initial: { enabled: boolean; goLiveMessage: string } }) {
  const { reload } = useServerConfig();
  const [v, setV] = useState(initial);
  const [state, run] = useSave();
  useEffect(() => setV({ ...initial }), [initial]);
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('notifications/browser', v))) void reload();
  };
  return (
    <form onSubmit={save} class="stack" id="browser-notifications-form">
      <label class="toggle">
        <input type="checkbox" checked={v.enabled} onChange={(e) => setV({ ...v, enabled: e.currentTarget.checked })} />
        <span>Offer viewers browser notifications</span>
      </label>
      <label>
        Go-live message
        <br />
        <input value={v.goLiveMessage} onInput={(e) => setV({ ...v, goLiveMessage: e.currentTarget.value })} />
      </label>
      <div><button type="submit" class="primary">Save</button></div>
      <FormStatus state={state} />
    </form>
  );
}

/** How the server configuration shows a webhook URL that is set (it is a secret). */
const MASKED = '********';

function DiscordForm({ initial }: { initial: { enabled: boolean; webhook: string; goLiveMessage: string } }) {
  const { reload } = useServerConfig();
  // The saved URL is never shown: the field starts empty, and left empty it keeps the saved one (sent as MASKED).
  const isSet = initial.webhook === MASKED;
  const fromConfig = () => ({ ...initial, webhook: isSet ? '' : initial.webhook });
  const [v, setV] = useState(fromConfig);
  const [state, run] = useSave();
  useEffect(() => setV(fromConfig()), [initial]);
  const save = async (e: Event) => {
    e.preventDefault();
    const webhook = v.webhook === '' && isSet ? MASKED : v.webhook;
    if (await run(() => admin.setConfig('notifications/discord', { ...v, webhook }))) void reload();
  };
  return (
    <form onSubmit={save} class="stack" id="discord-notifications-form">
      <label class="toggle">
        <input type="checkbox" checked={v.enabled} onChange={(e) => setV({ ...v, enabled: e.currentTarget.checked })} />
        <span>Post to a Discord channel when the stream goes live</span>
      </label>
      <label>
        Discord webhook URL
        <br />
        <input type="url" value={v.webhook} id="discord-webhook-input" placeholder={isSet ? 'set (paste a new URL to replace it)' : 'https://discord.com/api/webhooks/…'} onInput={(e) => setV({ ...v, webhook: e.currentTarget.value })} />
      </label>
      <label>
        Go-live message
        <br />
        <input value={v.goLiveMessage} onInput={(e) => setV({ ...v, goLiveMessage: e.currentTarget.value })} />
      </label>
      <div><button type="submit" class="primary">Save</button></div>
      <FormStatus state={state} />
    </form>
  );
}

/** Go-live notifications: browser push and Discord. */
export function Notifications() {
  const { config, error } = useServerConfig();
  if (!config) return <LoadError error={error} />;
  const n = config.notifications ?? ({} as Partial<typeof config.notifications>);
  return (
    <>
      <Section title="Browser notifications">
        <BrowserForm initial={{ enabled: Boolean(n.browser?.enabled), goLiveMessage: n.browser?.goLiveMessage ?? '' }} />
      </Section>
      <Section title="Discord">
        <DiscordForm initial={{ enabled: Boolean(n.discord?.enabled), webhook: n.discord?.webhook ?? '', goLiveMessage: n.discord?.goLiveMessage ?? '' }} />
      </Section>
    </>
  );
}
