import { useEffect, useState } from 'preact/hooks';
import { api, apiUrl, type ExternalAction, type PublicConfig, type SocialHandle, type SocialPlatform } from '../api';
import { Icon } from '../components/Icon';
import { Modal } from '../components/Modal';
import { ExternalLink } from '../components/ExternalLink';
import { httpUrl } from '../lib/safeUrl';
import { findPlatform, socialIcon } from '../lib/social';

/** External action buttons: open in a modal (iframe of `url`, or the action's `html`), or a new tab when `openExternally`. */
export function ExternalActions({ actions }: { actions: ExternalAction[] }) {
  const [open, setOpen] = useState<ExternalAction | null>(null);
  if (!actions.length) return null;
  return (
    <div class="external-actions" data-testid="external-actions">
      {actions.map((a, i) =>
        a.openExternally ? (
          <ExternalLink key={i} class="button" href={a.url} title={a.description} style={a.color ? { background: a.color } : undefined}>
            {a.icon && <img src={a.icon} alt="" />}
            {a.title}
          </ExternalLink>
        ) : (
          <button key={i} type="button" title={a.description} style={a.color ? { background: a.color } : undefined} onClick={() => setOpen(a)}>
            {a.icon && <img src={a.icon} alt="" />}
            {a.title}
          </button>
        ),
      )}
      {open && (
        <Modal title={open.title} onClose={() => setOpen(null)}>
          {open.html ? (
            <div class="html-content" dangerouslySetInnerHTML={{ __html: open.html }} />
          ) : httpUrl(open.url) ? (
            <iframe src={httpUrl(open.url) ?? undefined} title={open.title} allow="clipboard-write; payment" referrerpolicy="no-referrer" />
          ) : (
            <p class="muted">This action has no web address to open.</p>
          )}
        </Modal>
      )}
    </div>
  );
}

/** `/api/socialplatforms`, loaded once when some handle needs it; null until then (or when it fails). */
function useSocialPlatforms(needed: boolean): Record<string, SocialPlatform> | null {
  const [platforms, setPlatforms] = useState<Record<string, SocialPlatform> | null>(null);
  useEffect(() => {
    if (!needed) return;
    let live = true;
    api.socialPlatforms().then(
      (p) => live && setPlatforms(p && typeof p === 'object' ? p : {}),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [needed]);
  return platforms;
}

/** A server path is fetched from this page's origin; other URLs are used as they are. */
const imageSrc = (url: string) => (url.startsWith('/') && !url.startsWith('//') ? apiUrl(url) : url);

/** Social links with the handle's icon, or the icon `/api/socialplatforms` gives its platform, or a generic link icon. */
function SocialLinks({ handles }: { handles: SocialHandle[] }) {
  const platforms = useSocialPlatforms(handles.length > 0);
  if (!handles.length) return null;
  return (
    <ul class="social" id="social-handles">
      {handles.map((s, i) => {
        const icon = socialIcon(s, platforms);
        const name = findPlatform(s.platform, platforms)?.name || s.platform;
        return (
          <li key={i}>
            <ExternalLink href={s.url} rel="noopener noreferrer me" title={name} data-platform={s.platform}>
              {icon ? <img src={imageSrc(icon)} alt="" width={18} height={18} /> : <Icon name="link" />}
              {name}
            </ExternalLink>
          </li>
        );
      })}
    </ul>
  );
}

/** About the stream: summary, tags, social handles and the admin's extra page content (rendered HTML). */
export function About({ config }: { config: PublicConfig }) {
  const tags = config.tags ?? [];
  const social = config.socialHandles ?? [];
  return (
    <>
      <section class="card" id="about">
        {config.summary && (
          <p id="server-summary" class="summary">
            {config.summary}
          </p>
        )}
        {tags.length > 0 && (
          <ul class="tags" id="server-tags">
            {tags.map((t) => (
              <li key={t}>#{t}</li>
            ))}
          </ul>
        )}
        <SocialLinks handles={social} />
      </section>
      {config.extraPageContent && (
        <section class="card html-content" id="extra-page-content" dangerouslySetInnerHTML={{ __html: config.extraPageContent }} />
      )}
    </>
  );
}
