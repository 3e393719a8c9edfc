import { describe, expect, it } from 'vitest';
import { publishUrls, urlHost, whipUrl } from './ingest';

describe('publishUrls', () => {
  it('gives the RTMP server and the whole SRT URL', () => {
    expect(publishUrls('live.example.com', 1935, 8890, 'abc123')).toEqual({
      rtmp: 'rtmp://live.example.com:1935/live',
      srt: 'srt://live.example.com:8890?streamid=live/abc123',
    });
  });
  it('adds the passphrase, encoded', () => {
    expect(publishUrls('h', 1935, 9000, 'k', 'correct horse&42').srt).toBe(
      'srt://h:9000?streamid=live/k&passphrase=correct%20horse%2642',
    );
  });
  it('has no SRT URL when SRT is off', () => {
    expect(publishUrls('h', 1935, 0, 'k').srt).toBeNull();
  });
  it('brackets IPv6 hosts', () => {
    expect(urlHost('::1')).toBe('[::1]');
    expect(urlHost('[::1]')).toBe('[::1]');
    expect(publishUrls('::1', 1935, 8890, 'k').rtmp).toBe('rtmp://[::1]:1935/live');
  });
});

describe('whipUrl', () => {
  it('is /whip on the web server', () => {
    expect(whipUrl('https://live.example.com')).toBe('https://live.example.com/whip');
    expect(whipUrl('http://127.0.0.1:8080/')).toBe('http://127.0.0.1:8080/whip');
  });
});
