import type { User } from '../api';
import { ExternalLink } from '../components/ExternalLink';
import { rebaseEmoji } from '../lib/base';
import { isModerator, type ChatItem } from '../lib/chatState';
import { httpUrl } from '../lib/safeUrl';
import { formatTime } from '../lib/format';

export const userColor = (user?: User) => `var(--chat-user-color-${(((user?.displayColor ?? 0) % 8) + 8) % 8})`;

interface Props {
  item: ChatItem;
  canModerate: boolean;
  onHide?: (id: string) => void;
  onDisableUser?: (user: User) => void;
}

/** The signed-in (authenticated) badge after a user's name. */
export function AuthBadge() {
  return (
    <span class="chat-badge auth-badge" title="Signed in" aria-label="signed in">
      ✓
    </span>
  );
}

function Author({ user }: { user?: User }) {
  if (!user) return null;
  return (
    <span class="author" style={{ color: userColor(user) }}>
      {isModerator(user) && <span class="chat-badge">MOD</span>}
      {user.isBot && <span class="chat-badge">BOT</span>}
      {user.displayName}
      {user.authenticated && <AuthBadge />}
    </span>
  );
}

/** One line of the chat. Message bodies arrive sanitized from the server and are inserted as HTML (custom emoji
 * on this page's channel). */
export function ChatMessageView({ item, canModerate, onHide, onDisableUser }: Props) {
  const name = item.user?.displayName ?? 'Someone';
  switch (item.type) {
    case 'CHAT':
      return (
        <div class="chat-message" data-id={item.id} data-type="CHAT">
          <Author user={item.user} />
          <div class="body html-content" dangerouslySetInnerHTML={{ __html: rebaseEmoji(item.body ?? '') }} />
          <span class="time">{formatTime(item.timestamp)}</span>
          {canModerate && (
            <span class="mod-actions">
              <button type="button" title="Hide this message" onClick={() => onHide?.(item.id)}>
                Hide
              </button>
              {item.user && !isModerator(item.user) && (
                <button type="button" class="danger" title="Remove this user from chat" onClick={() => item.user && onDisableUser?.(item.user)}>
                  Ban
                </button>
              )}
            </span>
          )}
        </div>
      );
    case 'SYSTEM':
      return (
        <div class="chat-message system" data-id={item.id} data-type="SYSTEM">
          {item.user?.displayName && <span class="author">{item.user.displayName}</span>}
          <div class="body html-content" dangerouslySetInnerHTML={{ __html: rebaseEmoji(item.body ?? '') }} />
        </div>
      );
    case 'CHAT_ACTION':
      return (
        <div class="chat-message action" data-id={item.id} data-type="CHAT_ACTION">
          <div class="body html-content" dangerouslySetInnerHTML={{ __html: rebaseEmoji(item.body ?? '') }} />
        </div>
      );
    case 'ERROR_CHAT_UNAVAILABLE':
      return (
        <div class="chat-message action error" data-id={item.id} data-type="ERROR_CHAT_UNAVAILABLE" role="alert">
          <div class="body">{item.body ?? 'Chat is temporarily unavailable; your message was not sent.'}</div>
        </div>
      );
    case 'USER_JOINED':
    case 'USER_PARTED':
      return (
        <div class="chat-message event" data-id={item.id} data-type={item.type}>
          <span style={{ color: userColor(item.user) }}>{name}</span> {item.type === 'USER_JOINED' ? 'joined the chat.' : 'left the chat.'}
        </div>
      );
    case 'NAME_CHANGE':
      return (
        <div class="chat-message event" data-id={item.id} data-type="NAME_CHANGE">
          {item.oldName ?? 'Someone'} is now known as <span style={{ color: userColor(item.user) }}>{name}</span>.
        </div>
      );
    default:
      // Fediverse engagement (follow, like, repost).
      return (
        <div class="chat-message system" data-id={item.id} data-type={item.type}>
          {item.title && <span class="author">{item.title}</span>}
          <div class="body html-content" dangerouslySetInnerHTML={{ __html: rebaseEmoji(item.body ?? '') }} />
          {httpUrl(item.link) && (
            <ExternalLink href={item.link} class="engagement-link">
              {' '}
              view
            </ExternalLink>
          )}
        </div>
      );
  }
}
