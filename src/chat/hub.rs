//! The connection hub: who is connected, fan-out of events, presence (join/part) per user.
//!
//! A broadcast serializes the event once, encodes it once as a websocket frame (server frames are not
//! masked, so it is the same bytes for every client) and puts it in the room's ring (a tokio broadcast
//! channel of `RING` frames), so the caller never waits on a socket and pays one send whatever the
//! number of clients. The clients are split into shards, one per core; each shard has a fan-out
//! thread that takes the frames from the ring and offers them to each of its clients' [`Writer`]s,
//! which write them to the socket directly (see `socket`): delivering a message wakes no per-client
//! task. Frames that arrived while a fan-out thread was writing go out together, one write per
//! client, so a busy room costs fewer writes per frame. Frames for one client (its user info, errors,
//! actions) go to its writer directly as well. Threads rather than tasks, so the shards really write
//! in parallel and a long fan-out never holds up the runtime's workers.
//!
//! Slow-consumer policy: a client whose socket stays full until `socket::MAX_QUEUED` writes are queued
//! for it is disconnected (it can reconnect and reload the history); so is every client of a shard
//! whose fan-out thread fell `RING` frames behind the room (the box cannot write frames as fast as the
//! room makes them). Memory is therefore bounded by one shared ring plus, per client, its socket
//! buffers and at most `MAX_QUEUED` shared frames, and one stuck client never delays the room.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock};

use axum::extract::ws::Utf8Bytes;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::hops;
use super::link::{Inbound, Link, Outbound, Role, ROOM};
use super::protocol::User;
use super::socket::{text_frame, Offer, Writer};
use crate::telemetry::Telemetry;

/// Frames the room's ring holds: how far a shard's fan-out thread may fall behind.
pub const RING: usize = 4096;
/// Most room frames a fan-out thread writes to a client in one go.
const MAX_BATCH: usize = 64;
/// Most shards (fan-out threads), whatever the number of cores.
const MAX_SHARDS: usize = 8;

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
    /// The socket's writer, shared with the connection task and the fan-out.
    pub writer: Arc<Writer>,
}

impl Client {
    /// Send a frame to this client only; false when the client is gone (or was just dropped as a slow
    /// consumer).
    pub fn send(&self, frame: Utf8Bytes) -> bool {
        matches!(self.writer.offer(&text_frame(frame.as_bytes())), Offer::Sent | Offer::Queued)
    }

    /// Ask the connection to flush what is queued and close with a close frame.
    pub fn close(&self) {
        self.writer.finish();
    }
}

/// A connected client as the admin API lists it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
    part_timer: Option<CancellationToken>,
}

/// One shard's clients (their writers): `incoming` is filled by `Hub::add` and merged by the shard's
/// fan-out thread, which owns the list it writes to.
#[derive(Default)]
struct Shard {
    incoming: Mutex<Vec<Arc<Writer>>>,
}

/// The set of connections.
pub struct Hub {
    clients: RwLock<HashMap<u64, Arc<Client>>>,
    room: broadcast::Sender<Bytes>,
    shards: Box<[Arc<Shard>]>,
    fan_out_started: Once,
    presence: Mutex<HashMap<String, Presence>>,
    next_id: AtomicU64,
    /// Where the fan-out counts the clients it drops as slow consumers.
    telemetry: Arc<Telemetry>,
    /// The cluster link (`link`, see `relay`); unset on a single box.
    link: OnceLock<Link>,
}

impl Hub {
    pub fn new(telemetry: Arc<Telemetry>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            clients: RwLock::new(HashMap::new()),
            room: broadcast::channel(RING).0,
            shards: (0..cores.clamp(1, MAX_SHARDS)).map(|_| Arc::new(Shard::default())).collect(),
            fan_out_started: Once::new(),
            presence: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            telemetry,
            link: OnceLock::new(),
        }
    }

    /// The cluster link, when this node is part of one (see `relay`).
    pub fn link(&self) -> Option<&Link> {
        self.link.get()
    }

    /// Join a cluster; a second call is ignored.
    pub fn set_link(&self, link: Link) {
        if self.link.set(link).is_err() {
            tracing::warn!("chat: the cluster link was already set");
        }
    }

    pub fn len(&self) -> usize {
        self.clients.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Register a connection whose socket writes through `writer`: it is listed, sent `first`, and
    /// only then joins its shard's fan-out (so that frame comes before any room frame). Returns the client and whether this is a fresh join (the
    /// user had no other connection and no pending part timer). The first call starts the fan-out
    /// threads.
    pub fn add(
        &self,
        user: User,
        ip: IpAddr,
        user_agent: String,
        writer: Arc<Writer>,
        first: Utf8Bytes,
    ) -> (Arc<Client>, bool) {
        self.fan_out_started.call_once(|| {
            for (n, shard) in self.shards.iter().enumerate() {
                let task = {
                    let (shard, room, telemetry) = (shard.clone(), self.room.subscribe(), self.telemetry.clone());
                    move || fan_out(&shard, room, &telemetry)
                };
                if let Err(e) = std::thread::Builder::new().name(format!("castd-chat-{n}")).spawn(task) {
                    // The thread's receiver went with the failed spawn; tokio's blocking pool gets a new one.
                    tracing::warn!("could not start a chat fan-out thread ({e}); using tokio's blocking pool");
                    let (shard, room, telemetry) = (shard.clone(), self.room.subscribe(), self.telemetry.clone());
                    tokio::task::spawn_blocking(move || fan_out(&shard, room, &telemetry));
                }
            }
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let client = Arc::new(Client {
            id,
            user_id: user.id.clone(),
            ip,
            user_agent,
            connected_at: Utc::now(),
            message_count: AtomicU64::new(0),
            user: RwLock::new(user),
            writer,
        });
        // Listed before it hears `first`: a client told it is connected is in the admin's client list.
        self.clients.write().insert(id, client.clone());
        client.send(first);
        let fresh = {
            let mut presence = self.presence.lock();
            let p = presence.entry(client.user_id.clone()).or_default();
            let fresh = p.connections == 0 && p.part_timer.is_none();
            if let Some(t) = p.part_timer.take() {
                t.cancel();
            }
            p.connections += 1;
            fresh
        };
        let shard = &self.shards[(id % self.shards.len() as u64) as usize];
        let mut incoming = shard.incoming.lock();
        // Without broadcasts nothing merges the list; forget closed connections as it grows.
        if incoming.len() >= 1024 && incoming.len().is_power_of_two() {
            incoming.retain(|w| !w.is_closed());
        }
        incoming.push(client.writer.clone());
        drop(incoming);
        (client, fresh)
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
    pub fn set_part_timer(&self, user_id: &str, timer: CancellationToken) {
        let mut presence = self.presence.lock();
        match presence.get_mut(user_id) {
            Some(p) if p.connections == 0 => {
                if let Some(old) = p.part_timer.replace(timer) {
                    old.cancel();
                }
            }
            _ => timer.cancel(),
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

    /// Send a frame to every connection (see the module docs); in a cluster, to every node's
    /// connections (`relay`: the origin fans out and queues it for the others in one order; an edge
    /// hands it to the origin, whose copy comes back to it).
    pub fn broadcast(&self, frame: Utf8Bytes) {
        match self.link.get() {
            None => self.broadcast_local(frame),
            Some(Link { role: Role::Origin(q), .. }) => {
                let entry = Outbound::Room { frame: frame.to_string() };
                q.push_with(|| self.broadcast_local(frame), entry);
            }
            Some(Link { role: Role::Edge(edge), node }) => {
                let msg = Inbound {
                    id: super::protocol::short_id(),
                    node: node.clone(),
                    client: 0,
                    user_id: String::new(),
                    ip: IpAddr::from([0, 0, 0, 0]),
                    kind: ROOM.into(),
                    body: None,
                    new_name: None,
                    new_color: None,
                    frame: Some(frame.to_string()),
                };
                edge.post(msg);
            }
        }
    }

    /// Send a frame to this node's connections only.
    pub fn broadcast_local(&self, frame: Utf8Bytes) {
        // An error only means nobody is connected (no fan-out thread yet).
        let _ = self.room.send(text_frame(frame.as_bytes()));
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

    /// Update the user object held by each of the user's connections (on every node of a cluster).
    pub fn update_user(&self, user: &User) {
        self.update_user_local(user);
        if let Some(Link { role: Role::Origin(q), .. }) = self.link.get() {
            q.push(Outbound::User { user: user.clone(), info: false });
        }
    }

    /// Update the user object held by each of the user's connections on this node.
    pub fn update_user_local(&self, user: &User) {
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

/// A shard's fan-out thread: the room's frames to every client of the shard, in ring order. Frames
/// that arrived while it was writing the previous ones go out together (one write per client), so
/// the busier the room, the fewer writes per frame. It ends when the hub is dropped.
fn fan_out(shard: &Shard, mut room: broadcast::Receiver<Bytes>, telemetry: &Telemetry) {
    let mut clients: Vec<Arc<Writer>> = Vec::new();
    let mut batch: Vec<Bytes> = Vec::new();
    loop {
        let mut next = room.blocking_recv();
        loop {
            match next {
                Ok(frame) => batch.push(frame),
                Err(broadcast::error::RecvError::Closed) if batch.is_empty() => return,
                Err(broadcast::error::RecvError::Closed) => break,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    clients.append(&mut shard.incoming.lock());
                    tracing::warn!(
                        missed,
                        clients = clients.len(),
                        "chat fan-out fell behind the room; disconnecting its clients"
                    );
                    for w in clients.drain(..) {
                        if !w.is_closed() {
                            telemetry.chat_slow_dropped(1);
                            w.kill();
                        }
                    }
                    batch.clear();
                    break;
                }
            }
            if batch.len() == MAX_BATCH {
                break;
            }
            next = match room.try_recv() {
                Ok(frame) => Ok(frame),
                Err(broadcast::error::TryRecvError::Lagged(n)) => Err(broadcast::error::RecvError::Lagged(n)),
                Err(broadcast::error::TryRecvError::Closed) => Err(broadcast::error::RecvError::Closed),
                Err(broadcast::error::TryRecvError::Empty) => break,
            };
        }
        if batch.is_empty() {
            continue;
        }
        clients.append(&mut shard.incoming.lock());
        let frame = if batch.len() == 1 { batch.pop().unwrap_or_default() } else { Bytes::from(batch.concat()) };
        batch.clear();
        let mut i = 0;
        while i < clients.len() {
            match clients[i].offer(&frame) {
                Offer::Sent | Offer::Queued => i += 1,
                Offer::Closed => {
                    clients.swap_remove(i);
                }
                Offer::Slow => {
                    telemetry.chat_slow_dropped(1);
                    tracing::debug!("a chat client was too slow; disconnected it");
                    clients.swap_remove(i);
                }
            }
        }
        if hops::on() {
            hops::mark_frames(hops::now_us(), "sent", &frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::socket::Sink;
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};

    /// A socket that takes every write whole and records each one.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Vec<u8>>>>);

    impl tokio::io::AsyncWrite for Recorder {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.0.lock().push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn client(shard: &Shard) -> (Arc<Writer>, Recorder) {
        let rec = Recorder::default();
        let writer = Arc::new(Writer::new(Sink::Other(Box::new(rec.clone()))));
        shard.incoming.lock().push(writer.clone());
        (writer, rec)
    }

    fn frame(i: usize) -> Bytes {
        text_frame(format!("frame {i}").as_bytes())
    }

    #[test]
    fn frames_waiting_in_the_ring_go_out_together_at_most_max_batch_at_a_time() {
        let (tx, room) = broadcast::channel(RING);
        let shard = Shard::default();
        let (_writer, rec) = client(&shard);
        let n = MAX_BATCH + 6;
        for i in 0..n {
            tx.send(frame(i)).unwrap();
        }
        drop(tx);
        let telemetry = Telemetry::default();
        fan_out(&shard, room, &telemetry);
        let writes = rec.0.lock().clone();
        let expected = |r: std::ops::Range<usize>| r.flat_map(|i| frame(i).to_vec()).collect::<Vec<u8>>();
        assert_eq!(writes.len(), 2, "{n} waiting frames take two writes");
        assert_eq!(writes[0], expected(0..MAX_BATCH), "the first write is the first MAX_BATCH frames, in order");
        assert_eq!(writes[1], expected(MAX_BATCH..n));
        assert_eq!(telemetry.chat_slow_dropped_total(), 0);
    }

    #[test]
    fn a_shard_that_falls_behind_the_ring_drops_its_clients_and_goes_on_serving() {
        let (tx, room) = broadcast::channel(4);
        let shard = Arc::new(Shard::default());
        let (behind, behind_rec) = client(&shard);
        for i in 0..10 {
            tx.send(frame(i)).unwrap();
        }
        let telemetry = Arc::new(Telemetry::default());
        let thread = std::thread::spawn({
            let (shard, telemetry) = (shard.clone(), telemetry.clone());
            move || fan_out(&shard, room, &telemetry)
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !behind.is_closed() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(behind.is_closed(), "the lagging shard's client is disconnected");
        assert_eq!(telemetry.chat_slow_dropped_total(), 1, "and counted as a slow consumer");
        assert!(behind_rec.0.lock().is_empty(), "it gets nothing of a room it cannot follow");

        let (later, later_rec) = client(&shard);
        tx.send(frame(99)).unwrap();
        drop(tx);
        thread.join().unwrap();
        assert!(!later.is_closed());
        let got: Vec<u8> = later_rec.0.lock().concat();
        assert!(got.ends_with(&frame(99)), "a client that joins later gets the room's next frames");
        assert_eq!(telemetry.chat_slow_dropped_total(), 1);
    }
}
