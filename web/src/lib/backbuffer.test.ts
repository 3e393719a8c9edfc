import { describe, expect, it } from 'vitest';
import { backBufferFlushEnd } from './backbuffer';

const safe = { newest: true, endsSegment: true };

describe('backBufferFlushEnd', () => {
  it('trims to the segment grid, keeping 30 s behind the playhead', () => {
    expect(backBufferFlushEnd(safe, 60.2, 29.015, 1)).toBe(30);
    expect(backBufferFlushEnd(safe, 61.9, 30.013, 1)).toBe(31);
    expect(backBufferFlushEnd(safe, 125, 80, 4)).toBe(94);
  });

  it('leaves a back buffer that is short enough alone', () => {
    expect(backBufferFlushEnd(safe, 60.2, 30.013, 1)).toBeNull();
    expect(backBufferFlushEnd(safe, 20, 0, 1)).toBeNull();
    expect(backBufferFlushEnd(safe, 60.2, null, 1)).toBeNull();
  });

  it('never while a segment is partly appended: only after the newest part, when it ends its segment', () => {
    // Mid-segment: a flush then can make hls.js forget the parts it appended.
    expect(backBufferFlushEnd({ newest: true, endsSegment: false }, 60.2, 29.015, 1)).toBeNull();
    // More parts listed than appended: the next load follows at once.
    expect(backBufferFlushEnd({ newest: false, endsSegment: true }, 60.2, 29.015, 1)).toBeNull();
  });

  it('ignores a target duration or time it cannot use', () => {
    expect(backBufferFlushEnd(safe, 60.2, 0, 0)).toBeNull();
    expect(backBufferFlushEnd(safe, Number.NaN, 0, 1)).toBeNull();
  });
});
