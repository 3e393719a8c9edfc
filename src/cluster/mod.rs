//! Beyond one box: one origin and any number of edges sharing every channel's chat over Redis.
//!
//! The **origin** is castd as it is (database, transcoder, federation, webhooks) started with
//! `--redis-url` and `--cluster-secret`. An **edge** is castd started with `--origin URL` as well: it
//! serves the web UI and every channel's chat websocket itself (`/ws`, `/c/{slug}/ws`), and hands
//! everything else (`/api/*`, HLS and LL-HLS, thumbnails, emoji, federation, a channel's pages and API,
//! ...) to the origin (`proxy`; HLS responses are cached for as long as their `Cache-Control` says).
//! Without `--redis-url` none of this runs.
//!
//! Chat (`chat::relay` is the seam; `bus` does the Redis work). Each channel's chat is a **room**:
//! the default channel's is `DEFAULT_ROOM`, another channel's is `room_of` its slug and its creation
//! time (`<slug>/<µs>`), so a channel made later with a deleted channel's slug is another room.
//! - edge → origin: each client event goes on the Redis Stream `castd:chat:in` (consumer group
//!   `origin`, at-least-once; the entry's id is the stored message id, so a redelivery is stored and
//!   sent once). The origin applies everything it applies to its own clients, in the room's chat.
//! - origin → every node: the room's frames and the changes the nodes apply (user updates, kicks, IP
//!   bans, replies to one client) go on the Redis Stream `castd:chat:out`, which every edge reads from
//!   the last entry it saw. A Stream rather than pub/sub: a node that was cut off from Redis (or a
//!   Redis that restarted with its append-only file) resumes where it was, so nothing the origin sent
//!   in between is lost, and the one writer keeps one order for every node.
//! - every room shares the two streams, each entry naming its room (`bus`: the default room's as
//!   before rooms existed, another's in fields an older castd does not read), rather than a pair of
//!   streams per channel: the origin keeps one consumer group and one reader, and each node one
//!   reader, however many channels come and go (per-channel streams would need a group created per
//!   channel and a blocking read over a set of keys that changes with every created or deleted
//!   channel); one writer's order is kept for every room, and so per room; trimming is one bound
//!   (`IN_MAX`, `OUT_MAX` entries) for the whole cluster, not one per channel: the price is that a
//!   busy room's backlog can push a quiet room's out of the stream during a long Redis outage; a
//!   deleted channel leaves no key behind (its entries age out of the streams), and an entry whose
//!   room a node has not got (a deleted channel's, an older channel's of the same slug) is dropped
//!   (the origin acknowledges it), so a new channel never receives an old one's backlog.
//! - the origin links every open channel's chat as it opens, channels created later included
//!   (`link_channel`, from the composition root), and unlinks it when the channel is deleted.
//! - an edge keeps no database (an in-memory one for the code that expects a store) and takes the
//!   settings its chat applies itself (flood protection, chat disabled, join messages, the welcome
//!   message) from the origin every 2 s: the default channel's from `edge_config`
//!   (`GET /api/cluster/settings`), every other channel's with the list of the origin's open
//!   channels (`edge_channels`, `GET /api/cluster/channels`): an edge opens a chat of its own for each
//!   channel the origin lists (`OpenRoom`, made by the composition root) and closes it (its sockets
//!   too) when the origin no longer lists it.
//! - an edge checks a client's access token with the origin (`GET /api/cluster/chat/lookup`, the
//!   room's users; it needs the cluster secret in `X-Castd-Cluster-Secret`; a wrong secret is refused
//!   with 403).
//! - viewer access (private channels): an edge checks viewing passes itself, with the origin's
//!   channels' signing keys and valid grants taken every 3 s (`edge_access`, `GET /api/cluster/access`,
//!   cluster secret required), before it serves from its cache, proxies, or holds a chat socket.
//! - presence: each node writes its chat clients (per room) and viewer counts to
//!   `castd:presence:<node>` with a 20 s expiry every 5 s; the origin's `/api/status` and each
//!   channel's admin chat client list add them up (a killed node's clients leave them within 25 s).
//!   The admin list numbers another node's clients `(n << 32) | id` so ids stay unique across the
//!   cluster (`chat::relay::RemoteClients`).
//!
//! Faults: while Redis is unreachable each node keeps serving its own rooms (the origin stores and
//! sends its own clients' messages; an edge answers a client whose message Redis did not take with the
//! error event `ERROR_CHAT_UNAVAILABLE`, body "Chat is temporarily unavailable; ..."), the origin
//! keeps what the edges have not been sent in order (`chat::relay::OutQueue`), and everything resumes
//! when Redis is back.

pub mod api;
pub mod bus;
pub mod edge_access;
pub mod edge_channels;
pub mod edge_config;
pub mod proxy;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use axum::http::HeaderMap;
use parking_lot::RwLock;

use crate::chat::relay::{Link, OutQueue, Role, Room, RoomQueue, DEFAULT_ROOM};
use crate::chat::Chat;
use crate::http::ApiError;
use crate::media::ChannelId;
use crate::tasks::Tasks;

/// The header that carries the cluster secret on edge → origin calls.
pub const SECRET_HEADER: &str = "x-castd-cluster-secret";

/// Errors of the cluster's configuration.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("--cluster-secret {0}: {1}")]
    Secret(String, std::io::Error),
    #[error("--cluster-secret: the file is empty")]
    EmptySecret,
    #[error("--redis-url: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("--origin: {0}")]
    Origin(String),
    #[error("{0}")]
    Usage(&'static str),
}

/// The cluster flags, resolved.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `--origin`: set on an edge.
    pub origin: Option<reqwest::Url>,
    /// `--redis-url`.
    pub redis_url: String,
    /// The contents of `--cluster-secret FILE` (trimmed).
    pub secret: String,
    /// This node's name in the cluster (`origin`, or `edge-<random>`).
    pub node: String,
}

impl ClusterConfig {
    /// From the command line: `None` without `--redis-url` (a single box).
    pub fn from_flags(
        origin: Option<&str>,
        redis_url: Option<&str>,
        secret_file: Option<&Path>,
    ) -> Result<Option<ClusterConfig>, ClusterError> {
        let Some(redis_url) = redis_url else {
            if origin.is_some() {
                return Err(ClusterError::Usage("--origin needs --redis-url and --cluster-secret"));
            }
            return Ok(None);
        };
        let Some(file) = secret_file else {
            return Err(ClusterError::Usage("--redis-url needs --cluster-secret FILE"));
        };
        let secret = std::fs::read_to_string(file)
            .map_err(|e| ClusterError::Secret(file.display().to_string(), e))?
            .trim()
            .to_string();
        if secret.is_empty() {
            return Err(ClusterError::EmptySecret);
        }
        // Checked here so a typo stops the start rather than every chat message.
        redis::Client::open(redis_url)?;
        let origin = match origin {
            None => None,
            Some(o) => {
                let url = reqwest::Url::parse(o).map_err(|e| ClusterError::Origin(e.to_string()))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(ClusterError::Origin("must be an http:// or https:// URL".into()));
                }
                Some(url)
            }
        };
        let node = match origin {
            None => "origin".to_string(),
            Some(_) => format!("edge-{}", crate::password::random_token(8)),
        };
        Ok(Some(ClusterConfig { origin, redis_url: redis_url.to_string(), secret, node }))
    }

    pub fn is_edge(&self) -> bool {
        self.origin.is_some()
    }

    /// An edge's GET of the origin's cluster route `path` (with `query`), carrying the cluster secret:
    /// the JSON answer. Once more on a connection error (a kept-alive connection to an origin that
    /// restarted is dead).
    pub async fn ask_origin<T: serde::de::DeserializeOwned>(
        &self,
        http: &reqwest::Client,
        path: &str,
        query: &[(&str, &str)],
        timeout: std::time::Duration,
    ) -> Result<T, String> {
        let origin = self.origin.as_ref().ok_or("no origin")?;
        let url = origin.join(path).map_err(|e| e.to_string())?;
        let ask = || http.get(url.clone()).query(query).header(SECRET_HEADER, &self.secret).timeout(timeout).send();
        let resp = match ask().await {
            Err(e) if e.is_connect() || e.is_request() => ask().await,
            other => other,
        }
        .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("the origin answered {}", resp.status()));
        }
        resp.json::<T>().await.map_err(|e| e.to_string())
    }

    /// The value an edge sends in `X-Castd-Edge` on what it forwards, and the only one the origin
    /// honours: derived from the cluster secret (the secret itself is not sent), so a viewer cannot
    /// keep itself out of the viewer count by sending the header.
    pub fn edge_mark(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"castd edge mark\0");
        h.update(self.secret.as_bytes());
        hex::encode(h.finalize())
    }
}

/// An edge's chat of one channel, made by the composition root (an in-memory store like the edge's
/// default chat, the channel's path prefix, tasks of its own): the room and the tasks that close with it.
pub type OpenRoom = Arc<dyn Fn(&ChannelId) -> Result<(Arc<Chat>, Tasks), String> + Send + Sync>;

/// The room of channel `slug` as it was created at `created_at` (see the module doc: the creation
/// time tells a channel from an older one that had its slug).
pub fn room_of(slug: &ChannelId, created_at: chrono::DateTime<chrono::Utc>) -> Room {
    Room::from(format!("{slug}/{}", created_at.timestamp_micros()))
}

/// The slug of a channel's room (`room_of`).
pub fn slug_of(room: &str) -> &str {
    room.split_once('/').map_or(room, |(slug, _)| slug)
}

/// A channel's chat linked to the cluster (every channel but the default).
struct Linked {
    chat: Arc<Chat>,
    /// An edge's room: its tasks, closed with it (the origin's chat is its channel stack's).
    tasks: Option<Tasks>,
}

/// The cluster feature's state.
pub struct Cluster {
    pub config: ClusterConfig,
    /// The default channel's chat (room `DEFAULT_ROOM`).
    pub chat: Arc<Chat>,
    pub redis: redis::Client,
    /// The origin's queue for the other nodes, every room's (origin only).
    queue: Option<Arc<OutQueue>>,
    /// The edge's link (edge only).
    edge: Option<Arc<bus::Edge>>,
    /// Every other channel's chat, by room: on the origin each open channel's, on an edge the rooms it
    /// follows (`edge_channels`).
    rooms: RwLock<BTreeMap<Room, Linked>>,
    /// How an edge makes a channel's chat (edge only).
    open_room: Option<OpenRoom>,
    /// HTTP client for the origin (edge only).
    pub http: reqwest::Client,
    pub cache: proxy::Cache,
    /// `ClusterConfig::edge_mark`, computed once.
    pub edge_mark: String,
    /// This node's viewer count, for presence (the metrics' counts).
    pub viewers: crate::stream::Viewers,
    /// An edge marks the viewers whose playlist requests it proxies (they count on this node).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The origin's viewer access, as an edge checks passes with it (`edge_access`; edge only).
    pub access: crate::access::edge::EdgeAccess,
    /// One snapshot taken at a time out of turn (`edge_access::refresh`).
    access_refresh: tokio::sync::Mutex<()>,
    /// Every open channel's viewer access (origin only; the registry of channels answers).
    pub directory: Option<crate::access::edge::Directory>,
}

/// What the cluster is given of the server's channels when it joins.
pub struct ClusterDeps {
    /// The default channel's chat: its hub gets the cluster's link (before any connection).
    pub chat: Arc<Chat>,
    /// The default channel's viewer counts (this node's, for presence).
    pub viewers: crate::stream::Viewers,
    /// The default channel's metrics (an edge marks the viewers it serves).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// An edge's way to make a channel's chat room (see [`OpenRoom`]).
    pub open_room: Option<OpenRoom>,
    /// An origin's view of every channel's viewer access, published to its edges.
    pub directory: Option<crate::access::edge::Directory>,
}

impl Cluster {
    /// Join the cluster: the default channel's chat hub gets its link (before any connection). An edge
    /// makes its channels' chats with `open_room`.
    pub fn attach(config: ClusterConfig, deps: ClusterDeps) -> Result<Arc<Cluster>, ClusterError> {
        let ClusterDeps { chat, viewers, metrics, open_room, directory } = deps;
        let directory = directory.filter(|_| !config.is_edge());
        let redis = redis::Client::open(config.redis_url.as_str())?;
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClusterError::Origin(e.to_string()))?;
        let default_room = Room::from(DEFAULT_ROOM);
        let (queue, edge, role) = if config.is_edge() {
            let edge = Arc::new(bus::Edge::new(config.clone(), redis.clone(), http.clone()));
            (None, Some(edge.clone()), Role::Edge(Arc::new(bus::EdgeRoom::new(edge, default_room))))
        } else {
            let q = Arc::new(OutQueue::default());
            (Some(q.clone()), None, Role::Origin(RoomQueue { queue: q, room: default_room }))
        };
        chat.set_link(Link { node: config.node.clone(), role });
        if !config.is_edge() {
            // The origin believes its edges' X-Forwarded-For wherever they run.
            crate::http::headers::set_edge_mark(&config.edge_mark());
        }
        tracing::info!(node = %config.node, edge = config.is_edge(), "cluster: joined");
        Ok(Arc::new(Cluster {
            edge_mark: config.edge_mark(),
            open_room: open_room.filter(|_| config.is_edge()),
            config,
            chat,
            redis,
            queue,
            edge,
            rooms: RwLock::default(),
            http,
            cache: proxy::Cache::default(),
            viewers,
            metrics,
            access: Default::default(),
            access_refresh: tokio::sync::Mutex::new(()),
            directory,
        }))
    }

    pub fn is_edge(&self) -> bool {
        self.config.is_edge()
    }

    /// On the origin: link channel `slug`'s chat (created at `created_at`) to the cluster, before its
    /// first connection; its room's messages from the edges are handled there from now on. Nothing on
    /// an edge (its rooms follow the origin's, `edge_channels`).
    pub fn link_channel(&self, slug: &ChannelId, created_at: chrono::DateTime<chrono::Utc>, chat: Arc<Chat>) {
        let Some(queue) = &self.queue else { return };
        let room = room_of(slug, created_at);
        chat.set_link(Link {
            node: self.config.node.clone(),
            role: Role::Origin(RoomQueue { queue: queue.clone(), room: room.clone() }),
        });
        let mut rooms = self.rooms.write();
        rooms.retain(|r, _| slug_of(r) != slug.as_str());
        rooms.insert(room, Linked { chat, tasks: None });
    }

    /// On the origin: channel `slug` is closed (deleted): its room's entries are dropped from now on.
    pub fn unlink_channel(&self, slug: &ChannelId) {
        self.rooms.write().retain(|r, _| slug_of(r) != slug.as_str());
    }

    /// The chat of `room` (the default channel's for `DEFAULT_ROOM`), if this node has it.
    pub fn chat_of(&self, room: &str) -> Option<Arc<Chat>> {
        if room == DEFAULT_ROOM {
            return Some(self.chat.clone());
        }
        self.rooms.read().get(room).map(|l| l.chat.clone())
    }

    /// The room and chat this node has for channel `slug` (not the default's).
    pub fn room_for(&self, slug: &str) -> Option<(Room, Arc<Chat>)> {
        self.rooms.read().iter().find(|(r, _)| slug_of(r) == slug).map(|(r, l)| (r.clone(), l.chat.clone()))
    }

    /// Every other channel's room and chat this node has.
    pub fn rooms(&self) -> Vec<(Room, Arc<Chat>)> {
        self.rooms.read().iter().map(|(r, l)| (r.clone(), l.chat.clone())).collect()
    }

    /// Refuse a request (403) that does not carry the cluster secret in `SECRET_HEADER` (compared
    /// in constant time): every route the origin serves its edges (`api`, `edge_config`) asks this.
    pub fn check_secret(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let given = headers.get(SECRET_HEADER).map(|v| v.as_bytes()).unwrap_or_default();
        if crate::password::same_secret(given, self.config.secret.as_bytes()) {
            Ok(())
        } else {
            Err(ApiError::Forbidden("a valid cluster secret is required".into()))
        }
    }
}

/// Start the cluster's tasks (Redis readers and writers, presence).
pub fn start(cluster: &Arc<Cluster>, tasks: &Tasks) {
    if let Some(q) = &cluster.queue {
        bus::start_origin(cluster.clone(), q.clone(), tasks);
    }
    if let Some(edge) = &cluster.edge {
        bus::start_edge(cluster.clone(), edge.clone(), tasks);
        edge_config::start(cluster.clone(), tasks);
        edge_channels::start(cluster.clone(), tasks);
        edge_access::start(cluster.clone(), tasks);
    }
    bus::start_presence(cluster.clone(), tasks);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_made_again_with_a_slug_is_another_room() {
        let slug = ChannelId::new("music").unwrap();
        let first = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05.123456Z").unwrap().to_utc();
        let again = first + chrono::TimeDelta::microseconds(1);
        assert_ne!(room_of(&slug, first), room_of(&slug, again), "the creation time tells them apart");
        assert_eq!(room_of(&slug, first), room_of(&slug, first), "the same channel after a restart");
        assert_eq!(slug_of(&room_of(&slug, first)), "music");
        assert_ne!(&*room_of(&slug, first), DEFAULT_ROOM);
    }
}
