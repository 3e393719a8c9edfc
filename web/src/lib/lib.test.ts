import { describe, expect, it } from 'vitest';
import { splitFrame } from './frame';
import { buildCmcdReport, videoState } from './cmcd';
import { backoffDelay } from './backoff';
import { choosePlaybackEngine, cssVarName, isLowLatency, withQuery } from './urls';
import { applyEvent, emptyChat, isModerator, mergeHistory } from './chatState';
import { urlBase64ToUint8Array } from './push';
import { formatBitrate, formatMiB, parseList } from './format';

describe('splitFrame', () => {
  it('splits newline-separated events and skips junk', () => {
    const frame = '{"type":"CHAT","id":"a","body":"<p>hi</p>"}\n\n{"type":"SYSTEM","id":"b"}\nnot json\n[1,2]\n{"no":"type"}\r\n';
    const events = splitFrame(frame);
    expect(events.map((e) => e.type)).toEqual(['CHAT', 'SYSTEM']);
    expect(events[0].body).toBe('<p>hi</p>');
  });
  it('handles a single event and an empty frame', () => {
    expect(splitFrame('{"type":"PING"}')).toHaveLength(1);
    expect(splitFrame('')).toEqual([]);
  });
});

describe('buildCmcdReport', () => {
  it('builds a report with the standard keys and units', () => {
    const r = buildCmcdReport('sess', 3, { state: 'p', throughputBps: 5_432_100, latencySeconds: 7.25, starved: true }, 1700000000000.4);
    expect(r).toEqual({ v: 2, sid: 'sess', sta: 'p', ts: 1700000000000, sn: 3, mtp: 5400, ltc: 7250, bs: true });
  });
  it('omits unknown measurements and bs=false', () => {
    const r = buildCmcdReport('s', 0, { state: 's', throughputBps: NaN, starved: false }, 1);
    expect(r).toEqual({ v: 2, sid: 's', sta: 's', ts: 1, sn: 0 });
  });
  it('maps element state to sta tokens', () => {
    const base = { ended: false, paused: false, seeking: false, readyState: 4, error: null, currentTime: 10 };
    expect(videoState(base)).toBe('p');
    expect(videoState({ ...base, paused: true })).toBe('a');
    expect(videoState({ ...base, paused: true, currentTime: 0 })).toBe('s');
    expect(videoState({ ...base, readyState: 2 })).toBe('r');
    expect(videoState({ ...base, seeking: true })).toBe('k');
    expect(videoState({ ...base, ended: true })).toBe('e');
    expect(videoState({ ...base, error: {} })).toBe('f');
  });
});

describe('backoffDelay', () => {
  it('grows exponentially and is capped', () => {
    const mid = () => 0.5;
    expect(backoffDelay(0, 1000, 30000, mid)).toBe(1000);
    expect(backoffDelay(1, 1000, 30000, mid)).toBe(2000);
    expect(backoffDelay(3, 1000, 30000, mid)).toBe(8000);
    expect(backoffDelay(50, 1000, 30000, () => 1)).toBe(30000);
  });
});

describe('urls', () => {
  it('names CSS variables', () => {
    expect(cssVarName('theme-color-1')).toBe('--theme-color-1');
    expect(cssVarName('--x')).toBe('--x');
    expect(cssVarName('bad;name')).toBeNull();
  });
  it('adds query parameters', () => {
    expect(withQuery('/api/admin/users', { offset: 0, limit: 50, search: '', status: 'all' })).toBe('/api/admin/users?offset=0&limit=50&status=all');
  });
  it('prefers hls.js where MSE exists', () => {
    expect(choosePlaybackEngine(true, true)).toBe('hlsjs');
    expect(choosePlaybackEngine(true, false)).toBe('native');
    expect(choosePlaybackEngine(false, false)).toBe('none');
  });
  it('recognises low-latency playlists', () => {
    expect(isLowLatency({ partList: [{}], canBlockReload: true })).toBe(true);
    expect(isLowLatency({ partList: null, canBlockReload: true })).toBe(true);
    expect(isLowLatency({ partList: null, canBlockReload: false })).toBe(false);
    expect(isLowLatency({})).toBe(false);
  });
});

describe('chat model', () => {
  const user = {
    id: 'u1',
    displayName: 'Ann',
    displayColor: 2,
    createdAt: '2024-01-01T00:00:00Z',
    authenticated: false,
    isBot: false,
    isModerator: false,
    previousNames: [],
    scopes: [],
  };
  it('appends, de-duplicates and hides messages', () => {
    let m = emptyChat();
    m = applyEvent(m, { type: 'CHAT', id: 'm1', body: '<p>a</p>', user, timestamp: '2024-01-01T00:00:01Z' });
    m = applyEvent(m, { type: 'CHAT', id: 'm1', body: '<p>a</p>', user });
    m = applyEvent(m, { type: 'PONG' });
    expect(m.items).toHaveLength(1);
    m = applyEvent(m, { type: 'VISIBILITY-UPDATE', ids: ['m1'], visible: false });
    expect(m.items[0].hidden).toBe(true);
  });
  it('tracks the connected user and moderator scope', () => {
    let m = applyEvent(emptyChat(), { type: 'CONNECTED_USER_INFO', user: { ...user, scopes: ['MODERATOR'] } });
    expect(isModerator(m.me)).toBe(true);
    expect(isModerator({ ...user, isModerator: true })).toBe(true);
    expect(isModerator(user)).toBe(false);
    m = applyEvent(m, { type: 'NAME_CHANGE', id: 'n1', user: { ...user, displayName: 'Bea' }, oldName: 'Ann' });
    expect(m.me?.displayName).toBe('Bea');
    m = applyEvent(m, { type: 'ERROR_USER_DISABLED' });
    expect(m.disabled).toBe(true);
  });
  it('shows a cluster edge\'s "chat temporarily unavailable" error event as a line', () => {
    const body = 'Chat is temporarily unavailable; your message was not sent. Please try again.';
    const m = applyEvent(emptyChat(), { type: 'ERROR_CHAT_UNAVAILABLE', id: 'e1', timestamp: '2024-01-01T00:00:01Z', body });
    expect(m.items).toHaveLength(1);
    expect(m.items[0].type).toBe('ERROR_CHAT_UNAVAILABLE');
    expect(m.items[0].body).toBe(body);
  });
  it('merges history in timestamp order', () => {
    let m = applyEvent(emptyChat(), { type: 'CHAT', id: 'live', timestamp: '2024-01-01T00:00:05Z', user });
    m = mergeHistory(m, [
      { id: 'old', type: 'CHAT', timestamp: '2024-01-01T00:00:01Z', user, body: '', visible: true },
      { id: 'live', type: 'CHAT', timestamp: '2024-01-01T00:00:05Z', user, body: '', visible: true },
      { id: 'gone', type: 'CHAT', timestamp: '2024-01-01T00:00:02Z', user, body: '', visible: false, hiddenAt: '2024-01-01T00:00:03Z' },
    ]);
    expect(m.items.map((i) => i.id)).toEqual(['old', 'gone', 'live']);
    expect(m.items[1].hidden).toBe(true);
  });
});

describe('misc helpers', () => {
  it('decodes VAPID keys', () => {
    expect([...urlBase64ToUint8Array('AQID_-8')]).toEqual([1, 2, 3, 255, 239]);
  });
  it('formats', () => {
    expect(formatBitrate(1200)).toBe('1.2 Mbps');
    expect(formatBitrate(800)).toBe('800 kbps');
    expect(parseList('a, b,\n c,,')).toEqual(['a', 'b', 'c']);
    expect(formatMiB(143771)).toBe('140.4 GiB');
    expect(formatMiB(512)).toBe('512 MiB');
    expect(formatMiB(null)).toBe('–');
  });
});
