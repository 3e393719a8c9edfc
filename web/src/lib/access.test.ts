import { describe, expect, it, vi } from 'vitest';
import {
  absoluteLink,
  failureText,
  formatSeconds,
  mustPrompt,
  needsPass,
  onUnauthorized,
  passMayHaveEnded,
  promptLead,
  promptOptions,
  reportUnauthorized,
  safeLoginUrl,
  urlCredential,
  usesText,
  withoutCredential,
} from './access';

describe('the prompt decision', () => {
  it('prompts on a locked password or token channel only', () => {
    expect(mustPrompt({ visibility: 'password', unlocked: false })).toBe(true);
    expect(mustPrompt({ visibility: 'token', unlocked: false })).toBe(true);
    expect(mustPrompt({ visibility: 'password', unlocked: true })).toBe(false);
    expect(mustPrompt({ visibility: 'public', unlocked: false })).toBe(false);
    expect(mustPrompt({ visibility: 'unlisted', unlocked: false })).toBe(false);
    expect(mustPrompt(null)).toBe(false);
    expect(needsPass('token')).toBe(true);
    expect(needsPass('unlisted')).toBe(false);
  });
  it('offers a password field when the channel has passwords, a Sign in link on token channels', () => {
    expect(promptOptions({ visibility: 'password', methods: ['password', 'invite'] })).toEqual({ password: true, signIn: null });
    expect(promptOptions({ visibility: 'token', methods: ['token', 'invite'], loginUrl: 'https://example.com/login' })).toEqual({
      password: false,
      signIn: 'https://example.com/login',
    });
    // A login URL on a password channel is not its way in.
    expect(promptOptions({ visibility: 'password', methods: ['password'], loginUrl: 'https://example.com/login' }).signIn).toBeNull();
    // A missing methods list offers nothing rather than throwing.
    expect(promptOptions({ visibility: 'password', methods: undefined as unknown as [] })).toEqual({ password: false, signIn: null });
    expect(promptLead({ visibility: 'password', methods: ['password'] })).toMatch(/password/);
    expect(promptLead({ visibility: 'token', methods: ['token'], loginUrl: '/login' })).toMatch(/Sign in/);
    expect(promptLead({ visibility: 'token', methods: ['invite'] })).toMatch(/invite/);
  });
  it('links only to http(s) or a path of this server', () => {
    expect(safeLoginUrl('javascript:alert(1)')).toBeNull();
    expect(safeLoginUrl('//evil.example/x')).toBeNull();
    expect(safeLoginUrl(' https://a.example/login ')).toBe('https://a.example/login');
    expect(safeLoginUrl('/login')).toBe('/login');
    expect(safeLoginUrl('')).toBeNull();
  });
});

describe('credentials in the URL', () => {
  it('finds ?invite= before ?jwt=', () => {
    expect(urlCredential('?invite=abc&jwt=x.y.z')).toEqual({ kind: 'invite', value: 'abc' });
    expect(urlCredential('?jwt=x.y.z')).toEqual({ kind: 'jwt', value: 'x.y.z' });
    expect(urlCredential('?invite=')).toBeNull();
    expect(urlCredential('')).toBeNull();
  });
  it('takes them out of an address, keeping the rest', () => {
    expect(withoutCredential('/c/music/?invite=abc')).toBe('/c/music/');
    expect(withoutCredential('/?jwt=a.b.c&x=1#chat')).toBe('/?x=1#chat');
    expect(withoutCredential('/?x=1&invite=q')).toBe('/?x=1');
    expect(withoutCredential('/plain#h')).toBe('/plain#h');
  });
});

describe('failure messages', () => {
  it("shows the server's message, or one for the status", () => {
    expect(failureText(401, 'wrong password')).toBe('wrong password');
    expect(failureText(403, 'Tickets are sold out')).toBe('Tickets are sold out');
    expect(failureText(401, '')).toBe('wrong password');
    expect(failureText(429, undefined)).toMatch(/Too many/);
    expect(failureText(0, '')).toMatch(/network error/);
  });
});

describe('the 401 signal', () => {
  it('tells every listener until it unsubscribes', () => {
    const a = vi.fn();
    const off = onUnauthorized(a);
    reportUnauthorized();
    off();
    reportUnauthorized();
    expect(a).toHaveBeenCalledTimes(1);
  });
  it('ignores admin and viewer-access calls', () => {
    expect(passMayHaveEnded('/api/status')).toBe(true);
    expect(passMayHaveEnded('/c/music/api/chat/register')).toBe(true);
    expect(passMayHaveEnded('/api/admin/status')).toBe(false);
    expect(passMayHaveEnded('/c/music/api/admin/serverconfig')).toBe(false);
    expect(passMayHaveEnded('/api/viewer/unlock')).toBe(false);
    expect(passMayHaveEnded('http://h:1/c/x/api/viewer/access')).toBe(false);
  });
});

describe('the admin page helpers', () => {
  it('formats durations and uses', () => {
    expect(formatSeconds(12 * 3600)).toBe('12 hours');
    expect(formatSeconds(86400 + 7200)).toBe('1 day 2 hours');
    expect(formatSeconds(90)).toBe('1 minute 30 seconds');
    expect(formatSeconds(0)).toBe('0 seconds');
    expect(usesText(3, 10)).toBe('3 / 10');
    expect(usesText(3, 0)).toBe('3 (no limit)');
  });
  it('makes an invite link absolute on this origin', () => {
    expect(absoluteLink('/c/music/?invite=x', 'http://h:8080')).toBe('http://h:8080/c/music/?invite=x');
    expect(absoluteLink('https://tv.example/?invite=x', 'http://h:8080')).toBe('https://tv.example/?invite=x');
    expect(absoluteLink('/?invite=x', '')).toBe('/?invite=x');
  });
});
