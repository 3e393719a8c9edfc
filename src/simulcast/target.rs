//! One forward target: its status (what `GET /api/admin/simulcast/status` shows) and its state machine.
//!
//! ```text
//!   off --stream live--> connecting --published--> live --stream ends--> off (FCUnpublish, deleteStream)
//!                            |                       |
//!                            +--error--> retrying <--+--error (dropped, refused, stalled)
//!                                  |  backoff 1 s, 2 s, 4 s ... 60 s, then connecting again
//!                                  +--failing for `Timing::fail_after` (10 min)--> failed (still retrying
//!                                     every 60 s; a health message says so) --published--> live
//! ```
//! The failure streak and the backoff start again once a connection has stayed live for
//! `Timing::stable` (5 s: a target that drops at once keeps its streak and backs off; one that drops
//! every 10 s is tried again after 1 s each time). A target's runner is one
//! task; it never touches the local stream or the other targets (each reads the source tap on its own).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::rtmp::{Ended, Endpoint, Progress, Publisher, Source};
use super::variant::VariantReader;
use super::{Simulcast, SimulcastError};
use crate::config::{SimulcastTarget, TargetVariant};
use crate::media::Broadcast;

pub use crate::events::simulcast::{TargetState, TargetStatus};

/// Timing of retries and of the `failed` state.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Failing this long (no stable connection) makes the target `failed`.
    pub fail_after: Duration,
    /// A connection live this long ends the failure streak.
    pub stable: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            fail_after: Duration::from_secs(600),
            stable: Duration::from_secs(5),
        }
    }
}

impl Timing {
    /// The defaults, with the test/debug switch `CASTD_SIMULCAST_FAIL_SECS` (whole seconds, at least 1)
    /// for `fail_after`; `stable` is at most a quarter of it.
    pub fn from_env() -> Self {
        let mut t = Timing::default();
        if let Some(secs) = std::env::var("CASTD_SIMULCAST_FAIL_SECS").ok().and_then(|v| v.parse::<u64>().ok()) {
            t.fail_after = Duration::from_secs(secs.max(1));
            t.stable = t.stable.min(t.fail_after / 4);
        }
        t
    }
}

/// Exponential backoff: `min`, doubling, at most `max`.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff { next: min, min, max }
    }

    /// The wait before the next try.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

/// A configured target, its status and its runner's stop switch.
pub struct TargetHandle {
    pub config: SimulcastTarget,
    status: Mutex<TargetStatus>,
    bytes: AtomicU64,
    /// (window start, bytes at its start) for the bitrate.
    window: Mutex<(Instant, u64)>,
    pub stop: CancellationToken,
}

/// The window the bitrate is measured over.
const BITRATE_WINDOW: Duration = Duration::from_secs(2);

impl TargetHandle {
    pub fn new(config: SimulcastTarget, stop: CancellationToken) -> Arc<TargetHandle> {
        let status = TargetStatus {
            id: config.id.clone(),
            name: config.name.clone(),
            state: TargetState::Off,
            since: Utc::now(),
            bytes_sent: 0,
            bitrate_kbps: 0,
            last_error: None,
            reconnects: 0,
        };
        Arc::new(TargetHandle {
            config,
            status: Mutex::new(status),
            bytes: AtomicU64::new(0),
            window: Mutex::new((Instant::now(), 0)),
            stop,
        })
    }

    /// The status now.
    pub fn status(&self) -> TargetStatus {
        let mut st = self.status.lock().clone();
        st.bytes_sent = self.bytes.load(Ordering::Relaxed);
        if st.state != TargetState::Live {
            st.bitrate_kbps = 0;
        }
        st
    }

    /// Change the state (and the error); true when the state changed.
    fn set(&self, state: TargetState, error: Option<String>) -> bool {
        let mut st = self.status.lock();
        if error.is_some() {
            st.last_error = error;
        }
        if st.state == state {
            return false;
        }
        st.state = state;
        st.since = Utc::now();
        if state == TargetState::Live {
            *self.window.lock() = (Instant::now(), self.bytes.load(Ordering::Relaxed));
            st.bitrate_kbps = 0;
        }
        true
    }

    fn count_reconnect(&self) {
        self.status.lock().reconnects += 1;
    }
}

impl Progress for TargetHandle {
    fn sent(&self, bytes: u64) {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let mut w = self.window.lock();
        let elapsed = w.0.elapsed();
        if elapsed >= BITRATE_WINDOW {
            let kbps = ((total - w.1) as f64 * 8.0 / 1000.0 / elapsed.as_secs_f64()).round() as u32;
            *w = (Instant::now(), total);
            drop(w);
            self.status.lock().bitrate_kbps = kbps;
        }
    }
}

/// Set the state and tell the feature (webhook, health) when it changed.
fn set_state(sc: &Simulcast, h: &TargetHandle, state: TargetState, error: Option<String>) {
    if h.set(state, error) {
        sc.state_changed(h);
    }
}

/// Why a target cannot run at all (it stays `off` with this as its error).
fn unsupported(t: &SimulcastTarget) -> Option<String> {
    if t.stream_key.is_empty() {
        return Some("no stream key set".into());
    }
    None
}

/// The target's runner: waits for the stream, forwards it, retries; ends when `h.stop` is cancelled.
pub async fn run(sc: Arc<Simulcast>, h: Arc<TargetHandle>) {
    if let Some(why) = unsupported(&h.config) {
        set_state(&sc, &h, TargetState::Off, Some(why));
        return;
    }
    let dest = if h.config.url.starts_with("srt://") {
        super::srt::parse(&h.config.url).map(|(host, port)| Dest::Srt { host, port })
    } else {
        Endpoint::parse(&h.config.url).map(Dest::Rtmp)
    };
    let dest = match dest {
        Ok(d) => d,
        Err(e) => {
            set_state(&sc, &h, TargetState::Off, Some(format!("url: {e}")));
            return;
        }
    };
    // The targets are the channel's settings: they forward its broadcasts.
    let mut live = sc.media.watch(&sc.channel);
    loop {
        let b = tokio::select! {
            _ = h.stop.cancelled() => return,
            s = live.wait_for(|b| b.is_some()) => match s {
                Ok(b) => match b.clone() { Some(b) => b, None => continue },
                Err(_) => return,
            },
        };
        // What a variant target may forward is the broadcast's ladder: wait until it is known.
        let mut profile = b.watch_profile();
        let started = tokio::select! {
            _ = h.stop.cancelled() => return,
            _ = b.ended() => false,
            p = profile.wait_for(|p| p.is_some()) => p.is_ok(),
        };
        if started {
            match forward_stream(&sc, &h, &dest, &b).await {
                Ended::Stopped => return,
                Ended::StreamEnded => set_state(&sc, &h, TargetState::Off, None),
            }
        }
        // Wait for this broadcast to be over before looking for the next.
        tokio::select! {
            _ = h.stop.cancelled() => return,
            _ = live.wait_for(|cur| !is(cur, &b)) => {}
        }
    }
}

/// Whether `cur` is broadcast `b`.
fn is(cur: &Option<Arc<Broadcast>>, b: &Broadcast) -> bool {
    cur.as_ref().is_some_and(|c| c.id == b.id)
}

/// Where a target sends.
enum Dest {
    Rtmp(Endpoint),
    Srt { host: String, port: u16 },
}

/// The target's media for broadcast `b`: the source tap, or its variant of the transcoder's output
/// (`raw`: its MPEG-TS as it is, else remuxed to FLV); `None`: the stream has ended. A variant is one of
/// the broadcast's ladder as it is transcoded (its running profile), whatever the settings say now.
fn source(b: &Arc<Broadcast>, t: &SimulcastTarget, raw: bool) -> Result<Option<Source>, SimulcastError> {
    match t.variant {
        TargetVariant::Source => Ok(b.tap.subscribe().filter(|r| r.stream().id == b.tap_stream).map(Source::Tap)),
        TargetVariant::Index(i) => {
            let ladder = b.profile().map_or(0, |p| p.variants.len());
            if i >= ladder {
                return Err(SimulcastError::Unsupported(format!(
                    "variant {i} does not exist (the video ladder has {ladder})"
                )));
            }
            let reader = if raw { VariantReader::start_raw(b, i) } else { VariantReader::start(b, i)? };
            Ok(Some(Source::Variant(Box::new(reader))))
        }
    }
}

/// Connect once and forward until the stream ends, the target stops or the connection fails; `live_at`
/// is set once published.
async fn attempt(
    sc: &Arc<Simulcast>,
    h: &Arc<TargetHandle>,
    dest: &Dest,
    b: &Arc<Broadcast>,
    live_at: &mut Option<Instant>,
) -> Result<Ended, SimulcastError> {
    let key = &h.config.stream_key;
    let mut published = |sc: &Arc<Simulcast>| {
        // From the stream's set-up and its next keyframe (or independent segment) on.
        info!(target = %h.config.name, "simulcast target live");
        set_state(sc, h, TargetState::Live, None);
        *live_at = Some(Instant::now());
    };
    match dest {
        Dest::Rtmp(ep) => {
            let publisher = Publisher::connect(ep, key, &sc.tls, &sc.reach).await?;
            let Some(reader) = source(b, &h.config, false)? else { return Ok(Ended::StreamEnded) };
            published(sc);
            publisher.forward(reader, key, &h.stop, h.as_ref()).await
        }
        Dest::Srt { host, port } => {
            let socket = super::srt::connect(host, *port, key, &sc.reach).await?;
            let Some(reader) = source(b, &h.config, true)? else { return Ok(Ended::StreamEnded) };
            published(sc);
            super::srt::forward(socket, reader, &h.stop, h.as_ref()).await
        }
    }
}

/// Forward broadcast `b` (connect, publish, retry) until it ends or the target is stopped.
async fn forward_stream(sc: &Arc<Simulcast>, h: &Arc<TargetHandle>, dest: &Dest, b: &Arc<Broadcast>) -> Ended {
    let timing = sc.timing;
    let mut backoff = Backoff::new(timing.backoff_min, timing.backoff_max);
    let mut failing_since: Option<Instant> = None;
    loop {
        if b.is_ended() {
            return Ended::StreamEnded;
        }
        if h.status().state != TargetState::Failed {
            set_state(sc, h, TargetState::Connecting, None);
        }
        let mut live_at = None;
        let result = tokio::select! {
            _ = h.stop.cancelled() => return Ended::Stopped,
            r = attempt(sc, h, dest, b, &mut live_at) => r,
        };
        let error = match result {
            Ok(ended) => return ended,
            Err(SimulcastError::Unsupported(why)) => {
                set_state(sc, h, TargetState::Off, Some(why));
                return Ended::StreamEnded;
            }
            Err(e) => e.to_string(),
        };
        if live_at.is_some_and(|t| t.elapsed() >= timing.stable) {
            failing_since = None;
            backoff.reset();
        }
        let since = *failing_since.get_or_insert_with(Instant::now);
        let state = if since.elapsed() >= timing.fail_after { TargetState::Failed } else { TargetState::Retrying };
        let wait = backoff.next_wait();
        warn!(target = %h.config.name, "simulcast target: {error}; trying again in {} s", wait.as_secs_f32());
        set_state(sc, h, state, Some(error));
        tokio::select! {
            _ = h.stop.cancelled() => return Ended::Stopped,
            _ = b.ended() => return Ended::StreamEnded,
            _ = tokio::time::sleep(wait) => {}
        }
        h.count_reconnect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_a_minute() {
        let t = Timing::default();
        let mut b = Backoff::new(t.backoff_min, t.backoff_max);
        let waits: Vec<u64> = (0..9).map(|_| b.next_wait().as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        b.reset();
        assert_eq!(b.next_wait().as_secs(), 1);
        assert_eq!(t.fail_after, Duration::from_secs(600));
    }

    #[test]
    fn status_changes_and_bitrate() {
        let h = TargetHandle::new(
            SimulcastTarget { id: "a".into(), name: "A".into(), ..Default::default() },
            CancellationToken::new(),
        );
        assert_eq!(h.status().state, TargetState::Off);
        assert!(h.set(TargetState::Connecting, None));
        assert!(!h.set(TargetState::Connecting, None), "no change");
        assert!(h.set(TargetState::Retrying, Some("refused".into())));
        assert!(h.set(TargetState::Live, None));
        assert_eq!(h.status().last_error.as_deref(), Some("refused"), "the last error stays");
        h.sent(1000);
        assert_eq!(h.status().bytes_sent, 1000);
        *h.window.lock() = (Instant::now() - Duration::from_secs(4), 0);
        h.sent(0);
        assert_eq!(h.status().bitrate_kbps, 2, "1000 bytes in 4 s");
    }
}
