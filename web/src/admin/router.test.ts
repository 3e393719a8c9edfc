import { describe, expect, it } from 'vitest';
import { pageFromPath, pageHref, pagesFor } from './router';

describe('admin routing', () => {
  it('maps /admin/ paths to pages', () => {
    expect(pageFromPath('/admin/')).toBe('overview');
    expect(pageFromPath('/admin')).toBe('overview');
    expect(pageFromPath('/admin/health')).toBe('health');
    expect(pageFromPath('/admin/access-tokens')).toBe('access-tokens');
    expect(pageFromPath('/admin/logs')).toBe('logs');
    expect(pageFromPath('/admin/schedule')).toBe('schedule');
    expect(pageFromPath('/admin/stream-health')).toBe('health');
    expect(pageFromPath('/admin/hardware-info')).toBe('health');
    expect(pageFromPath('/admin/nope')).toBe('overview');
    expect(pageFromPath('/admin/', '#/video')).toBe('video');
  });
  it('builds hrefs', () => {
    expect(pageHref('overview')).toBe('/admin/');
    expect(pageHref('chat')).toBe('/admin/chat');
  });
});

describe('admin routing on a channel', () => {
  it('maps a channel admin path to its page', () => {
    expect(pageFromPath('/c/music/admin/', '', '/c/music')).toBe('overview');
    expect(pageFromPath('/c/music/admin/video', '', '/c/music')).toBe('video');
    expect(pageFromPath('/c/music/admin/stream-keys', '', '/c/music')).toBe('stream-keys');
  });
  it('has no server-wide pages on a channel', () => {
    for (const p of ['logs', 'server', 'channels', 'health', 'hardware-info']) {
      expect(pageFromPath(`/c/music/admin/${p}`, '', '/c/music')).toBe('overview');
    }
    expect(pagesFor('/c/music').map((p) => p.id)).not.toContain('server');
    expect(pagesFor('/c/music').map((p) => p.id)).toContain('video');
    expect(pagesFor('').map((p) => p.id)).toContain('channels');
    expect(pageFromPath('/admin/channels', '', '')).toBe('channels');
  });
  it('builds hrefs under the base', () => {
    expect(pageHref('overview', '/c/music')).toBe('/c/music/admin/');
    expect(pageHref('chat', '/c/music')).toBe('/c/music/admin/chat');
    expect(pageHref('chat', '')).toBe('/admin/chat');
  });
});
