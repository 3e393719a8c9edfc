//! The cluster's Redis work: the inbound stream (edges → origin, consumer group), the outbound stream
//! (origin → every edge, each reading from the last entry it saw), presence counts, and the edge's
//! token check against the origin (HTTP). See the module doc of `cluster` for the design.
//!
//! Rooms: both streams carry every channel's chat. An entry of the default channel's room holds its
//! JSON in the field `m`, as before channels had rooms; an entry of another channel's holds its room
//! (`cluster::room_of`) in `ch` and its JSON in `cm`, so a node that knows no rooms (an older castd)
//! finds no `m` and skips it rather than applying another channel's message to its default room. A
//! reader hands each entry to the chat of its room, and drops (and, on the origin, acknowledges) one
//! whose room it has not got: a deleted channel's, or an older channel's that had the slug.
//!
//! Connections: each task holds its own multiplexed connection, opened again after any error (with a
//! pause of `RETRY`); every command is bounded by `COMMAND_TIMEOUT` (a blocking read by its block time
//! plus that), so a Redis that stops answering looks like one that is down.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Cluster, ClusterConfig};
use crate::chat::relay::{self, hops, BoxFuture, EdgeLink, Inbound, Lookup, OutQueue, Outbound, Room, DEFAULT_ROOM};
use crate::tasks::{Stage, Tasks};

/// Edges → origin.
pub const IN_STREAM: &str = "castd:chat:in";
/// The origin's consumer group on `IN_STREAM`.
pub const GROUP: &str = "origin";
/// Origin → every node.
pub const OUT_STREAM: &str = "castd:chat:out";
/// Presence keys: `castd:presence:<node>`.
pub const PRESENCE_PREFIX: &str = "castd:presence:";
/// The set of node names that wrote presence.
pub const NODES_KEY: &str = "castd:nodes";
/// About how many entries each stream keeps (approximate trimming).
const IN_MAX: usize = 100_000;
const OUT_MAX: usize = 20_000;
const COMMAND_TIMEOUT: Duration = Duration::from_secs(3);
const BLOCK_MS: u64 = 2_000;
const RETRY: Duration = Duration::from_millis(500);
/// How often a node writes its counts, and how long they live: a node that stopped writing (killed)
/// leaves the origin's counts within `PRESENCE_TTL_SECS` + `PRESENCE_EVERY` (the origin's next read),
/// 25 s, inside the 30 s promised.
const PRESENCE_EVERY: Duration = Duration::from_secs(5);
const PRESENCE_TTL_SECS: u64 = 20;
/// How long an edge keeps the origin's answer about a token.
const LOOKUP_TTL: Duration = Duration::from_secs(1);

async fn connect(client: &redis::Client) -> Option<MultiplexedConnection> {
    match tokio::time::timeout(COMMAND_TIMEOUT, client.get_multiplexed_async_connection()).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::debug!("cluster: Redis connection failed: {e}");
            None
        }
        Err(_) => None,
    }
}

/// Connect, retrying every `RETRY` until it works or the stage stops (`None`).
async fn connect_retrying(client: &redis::Client, what: &str) -> MultiplexedConnection {
    let mut warned = false;
    loop {
        if let Some(c) = connect(client).await {
            if warned {
                tracing::info!("cluster: {what}: Redis is back");
            }
            return c;
        }
        if !warned {
            tracing::warn!("cluster: {what}: Redis is unreachable; retrying");
            warned = true;
        }
        tokio::time::sleep(RETRY).await;
    }
}

async fn query<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    cmd: &redis::Cmd,
    limit: Duration,
) -> Result<T, String> {
    match tokio::time::timeout(limit, cmd.query_async::<T>(conn)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// The field of a default room's entry (its JSON).
const FIELD: &str = "m";
/// The fields of another room's entry: its room, its JSON.
const ROOM_FIELD: &str = "ch";
const ROOM_JSON_FIELD: &str = "cm";

fn xadd(stream: &str, max: usize, room: &str, json: &str) -> redis::Cmd {
    let mut c = redis::cmd("XADD");
    c.arg(stream).arg("MAXLEN").arg("~").arg(max).arg("*");
    if room == DEFAULT_ROOM {
        c.arg(FIELD).arg(json);
    } else {
        c.arg(ROOM_FIELD).arg(room).arg(ROOM_JSON_FIELD).arg(json);
    }
    c
}

/// An entry's room and JSON (`None`: an entry of neither shape).
fn entry_of(entry: &redis::streams::StreamId) -> Option<(String, String)> {
    match entry.get::<String>(ROOM_FIELD) {
        Some(room) if room != DEFAULT_ROOM => Some((room, entry.get::<String>(ROOM_JSON_FIELD)?)),
        _ => Some((DEFAULT_ROOM.to_string(), entry.get::<String>(FIELD)?)),
    }
}

/// A stream id as `(ms, seq)`, for comparing.
fn parse_id(id: &str) -> (u64, u64) {
    let (a, b) = id.split_once('-').unwrap_or((id, "0"));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}

// ---------------------------------------------------------------------------------------------- edge

/// An edge's side of the chat link, every room's (each room's `chat::relay::EdgeLink` is an [`EdgeRoom`]).
pub struct Edge {
    config: ClusterConfig,
    redis: redis::Client,
    http: reqwest::Client,
    /// The connection for forwards (opened on demand, dropped after an error).
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// Room notices waiting to be handed to the origin (`post`), at most `POSTS_MAX`.
    posts: Mutex<VecDeque<(Room, Inbound)>>,
    posted: Notify,
    lookups: Mutex<HashMap<LookupKey, (Instant, Lookup)>>,
}

/// A token check as an edge keeps its answer: the room, the token, the client's address.
type LookupKey = (Room, String, IpAddr);

const POSTS_MAX: usize = 1024;

impl Edge {
    pub fn new(config: ClusterConfig, redis: redis::Client, http: reqwest::Client) -> Edge {
        Edge {
            config,
            redis,
            http,
            conn: tokio::sync::Mutex::new(None),
            posts: Mutex::new(VecDeque::new()),
            posted: Notify::new(),
            lookups: Mutex::new(HashMap::new()),
        }
    }

    async fn add(&self, room: &str, msg: &Inbound) -> bool {
        let Ok(json) = serde_json::to_string(msg) else { return false };
        let mut conn = {
            let mut slot = self.conn.lock().await;
            if slot.is_none() {
                *slot = connect(&self.redis).await;
            }
            match slot.as_ref() {
                Some(c) => c.clone(),
                None => return false,
            }
        };
        match query::<String>(&mut conn, &xadd(IN_STREAM, IN_MAX, room, &json), COMMAND_TIMEOUT).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("cluster: could not hand a chat event to the origin: {e}");
                *self.conn.lock().await = None;
                false
            }
        }
    }

    async fn ask_origin(&self, room: &str, token: &str, ip: IpAddr) -> Result<Lookup, String> {
        let ip = ip.to_string();
        let mut query = vec![("accessToken", token), ("ip", ip.as_str())];
        if room != DEFAULT_ROOM {
            query.push(("room", room));
        }
        self.config.ask_origin(&self.http, "/api/cluster/chat/lookup", &query, COMMAND_TIMEOUT).await
    }
}

/// One room's link on an edge (`chat::relay::EdgeLink`): what its chat forwards and posts goes on the
/// inbound stream as that room's, and its token checks ask the origin about that room's users.
pub struct EdgeRoom {
    edge: Arc<Edge>,
    room: Room,
}

impl EdgeRoom {
    pub fn new(edge: Arc<Edge>, room: Room) -> EdgeRoom {
        EdgeRoom { edge, room }
    }
}

impl EdgeLink for EdgeRoom {
    fn forward(&self, msg: Inbound) -> BoxFuture<bool> {
        let (me, room) = (self.edge.clone(), self.room.clone());
        Box::pin(async move { me.add(&room, &msg).await })
    }

    fn post(&self, msg: Inbound) {
        let mut posts = self.edge.posts.lock();
        if posts.len() >= POSTS_MAX {
            posts.pop_front();
        }
        posts.push_back((self.room.clone(), msg));
        drop(posts);
        self.edge.posted.notify_one();
    }

    fn lookup(&self, token: String, ip: IpAddr) -> BoxFuture<Result<Lookup, String>> {
        let (me, room) = (self.edge.clone(), self.room.clone());
        Box::pin(async move {
            let key = (room, token, ip);
            if let Some((at, found)) = me.lookups.lock().get(&key) {
                if at.elapsed() < LOOKUP_TTL {
                    return Ok(found.clone());
                }
            }
            let found = me.ask_origin(&key.0, &key.1, ip).await?;
            let mut cache = me.lookups.lock();
            if cache.len() > 10_000 {
                cache.retain(|_, (at, _)| at.elapsed() < LOOKUP_TTL);
            }
            cache.insert(key, (Instant::now(), found.clone()));
            Ok(found)
        })
    }
}

/// The edge's tasks: read the outbound stream into the local room, hand room notices to the origin.
pub fn start_edge(cluster: Arc<Cluster>, edge: Arc<Edge>, tasks: &Tasks) {
    let c = cluster.clone();
    tasks.spawn_until_stopped(Stage::Connections, "cluster: outbound reader", async move {
        read_outbound(&c).await;
    });
    tasks.spawn_until_stopped(Stage::Connections, "cluster: room notices", async move {
        loop {
            let next = edge.posts.lock().pop_front();
            match next {
                Some((room, msg)) => {
                    if !edge.add(&room, &msg).await {
                        tracing::debug!("cluster: dropped a room notice (Redis unreachable)");
                    }
                }
                None => edge.posted.notified().await,
            }
        }
    });
}

/// Follow `OUT_STREAM` from the newest entry at start and apply each entry to its room's chat. After a
/// reconnection it goes on from the last entry seen; if the stream is behind that (a Redis that
/// restarted empty), from its start.
async fn read_outbound(cluster: &Cluster) {
    let mut last: Option<String> = None;
    let mut recent = Recent::default();
    loop {
        let mut conn = connect_retrying(&cluster.redis, "outbound reader").await;
        if let Some(seen) = &last {
            let mut c = redis::cmd("XREVRANGE");
            c.arg(OUT_STREAM).arg("+").arg("-").arg("COUNT").arg(1);
            match query::<redis::streams::StreamRangeReply>(&mut conn, &c, COMMAND_TIMEOUT).await {
                Ok(r) => {
                    let top = r.ids.first().map(|i| parse_id(&i.id)).unwrap_or((0, 0));
                    if top < parse_id(seen) {
                        tracing::warn!("cluster: the outbound stream restarted; reading it from its start");
                        last = Some("0-0".into());
                    }
                }
                Err(_) => continue,
            }
        }
        loop {
            let from = last.clone().unwrap_or_else(|| "$".into());
            let mut c = redis::cmd("XREAD");
            c.arg("COUNT").arg(512).arg("BLOCK").arg(BLOCK_MS).arg("STREAMS").arg(OUT_STREAM).arg(&from);
            let limit = Duration::from_millis(BLOCK_MS) + COMMAND_TIMEOUT;
            let reply = match query::<Option<StreamReadReply>>(&mut conn, &c, limit).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("cluster: reading the outbound stream: {e}");
                    tokio::time::sleep(RETRY).await;
                    break;
                }
            };
            let read_at = hops::now_us();
            let Some(reply) = reply else {
                if last.is_none() {
                    // Nothing yet: from here on, resume after "the start" rather than "$" (an entry
                    // added while reconnecting is not skipped).
                    last = Some(newest_id(&mut conn).await.unwrap_or_else(|| "0-0".into()));
                }
                continue;
            };
            for key in reply.keys {
                for entry in key.ids {
                    let Some((room, json)) = entry_of(&entry) else {
                        tracing::warn!(id = %entry.id, "cluster: an unreadable outbound entry");
                        last = Some(entry.id);
                        continue;
                    };
                    let Some(chat) = cluster.chat_of(&room) else {
                        tracing::debug!(id = %entry.id, %room, "cluster: an outbound entry of a room this edge has not got");
                        last = Some(entry.id);
                        continue;
                    };
                    match serde_json::from_str::<Outbound>(&json) {
                        Ok(Outbound::Room { frame }) if !recent.first_time(&frame) => {
                            tracing::debug!(id = %entry.id, "cluster: a room event sent again; already applied");
                        }
                        Ok(out) => {
                            let traced = match &out {
                                Outbound::Room { frame } if hops::on() => Some(frame.clone()),
                                _ => None,
                            };
                            if let Some(f) = &traced {
                                hops::mark_frames(read_at, "node_read", f.as_bytes());
                            }
                            relay::apply(&chat, out);
                            if let Some(f) = &traced {
                                hops::mark_frames(hops::now_us(), "node_fanout", f.as_bytes());
                            }
                        }
                        _ => tracing::warn!(id = %entry.id, "cluster: an unreadable outbound entry"),
                    }
                    last = Some(entry.id);
                }
            }
        }
    }
}

/// The event ids of the last `RECENT_MAX` room frames an edge applied: the origin sends a CHAT again
/// when it was redelivered its inbound entry (`chat::relay::resend`), and a node that had the first
/// copy drops the second.
#[derive(Default)]
struct Recent {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

const RECENT_MAX: usize = 8192;

impl Recent {
    /// Whether `frame`'s event was not seen yet (remembering it); a frame without an id is always new.
    fn first_time(&mut self, frame: &str) -> bool {
        #[derive(serde::Deserialize)]
        struct Event {
            id: String,
        }
        let Ok(Event { id }) = serde_json::from_str::<Event>(frame) else { return true };
        if self.ids.contains(&id) {
            return false;
        }
        if self.order.len() >= RECENT_MAX {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        self.ids.insert(id.clone());
        self.order.push_back(id);
        true
    }
}

async fn newest_id(conn: &mut MultiplexedConnection) -> Option<String> {
    let mut c = redis::cmd("XREVRANGE");
    c.arg(OUT_STREAM).arg("+").arg("-").arg("COUNT").arg(1);
    let r = query::<redis::streams::StreamRangeReply>(conn, &c, COMMAND_TIMEOUT).await.ok()?;
    Some(r.ids.first().map_or_else(|| "0-0".to_string(), |i| i.id.clone()))
}

// -------------------------------------------------------------------------------------------- origin

/// The origin's tasks: write the outbound queue to `OUT_STREAM`, consume `IN_STREAM`.
///
/// An inbound entry is acknowledged only after what handling it queued for the other nodes was
/// written to Redis, so an origin that stops (or is killed) in between is redelivered the entry at
/// its next start, and a message is never stored but unsent (`chat::relay::resend`). At shutdown the
/// consumer finishes the entry it is handling, then waits up to `FLUSH_AT_STOP` for the writer to
/// hand the queue to Redis; the writer runs in the later `Background` stage for that.
pub fn start_origin(cluster: Arc<Cluster>, queue: Arc<OutQueue>, tasks: &Tasks) {
    let redis = cluster.redis.clone();
    let q = queue.clone();
    tasks.spawn_until_stopped(Stage::Background, "cluster: outbound writer", async move {
        write_outbound(&redis, &q).await;
    });
    let stop = tasks.token(Stage::Connections);
    tasks.spawn(Stage::Connections, "cluster: inbound consumer", async move {
        consume_inbound(&cluster, &queue, &stop).await;
        let deadline = Instant::now() + FLUSH_AT_STOP;
        while !queue.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// How long the origin's shutdown waits for what the other nodes have not been sent yet.
const FLUSH_AT_STOP: Duration = Duration::from_secs(1);

async fn write_outbound(redis: &redis::Client, queue: &OutQueue) {
    loop {
        let mut conn = connect_retrying(redis, "outbound writer").await;
        loop {
            let batch = queue.peek(256).await;
            let mut pipe = redis::pipe();
            for queued in &batch {
                let Ok(json) = serde_json::to_string(&queued.entry) else { continue };
                pipe.add_command(xadd(OUT_STREAM, OUT_MAX, &queued.room, &json)).ignore();
            }
            match tokio::time::timeout(COMMAND_TIMEOUT, pipe.query_async::<()>(&mut conn)).await {
                Ok(Ok(())) => {
                    queue.consume(&batch);
                    if hops::on() {
                        let at = hops::now_us();
                        for queued in &batch {
                            if let Outbound::Room { frame } = &queued.entry {
                                hops::mark_frames(at, "written", frame.as_bytes());
                            }
                        }
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(waiting = queue.len(), "cluster: writing to the outbound stream: {e}");
                    tokio::time::sleep(RETRY).await;
                    break;
                }
                Err(_) => {
                    tracing::warn!(waiting = queue.len(), "cluster: writing to the outbound stream timed out");
                    break;
                }
            }
        }
    }
}

/// Most handled batches waiting for their acknowledgement; when full the consumer waits (only while
/// the writer cannot reach Redis: reading more would only grow the outbound queue).
const ACKS_MAX: usize = 1024;

/// A batch of handled inbound entries, to acknowledge once the outbound queue is written up to `mark`.
struct Handled {
    mark: u64,
    entries: Vec<String>,
    /// The CHAT ids among them (only while hops are traced).
    chats: Vec<String>,
}

/// Read and handle the inbound stream; a second task of the same life acknowledges what was
/// handled once what it made is written for the other nodes, so the next read never waits for the
/// write-out and the acknowledgement (issue 44: that wait held every message behind its batch's).
async fn consume_inbound(cluster: &Cluster, queue: &OutQueue, stop: &CancellationToken) {
    let (tx, rx) = tokio::sync::mpsc::channel(ACKS_MAX);
    tokio::join!(read_inbound(cluster, queue, tx, stop), acknowledge(cluster, queue, rx, stop));
}

async fn read_inbound(
    cluster: &Cluster,
    queue: &OutQueue,
    acks: tokio::sync::mpsc::Sender<Handled>,
    stop: &CancellationToken,
) {
    let consumer = cluster.config.node.clone();
    while !stop.is_cancelled() {
        let mut conn = tokio::select! {
            c = connect_retrying(&cluster.redis, "inbound consumer") => c,
            _ = stop.cancelled() => return,
        };
        let mut create = redis::cmd("XGROUP");
        create.arg("CREATE").arg(IN_STREAM).arg(GROUP).arg("0").arg("MKSTREAM");
        if let Err(e) = query::<()>(&mut conn, &create, COMMAND_TIMEOUT).await {
            if !e.contains("BUSYGROUP") {
                tracing::warn!("cluster: creating the inbound consumer group: {e}");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        }
        // What was delivered to this consumer but not acknowledged (a restart) comes first.
        let mut pending = true;
        loop {
            let mut c = redis::cmd("XREADGROUP");
            c.arg("GROUP").arg(GROUP).arg(&consumer).arg("COUNT").arg(256);
            if !pending {
                c.arg("BLOCK").arg(BLOCK_MS);
            }
            c.arg("STREAMS").arg(IN_STREAM).arg(if pending { "0" } else { ">" });
            let limit = Duration::from_millis(BLOCK_MS) + COMMAND_TIMEOUT;
            let read = tokio::select! {
                r = query::<Option<StreamReadReply>>(&mut conn, &c, limit) => r,
                // Entries read but not handled stay pending for the next start.
                _ = stop.cancelled() => return,
            };
            let reply = match read {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("cluster: reading the inbound stream: {e}");
                    tokio::time::sleep(RETRY).await;
                    break;
                }
            };
            let read_at = hops::now_us();
            let mut chats = Vec::new();
            let entries: Vec<_> = reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids).collect();
            if entries.is_empty() {
                pending = false;
                continue;
            }
            let mut handled = Vec::with_capacity(entries.len());
            for entry in entries {
                if stop.is_cancelled() {
                    break;
                }
                let read =
                    entry_of(&entry).and_then(|(room, m)| Some((room, serde_json::from_str::<Inbound>(&m).ok()?)));
                match read {
                    Some((room, msg)) => match cluster.chat_of(&room) {
                        Some(chat) => {
                            if hops::on() && msg.kind == crate::chat::protocol::CHAT {
                                hops::mark_at(read_at, "origin_read", &msg.id);
                                chats.push(msg.id.clone());
                            }
                            crate::chat::ws::handle_remote(&chat, msg).await
                        }
                        // A deleted channel's, or an older channel's of the slug: acknowledged, dropped.
                        None => {
                            tracing::debug!(id = %entry.id, %room, "cluster: an inbound entry of a room the origin has not got")
                        }
                    },
                    None => tracing::warn!(id = %entry.id, "cluster: an unreadable inbound entry"),
                }
                handled.push(entry.id);
            }
            if handled.is_empty() {
                return;
            }
            // Acknowledged only once what they made is written for the other nodes: an origin that
            // stops in between is redelivered them at its next start (a CHAT is then found stored,
            // not stored again, and sent again: `chat::relay::resend`).
            let batch = Handled { mark: queue.mark(), entries: handled, chats };
            if acks.send(batch).await.is_err() || stop.is_cancelled() {
                return;
            }
        }
    }
}

/// Acknowledge each handled batch, in order, once the outbound queue was written up to its mark.
/// After the stop it goes on for at most `FLUSH_AT_STOP`; what it could not acknowledge stays
/// pending (redelivered at the next start, or at the consumer's next connection to Redis).
async fn acknowledge(
    cluster: &Cluster,
    queue: &OutQueue,
    mut batches: tokio::sync::mpsc::Receiver<Handled>,
    stop: &CancellationToken,
) {
    let flushed = async {
        stop.cancelled().await;
        tokio::time::sleep(FLUSH_AT_STOP).await;
    };
    tokio::pin!(flushed);
    let mut conn: Option<MultiplexedConnection> = None;
    while let Some(batch) = batches.recv().await {
        let written = tokio::select! {
            biased;
            _ = queue.written(batch.mark) => true,
            _ = &mut flushed => false,
        };
        if !written {
            return;
        }
        if conn.is_none() {
            conn = connect(&cluster.redis).await;
        }
        let Some(c) = conn.as_mut() else {
            tracing::warn!(n = batch.entries.len(), "cluster: inbound entries left pending (Redis unreachable)");
            continue;
        };
        let mut ack = redis::cmd("XACK");
        ack.arg(IN_STREAM).arg(GROUP).arg(&batch.entries);
        if let Err(e) = query::<i64>(c, &ack, COMMAND_TIMEOUT).await {
            // Redelivered later: a CHAT is then found stored and sent again, not stored again.
            tracing::warn!("cluster: acknowledging inbound entries: {e}");
            conn = None;
            continue;
        }
        for id in &batch.chats {
            hops::mark("acked", id);
        }
    }
}

// ------------------------------------------------------------------------------------------ presence

/// Every node's counts, as presence (see the `cluster` module doc).
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub chat_clients: u64,
    pub viewers: u64,
    /// The node's chat clients of the default channel as the admin lists them (at most
    /// `PRESENCE_CLIENTS_MAX` in all, with `rooms`').
    #[serde(default)]
    pub clients: Vec<crate::chat::hub::ClientInfo>,
    /// Every other channel's chat clients on the node, by room.
    #[serde(default)]
    pub rooms: std::collections::BTreeMap<String, Vec<crate::chat::hub::ClientInfo>>,
}

/// Most clients a node lists in its presence.
const PRESENCE_CLIENTS_MAX: usize = 20_000;

/// Write this node's counts every `PRESENCE_EVERY` (expiring after `PRESENCE_TTL_SECS`); on the
/// origin, read the others' into the viewer count and the admin's client list.
pub fn start_presence(cluster: Arc<Cluster>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "cluster: presence", async move {
        let key = format!("{PRESENCE_PREFIX}{}", cluster.config.node);
        let mut conn: Option<MultiplexedConnection> = None;
        loop {
            if conn.is_none() {
                conn = connect(&cluster.redis).await;
            }
            if let Some(c) = conn.as_mut() {
                // Thousands of clients are megabytes of JSON: made on the blocking pool, so the
                // runtime's workers (the relay's reads and writes among them) never wait for it.
                let of = cluster.clone();
                let json = tokio::task::spawn_blocking(move || {
                    let mut clients = of.chat.hub.infos(None);
                    clients.truncate(PRESENCE_CLIENTS_MAX);
                    let mut left = PRESENCE_CLIENTS_MAX - clients.len();
                    let mut rooms = std::collections::BTreeMap::new();
                    for (room, chat) in of.rooms() {
                        let mut listed = chat.hub.infos(None);
                        listed.truncate(left);
                        left -= listed.len();
                        rooms.insert(room.to_string(), listed);
                    }
                    let counts =
                        Counts { chat_clients: of.chat.hub.len() as u64, viewers: of.viewers.get().0, clients, rooms };
                    serde_json::to_string(&counts).unwrap_or_default()
                })
                .await
                .unwrap_or_default();
                let mut pipe = redis::pipe();
                pipe.cmd("SET").arg(&key).arg(json).arg("EX").arg(PRESENCE_TTL_SECS).ignore();
                pipe.cmd("SADD").arg(NODES_KEY).arg(&cluster.config.node).ignore();
                if !matches!(tokio::time::timeout(COMMAND_TIMEOUT, pipe.query_async::<()>(c)).await, Ok(Ok(()))) {
                    conn = None;
                }
            }
            if !cluster.is_edge() {
                match others(&cluster).await {
                    Ok(nodes) => {
                        let viewers = nodes.iter().map(|(_, c)| c.viewers).sum();
                        cluster.viewers.remote.store(viewers, std::sync::atomic::Ordering::Relaxed);
                        for (room, chat) in cluster.rooms() {
                            let of_room = nodes
                                .iter()
                                .map(|(n, c)| (n.clone(), c.rooms.get(&*room).cloned().unwrap_or_default()));
                            chat.set_remote_clients(of_room.collect());
                        }
                        cluster.chat.set_remote_clients(nodes.into_iter().map(|(n, c)| (n, c.clients)).collect());
                    }
                    // Redis down: the last counts stand until it is back (or the nodes' keys expire).
                    Err(e) => tracing::debug!("cluster: presence: {e}"),
                }
            }
            tokio::time::sleep(PRESENCE_EVERY).await;
        }
    });
}

/// The counts of every other node that is alive (its presence key has not expired).
pub async fn others(cluster: &Cluster) -> Result<Vec<(String, Counts)>, String> {
    let mut conn = connect(&cluster.redis).await.ok_or("Redis is unreachable")?;
    let nodes: Vec<String> = query(&mut conn, redis::cmd("SMEMBERS").arg(NODES_KEY), COMMAND_TIMEOUT).await?;
    let nodes: Vec<String> = nodes.into_iter().filter(|n| *n != cluster.config.node).collect();
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let mut mget = redis::cmd("MGET");
    for n in &nodes {
        mget.arg(format!("{PRESENCE_PREFIX}{n}"));
    }
    let values: Vec<Option<String>> = query(&mut conn, &mget, COMMAND_TIMEOUT).await?;
    // Parsed on the blocking pool (megabytes with thousands of clients, see `start_presence`).
    let counts: Vec<Option<Counts>> = tokio::task::spawn_blocking(move || {
        values.into_iter().map(|v| v.and_then(|v| serde_json::from_str::<Counts>(&v).ok())).collect()
    })
    .await
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (node, c) in nodes.into_iter().zip(counts) {
        match c {
            Some(c) => out.push((node, c)),
            None => {
                // Expired: the node is gone.
                let _ = query::<i64>(&mut conn, redis::cmd("SREM").arg(NODES_KEY).arg(&node), COMMAND_TIMEOUT).await;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_entry(fields: &[(&str, &str)]) -> redis::streams::StreamId {
        let map =
            fields.iter().map(|(k, v)| (k.to_string(), redis::Value::BulkString(v.as_bytes().to_vec()))).collect();
        redis::streams::StreamId { id: "1-0".into(), map }
    }

    /// The fields `xadd` writes after the id (`*`).
    fn fields(c: &redis::Cmd) -> Vec<String> {
        let args: Vec<String> = c
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                redis::Arg::Cursor => String::new(),
            })
            .collect();
        let star = args.iter().position(|a| a == "*").unwrap();
        args[star + 1..].to_vec()
    }

    #[test]
    fn an_entry_names_its_room_and_a_node_without_rooms_reads_only_the_default_room_s() {
        assert_eq!(fields(&xadd(OUT_STREAM, 10, DEFAULT_ROOM, "{}")), ["m", "{}"], "the default room's as before");
        assert_eq!(fields(&xadd(OUT_STREAM, 10, "music/7", "{}")), ["ch", "music/7", "cm", "{}"]);
        assert_eq!(entry_of(&stream_entry(&[("m", "{}")])), Some((DEFAULT_ROOM.to_string(), "{}".to_string())));
        let other = stream_entry(&[("ch", "music/7"), ("cm", r#"{"t":"banned","ip":"::1"}"#)]);
        assert_eq!(entry_of(&other), Some(("music/7".to_string(), r#"{"t":"banned","ip":"::1"}"#.to_string())));
        assert!(other.get::<String>("m").is_none(), "an older castd (it reads `m`) skips another room's entry");
        assert_eq!(entry_of(&stream_entry(&[("ch", "music/7")])), None, "a room without its JSON");
        assert_eq!(entry_of(&stream_entry(&[("x", "{}")])), None);
    }

    #[test]
    fn an_edge_applies_a_room_event_once() {
        let mut r = Recent::default();
        assert!(r.first_time(r#"{"id":"a","type":"CHAT","body":"x"}"#));
        assert!(r.first_time(r#"{"id":"b","type":"CHAT"}"#));
        assert!(!r.first_time(r#"{"type":"CHAT","id":"a","body":"x (sent again)"}"#), "the second copy is dropped");
        assert!(r.first_time("not json"), "a frame without an id is applied");
        assert!(r.first_time("not json"));
        for i in 0..RECENT_MAX {
            r.first_time(&format!(r#"{{"id":"n{i}"}}"#));
        }
        assert!(r.first_time(r#"{"id":"a"}"#), "only the last RECENT_MAX are remembered");
    }
}
