//! The cluster link's contract, shared by the hub (which forwards and queues through it) and `relay`
//! (which applies what comes back, see there for the whole picture): what the origin sends to every
//! node (`Outbound`), what an edge sends to the origin (`Inbound`), an edge's calls to the cluster
//! (`EdgeLink`, answered with a `Lookup`), the origin's ordered queue for the other nodes (`OutQueue`,
//! at most `OUT_QUEUE_MAX` entries, the oldest dropped beyond that), and this node's `Role` in its
//! `Link`. The `cluster` feature reaches these through `relay`, which re-exports them.
//!
//! Every channel's chat is a room of its own in the cluster: one `OutQueue` serves every room of the
//! origin, each entry tagged with its [`Room`] (the hub pushes through its room's [`RoomQueue`]), and an
//! edge's `EdgeLink` is one room's. What a room's name is made of is the cluster's business.

use std::collections::VecDeque;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::protocol::User;

/// Most entries the origin keeps for the other nodes while Redis is unreachable.
pub const OUT_QUEUE_MAX: usize = 65_536;

/// What the origin sends to every node (one entry of the outbound stream each).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Outbound {
    /// A room frame: every node fans it out to its clients.
    Room { frame: String },
    /// A frame for one client of one node (the answer to a remote client's message).
    Client { node: String, client: u64, frame: String },
    /// A user changed: every node updates its connections' copy (`info`: and sends them a fresh
    /// CONNECTED_USER_INFO).
    User { user: User, info: bool },
    /// Close a user's connections `delay_ms` after sending them `frame` (disabled, deleted).
    Kick { user_id: String, frame: Option<String>, delay_ms: u64 },
    /// An address was banned: every node refuses and closes its connections.
    Banned { ip: IpAddr },
}

/// What an edge sends to the origin (one entry of the inbound stream).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Inbound {
    /// Unique per message; a CHAT is stored under this id (at-least-once delivery is deduplicated).
    pub id: String,
    pub node: String,
    pub client: u64,
    pub user_id: String,
    pub ip: IpAddr,
    /// CHAT, NAME_CHANGE, COLOR_CHANGE, or ROOM (a room event the edge made: join/part).
    pub kind: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub new_name: Option<String>,
    #[serde(default)]
    pub new_color: Option<i64>,
    #[serde(default)]
    pub frame: Option<String>,
}

/// Kind of an [`Inbound`] that carries a room frame made by an edge.
pub const ROOM: &str = "ROOM";

/// The origin's answer to an edge asking who holds an access token (the edge's `/ws` check).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Lookup {
    Ok { user: User },
    Disabled { user: User },
    Unknown,
    Banned,
    ChatDisabled,
}

/// Which room an entry is for: [`DEFAULT_ROOM`] for the default channel's chat, else the name the
/// cluster gave a channel's chat.
pub type Room = Arc<str>;

/// The default channel's room.
pub const DEFAULT_ROOM: &str = "";

/// A boxed future (the edge link's calls).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What an edge's chat needs from the cluster (one room's link: what it sends is that room's).
pub trait EdgeLink: Send + Sync {
    /// Hand one client event to the origin; false when it was not taken (Redis unreachable).
    fn forward(&self, msg: Inbound) -> BoxFuture<bool>;
    /// Hand a room notice (join/part) to the origin when it can be; not waited for, not retried.
    fn post(&self, msg: Inbound);
    /// Ask the origin who holds `token` (connecting from `ip`); `Err` when the origin cannot answer.
    fn lookup(&self, token: String, ip: IpAddr) -> BoxFuture<Result<Lookup, String>>;
}

/// This node's place in the cluster.
pub enum Role {
    Origin(RoomQueue),
    Edge(Arc<dyn EdgeLink>),
}

/// The hub's link to the cluster (see the module doc).
pub struct Link {
    /// This node's name (unique in the cluster).
    pub node: String,
    pub role: Role,
}

/// One room's handle on the origin's [`OutQueue`]: what it pushes is tagged with its room.
#[derive(Clone)]
pub struct RoomQueue {
    pub queue: Arc<OutQueue>,
    pub room: Room,
}

impl RoomQueue {
    /// [`OutQueue::push_with`] for this room.
    pub fn push_with(&self, local: impl FnOnce(), entry: Outbound) {
        self.queue.push_with(self.room.clone(), local, entry);
    }

    pub fn push(&self, entry: Outbound) {
        self.push_with(|| {}, entry);
    }
}

/// An entry of the [`OutQueue`]: what one room's nodes must be sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub room: Room,
    pub entry: Outbound,
}

/// The origin's ordered queue of what the other nodes must be sent (see the module doc). Entries are
/// numbered in push order, so the inbound consumer can wait until what it queued is written
/// (`mark`, `written`) before it acknowledges the inbound entries that made it.
#[derive(Default)]
pub struct OutQueue {
    queue: Mutex<Entries>,
    ready: Notify,
    /// Wakes `written` when entries leave the front.
    removed: Notify,
    dropped: AtomicU64,
}

#[derive(Default)]
struct Entries {
    entries: VecDeque<Queued>,
    /// How many entries ever left the front (written, or dropped for room).
    head: u64,
}

impl OutQueue {
    /// Queue `entry` and run `local` (the local fan-out) under one lock, so the nodes get the room's
    /// frames in the order the origin's clients did. The writer is woken before the local fan-out
    /// starts: the fan-out threads then compete for the cores, and the other nodes' copy should not
    /// wait for them (issue 44: on a busy box that wait was most of the write-out's time).
    pub fn push_with(&self, room: Room, local: impl FnOnce(), entry: Outbound) {
        let mut q = self.queue.lock();
        if q.entries.len() >= OUT_QUEUE_MAX {
            q.entries.pop_front();
            q.head += 1;
            let n = self.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(
                    dropped = n + 1,
                    "cluster: the outbound queue is full (Redis down?); dropping the oldest"
                );
            }
        }
        q.entries.push_back(Queued { room, entry });
        self.ready.notify_one();
        local();
    }

    /// Up to `max` entries from the front (left in the queue until `consume`); waits for one.
    pub async fn peek(&self, max: usize) -> Vec<Queued> {
        loop {
            let notified = self.ready.notified();
            {
                let q = self.queue.lock();
                if !q.entries.is_empty() {
                    return q.entries.iter().take(max).cloned().collect();
                }
            }
            notified.await;
        }
    }

    /// Remove `n` entries from the front (they were sent). Entries dropped meanwhile for room are not
    /// removed twice: only what is still there is.
    pub fn consume(&self, sent: &[Queued]) {
        let mut q = self.queue.lock();
        for s in sent {
            if q.entries.front() == Some(s) {
                q.entries.pop_front();
                q.head += 1;
            } else {
                break;
            }
        }
        drop(q);
        self.removed.notify_waiters();
    }

    /// The number the next pushed entry gets: `written(mark())` waits for everything queued so far.
    pub fn mark(&self) -> u64 {
        let q = self.queue.lock();
        q.head + q.entries.len() as u64
    }

    /// Wait until every entry numbered below `mark` has left the queue (written to Redis, or dropped
    /// for room while Redis was down).
    pub async fn written(&self, mark: u64) {
        loop {
            let removed = self.removed.notified();
            if self.queue.lock().head >= mark {
                return;
            }
            removed.await;
        }
    }

    pub fn len(&self) -> usize {
        self.queue.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::protocol as p;
    use super::*;

    fn room(i: usize) -> Queued {
        Queued { room: Room::from(if i.is_multiple_of(2) { DEFAULT_ROOM } else { "music/1" }), entry: frame(i) }
    }

    fn frame(i: usize) -> Outbound {
        Outbound::Room { frame: format!("f{i}") }
    }

    /// `OutQueue::push` of `room(i)`, through its room's queue.
    trait PushRoom {
        fn push(&self, q: Queued);
    }

    impl PushRoom for Arc<OutQueue> {
        fn push(&self, q: Queued) {
            RoomQueue { queue: self.clone(), room: q.room }.push(q.entry);
        }
    }

    #[tokio::test]
    async fn the_queue_keeps_order_until_sent_and_drops_the_oldest_when_full() {
        let q = Arc::new(OutQueue::default());
        for i in 0..3 {
            q.push(room(i));
        }
        let first = q.peek(2).await;
        assert_eq!(first, vec![room(0), room(1)]);
        assert_eq!(q.len(), 3, "peeked entries stay until consumed");
        q.consume(&first);
        assert_eq!(q.peek(10).await, vec![room(2)]);
        for i in 3..OUT_QUEUE_MAX + 3 {
            q.push(room(i));
        }
        assert_eq!(q.len(), OUT_QUEUE_MAX);
        assert_eq!(q.peek(1).await, vec![room(3)], "the oldest went");
    }

    #[tokio::test]
    async fn written_waits_for_what_was_queued_before_the_mark() {
        let q = Arc::new(OutQueue::default());
        q.push(room(0));
        q.push(room(1));
        let mark = q.mark();
        assert_eq!(mark, 2);
        q.push(room(2));
        let batch = q.peek(1).await;
        q.consume(&batch);
        let waiting = tokio::time::timeout(Duration::from_millis(50), q.written(mark)).await;
        assert!(waiting.is_err(), "one of the two entries is still queued");
        let batch = q.peek(1).await;
        q.consume(&batch);
        tokio::time::timeout(Duration::from_secs(1), q.written(mark)).await.expect("both written");
        assert_eq!(q.len(), 1, "the entry after the mark is not waited for");
    }

    #[test]
    fn entries_round_trip_as_json() {
        let i = Inbound {
            id: "abc".into(),
            node: "edge-1".into(),
            client: 7,
            user_id: "u".into(),
            ip: "203.0.113.9".parse().unwrap(),
            kind: p::CHAT.into(),
            body: Some("hi".into()),
            new_name: None,
            new_color: None,
            frame: None,
        };
        let back: Inbound = serde_json::from_str(&serde_json::to_string(&i).unwrap()).unwrap();
        assert_eq!(back, i);
        let o = Outbound::Banned { ip: "::1".parse().unwrap() };
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(json, r#"{"t":"banned","ip":"::1"}"#);
        assert_eq!(serde_json::from_str::<Outbound>(&json).unwrap(), o);
    }
}
