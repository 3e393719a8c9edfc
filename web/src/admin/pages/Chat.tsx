import { useState } from 'preact/hooks';
import { ConfigField, ConfigToggle, LoadError, Section, useServerConfig } from '../forms';
import { DisabledUsers, IpBans, Messages, Moderators, Users } from './ChatModeration';
import { Emoji } from './Emoji';

const TABS = [
  { id: 'settings', label: 'Settings' },
  { id: 'messages', label: 'Messages' },
  { id: 'users', label: 'Users' },
  { id: 'moderation', label: 'Moderators & bans' },
  { id: 'emoji', label: 'Emoji' },
] as const;
type Tab = (typeof TABS)[number]['id'];

function Settings() {
  const { config, error } = useServerConfig();
  if (!config) return <LoadError error={error} />;
  return (
    <>
      <Section title="Chat settings">
        <ConfigToggle name="chat/disable" label="Disable chat" value={config.chatDisabled} id="chat-disable-toggle" />
        <ConfigToggle name="chat/joinmessagesenabled" label="Show join and leave messages" value={config.chatJoinMessagesEnabled} />
        <ConfigToggle
          name="chat/establishedusermode"
          label="Established-user mode"
          value={config.chatEstablishedUserMode}
          help="Only users who have been around for a while (and moderators) can chat. Useful during a spam wave."
        />
        <ConfigToggle name="chat/requireauthentication" label="Require authentication to chat" value={config.chatRequireAuthentication} />
      </Section>
      <Section title="Messages and names">
        <ConfigField name="welcomemessage" label="Welcome message (Markdown)" value={config.instanceDetails.welcomeMessage} kind="textarea" id="welcome-message-input" />
        <ConfigField name="chat/forbiddenusernames" label="Forbidden usernames" value={config.forbiddenUsernames} kind="list" help="Comma separated. Names containing any of these are refused." />
        <ConfigField name="chat/suggestedusernames" label="Suggested usernames" value={config.suggestedUsernames} kind="list" help="Comma separated. New users get one of these when the list has at least 10 names." />
      </Section>
    </>
  );
}

/** Chat: settings, messages, users, moderation and custom emoji, as tabs. */
export function Chat() {
  const [tab, setTab] = useState<Tab>('settings');
  return (
    <>
      <div class="tabs" role="tablist">
        {TABS.map((t) => (
          <button key={t.id} type="button" role="tab" data-tab={t.id} aria-selected={tab === t.id} class={tab === t.id ? 'active' : ''} onClick={() => setTab(t.id)}>
            {t.label}
          </button>
        ))}
      </div>
      {tab === 'settings' && <Settings />}
      {tab === 'messages' && <Messages />}
      {tab === 'users' && <Users />}
      {tab === 'moderation' && (
        <>
          <Moderators />
          <DisabledUsers />
          <IpBans />
        </>
      )}
      {tab === 'emoji' && <Emoji />}
    </>
  );
}
