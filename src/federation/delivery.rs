//! The outbound delivery queue: every activity for a remote inbox is a row of
//! `federation_deliveries` first (so nothing is lost across a restart), then a bounded pool of
//! workers POSTs it, signed.
//!
//! Policy: at most `workers` deliveries in flight, at most `per_host` to one host, each attempt within
//! `delivery_timeout`. A 2xx finishes a delivery; a 4xx other than 408/429 drops it (the inbox refused
//! it for good); anything else (timeout, connection error, 5xx, 408, 429) retries after
//! `retry_base × 2^(attempts-1)` (at most six hours) until `max_attempts`, and backs the whole host
//! off for a while, so a dead instance occupies at most `per_host` workers once and then waits while
//! every other inbox is served. Requests go through the guarded client (`client`): public addresses
//! only, its own per-host limits (a delivery they hold back is tried again a second later, not counted
//! as an attempt). An inbox on a blocked domain is not queued, and a queued one is dropped when its
//! domain was blocked since.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

use super::data::{self, Queued};
use super::{FedError, Federation};
use crate::tasks::Stage;

/// Longest wait between scans of the queue.
const IDLE_POLL: Duration = Duration::from_secs(5);
/// Scan step while some due delivery waits for its host's back-off.
const BACKOFF_POLL: Duration = Duration::from_millis(250);
/// Longest retry delay of one delivery.
const MAX_RETRY: Duration = Duration::from_secs(6 * 3600);
/// Longest back-off of a host.
const MAX_HOST_BACKOFF: Duration = Duration::from_secs(600);
/// Rows read per scan step.
const SCAN_BATCH: i64 = 256;
/// When a delivery the per-host limit held back is tried again.
const HOST_BUSY_RETRY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Host {
    in_flight: usize,
    failures: u32,
    until_ms: i64,
}

/// Rows being sent, and rows finished since the current scan began (a scan may have read them before
/// they were finished; they must not be sent twice).
#[derive(Default)]
struct Tracking {
    in_flight: HashSet<i64>,
    done: HashSet<i64>,
}

/// The queue's runtime state (the rows themselves are in the database).
#[derive(Default)]
pub struct Queue {
    wake: Notify,
    tracking: Mutex<Tracking>,
    hosts: Mutex<HashMap<String, Host>>,
    /// Deliveries accepted by the remote inbox since start.
    pub delivered: AtomicU64,
    /// Deliveries dropped (refused or given up) since start.
    pub dropped: AtomicU64,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn host_of(inbox: &str) -> String {
    url::Url::parse(inbox).map(|u| super::signatures::authority(&u)).unwrap_or_default()
}

fn backoff(base: Duration, n: u32, max: Duration) -> i64 {
    let factor = 1u32.checked_shl(n.saturating_sub(1).min(20)).unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(max).as_millis() as i64
}

/// The keys of a delivery (see `data::enqueue`).
#[derive(Debug, Clone)]
pub struct Keys {
    /// Deliveries with this key reach each inbox in the order queued.
    pub ordering: String,
    /// A newer delivery with this key supersedes one not delivered yet.
    pub coalesce: String,
}

/// Queue `activity` for each inbox (inboxes the URL policy refuses, or on a blocked domain, are
/// skipped and logged).
pub async fn enqueue(fed: &Federation, inboxes: Vec<String>, activity: &Value) -> Result<usize, FedError> {
    enqueue_keyed(fed, inboxes, activity, None).await
}

/// `enqueue` with an ordering and a coalesce key.
pub async fn enqueue_keyed(
    fed: &Federation,
    inboxes: Vec<String>,
    activity: &Value,
    keys: Option<Keys>,
) -> Result<usize, FedError> {
    let blocked = fed.settings.get().federation.federation_blocked_domains.clone();
    let (ok, refused): (Vec<String>, Vec<String>) =
        inboxes.into_iter().partition(|i| fed.client.allowed(i) && !super::blocklist::is_blocked(&blocked, i));
    for r in &refused {
        tracing::warn!(inbox = %r, "not delivering to an inbox the URL policy refuses or on a blocked domain");
    }
    if ok.is_empty() {
        return Ok(0);
    }
    let body = activity.to_string();
    let n = fed
        .store
        .call(move |c| {
            let keys = keys.as_ref().map(|k| (k.ordering.as_str(), k.coalesce.as_str()));
            data::enqueue(c, &ok, &body, now_ms(), keys)
        })
        .await?;
    fed.queue.wake.notify_one();
    Ok(n)
}

/// The delivery loop (runs until aborted).
pub async fn run(fed: Arc<Federation>) {
    let workers = Arc::new(Semaphore::new(fed.config.workers.max(1)));
    loop {
        let mut cursor = 0;
        let mut waiting_for_host = false;
        fed.queue.tracking.lock().done.clear();
        'scan: loop {
            let now = now_ms();
            let rows = match fed.store.call(move |c| data::due(c, now, SCAN_BATCH, cursor)).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("cannot read the federation delivery queue: {e}");
                    break;
                }
            };
            let Some(last) = rows.last() else { break };
            cursor = last.id;
            for row in rows {
                {
                    let t = fed.queue.tracking.lock();
                    if t.in_flight.contains(&row.id) || t.done.contains(&row.id) {
                        continue;
                    }
                }
                let host = host_of(&row.inbox);
                {
                    let mut hosts = fed.queue.hosts.lock();
                    let h = hosts.entry(host.clone()).or_default();
                    if h.until_ms > now {
                        waiting_for_host = true;
                        continue;
                    }
                    if h.in_flight >= fed.config.per_host {
                        continue;
                    }
                    let Ok(permit) = workers.clone().try_acquire_owned() else { break 'scan };
                    h.in_flight += 1;
                    fed.queue.tracking.lock().in_flight.insert(row.id);
                    let fed = fed.clone();
                    // Finished when the stage stops (within its limit); the row stays queued until then.
                    fed.tasks.clone().spawn(Stage::Delivery, "federation: delivery", async move {
                        attempt(&fed, row, &host).await;
                        drop(permit);
                        fed.queue.wake.notify_one();
                    });
                }
            }
        }
        let wait = if waiting_for_host {
            BACKOFF_POLL
        } else {
            match fed.store.call(|c| data::next_due(c)).await {
                Ok(Some(at)) => Duration::from_millis((at - now_ms()).clamp(10, IDLE_POLL.as_millis() as i64) as u64),
                _ => IDLE_POLL,
            }
        };
        tokio::select! {
            _ = fed.queue.wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn send(fed: &Federation, row: &Queued) -> Result<u16, FedError> {
    let local = fed.local().ok_or_else(|| FedError::Policy("the server URL is not set".into()))?;
    // The domain may have been blocked since the delivery was queued.
    if super::blocklist::is_blocked(&fed.settings.get().federation.federation_blocked_domains, &row.inbox) {
        return Err(FedError::Blocked(format!("{} is on a blocked domain", row.inbox)));
    }
    let kp = fed.keys.get().await?;
    let limit = fed.config.delivery_timeout;
    match tokio::time::timeout(
        limit + Duration::from_millis(500),
        fed.client.post_signed(&row.inbox, row.body.as_bytes(), &kp, &local.key_id, limit),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(FedError::Remote(format!("POST {}: timed out", row.inbox))),
    }
}

async fn attempt(fed: &Federation, row: Queued, host: &str) {
    let result = if row.superseded {
        tracing::info!(inbox = %row.inbox, "a newer activity superseded a queued one; dropped unsent");
        Err(FedError::Superseded)
    } else {
        send(fed, &row).await
    };
    let now = now_ms();
    let cfg = &fed.config;
    let (finished, host_failed, error) = match &result {
        Ok(s) if (200..300).contains(s) => {
            fed.queue.delivered.fetch_add(1, Ordering::Relaxed);
            (true, false, String::new())
        }
        Ok(s) if (400..500).contains(s) && *s != 408 && *s != 429 => {
            tracing::warn!(inbox = %row.inbox, status = s, "the inbox refused an activity; dropped");
            fed.queue.dropped.fetch_add(1, Ordering::Relaxed);
            (true, false, String::new())
        }
        Ok(s) => (false, true, format!("HTTP {s}")),
        Err(FedError::Superseded) => (true, false, String::new()),
        Err(FedError::Policy(m) | FedError::Blocked(m)) => {
            tracing::warn!(inbox = %row.inbox, "delivery not allowed: {m}; dropped");
            fed.queue.dropped.fetch_add(1, Ordering::Relaxed);
            (true, false, String::new())
        }
        Err(FedError::Busy(m)) => (false, false, m.clone()),
        Err(e) => (false, true, e.to_string()),
    };
    let id = row.id;
    let db = if finished {
        fed.store.call(move |c| data::finish(c, id)).await
    } else if matches!(result, Err(FedError::Busy(_))) {
        // Not sent: castd's own per-host limit. Tried again soon, not counted as an attempt.
        let (attempts, next) = (row.attempts, now + HOST_BUSY_RETRY.as_millis() as i64);
        fed.store.call(move |c| data::retry(c, id, attempts, next, "the host is busy")).await
    } else {
        let attempts = row.attempts + 1;
        if attempts >= cfg.max_attempts {
            tracing::warn!(inbox = %row.inbox, attempts, "giving up a delivery: {error}");
            fed.queue.dropped.fetch_add(1, Ordering::Relaxed);
            fed.store.call(move |c| data::finish(c, id)).await
        } else {
            tracing::info!(inbox = %row.inbox, attempts, "delivery failed, will retry: {error}");
            let next = now + backoff(cfg.retry_base, attempts, MAX_RETRY);
            fed.store.call(move |c| data::retry(c, id, attempts, next, &error)).await
        }
    };
    if let Err(e) = db {
        tracing::error!("cannot update the federation delivery queue: {e}");
    }
    {
        let mut t = fed.queue.tracking.lock();
        t.in_flight.remove(&id);
        t.done.insert(id);
    }
    let mut hosts = fed.queue.hosts.lock();
    if let Some(h) = hosts.get_mut(host) {
        h.in_flight = h.in_flight.saturating_sub(1);
        if host_failed {
            h.failures += 1;
            h.until_ms = now + backoff(cfg.retry_base, h.failures, MAX_HOST_BACKOFF);
        } else {
            h.failures = 0;
        }
        if h.in_flight == 0 && h.failures == 0 {
            hosts.remove(host);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_secs(30);
        assert_eq!(backoff(b, 1, MAX_RETRY), 30_000);
        assert_eq!(backoff(b, 2, MAX_RETRY), 60_000);
        assert_eq!(backoff(b, 4, MAX_RETRY), 240_000);
        assert_eq!(backoff(b, 40, MAX_RETRY), MAX_RETRY.as_millis() as i64);
        assert_eq!(host_of("https://a.example:8443/inbox"), "a.example:8443");
    }
}
