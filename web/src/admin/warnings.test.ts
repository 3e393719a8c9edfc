import { describe, expect, it } from 'vitest';
import { warningsOf } from './Warnings';

describe('status warnings', () => {
  it('treats a missing or malformed field as no warnings', () => {
    expect(warningsOf(null)).toEqual([]);
    expect(warningsOf({})).toEqual([]);
    expect(warningsOf({ warnings: 'one' })).toEqual([]);
    expect(warningsOf({ warnings: null })).toEqual([]);
  });
  it('keeps the non-empty strings', () => {
    expect(warningsOf({ warnings: ['The admin password is short.', '', 3, ' '] })).toEqual(['The admin password is short.']);
  });
});
