import { afterEach, describe, expect, it, vi } from 'vitest';
import { admin, api, apiUrl, channels, chatSocketUrl, rootUrl, serverAdmin } from '../api';
import { basePath, readBase, rebaseEmoji, resetBase, withBase } from './base';

/** A document whose `<meta name="castd-base">` says `content` (none when undefined). */
const docWith = (content?: string) => ({
  querySelector: (sel: string) =>
    content !== undefined && sel === 'meta[name="castd-base"]' ? ({ getAttribute: (n: string) => (n === 'content' ? content : null) } as unknown as Element) : null,
});

afterEach(() => {
  vi.unstubAllGlobals();
  resetBase();
});

describe('readBase', () => {
  it('reads the channel base path from the meta', () => {
    expect(readBase(docWith('/c/music') as Document)).toBe('/c/music');
    expect(readBase(docWith(' /c/music/ ') as Document)).toBe('/c/music');
  });

  it('is empty without the meta (the default channel) or outside a browser', () => {
    expect(readBase(docWith() as Document)).toBe('');
    expect(readBase(undefined)).toBe('');
    expect(basePath()).toBe('');
  });

  it('ignores a meta that is not a plain path', () => {
    for (const bad of ['c/music', '//evil.example', 'https://evil.example/c/a', '/c/a b', '/c/"x', '/', '']) {
      expect(readBase(docWith(bad) as Document)).toBe('');
    }
  });

  it('is read once', () => {
    let content = '/c/one';
    vi.stubGlobal('document', { querySelector: (sel: string) => docWith(content).querySelector(sel) });
    expect(basePath()).toBe('/c/one');
    content = '/c/two';
    expect(basePath()).toBe('/c/one');
    resetBase();
    expect(basePath()).toBe('/c/two');
  });
});

describe('withBase', () => {
  it('puts the base in front of a server path', () => {
    expect(withBase('/api/status', '/c/music')).toBe('/c/music/api/status');
    expect(withBase('/hls/stream.m3u8', '/c/music')).toBe('/c/music/hls/stream.m3u8');
    expect(withBase('/replay/abc', '/c/music')).toBe('/c/music/replay/abc');
    expect(withBase('/', '/c/music')).toBe('/c/music/');
  });

  it('leaves the path alone on the default channel', () => {
    expect(withBase('/api/status', '')).toBe('/api/status');
    expect(withBase('/api/status')).toBe('/api/status');
  });

  it('does not prefix twice, nor full or relative URLs', () => {
    expect(withBase('/c/music/whep/1', '/c/music')).toBe('/c/music/whep/1');
    expect(withBase('/c/music', '/c/music')).toBe('/c/music');
    expect(withBase('/c/musical/x', '/c/music')).toBe('/c/music/c/musical/x');
    expect(withBase('https://cdn.example/x.jpg', '/c/music')).toBe('https://cdn.example/x.jpg');
    expect(withBase('//cdn.example/x.jpg', '/c/music')).toBe('//cdn.example/x.jpg');
    expect(withBase('x.jpg', '/c/music')).toBe('x.jpg');
  });
});

describe('URLs of a channel page', () => {
  it('apiUrl goes under the base; rootUrl stays at the root', () => {
    expect(apiUrl('/api/status', 'http://host:8080', '/c/music')).toBe('http://host:8080/c/music/api/status');
    expect(apiUrl('//evil.example/x', 'http://host', '/c/music')).toBe('http://host/c/music/evil.example/x');
    expect(apiUrl('/api/status', '', '/c/music')).toBe('/c/music/api/status');
    expect(rootUrl('/api/channels', 'http://admin:pw@host:8080')).toBe('http://host:8080/api/channels');
  });

  it('the chat socket is the channel’s, with or without a host override', () => {
    expect(chatSocketUrl(undefined, 't', 'http://host:8080', '/c/music')).toBe('ws://host:8080/c/music/ws?accessToken=t');
    expect(chatSocketUrl('wss://chat.example.com/', 't', 'https://host', '/c/music')).toBe('wss://chat.example.com/c/music/ws?accessToken=t');
    expect(chatSocketUrl(undefined, 't', 'http://host:8080', '')).toBe('ws://host:8080/ws?accessToken=t');
  });

  it('custom emoji in chat bodies are the channel’s', () => {
    const body = '<p>hi <img src="/img/emoji/party.gif" alt=":party:" title=":party:" class="emoji"></p>';
    expect(rebaseEmoji(body, '/c/music')).toBe('<p>hi <img src="/c/music/img/emoji/party.gif" alt=":party:" title=":party:" class="emoji"></p>');
    expect(rebaseEmoji(body, '')).toBe(body);
    expect(rebaseEmoji('<p>src="/img/emoji/x.png"</p>', '/c/music')).toBe('<p>src="/img/emoji/x.png"</p>');
  });

  it('every call of the page carries the base, the server-wide ones none', async () => {
    vi.stubGlobal('document', docWith('/c/music'));
    vi.stubGlobal('location', new URL('http://host:8080/c/music/admin/'));
    const fetched: string[] = [];
    vi.stubGlobal('fetch', async (input: RequestInfo | URL) => {
      fetched.push(String(input));
      return new Response('[]', { status: 200 });
    });
    await api.status();
    await admin.status();
    await admin.setConfig('name', 'x');
    await api.chatHistory('tok');
    await channels.list();
    await serverAdmin.channels();
    await serverAdmin.createChannel({ slug: 'a', name: 'A', adminPassword: 'pw' });
    expect(fetched).toEqual([
      'http://host:8080/c/music/api/status',
      'http://host:8080/c/music/api/admin/status',
      'http://host:8080/c/music/api/admin/config/name',
      'http://host:8080/c/music/api/chat?accessToken=tok',
      'http://host:8080/api/channels',
      'http://host:8080/api/admin/channels',
      'http://host:8080/api/admin/channels/create',
    ]);
  });

  it('the default channel’s page calls the root, as before', async () => {
    vi.stubGlobal('document', docWith());
    vi.stubGlobal('location', new URL('http://host:8080/'));
    const fetched: string[] = [];
    vi.stubGlobal('fetch', async (input: RequestInfo | URL) => {
      fetched.push(String(input));
      return new Response('{}', { status: 200 });
    });
    await api.status();
    await admin.status();
    expect(fetched).toEqual(['http://host:8080/api/status', 'http://host:8080/api/admin/status']);
  });
});
