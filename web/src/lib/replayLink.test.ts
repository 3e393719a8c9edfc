import { describe, expect, it, vi } from 'vitest';
import { replayFromLink } from './replayLink';

const a = { id: 'a', title: 'first' };
const b = { id: 'b', title: 'older' };

describe('replayFromLink', () => {
  it('opens a listed replay without asking again', async () => {
    const fetchOne = vi.fn();
    expect(await replayFromLink('?replay=a', [a], fetchOne)).toBe(a);
    expect(fetchOne).not.toHaveBeenCalled();
  });

  it('asks for a replay the list does not hold (past its first page)', async () => {
    const fetchOne = vi.fn(async (id: string) => ({ id, title: 'older' }));
    expect(await replayFromLink('?replay=b', [a], fetchOne)).toEqual(b);
    expect(fetchOne).toHaveBeenCalledWith('b');
  });

  it('opens nothing without a link, or for a replay the server refuses', async () => {
    const refuse = vi.fn(async () => {
      throw new Error('401');
    });
    expect(await replayFromLink('', [a], refuse)).toBeUndefined();
    expect(await replayFromLink('?replay=x', [a], refuse)).toBeUndefined();
  });
});
