/**
 * Small inline SVG icons. Icons are drawn here instead of taken from font glyphs (emoji, dingbats), which render as
 * empty boxes where the viewer's system has no font for them. They take the current text colour and are 1em tall.
 */
import type { JSX } from 'preact';

const PATHS = {
  /** Viewers. */
  eye: (
    <>
      <path d="M1.5 12C4 7.5 7.8 5 12 5s8 2.5 10.5 7c-2.5 4.5-6.3 7-10.5 7S4 16.5 1.5 12z" />
      <circle cx="12" cy="12" r="3" />
    </>
  ),
  /** Emoji picker. */
  smile: (
    <>
      <circle cx="12" cy="12" r="9.5" />
      <path d="M8 14.5c1 1.3 2.4 2 4 2s3-.7 4-2M9 9.5v.5M15 9.5v.5" />
    </>
  ),
  /** Notifications. */
  bell: <path d="M6 16.5V11a6 6 0 0 1 12 0v5.5l1.5 2h-15zM10 20.5a2 2 0 0 0 4 0" />,
  /** Warnings. */
  warning: <path d="M12 3.5 2.5 20h19zM12 10v4.5M12 17.5v.01" />,
  play: <path d="M7 4.5v15l12.5-7.5z" fill="currentColor" />,
  close: <path d="M6 6l12 12M18 6 6 18" />,
  arrowDown: <path d="M12 5v14M6 13l6 6 6-6" />,
  menu: <path d="M4 7h16M4 12h16M4 17h16" />,
  /** A link (social handle without a known platform icon). */
  link: <path d="M10 14a4 4 0 0 0 5.7 0l3-3a4 4 0 0 0-5.7-5.7l-1 1M14 10a4 4 0 0 0-5.7 0l-3 3a4 4 0 0 0 5.7 5.7l1-1" />,
} satisfies Record<string, JSX.Element>;

export type IconName = keyof typeof PATHS;

/** An icon; decorative (hidden from assistive technology) unless `label` is given. */
export function Icon({ name, label, class: cls }: { name: IconName; label?: string; class?: string }) {
  return (
    <svg
      class={`icon-svg${cls ? ` ${cls}` : ''}`}
      data-icon={name}
      viewBox="0 0 24 24"
      width="1em"
      height="1em"
      fill="none"
      stroke="currentColor"
      stroke-width="2"
      stroke-linecap="round"
      stroke-linejoin="round"
      role={label ? 'img' : undefined}
      aria-label={label}
      aria-hidden={label ? undefined : 'true'}
      focusable="false"
    >
      {label && <title>{label}</title>}
      {PATHS[name]}
    </svg>
  );
}
