//! Directory (YP) registration: while `directoryenabled` is on and the server URL is set, castd
//! pings the directory service (`POST <directory>/api/ping`, Owncast's protocol) so the instance is
//! listed, and `POST /api/admin/yp/reset` (or a tool's `GET`) forgets the registration key so the next ping registers anew.
//!
//! The directory is `config/directoryurl` (castd's setting; empty = Owncast's
//! `https://directory.owncast.online`). A ping is Owncast's `{key, url}` plus the listing's details
//! (name, description, tags, NSFW flag, stream title, logo, online state, viewer count — 0 while the
//! owner hides it), so a directory need not fetch `/api/yp` (which the server feature serves) to list
//! it. The answer `{success, error, key}` may hand out a key; it is kept in this module's table and
//! sent back with every ping. Pings go out every `YpConfig::ping_interval` (Owncast: 4 minutes), at
//! start, and shortly after the directory settings change or the stream starts or stops. Failures are
//! logged once until a ping succeeds again. A channel whose visibility is not public (the access
//! settings: unlisted, password, token) sends no pings.
//!
//! State: [`Directory`] (settings, bus, stream snapshot, viewer counts, store, HTTP client). The
//! directory section of the settings (its setters, its part of the admin configuration) is
//! `yp::settings`'s.

pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use rusqlite::OptionalExtension;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Notify;
use tracing::{info, warn};

use crate::config::Section;
use crate::events::{Bus, Event};
use crate::http::{ApiError, Auth, Registry, StatusResponse};
use crate::store::settings::SettingsStore;
use crate::store::{Migrations, Store, StoreError};
use crate::stream::{StreamWatch, Viewers};
use crate::tasks::{Stage, Tasks};

/// Owncast pings its directory every four minutes.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(4 * 60);
/// Quiet time after a trigger before pinging, so a burst of setting changes makes one ping.
const DEBOUNCE: Duration = Duration::from_millis(500);
const PING_TIMEOUT: Duration = Duration::from_secs(10);

const MIGRATIONS: Migrations = &["CREATE TABLE yp_registration (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        key TEXT NOT NULL
    );"];

/// Errors of the directory feature.
#[derive(Debug, thiserror::Error)]
pub enum YpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("HTTP client: {0}")]
    Client(String),
}

impl From<YpError> for ApiError {
    fn from(e: YpError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// Timing of the pings.
#[derive(Debug, Clone)]
pub struct YpConfig {
    pub ping_interval: Duration,
}

impl Default for YpConfig {
    fn default() -> Self {
        Self { ping_interval: DEFAULT_PING_INTERVAL }
    }
}

impl YpConfig {
    /// The defaults, with the test/debug switch `CASTD_YP_PING_SECS` (whole seconds, at least 1).
    pub fn from_env() -> Self {
        let secs = std::env::var("CASTD_YP_PING_SECS").ok().and_then(|v| v.trim().parse::<u64>().ok());
        match secs.filter(|s| *s >= 1) {
            Some(s) => Self { ping_interval: Duration::from_secs(s) },
            None => Self::default(),
        }
    }
}

/// The directory feature's state.
pub struct Directory {
    settings: SettingsStore,
    bus: Bus,
    stream: StreamWatch,
    viewers: Viewers,
    store: Store,
    client: reqwest::Client,
    config: YpConfig,
    /// Wakes the pinger at once (a reset).
    wake: Notify,
}

/// What the directory answers to a ping.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PingResponse {
    success: bool,
    error: String,
    key: String,
}

impl Directory {
    pub fn open(
        settings: SettingsStore,
        bus: Bus,
        stream: StreamWatch,
        viewers: Viewers,
        store: Store,
        config: YpConfig,
    ) -> Result<Arc<Self>, YpError> {
        store.migrate("yp", MIGRATIONS)?;
        let client = reqwest::Client::builder()
            .timeout(PING_TIMEOUT)
            .user_agent(concat!("castd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| YpError::Client(e.to_string()))?;
        Ok(Arc::new(Self { settings, bus, stream, viewers, store, client, config, wake: Notify::new() }))
    }

    /// The registration key from the last successful ping (empty before one).
    pub async fn key(&self) -> Result<String, YpError> {
        let key: Option<String> = self
            .store
            .call(|c| Ok(c.query_row("SELECT key FROM yp_registration WHERE id = 1", [], |r| r.get(0)).optional()?))
            .await?;
        Ok(key.unwrap_or_default())
    }

    async fn set_key(&self, key: String) -> Result<(), YpError> {
        self.store
            .call(move |c| {
                c.execute(
                    "INSERT INTO yp_registration (id, key) VALUES (1, ?1) ON CONFLICT(id) DO UPDATE SET key = excluded.key",
                    [key],
                )?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// The ping body: Owncast's `{key, url}` and the listing's details.
    fn ping_body(&self, key: &str) -> Value {
        let s = self.settings.get();
        let online = self.stream.borrow().online;
        let (viewers, _, _) = self.viewers.everywhere();
        json!({
            "key": key,
            "url": s.server.server_url,
            "name": s.instance.name,
            "description": s.instance.summary,
            "streamTitle": s.instance.stream_title,
            "logo": format!("{}/logo", s.server.server_url),
            "tags": s.instance.tags,
            "nsfw": s.instance.nsfw,
            "online": online,
            "viewerCount": if s.instance.hide_viewer_count { 0 } else { viewers },
        })
    }

    /// Ping once, if listing is on and a server URL is set. `Ok(false)`: nothing was sent.
    async fn ping(&self) -> Result<bool, String> {
        let s = self.settings.get();
        if !s.directory.directory_enabled {
            return Ok(false);
        }
        // A channel that is not public (unlisted, or behind a viewing pass) is not listed: Owncast's
        // directory has no unlisted entries, so no ping goes out (the directory drops the listing
        // once its pings stop).
        if !s.access.visibility.is_public() {
            return Ok(false);
        }
        if s.server.server_url.is_empty() {
            return Err("the server URL is not set; the directory cannot list this server".into());
        }
        let endpoint = format!("{}/api/ping", s.directory_url().trim_end_matches('/'));
        let key = self.key().await.map_err(|e| e.to_string())?;
        let body = self.ping_body(&key);
        let resp = self.client.post(&endpoint).json(&body).send().await.map_err(|e| format!("{endpoint}: {e}"))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("{endpoint} answered {status}"));
        }
        let answer: PingResponse =
            resp.json().await.map_err(|e| format!("{endpoint} answered something that is not a ping result: {e}"))?;
        if !answer.success {
            return Err(format!("the directory refused the ping: {}", answer.error));
        }
        if !answer.key.is_empty() && answer.key != key {
            self.set_key(answer.key).await.map_err(|e| e.to_string())?;
        }
        Ok(true)
    }

    /// Forget the registration key and ping again at once.
    pub async fn reset(&self) -> Result<(), YpError> {
        self.set_key(String::new()).await?;
        self.wake.notify_one();
        Ok(())
    }
}

/// The pinger: at start, every interval, and after triggers (see the module doc).
pub fn start(dir: Arc<Directory>, tasks: &Tasks) {
    let mut sub = dir.bus.subscribe("yp");
    tasks.spawn_until_stopped(Stage::Background, "directory pings", async move {
        let mut failing = false;
        let mut next = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = dir.wake.notified() => {}
                ev = sub.recv() => {
                    let Some(ev) = ev else { return };
                    let trigger = match &*ev {
                        // The directory settings, or the server URL it lists.
                        Event::SettingsChanged(change) => {
                            change.touches(Section::Directory) || change.changed(|s| &s.server.server_url)
                        }
                        Event::StreamStarted(_) | Event::StreamStopped(_) => true,
                        _ => false,
                    };
                    if trigger {
                        next = next.min(tokio::time::Instant::now() + DEBOUNCE);
                    }
                    continue;
                }
            }
            match dir.ping().await {
                Ok(sent) => {
                    if sent && failing {
                        info!("the directory accepted the ping again");
                    }
                    failing = false;
                }
                Err(e) => {
                    if !failing {
                        warn!("directory ping failed: {e}");
                    }
                    failing = true;
                }
            }
            next = tokio::time::Instant::now() + dir.config.ping_interval;
        }
    });
}

const GROUP: &str = "admin";

pub fn routes(reg: &mut Registry, dir: Arc<Directory>) {
    settings::routes(reg, dir.clone());
    let mut reg = reg.scope(dir);
    // POST, or GET from a tool (Owncast's own form): a browser's GET is refused (`Scope::action`).
    reg.action("/api/admin/yp/reset", GROUP, Auth::Admin, "Reset the directory registration", reset)
        .returns::<StatusResponse>();
}

async fn reset(State(dir): State<Arc<Directory>>) -> Result<Json<StatusResponse>, ApiError> {
    dir.reset().await?;
    Ok(StatusResponse::ok("directory registration reset"))
}
