/** Video embed at `/embed/video`: the player alone, with the offline card while the stream is down (behind the prompt of a private channel). */
import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import '../styles.css';
import { AccessGate } from '../viewer/Access';
import { Stage } from '../viewer/Stage';
import { applyCustomisation } from '../viewer/page';
import { useConfig, usePing, useStatus } from '../viewer/useServer';

function VideoEmbed() {
  const { config } = useConfig();
  const status = useStatus();
  usePing(Boolean(status?.online));
  useEffect(() => {
    if (config) applyCustomisation(config, { customJavascript: false });
  }, [config]);
  if (!config) return null;
  return <Stage config={config} status={status} />;
}

const root = document.getElementById('app');
if (root) render(
    <AccessGate>
      <VideoEmbed />
    </AccessGate>,
    root,
  );
