import { useEffect, useState } from 'preact/hooks';
import { apiUrl, type PublicConfig, type PublicStatus } from '../api';
import { basePath } from '../lib/base';
import { formatDateTime } from '../lib/format';
import { SCHEDULE_ICS_PATH, countdown, webcalUrl } from '../lib/schedule';

/**
 * The next scheduled stream while offline: its name, when it starts (with a countdown when the owner turned it on),
 * whether chat is open for it, and "Add to calendar" (the schedule's iCalendar feed).
 */
export function NextStream({ config, status }: { config: PublicConfig; status: PublicStatus | null }) {
  const [now, setNow] = useState(Date.now());
  const event = status?.scheduledEvent;
  const showCountdown = Boolean(config.schedule?.showCountdown);
  useEffect(() => {
    if (!event || !showCountdown) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [event?.id, showCountdown]);
  if (!config.schedule?.enabled || !event || status?.online) return null;
  const origin = typeof window === 'undefined' ? '' : window.location.origin;
  return (
    <div class="card next-stream" id="next-stream" data-event-id={event.id}>
      <div>
        <strong id="next-stream-name">{event.name}</strong>
        <div class="muted">
          {formatDateTime(event.startTime)}
          {showCountdown && (
            <>
              {' · '}
              <span id="next-stream-countdown">{countdown(event.startTime, now)}</span>
            </>
          )}
        </div>
        {event.description && <p class="next-stream-description">{event.description}</p>}
        {event.chatOpen && (
          <div class="muted" id="next-stream-chat-open">
            Chat is open for this stream.
          </div>
        )}
      </div>
      <div class="next-stream-links">
        <a id="add-to-calendar" class="button" href={origin ? webcalUrl(origin + basePath()) : apiUrl(SCHEDULE_ICS_PATH)}>
          Add to calendar
        </a>
        <a href={apiUrl(SCHEDULE_ICS_PATH)} download="schedule.ics" class="muted">
          .ics
        </a>
      </div>
    </div>
  );
}
