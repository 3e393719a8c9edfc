import { describe, expect, it } from 'vitest';
import { healthSummary } from './health';

describe('healthSummary', () => {
  it('is all good only when playback is healthy and nothing else is reported', () => {
    expect(healthSummary({ healthy: true, healthPercentage: 100, message: '' })).toEqual({ tone: 'ok', title: 'Healthy (100%)' });
    expect(healthSummary({ healthy: true })).toEqual({ tone: 'ok', title: 'Healthy' });
  });

  it('warns when playback is healthy but another notice (a full disk) is reported', () => {
    expect(healthSummary({ healthy: true, healthPercentage: 100, message: 'The disk is 92% full.' })).toEqual({
      tone: 'warn',
      title: 'Playback healthy (100%), but:',
    });
  });

  it('needs attention when playback is not healthy, message or not', () => {
    expect(healthSummary({ healthy: false, healthPercentage: 50, message: 'errors' }).tone).toBe('bad');
    expect(healthSummary({ healthy: false, healthPercentage: null }).title).toBe('Needs attention');
  });
});
