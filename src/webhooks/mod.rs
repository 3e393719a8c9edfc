//! Outbound webhooks: the admin routes that manage them and their reliable delivery.
//!
//! Delivery: `POST <url>` with `Content-Type: application/json` and the body `{"type", "eventData"}`
//! (Owncast's shape; `eventData` is `Event::data_json`, the payload each producer puts on the bus, with
//! Owncast's keys for the chat events: `ChatEvent::webhook_data`). When the webhook has a
//! secret, `X-Castd-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>` is added.
//!
//! Shutdown (when the `Delivery` stage stops, see `tasks`): events already on the bus are still
//! dispatched, every queue is closed and the delivery tasks get `DRAIN_TIMEOUT` to finish; whatever is still undelivered then is
//! written to the `webhook_outbox` table and delivered after the next start, so a STREAM_STOPPED sent
//! while castd stops is never lost.
//!
//! Each webhook has its own delivery task and its own bounded queue of `QUEUE_CAPACITY` events, so a dead
//! or slow receiver only delays itself. Policy when a receiver's queue is full: the new delivery is
//! dropped and logged — publishing never waits, so chat and the stream never slow down for a webhook.
//! A delivery is retried on network errors, timeouts and 5xx answers (`RETRY_DELAYS`, exponential);
//! 4xx answers are final. Deliveries that give up are logged. `lastUsed` is stamped after any answer.
//!
//! The list of webhooks an event is dispatched to is kept in memory (read once, and again after a
//! webhook is added or removed), not read from the database for every event on the bus.
//!
//! Where a webhook may point (`outbound::Reach`): the default channel's (the server admin's) anywhere,
//! as Owncast allows; a channel's only to public addresses unless the server admin's
//! `allowprivatetargets` is on — a refused literal address is a 400 when the webhook is created, and is
//! judged again at every attempt (given up at once, nothing sent); no redirect is followed, no proxy used.
//!
//! Where each event comes from (the producers publish on the bus): CHAT, USER_JOINED, USER_PARTED,
//! NAME_CHANGE, VISIBILITY-UPDATE, SYSTEM, CHAT_ACTION — the chat module; STREAM_STARTED and
//! STREAM_STOPPED — the ingest module when a broadcaster connects and leaves; STREAM_TITLE_UPDATED — the
//! `streamtitle` setters (admin and integrations); FEDIVERSE_ENGAGEMENT_FOLLOW — federation when a new
//! follower is approved; FEDIVERSE_ENGAGEMENT_LIKE and _REPOST — federation when a Like or an Announce
//! arrives in the inbox (all three with the same `eventData` shape); PING and PONG — nothing: they are
//! in Owncast's list of types a webhook may subscribe to, and no producer publishes them; SCHEDULED_EVENTS — the schedule (a scheduled stream's warning,
//! start, end and reminder); SIMULCAST_STATE_CHANGED (castd) — simulcast, when a forward target changes state;
//! TRANSCODE_DEGRADED (castd) — the transcoder, when it steps its x264 presets for capacity (or back).

mod delivery;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use tokio_util::sync::CancellationToken;

use crate::events::{Bus, Event, EventType};
use crate::http::{ApiError, Auth, BodyDoc, JsonBody, Registry, StatusResponse};
use crate::outbound::Reach;
use crate::store::{Migrations, Store, StoreError};
use crate::tasks::{Stage, Task, Tasks};
use crate::telemetry::Telemetry;

pub use delivery::RETRY_DELAYS;

/// Events a receiver's queue holds before new ones are dropped.
pub const QUEUE_CAPACITY: usize = 256;

const MIGRATIONS: Migrations = &[
    "CREATE TABLE webhooks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        secret TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        last_used TEXT
    );",
    "CREATE TABLE webhook_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        webhook_id INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL
    );",
];

/// How long delivery tasks may take to empty their queues at shutdown.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

/// Errors of the webhook store.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("stored events are not valid JSON: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl From<WebhookError> for ApiError {
    fn from(e: WebhookError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// A webhook as the API shows it (the secret is never shown).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: i64,
    pub url: String,
    pub events: Vec<EventType>,
    pub timestamp: DateTime<Utc>,
    pub last_used: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub secret: String,
}

/// A delivery not made: the webhook's id and the request body.
pub type Pending = (i64, Arc<[u8]>);

/// The webhook store and the running delivery tasks.
pub struct Webhooks {
    store: Store,
    /// id → the sender of that webhook's delivery queue (rebuilt when webhooks change).
    senders: Mutex<HashMap<i64, mpsc::Sender<Arc<[u8]>>>>,
    telemetry: Arc<Telemetry>,
    client: reqwest::Client,
    /// Where the webhooks' URLs may lead (a channel's: public addresses unless the server admin allows more).
    reach: Reach,
    /// The daemon's tasks (delivery runs in the `Delivery` stage).
    tasks: Tasks,
    /// Running delivery tasks (each returns what it could not deliver at shutdown).
    running: Mutex<Vec<Task<Vec<Pending>>>>,
    /// Fired when the drain time is over: tasks stop and hand back what is left.
    give_up: CancellationToken,
    /// The webhooks events are dispatched to (`None`: read them again; see the module doc).
    dispatch_list: Mutex<Option<Arc<Vec<Webhook>>>>,
    /// How often the dispatch list was read from the database (a unit test checks the cache).
    list_reads: std::sync::atomic::AtomicU64,
}

fn parse_time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).unwrap_or_default()
}

impl Webhooks {
    /// The server admin's webhooks (they may point anywhere, as Owncast allows).
    pub fn open(store: Store, telemetry: Arc<Telemetry>, tasks: Tasks) -> Result<Self, StoreError> {
        Self::open_reaching(store, telemetry, tasks, Reach::Anywhere)
    }

    /// Webhooks whose URLs go only where `reach` lets them (a channel's: through the guard, see
    /// `outbound::Reach`; refused deliveries give up at once and are logged).
    pub fn open_reaching(
        store: Store,
        telemetry: Arc<Telemetry>,
        tasks: Tasks,
        reach: Reach,
    ) -> Result<Self, StoreError> {
        store.migrate("webhooks", MIGRATIONS)?;
        let builder = reqwest::Client::builder()
            .timeout(delivery::TIMEOUT)
            .user_agent(concat!("castd/", env!("CARGO_PKG_VERSION")));
        let client = reach.client(builder).map_err(|e| StoreError::Task(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            reach,
            store,
            senders: Mutex::new(HashMap::new()),
            telemetry,
            client,
            give_up: tasks.signal(),
            tasks,
            running: Mutex::default(),
            dispatch_list: Mutex::default(),
            list_reads: Default::default(),
        })
    }

    /// The webhooks events go to: the list in memory, read from the database when it is not there.
    async fn hooks(&self) -> Result<Arc<Vec<Webhook>>, WebhookError> {
        if let Some(list) = self.dispatch_list.lock().clone() {
            return Ok(list);
        }
        self.list_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let list = Arc::new(self.list().await?);
        *self.dispatch_list.lock() = Some(list.clone());
        Ok(list)
    }

    pub async fn list(&self) -> Result<Vec<Webhook>, WebhookError> {
        type Row = (i64, String, String, String, String, Option<String>);
        let rows: Vec<Row> = self
            .store
            .call(|c| {
                let mut stmt =
                    c.prepare("SELECT id, url, events, secret, created_at, last_used FROM webhooks ORDER BY id")?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .await?;
        rows.into_iter()
            .map(|(id, url, events, secret, created, used)| {
                Ok(Webhook {
                    id,
                    url,
                    events: serde_json::from_str(&events)?,
                    secret,
                    timestamp: parse_time(&created),
                    last_used: used.as_deref().map(parse_time),
                })
            })
            .collect()
    }

    async fn insert(&self, url: String, events: Vec<EventType>, secret: String) -> Result<Webhook, WebhookError> {
        let now = Utc::now();
        let events_json = serde_json::to_string(&events)?;
        let (u, s) = (url.clone(), secret.clone());
        let id = self
            .store
            .call(move |c| {
                c.execute(
                    "INSERT INTO webhooks (url, events, secret, created_at) VALUES (?1, ?2, ?3, ?4)",
                    rusqlite::params![u, events_json, s, now.to_rfc3339()],
                )?;
                Ok(c.last_insert_rowid())
            })
            .await?;
        *self.dispatch_list.lock() = None;
        Ok(Webhook { id, url, events, timestamp: now, last_used: None, secret })
    }

    async fn remove(&self, id: i64) -> Result<bool, WebhookError> {
        let n = self.store.call(move |c| Ok(c.execute("DELETE FROM webhooks WHERE id = ?1", [id])?)).await?;
        *self.dispatch_list.lock() = None;
        self.senders.lock().remove(&id);
        Ok(n > 0)
    }

    async fn touch(store: &Store, id: i64) {
        let now = Utc::now().to_rfc3339();
        let r = store
            .call(move |c| {
                Ok(c.execute("UPDATE webhooks SET last_used = ?1 WHERE id = ?2", rusqlite::params![now, id])?)
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(webhook = id, "could not record the webhook's last use: {e}");
        }
    }

    /// Hand `event` to every webhook subscribed to its type, without waiting.
    async fn dispatch(self: &Arc<Self>, event: &Event) {
        let kind = event.kind();
        if !EventType::WEBHOOK_TYPES.contains(&kind) {
            return;
        }
        let hooks = match self.hooks().await {
            Ok(h) => h,
            Err(e) => {
                tracing::error!("cannot read webhooks: {e}");
                return;
            }
        };
        let hooks: Vec<&Webhook> = hooks.iter().filter(|h| h.events.contains(&kind)).collect();
        if hooks.is_empty() {
            return;
        }
        let body = match serde_json::to_vec(&serde_json::json!({ "type": kind, "eventData": event.data_json() })) {
            Ok(b) => Arc::<[u8]>::from(b),
            Err(e) => {
                tracing::error!("cannot serialize a {} event: {e}", kind.as_str());
                return;
            }
        };
        for hook in hooks {
            self.enqueue(hook, body.clone());
        }
    }

    fn enqueue(self: &Arc<Self>, hook: &Webhook, body: Arc<[u8]>) {
        let tx = self.sender_for(hook);
        match tx.try_send(body) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.telemetry.webhook_delivery(false);
                tracing::warn!(webhook = hook.id, url = %hook.url,
                    "webhook receiver is {QUEUE_CAPACITY} events behind; dropped this delivery");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.senders.lock().remove(&hook.id);
            }
        }
    }

    /// The queue of `hook`, starting its delivery task on first use.
    fn sender_for(self: &Arc<Self>, hook: &Webhook) -> mpsc::Sender<Arc<[u8]>> {
        let mut senders = self.senders.lock();
        if let Some(tx) = senders.get(&hook.id) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        senders.insert(hook.id, tx.clone());
        let worker = delivery::Worker {
            id: hook.id,
            url: hook.url.clone(),
            secret: hook.secret.clone(),
            client: self.client.clone(),
            reach: self.reach.clone(),
            telemetry: self.telemetry.clone(),
        };
        let store = self.store.clone();
        let give_up = self.give_up.clone();
        let task = self.tasks.spawn(
            Stage::Delivery,
            format!("webhook {} delivery", hook.id),
            worker.run(rx, give_up, move |id| {
                let store = store.clone();
                async move { Webhooks::touch(&store, id).await }
            }),
        );
        self.running.lock().push(task);
        tx
    }

    /// Queue what an earlier run could not deliver, and forget it in the database.
    async fn resend_outbox(self: &Arc<Self>) -> Result<usize, WebhookError> {
        let rows: Vec<(i64, String)> = self
            .store
            .call(|c| {
                let tx = c.transaction()?;
                let rows = {
                    let mut stmt = tx.prepare("SELECT webhook_id, body FROM webhook_outbox ORDER BY id")?;
                    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<Vec<_>, _>>()?;
                    rows
                };
                tx.execute("DELETE FROM webhook_outbox", [])?;
                tx.commit()?;
                Ok(rows)
            })
            .await?;
        let hooks = self.list().await?;
        let n = rows.len();
        for (id, body) in rows {
            if let Some(hook) = hooks.iter().find(|h| h.id == id) {
                self.enqueue(hook, Arc::from(body.into_bytes()));
            }
        }
        Ok(n)
    }

    /// Close every queue, give the delivery tasks `DRAIN_TIMEOUT`, then persist what is left.
    async fn drain(&self) {
        self.senders.lock().clear();
        let running = std::mem::take(&mut *self.running.lock());
        let mut left: Vec<Pending> = Vec::new();
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        // They run side by side; awaiting them in turn against one deadline waits for the slowest.
        for mut task in running {
            let joined = match tokio::time::timeout_at(deadline, &mut task).await {
                Ok(joined) => joined,
                Err(_) => {
                    // Out of time: tasks stop where they are and hand back their queues.
                    self.give_up.cancel();
                    task.await
                }
            };
            match joined {
                Ok(rest) => left.extend(rest),
                Err(e) => tracing::warn!("a webhook delivery task failed: {e}"),
            }
        }
        if left.is_empty() {
            return;
        }
        let n = left.len();
        let now = Utc::now().to_rfc3339();
        let saved = self
            .store
            .call(move |c| {
                let tx = c.transaction()?;
                for (id, body) in &left {
                    tx.execute(
                        "INSERT INTO webhook_outbox (webhook_id, body, created_at) VALUES (?1, ?2, ?3)",
                        rusqlite::params![id, String::from_utf8_lossy(body), now],
                    )?;
                }
                tx.commit()?;
                Ok(())
            })
            .await;
        match saved {
            Ok(()) => tracing::info!(deliveries = n, "kept undelivered webhooks for the next start"),
            Err(e) => tracing::error!(deliveries = n, "could not keep undelivered webhooks: {e}"),
        }
    }
}

/// Subscribe to the bus and deliver events until the `Delivery` stage stops, then dispatch what is
/// already on the bus and drain the queues (see the module doc); first re-send what the last run left.
pub fn start(hooks: Arc<Webhooks>, bus: &Bus) {
    let mut sub = bus.subscribe("webhooks");
    let token = hooks.tasks.token(Stage::Delivery);
    let h = hooks.clone();
    hooks.tasks.spawn(Stage::Delivery, "webhooks: dispatcher", async move {
        match h.resend_outbox().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deliveries = n, "re-sending webhooks kept at the last shutdown"),
            Err(e) => tracing::error!("cannot read the webhook outbox: {e}"),
        }
        loop {
            tokio::select! {
                biased;
                event = sub.recv() => match event {
                    Some(e) => h.dispatch(&e).await,
                    None => break,
                },
                _ = token.cancelled() => {
                    while let Some(e) = sub.try_recv() {
                        h.dispatch(&e).await;
                    }
                    break;
                }
            }
        }
        h.drain().await;
    });
}

#[derive(Deserialize)]
struct CreateBody {
    url: Option<String>,
    events: Option<Vec<String>>,
    secret: Option<String>,
}

#[derive(Deserialize)]
struct DeleteBody {
    /// Owncast's clients send a JSON number; `2.0` is taken as 2 (JSON Schema counts it an integer).
    id: Option<f64>,
}

const GROUP: &str = "admin";

/// A new webhook: an http(s) URL and at least one of the webhook event types, which are
/// `EventType::WEBHOOK_TYPES` (the one list: the document cannot miss a type castd takes).
static CREATE_SCHEMA: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let events: Vec<&str> = EventType::WEBHOOK_TYPES.iter().map(|t| t.as_str()).collect();
    serde_json::json!({
        "type": "object",
        "required": ["url", "events"],
        "properties": {
            "url": {
                "type": "string",
                "pattern": "^https?://([A-Za-z0-9]+[.-])*[A-Za-z][A-Za-z0-9]*(:[0-9]{1,4})?(/[A-Za-z0-9._~-]*)*$"
            },
            "secret": {"type": ["string", "null"]},
            "events": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": events}}
        }
    })
    .to_string()
});

pub fn routes(reg: &mut Registry, hooks: Arc<Webhooks>) {
    let mut reg = reg.scope(hooks);
    reg.get("/api/admin/webhooks", GROUP, Auth::Admin, "List webhooks", list).returns_list::<Webhook>();
    reg.post(
        "/api/admin/webhooks/create",
        GROUP,
        Auth::Admin,
        "Create a webhook {url, events, secret?}",
        BodyDoc::Json(CREATE_SCHEMA.as_str()),
        create,
    )
    .returns::<Webhook>();
    reg.post(
        "/api/admin/webhooks/delete",
        GROUP,
        Auth::Admin,
        "Delete a webhook {id}",
        BodyDoc::Json(r#"{"type":"object","required":["id"],"properties":{"id":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}}}"#),
        delete,
    )
    .error(404, "No such webhook");
}

async fn list(State(hooks): State<Arc<Webhooks>>) -> Result<Json<Vec<Webhook>>, ApiError> {
    Ok(Json(hooks.list().await?))
}

async fn create(
    State(hooks): State<Arc<Webhooks>>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Json<Webhook>, ApiError> {
    let url = body.url.map(|u| u.trim().to_string()).unwrap_or_default();
    let url = crate::config::validate::url(&serde_json::Value::String(url), false)?;
    // A channel's webhook at a refused literal address is refused now, with the reason.
    hooks.reach.check_saved("the webhook URL", &url).map_err(ApiError::bad)?;
    let names = body.events.unwrap_or_default();
    if names.is_empty() {
        return Err(ApiError::bad("at least one event type is required"));
    }
    let mut events = Vec::with_capacity(names.len());
    for name in &names {
        let Some(t) = EventType::parse(name, true) else {
            let valid: Vec<&str> = EventType::WEBHOOK_TYPES.iter().map(|t| t.as_str()).collect();
            return Err(ApiError::bad(format!("unknown event type {name}; valid types: {}", valid.join(", "))));
        };
        if !events.contains(&t) {
            events.push(t);
        }
    }
    let secret = body.secret.unwrap_or_default();
    if secret.len() > 256 {
        return Err(ApiError::bad("the secret may be at most 256 characters"));
    }
    Ok(Json(hooks.insert(url, events, secret).await?))
}

async fn delete(
    State(hooks): State<Arc<Webhooks>>,
    JsonBody(body): JsonBody<DeleteBody>,
) -> Result<Json<StatusResponse>, ApiError> {
    let id = body.id.ok_or_else(|| ApiError::bad("id is required"))?;
    if id.fract() != 0.0 || id.abs() > 9_007_199_254_740_991.0 {
        return Err(ApiError::bad("id must be a whole number"));
    }
    // The range check makes the conversion exact.
    let id = id as i64;
    if hooks.remove(id).await? {
        Ok(StatusResponse::ok(format!("deleted webhook {id}")))
    } else {
        Err(ApiError::NotFound(format!("no webhook with id {id}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// Events are dispatched from the list in memory: the database is read once, and again only after
    /// a webhook was added or removed (and the new list is the one used).
    #[tokio::test]
    async fn the_dispatch_list_is_read_once_and_again_after_a_change() {
        let tasks = Tasks::new();
        let hooks = Arc::new(Webhooks::open(Store::open_in_memory().unwrap(), Arc::default(), tasks.clone()).unwrap());
        let first = hooks.insert("http://127.0.0.1:9/a".into(), vec![EventType::Chat], String::new()).await.unwrap();
        for _ in 0..5 {
            assert_eq!(hooks.hooks().await.unwrap().len(), 1);
        }
        assert_eq!(hooks.list_reads.load(Ordering::Relaxed), 1, "one read for five events");
        hooks.insert("http://127.0.0.1:9/b".into(), vec![EventType::Chat], String::new()).await.unwrap();
        assert_eq!(hooks.hooks().await.unwrap().len(), 2, "an added webhook is dispatched to");
        assert!(hooks.remove(first.id).await.unwrap());
        let now: Vec<String> = hooks.hooks().await.unwrap().iter().map(|h| h.url.clone()).collect();
        assert_eq!(now, ["http://127.0.0.1:9/b"], "a removed one is not");
        assert_eq!(hooks.list_reads.load(Ordering::Relaxed), 3);
    }
}
