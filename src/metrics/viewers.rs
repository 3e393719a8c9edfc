//! Viewers, identified as Owncast does: md5 of IP + User-Agent. A viewer is active while it keeps
//! calling `GET /api/ping` or fetching playlists (`touch`), and is pruned after
//! `MetricsConfig::viewer_idle` (15 s) without either; pruning runs every 5 s.
//!
//! Owns the counts in `App.viewers`: `current` (active viewers), `session_max` (peak of this
//! broadcast; reset when a stream starts more than 5 minutes after the previous one stopped) and
//! `overall_max` (all-time peak, persisted in this module's `metrics_counters` table), the
//! viewer-count-over-time series, and the IP rule: `X-Forwarded-For` is trusted only when the direct
//! peer is loopback (a local reverse proxy; `http::client_ip`). At most `MAX_VIEWERS` are tracked; further new viewers
//! are not counted until others expire, so a flood of fake agents cannot grow memory without bound.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use chrono::{DateTime, Utc};
use md5::{Digest, Md5};
use parking_lot::Mutex;
use serde::Serialize;

use super::series::{Point, Series};
use super::Metrics;
use crate::store::{Migrations, StoreError};

/// Most viewers tracked at once.
pub const MAX_VIEWERS: usize = 100_000;

/// A stream that starts this long after the previous one stopped is a new session (peak resets).
pub const SESSION_GAP: Duration = Duration::from_secs(5 * 60);

/// This module's tables (owned here; append only).
pub const MIGRATIONS: Migrations =
    &["CREATE TABLE metrics_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL, updated_at TEXT NOT NULL);"];

const OVERALL_MAX: &str = "overall_max_viewer_count";

/// Where a viewer is. castd ships no GeoIP database, so the fields are empty strings.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Geo {
    pub country_code: String,
    pub region_name: String,
    pub time_zone: String,
}

/// An active viewer (the JSON shape of Owncast's `GET /api/admin/viewers` entries).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Viewer {
    #[serde(rename = "clientID")]
    pub id: String,
    pub ip_address: String,
    pub user_agent: String,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub geo: Geo,
    #[serde(skip)]
    seen: Instant,
}

/// Active viewers and the viewer-count history.
pub struct Viewers {
    map: Mutex<HashMap<String, Viewer>>,
    over_time: Mutex<Series>,
    /// The overall peak last written to the database.
    saved_overall: AtomicU64,
    /// When the last stream stopped (for the session-peak rule).
    last_stop: Mutex<Option<Instant>>,
}

impl Default for Viewers {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            over_time: Mutex::new(Series::default()),
            saved_overall: AtomicU64::new(0),
            last_stop: Mutex::new(None),
        }
    }
}

impl Viewers {
    /// The active viewer `id`, if any.
    pub fn get(&self, id: &str) -> Option<Viewer> {
        self.map.lock().get(id).cloned()
    }

    /// Every active viewer, oldest first.
    pub fn snapshot(&self) -> Vec<Viewer> {
        let mut v: Vec<Viewer> = self.map.lock().values().cloned().collect();
        v.sort_by(|a, b| a.first_seen.cmp(&b.first_seen).then_with(|| a.id.cmp(&b.id)));
        v
    }

    /// The viewer-count samples with `start <= time <= end`.
    pub fn over_time(&self, start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Vec<Point> {
        self.over_time.lock().between(start, end)
    }

    pub fn count(&self) -> usize {
        self.map.lock().len()
    }
}

/// Owncast's viewer ID: hex md5 of the IP address followed by the User-Agent.
pub fn viewer_id(ip: &str, user_agent: &str) -> String {
    let mut h = Md5::new();
    h.update(ip.as_bytes());
    h.update(user_agent.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Seam for the HLS handler (on each `.m3u8` fetch) and `GET /api/ping`: mark the viewer with this
/// IP and User-Agent active now. Returns the viewer ID.
pub fn touch(metrics: &Metrics, ip: IpAddr, user_agent: &str) -> String {
    let ip = ip.to_string();
    let id = viewer_id(&ip, user_agent);
    let count = {
        let mut map = metrics.viewers.map.lock();
        let now = Utc::now();
        if let Some(v) = map.get_mut(&id) {
            v.seen = Instant::now();
            v.last_seen = now;
        } else if map.len() < MAX_VIEWERS {
            let v = Viewer {
                id: id.clone(),
                ip_address: ip,
                user_agent: user_agent.to_string(),
                first_seen: now,
                last_seen: now,
                geo: Geo::default(),
                seen: Instant::now(),
            };
            map.insert(id.clone(), v);
        }
        map.len() as u64
    };
    set_current(metrics, count);
    id
}

/// `touch` for a request: its client IP (see `client_ip`) and User-Agent header.
pub fn touch_request(metrics: &Metrics, peer: SocketAddr, headers: &HeaderMap) -> String {
    let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    touch(metrics, crate::http::client_ip(peer, headers), ua)
}

/// Store the active count and raise the peaks.
fn set_current(metrics: &Metrics, count: u64) {
    let counts = &metrics.counts;
    counts.current.store(count, Ordering::Relaxed);
    counts.session_max.fetch_max(count, Ordering::Relaxed);
    counts.overall_max.fetch_max(count, Ordering::Relaxed);
    metrics.prom.active_viewers.set(i64::try_from(count).unwrap_or(i64::MAX));
}

/// Drop viewers idle for longer than `idle`; returns how many were dropped.
pub fn prune(metrics: &Metrics, idle: Duration) -> usize {
    let (dropped, count) = {
        let mut map = metrics.viewers.map.lock();
        let before = map.len();
        map.retain(|_, v| v.seen.elapsed() <= idle);
        (before - map.len(), map.len() as u64)
    };
    set_current(metrics, count);
    dropped
}

/// Add the current viewer count to the over-time series.
pub fn sample(metrics: &Metrics) {
    let (current, _, _) = metrics.counts.get();
    metrics.viewers.over_time.lock().push(Utc::now(), current as f64);
}

/// A stream started: a new session (the session peak restarts from the current count) unless the
/// previous stream stopped less than `SESSION_GAP` ago.
pub fn stream_started(metrics: &Metrics) {
    let gap = match *metrics.viewers.last_stop.lock() {
        Some(stopped) => stopped.elapsed(),
        None => match metrics.stream.borrow().last_disconnect_time {
            Some(t) => (Utc::now() - t).to_std().unwrap_or_default(),
            None => Duration::MAX,
        },
    };
    if gap > SESSION_GAP {
        let current = metrics.counts.current.load(Ordering::Relaxed);
        metrics.counts.session_max.store(current, Ordering::Relaxed);
    }
}

/// A stream stopped (starts the clock of the session-peak rule).
pub fn stream_stopped(metrics: &Metrics) {
    *metrics.viewers.last_stop.lock() = Some(Instant::now());
}

/// Apply the migrations and load the persisted overall peak into `App.viewers`.
pub fn load(metrics: &Metrics) -> Result<(), StoreError> {
    metrics.store.migrate("metrics", MIGRATIONS)?;
    let stored: i64 = metrics.store.with(|c| {
        c.query_row("SELECT value FROM metrics_counters WHERE name = ?1", [OVERALL_MAX], |r| r.get(0)).or_else(|e| {
            match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(0),
                e => Err(StoreError::from(e)),
            }
        })
    })?;
    let stored = u64::try_from(stored).unwrap_or(0);
    metrics.counts.overall_max.fetch_max(stored, Ordering::Relaxed);
    metrics.viewers.saved_overall.store(stored, Ordering::Relaxed);
    Ok(())
}

fn save_sql(conn: &mut rusqlite::Connection, value: u64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO metrics_counters (name, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        rusqlite::params![OVERALL_MAX, i64::try_from(value).unwrap_or(i64::MAX), Utc::now().to_rfc3339()],
    )?;
    Ok(())
}

/// Persist the overall peak if it changed since the last save.
pub async fn save(metrics: &Metrics) -> Result<(), StoreError> {
    let value = metrics.counts.overall_max.load(Ordering::Relaxed);
    if value == metrics.viewers.saved_overall.load(Ordering::Relaxed) {
        return Ok(());
    }
    metrics.store.call(move |c| save_sql(c, value)).await?;
    metrics.viewers.saved_overall.store(value, Ordering::Relaxed);
    Ok(())
}

/// `save` on the current thread (shutdown).
pub fn save_blocking(metrics: &Metrics) -> Result<(), StoreError> {
    let value = metrics.counts.overall_max.load(Ordering::Relaxed);
    if value == metrics.viewers.saved_overall.load(Ordering::Relaxed) {
        return Ok(());
    }
    metrics.store.with(|c| save_sql(c, value))?;
    metrics.viewers.saved_overall.store(value, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewer_id_is_md5_of_ip_and_agent() {
        // md5("127.0.0.1" + "curl/8") computed independently
        let expected = {
            let mut h = Md5::new();
            h.update(b"127.0.0.1curl/8");
            h.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert_eq!(viewer_id("127.0.0.1", "curl/8"), expected);
        assert_eq!(viewer_id("", ""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_ne!(viewer_id("10.0.0.1", "a"), viewer_id("10.0.0.2", "a"));
    }
}
