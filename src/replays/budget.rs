//! The disk budget (`replayMaxGigabytes`, GB of 10^9 bytes) and the retention in days
//! (`replayRetentionDays`, 0 = forever): finished replays go oldest first, never a pinned one or the
//! one being recorded. Deleting a replay deletes its clips (as Owncast), so a clip never outlives the
//! segments it names. Runs when a broadcast ends, when either setting changes, and every
//! `BUDGET_INTERVAL`.

use std::sync::Arc;

use chrono::Utc;
use tracing::{info, warn};

use super::db::{self, ReplayRow};
use super::Replays;

/// The replays to delete, oldest first: past the retention, then as many as it takes to fit
/// `max_bytes` (`rows` newest first, as `db::replays` lists them).
pub fn victims(rows: &[ReplayRow], max_bytes: i64, retention_days: u32, now: chrono::DateTime<Utc>) -> Vec<String> {
    let deletable = |r: &ReplayRow| r.status != db::RECORDING && !r.pinned;
    let mut out = Vec::new();
    let mut total: i64 = rows.iter().map(|r| r.bytes).sum();
    if retention_days > 0 {
        let cutoff = now - chrono::TimeDelta::days(i64::from(retention_days));
        for r in rows.iter().rev() {
            if deletable(r) && r.end_time.unwrap_or(r.start_time) < cutoff {
                out.push(r.id.clone());
                total -= r.bytes;
            }
        }
    }
    for r in rows.iter().rev() {
        if total <= max_bytes {
            break;
        }
        if deletable(r) && !out.contains(&r.id) {
            out.push(r.id.clone());
            total -= r.bytes;
        }
    }
    out
}

/// Apply the budget now.
pub async fn enforce(r: &Arc<Replays>) {
    let s = r.settings.get().replay.clone();
    let rows = match r.store.call(|c| db::replays(c, false, i64::MAX, 0)).await {
        Ok(rows) => rows,
        Err(e) => {
            warn!("replay budget: {e}");
            return;
        }
    };
    let max_bytes = (s.replay_max_gigabytes * 1e9) as i64;
    for id in victims(&rows, max_bytes, s.replay_retention_days, Utc::now()) {
        match r.delete_replay(&id).await {
            Ok(_) => info!(replay = %id, "replay deleted by the disk budget or the retention"),
            Err(e) => warn!(replay = %id, "replay budget: cannot delete: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One fixed "now" for the rows and for `victims` (a leap day at noon): the test no longer depends on two
    /// readings of the clock differing, which made a replay exactly 2 days old pass a 2-day retention only
    /// because the second reading came later.
    fn now() -> chrono::DateTime<Utc> {
        chrono::DateTime::parse_from_rfc3339("2028-02-29T12:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn row(id: &str, age_days: i64, bytes: i64, pinned: bool, status: &str) -> ReplayRow {
        // Each replay ended a minute past its age in days, so "2 days old" is past a 2-day retention.
        let t = now() - chrono::TimeDelta::days(age_days) - chrono::TimeDelta::minutes(1);
        ReplayRow {
            id: id.into(),
            title: String::new(),
            stream_title: String::new(),
            start_time: t,
            end_time: Some(t),
            status: status.into(),
            public: false,
            pinned,
            master: String::new(),
            remote_base: None,
            duration: 1.0,
            bytes,
            clip_count: 0,
        }
    }

    #[test]
    fn oldest_unpinned_first_never_pinned_or_live() {
        // Newest first.
        let rows = vec![
            row("live", 0, 40, false, db::RECORDING),
            row("c", 1, 40, false, db::FINISHED),
            row("b", 2, 40, false, db::INTERRUPTED),
            row("a", 3, 40, true, db::FINISHED),
        ];
        assert_eq!(victims(&rows, 130, 0, now()), vec!["b".to_string()]);
        assert_eq!(victims(&rows, 0, 0, now()), vec!["b".to_string(), "c".to_string()]);
        assert!(victims(&rows, 1000, 0, now()).is_empty());
        // Retention of 2 days: "b" (2 days and a minute) goes, "c" (1 day) stays, "a" is pinned.
        assert_eq!(victims(&rows, 1000, 2, now()), vec!["b".to_string()]);
    }
}
