import { describe, expect, it } from 'vitest';
import { findPlatform, iconForSave, socialIcon } from './social';

const platforms = {
  github: { name: 'GitHub', icon: '/img/platformlogos/github.svg' },
  kofi: { name: 'Ko-Fi', icon: '/img/platformlogos/kofi.svg' },
};

describe('social icons', () => {
  it('finds platforms by key or name', () => {
    expect(findPlatform('github', platforms)?.name).toBe('GitHub');
    expect(findPlatform(' GitHub ', platforms)?.name).toBe('GitHub');
    expect(findPlatform('ko-fi', platforms)?.name).toBe('Ko-Fi');
    expect(findPlatform('myspace', platforms)).toBeUndefined();
    expect(findPlatform('github', null)).toBeUndefined();
  });
  it('prefers the handle’s own icon', () => {
    expect(socialIcon({ platform: 'github', icon: 'https://x/y.png' }, platforms)).toBe('https://x/y.png');
    expect(socialIcon({ platform: 'github', icon: '' }, platforms)).toBe('/img/platformlogos/github.svg');
    expect(socialIcon({ platform: 'GitHub' }, platforms)).toBe('/img/platformlogos/github.svg');
    expect(socialIcon({ platform: 'blog' }, platforms)).toBeNull();
    expect(socialIcon({ platform: 'github' }, null)).toBeNull();
  });
  it('picks the icon to save', () => {
    expect(iconForSave({ platform: 'github' }, platforms)).toBe('/img/platformlogos/github.svg');
    // the platform changed: the old platform icon follows it
    expect(iconForSave({ platform: 'kofi', icon: '/img/platformlogos/github.svg' }, platforms)).toBe('/img/platformlogos/kofi.svg');
    expect(iconForSave({ platform: 'blog', icon: '/img/platformlogos/github.svg' }, platforms)).toBe('');
    expect(iconForSave({ platform: 'github', icon: 'https://x/custom.png' }, platforms)).toBe('https://x/custom.png');
    // without the list nothing is changed
    expect(iconForSave({ platform: 'github', icon: '/img/platformlogos/github.svg' }, null)).toBe('/img/platformlogos/github.svg');
  });
});
