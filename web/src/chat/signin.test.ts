import { describe, expect, it } from 'vitest';
import { signInOutcome } from './SignIn';

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
