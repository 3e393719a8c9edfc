import type { ComponentChildren, CSSProperties } from 'preact';
import { httpUrl } from '../lib/safeUrl';

interface Props {
  href: unknown;
  class?: string;
  title?: string;
  rel?: string;
  style?: CSSProperties;
  children?: ComponentChildren;
  [data: `data-${string}`]: string | undefined;
}

/**
 * A link to another site that opens in a new tab, only when `href` is an http(s) URL (`httpUrl`); anything else
 * renders its children as plain text, without a link.
 */
export function ExternalLink({ href, children, rel, ...rest }: Props) {
  const url = httpUrl(href);
  if (!url) return <span class="not-a-link">{children}</span>;
  return (
    <a {...rest} href={url} target="_blank" rel={rel ?? 'noopener noreferrer'}>
      {children}
    </a>
  );
}
