//! Viewer chat: users, the `/ws` websocket hub, message rendering and history, moderation, custom
//! emoji, and the chat HTTP routes (Owncast's protocol, owncast-compat.md §2).
//!
//! `Chat` lives in `App::chat`; `start` runs the migrations, loads the IP bans and sizes the
//! connection limit from the open-file limit (raising the soft limit to the hard one first). Every
//! chat event is published on the bus as well as sent to the sockets.
//!
//! Modules: `protocol` (event JSON), `hub` (connections and fan-out, slow-consumer policy), `ws` (one
//! socket's life), `users`, `messages` (SQLite), `sanitize` (markdown + allow-list), `moderation`,
//! `emoji`, `api` (routes).

pub mod api;
pub mod emoji;
pub mod hub;
pub mod integrations;
pub mod messages;
pub mod moderation;
pub mod protocol;
pub mod sanitize;
pub mod users;
pub mod ws;

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::HeaderMap;
use parking_lot::RwLock;
use serde_json::Value;

use crate::app::App;
use crate::events::{Event, EventType};
use crate::store::{Migrations, StoreError};

/// Tables of the chat module.
pub const MIGRATIONS: Migrations = &["CREATE TABLE chat_users (
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
    );"];

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

/// Chat state shared by handlers and connection tasks.
pub struct Chat {
    pub hub: hub::Hub,
    bans: RwLock<HashSet<IpAddr>>,
    max_connections: AtomicUsize,
}

impl Default for Chat {
    fn default() -> Self {
        Self { hub: hub::Hub::default(), bans: RwLock::new(HashSet::new()), max_connections: AtomicUsize::new(1024) }
    }
}

impl Chat {
    pub fn is_banned(&self, ip: IpAddr) -> bool {
        self.bans.read().contains(&ip)
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections.load(Ordering::Relaxed)
    }

    pub(crate) fn set_banned(&self, ip: IpAddr, banned: bool) {
        if banned {
            self.bans.write().insert(ip);
        } else {
            self.bans.write().remove(&ip);
        }
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

/// Prepare the chat: tables, bans, connection limit, emoji directory.
pub fn start(app: &Arc<App>) -> Result<(), ChatError> {
    app.store.migrate("chat", MIGRATIONS)?;
    let bans = app.store.with(moderation::load_bans)?;
    *app.chat.bans.write() = bans.into_iter().collect();
    let nofile = raise_nofile_limit();
    let max = nofile.saturating_sub(FD_HEADROOM.max(nofile / 10)).max(16);
    app.chat.max_connections.store(usize::try_from(max).unwrap_or(usize::MAX), Ordering::Relaxed);
    std::fs::create_dir_all(emoji::dir(app))?;
    tracing::info!(open_files = nofile, max_chat_connections = max, "chat ready");
    announce_stream_start(app);
    Ok(())
}

/// Owncast's chat action when a stream starts: "Stay tuned, the stream is **starting**!"
fn announce_stream_start(app: &Arc<App>) {
    let mut sub = app.bus.subscribe("chat-stream-start");
    let app = app.clone();
    tokio::spawn(async move {
        while let Some(event) = sub.recv().await {
            if event.kind == EventType::StreamStarted {
                let body = sanitize::render("Stay tuned, the stream is **starting**!");
                broadcast(&app, EventType::ChatAction, protocol::chat_action(&body));
            }
        }
    });
}

/// The address of a request: the peer, or the first `X-Forwarded-For` entry when the peer is a
/// proxy on this machine (loopback).
pub fn client_ip(peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
    let ip = peer.ip();
    if ip.is_loopback() {
        if let Some(fwd) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            if let Some(first) = fwd.split(',').next().and_then(|s| s.trim().parse().ok()) {
                return first;
            }
        }
    }
    ip
}

/// Send an event to every socket and publish it on the bus.
pub fn broadcast(app: &App, kind: EventType, event: Value) {
    app.chat.hub.broadcast(protocol::frame(&event));
    app.bus.publish(Event::new(kind, event));
}

/// A CHAT_ACTION to one connection (not broadcast, not published).
pub fn action_to(client: &hub::Client, body: &str) {
    client.send(protocol::frame(&protocol::chat_action(&sanitize::render(body))));
}
