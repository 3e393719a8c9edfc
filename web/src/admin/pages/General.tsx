import { useEffect, useState } from 'preact/hooks';
import { admin, api, apiUrl, type ExternalAction, type SocialHandle, type SocialPlatform } from '../../api';
import { basePath } from '../../lib/base';
import { iconForSave } from '../../lib/social';
import { ConfigField, ConfigToggle, FormStatus, LoadError, Section, readDataUrl, useSave, useServerConfig } from '../forms';
import { RowsEditor } from '../RowsEditor';

function LogoUpload() {
  const [state, run] = useSave();
  const [stamp, setStamp] = useState(Date.now());
  const upload = async (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    const ok = await run(async () => {
      if (file.size > 2 * 1024 * 1024) throw new Error('The logo must be smaller than 2 MB.');
      await admin.setConfig('logo', await readDataUrl(file));
    }, 'Logo updated.');
    if (ok) setStamp(Date.now());
    input.value = '';
  };
  return (
    <div class="config-field" data-setting="logo">
      <label for="logo-input">Logo</label>
      <div class="field-row">
        <img class="logo-preview" src={apiUrl(`/logo?t=${stamp}`)} alt="Current logo" />
        <input id="logo-input" type="file" accept="image/png,image/jpeg,image/gif,image/svg+xml,image/webp" onChange={(e) => void upload(e)} />
      </div>
      <FormStatus state={state} />
    </div>
  );
}

type Pair = { name: string; value: string };

/** Social handles; the platform field suggests the keys of `/api/socialplatforms`, and each handle is saved with its platform's icon. */
function SocialHandles({ handles }: { handles: SocialHandle[] }) {
  const [platforms, setPlatforms] = useState<Record<string, SocialPlatform> | null>(null);
  useEffect(() => {
    api.socialPlatforms().then(
      (p) => setPlatforms(p && typeof p === 'object' ? p : null),
      () => setPlatforms(null),
    );
  }, []);
  return (
    <>
      <datalist id="social-platforms">
        {Object.entries(platforms ?? {}).map(([key, p]) => (
          <option key={key} value={key}>
            {p.name}
          </option>
        ))}
      </datalist>
      <RowsEditor<SocialHandle & Record<string, unknown>>
        setting="socialhandles"
        id="social-handles-form"
        rows={handles as (SocialHandle & Record<string, unknown>)[]}
        columns={[
          { key: 'platform', label: 'Platform', placeholder: 'mastodon', list: 'social-platforms' },
          { key: 'url', label: 'URL', type: 'url', placeholder: 'https://…' },
        ]}
        blank={() => ({ platform: '', url: '' })}
        toValue={(rows) => rows.map((r) => ({ ...r, platform: String(r.platform ?? '').trim(), icon: iconForSave(r, platforms) }))}
        addLabel="+ Add handle"
      />
    </>
  );
}

/** General: identity, page content, links, appearance and custom code. */
export function General() {
  const { config, error } = useServerConfig();
  if (!config) return <LoadError error={error} />;
  const d = config.instanceDetails;
  const appearance: Pair[] = Object.entries(d.appearanceVariables ?? {}).map(([name, value]) => ({ name, value: String(value) }));
  return (
    <>
      <Section title="Stream">
        <ConfigField name="streamtitle" label="Stream title" value={d.streamTitle} id="stream-title-input" saveId="stream-title-save" placeholder="What are you streaming?" />
      </Section>
      <Section title="Identity">
        <ConfigField name="name" label="Server name" value={d.name} id="server-name-input" saveId="server-name-save" />
        <ConfigField name="serversummary" label="Summary" value={d.summary} kind="textarea" id="summary-input" saveId="summary-save" />
        <ConfigField name="tags" label="Tags" value={d.tags} kind="list" id="tags-input" help="Comma separated." />
        <LogoUpload />
        <ConfigToggle name="nsfw" label="This stream contains mature (NSFW) content" value={d.nsfw} id="nsfw-toggle" />
      </Section>
      <Section title="Page content">
        <ConfigField name="offlinemessage" label="Offline message (Markdown)" value={d.offlineMessage} kind="textarea" id="offline-message-input" />
        <ConfigField name="pagecontent" label="Extra page content (Markdown)" value={d.extraPageContent} kind="textarea" id="page-content-input" />
      </Section>
      <Section title="Social handles">
        <SocialHandles handles={d.socialHandles ?? []} />
      </Section>
      <Section title="External actions" description="Buttons on the viewer page that open a page in a dialog, or a new tab.">
        <RowsEditor<ExternalAction & Record<string, unknown>>
          setting="externalactions"
          id="external-actions-form"
          rows={(config.externalActions ?? []) as (ExternalAction & Record<string, unknown>)[]}
          columns={[
            { key: 'title', label: 'Title' },
            { key: 'url', label: 'URL', type: 'url' },
            { key: 'description', label: 'Description' },
            { key: 'icon', label: 'Icon URL' },
            { key: 'color', label: 'Colour', placeholder: '#7c5cff' },
            { key: 'openExternally', label: 'New tab', type: 'checkbox' },
          ]}
          blank={() => ({ title: '', url: '', html: '', description: '', icon: '', color: '', openExternally: false })}
          addLabel="+ Add action"
        />
      </Section>
      <Section title="Appearance" description="CSS custom properties applied to the viewer page, e.g. theme-color-action = #ff6600.">
        <RowsEditor<Pair>
          setting="appearance"
          id="appearance-form"
          rows={appearance}
          columns={[
            { key: 'name', label: 'Variable', placeholder: 'theme-color-action' },
            { key: 'value', label: 'Value', placeholder: '#ff6600' },
          ]}
          blank={() => ({ name: '', value: '' })}
          toValue={(rows) => Object.fromEntries(rows.filter((r) => r.name.trim()).map((r) => [r.name.trim(), r.value]))}
          addLabel="+ Add variable"
        />
      </Section>
      <Section title="Visibility">
        <ConfigToggle name="hideviewercount" label="Hide the viewer count" value={config.hideViewerCount} />
        <ConfigToggle name="disablesearchindexing" label="Ask search engines not to index this site" value={config.disableSearchIndexing} />
      </Section>
      <Section title="Custom code">
        <ConfigField name="customstyles" label="Custom CSS" value={d.customStyles} kind="code" id="custom-css-input" />
        {basePath() === '' ? (
          <ConfigField name="customjavascript" label="Custom JavaScript" value={d.customJavascript} kind="code" id="custom-js-input" />
        ) : (
          <p class="muted" id="custom-js-server-admin-only">
            Custom JavaScript is only for the server admin (the default channel); a channel's page runs none. Its custom
            CSS may not load anything from other sites.
          </p>
        )}
      </Section>
    </>
  );
}
