//! Go-live notifications: browser push (Web Push, RFC 8291 encryption with VAPID) and a chat-service
//! (Discord) webhook message, both sent when the stream starts; and the same two channels carry a
//! scheduled stream's reminders (`Event::ScheduleReminder`: push titled with the server name, linking
//! the event's page; the reminder text to Discord), each while that channel is enabled.
//!
//! The VAPID key pair is generated once and kept in this module's own table; its public half is what
//! `/api/config` shows as `notifications.browser.publicKey`. Viewers register a push subscription
//! (`POST /api/notifications/register`, the chat user's access token); subscriptions the push service
//! reports as gone (404/410) are removed. Sends run in a task off the bus, one at a time with a timeout,
//! so a slow push service never delays anything else; the bus's lag policy applies to this consumer.

pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::json;
use web_push_native::jwt_simple::algorithms::{ECDSAP256KeyPairLike, ES256KeyPair};
use web_push_native::WebPushBuilder;

use axum::extract::{Query, State};
use axum::Json;

use crate::events::{Bus, Event};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, JsonBody, Registry, StatusResponse, UserTokens};
use crate::store::settings::SettingsStore;
use crate::store::{Migrations, Store, StoreError};
use crate::tasks::{Stage, Tasks};

/// The channel name browsers register with.
pub const BROWSER_PUSH: &str = "BROWSER_PUSH_NOTIFICATION";
/// Timeout of one push or Discord request.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Most subscriptions kept (each is a small JSON document).
pub const MAX_DESTINATIONS: i64 = 100_000;

const MIGRATIONS: Migrations = &[
    "CREATE TABLE notification_keys (name TEXT PRIMARY KEY, value BLOB NOT NULL);",
    "CREATE TABLE notification_destinations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        destination TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (channel, destination)
    );",
];

/// Errors of the notifications module.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("VAPID key: {0}")]
    Key(String),
    #[error("{0}")]
    Invalid(String),
    #[error("this server already keeps the most push subscriptions it takes ({MAX_DESTINATIONS})")]
    Full,
}

impl From<rusqlite::Error> for NotifyError {
    fn from(e: rusqlite::Error) -> Self {
        NotifyError::Store(StoreError::Sqlite(e))
    }
}

/// Push keys and the HTTP client.
pub struct Notifications {
    store: Store,
    vapid: ES256KeyPair,
    public_key: String,
    client: reqwest::Client,
}

impl Notifications {
    /// Open the tables and load (or create once) the VAPID key pair.
    pub fn open(store: Store) -> Result<Self, NotifyError> {
        store.migrate("notifications", MIGRATIONS)?;
        let stored: Option<Vec<u8>> = store.with(|c| {
            use rusqlite::OptionalExtension;
            Ok(c.query_row("SELECT value FROM notification_keys WHERE name = 'vapid'", [], |r| r.get(0)).optional()?)
        })?;
        let vapid = match stored {
            Some(bytes) => ES256KeyPair::from_bytes(&bytes).map_err(|e| NotifyError::Key(e.to_string()))?,
            None => {
                let kp = ES256KeyPair::generate();
                let bytes = kp.to_bytes();
                store.with(|c| {
                    c.execute("INSERT INTO notification_keys (name, value) VALUES ('vapid', ?1)", [bytes])?;
                    Ok(())
                })?;
                kp
            }
        };
        let public = vapid.key_pair().public_key().to_bytes_uncompressed();
        let public_key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(public);
        let client = reqwest::Client::builder()
            .timeout(SEND_TIMEOUT)
            .user_agent(concat!("castd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Key(format!("HTTP client: {e}")))?;
        Ok(Self { store, vapid, public_key, client })
    }

    /// The VAPID public key, base64url (the browser's `applicationServerKey`).
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// Save a destination (a browser push subscription as JSON for `BROWSER_PUSH`).
    pub async fn register(&self, channel: &str, destination: &str) -> Result<(), NotifyError> {
        if channel != BROWSER_PUSH {
            return Err(NotifyError::Invalid(format!("unknown channel {channel}; the only channel is {BROWSER_PUSH}")));
        }
        if destination.len() > 4096 {
            return Err(NotifyError::Invalid("the destination is too large".into()));
        }
        let sub: WebPushBuilder = serde_json::from_str(destination)
            .map_err(|e| NotifyError::Invalid(format!("the destination is not a push subscription: {e}")))?;
        let _ = sub; // parsed only to validate the keys and endpoint
        let (ch, dest) = (channel.to_string(), destination.to_string());
        let now = chrono::Utc::now().to_rfc3339();
        let saved = self.store.call(move |c| save_destination(c, &ch, &dest, &now, MAX_DESTINATIONS)).await?;
        if !saved {
            tracing::warn!(max = MAX_DESTINATIONS, "a push subscription was refused: the table is full");
            return Err(NotifyError::Full);
        }
        Ok(())
    }

    async fn destinations(&self) -> Result<Vec<(i64, String)>, NotifyError> {
        Ok(self
            .store
            .call(|c| {
                let mut stmt = c.prepare("SELECT id, destination FROM notification_destinations WHERE channel = ?1")?;
                let rows = stmt.query_map([BROWSER_PUSH], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
                Ok(rows)
            })
            .await?)
    }

    async fn remove(&self, id: i64) {
        let r =
            self.store.call(move |c| Ok(c.execute("DELETE FROM notification_destinations WHERE id = ?1", [id])?)).await;
        if let Err(e) = r {
            tracing::warn!("could not remove an expired push subscription: {e}");
        }
    }

    /// Send `payload` to every browser subscription; returns how many were accepted.
    pub async fn push_all(&self, payload: &serde_json::Value, contact: &str) -> usize {
        let subs = match self.destinations().await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("cannot read push subscriptions: {e}");
                return 0;
            }
        };
        let body = payload.to_string();
        let mut sent = 0;
        for (id, dest) in subs {
            let Ok(builder) = serde_json::from_str::<WebPushBuilder>(&dest) else {
                self.remove(id).await;
                continue;
            };
            let req = match builder.with_vapid(&self.vapid, contact).build(body.clone()) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(subscription = id, "cannot build a push message: {e}");
                    continue;
                }
            };
            let (parts, bytes) = req.into_parts();
            let mut out = self.client.post(parts.uri.to_string()).body(bytes);
            for (k, v) in &parts.headers {
                out = out.header(k.as_str(), v.as_bytes());
            }
            match out.send().await {
                Ok(r) if r.status().is_success() => sent += 1,
                Ok(r) if matches!(r.status().as_u16(), 404 | 410) => {
                    tracing::info!(subscription = id, "push subscription expired; removed");
                    self.remove(id).await;
                }
                Ok(r) => tracing::warn!(subscription = id, status = %r.status(), "push service refused a message"),
                Err(e) => tracing::warn!(subscription = id, "push failed: {e}"),
            }
        }
        sent
    }

    /// Post the go-live message to a Discord-style webhook.
    pub async fn discord(&self, webhook: &str, content: &str, username: &str, avatar: &str) -> bool {
        let body = json!({ "content": content, "username": username, "avatar_url": avatar });
        match self.client.post(webhook).json(&body).send().await {
            Ok(r) if r.status().is_success() => true,
            Ok(r) => {
                tracing::warn!(status = %r.status(), "the Discord webhook refused a message");
                false
            }
            Err(e) => {
                tracing::warn!("a Discord message failed: {e}");
                false
            }
        }
    }
}

/// `{channel, destination}`: a notification destination to register.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct RegisterDestination {
    pub channel: Option<String>,
    pub destination: Option<String>,
}

/// What the notification routes and the go-live task need.
#[derive(Clone)]
pub struct NotifyState {
    pub notifications: Arc<Notifications>,
    pub settings: SettingsStore,
    /// Where its setters announce CONFIG_CHANGED.
    pub bus: Bus,
    /// Checks the chat user's `?accessToken=` of the register route.
    pub users: Arc<dyn UserTokens>,
}

pub fn routes(reg: &mut Registry, state: NotifyState) {
    settings::routes(reg, state.clone());
    let mut reg = reg.scope(state);
    reg.schema::<RegisterDestination>();
    reg.post(
        "/api/notifications/register",
        "notifications",
        Auth::User,
        "Register a browser push subscription for go-live notifications",
        BodyDoc::Schema("RegisterDestination"),
        register_destination,
    );
}

async fn register_destination(
    State(state): State<NotifyState>,
    ClientIp(ip): ClientIp,
    Query(q): Query<crate::http::auth::TokenQuery>,
    JsonBody(req): JsonBody<RegisterDestination>,
) -> Result<Json<StatusResponse>, ApiError> {
    let token = q.access_token.unwrap_or_default();
    if token.is_empty() || state.users.user_id(&token, ip).await.is_none() {
        return Err(ApiError::UnauthorizedToken);
    }
    let channel = req.channel.unwrap_or_default();
    let destination = req.destination.unwrap_or_default();
    if !state.settings.get().notifications.browser_notifications.enabled {
        return Err(ApiError::bad("browser notifications are not enabled"));
    }
    state.notifications.register(&channel, &destination).await.map_err(|e| match e {
        NotifyError::Invalid(m) => ApiError::BadRequest(m),
        NotifyError::Full => ApiError::BadRequest(NotifyError::Full.to_string()),
        other => ApiError::Internal(other.to_string()),
    })?;
    Ok(StatusResponse::ok("registered"))
}

/// Save a destination unless `max` others are saved already (saving one again is a no-op that
/// succeeds); false when it was refused.
fn save_destination(
    c: &rusqlite::Connection,
    channel: &str,
    destination: &str,
    now: &str,
    max: i64,
) -> Result<bool, StoreError> {
    let known: bool = c.query_row(
        "SELECT EXISTS (SELECT 1 FROM notification_destinations WHERE channel = ?1 AND destination = ?2)",
        [channel, destination],
        |r| r.get(0),
    )?;
    if known {
        return Ok(true);
    }
    let n: i64 = c.query_row("SELECT COUNT(*) FROM notification_destinations", [], |r| r.get(0))?;
    if n >= max {
        return Ok(false);
    }
    c.execute(
        "INSERT OR IGNORE INTO notification_destinations (channel, destination, created_at) VALUES (?1, ?2, ?3)",
        [channel, destination, now],
    )?;
    Ok(true)
}

/// Send the go-live notifications on STREAM_STARTED (and the schedule's reminders on
/// SCHEDULE_REMINDER) until the `Delivery` stage stops. A send in
/// progress then is finished, not cut off (the stage waits for the task, with a time limit).
pub fn start(state: NotifyState, bus: &Bus, tasks: &Tasks) {
    let mut sub = bus.subscribe("notifications");
    let stop = tasks.token(Stage::Delivery);
    tasks.spawn(Stage::Delivery, "notifications: go-live", async move {
        loop {
            let event = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                event = sub.recv() => event,
            };
            let Some(event) = event else { return };
            match &*event {
                Event::StreamStarted(_) => go_live(&state).await,
                Event::ScheduleReminder { event_id, text } => reminder(&state, event_id, text).await,
                _ => {}
            }
        }
    });
}

async fn go_live(state: &NotifyState) {
    let s = state.settings.get();
    let link = if s.server.server_url.is_empty() { String::new() } else { format!("{}/", s.server.server_url) };
    if s.notifications.browser_notifications.enabled {
        let payload = json!({
            "title": s.instance.name,
            "body": s.notifications.browser_notifications.go_live_message,
            "icon": format!("{}logo", if link.is_empty() { "/" } else { &link }),
            "url": if link.is_empty() { "/".to_string() } else { link.clone() },
        });
        let contact = if s.server.server_url.is_empty() {
            "mailto:admin@localhost".to_string()
        } else {
            s.server.server_url.clone()
        };
        let n = state.notifications.push_all(&payload, &contact).await;
        tracing::info!(sent = n, "sent go-live browser notifications");
    }
    let d = &s.notifications.discord_notifications;
    if d.enabled && !d.webhook.is_empty() {
        let content = if link.is_empty() { d.go_live_message.clone() } else { format!("{} {link}", d.go_live_message) };
        let avatar = if link.is_empty() { String::new() } else { format!("{link}logo") };
        state.notifications.discord(&d.webhook, &content, &s.instance.name, &avatar).await;
    }
}

/// A scheduled stream's reminder: a browser push (title: the server name; opens the event's page)
/// and the text to Discord.
async fn reminder(state: &NotifyState, event_id: &str, text: &str) {
    let s = state.settings.get().clone();
    let base = s.server.server_url.trim_end_matches('/');
    let page = format!("{base}/schedule/{event_id}");
    if s.notifications.browser_notifications.enabled {
        let payload = json!({
            "title": s.instance.name,
            "body": text,
            "icon": format!("{base}/logo"),
            "url": page,
        });
        let contact = if base.is_empty() { "mailto:admin@localhost".to_string() } else { base.to_string() };
        let n = state.notifications.push_all(&payload, &contact).await;
        tracing::info!(sent = n, event = event_id, "sent a scheduled stream's reminder as browser notifications");
    }
    let d = &s.notifications.discord_notifications;
    if d.enabled && !d.webhook.is_empty() {
        let avatar = if base.is_empty() { String::new() } else { format!("{base}/logo") };
        state.notifications.discord(&d.webhook, text, &s.instance.name, &avatar).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vapid_key_is_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.db");
        let a = Notifications::open(Store::open(&path).unwrap()).unwrap().public_key().to_string();
        let b = Notifications::open(Store::open(&path).unwrap()).unwrap().public_key().to_string();
        assert_eq!(a, b);
        // an uncompressed P-256 point is 65 bytes
        assert_eq!(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&a).unwrap().len(), 65);
    }

    #[test]
    fn a_full_table_refuses_new_destinations_but_not_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("n.db")).unwrap();
        store.migrate("notifications", MIGRATIONS).unwrap();
        store
            .with(|c| {
                let count = |c: &rusqlite::Connection| -> i64 {
                    c.query_row("SELECT COUNT(*) FROM notification_destinations", [], |r| r.get(0)).unwrap()
                };
                assert!(save_destination(c, BROWSER_PUSH, "a", "t", 2)?);
                assert!(save_destination(c, BROWSER_PUSH, "b", "t", 2)?);
                assert!(!save_destination(c, BROWSER_PUSH, "c", "t", 2)?, "full");
                assert!(save_destination(c, BROWSER_PUSH, "a", "t", 2)?, "a known one is still fine");
                assert_eq!(count(c), 2);
                Ok(())
            })
            .unwrap();
    }

    #[tokio::test]
    async fn register_validates_subscriptions() {
        let dir = tempfile::tempdir().unwrap();
        let n = Notifications::open(Store::open(&dir.path().join("n.db")).unwrap()).unwrap();
        assert!(n.register("EMAIL", "{}").await.is_err());
        assert!(n.register(BROWSER_PUSH, "not json").await.is_err());
        assert!(n.register(BROWSER_PUSH, r#"{"endpoint":"https://push.example/x","keys":{}}"#).await.is_err());
    }
}
