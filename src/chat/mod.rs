//! Viewer chat: users, the `/ws` websocket hub, message rendering and history, moderation, custom
//! emoji, and the chat HTTP routes (Owncast's protocol, owncast-compat.md §2).
//!
//! `Chat` is the feature's state (handlers take `State<Arc<Chat>>`): the hub, the bans, and the narrow
//! handles chat was given at construction (store, settings, bus, the stream snapshot for "online",
//! integration tokens for the bot routes, telemetry for the connected and slow-dropped clients, and the
//! schedule's answer whether a scheduled stream opens chat while offline). `Chat::open`
//! runs the migrations, loads the IP bans and sizes the connection limit from the open-file limit
//! (raising the soft limit to the hard one first). Every chat event is published on the bus as well as
//! sent to the sockets. Chat implements `http::UserTokens` for routes of other features that accept a
//! chat user's access token.
//!
//! Modules: `protocol` (event JSON), `hub` (connections and fan-out, slow-consumer policy), `socket`
//! (the websocket's upgrade and writer), `ws` (one socket's life), `users`, `messages` (SQLite),
//! `sanitize` (markdown + allow-list), `filter` (the slur filter), `moderation`, `emoji`, `api`
//! (routes), `relay` (the seam to a cluster of nodes), `link` (the cluster link's types, which the
//! hub uses as well as `relay`) and `hops` (per-hop timestamps of messages, a debug switch for benches).

pub mod api;
pub mod emoji;
pub mod filter;
pub mod hops;
pub mod hub;
pub mod integrations;
pub mod link;
pub mod messages;
pub mod moderation;
pub mod protocol;
pub mod relay;
pub mod sanitize;
pub mod settings;
pub mod socket;
pub mod users;
pub mod ws;

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::events::{Bus, ChatEvent, Event};
use crate::http::auth::{SignIn, SignInResult, UserLookup};
use crate::store::settings::SettingsStore;
use crate::store::{Migrations, Store, StoreError};
use crate::stream::StreamWatch;
use crate::tasks::{Stage, Tasks};
use crate::telemetry::Telemetry;
use crate::tokens::Tokens;

/// Tables of the chat module.
pub const MIGRATIONS: Migrations = &[
    "CREATE TABLE chat_users (
        id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        display_name TEXT NOT NULL,
        display_color INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        previous_names TEXT NOT NULL DEFAULT '[]',
        name_changed_at TEXT,
        scopes TEXT NOT NULL DEFAULT '[]',
        is_bot INTEGER NOT NULL DEFAULT 0,
        authenticated INTEGER NOT NULL DEFAULT 0,
        disabled_at TEXT
    );
    CREATE INDEX chat_users_created ON chat_users(created_at);
    CREATE TABLE chat_messages (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        user_id TEXT REFERENCES chat_users(id) ON DELETE CASCADE,
        body TEXT NOT NULL,
        timestamp TEXT NOT NULL,
        hidden_at TEXT
    );
    CREATE INDEX chat_messages_user ON chat_messages(user_id);
    CREATE TABLE chat_ip_bans (
        ip TEXT PRIMARY KEY,
        notes TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );",
    "ALTER TABLE chat_users ADD COLUMN auth_provider TEXT;
    ALTER TABLE chat_users ADD COLUMN auth_identity TEXT;",
    "CREATE INDEX chat_messages_time ON chat_messages(timestamp);",
];

/// Errors of the chat module.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("creating the emoji directory: {0}")]
    Io(#[from] std::io::Error),
}

/// File descriptors kept free for everything that is not a chat socket (database, HLS, ffmpeg, ...).
const FD_HEADROOM: u64 = 256;

/// What chat was handed at construction (see the module doc).
pub struct ChatDeps {
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    pub tokens: Tokens,
    pub telemetry: Arc<Telemetry>,
    /// Where custom emoji are kept (`<data-dir>/emoji`).
    pub emoji_dir: PathBuf,
    /// The channel's path prefix (`""` for the default channel, `/c/{slug}` for another): custom emoji
    /// are listed at `{base_path}/img/emoji/...`, so a client loads the channel's own.
    pub base_path: String,
    /// Whether a scheduled stream opens chat now (given whether the stream is online).
    pub scheduled_chat_open: ScheduledChatOpen,
    /// The daemon's tasks: sockets and their timers run in the `Connections` stage.
    pub tasks: Tasks,
}

/// The schedule's answer to "is chat open for a scheduled stream now?" (given whether the stream is online).
pub type ScheduledChatOpen = Arc<dyn Fn(bool) -> bool + Send + Sync>;

/// How long after the stream went offline viewers' messages are still taken (Owncast: 5 minutes).
pub const OFFLINE_CHAT_GRACE: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Owncast's rule: messages are ignored once the stream has been offline for more than 5 minutes, unless
/// a scheduled stream opened chat. A server that never streamed keeps chat open.
pub fn takes_messages(
    online: bool,
    last_disconnect: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
    grace: chrono::TimeDelta,
    scheduled_open: impl FnOnce() -> bool,
) -> bool {
    match last_disconnect {
        _ if online => true,
        Some(t) if now - t > grace => scheduled_open(),
        _ => true,
    }
}

/// `OFFLINE_CHAT_GRACE`, or `CASTD_CHAT_OFFLINE_GRACE_MS` (a test switch, so tests need not wait 5 minutes).
fn offline_grace() -> chrono::TimeDelta {
    std::env::var("CASTD_CHAT_OFFLINE_GRACE_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .map_or(OFFLINE_CHAT_GRACE, chrono::TimeDelta::milliseconds)
}

/// Chat state shared by handlers and connection tasks.
pub struct Chat {
    pub hub: hub::Hub,
    bans: RwLock<HashSet<IpAddr>>,
    max_connections: AtomicUsize,
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    pub stream: StreamWatch,
    pub tokens: Tokens,
    pub telemetry: Arc<Telemetry>,
    pub emoji_dir: PathBuf,
    /// The channel's path prefix (see [`ChatDeps::base_path`]).
    pub base_path: String,
    scheduled_chat_open: ScheduledChatOpen,
    offline_grace: chrono::TimeDelta,
    pub tasks: Tasks,
    /// The cluster's other nodes' clients (`relay`), for the admin's client list.
    remote_clients: RwLock<relay::RemoteClients>,
    /// Chat sockets per client address (`ws::SOCKETS_PER_ADDRESS`).
    pub(crate) sockets_per_address: crate::throttle::Caps,
    /// Registrations per client address (`api::REGISTER_BURST`, `api::REGISTER_EVERY`).
    pub(crate) registrations: crate::throttle::Rate,
}

impl Chat {
    /// Prepare the chat: tables, bans, connection limit, emoji directory.
    pub fn open(deps: ChatDeps) -> Result<Arc<Chat>, ChatError> {
        deps.store.migrate("chat", MIGRATIONS)?;
        let bans = deps.store.with(moderation::load_bans)?;
        let nofile = raise_nofile_limit();
        let max = nofile.saturating_sub(FD_HEADROOM.max(nofile / 10)).max(16);
        std::fs::create_dir_all(&deps.emoji_dir)?;
        tracing::info!(open_files = nofile, max_chat_connections = max, "chat ready");
        Ok(Arc::new(Chat {
            hub: hub::Hub::new(deps.telemetry.clone()),
            bans: RwLock::new(bans.into_iter().collect()),
            max_connections: AtomicUsize::new(usize::try_from(max).unwrap_or(usize::MAX)),
            store: deps.store,
            settings: deps.settings,
            bus: deps.bus,
            stream: deps.stream,
            tokens: deps.tokens,
            telemetry: deps.telemetry,
            emoji_dir: deps.emoji_dir,
            base_path: deps.base_path,
            scheduled_chat_open: deps.scheduled_chat_open,
            offline_grace: offline_grace(),
            tasks: deps.tasks,
            remote_clients: RwLock::new(relay::RemoteClients::default()),
            sockets_per_address: crate::throttle::Caps::new(ws::SOCKETS_PER_ADDRESS, usize::MAX),
            registrations: crate::throttle::Rate::new(api::REGISTER_BURST, api::REGISTER_EVERY),
        }))
    }

    /// Whether viewers' messages are taken now (see `takes_messages`).
    pub fn takes_messages(&self) -> bool {
        let (online, last) = {
            let s = self.stream.borrow();
            (s.online, s.last_disconnect_time)
        };
        takes_messages(online, last, chrono::Utc::now(), self.offline_grace, || (self.scheduled_chat_open)(online))
    }

    pub fn is_banned(&self, ip: IpAddr) -> bool {
        self.bans.read().contains(&moderation::normalize_ip(ip))
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections.load(Ordering::Relaxed)
    }

    pub(crate) fn set_banned(&self, ip: IpAddr, banned: bool) {
        let ip = moderation::normalize_ip(ip);
        if banned {
            self.bans.write().insert(ip);
        } else {
            self.bans.write().remove(&ip);
        }
    }

    /// Shutdown: every socket gets a close frame.
    pub fn close_all(&self) {
        self.hub.close_all();
    }
}

impl crate::http::UserTokens for Chat {
    fn user_id<'a>(&'a self, token: &'a str, ip: Option<IpAddr>) -> UserLookup<'a> {
        Box::pin(async move {
            if ip.is_some_and(|ip| self.is_banned(ip)) {
                return None;
            }
            let token = token.to_string();
            match self.store.call(move |c| users::by_token(c, &token)).await {
                Ok(Some(u)) if u.is_enabled() => Some(u.id),
                _ => None,
            }
        })
    }

    fn user<'a>(&'a self, token: &'a str) -> crate::http::auth::UserFetch<'a> {
        Box::pin(async move {
            let token = token.to_string();
            self.store.call(move |c| users::by_token(c, &token)).await.ok().flatten()
        })
    }

    fn chat_between(
        &self,
        from: chrono::DateTime<chrono::Utc>,
        to: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> crate::http::auth::ChatLines<'_> {
        Box::pin(async move {
            let found = self.store.call(move |c| messages::between(c, from, to, limit)).await;
            let found = found.map_err(|e| e.to_string())?;
            Ok(found
                .into_iter()
                .map(|m| crate::events::chat::StoredLine {
                    id: m.id,
                    timestamp: m.timestamp,
                    kind: m.kind,
                    body: m.body,
                    user: m.user,
                })
                .collect())
        })
    }

    fn sign_in<'a>(&'a self, user_id: &'a str, sign_in: SignIn) -> SignInResult<'a> {
        Box::pin(async move {
            let id = user_id.to_string();
            let forbidden = self.settings.get().chat.forbidden_usernames.clone();
            let result = self.store.call(move |c| users::sign_in(c, &id, &sign_in, &forbidden)).await;
            let (user, old_name) = match result {
                Ok(Some(found)) => found,
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "could not record a chat sign-in");
                    return None;
                }
            };
            self.hub.update_user_local(&user);
            self.to_nodes(relay::Outbound::User { user: user.clone(), info: true });
            let info = protocol::frame(&protocol::connected_user_info(&user));
            for c in self.hub.of_user(&user.id) {
                c.send(info.clone());
            }
            if user.display_name != old_name {
                broadcast(self, protocol::name_change(&user, &old_name, None));
            }
            Some(user.display_name)
        })
    }
}

/// Raise the soft open-file limit to the hard limit; returns the resulting soft limit.
pub fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let wanted = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
    let cur = lim.rlim_cur as u64;
    cur
}

/// Owncast's chat actions when a stream starts ("Stay tuned, the stream is **starting**!") and when the
/// stream title changes to a non-empty one ("Stream title changed to **TITLE**"); the fediverse
/// engagement events federation publishes, relayed to the room (they are already on the bus); and
/// the schedule's SYSTEM message when a scheduled stream that opened chat never started (kept in the
/// history like any system message).
///
/// When the `Connections` stage stops, every socket gets a close frame (the socket tasks then end).
pub fn start(ctx: &Arc<Chat>) {
    let tasks = ctx.tasks.clone();
    let (hub_ctx, stop) = (ctx.clone(), tasks.token(Stage::Connections));
    tasks.spawn(Stage::Connections, "chat: close sockets", async move {
        stop.cancelled().await;
        hub_ctx.close_all();
    });
    let mut sub = ctx.bus.subscribe("chat-stream-start");
    let ctx = ctx.clone();
    tasks.spawn_until_stopped(Stage::Background, "chat: stream actions", async move {
        while let Some(event) = sub.recv().await {
            match &*event {
                Event::StreamStarted(_) => {
                    let body = sanitize::render("Stay tuned, the stream is **starting**!");
                    broadcast(&ctx, protocol::chat_action(&body));
                }
                Event::StreamTitleUpdated(s) if !s.stream_title.trim().is_empty() => {
                    let body = sanitize::render(&format!("Stream title changed to **{}**", s.stream_title));
                    broadcast(&ctx, protocol::chat_action(&body));
                }
                Event::Chat(c) if c.is_fediverse() => ctx.hub.broadcast(protocol::frame(&c.with_safe_links())),
                // castd: "NAME clipped TITLE" when a viewer clips (replays decide whether to announce).
                Event::ClipCreated { announce: Some(line), .. } => {
                    broadcast(&ctx, protocol::chat_action(&sanitize::render(line)));
                }
                Event::ScheduleChatClosing { body, .. } => {
                    let body = sanitize::render(body);
                    let event = protocol::system(&body, &ctx.settings.get().instance.name);
                    if let Err(e) = integrations::store_and_broadcast(&ctx, event, protocol::SYSTEM, body).await {
                        tracing::warn!("could not send the scheduled stream's chat notice: {e}");
                    }
                }
                _ => {}
            }
        }
    });
}

/// Send an event to every socket and publish it on the bus.
pub fn broadcast(ctx: &Chat, event: ChatEvent) {
    ctx.hub.broadcast(protocol::frame(&event));
    ctx.bus.publish(Event::Chat(event));
}

/// Send an event a chat connection caused to every socket as the room sees it, and publish it on the
/// bus with that connection's id (`clientId` of the USER_JOINED and USER_PARTED webhooks; the room
/// never sees other connections' ids, as in Owncast).
pub fn broadcast_from(ctx: &Chat, event: ChatEvent, client: u64) {
    ctx.hub.broadcast(protocol::frame(&event));
    ctx.bus.publish(Event::Chat(event.with_client_id(client)));
}

/// A CHAT_ACTION to one connection (not broadcast, not published).
pub fn action_to(client: &hub::Client, body: &str) {
    client.send(protocol::frame(&protocol::chat_action(&sanitize::render(body))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_chat_closes_after_five_minutes_unless_a_scheduled_stream_opens_it() {
        let now = chrono::Utc::now();
        let ago = |m: i64| Some(now - chrono::TimeDelta::minutes(m));
        let g = OFFLINE_CHAT_GRACE;
        assert!(takes_messages(true, ago(60), now, g, || false), "live");
        assert!(takes_messages(false, None, now, g, || false), "never streamed");
        assert!(takes_messages(false, ago(4), now, g, || false), "within 5 minutes of the end");
        assert!(!takes_messages(false, ago(6), now, g, || false), "offline for longer: closed");
        assert!(takes_messages(false, ago(6), now, g, || true), "a scheduled stream opened it");
    }
}
