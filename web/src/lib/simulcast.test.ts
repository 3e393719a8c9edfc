import { describe, expect, it } from 'vitest';
import { SIMULCAST_PRESETS, formatKbps, presetFor, stateBadge, validTargetUrl } from './simulcast';

describe('simulcast presets', () => {
  it('every preset but the placeholders is a valid target URL', () => {
    for (const p of SIMULCAST_PRESETS.filter((p) => p.id !== 'custom')) expect(validTargetUrl(p.url), p.id).toBe(true);
  });
  it('finds the preset of a URL by its host', () => {
    expect(presetFor('rtmps://a.rtmps.youtube.com:443/live2').id).toBe('youtube');
    expect(presetFor('rtmp://live.twitch.tv/app').id).toBe('twitch');
    expect(presetFor('rtmp://my.server:1935/live').id).toBe('custom');
  });
  it('checks URLs as the server does', () => {
    expect(validTargetUrl('rtmp://h/app')).toBe(true);
    expect(validTargetUrl('srt://h:9000')).toBe(true);
    expect(validTargetUrl('rtmp://h')).toBe(false);
    expect(validTargetUrl('http://h/app')).toBe(false);
  });
  it('labels states and rates', () => {
    expect(stateBadge('failed')).toEqual({ label: 'Failed', tone: 'bad' });
    expect(stateBadge('live').tone).toBe('ok');
    expect(formatKbps(0)).toBe('—');
    expect(formatKbps(850)).toBe('850 kbps');
    expect(formatKbps(2500)).toBe('2.5 Mbps');
  });
});
