//! Federation: castd as an ActivityPub server. The streamer is one `Service` actor
//! (`/federation/user/<username>`) that Fediverse accounts follow; followers get a signed go-live
//! `Note` when the stream starts; likes, boosts and follows become chat events and webhooks; other
//! Owncast-compatible servers can be followed ("federated servers") and their go-live posts mark them
//! online; chat users can prove a Fediverse identity with a one-time code sent by direct message.
//!
//! Modules: `keys` (the RSA key pair), `signatures` (HTTP Signatures), `client` (outbound requests
//! through the guarded client, the URL policy, remote actors and their keys), `data` (the tables),
//! `delivery` (the persistent outbound queue), `discovery` (WebFinger, host-meta, NodeInfo,
//! `/api/v1/instance`), `actor` (actor, outbox, followers, objects), `blocklist` (whether a host or
//! URL is on a blocked domain), `inbox` (who signed an inbound
//! activity, and whether it is new), `activities` (each inbound activity type: what it may do, and
//! doing it), `servers` (federated servers), `signin` (Fediverse chat sign-in), `scheduled` (scheduled
//! streams as ActivityPub Events, their updates, deletes and reminders, which the schedule publishes
//! on the bus), `api` (admin and public routes).
//!
//! Channels: every channel's stack has a `Federation` of its own (its database: key pair, followers,
//! outbox, queue), so a channel is an actor of its own, `@{name}@host` with its IRIs under the
//! channel's server URL (the server's + `/c/{slug}`); it posts, signs and delivers as itself, to its
//! own followers. The root's WebFinger answers for every channel's actor through the lookup the
//! composition root gives the default channel's (`other_actors`); a user name is one channel's only
//! (`username_taken`, asked by the `federation/username` setter). An inbox under `/c/{slug}` checks
//! the signature over the path as the sender wrote it (`inbox`).
//!
//! Every federation route answers 405 while federation is disabled. Federation needs `serverurl`:
//! its host is the account's domain. Outbound requests go only to `https://` URLs on public
//! addresses (`crate::outbound`), or, with the `--federation-allow-http-loopback` development switch,
//! also to loopback addresses, over `http://` too (so two local daemons can federate without TLS).
//!
//! Remote documents are hostile: an activity counts only when the actor's own document lists the key
//! that signed it (`inbox`), once (replays are dropped), and only about what the signer may change
//! (`activities`); only http(s) URLs from remote documents are stored or shown; blocked domains
//! (normalised: case, trailing dot) are refused inbound, on delivery, on sign-in and on remote
//! follow.

pub mod activities;
pub mod actor;
pub mod api;
pub mod blocklist;
pub mod client;
pub mod data;
pub mod delivery;
pub mod discovery;
pub mod inbox;
pub mod keys;
pub mod scheduled;
pub mod servers;
pub mod settings;
pub mod signatures;
pub mod signin;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::events::{Bus, Event};
use crate::http::{ApiError, StatusResponse, UserTokens};
use crate::outbound::OutboundError;
use crate::store::settings::SettingsStore;
use crate::store::{Store, StoreError};
use crate::tasks::{Stage, Tasks};
use crate::throttle::{Backoff, BackoffConfig, Rate};

/// The ActivityStreams public collection.
pub const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
/// The JSON-LD context of every document served.
pub const AS_CONTEXT: &str = "https://www.w3.org/ns/activitystreams";
/// Content type of ActivityPub documents.
pub const AP_CONTENT_TYPE: &str = "application/activity+json";

/// Errors of the federation module.
#[derive(Debug, thiserror::Error)]
pub enum FedError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("key: {0}")]
    Key(String),
    /// A remote request failed; the text is detail for the log (it may carry remote text).
    #[error("{0}")]
    Remote(String),
    /// castd's policy refuses it (URL, origin, key, blocked domain); detail for the log.
    #[error("{0}")]
    Policy(String),
    /// castd's own words about what went wrong, safe to show to whoever asked.
    #[error("{0}")]
    Public(String),
    /// The remote host already has as many requests from castd as it gets: try again later.
    #[error("{0}")]
    Busy(String),
    /// The remote document is gone (404 or 410).
    #[error("{0} is gone")]
    Gone(String),
    /// A blocked domain (castd's words, safe to show).
    #[error("{0}")]
    Blocked(String),
    /// A queued delivery a newer one replaced (never sent).
    #[error("superseded by a newer activity")]
    Superseded,
}

impl From<OutboundError> for FedError {
    fn from(e: OutboundError) -> Self {
        match e {
            OutboundError::NotAllowed(_) => FedError::Policy(e.to_string()),
            OutboundError::HostBusy(_) => FedError::Busy(e.to_string()),
            OutboundError::TooLarge(_) | OutboundError::Failed(..) => FedError::Remote(e.to_string()),
        }
    }
}

impl FedError {
    /// What a requester who is not the admin may be told: castd's own words, or one generic
    /// sentence (the detail goes to the log).
    pub fn public_message(&self) -> String {
        match self {
            FedError::Public(m) | FedError::Blocked(m) => m.clone(),
            FedError::Busy(_) => "the remote server is busy; try again later".into(),
            _ => "the remote server could not be reached or gave no usable answer".into(),
        }
    }
}

impl From<rusqlite::Error> for FedError {
    fn from(e: rusqlite::Error) -> Self {
        FedError::Store(StoreError::Sqlite(e))
    }
}

/// Timings and switches of federation, from the command line and (hidden, for tests and benchmarks)
/// the environment.
#[derive(Debug, Clone)]
pub struct FederationConfig {
    /// `--federation-allow-http-loopback`: allow `http://` URLs on loopback hosts (development).
    pub allow_http_loopback: bool,
    /// Time limit of one delivery attempt (`CASTD_FEDERATION_DELIVERY_TIMEOUT_MS`, default 10 s).
    pub delivery_timeout: Duration,
    /// First retry delay; doubles per attempt (`CASTD_FEDERATION_RETRY_BASE_MS`, default 30 s).
    pub retry_base: Duration,
    /// Attempts before a delivery is given up.
    pub max_attempts: u32,
    /// Deliveries in flight at once.
    pub workers: usize,
    /// Deliveries in flight to one host at once.
    pub per_host: usize,
    /// Lifetime of a Fediverse sign-in code (`CASTD_FEDIVERSE_CODE_TTL_SECS`, default 10 min).
    pub code_ttl: Duration,
    /// How often the federated servers shown online are asked whether they still are
    /// (`CASTD_FEDERATION_STATUS_POLL_MS`, default 60 s).
    pub status_poll: Duration,
}

impl FederationConfig {
    pub fn from_env(allow_http_loopback: bool) -> Self {
        let ms = |name: &str, default: u64| {
            Duration::from_millis(std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
        };
        Self {
            allow_http_loopback,
            delivery_timeout: ms("CASTD_FEDERATION_DELIVERY_TIMEOUT_MS", 10_000),
            retry_base: ms("CASTD_FEDERATION_RETRY_BASE_MS", 30_000),
            max_attempts: 12,
            workers: 64,
            per_host: 16,
            code_ttl: Duration::from_secs(
                std::env::var("CASTD_FEDIVERSE_CODE_TTL_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(600),
            ),
            status_poll: ms("CASTD_FEDERATION_STATUS_POLL_MS", 60_000).max(Duration::from_millis(100)),
        }
    }
}

/// The URLs of the local actor, from the settings.
#[derive(Debug, Clone)]
pub struct Local {
    /// The server URL without a trailing slash.
    pub base: String,
    /// `host[:port]` of the server URL: the account's domain.
    pub host: String,
    pub username: String,
    pub actor: String,
    pub inbox: String,
    pub outbox: String,
    pub followers: String,
    pub key_id: String,
}

impl Local {
    /// The actor's URLs under `server_url` (a channel's is the server's under `/c/{slug}`), when it
    /// names a host.
    pub fn new(server_url: &str, username: &str) -> Option<Local> {
        let base = server_url.trim_end_matches('/').to_string();
        let u = url::Url::parse(&base).ok()?;
        u.host_str()?;
        let host = signatures::authority(&u);
        let actor = format!("{base}/federation/user/{username}");
        Some(Local {
            host,
            username: username.to_string(),
            inbox: format!("{actor}/inbox"),
            outbox: format!("{actor}/outbox"),
            followers: format!("{actor}/followers"),
            key_id: format!("{actor}#main-key"),
            actor,
            base,
        })
    }

    /// The account, `user@host`.
    pub fn account(&self) -> String {
        format!("{}@{}", self.username, self.host)
    }

    /// A new object IRI under `/federation/`.
    pub fn new_iri(&self) -> String {
        format!("{}/federation/{}", self.base, crate::password::random_token(24))
    }
}

/// The local actor of a stack's settings while its federation is on (and it has a server URL).
pub fn active_local(s: &crate::config::Settings) -> Option<Local> {
    if !s.federation.federation_enabled || s.server.server_url.is_empty() {
        return None;
    }
    Local::new(&s.server.server_url, &s.federation.federation_username)
}

/// The fediverse user name a channel's actor gets when it opens (its admin may change it): the slug,
/// with `-` as `_` (a user name is letters, digits and `_`), at most 30 characters; when `taken`, the
/// first free one of `{name}_2`, `{name}_3`, ...
pub fn username_for_slug(slug: &str, taken: impl Fn(&str) -> bool) -> String {
    let base: String = slug.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(30).collect();
    let base = if base.is_empty() { "channel".to_string() } else { base };
    if !taken(&base) {
        return base;
    }
    (2u32..)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep: String = base.chars().take(30 - suffix.len()).collect();
            format!("{keep}{suffix}")
        })
        .find(|name| !taken(name))
        .unwrap_or(base)
}

/// Another channel's actor by user name (the root's WebFinger answers for every channel's actor): its
/// URLs while that channel's federation is on. Given by the composition root to the default channel.
pub type ActorLookup = Arc<dyn Fn(&str) -> Option<Local> + Send + Sync>;

/// Whether a fediverse user name is another channel's (compared without case: one host, one
/// WebFinger); given by the composition root to every channel's federation.
pub type UsernameTaken = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What a channel's federation is told of the other channels' actors at construction (the registry
/// of channels answers).
#[derive(Clone)]
pub struct Names {
    /// Whether a user name is another channel's (the `federation/username` setter asks).
    pub username_taken: UsernameTaken,
    /// The other channels' actors, for the root's WebFinger (the default channel's only: the
    /// channels' own WebFinger answers for their own actor).
    pub other_actors: Option<ActorLookup>,
}

/// Limits per client address on what strangers can make federation do (see `throttle`).
pub struct Limits {
    /// Inbox requests that need a remote fetch (an actor not cached, or fetched again): 30 at once,
    /// then one a second, per sending address.
    pub inbox_fetch: Rate,
    /// Inbox fetches in flight at once (`inbox::MAX_FETCHES`).
    pub inbox_fetches: Arc<tokio::sync::Semaphore>,
    /// Wrong Fediverse sign-in codes, per address (backoff, 429).
    pub signin_codes: Backoff,
    /// Fediverse sign-in code requests (each sends a direct message): 10, then one every 30 s.
    pub signin_requests: Rate,
    /// Remote follow lookups (each a WebFinger fetch): 10, then one every 6 s.
    pub remote_follow: Rate,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            inbox_fetch: Rate::new(30, Duration::from_secs(1)),
            inbox_fetches: Arc::new(tokio::sync::Semaphore::new(inbox::MAX_FETCHES)),
            signin_codes: Backoff::new(BackoffConfig::SECRETS),
            signin_requests: Rate::new(10, Duration::from_secs(30)),
            remote_follow: Rate::new(10, Duration::from_secs(6)),
        }
    }
}

/// The federation feature's state.
pub struct Federation {
    pub store: Store,
    pub settings: SettingsStore,
    pub bus: Bus,
    /// Checks chat access tokens and records Fediverse sign-ins.
    pub users: Arc<dyn UserTokens>,
    pub config: FederationConfig,
    pub keys: keys::Keys,
    pub client: client::Client,
    pub queue: delivery::Queue,
    pub codes: signin::Codes,
    pub limits: Limits,
    /// The number of approved followers, kept current for `/api/config` (a handle the composition
    /// root shares with the public API).
    pub follower_count: Arc<AtomicU64>,
    /// The daemon's tasks (federation's run in the `Delivery` stage).
    pub tasks: Tasks,
    /// The names every channel's actor answers to, beyond this channel's own (see [`Names`]).
    pub names: Names,
}

impl Federation {
    /// Open the tables (the key pair is made on first use).
    pub fn open(
        store: Store,
        settings: SettingsStore,
        bus: Bus,
        users: Arc<dyn UserTokens>,
        config: FederationConfig,
        tasks: Tasks,
        names: Names,
    ) -> Result<Arc<Self>, FedError> {
        store.migrate("federation", data::MIGRATIONS)?;
        let client = client::Client::new(&config)?;
        let count = store.with(|c| data::followers(c, data::FollowerState::Approved, 0, 0))?.0;
        Ok(Arc::new(Self {
            follower_count: Arc::new(AtomicU64::new(count.max(0) as u64)),
            keys: keys::Keys::new(store.clone()),
            queue: delivery::Queue::default(),
            codes: signin::Codes::default(),
            limits: Limits::default(),
            store,
            settings,
            bus,
            users,
            client,
            config,
            tasks,
            names,
        }))
    }

    /// Recount the approved followers after a change.
    pub async fn recount(&self) {
        match self.store.call(|c| data::followers(c, data::FollowerState::Approved, 0, 0)).await {
            Ok((n, _)) => self.follower_count.store(n.max(0) as u64, Ordering::Relaxed),
            Err(e) => tracing::warn!("cannot count followers: {e}"),
        }
    }

    /// Whether federation is on (and has a server URL).
    pub fn enabled(&self) -> bool {
        let s = self.settings.get();
        s.federation.federation_enabled && !s.server.server_url.is_empty()
    }

    /// The local actor's URLs, when a server URL is set.
    pub fn local(&self) -> Option<Local> {
        let s = self.settings.get();
        if s.server.server_url.is_empty() {
            return None;
        }
        Local::new(&s.server.server_url, &s.federation.federation_username)
    }

    /// Another channel's actor named `username`, while its federation is on (see [`ActorLookup`]).
    pub fn other_actor(&self, username: &str) -> Option<Local> {
        self.names.other_actors.as_ref().and_then(|lookup| lookup(username))
    }

    /// `local()` for routes: 405 while federation is off, 404 without a server URL.
    pub fn active(&self) -> Result<Local, HttpError> {
        if !self.settings.get().federation.federation_enabled {
            return Err(HttpError::Disabled);
        }
        self.local().ok_or_else(|| HttpError::Api(ApiError::NotFound("the server URL is not set".into())))
    }
}

/// A route's error: an `ApiError`, or 405 while federation is disabled, or 501 (WebFinger for a
/// foreign host).
#[derive(Debug)]
pub enum HttpError {
    Api(ApiError),
    Disabled,
    NotImplemented(String),
}

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError::Api(e)
    }
}

impl From<StoreError> for HttpError {
    fn from(e: StoreError) -> Self {
        HttpError::Api(ApiError::from(e))
    }
}

impl From<FedError> for HttpError {
    fn from(e: FedError) -> Self {
        match e {
            FedError::Remote(m) | FedError::Policy(m) | FedError::Public(m) => HttpError::Api(ApiError::BadRequest(m)),
            FedError::Gone(iri) => HttpError::Api(ApiError::BadRequest(format!("{iri} is gone"))),
            FedError::Busy(m) => HttpError::Api(ApiError::Unavailable(m)),
            FedError::Blocked(m) => HttpError::Api(ApiError::Forbidden(m)),
            other => HttpError::Api(ApiError::Internal(other.to_string())),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            HttpError::Api(e) => return e.into_response(),
            HttpError::Disabled => (StatusCode::METHOD_NOT_ALLOWED, "federation is not enabled".to_string()),
            HttpError::NotImplemented(m) => (StatusCode::NOT_IMPLEMENTED, m),
        };
        (status, Json(StatusResponse { success: false, message })).into_response()
    }
}

/// Start, in the `Delivery` stage, the delivery workers (undelivered activities stay in the queue
/// table for the next start), the go-live post on `Event::StreamStarted`, the scheduled streams'
/// activities on `Event::ScheduleFederation` (`scheduled`) and the federated servers' status poll.
pub fn start(fed: Arc<Federation>, bus: &Bus) {
    let tasks = fed.tasks.clone();
    tasks.spawn_until_stopped(Stage::Delivery, "federation: delivery queue", delivery::run(fed.clone()));
    tasks.spawn_until_stopped(Stage::Delivery, "federation: server status", servers::watch(fed.clone()));
    let mut sub = bus.subscribe("federation");
    let stop = tasks.token(Stage::Delivery);
    // A post being sent when the stage stops is finished.
    tasks.spawn(Stage::Delivery, "federation: go-live", async move {
        loop {
            let event = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                event = sub.recv() => event,
            };
            let Some(event) = event else { return };
            if matches!(*event, Event::StreamStarted(_)) && fed.enabled() {
                if let Err(e) = actor::send_go_live(&fed).await {
                    tracing::warn!("could not send the go-live post to followers: {e}");
                }
            }
            if let Event::ScheduleFederation(activity) = &*event {
                if fed.enabled() {
                    if let Err(e) = scheduled::send(&fed, activity).await {
                        tracing::warn!(
                            event = activity.event_id(),
                            "could not send a scheduled stream's activity: {e}"
                        );
                    }
                }
            }
        }
    });
}

pub use api::routes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channels_user_name_is_its_slug_made_a_user_name_and_free() {
        let none = |_: &str| false;
        assert_eq!(username_for_slug("alpha", none), "alpha");
        assert_eq!(username_for_slug("church-2", none), "church_2");
        let long = "a".repeat(32);
        assert_eq!(username_for_slug(&long, none), "a".repeat(30));
        let taken = |n: &str| n == "streamer" || n == "streamer_2";
        assert_eq!(username_for_slug("streamer", taken), "streamer_3");
        let all_long = |n: &str| n == "a".repeat(30);
        assert_eq!(username_for_slug(&long, all_long), format!("{}_2", "a".repeat(28)));
        for name in [username_for_slug("church-2", none), username_for_slug(&long, all_long)] {
            assert!(crate::config::validate::federation_username(&serde_json::json!(name)).is_ok(), "{name}");
        }
    }

    #[test]
    fn a_channels_actor_lives_under_its_prefix() {
        let l = Local::new("https://box.example/c/alpha/", "alpha").unwrap();
        assert_eq!(l.actor, "https://box.example/c/alpha/federation/user/alpha");
        assert_eq!(l.inbox, "https://box.example/c/alpha/federation/user/alpha/inbox");
        assert_eq!(l.key_id, "https://box.example/c/alpha/federation/user/alpha#main-key");
        assert_eq!(l.account(), "alpha@box.example");
        let mut s = crate::config::Settings::default();
        assert!(active_local(&s).is_none(), "federation off");
        s.federation.federation_enabled = true;
        assert!(active_local(&s).is_none(), "no server URL");
        s.server.server_url = "https://box.example/c/alpha".into();
        s.federation.federation_username = "alpha".into();
        assert_eq!(active_local(&s).unwrap().actor, l.actor);
    }
}
