//! The seam between chat and a cluster of castd nodes (the `cluster` feature does the Redis and HTTP
//! work; chat only sees this module's types). The link's types themselves (`Link`, `Role`,
//! `Outbound`, `Inbound`, `OutQueue`, `RoomQueue`, `Room`, `EdgeLink`, `Lookup`) are `link`'s, which
//! the hub uses too; they are re-exported here, so the cluster sees one seam.
//!
//! Each `Chat` is one room: the default channel's and every other channel's chat is linked on its own
//! (`Chat::set_link`), the origin's with its room's `RoomQueue`, an edge's with its room's `EdgeLink`;
//! chat never knows which channel a room is, only that what it queues and forwards is its own.
//!
//! Without a cluster the hub has no `Link` and chat is exactly the single box. With one:
//! - on the **origin** (`Role::Origin`) everything chat does today still happens here (auth,
//!   moderation, rate limits, filters, storage); every room frame is fanned out locally *and* queued
//!   in the `OutQueue`, in the same order under one lock, and so are the changes the other nodes must
//!   apply (`Outbound`: a user's new name or scopes, a kick, an IP ban, a reply to one remote client).
//!   The cluster drains the queue into Redis in order; while Redis is down the queue keeps what the
//!   nodes have not been sent yet (at most `OUT_QUEUE_MAX` entries, the oldest dropped beyond that).
//! - on an **edge** (`Role::Edge`) the hub only relays: a client's CHAT/NAME_CHANGE/COLOR_CHANGE that
//!   passed the per-connection checks (size, rate limit) is forwarded to the origin as an [`Inbound`]
//!   (its id doubles as the stored message id, so a redelivered entry is stored and sent once), and
//!   the room is fanned out only from what the origin sends (`apply`), so every node shows the same
//!   order. A forward that Redis did not take is answered to that client with the error event
//!   [`ERROR_CHAT_UNAVAILABLE`] (castd's websocket error shape, `{id, timestamp, type}` like
//!   `ERROR_NEEDS_REGISTRATION`, with the text [`MSG_UNAVAILABLE`] in `body`), never dropped silently.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

pub use super::hops;
use super::hub::ClientInfo;
pub use super::link::{
    BoxFuture, EdgeLink, Inbound, Link, Lookup, OutQueue, Outbound, Queued, Role, Room, RoomQueue, DEFAULT_ROOM,
    OUT_QUEUE_MAX, ROOM,
};
use super::protocol as p;
use super::Chat;
use crate::tasks::Stage;

/// The text an edge's client gets when its message could not be handed to the origin.
pub const MSG_UNAVAILABLE: &str = "Chat is temporarily unavailable; your message was not sent. Please try again.";
/// The error event an edge's client gets when its message could not be handed to the origin.
pub const ERROR_CHAT_UNAVAILABLE: &str = "ERROR_CHAT_UNAVAILABLE";
/// How many bits of a listed client id are the node's own id (see `RemoteClients`).
pub const NODE_ID_SHIFT: u32 = 32;
/// Most node numbers the origin remembers (nodes that left are forgotten beyond this).
const NODE_NUMBERS_MAX: usize = 1024;

/// The other nodes' connected clients as the origin lists them (`/api/admin/chat/clients`), with ids
/// unique across the cluster in the same JSON number field: the origin's own clients keep the hub's
/// ids (which stay below 2^32), and client `id` of another node is listed as `(n << 32) | id`, where
/// `n` ≥ 1 is the number the origin gave that node when it first saw it. `n` stays below 2^21 so the
/// id is below 2^53 (exact in JavaScript); numbers are not reused while the origin runs.
#[derive(Default)]
pub struct RemoteClients {
    numbers: HashMap<String, u64>,
    next: u64,
    clients: Vec<ClientInfo>,
}

impl RemoteClients {
    fn set(&mut self, nodes: Vec<(String, Vec<ClientInfo>)>) {
        if self.numbers.len() + nodes.len() > NODE_NUMBERS_MAX {
            let live: HashSet<&String> = nodes.iter().map(|(n, _)| n).collect();
            self.numbers.retain(|n, _| live.contains(n));
        }
        let mut clients = Vec::new();
        for (node, list) in nodes {
            let n = match self.numbers.get(&node) {
                Some(n) => *n,
                None => {
                    // 1 ..= 2^21 - 1, then around again (a node that old is long gone).
                    self.next = self.next % ((1 << 21) - 1) + 1;
                    self.numbers.insert(node, self.next);
                    self.next
                }
            };
            clients.extend(list.into_iter().map(|mut c| {
                c.id = (n << NODE_ID_SHIFT) | (c.id & ((1 << NODE_ID_SHIFT) - 1));
                c
            }));
        }
        self.clients = clients;
    }

    fn find(&self, id: u64) -> Option<(String, u64)> {
        if !self.clients.iter().any(|c| c.id == id) {
            return None;
        }
        let n = id >> NODE_ID_SHIFT;
        let node = self.numbers.iter().find(|(_, v)| **v == n)?.0.clone();
        Some((node, id & ((1 << NODE_ID_SHIFT) - 1)))
    }
}

impl Chat {
    /// The cluster link, when this node is part of one.
    pub fn link(&self) -> Option<&Link> {
        self.hub.link()
    }

    /// Join a cluster (before the first connection).
    pub fn set_link(&self, link: Link) {
        self.hub.set_link(link);
    }

    /// The other nodes' connected clients (their latest presence, with cluster-wide ids, see
    /// `RemoteClients`; empty on a single box).
    pub fn remote_clients(&self) -> Vec<ClientInfo> {
        self.remote_clients.read().clients.clone()
    }

    /// Set by the cluster on the origin from the other nodes' presence: each node's clients, with
    /// the ids that node gave them.
    pub fn set_remote_clients(&self, nodes: Vec<(String, Vec<ClientInfo>)>) {
        self.remote_clients.write().set(nodes);
    }

    /// Which node holds the listed client `id` (a cluster-wide id of `remote_clients`), and its id there.
    pub fn remote_client(&self, id: u64) -> Option<(String, u64)> {
        self.remote_clients.read().find(id)
    }

    /// On the origin: queue `entry` for the other nodes (nothing otherwise).
    pub(crate) fn to_nodes(&self, entry: Outbound) {
        if let Some(Link { role: Role::Origin(q), .. }) = self.link() {
            q.push(entry);
        }
    }
}

/// The `ERROR_CHAT_UNAVAILABLE` event (`{id, timestamp, type, body}`), as one frame.
pub fn unavailable_frame() -> axum::extract::ws::Utf8Bytes {
    let mut ev = p::error(ERROR_CHAT_UNAVAILABLE, None);
    ev["body"] = serde_json::Value::from(MSG_UNAVAILABLE);
    p::frame(&ev)
}

/// On every node but the origin: apply what the origin sent (see `Outbound`).
pub fn apply(ctx: &Arc<Chat>, entry: Outbound) {
    let node = ctx.link().map(|l| l.node.as_str()).unwrap_or_default();
    match entry {
        Outbound::Room { frame } => ctx.hub.broadcast_local(frame.into()),
        Outbound::Client { node: n, client, frame } if n == node => {
            if let Some(c) = ctx.hub.client(client) {
                c.send(frame.into());
            }
        }
        Outbound::Client { .. } => {}
        Outbound::User { user, info } => {
            ctx.hub.update_user_local(&user);
            if info {
                let info = p::frame(&p::connected_user_info(&user));
                for c in ctx.hub.of_user(&user.id) {
                    c.send(info.clone());
                }
            }
        }
        Outbound::Kick { user_id, frame, delay_ms } => {
            let clients = ctx.hub.of_user(&user_id);
            if clients.is_empty() {
                return;
            }
            if let Some(frame) = frame {
                let frame: axum::extract::ws::Utf8Bytes = frame.into();
                for c in &clients {
                    c.send(frame.clone());
                }
            }
            ctx.tasks.spawn_until_stopped(Stage::Connections, "chat: cluster kick", async move {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                for c in clients {
                    c.close();
                }
            });
        }
        Outbound::Banned { ip } => {
            for c in ctx.hub.from_ip(ip) {
                c.close();
            }
        }
    }
}

/// On the origin: a CHAT an edge sent again (its inbound entry was redelivered: the origin stopped
/// after storing it and before acknowledging it) is not stored again, but its stored copy goes to the
/// other nodes once more: the origin may have stopped before the first copy was written for them. A
/// node that has the first copy drops this one (same event id, see `cluster::bus`).
pub fn resend(ctx: &Chat, stored: &super::messages::ChatMessage) {
    if stored.kind != p::CHAT || !stored.visible {
        return;
    }
    if let Some(user) = &stored.user {
        let frame = p::frame(&p::chat(&stored.id, stored.timestamp, &stored.body, user, true));
        ctx.to_nodes(Outbound::Room { frame: frame.as_str().to_string() });
    }
}

/// Test switch: with `CASTD_DEBUG_CLUSTER_CRASH_AFTER_STORE=TEXT` the origin aborts right after it
/// stored a remote client's message containing TEXT, before the message is sent anywhere (the crash
/// `resend` recovers from; tests/cluster.rs).
pub fn crash_after_store_if(raw: &str) {
    static SWITCH: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let switch = SWITCH.get_or_init(|| {
        let text = std::env::var("CASTD_DEBUG_CLUSTER_CRASH_AFTER_STORE").ok().filter(|t| !t.is_empty());
        if let Some(t) = &text {
            tracing::warn!(
                "CASTD_DEBUG_CLUSTER_CRASH_AFTER_STORE={t}: the origin aborts after storing it (test switch)"
            );
        }
        text
    });
    if switch.as_deref().is_some_and(|t| raw.contains(t)) {
        tracing::error!("aborting after storing a message (CASTD_DEBUG_CLUSTER_CRASH_AFTER_STORE)");
        std::process::abort();
    }
}

/// The origin's answer to an edge's `/ws` token check (see `Lookup`).
pub async fn lookup(ctx: &Chat, token: String, ip: IpAddr) -> Result<Lookup, crate::store::StoreError> {
    if ctx.settings.get().chat.chat_disabled {
        return Ok(Lookup::ChatDisabled);
    }
    if ctx.is_banned(ip) {
        return Ok(Lookup::Banned);
    }
    Ok(match ctx.store.call(move |c| super::users::by_token(c, &token)).await? {
        Some(user) if user.is_enabled() => Lookup::Ok { user },
        Some(user) => Lookup::Disabled { user },
        None => Lookup::Unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u64) -> ClientInfo {
        ClientInfo {
            id,
            connected_at: chrono::Utc::now(),
            user: serde_json::from_value(serde_json::json!({
                "id": "u", "displayName": "u", "displayColor": 0, "createdAt": "2024-01-01T00:00:00Z",
                "previousNames": [], "nameChangedAt": null, "scopes": [], "isBot": false,
                "authenticated": false, "isModerator": false
            }))
            .unwrap(),
            geo: None,
            user_agent: String::new(),
            message_count: 0,
            ip_address: "127.0.0.1".into(),
        }
    }

    #[test]
    fn other_nodes_clients_get_ids_unique_across_the_cluster_and_are_found_by_them() {
        let mut r = RemoteClients::default();
        // Two edges number their clients from 1 alike.
        r.set(vec![("edge-a".into(), vec![info(1), info(2)]), ("edge-b".into(), vec![info(1), info(2)])]);
        let ids: HashSet<u64> = r.clients.iter().map(|c| c.id).collect();
        assert_eq!(ids.len(), 4, "{ids:?}");
        assert!(ids.iter().all(|id| *id >= 1 << NODE_ID_SHIFT && *id < 1 << 53), "{ids:?}");
        let a1 = r.clients[0].id;
        assert_eq!(r.find(a1), Some(("edge-a".to_string(), 1)));
        assert_eq!(r.find(r.clients[3].id), Some(("edge-b".to_string(), 2)));
        assert_eq!(r.find(1), None, "an origin id is not a remote one");
        // A node keeps its number from one presence round to the next.
        r.set(vec![("edge-b".into(), vec![info(2)]), ("edge-a".into(), vec![info(1)])]);
        assert_eq!(r.clients[1].id, a1);
        assert_eq!(r.find(r.clients[0].id), Some(("edge-b".to_string(), 2)));
    }
}
