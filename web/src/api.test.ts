import { afterEach, describe, expect, it, vi } from 'vitest';
import { admin, api, apiUrl, chatSocketUrl, pageOrigin } from './api';

const hasUserinfo = (url: string) => {
  const u = new URL(url);
  return url.includes('@') || u.username !== '' || u.password !== '';
};

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('apiUrl', () => {
  it('joins the origin and the path', () => {
    expect(apiUrl('/api/admin/status', 'http://host:8080')).toBe('http://host:8080/api/admin/status');
    expect(apiUrl('api/status', 'https://live.example')).toBe('https://live.example/api/status');
    expect(apiUrl('/api/chat?accessToken=a%20b', 'http://[::1]:8080')).toBe('http://[::1]:8080/api/chat?accessToken=a%20b');
  });

  it('never carries user:password, even from an origin that has them', () => {
    for (const origin of ['http://admin:password@host:8080', 'https://admin@host', 'http://a%40b:p%3Aw@host/']) {
      const url = apiUrl('/api/admin/status', origin);
      expect(hasUserinfo(url)).toBe(false);
      expect(new URL(url).host).toBe(new URL(origin).host);
    }
  });

  it('stays on this server for paths that look protocol-relative', () => {
    expect(apiUrl('//evil.example/x', 'http://host')).toBe('http://host/evil.example/x');
  });

  it('is the bare path without an origin', () => {
    expect(pageOrigin()).toBe('');
    expect(apiUrl('/api/status')).toBe('/api/status');
    expect(apiUrl('/api/status', 'null')).toBe('/api/status');
  });

  it('uses location.origin of a page opened with credentials, so fetch accepts the URL', async () => {
    // The admin opened as http://admin:password@host:8080/admin/: the document URL has the credentials ...
    const page = new URL('http://admin:password@host:8080/admin/health');
    vi.stubGlobal('location', page);
    // ... and a path resolved against it keeps them, which fetch refuses.
    expect(() => new Request(new URL('/api/admin/status', page.href))).toThrow(TypeError);

    expect(pageOrigin()).toBe('http://host:8080');
    const fetched: string[] = [];
    vi.stubGlobal('fetch', async (input: RequestInfo | URL) => {
      const url = String(input);
      fetched.push(url);
      new Request(url); // throws for a URL with credentials
      return new Response('{"online":false}', { status: 200 });
    });
    await admin.status();
    await admin.get('logs', { since: 'x' });
    await api.ping();
    expect(fetched).toEqual(['http://host:8080/api/admin/status', 'http://host:8080/api/admin/logs?since=x', 'http://host:8080/api/ping']);
    for (const url of fetched) expect(hasUserinfo(url)).toBe(false);
  });
});

describe('chatSocketUrl', () => {
  it('goes to this page’s origin', () => {
    expect(chatSocketUrl('', 'a b', 'http://box:8080')).toBe('ws://box:8080/ws?accessToken=a%20b');
    expect(chatSocketUrl(undefined, 't', 'https://x')).toBe('wss://x/ws?accessToken=t');
    expect(chatSocketUrl(undefined, 't', 'http://admin:password@box:8080')).toBe('ws://box:8080/ws?accessToken=t');
  });
  it('follows the socket host override', () => {
    expect(chatSocketUrl('https://chat.example/', 't', 'http://x')).toBe('wss://chat.example/ws?accessToken=t');
    expect(chatSocketUrl('chat.example', 't', 'https://x')).toBe('wss://chat.example/ws?accessToken=t');
    expect(chatSocketUrl('chat.example', 't', 'http://x')).toBe('ws://chat.example/ws?accessToken=t');
    expect(chatSocketUrl('wss://u:p@chat.example', 't', 'http://x')).toBe('wss://chat.example/ws?accessToken=t');
  });
});

describe('Fediverse sign-in helpers', () => {
  it('post the account and the code with the chat token, and surface {success:false,message}', async () => {
    const calls: { url: string; body: unknown }[] = [];
    const answers = [
      new Response('{"success":true,"message":"a code was sent to alice@example.com"}', { status: 200 }),
      new Response('{"success":false,"message":"the code is not valid"}', { status: 403 }),
    ];
    vi.stubGlobal('fetch', async (input: RequestInfo | URL, init?: RequestInit) => {
      calls.push({ url: String(input), body: JSON.parse(String(init?.body)) });
      return answers.shift()!;
    });
    expect(await api.fediverseSignInStart('t o', 'alice@example.com')).toEqual({
      success: true,
      message: 'a code was sent to alice@example.com',
    });
    await expect(api.fediverseSignInVerify('t o', '123456')).rejects.toMatchObject({ status: 403, message: 'the code is not valid' });
    expect(calls).toEqual([
      { url: '/api/auth/fediverse?accessToken=t%20o', body: { account: 'alice@example.com' } },
      { url: '/api/auth/fediverse/verify?accessToken=t%20o', body: { code: '123456' } },
    ]);
  });
});

describe('private channels', () => {
  it('a 401 from a viewer call signals the page; admin and viewer-access calls do not', async () => {
    const { onUnauthorized } = await import('./lib/access');
    const { viewer } = await import('./api');
    vi.stubGlobal('location', { origin: 'http://host:8080', protocol: 'http:' });
    vi.stubGlobal('fetch', async () => new Response(JSON.stringify({ success: false, message: 'no pass' }), { status: 401 }));
    let signals = 0;
    const off = onUnauthorized(() => signals++);
    await expect(api.status()).rejects.toThrow('no pass');
    expect(signals).toBe(1);
    await expect(admin.status()).rejects.toThrow();
    await expect(viewer.access()).rejects.toThrow();
    expect(signals).toBe(1);
    off();
  });
  it("an unlock answers the server's message and status, or the pass", async () => {
    const { viewer } = await import('./api');
    vi.stubGlobal('location', { origin: 'http://host:8080', protocol: 'http:' });
    const bodies: unknown[] = [];
    let status = 429;
    vi.stubGlobal('fetch', async (_input: RequestInfo | URL, init?: RequestInit) => {
      bodies.push(JSON.parse(String(init?.body)));
      if (status === 200) return new Response(JSON.stringify({ pass: 'cp1.a.b', expiresAt: '2030-01-01T00:00:00Z' }), { status });
      return new Response(JSON.stringify({ success: false, message: 'slow down' }), { status, statusText: 'Too Many Requests' });
    });
    expect(await viewer.unlock('pw')).toEqual({ ok: false, status: 429, message: 'slow down' });
    status = 200;
    expect(await viewer.invite('inv')).toEqual({ ok: true, answer: { pass: 'cp1.a.b', expiresAt: '2030-01-01T00:00:00Z' } });
    expect(bodies).toEqual([{ password: 'pw' }, { invite: 'inv' }]);
  });
});
