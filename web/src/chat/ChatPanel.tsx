import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { PublicConfig, User } from '../api';
import { Icon } from '../components/Icon';
import { Modal } from '../components/Modal';
import { isModerator } from '../lib/chatState';
import { AuthBadge, ChatMessageView, userColor } from './ChatMessageView';
import { EmojiPicker } from './EmojiPicker';
import { clearSignInOutcome, SignIn, signInOutcome } from './SignIn';
import { UserSettings } from './UserSettings';
import { useChat } from './useChat';

interface Props {
  config: PublicConfig;
  readonly?: boolean;
}

/** The chat: message list, composer with emoji picker, name/colour settings and moderator actions. */
export function ChatPanel({ config, readonly }: Props) {
  const chat = useChat(true, config.socketHostOverride || undefined);
  const { model, status, error } = chat;
  const [text, setText] = useState('');
  const [showEmoji, setShowEmoji] = useState(false);
  const [showSettings, setShowSettings] = useState(false);
  const [showSignIn, setShowSignIn] = useState(false);
  const [signInNotice, setSignInNotice] = useState(() =>
    readonly || typeof window === 'undefined' ? null : signInOutcome(window.location.search),
  );
  const [modError, setModError] = useState<string | null>(null);
  const [newBelow, setNewBelow] = useState(false);
  const listRef = useRef<HTMLDivElement>(null);
  const inputRef = useRef<HTMLInputElement>(null);
  const stick = useRef(true);

  const moderator = !readonly && isModerator(model.me);
  const visible = model.items.filter((i) => !i.hidden);

  useLayoutEffect(() => {
    const el = listRef.current;
    if (!el) return;
    if (stick.current) {
      el.scrollTop = el.scrollHeight;
      setNewBelow(false);
    } else {
      setNewBelow(true);
    }
  }, [visible.length]);

  // A layout effect, not a passive one: the address bar is cleaned before the notice is painted, so nothing (a
  // reload, a copy of the URL, a test) sees the notice and the stale outcome together.
  useLayoutEffect(() => {
    if (signInNotice) clearSignInOutcome();
  }, []);

  useEffect(() => {
    if (!modError) return;
    const t = setTimeout(() => setModError(null), 5000);
    return () => clearTimeout(t);
  }, [modError]);

  const onScroll = () => {
    const el = listRef.current;
    if (!el) return;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 60;
    if (stick.current) setNewBelow(false);
  };

  const scrollDown = () => {
    const el = listRef.current;
    if (el) el.scrollTop = el.scrollHeight;
    stick.current = true;
    setNewBelow(false);
  };

  const submit = (e: Event) => {
    e.preventDefault();
    const body = (inputRef.current?.value ?? text).trim();
    if (!body) return;
    if (chat.send({ type: 'CHAT', body })) {
      setText('');
      if (inputRef.current) inputRef.current.value = '';
      setShowEmoji(false);
      stick.current = true;
    }
  };

  const insert = (s: string) => {
    const input = inputRef.current;
    if (input && input.selectionStart !== null) {
      const start = input.selectionStart;
      const end = input.selectionEnd ?? start;
      const next = text.slice(0, start) + s + text.slice(end);
      setText(next);
      requestAnimationFrame(() => {
        input.focus();
        input.setSelectionRange(start + s.length, start + s.length);
      });
    } else {
      setText(text + s);
    }
  };

  const moderate = (fn: () => Promise<void>) => {
    fn().catch((e: Error) => setModError(e.message));
  };
  const onDisableUser = (user: User) => {
    if (window.confirm(`Remove ${user.displayName} from the chat?`)) moderate(() => chat.disableUser(user.id));
  };

  const maxLen = Math.max(100, (config.maxSocketPayloadSize ?? 2048) - 64);
  const canSend = status === 'open' && !model.disabled;

  return (
    <section class="chat-panel" aria-label="Chat" data-testid="chat-panel">
      <div class="chat-header">
        <span>Chat</span>
        <span class="chat-status" data-testid="chat-status">
          {status === 'open' ? '' : status === 'connecting' ? 'connecting…' : 'reconnecting…'}
        </span>
        <span class="spacer" />
        {!readonly && model.me && (
          <span class="chat-me">
            <span style={{ color: userColor(model.me) }} id="chat-display-name">
              {model.me.displayName}
            </span>
            {moderator && <span class="chat-badge">MOD</span>}
            {model.me.authenticated && <AuthBadge />}
            <button type="button" onClick={() => setShowSettings(true)} disabled={!canSend} id="chat-settings-button">
              Edit
            </button>
            {!model.me.authenticated && (
              <button type="button" onClick={() => setShowSignIn(true)} id="chat-signin-button">
                Sign in
              </button>
            )}
          </span>
        )}
      </div>
      <div id="chat-messages" ref={listRef} onScroll={onScroll} role="log" aria-live="polite">
        {visible.map((item) => (
          <ChatMessageView
            key={item.id}
            item={item}
            canModerate={moderator && item.type === 'CHAT'}
            onHide={(id) => moderate(() => chat.hideMessage(id))}
            onDisableUser={onDisableUser}
          />
        ))}
      </div>
      {newBelow && (
        <button type="button" class="chat-new-below" onClick={scrollDown}>
          New messages <Icon name="arrowDown" />
        </button>
      )}
      {error && <div class="chat-notice error">{error}</div>}
      {modError && <div class="chat-notice error">{modError}</div>}
      {signInNotice && (
        <div class={`chat-notice${signInNotice.ok ? '' : ' error'}`} id="chat-signin-notice" role="status">
          {signInNotice.message}{' '}
          <button type="button" class="icon" aria-label="Dismiss" onClick={() => setSignInNotice(null)}>
            ×
          </button>
        </div>
      )}
      {!readonly && (
        <form class="chat-compose" onSubmit={submit}>
          {showEmoji && <EmojiPicker onPick={insert} />}
          <div class="chat-compose-row">
            <button type="button" class="icon" aria-label="Emoji" aria-expanded={showEmoji} onClick={() => setShowEmoji(!showEmoji)} id="chat-emoji-button">
              <Icon name="smile" />
            </button>
            <input
              id="chat-input"
              ref={inputRef}
              value={text}
              maxLength={maxLen}
              autocomplete="off"
              placeholder={model.disabled ? 'You have been removed from the chat' : canSend ? 'Send a message' : 'Connecting…'}
              disabled={model.disabled}
              onInput={(e) => setText(e.currentTarget.value)}
            />
            <button type="submit" class="primary" id="chat-send" disabled={!canSend}>
              Send
            </button>
          </div>
        </form>
      )}
      {showSignIn && (
        <Modal title="Sign in" small onClose={() => setShowSignIn(false)}>
          <SignIn
            indieAuthEnabled={Boolean(config.authentication?.indieAuthEnabled)}
            fediverseEnabled={Boolean(config.federation?.enabled)}
            onSignedIn={(message) => {
              setShowSignIn(false);
              setSignInNotice({ ok: true, message });
            }}
          />
        </Modal>
      )}
      {showSettings && model.me && (
        <Modal title="Chat settings" small onClose={() => setShowSettings(false)}>
          <UserSettings me={model.me} send={chat.send} onDone={() => setShowSettings(false)} />
        </Modal>
      )}
    </section>
  );
}
