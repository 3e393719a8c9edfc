import { describe, expect, it } from 'vitest';

// The keys of SOCIAL_PLATFORMS in src/api/public.rs: /api/socialplatforms points each at /img/platformlogos/<key>.svg.
const KEYS = [
  'bandcamp', 'discord', 'facebook', 'github', 'gitlab', 'instagram', 'keyoxide', 'kofi', 'linkedin', 'mastodon',
  'patreon', 'paypal', 'snapchat', 'soundcloud', 'spotify', 'tiktok', 'twitch', 'twitter', 'youtube', 'matrix',
  'bluesky', 'donate', 'follow', 'rss',
];

const files = import.meta.glob<string>('../../public/img/platformlogos/*.svg', { query: '?raw', import: 'default', eager: true });
const byKey = Object.fromEntries(Object.entries(files).map(([path, svg]) => [path.replace(/^.*\/(.+)\.svg$/, '$1'), svg]));

describe('platform logos', () => {
  it('has an icon for every social platform key', () => {
    expect(Object.keys(byKey).sort()).toEqual([...KEYS].sort());
  });
  it.each(KEYS)('%s.svg is a self-contained single-colour SVG that needs no font', (key) => {
    const svg = byKey[key];
    expect(svg.trimStart().startsWith('<svg')).toBe(true); // the server sniffs the type from the first bytes
    expect(svg).toContain('xmlns="http://www.w3.org/2000/svg"');
    expect(svg).not.toMatch(/<text|<image|<script|href="http/i);
    const fills = new Set([...svg.matchAll(/fill="(#[0-9a-f]{3,6})"/gi)].map((m) => m[1].toLowerCase()));
    // one tile colour; black and white only inside the mask that cuts the glyph out
    expect([...fills].filter((c) => c !== '#000' && c !== '#fff')).toHaveLength(1);
  });
});
