import { useState } from 'preact/hooks';
import type { User } from '../api';
import { rememberName } from './session';

interface Props {
  me: User;
  send: (event: Record<string, unknown>) => boolean;
  onDone: () => void;
}

/** Change display name (NAME_CHANGE) and colour (COLOR_CHANGE, 0..7) over the chat socket. */
export function UserSettings({ me, send, onDone }: Props) {
  const [name, setName] = useState(me.displayName);
  const [color, setColor] = useState(me.displayColor ?? 0);
  const [error, setError] = useState<string | null>(null);

  const save = (e: Event) => {
    e.preventDefault();
    const newName = name.trim();
    let ok = true;
    if (newName && newName !== me.displayName) {
      ok = send({ type: 'NAME_CHANGE', newName }) && ok;
      if (ok) rememberName(newName);
    }
    if (color !== me.displayColor) ok = send({ type: 'COLOR_CHANGE', newColor: color }) && ok;
    if (!ok) setError('Not connected to chat; try again in a moment.');
    else onDone();
  };

  return (
    <form class="user-settings" onSubmit={save}>
      <label>
        Display name
        <br />
        <input id="chat-name-input" value={name} maxLength={30} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <div>
        Colour
        <div class="color-swatches" role="group" aria-label="Colour">
          {Array.from({ length: 8 }, (_, i) => (
            <button
              type="button"
              key={i}
              aria-label={`Colour ${i}`}
              aria-pressed={color === i}
              style={{ background: `var(--chat-user-color-${i})` }}
              onClick={() => setColor(i)}
            />
          ))}
        </div>
      </div>
      {error && <div class="chat-notice error">{error}</div>}
      <div>
        <button type="submit" class="primary" id="chat-name-save">
          Save
        </button>
      </div>
    </form>
  );
}
