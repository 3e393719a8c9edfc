/** Chat embeds: `/embed/chat/readonly` (messages only) and `/embed/chat/readwrite` (full chat). */
import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import '../styles.css';
import { ChatPanel } from '../chat/ChatPanel';
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
if (root) render(<ChatEmbed readonly={root.dataset.readonly === 'true'} />, root);
