import { describe, expect, it } from 'vitest';
import type { VNode } from 'preact';
import { httpUrl } from './safeUrl';
import { ExternalLink } from '../components/ExternalLink';
import { ChatMessageView } from '../chat/ChatMessageView';

const BASE = 'https://castd.example/';

describe('httpUrl', () => {
  it('keeps http and https URLs, in their parsed form', () => {
    expect(httpUrl('https://mastodon.example/@alice', BASE)).toBe('https://mastodon.example/@alice');
    expect(httpUrl('http://other.example:8080/users/bob?x=1#y', BASE)).toBe('http://other.example:8080/users/bob?x=1#y');
    expect(httpUrl('  HTTPS://Example.COM/a  ', BASE)).toBe('https://example.com/a');
  });

  it('resolves relative URLs against the page', () => {
    expect(httpUrl('/clips/abc', BASE)).toBe('https://castd.example/clips/abc');
    expect(httpUrl('//cdn.example/x', BASE)).toBe('https://cdn.example/x');
  });

  it('refuses every other scheme, however it is written', () => {
    for (const bad of [
      'javascript:alert(1)',
      'JavaScript:alert(document.domain)',
      ' javascript:alert(1)',
      'java\tscript:alert(1)',
      'java\nscript:alert(1)',
      '\u0001javascript:alert(1)',
      'jav&#x09;ascript:alert(1)'.replace('&#x09;', '\t'),
      'data:text/html,<script>alert(1)</script>',
      'vbscript:msgbox(1)',
      'blob:https://castd.example/uuid',
      'file:///etc/passwd',
      'mailto:a@example.com',
      'ftp://example.com/',
    ]) {
      expect(httpUrl(bad, BASE), JSON.stringify(bad)).toBeNull();
    }
  });

  it('refuses what is not a URL or not a string', () => {
    for (const bad of ['', '   ', 'http://', 'https://exa mple.com', null, undefined, 42, {}, ['https://a.example/']]) {
      expect(httpUrl(bad, BASE), JSON.stringify(bad)).toBeNull();
    }
  });
});

/** The `<a>` elements of a rendered tree: function components without hooks are expanded by calling them. */
function links(node: unknown): Array<Record<string, unknown>> {
  if (Array.isArray(node)) return node.flatMap(links);
  if (!node || typeof node !== 'object' || !('type' in node)) return [];
  const v = node as VNode<Record<string, unknown>>;
  if (typeof v.type === 'function') return links((v.type as (p: unknown) => unknown)(v.props));
  const own = v.type === 'a' ? [v.props] : [];
  return [...own, ...links(v.props.children)];
}

describe('ExternalLink', () => {
  it('links an http(s) URL in a new tab', () => {
    const [a] = links(ExternalLink({ href: 'https://mastodon.example/@alice', children: 'alice' }));
    expect(a.href).toBe('https://mastodon.example/@alice');
    expect(a.target).toBe('_blank');
    expect(a.rel).toBe('noopener noreferrer');
  });

  it('renders anything else as text, without a link', () => {
    for (const href of ['javascript:alert(1)', 'data:text/html,x', undefined]) {
      const out = ExternalLink({ href, children: 'alice' }) as VNode<{ children: unknown }>;
      expect(links(out)).toEqual([]);
      expect(out.type).toBe('span');
      expect(out.props.children).toBe('alice');
    }
  });
});

describe('ChatMessageView', () => {
  const engagement = (link: string) =>
    ChatMessageView({ item: { id: 'e1', type: 'FEDIVERSE_ENGAGEMENT_LIKE', title: 'alice@mastodon.example', body: '<p>liked</p>', link }, canModerate: false });

  it("links a Fediverse engagement's http(s) link", () => {
    expect(links(engagement('https://mastodon.example/@alice/1')).map((a) => a.href)).toEqual(['https://mastodon.example/@alice/1']);
  });

  it('shows no link for any other scheme', () => {
    for (const bad of ['javascript:alert(document.domain)', 'data:text/html,<script>alert(1)</script>', 'java\tscript:alert(1)']) {
      expect(links(engagement(bad)), bad).toEqual([]);
    }
  });
});
