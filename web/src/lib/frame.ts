/** Splitting websocket frames into chat events. The server may batch several JSON events per frame, one per line. */

export interface RawEvent {
  type: string;
  [key: string]: unknown;
}

/** Parses every non-empty line of a frame; lines that are not JSON objects with a `type` are skipped. */
export function splitFrame(frame: string): RawEvent[] {
  const events: RawEvent[] = [];
  for (const line of frame.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    try {
      const value: unknown = JSON.parse(trimmed);
      if (value && typeof value === 'object' && !Array.isArray(value) && typeof (value as RawEvent).type === 'string') {
        events.push(value as RawEvent);
      }
    } catch {
      // A malformed line never takes the rest of the frame down with it.
    }
  }
  return events;
}
