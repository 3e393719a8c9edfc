import { useState } from 'preact/hooks';
import { admin, type AdminSchedule, type ScheduledEvent, type Schemas } from '../../api';
import { formatDateTime } from '../../lib/format';
import { SCHEDULE_ICS_PATH, weeklyRule } from '../../lib/schedule';
import { ConfigField, ConfigToggle, FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';
import { useAdminGet } from '../useAdmin';

const CHAT_MINUTES = [0, 5, 10, 30, 60];
const REMINDER_MINUTES = [0, 15, 30, 60, 120, 1440];
const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

/** A select of Owncast's allowed minute values for one schedule setter. */
function MinutesSetting({ name, label, value, options }: { name: string; label: string; value: number | undefined; options: number[] }) {
  const { reload } = useServerConfig();
  const [state, run] = useSave();
  return (
    <label>
      {label}
      <br />
      <select
        id={`schedule-${name}`}
        value={String(value ?? 0)}
        onChange={async (e) => {
          if (await run(() => admin.setConfig(`schedule/${name}`, Number(e.currentTarget.value)))) void reload();
        }}
      >
        {options.map((m) => (
          <option key={m} value={String(m)}>
            {m === 0 ? 'Off' : `${m} minutes`}
          </option>
        ))}
      </select>
      <FormStatus state={state} />
    </label>
  );
}

/** Create a one-off event or a weekly series (or any RRULE); the next occurrences are previewed first. */
function NewEvent({ onSaved }: { onSaved: () => void }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [when, setWhen] = useState('');
  const [zone, setZone] = useState(browserZone());
  const [duration, setDuration] = useState(60);
  const [repeat, setRepeat] = useState<'once' | 'weekly' | 'rule'>('once');
  const [rule, setRule] = useState('');
  const [preview, setPreview] = useState<string[] | null>(null);
  const [state, run] = useSave();

  const recurrence = () => (repeat === 'rule' ? rule : weeklyRule(when, zone));
  const body = () => {
    const base = { name, description, durationMinutes: duration };
    if (repeat === 'once') return { ...base, timezone: zone, start: when ? new Date(`${when}`).toISOString() : undefined };
    return { ...base, recurrence: recurrence() };
  };
  const doPreview = async () => {
    await run(async () => {
      const r = await admin.post<Schemas['Preview']>('schedule/preview', { recurrence: recurrence() });
      setPreview(r.occurrences);
    }, 'Preview ready.');
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.post('schedule/event', body()), 'Scheduled.')) {
      setName('');
      setDescription('');
      setPreview(null);
      onSaved();
    }
  };
  return (
    <form class="stack" id="schedule-new-form" onSubmit={save}>
      <label>
        Name
        <br />
        <input id="schedule-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        Description
        <br />
        <textarea id="schedule-description" value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </label>
      <label>
        Repeats
        <br />
        <select id="schedule-repeat" value={repeat} onChange={(e) => setRepeat(e.currentTarget.value as 'once' | 'weekly' | 'rule')}>
          <option value="once">Once</option>
          <option value="weekly">Every week</option>
          <option value="rule">Custom rule (RFC 5545 RRULE)</option>
        </select>
      </label>
      {repeat === 'rule' ? (
        <label>
          Recurrence
          <br />
          <textarea id="schedule-rule" rows={2} placeholder={'DTSTART;TZID=Europe/Berlin:20300101T190000\nRRULE:FREQ=WEEKLY;BYDAY=TU'} value={rule} onInput={(e) => setRule(e.currentTarget.value)} />
        </label>
      ) : (
        <>
          <label>
            Starts (local time in the zone below)
            <br />
            <input id="schedule-start" type="datetime-local" required value={when} onInput={(e) => setWhen(e.currentTarget.value)} />
          </label>
          <label>
            Time zone (IANA)
            <br />
            <input id="schedule-zone" value={zone} onInput={(e) => setZone(e.currentTarget.value)} />
          </label>
        </>
      )}
      <label>
        Duration (minutes)
        <br />
        <input id="schedule-duration" type="number" min={1} max={10080} value={duration} onInput={(e) => setDuration(Number(e.currentTarget.value))} />
      </label>
      <div class="row">
        {repeat !== 'once' && (
          <button type="button" id="schedule-preview" onClick={() => void doPreview()}>
            Preview
          </button>
        )}
        <button type="submit" class="primary" id="schedule-save">
          Schedule
        </button>
      </div>
      {preview && (
        <ul id="schedule-preview-list">
          {preview.length === 0 && <li class="muted">No occurrences in the next year.</li>}
          {preview.map((p) => (
            <li key={p}>{formatDateTime(p)}</li>
          ))}
        </ul>
      )}
      <FormStatus state={state} />
    </form>
  );
}

function EventRow({ e, reload }: { e: ScheduledEvent; reload: () => void }) {
  const [state, run] = useSave();
  const act = (cancel: boolean) => run(() => admin.post('schedule/event/delete', { id: e.id, cancel })).then((ok) => ok && reload());
  return (
    <tr data-id={e.id}>
      <td>{e.name}</td>
      <td>{formatDateTime(e.startTime)}</td>
      <td>{e.timezone}</td>
      <td>{e.durationMinutes} min</td>
      <td>{e.status}</td>
      <td>
        {e.status === 'scheduled' && (
          <button type="button" onClick={() => void act(true)}>
            Cancel
          </button>
        )}{' '}
        <button type="button" class="danger" onClick={() => void act(false)}>
          Delete
        </button>
        <FormStatus state={state} />
      </td>
    </tr>
  );
}

/** The admin's Schedule page: settings, new events and series, and every event with cancel/delete. */
export function Schedule() {
  const { config } = useServerConfig();
  const s = config?.schedule;
  const { data, error, reload } = useAdminGet<AdminSchedule>('schedule');
  const [state, run] = useSave();
  const upcoming = (data?.events ?? []).filter((e) => Date.parse(e.startTime) + e.durationMinutes * 60000 > Date.now());
  return (
    <>
      <Section title="Settings" description={<>Viewers see the next stream on the page and can add the schedule to their calendar (<a href={SCHEDULE_ICS_PATH}>schedule.ics</a>).</>}>
        <ConfigToggle name="schedule/enabled" label="Show the schedule" value={s?.enabled} id="schedule-enabled" />
        <ConfigToggle name="schedule/showcountdown" label="Show a countdown to the next stream" value={s?.showCountdown} id="schedule-showcountdown" />
        <MinutesSetting name="chatopenminutes" label="Open chat before a stream" value={s?.chatOpenMinutesBefore} options={CHAT_MINUTES} />
        <ConfigField name="schedule/remindermessage" label="Reminder message (posted to followers; empty: no reminders)" value={s?.reminderMessage} />
        <MinutesSetting name="firstreminderminutes" label="First reminder" value={s?.firstReminderMinutes} options={REMINDER_MINUTES} />
        <MinutesSetting name="secondreminderminutes" label="Second reminder" value={s?.secondReminderMinutes} options={REMINDER_MINUTES} />
      </Section>
      <Section title="New stream">
        <NewEvent onSaved={() => void reload()} />
      </Section>
      <Section title="Series">
        {!data && <LoadError error={error} />}
        <div class="table-scroll">
          <table class="table" id="schedule-series">
            <thead>
              <tr><th>Name</th><th>Recurrence</th><th>Duration</th><th>State</th><th /></tr>
            </thead>
            <tbody>
              {(data?.series ?? []).map((x) => (
                <tr key={x.id} data-id={x.id}>
                  <td>{x.name}</td>
                  <td><code>{x.recurrence}</code></td>
                  <td>{x.durationMinutes} min</td>
                  <td>{x.active ? 'active' : 'paused'}</td>
                  <td>
                    {x.active && (
                      <button type="button" onClick={() => void run(() => admin.post('schedule/event/delete', { id: x.id, cancel: true })).then(() => reload())}>
                        Pause
                      </button>
                    )}{' '}
                    <button type="button" class="danger" onClick={() => void run(() => admin.post('schedule/event/delete', { id: x.id })).then(() => reload())}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
              {data && data.series.length === 0 && <tr><td colSpan={5} class="muted">No series.</td></tr>}
            </tbody>
          </table>
        </div>
        <FormStatus state={state} />
      </Section>
      <Section title="Upcoming streams">
        <div class="table-scroll">
          <table class="table" id="schedule-events">
            <thead>
              <tr><th>Name</th><th>Starts</th><th>Zone</th><th>Duration</th><th>Status</th><th /></tr>
            </thead>
            <tbody>
              {upcoming.map((e) => (
                <EventRow key={e.id} e={e} reload={() => void reload()} />
              ))}
              {data && upcoming.length === 0 && <tr><td colSpan={6} class="muted">Nothing scheduled.</td></tr>}
            </tbody>
          </table>
        </div>
      </Section>
    </>
  );
}
