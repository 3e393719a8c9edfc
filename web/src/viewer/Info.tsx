import { useState } from 'preact/hooks';
import type { ExternalAction, PublicConfig } from '../api';
import { Modal } from '../components/Modal';

/** External action buttons: open in a modal (iframe of `url`, or the action's `html`), or a new tab when `openExternally`. */
export function ExternalActions({ actions }: { actions: ExternalAction[] }) {
  const [open, setOpen] = useState<ExternalAction | null>(null);
  if (!actions.length) return null;
  return (
    <div class="external-actions" data-testid="external-actions">
      {actions.map((a, i) =>
        a.openExternally ? (
          <a key={i} class="button" href={a.url} target="_blank" rel="noopener noreferrer" title={a.description} style={a.color ? { background: a.color } : undefined}>
            {a.icon && <img src={a.icon} alt="" />}
            {a.title}
          </a>
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
          ) : (
            <iframe src={open.url} title={open.title} allow="clipboard-write; payment" referrerpolicy="no-referrer" />
          )}
        </Modal>
      )}
    </div>
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
        {social.length > 0 && (
          <ul class="social" id="social-handles">
            {social.map((s, i) => (
              <li key={i}>
                <a href={s.url} target="_blank" rel="noopener noreferrer me" title={s.platform}>
                  {s.icon && <img src={s.icon} alt="" />}
                  {s.platform}
                </a>
              </li>
            ))}
          </ul>
        )}
      </section>
      {config.extraPageContent && (
        <section class="card html-content" id="extra-page-content" dangerouslySetInnerHTML={{ __html: config.extraPageContent }} />
      )}
    </>
  );
}
