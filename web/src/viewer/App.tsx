import { useEffect, useState } from 'preact/hooks';
import { apiUrl, channels, type PublicConfig } from '../api';
import { ChatPanel } from '../chat/ChatPanel';
import { Icon } from '../components/Icon';
import { Modal } from '../components/Modal';
import { basePath, withBase } from '../lib/base';
import { LeaveButton } from './Access';
import { FollowForm } from './Follow';
import { About, ExternalActions } from './Info';
import { pushSupported, subscribeToNotifications } from './notify';
import { applyCustomisation } from './page';
import { NextStream } from './Schedule';
import { ClipButton, PastBroadcasts } from './Replays';
import { Stage, StreamBar } from './Stage';
import { useConfig, usePing, useStatus } from './useServer';

/** Per channel: accepting one channel's notice says nothing of another's. */
const NSFW_KEY = `castd.nsfwAccepted${basePath()}`;

/** On the root's viewer page: whether the server has other channels (then the header links to `/channels`). */
function useOtherChannels(): boolean {
  const [others, setOthers] = useState(false);
  useEffect(() => {
    if (basePath()) return;
    channels.list().then(
      (l) => setOthers(Array.isArray(l) && l.length > 1),
      () => setOthers(false),
    );
  }, []);
  return others;
}

function Header({ config }: { config: PublicConfig }) {
  const [follow, setFollow] = useState(false);
  const others = useOtherChannels();
  const [notifyMsg, setNotifyMsg] = useState<string | null>(null);
  const browser = config.notifications?.browser;
  const notify = async () => {
    try {
      await subscribeToNotifications(browser?.publicKey ?? '');
      setNotifyMsg('You will be notified when the stream goes live.');
    } catch (e) {
      setNotifyMsg((e as Error).message);
    }
  };
  return (
    <header class="site-header">
      <img class="logo" src={config.logo ? withBase(config.logo) : apiUrl('/logo')} alt="" id="server-logo" />
      <h1 id="server-name">{config.name}</h1>
      {others && (
        <a href="/channels" id="all-channels" class="all-channels-link">
          All channels
        </a>
      )}
      <div class="header-buttons">
        <LeaveButton />
        {browser?.enabled && pushSupported() && (
          <button type="button" id="notify-button" onClick={() => void notify()}>
            <Icon name="bell" /> Notify
          </button>
        )}
        {config.federation?.enabled && (
          <button type="button" id="follow-button" class="primary" onClick={() => setFollow(true)}>
            Follow
          </button>
        )}
      </div>
      {follow && config.federation && (
        <Modal title={`Follow ${config.name}`} small onClose={() => setFollow(false)}>
          <FollowForm account={config.federation.account} />
        </Modal>
      )}
      {notifyMsg && (
        <Modal title="Notifications" small onClose={() => setNotifyMsg(null)}>
          <p>{notifyMsg}</p>
        </Modal>
      )}
    </header>
  );
}

function NsfwNotice() {
  const [dismissed, setDismissed] = useState(() => {
    try {
      return sessionStorage.getItem(NSFW_KEY) === '1';
    } catch {
      return false;
    }
  });
  if (dismissed) return null;
  return (
    <div class="card nsfw-notice" id="nsfw-notice" role="note">
      <span>
        <Icon name="warning" class="warn-icon" /> This stream is marked as containing mature content (NSFW).
      </span>
      <button
        type="button"
        onClick={() => {
          try {
            sessionStorage.setItem(NSFW_KEY, '1');
          } catch {
            /* ignore */
          }
          setDismissed(true);
        }}
      >
        OK
      </button>
    </div>
  );
}

/** The viewer page at `/`. */
export function ViewerApp() {
  const { config, error } = useConfig();
  const status = useStatus();
  usePing(Boolean(status?.online));

  useEffect(() => {
    // Custom JavaScript is the server admin's alone: only the default channel's page loads it (a channel's
    // `/customjavascript` is empty too).
    if (config) applyCustomisation(config, { customJavascript: basePath() === '' });
  }, [config]);

  if (!config) {
    return <div class="chat-notice">{error ? `Cannot reach the server (${error}); retrying…` : 'Loading…'}</div>;
  }
  const chat = !config.chatDisabled;
  return (
    <>
      <Header config={config} />
      <main class={`viewer-layout${chat ? '' : ' no-chat'}`}>
        <section class="stage">
          <Stage config={config} status={status} />
          <StreamBar config={config} status={status} />
          <ClipButton config={config} status={status} />
        </section>
        <section class="info">
          {config.nsfw && <NsfwNotice />}
          <NextStream config={config} status={status} />
          <ExternalActions actions={config.externalActions ?? []} />
          <About config={config} />
          <PastBroadcasts />
        </section>
        {chat && <ChatPanel config={config} />}
      </main>
    </>
  );
}
