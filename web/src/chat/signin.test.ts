import { describe, expect, it } from 'vitest';
import { ApiError } from '../api';
import { fediverseErrorMessage, parseFediverseAccount, parseSignInCode, signInOutcome } from './SignIn';

describe('signInOutcome', () => {
  it('reads the callback outcome from the page URL', () => {
    expect(signInOutcome('')).toBeNull();
    expect(signInOutcome('?foo=1')).toBeNull();
    expect(signInOutcome('?indieauth=signedin')).toEqual({ ok: true, message: 'You are signed in.' });
    expect(signInOutcome('?indieauthError=invalid_me')?.message).toMatch(/different address/);
    expect(signInOutcome('?indieauthError=access_denied')).toEqual({
      ok: false,
      message: 'Sign-in failed: The sign-in was not approved on your website.',
    });
  });

  it('never shows text from the URL itself', () => {
    const out = signInOutcome('?indieauthError=%3Cb%3Evisit%20evil.example%3C%2Fb%3E');
    expect(out?.ok).toBe(false);
    expect(out?.message).not.toMatch(/evil/);
  });
});

describe('parseFediverseAccount', () => {
  it('accepts user@host, @user@host and a profile URL', () => {
    expect(parseFediverseAccount('alice@mastodon.social')).toEqual({ account: 'alice@mastodon.social' });
    expect(parseFediverseAccount('  @alice@mastodon.social ')).toEqual({ account: 'alice@mastodon.social' });
    expect(parseFediverseAccount('bob@127.0.0.1:8080')).toEqual({ account: 'bob@127.0.0.1:8080' });
    expect(parseFediverseAccount('https://mastodon.social/@alice')).toEqual({ account: 'alice@mastodon.social' });
    expect(parseFediverseAccount('https://mastodon.social/@alice/')).toEqual({ account: 'alice@mastodon.social' });
  });

  it('explains what is wrong otherwise', () => {
    for (const bad of ['', '   ', 'alice', '@alice', 'alice@', '@host', 'a@b@c', 'alice@host/path', 'al ice@host']) {
      const out = parseFediverseAccount(bad);
      expect('error' in out, bad).toBe(true);
    }
    expect(parseFediverseAccount('')).toEqual({ error: expect.stringMatching(/Enter your Fediverse account/) });
    expect(parseFediverseAccount('alice')).toEqual({ error: expect.stringMatching(/user@host/) });
  });
});

describe('parseSignInCode', () => {
  it('takes ten letters and digits, ignoring spaces, dashes and case', () => {
    expect(parseSignInCode('ABCDE-12345')).toEqual({ code: 'ABCDE12345' });
    expect(parseSignInCode(' abcde 12345 ')).toEqual({ code: 'ABCDE12345' });
    expect(parseSignInCode('0123456789')).toEqual({ code: '0123456789' });
  });

  it('refuses anything else', () => {
    expect(parseSignInCode('')).toEqual({ error: expect.stringMatching(/Enter the code/) });
    for (const bad of ['123456', 'ABCDE-1234', 'ABCDE-123456', 'ABCDE_12345', 'ÄBCDE-12345']) {
      expect(parseSignInCode(bad), bad).toEqual({ error: expect.stringMatching(/ten characters/) });
    }
  });
});

describe('fediverseErrorMessage', () => {
  it("shows the server's message", () => {
    expect(fediverseErrorMessage('send', new ApiError('nobody@example.com has no ActivityPub actor', 400))).toBe(
      'Could not send the code: nobody@example.com has no ActivityPub actor',
    );
    expect(fediverseErrorMessage('verify', new ApiError('the code has expired', 403))).toBe(
      'Could not sign in: the code has expired. Check the code, or send a new one.',
    );
  });

  it('explains statuses whose message says little', () => {
    expect(fediverseErrorMessage('send', new ApiError('federation is not enabled', 405))).toMatch(/not enabled on this server/);
    expect(fediverseErrorMessage('verify', new ApiError('unauthorized', 401))).toMatch(/session has expired.*Reload/);
    expect(fediverseErrorMessage('verify', new ApiError('Forbidden', 403))).toMatch(/the code is not valid/);
    expect(fediverseErrorMessage('send', new ApiError('internal error', 500))).toMatch(/server had a problem/);
  });

  it('handles network failures', () => {
    expect(fediverseErrorMessage('send', new TypeError('Failed to fetch'))).toBe('Could not send the code: Failed to fetch');
  });
});
