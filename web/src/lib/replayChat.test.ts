import { describe, expect, it } from 'vitest';
import type { ReplayChatMessage } from '../api';
import { AHEAD, BEHIND, merged, nextWindow, shownAt } from './replayChat';

const msg = (id: string, offset: number): ReplayChatMessage => ({
  id,
  offset,
  body: id,
  type: 'CHAT',
  timestamp: new Date(offset * 1000).toISOString(),
});

describe('shownAt', () => {
  const all = [msg('a', 1), msg('b', 5), msg('c', 9)];
  it('shows what the playhead has passed, oldest first', () => {
    expect(shownAt(all, 0).map((m) => m.id)).toEqual([]);
    expect(shownAt(all, 5).map((m) => m.id)).toEqual(['a', 'b']);
    expect(shownAt(all, 100).map((m) => m.id)).toEqual(['a', 'b', 'c']);
  });
  it('keeps the newest max', () => {
    expect(shownAt(all, 100, 2).map((m) => m.id)).toEqual(['b', 'c']);
  });
});

describe('merged', () => {
  it('adds new ids in offset order and drops repeats', () => {
    const got = merged([msg('a', 1), msg('c', 9)], [msg('c', 9), msg('b', 5)]);
    expect(got.map((m) => m.id)).toEqual(['a', 'b', 'c']);
  });
});

describe('nextWindow', () => {
  it('loads around the playhead at first and after a seek out of what is loaded', () => {
    expect(nextWindow(10, null)).toEqual({ from: 0, to: 10 + AHEAD, reset: true });
    expect(nextWindow(500, { from: 0, to: 70 })).toEqual({ from: 500 - BEHIND, to: 500 + AHEAD, reset: true });
    expect(nextWindow(5, { from: 100, to: 200 })).toEqual({ from: 0, to: 5 + AHEAD, reset: true });
  });
  it('fetches the next window ahead while playing, nothing while enough is loaded', () => {
    expect(nextWindow(10, { from: 0, to: 70 })).toBeNull();
    expect(nextWindow(50, { from: 0, to: 70 })).toEqual({ from: 70, to: 70 + AHEAD, reset: false });
  });
});
