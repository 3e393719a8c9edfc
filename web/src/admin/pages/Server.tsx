import { useEffect, useState } from 'preact/hooks';
import { admin, type S3Info, type StatusResponse } from '../../api';
import { ConfigField, ConfigToggle, FormStatus, LoadError, Section, useSave, useServerConfig, type SaveState } from '../forms';
import { StatusWarnings } from '../Warnings';

const emptyS3: S3Info = {
  enabled: false,
  endpoint: '',
  accessKey: '',
  secret: '',
  bucket: '',
  region: '',
  acl: '',
  pathPrefix: '',
  forcePathStyle: false,
};

function S3Form({ initial }: { initial: S3Info }) {
  const { reload } = useServerConfig();
  const [v, setV] = useState<S3Info>(initial);
  const [state, run] = useSave();
  useEffect(() => setV({ ...emptyS3, ...initial }), [initial]);
  const text = (key: keyof S3Info, label: string, type: 'text' | 'url' | 'password' = 'text') => (
    <label>
      {label}
      <br />
      <input type={type as 'text' /* preact 11 narrows props per input type */} value={String(v[key] ?? '')} onInput={(e) => setV({ ...v, [key]: e.currentTarget.value })} />
    </label>
  );
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig('s3', v))) void reload();
  };
  // "Test connection": PUT, GET and DELETE a probe object with the settings in the form (a masked
  // secret is the saved one); the storage's own error message on failure.
  const [test, setTest] = useState<SaveState>({ kind: 'idle' });
  const testConnection = async () => {
    setTest({ kind: 'saving' });
    try {
      const r = await admin.post<StatusResponse>('storage/test', v);
      setTest({ kind: 'ok', message: r?.message || 'Connected.' });
    } catch (e) {
      setTest({ kind: 'error', message: (e as Error).message || 'Request failed' });
    }
  };
  return (
    <form onSubmit={save} class="stack grid-2" id="s3-form">
      <label class="toggle span-2">
        <input type="checkbox" checked={v.enabled} onChange={(e) => setV({ ...v, enabled: e.currentTarget.checked })} />
        <span>Serve video segments from object storage</span>
      </label>
      {text('endpoint', 'Endpoint', 'url')}
      {text('bucket', 'Bucket')}
      {text('region', 'Region')}
      {text('accessKey', 'Access key')}
      {text('secret', 'Secret', 'password')}
      {text('acl', 'ACL (optional)')}
      {text('pathPrefix', 'Path prefix (optional)')}
      <label class="toggle">
        <input type="checkbox" checked={v.forcePathStyle} onChange={(e) => setV({ ...v, forcePathStyle: e.currentTarget.checked })} />
        <span>Force path-style URLs</span>
      </label>
      <div class="span-2">
        <button type="submit" class="primary">Save storage settings</button>{' '}
        <button type="button" id="s3-test" onClick={() => void testConnection()} disabled={test.kind === 'saving'}>
          {test.kind === 'saving' ? 'Testing…' : 'Test connection'}
        </button>
      </div>
      <div class="span-2"><FormStatus state={state} /></div>
      <div class="span-2" id="s3-test-status"><FormStatus state={test} /></div>
    </form>
  );
}

/** Server: ports and addresses, public URL, object storage, federation and the admin password. */
export function Server() {
  const { config, error } = useServerConfig();
  if (!config) return <LoadError error={error} />;
  const fed = config.federation ?? ({} as Partial<typeof config.federation>);
  return (
    <>
      <StatusWarnings />
      <Section title="Network" description="Port and address changes apply after castd restarts.">
        <ConfigField name="webserverport" label="Web server port" value={config.webServerPort} kind="number" id="web-port-input" />
        <ConfigField name="webserverip" label="Web server address" value={config.webServerIP} id="web-ip-input" placeholder="0.0.0.0" />
        <ConfigField name="rtmpserverport" label="RTMP port" value={config.rtmpServerPort} kind="number" id="rtmp-port-input" />
        <ConfigField name="srtserverport" label="SRT port (UDP; 0 turns SRT off)" value={config.srtServerPort} kind="number" id="srt-port-input" />
      </Section>
      <Section title="SRT encryption" description="Publishers over SRT must give this passphrase (10–79 characters); leave it empty for none. Applies to the next connection.">
        <ConfigField name="srt/passphrase" label="SRT passphrase" value={config.srtPassphrase} id="srt-passphrase-input" placeholder="(none)" help="A saved passphrase is shown as ********; saving that keeps it." />
      </Section>
      <Section title="Public addresses">
        <ConfigField name="serverurl" label="Server URL" value={config.yp?.instanceUrl} kind="url" id="server-url-input" placeholder="https://live.example.com" help="Needed for federation, IndieAuth and the directory." />
        <ConfigField name="videoservingendpoint" label="Video serving endpoint (CDN)" value={config.videoServingEndpoint} kind="url" />
        <ConfigField name="sockethostoverride" label="Chat websocket host override" value={config.socketHostOverride} placeholder="wss://chat.example.com" />
        <ConfigToggle name="directoryenabled" label="List this server in the public directory" value={config.yp?.enabled} />
      </Section>
      <Section title="Channels' outbound addresses" description="Where the webhooks, admission hooks, token key URLs, Discord webhooks and simulcast targets that channel admins set may lead. This server's own (the default channel's) go anywhere.">
        <ConfigToggle
          name="allowprivatetargets"
          label="Let channels reach loopback and private addresses"
          value={config.allowPrivateTargets}
          id="allow-private-targets-toggle"
          help="Off: public addresses only. Turn on only if every channel admin may reach the machines on this server's network."
        />
      </Section>
      <Section title="Object storage">
        <S3Form initial={{ ...emptyS3, ...(config.s3 ?? {}) }} />
      </Section>
      <Section title="Federation (ActivityPub)">
        <ConfigToggle name="federation/enable" label="Enable federation" value={fed.enabled} id="federation-enable-toggle" />
        <ConfigToggle name="federation/private" label="Private: approve followers by hand" value={fed.isPrivate} />
        <ConfigToggle name="federation/showengagement" label="Show follows, likes and boosts in chat" value={fed.showEngagement} />
        <ConfigField name="federation/username" label="Username" value={fed.username} />
        <ConfigField name="federation/livemessage" label="Go-live post" value={fed.goLiveMessage} />
        <ConfigField name="federation/blockdomains" label="Blocked domains" value={fed.blockedDomains ?? []} kind="list" help="Comma separated." />
      </Section>
      <Section title="Admin password" description="After a change your browser asks for the new password.">
        <ConfigField name="adminpass" label="New admin password" value="" kind="password" id="admin-password-input" reload={false} />
      </Section>
      <Section title="Updates">
        <p id="updates-note">
          Updates are managed by the package manager (apt).
          {config.instanceDetails?.version ? <> This is castd {config.instanceDetails.version}.</> : null}
        </p>
      </Section>
    </>
  );
}
