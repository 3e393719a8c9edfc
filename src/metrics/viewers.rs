//! Viewers, identified as Owncast does: md5 of IP + User-Agent. A viewer is active while it keeps
//! calling `GET /api/ping` or fetching playlists (`touch`), and is pruned after
//! `MetricsConfig::viewer_idle` (15 s) without either; pruning runs every 5 s.
//!
//! Owns the counts in `App.viewers`: `current` (active viewers), `session_max` (peak of this
//! broadcast; reset when a stream starts more than 5 minutes after the previous one stopped) and
//! `overall_max` (all-time peak, persisted in this module's `metrics_counters` table), the
//! viewer-count-over-time series, and the IP rule: the client address of `http::client_ip` (the
//! `X-Forwarded-For` entry of the trusted proxies, `--trusted-proxies`). At most `MAX_VIEWERS` are tracked; further new viewers
//! are not counted until others expire, so a flood of fake agents cannot grow memory without bound.
//!
//! `touch` is on the request path of every playlist fetch, so it is cheap: viewers are kept in
//! `SHARDS` maps keyed by the raw 16-byte digest (the hex ID is made only when a viewer is new), a
//! touch locks one shard for a lookup and an `Instant` store, and the active count is an atomic kept
//! in step by inserts and prunes (no lock taken to count).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use chrono::{DateTime, Utc};
use md5::{Digest, Md5};
use parking_lot::Mutex;
use serde::Serialize;

use prometheus_client::metrics::gauge::Gauge;

use super::series::{Point, Series};
use crate::store::{Migrations, Store, StoreError};
use crate::stream::StreamWatch;

/// Most viewers tracked at once.
pub const MAX_VIEWERS: usize = 100_000;

/// A stream that starts this long after the previous one stopped is a new session (peak resets).
pub const SESSION_GAP: Duration = Duration::from_secs(5 * 60);

/// This module's tables (owned here; append only).
pub const MIGRATIONS: Migrations =
    &["CREATE TABLE metrics_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL, updated_at TEXT NOT NULL);"];

const OVERALL_MAX: &str = "overall_max_viewer_count";

/// Where a viewer is. castd ships no GeoIP database, so the fields are empty strings.
#[derive(Debug, Clone, Default, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Geo {
    pub country_code: String,
    pub region_name: String,
    pub time_zone: String,
}

/// An active viewer (the JSON shape of Owncast's `GET /api/admin/viewers` entries).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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

/// Viewer maps; a touch locks only the shard its key falls in.
const SHARDS: usize = 16;

type Key = [u8; 16];

/// Active viewers and the viewer-count history, with what they write and read: the shared viewer
/// counts (written here only), the Prometheus active-viewer gauge, the stream state (session rule)
/// and the database (the overall peak).
pub struct Viewers {
    counts: crate::stream::Viewers,
    gauge: Gauge,
    stream: StreamWatch,
    store: Store,
    shards: [Mutex<HashMap<Key, Viewer>>; SHARDS],
    /// Entries in all shards together.
    len: AtomicU64,
    over_time: Mutex<Series>,
    /// The overall peak last written to the database.
    saved_overall: AtomicU64,
    /// When the last stream stopped (for the session-peak rule).
    last_stop: Mutex<Option<Instant>>,
}

impl Viewers {
    /// No viewers yet; `load` reads the persisted peak.
    pub fn new(counts: crate::stream::Viewers, gauge: Gauge, stream: StreamWatch, store: Store) -> Self {
        Self {
            counts,
            gauge,
            stream,
            store,
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            len: AtomicU64::new(0),
            over_time: Mutex::new(Series::default()),
            saved_overall: AtomicU64::new(0),
            last_stop: Mutex::new(None),
        }
    }
}

impl Viewers {
    /// The active viewer `id`, if any.
    pub fn get(&self, id: &str) -> Option<Viewer> {
        let key = parse_key(id)?;
        self.shard(&key).lock().get(&key).map(Viewer::now_seen)
    }

    fn shard(&self, key: &Key) -> &Mutex<HashMap<Key, Viewer>> {
        &self.shards[usize::from(key[0]) % SHARDS]
    }

    /// Every active viewer, oldest first.
    pub fn snapshot(&self) -> Vec<Viewer> {
        let mut v: Vec<Viewer> =
            self.shards.iter().flat_map(|s| s.lock().values().map(Viewer::now_seen).collect::<Vec<_>>()).collect();
        v.sort_by(|a, b| a.first_seen.cmp(&b.first_seen).then_with(|| a.id.cmp(&b.id)));
        v
    }

    /// The viewer-count samples with `start <= time <= end`.
    pub fn over_time(&self, start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Vec<Point> {
        self.over_time.lock().between(start, end)
    }

    pub fn count(&self) -> usize {
        usize::try_from(self.len.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }
}

impl Viewer {
    /// A copy with `last_seen` brought up to the last touch (touches only store an `Instant`).
    fn now_seen(&self) -> Viewer {
        let ago = chrono::Duration::from_std(self.seen.elapsed()).unwrap_or_default();
        Viewer { last_seen: Utc::now() - ago, ..self.clone() }
    }
}

fn parse_key(id: &str) -> Option<Key> {
    if id.len() != 32 {
        return None;
    }
    let mut key = [0u8; 16];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(id.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(key)
}

fn hex(key: &Key) -> String {
    use std::fmt::Write;
    key.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// md5 of the IP address (as text) followed by the User-Agent, without allocating.
fn key_of(ip: IpAddr, user_agent: &str) -> Key {
    use std::io::Write;
    let mut buf = [0u8; 48]; // the longest IPv6 text is 45 bytes
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{ip}");
    let n = usize::try_from(cursor.position()).unwrap_or(0);
    let mut h = Md5::new();
    h.update(&buf[..n]);
    h.update(user_agent.as_bytes());
    h.finalize().into()
}

/// Owncast's viewer ID: hex md5 of the IP address followed by the User-Agent.
pub fn viewer_id(ip: &str, user_agent: &str) -> String {
    let mut h = Md5::new();
    h.update(ip.as_bytes());
    h.update(user_agent.as_bytes());
    hex(&h.finalize().into())
}

impl Viewers {
    /// Seam for the HLS handler (on each `.m3u8` fetch) and `GET /api/ping`: mark the viewer with this
    /// IP and User-Agent active now. Returns the viewer ID.
    pub fn touch(&self, ip: IpAddr, user_agent: &str) -> String {
        let key = key_of(ip, user_agent);
        let viewers = self;
        {
            let mut shard = viewers.shard(&key).lock();
            if let Some(v) = shard.get_mut(&key) {
                v.seen = Instant::now();
                return v.id.clone();
            }
            if viewers.len.load(Ordering::Relaxed) < MAX_VIEWERS as u64 {
                let now = Utc::now();
                let v = Viewer {
                    id: hex(&key),
                    ip_address: ip.to_string(),
                    user_agent: user_agent.to_string(),
                    first_seen: now,
                    last_seen: now,
                    geo: Geo::default(),
                    seen: Instant::now(),
                };
                shard.insert(key, v);
                viewers.len.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.set_current(viewers.len.load(Ordering::Relaxed));
        hex(&key)
    }

    /// `touch` for a request: its client IP (see `client_ip`) and User-Agent header.
    pub fn touch_request(&self, peer: SocketAddr, headers: &HeaderMap) -> String {
        let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        self.touch(crate::http::client_ip(peer, headers), ua)
    }

    /// `touch_request` for the playlist path, which needs no ID back: a known viewer costs one shard
    /// lookup and no allocation.
    pub fn mark_request(&self, peer: SocketAddr, headers: &HeaderMap) {
        let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let key = key_of(crate::http::client_ip(peer, headers), ua);
        if let Some(v) = self.shard(&key).lock().get_mut(&key) {
            v.seen = Instant::now();
            return;
        }
        self.touch(crate::http::client_ip(peer, headers), ua);
    }

    /// Store the active count and raise the peaks.
    fn set_current(&self, count: u64) {
        let counts = &self.counts;
        counts.current.store(count, Ordering::Relaxed);
        counts.session_max.fetch_max(count, Ordering::Relaxed);
        counts.overall_max.fetch_max(count, Ordering::Relaxed);
        self.gauge.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Drop viewers idle for longer than `idle`; returns how many were dropped.
    pub fn prune(&self, idle: Duration) -> usize {
        let mut dropped = 0;
        for shard in &self.shards {
            let mut map = shard.lock();
            let before = map.len();
            map.retain(|_, v| v.seen.elapsed() <= idle);
            dropped += before - map.len();
        }
        let count = self.len.fetch_sub(dropped as u64, Ordering::Relaxed) - dropped as u64;
        self.set_current(count);
        dropped
    }

    /// Add the current viewer count to the over-time series.
    pub fn sample(&self) {
        let (current, _, _) = self.counts.get();
        self.over_time.lock().push(Utc::now(), current as f64);
    }

    /// A stream started: a new session (the session peak restarts from the current count) unless the
    /// previous stream stopped less than `SESSION_GAP` ago.
    pub fn stream_started(&self) {
        let gap = match *self.last_stop.lock() {
            Some(stopped) => stopped.elapsed(),
            None => match self.stream.borrow().last_disconnect_time {
                Some(t) => (Utc::now() - t).to_std().unwrap_or_default(),
                None => Duration::MAX,
            },
        };
        if gap > SESSION_GAP {
            let current = self.counts.current.load(Ordering::Relaxed);
            self.counts.session_max.store(current, Ordering::Relaxed);
        }
    }

    /// A stream stopped (starts the clock of the session-peak rule).
    pub fn stream_stopped(&self) {
        *self.last_stop.lock() = Some(Instant::now());
    }

    /// Apply the migrations and load the persisted overall peak .
    pub fn load(&self) -> Result<(), StoreError> {
        self.store.migrate("metrics", MIGRATIONS)?;
        let stored: i64 = self.store.with(|c| {
            c.query_row("SELECT value FROM metrics_counters WHERE name = ?1", [OVERALL_MAX], |r| r.get(0)).or_else(
                |e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(0),
                    e => Err(StoreError::from(e)),
                },
            )
        })?;
        let stored = u64::try_from(stored).unwrap_or(0);
        self.counts.overall_max.fetch_max(stored, Ordering::Relaxed);
        self.saved_overall.store(stored, Ordering::Relaxed);
        Ok(())
    }

    /// Persist the overall peak if it changed since the last save.
    pub async fn save(&self) -> Result<(), StoreError> {
        let value = self.counts.overall_max.load(Ordering::Relaxed);
        if value == self.saved_overall.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.store.call(move |c| save_sql(c, value)).await?;
        self.saved_overall.store(value, Ordering::Relaxed);
        Ok(())
    }
}

fn save_sql(conn: &mut rusqlite::Connection, value: u64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO metrics_counters (name, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        rusqlite::params![OVERALL_MAX, i64::try_from(value).unwrap_or(i64::MAX), Utc::now().to_rfc3339()],
    )?;
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
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(hex(&key_of(ip, "ua")), viewer_id("2001:db8::1", "ua"));
        assert_eq!(parse_key(&viewer_id("a", "b")).map(|k| hex(&k)), Some(viewer_id("a", "b")));
        assert_eq!(parse_key("zz"), None);
        assert_eq!(parse_key(&"g".repeat(32)), None);
    }
}
