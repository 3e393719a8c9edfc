import { useEffect, useState } from 'preact/hooks';
import { api, type CustomEmoji } from '../api';
import { withBase } from '../lib/base';

const STANDARD = '😀 😂 🤣 😊 😍 😎 🤔 😮 😢 😡 👍 👎 👏 🙌 🙏 💪 🔥 ✨ 🎉 ❤️ 💜 💯 👀 🎮 🎵 🍿 ☕ 🚀 ✅ ❌'.split(' ');

let customCache: Promise<CustomEmoji[]> | null = null;
function loadCustom(): Promise<CustomEmoji[]> {
  if (!customCache) {
    customCache = api.emoji().then(
      (list) => (Array.isArray(list) ? list : []),
      () => {
        customCache = null;
        return [];
      },
    );
  }
  return customCache;
}

/** Emoji panel: the server's custom emoji (inserted as `:name:`) and a few standard ones. */
export function EmojiPicker({ onPick }: { onPick: (text: string) => void }) {
  const [custom, setCustom] = useState<CustomEmoji[]>([]);
  useEffect(() => {
    let live = true;
    void loadCustom().then((list) => live && setCustom(list));
    return () => {
      live = false;
    };
  }, []);
  return (
    <div class="emoji-picker" data-testid="emoji-picker">
      {custom.length > 0 && (
        <>
          <h3>Custom</h3>
          <div class="emoji-grid">
            {custom.map((e) => (
              <button type="button" key={e.name} title={`:${e.name}:`} onClick={() => onPick(`:${e.name}:`)}>
                <img src={withBase(e.url)} alt={`:${e.name}:`} loading="lazy" />
              </button>
            ))}
          </div>
        </>
      )}
      <h3>Emoji</h3>
      <div class="emoji-grid">
        {STANDARD.map((e) => (
          <button type="button" key={e} onClick={() => onPick(e)}>
            {e}
          </button>
        ))}
      </div>
    </div>
  );
}
