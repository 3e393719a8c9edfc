import { describe, expect, it } from 'vitest';
import { pageFromPath, pageHref } from './router';

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
