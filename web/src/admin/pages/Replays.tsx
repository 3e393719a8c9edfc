import { useEffect, useState } from 'preact/hooks';
import { admin, api, type Clip, type Replay, type Schemas } from '../../api';
import { HlsPlayer } from '../../components/HlsPlayer';
import { ReplayChatPanel } from '../../components/ReplayChatPanel';
import { formatDateTime } from '../../lib/format';
import { ConfigField, ConfigToggle, FormStatus, LoadError, Section, useSave, useServerConfig } from '../forms';
import { useAdminGet } from '../useAdmin';

const PERMISSIONS = ['established', 'authenticated', 'moderators'];

const size = (bytes: number) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(2)} GB` : `${(bytes / 1e6).toFixed(1)} MB`);
const duration = (s: number) => {
  const t = Math.round(s);
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = String(t % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
};

function PermissionSetting({ value }: { value: string | undefined }) {
  const { reload } = useServerConfig();
  const [state, run] = useSave();
  return (
    <label>
      Who may clip
      <br />
      <select
        id="replay-clippermissions"
        value={value ?? 'established'}
        onChange={async (e) => {
          if (await run(() => admin.setConfig('replay/clippermissions', e.currentTarget.value))) void reload();
        }}
      >
        {PERMISSIONS.map((p) => (
          <option key={p} value={p}>
            {p === 'established' ? 'Chat users whose account is at least an hour old' : p === 'authenticated' ? 'Signed-in chat users' : 'Moderators only'}
          </option>
        ))}
      </select>
      <FormStatus state={state} />
    </label>
  );
}

/** Cut a clip on the player: from the playhead for the chosen length (`POST /api/admin/clips/create`). */
function CutClip({ replayId, onMade }: { replayId: string; onMade: () => void }) {
  const [title, setTitle] = useState('');
  const [length, setLength] = useState(30);
  const [state, run] = useSave();
  const cut = async (e: Event) => {
    e.preventDefault();
    const video = document.getElementById('replay-player') as HTMLVideoElement | null;
    const start = video?.currentTime ?? 0;
    const ok = await run(async () => {
      const r = await admin.post<Schemas['ClipCreated']>('clips/create', {
        streamId: replayId,
        clipTitle: title,
        relativeStartTimeSeconds: start,
        relativeEndTimeSeconds: start + length,
      });
      if (!r.success) throw new Error(r.message);
    }, 'Clip created.');
    if (ok) onMade();
  };
  return (
    <form class="field-row" id="cut-clip" onSubmit={cut}>
      <input placeholder="Clip title" aria-label="Clip title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
      <input type="number" min={1} max={3600} aria-label="Seconds" value={length} onInput={(e) => setLength(Number(e.currentTarget.value) || 30)} />
      <button type="submit">Clip from the playhead</button>
      <FormStatus state={state} />
    </form>
  );
}

function ReplayRow({ r, reload, play }: { r: Replay; reload: () => void; play: (r: Replay) => void }) {
  const [state, run] = useSave();
  const [title, setTitle] = useState(r.title ?? '');
  useEffect(() => setTitle(r.title ?? ''), [r.title]);
  const update = (body: Record<string, unknown>) => void run(() => admin.post('replays/update', { id: r.id, ...body })).then(reload);
  return (
    <tr data-id={r.id}>
      <td>
        <form
          class="field-row"
          onSubmit={(e) => {
            e.preventDefault();
            update({ title });
          }}
        >
          <input value={title} aria-label="Title" onInput={(e) => setTitle(e.currentTarget.value)} />
          <button type="submit">Rename</button>
        </form>
      </td>
      <td>{formatDateTime(r.startTime)}</td>
      <td>{duration(r.durationSeconds)}</td>
      <td>{size(r.totalBytes)}</td>
      <td>{r.status}</td>
      <td>{r.clipCount}</td>
      <td>
        <input type="checkbox" aria-label="Public" checked={r.public} onChange={(e) => update({ public: e.currentTarget.checked })} />
      </td>
      <td>
        <input type="checkbox" aria-label="Pinned" checked={r.pinned} onChange={(e) => update({ pinned: e.currentTarget.checked })} />
      </td>
      <td>
        <button type="button" onClick={() => play(r)}>
          Play
        </button>{' '}
        <a href={r.download} download>
          Download
        </a>{' '}
        {!r.inProgress && (
          <button
            type="button"
            class="danger"
            onClick={() => {
              if (window.confirm('Delete this replay and its clips?')) void run(() => admin.post('replays/delete', { id: r.id })).then(reload);
            }}
          >
            Delete
          </button>
        )}
        <FormStatus state={state} />
      </td>
    </tr>
  );
}

/** The admin's Replays & clips page: settings, every replay (play, rename, pin, make public, download,
 * delete) and every clip. */
export function Replays() {
  const { config } = useServerConfig();
  const s = config?.replay;
  const replays = useAdminGet<Replay[]>('replays');
  const clips = useAdminGet<Clip[]>('clips');
  const [playing, setPlaying] = useState<{ title: string; src: string; replayId?: string } | null>(null);
  const [state, run] = useSave();
  return (
    <>
      <Section title="Settings" description="Every broadcast is recorded while replays are on; the oldest unpinned replays are deleted first when the disk budget is reached.">
        <ConfigToggle name="replay/enable" label="Record broadcasts (replays and clips)" value={s?.enabled} id="replay-enable" />
        <ConfigToggle name="replay/clipsenabled" label="Viewers can clip" value={s?.clipsEnabled} id="replay-clipsenabled" />
        <ConfigToggle name="replay/announceclips" label="Announce viewers' clips in chat" value={s?.announceClips} id="replay-announceclips" />
        <PermissionSetting value={s?.clipPermissions} />
        <ConfigField name="replay/maxclipduration" kind="number" label="Longest clip (seconds)" value={s?.maxClipDurationSeconds} />
        <ConfigField name="replay/maxgigabytes" kind="number" label="Disk budget for replays (GB)" value={s?.maxGigabytes} />
        <ConfigField name="replay/retentiondays" kind="number" label="Delete replays after (days, 0 = keep)" value={s?.retentionDays} />
      </Section>
      {playing && (
        <Section title={`Playing: ${playing.title}`}>
          {playing.replayId ? (
            <div class="replay-with-chat">
              <HlsPlayer src={playing.src} id="replay-player" />
              <ReplayChatPanel
                key={playing.replayId}
                videoId="replay-player"
                windowed
                load={(from, to) => api.replayChat(playing.replayId ?? '', from, to)}
              />
            </div>
          ) : (
            <HlsPlayer src={playing.src} id="replay-player" />
          )}
          {playing.replayId && <CutClip replayId={playing.replayId} onMade={() => void clips.reload()} />}
          <button type="button" onClick={() => setPlaying(null)}>
            Close
          </button>
        </Section>
      )}
      <Section title="Replays">
        {!replays.data && <LoadError error={replays.error} />}
        <div class="table-scroll">
          <table class="table" id="replays">
            <thead>
              <tr><th>Title</th><th>Started</th><th>Length</th><th>Size</th><th>State</th><th>Clips</th><th>Public</th><th>Pinned</th><th /></tr>
            </thead>
            <tbody>
              {(replays.data ?? []).map((r) => (
                <ReplayRow key={r.id} r={r} reload={() => void replays.reload()} play={(x) => setPlaying({ title: x.title || x.id, src: x.manifest, replayId: x.id })} />
              ))}
              {replays.data && replays.data.length === 0 && <tr><td colSpan={9} class="muted">No replays yet.</td></tr>}
            </tbody>
          </table>
        </div>
      </Section>
      <Section title="Clips">
        {!clips.data && <LoadError error={clips.error} />}
        <div class="table-scroll">
          <table class="table" id="clips">
            <thead>
              <tr><th /><th>Title</th><th>By</th><th>Length</th><th>Created</th><th /></tr>
            </thead>
            <tbody>
              {(clips.data ?? []).map((c) => (
                <tr key={c.id} data-id={c.id}>
                  <td>{c.thumbnail && <img src={c.thumbnail} alt="" width={120} />}</td>
                  <td>
                    <a href={`/clips/${c.id}`}>{c.title || c.streamTitle || c.id}</a>
                  </td>
                  <td>{c.clippedBy}</td>
                  <td>{c.durationSeconds} s</td>
                  <td>{formatDateTime(c.timestamp)}</td>
                  <td>
                    <button type="button" onClick={() => setPlaying({ title: c.title || c.id, src: c.manifest })}>
                      Play
                    </button>{' '}
                    <a href={c.download} download>
                      Download
                    </a>{' '}
                    <button type="button" class="danger" onClick={() => void run(() => admin.post('clips/delete', { id: c.id })).then(() => clips.reload())}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
              {clips.data && clips.data.length === 0 && <tr><td colSpan={6} class="muted">No clips yet.</td></tr>}
            </tbody>
          </table>
        </div>
        <FormStatus state={state} />
      </Section>
    </>
  );
}
