//! Go-live notifications: browser push (Web Push, RFC 8291 encryption with VAPID) and a chat-service
//! (Discord) webhook message, both sent when the stream starts; and the same two channels carry a
//! scheduled stream's reminders (`Event::ScheduleReminder`: push titled with the server name, linking
//! the event's page; the reminder text to Discord), each while that channel is enabled.
//!
//! The VAPID key pair is generated once and kept in this module's own table; its public half is what
//! `/api/config` shows as `notifications.browser.publicKey`. Viewers register a push subscription
//! (`POST /api/notifications/register`, the chat user's access token).
//!
//! Push endpoints are chosen by viewers, so they are fetched as strangers' URLs: only `https` on a
//! public address (checked after name resolution when registering, and again on every delivery, which
//! goes through castd's guarded client, `crate::outbound`); plain `http` on loopback only with the
//! development switch `CASTD_PUSH_ALLOW_LOOPBACK` (the tests run their push service on 127.0.0.1). A chat
//! user keeps at most [`MAX_PER_USER`] subscriptions (a new one replaces their oldest), one client
//! address (an IPv6 /64) at most [`MAX_PER_ADDRESS`], the server at most [`MAX_DESTINATIONS`].
//!
//! Sends run in a task off the bus, so a slow push service never delays anything else; the bus's lag
//! policy applies to this consumer. Browser pushes go out [`PUSH_CONCURRENCY`] at a time (the
//! subscriptions read in pages), each with a timeout and within the guarded client's per-host limits,
//! so many subscriptions neither take forever one after another nor open unbounded connections.
//! Subscriptions the push service reports as gone (404/410), and ones castd may not deliver to (an
//! imported `http` or private endpoint), are removed.

pub mod settings;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use reqwest::Method;
use serde_json::json;
use url::Url;
use web_push_native::jwt_simple::algorithms::{ECDSAP256KeyPairLike, ES256KeyPair};
use web_push_native::WebPushBuilder;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::events::{Bus, Event};
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, JsonBody, Registry, StatusResponse, UserTokens};
use crate::outbound::{Outbound, OutboundConfig, OutboundError, Reach};
use crate::store::settings::SettingsStore;
use crate::store::{Migrations, Store, StoreError};
use crate::tasks::{Stage, Tasks};

/// The channel name browsers register with.
pub const BROWSER_PUSH: &str = "BROWSER_PUSH_NOTIFICATION";
/// Timeout of one push or Discord request.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Most subscriptions kept (each is a small JSON document).
pub const MAX_DESTINATIONS: i64 = 100_000;
/// Most subscriptions one chat user keeps (one per browser or device); a new one replaces the oldest.
pub const MAX_PER_USER: i64 = 3;
/// Most subscriptions registered from one client address (an IPv6 /64); beyond it, refused.
pub const MAX_PER_ADDRESS: i64 = 20;
/// Browser pushes in flight at once.
pub const PUSH_CONCURRENCY: usize = 16;
/// Subscriptions read from the database at a time while sending.
const PAGE: i64 = 500;
/// A push whose host is at its limit waits this long before trying again ...
const BUSY_WAIT: Duration = Duration::from_millis(250);
/// ... at most this many times.
const BUSY_TRIES: u32 = 40;
/// The development switch that lets push endpoints be plain `http` on loopback (tests).
pub const ALLOW_LOOPBACK_ENV: &str = "CASTD_PUSH_ALLOW_LOOPBACK";

const MIGRATIONS: Migrations = &[
    "CREATE TABLE notification_keys (name TEXT PRIMARY KEY, value BLOB NOT NULL);",
    "CREATE TABLE notification_destinations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel TEXT NOT NULL,
        destination TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (channel, destination)
    );",
    // Who registered a subscription (the chat user, the client address's key) for the caps; NULL for
    // subscriptions from before, or imported.
    "ALTER TABLE notification_destinations ADD COLUMN user_id TEXT;
     ALTER TABLE notification_destinations ADD COLUMN address TEXT;
     CREATE INDEX notification_destinations_user ON notification_destinations (user_id);
     CREATE INDEX notification_destinations_address ON notification_destinations (address);",
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
    #[error("this address already registered the most push subscriptions it may ({MAX_PER_ADDRESS})")]
    AddressFull,
    #[error("HTTP client: {0}")]
    Client(#[from] OutboundError),
}

/// The feature's switches.
#[derive(Debug, Clone, Default)]
pub struct NotifyConfig {
    /// Development switch: push endpoints may be plain `http` on loopback (and loopback is fetched).
    pub allow_loopback: bool,
}

impl NotifyConfig {
    /// The switches from the environment ([`ALLOW_LOOPBACK_ENV`]).
    pub fn from_env() -> Self {
        let on = |v: String| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on");
        Self { allow_loopback: std::env::var(ALLOW_LOOPBACK_ENV).ok().is_some_and(on) }
    }
}

/// What registering a subscription did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// Stored (or known already).
    Stored,
    /// Refused: the table is full.
    Full,
    /// Refused: the client address holds its most.
    AddressFull,
}

impl From<rusqlite::Error> for NotifyError {
    fn from(e: rusqlite::Error) -> Self {
        NotifyError::Store(StoreError::Sqlite(e))
    }
}

/// Push keys and the HTTP clients.
pub struct Notifications {
    store: Store,
    vapid: ES256KeyPair,
    public_key: String,
    /// For the admin-set Discord webhook: the server admin's may point anywhere, as Owncast allows; a
    /// channel admin's goes through the guard ([`Notifications::reaching`]).
    client: reqwest::Client,
    /// Where the Discord webhook may lead.
    reach: Reach,
    /// For viewers' push endpoints: castd's guarded client.
    push: Outbound,
    config: NotifyConfig,
}

/// The push client's limits: the push services (FCM, Mozilla's, Apple's, WNS) each carry many
/// subscriptions, so one host may take all [`PUSH_CONCURRENCY`] places and 200 requests a second.
fn push_client(config: &NotifyConfig) -> Result<Outbound, OutboundError> {
    Outbound::new(OutboundConfig {
        timeout: SEND_TIMEOUT,
        max_body: 16 * 1024,
        truncate: true,
        per_host_concurrency: PUSH_CONCURRENCY,
        per_host_burst: 200,
        per_host_every: Duration::from_millis(5),
        ..OutboundConfig::new("web push", config.allow_loopback)
    })
}

/// The Discord webhook's client, for `reach`.
fn discord_client(reach: &Reach) -> Result<reqwest::Client, NotifyError> {
    let builder =
        reqwest::Client::builder().timeout(SEND_TIMEOUT).user_agent(concat!("castd/", env!("CARGO_PKG_VERSION")));
    reach.client(builder).map_err(|e| NotifyError::Key(format!("HTTP client: {e}")))
}

impl Notifications {
    /// Open the tables and load (or create once) the VAPID key pair; the switches from the
    /// environment ([`NotifyConfig::from_env`]).
    pub fn open(store: Store) -> Result<Self, NotifyError> {
        Self::open_with(store, NotifyConfig::from_env())
    }

    /// [`Notifications::open`] with the given switches.
    pub fn open_with(store: Store, config: NotifyConfig) -> Result<Self, NotifyError> {
        if config.allow_loopback {
            tracing::warn!("push endpoints may be plain http on loopback ({ALLOW_LOOPBACK_ENV}): development only");
        }
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
        let client = discord_client(&Reach::Anywhere)?;
        let push = push_client(&config)?;
        Ok(Self { store, vapid, public_key, client, reach: Reach::Anywhere, push, config })
    }

    /// The same, the Discord webhook going only where `reach` lets it (a channel's: through the guard).
    pub fn reaching(self, reach: &Reach) -> Result<Self, NotifyError> {
        Ok(Self { client: discord_client(reach)?, reach: reach.clone(), ..self })
    }

    /// Where the Discord webhook may lead (its setter refuses a literal address the guard refuses).
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// The VAPID public key, base64url (the browser's `applicationServerKey`).
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// Whether `endpoint` is one castd pushes to: `https` on a public address (after resolution); with
    /// the development switch also `http` on loopback.
    pub async fn check_endpoint(&self, endpoint: &Url) -> Result<(), NotifyError> {
        let refused = || NotifyError::Invalid("the push endpoint must be an https URL on a public address".into());
        let loopback_http = self.config.allow_loopback
            && endpoint.scheme() == "http"
            && match endpoint.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                Some(url::Host::Domain(d)) => d.trim_end_matches('.').eq_ignore_ascii_case("localhost"),
                None => false,
            };
        if endpoint.scheme() != "https" && !loopback_http {
            return Err(refused());
        }
        self.push.check_resolved(endpoint).await.map_err(|e| {
            tracing::debug!("a push endpoint was refused: {e}");
            refused()
        })
    }

    /// Save a destination (a browser push subscription as JSON for `BROWSER_PUSH`) for the chat user
    /// `user_id` registering from `ip` (see the module doc for the caps).
    pub async fn register(
        &self,
        channel: &str,
        destination: &str,
        user_id: &str,
        ip: IpAddr,
    ) -> Result<(), NotifyError> {
        if channel != BROWSER_PUSH {
            return Err(NotifyError::Invalid(format!("unknown channel {channel}; the only channel is {BROWSER_PUSH}")));
        }
        if destination.len() > 4096 {
            return Err(NotifyError::Invalid("the destination is too large".into()));
        }
        let sub: WebPushBuilder = serde_json::from_str(destination)
            .map_err(|e| NotifyError::Invalid(format!("the destination is not a push subscription: {e}")))?;
        let _ = sub; // parsed to validate the keys and endpoint
        let endpoint = serde_json::from_str::<serde_json::Value>(destination)
            .ok()
            .and_then(|v| v.get("endpoint").and_then(|e| e.as_str()).and_then(|e| Url::parse(e).ok()))
            .ok_or_else(|| NotifyError::Invalid("the push subscription has no valid endpoint URL".into()))?;
        self.check_endpoint(&endpoint).await?;
        let (ch, dest, user) = (channel.to_string(), destination.to_string(), user_id.to_string());
        let address = address_key(ip);
        let now = chrono::Utc::now().to_rfc3339();
        let saved = self
            .store
            .call(move |c| {
                let who = Registrant { user: &user, address: &address };
                save_destination(c, &ch, &dest, &now, &who, &Caps::DEFAULT)
            })
            .await?;
        match saved {
            Saved::Stored => Ok(()),
            Saved::Full => {
                tracing::warn!(max = MAX_DESTINATIONS, "a push subscription was refused: the table is full");
                Err(NotifyError::Full)
            }
            Saved::AddressFull => Err(NotifyError::AddressFull),
        }
    }

    /// A page of subscriptions: those with an id above `after`, in id order.
    async fn destinations(&self, after: i64) -> Result<Vec<(i64, String)>, NotifyError> {
        Ok(self
            .store
            .call(move |c| {
                let mut stmt = c.prepare(
                    "SELECT id, destination FROM notification_destinations WHERE channel = ?1 AND id > ?2
                     ORDER BY id LIMIT ?3",
                )?;
                let rows = stmt
                    .query_map(rusqlite::params![BROWSER_PUSH, after, PAGE], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
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

    /// Send `payload` to every browser subscription, [`PUSH_CONCURRENCY`] at a time; returns how many
    /// were accepted.
    pub async fn push_all(&self, payload: &serde_json::Value, contact: &str) -> usize {
        let body = payload.to_string();
        let sent = AtomicUsize::new(0);
        let mut after = 0;
        loop {
            let page = match self.destinations(after).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!("cannot read push subscriptions: {e}");
                    break;
                }
            };
            let Some(last) = page.last().map(|(id, _)| *id) else { break };
            after = last;
            futures_util::stream::iter(page)
                .for_each_concurrent(PUSH_CONCURRENCY, |(id, dest)| {
                    let (body, sent) = (&body, &sent);
                    async move {
                        if self.push_one(id, &dest, body, contact).await {
                            sent.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
                .await;
        }
        sent.into_inner()
    }

    /// Send one push; true when the push service accepted it. A subscription that is gone, or that
    /// castd may not deliver to, is removed.
    async fn push_one(&self, id: i64, dest: &str, body: &str, contact: &str) -> bool {
        let Ok(builder) = serde_json::from_str::<WebPushBuilder>(dest) else {
            self.remove(id).await;
            return false;
        };
        let req = match builder.with_vapid(&self.vapid, contact).build(body.to_string()) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(subscription = id, "cannot build a push message: {e}");
                return false;
            }
        };
        let (parts, bytes) = req.into_parts();
        let Ok(url) = Url::parse(&parts.uri.to_string()) else {
            self.remove(id).await;
            return false;
        };
        let allowed = url.scheme() == "https" || self.config.allow_loopback;
        if !allowed || self.push.check_url(&url).is_err() {
            tracing::info!(subscription = id, "a push endpoint castd may not deliver to (not public https); removed");
            self.remove(id).await;
            return false;
        }
        for _ in 0..BUSY_TRIES {
            let mut out = self.push.request(Method::POST, url.clone()).body(bytes.clone());
            for (k, v) in &parts.headers {
                out = out.header(k.as_str(), v.as_bytes());
            }
            match self.push.send(out).await {
                Ok(r) if r.is_success() => return true,
                Ok(r) if matches!(r.status, 404 | 410) => {
                    tracing::info!(subscription = id, "push subscription expired; removed");
                    self.remove(id).await;
                    return false;
                }
                Ok(r) => {
                    tracing::warn!(subscription = id, status = r.status, "push service refused a message");
                    return false;
                }
                Err(OutboundError::HostBusy(_)) => tokio::time::sleep(BUSY_WAIT).await,
                Err(OutboundError::NotAllowed(_)) => {
                    tracing::info!(subscription = id, "a push endpoint resolves to no public address; removed");
                    self.remove(id).await;
                    return false;
                }
                Err(e) => {
                    tracing::warn!(subscription = id, "push failed: {e}");
                    return false;
                }
            }
        }
        tracing::warn!(subscription = id, "push service busy; this notification was not sent");
        false
    }

    /// Post the go-live message to a Discord-style webhook.
    pub async fn discord(&self, webhook: &str, content: &str, username: &str, avatar: &str) -> bool {
        let body = json!({ "content": content, "username": username, "avatar_url": avatar });
        // Judged at each message (literal addresses bypass the resolver; the server admin's switch may change).
        let url = match self.reach.check_str(webhook) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("the Discord webhook's address is not allowed; nothing sent: {e}");
                return false;
            }
        };
        match self.client.post(url).json(&body).send().await {
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
) -> Result<Response, ApiError> {
    let token = q.access_token.unwrap_or_default();
    let user_id = match token.is_empty() {
        true => None,
        false => state.users.user_id(&token, ip).await,
    };
    let Some(user_id) = user_id else { return Err(ApiError::UnauthorizedToken) };
    let channel = req.channel.unwrap_or_default();
    let destination = req.destination.unwrap_or_default();
    if !state.settings.get().notifications.browser_notifications.enabled {
        return Err(ApiError::bad("browser notifications are not enabled"));
    }
    let ip = ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    match state.notifications.register(&channel, &destination, &user_id, ip).await {
        Ok(()) => Ok(StatusResponse::ok("registered").into_response()),
        Err(NotifyError::Invalid(m)) => Err(ApiError::BadRequest(m)),
        Err(NotifyError::Full) => Err(ApiError::BadRequest(NotifyError::Full.to_string())),
        Err(NotifyError::AddressFull) => {
            // A cap, not a rate: 429 with a long Retry-After.
            let body = Json(StatusResponse { success: false, message: NotifyError::AddressFull.to_string() });
            let mut resp = (StatusCode::TOO_MANY_REQUESTS, body).into_response();
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(3600u32));
            Ok(resp)
        }
        Err(other) => Err(ApiError::Internal(other.to_string())),
    }
}

/// The key a client address is counted under, as stored: IPv4 as is, IPv6 by its /64 (the grouping of
/// `throttle::AddrKey`, written out so the stored form does not depend on a `Debug` format).
fn address_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{}/64", std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
    }
}

/// Who registers a subscription.
struct Registrant<'a> {
    user: &'a str,
    address: &'a str,
}

/// The caps [`save_destination`] keeps.
struct Caps {
    total: i64,
    per_user: i64,
    per_address: i64,
}

impl Caps {
    const DEFAULT: Caps = Caps { total: MAX_DESTINATIONS, per_user: MAX_PER_USER, per_address: MAX_PER_ADDRESS };
}

/// Save a destination within `caps` (saving one again is a no-op that succeeds): a user at their
/// most has their oldest replaced; an address at its most, or a full table, is refused.
fn save_destination(
    c: &mut rusqlite::Connection,
    channel: &str,
    destination: &str,
    now: &str,
    who: &Registrant<'_>,
    caps: &Caps,
) -> Result<Saved, StoreError> {
    let tx = c.transaction()?;
    let known: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM notification_destinations WHERE channel = ?1 AND destination = ?2)",
        [channel, destination],
        |r| r.get(0),
    )?;
    if known {
        return Ok(Saved::Stored);
    }
    let count = |sql: &str, arg: &str| -> Result<i64, rusqlite::Error> { tx.query_row(sql, [arg], |r| r.get(0)) };
    let from_address = count("SELECT COUNT(*) FROM notification_destinations WHERE address = ?1", who.address)?;
    if from_address >= caps.per_address {
        return Ok(Saved::AddressFull);
    }
    let of_user = count("SELECT COUNT(*) FROM notification_destinations WHERE user_id = ?1", who.user)?;
    if of_user >= caps.per_user {
        tx.execute(
            "DELETE FROM notification_destinations WHERE id IN (
               SELECT id FROM notification_destinations WHERE user_id = ?1 ORDER BY id LIMIT ?2)",
            rusqlite::params![who.user, of_user - caps.per_user + 1],
        )?;
    }
    let n: i64 = tx.query_row("SELECT COUNT(*) FROM notification_destinations", [], |r| r.get(0))?;
    if n >= caps.total {
        return Ok(Saved::Full);
    }
    tx.execute(
        "INSERT OR IGNORE INTO notification_destinations (channel, destination, created_at, user_id, address)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        [channel, destination, now, who.user, who.address],
    )?;
    tx.commit()?;
    Ok(Saved::Stored)
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
    fn the_caps_hold_per_table_address_and_user() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("n.db")).unwrap();
        store.migrate("notifications", MIGRATIONS).unwrap();
        let caps = Caps { total: 4, per_user: 2, per_address: 3 };
        store
            .with(|c| {
                let rows = |c: &rusqlite::Connection| -> Vec<String> {
                    let mut s = c.prepare("SELECT destination FROM notification_destinations ORDER BY id").unwrap();
                    s.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
                };
                let (u1a, u2a) = (Registrant { user: "u1", address: "a" }, Registrant { user: "u2", address: "a" });
                let u3b = Registrant { user: "u3", address: "b" };
                assert_eq!(save_destination(c, BROWSER_PUSH, "1", "t", &u1a, &caps)?, Saved::Stored);
                assert_eq!(save_destination(c, BROWSER_PUSH, "2", "t", &u1a, &caps)?, Saved::Stored);
                assert_eq!(save_destination(c, BROWSER_PUSH, "3", "t", &u1a, &caps)?, Saved::Stored);
                assert_eq!(rows(c), ["2", "3"], "a user's third replaces their oldest");
                assert_eq!(save_destination(c, BROWSER_PUSH, "4", "t", &u2a, &caps)?, Saved::Stored);
                assert_eq!(save_destination(c, BROWSER_PUSH, "5", "t", &u2a, &caps)?, Saved::AddressFull);
                assert_eq!(save_destination(c, BROWSER_PUSH, "2", "t", &u2a, &caps)?, Saved::Stored, "known");
                assert_eq!(save_destination(c, BROWSER_PUSH, "6", "t", &u3b, &caps)?, Saved::Stored);
                assert_eq!(save_destination(c, BROWSER_PUSH, "7", "t", &u3b, &caps)?, Saved::Full);
                assert_eq!(rows(c), ["2", "3", "4", "6"], "a refusal changes nothing");
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn addresses_are_counted_per_ipv4_and_per_ipv6_64() {
        let key = |s: &str| address_key(s.parse().unwrap());
        assert_eq!(key("203.0.113.7"), "203.0.113.7");
        assert_eq!(key("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(key("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2::99"), key("2001:db8:1:2:ffff::1"));
    }

    #[tokio::test]
    async fn register_validates_subscriptions_and_endpoints() {
        let dir = tempfile::tempdir().unwrap();
        let n =
            Notifications::open_with(Store::open(&dir.path().join("n.db")).unwrap(), NotifyConfig::default()).unwrap();
        let ip = IpAddr::from([1, 2, 3, 4]);
        assert!(n.register("EMAIL", "{}", "u", ip).await.is_err());
        assert!(n.register(BROWSER_PUSH, "not json", "u", ip).await.is_err());
        assert!(n.register(BROWSER_PUSH, r#"{"endpoint":"https://push.example/x","keys":{}}"#, "u", ip).await.is_err());
        let url = |s: &str| Url::parse(s).unwrap();
        for bad in [
            "http://127.0.0.1:9/push",
            "https://127.0.0.1:9/push",
            "https://localhost/push",
            "https://10.0.0.1/push",
            "https://[fd00::1]/push",
            "https://169.254.169.254/latest",
            "http://93.184.216.34/push",
            "ftp://93.184.216.34/push",
        ] {
            assert!(n.check_endpoint(&url(bad)).await.is_err(), "{bad}");
        }
        assert!(n.check_endpoint(&url("https://93.184.216.34/push")).await.is_ok());
        let dev = Notifications::open_with(
            Store::open(&dir.path().join("d.db")).unwrap(),
            NotifyConfig { allow_loopback: true },
        )
        .unwrap();
        assert!(dev.check_endpoint(&url("http://127.0.0.1:9/push")).await.is_ok(), "the development switch");
        assert!(dev.check_endpoint(&url("http://10.0.0.1/push")).await.is_err());
        assert!(dev.check_endpoint(&url("http://93.184.216.34/push")).await.is_err(), "http only on loopback");
    }
}
