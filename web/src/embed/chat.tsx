/** Chat embeds: `/embed/chat/readonly` (messages only) and `/embed/chat/readwrite` (full chat), behind the prompt of a private channel. */
import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import '../styles.css';
import { ChatPanel } from '../chat/ChatPanel';
import { AccessGate } from '../viewer/Access';
import { applyCustomisation } from '../viewer/page';
import { useConfig } from '../viewer/useServer';

function ChatEmbed({ readonly }: { readonly: boolean }) {
  const { config } = useConfig();
  useEffect(() => {
    if (config) applyCustomisation(config, { customJavascript: false });
  }, [config]);
  if (!config) return null;
  if (config.chatDisabled) return <div class="chat-notice">Chat is disabled.</div>;
  return <ChatPanel config={config} readonly={readonly} />;
}

const root = document.getElementById('app');
if (root) render(
    <AccessGate>
      <ChatEmbed readonly={root.dataset.readonly === 'true'} />
    </AccessGate>,
    root,
  );
