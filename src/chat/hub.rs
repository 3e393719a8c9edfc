//! The connection hub: who is connected, fan-out of events, presence (join/part) per user.
//!
//! A broadcast serializes the event once into a shared `Utf8Bytes` and puts it in the room's ring
//! (a tokio broadcast channel of `CLIENT_QUEUE` frames), so it never waits on a socket and costs one
//! send whatever the number of clients. Frames for one client (its user info, errors, actions) go
//! through that client's own small queue (`DIRECT_QUEUE`). The connection task drains both and writes
//! everything pending as one frame (events separated by `\n`, as Owncast's hub does), so a client that
//! falls behind catches up in few writes.
//!
//! Slow-consumer policy: a client that falls `CLIENT_QUEUE` room frames behind (the ring overwrote
//! frames it had not sent yet), or whose own queue is full, is disconnected (it can reconnect and
//! reload the history). Memory is therefore bounded by one shared ring plus a small queue and the
//! socket buffers per client, and one stuck client never delays the room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::ws::Utf8Bytes;
use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, Notify};
use tokio::task::JoinHandle;

use super::protocol::User;

/// Room frames a client may fall behind before it counts as a slow consumer and is disconnected.
pub const CLIENT_QUEUE: usize = 256;
/// Frames for one client only that may wait before it is disconnected.
pub const DIRECT_QUEUE: usize = 32;

/// What a connection task reads: the room's frames and its own.
pub struct Queues {
    pub room: broadcast::Receiver<Utf8Bytes>,
    pub direct: mpsc::Receiver<Out>,
}

/// What a connection task is asked to do.
#[derive(Debug)]
pub enum Out {
    Frame(Utf8Bytes),
    /// Flush what is queued, then close the socket.
    Close,
}

/// One connected websocket.
pub struct Client {
    pub id: u64,
    pub user_id: String,
    pub ip: IpAddr,
    pub user_agent: String,
    pub connected_at: DateTime<Utc>,
    pub message_count: AtomicU64,
    /// The user as this connection knows it (updated on name/colour/moderator changes).
    pub user: RwLock<User>,
    tx: mpsc::Sender<Out>,
    /// Signalled to drop the connection at once (slow consumer, ban).
    pub kill: Notify,
}

impl Client {
    /// Queue a frame for this client only; a full queue drops the client.
    pub fn send(&self, frame: Utf8Bytes) -> bool {
        match self.tx.try_send(Out::Frame(frame)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.kill.notify_one();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Ask the connection to flush and close.
    pub fn close(&self) {
        if self.tx.try_send(Out::Close).is_err() {
            self.kill.notify_one();
        }
    }
}

/// A connected client as the admin API lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub id: u64,
    pub connected_at: DateTime<Utc>,
    pub user: User,
    pub geo: Option<serde_json::Value>,
    pub user_agent: String,
    pub message_count: u64,
    pub ip_address: String,
}

#[derive(Default)]
struct Presence {
    connections: usize,
    part_timer: Option<JoinHandle<()>>,
}

/// The set of connections.
pub struct Hub {
    clients: RwLock<HashMap<u64, Arc<Client>>>,
    room: broadcast::Sender<Utf8Bytes>,
    presence: Mutex<HashMap<String, Presence>>,
    next_id: AtomicU64,
    /// Clients dropped by the slow-consumer policy since start.
    pub slow_dropped: AtomicU64,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            clients: RwLock::new(HashMap::new()),
            room: broadcast::channel(CLIENT_QUEUE).0,
            presence: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            slow_dropped: AtomicU64::new(0),
        }
    }
}

impl Hub {
    pub fn len(&self) -> usize {
        self.clients.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Register a connection. Returns the client, its queue, and whether this is a fresh join (the
    /// user had no other connection and no pending part timer).
    pub fn add(&self, user: User, ip: IpAddr, user_agent: String) -> (Arc<Client>, Queues, bool) {
        let (tx, rx) = mpsc::channel(DIRECT_QUEUE);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let client = Arc::new(Client {
            id,
            user_id: user.id.clone(),
            ip,
            user_agent,
            connected_at: Utc::now(),
            message_count: AtomicU64::new(0),
            user: RwLock::new(user),
            tx,
            kill: Notify::new(),
        });
        let fresh = {
            let mut presence = self.presence.lock();
            let p = presence.entry(client.user_id.clone()).or_default();
            let fresh = p.connections == 0 && p.part_timer.is_none();
            if let Some(t) = p.part_timer.take() {
                t.abort();
            }
            p.connections += 1;
            fresh
        };
        let room = {
            let mut clients = self.clients.write();
            clients.insert(id, client.clone());
            self.room.subscribe()
        };
        (client, Queues { room, direct: rx }, fresh)
    }

    /// Unregister a connection; returns true when it was the user's last one.
    pub fn remove(&self, client: &Client) -> bool {
        if self.clients.write().remove(&client.id).is_none() {
            return false;
        }
        let mut presence = self.presence.lock();
        let Some(p) = presence.get_mut(&client.user_id) else { return false };
        p.connections = p.connections.saturating_sub(1);
        p.connections == 0
    }

    /// Remember the part timer of a user whose last connection closed.
    pub fn set_part_timer(&self, user_id: &str, timer: JoinHandle<()>) {
        let mut presence = self.presence.lock();
        match presence.get_mut(user_id) {
            Some(p) if p.connections == 0 => {
                if let Some(old) = p.part_timer.replace(timer) {
                    old.abort();
                }
            }
            _ => timer.abort(),
        }
    }

    /// Called when a part timer fires: true when the user is still gone (and forgets them).
    pub fn finish_part(&self, user_id: &str) -> bool {
        let mut presence = self.presence.lock();
        match presence.get(user_id) {
            Some(p) if p.connections == 0 => {
                presence.remove(user_id);
                true
            }
            _ => false,
        }
    }

    /// Send a frame to every connection; slow consumers are dropped by their own connection task
    /// when they find they lagged (see the module docs).
    pub fn broadcast(&self, frame: Utf8Bytes) {
        // An error only means nobody is connected.
        let _ = self.room.send(frame);
    }

    /// Count a client dropped for lagging behind the room.
    pub fn lagged(&self, client: &Client) {
        self.slow_dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(client = client.id, "chat client too slow; disconnecting it");
    }

    /// Ask every connection to flush and close with a close frame (shutdown).
    pub fn close_all(&self) {
        for c in self.clients.read().values() {
            c.close();
        }
    }

    pub fn client(&self, id: u64) -> Option<Arc<Client>> {
        self.clients.read().get(&id).cloned()
    }

    /// The connections of one user.
    pub fn of_user(&self, user_id: &str) -> Vec<Arc<Client>> {
        self.clients.read().values().filter(|c| c.user_id == user_id).cloned().collect()
    }

    /// The connections from one address.
    pub fn from_ip(&self, ip: IpAddr) -> Vec<Arc<Client>> {
        self.clients.read().values().filter(|c| c.ip == ip).cloned().collect()
    }

    /// Update the user object held by each of the user's connections.
    pub fn update_user(&self, user: &User) {
        for c in self.of_user(&user.id) {
            *c.user.write() = user.clone();
        }
    }

    /// Snapshot for the admin clients list, oldest connection first.
    pub fn infos(&self, user_id: Option<&str>) -> Vec<ClientInfo> {
        let mut v: Vec<ClientInfo> = self
            .clients
            .read()
            .values()
            .filter(|c| user_id.is_none_or(|u| u == c.user_id))
            .map(|c| ClientInfo {
                id: c.id,
                connected_at: c.connected_at,
                user: c.user.read().clone(),
                geo: None,
                user_agent: c.user_agent.clone(),
                message_count: c.message_count.load(Ordering::Relaxed),
                ip_address: c.ip.to_string(),
            })
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }
}
