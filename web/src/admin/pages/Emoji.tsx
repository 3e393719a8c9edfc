import { useEffect, useState } from 'preact/hooks';
import { admin, getJSON, type CustomEmoji } from '../../api';
import { FormStatus, Section, readDataUrl, useSave } from '../forms';

/** Custom emoji: list (`/api/emoji`), upload (`emoji/upload {name, data}`), delete (`emoji/delete {name}`). */
export function Emoji() {
  const [list, setList] = useState<CustomEmoji[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [file, setFile] = useState<File | null>(null);
  const [state, run] = useSave();
  const reload = () =>
    getJSON<CustomEmoji[]>('/api/emoji').then(
      (l) => {
        setList(Array.isArray(l) ? l : []);
        setLoadError(null);
      },
      (e: Error) => setLoadError(e.message),
    );
  useEffect(() => {
    void reload();
  }, []);

  const upload = async (e: Event) => {
    e.preventDefault();
    if (!file) return;
    const ok = await run(async () => {
      const dataUrl = await readDataUrl(file);
      const base64 = dataUrl.slice(dataUrl.indexOf(',') + 1);
      const ext = file.name.includes('.') ? file.name.slice(file.name.lastIndexOf('.')) : '';
      let emojiName = (name.trim() || file.name).replace(/\s+/g, '_');
      if (!emojiName.includes('.')) emojiName += ext;
      await admin.post('emoji/upload', { name: emojiName, data: base64 });
    }, 'Emoji uploaded.');
    if (ok) {
      setName('');
      setFile(null);
      (e.currentTarget as HTMLFormElement).reset();
      void reload();
    }
  };
  const remove = async (emoji: CustomEmoji) => {
    const fileName = emoji.url.split('/').pop() ?? emoji.name;
    if (await run(() => admin.post('emoji/delete', { name: decodeURIComponent(fileName) }), 'Emoji deleted.')) void reload();
  };

  return (
    <Section title="Custom emoji" description="Viewers insert these as :name: in chat.">
      {loadError && <div class="form-error">{loadError}</div>}
      <div class="emoji-admin-grid" id="admin-emoji">
        {(list ?? []).map((e) => (
          <div class="emoji-admin" key={e.url}>
            <img src={e.url} alt={e.name} />
            <code>:{e.name}:</code>
            <button type="button" class="danger" onClick={() => void remove(e)}>Delete</button>
          </div>
        ))}
        {list && list.length === 0 && <p class="muted">No custom emoji yet.</p>}
      </div>
      <form class="field-row" onSubmit={upload} id="emoji-upload-form">
        <input type="file" accept="image/png,image/gif,image/jpeg,image/webp,image/svg+xml" onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} required />
        <input placeholder="name (optional, e.g. party)" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <button type="submit" class="primary" disabled={!file || state.kind === 'saving'}>Upload</button>
      </form>
      <FormStatus state={state} />
    </Section>
  );
}
