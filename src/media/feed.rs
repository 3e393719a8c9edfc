//! The typed output feed: exactly what the transcode worker wrote, for every consumer of the media.
//!
//! The supervisor publishes each `MediaEvent` the worker reports (after `retention` has recorded it);
//! consumers (`hls`, `llhls`, `storage`, and next recordings, simulcast and WebRTC) each hold a
//! `Subscription`. The feed is separate from the control bus (`events`): it carries media only, and
//! only the consumers of media wake for it.
//!
//! Slow consumers: every subscription has its own bounded queue (`CAPACITY` events). Publishing never
//! waits: when a queue is full the event is dropped *for that consumer only*, and its next `recv`
//! answers `Delivery::Lagged` once the events queued before the drop have been delivered. A lagged
//! consumer resyncs from the live window (`retention::Retention::window`) instead of from the events it
//! missed; it never stalls the worker or the other consumers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

/// Events queued per consumer (at 30 parts a second over a few variants, several seconds of media).
pub const CAPACITY: usize = 512;

/// A CMAF part the transcoder wrote into `<hls_dir>/<variant>/` (LL-HLS): its file, its place
/// (media sequence number and part index) and what the LL-HLS playlist says about it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HlsPart {
    pub variant: usize,
    /// The variant's init segment (`EXT-X-MAP`), a file in the same folder.
    pub init: String,
    pub msn: u64,
    pub part: u32,
    /// The part's file name.
    pub name: String,
    /// Seconds.
    pub duration: f64,
    /// The part starts with a keyframe.
    pub independent: bool,
    /// Wall-clock time of the segment's start (ms since the Unix epoch): `EXT-X-PROGRAM-DATE-TIME`.
    pub pdt_ms: i64,
    /// Set when this part is the last of segment `msn`: the whole segment's file name.
    pub segment: Option<String>,
    /// The whole segment's duration (seconds) when `segment` is set.
    pub segment_duration: f64,
    /// `PART-TARGET`, seconds.
    pub part_target: f64,
    /// `EXT-X-TARGETDURATION`, seconds.
    pub target_duration: u32,
    /// Full segments the playlist keeps.
    pub list_size: u32,
    /// The part file name pattern's prefix for this run (`part-<id>-`), so later names can be predicted.
    pub prefix: String,
}

/// A media segment the worker finished writing: a whole file that will not change.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentWritten {
    pub variant: usize,
    /// Media sequence number (`EXT-X-MEDIA-SEQUENCE` counting).
    pub msn: u64,
    /// The file name in the variant's folder (`<hls-dir>/<variant>/<file>`).
    pub file: String,
    /// Seconds.
    pub duration: f64,
    /// `EXT-X-PROGRAM-DATE-TIME` of its first frame, ms since the Unix epoch.
    pub program_date_time: Option<i64>,
    pub bytes: u64,
    /// It starts with a keyframe (decodable on its own).
    pub independent: bool,
}

/// What the media plane reports, in the order the worker wrote it.
#[derive(Debug, Clone, PartialEq)]
pub enum MediaEvent {
    /// The broadcast started with this running profile (the transcoder's first event; the channel's
    /// folder was emptied just before). Outputs start afresh here.
    Started(std::sync::Arc<super::profile::Profile>),
    /// A segment was finished (the variant's playlist is rewritten right after: `PlaylistWritten`).
    SegmentWritten(SegmentWritten),
    /// An LL-HLS part (low-latency mode); the part's last one carries the whole segment's name.
    PartWritten(HlsPart),
    /// A variant's initialisation segment (fMP4 `EXT-X-MAP`).
    InitWritten { variant: usize, file: String },
    /// A media playlist (`variant`) or the master playlist (`None`: every variant is playable) was
    /// rewritten on disk.
    PlaylistWritten { variant: Option<usize> },
    /// A segment left the live window (and the grace after it): no playlist names it any more. Its file
    /// is deleted as soon as nobody holds it (`retention`).
    SegmentRetired { variant: usize, file: String },
    /// The stream ended: every playlist is final.
    StreamEnded,
}

/// What a subscription yields.
#[derive(Debug, Clone)]
pub enum Delivery {
    Event(Arc<MediaEvent>),
    /// Events were dropped for this consumer (its queue was full): resync from the live window.
    Lagged,
}

struct Subscriber {
    name: &'static str,
    tx: mpsc::Sender<Arc<MediaEvent>>,
    lagged: Arc<AtomicBool>,
}

/// The feed's publishing end (one per broadcast; the transcode supervisor publishes).
#[derive(Default)]
pub struct Feed {
    subscribers: Mutex<Vec<Subscriber>>,
    dropped: AtomicU64,
    closed: AtomicBool,
}

impl Feed {
    /// A new consumer; `name` appears in the log when it falls behind. A subscription to a closed feed
    /// ends at once.
    pub fn subscribe(&self, name: &'static str) -> Subscription {
        let (tx, rx) = mpsc::channel(CAPACITY);
        let lagged = Arc::new(AtomicBool::new(false));
        let mut subs = self.subscribers.lock();
        if !self.closed.load(Ordering::Acquire) {
            subs.push(Subscriber { name, tx, lagged: lagged.clone() });
        }
        Subscription { rx, lagged }
    }

    /// The broadcast is over: every subscription ends once it has delivered what is queued.
    pub fn close(&self) {
        let mut subs = self.subscribers.lock();
        self.closed.store(true, Ordering::Release);
        subs.clear();
    }

    /// Hand `event` to every consumer without waiting (see the module doc for a full queue).
    pub fn publish(&self, event: MediaEvent) {
        let event = Arc::new(event);
        let mut subs = self.subscribers.lock();
        subs.retain(|s| match s.tx.try_send(event.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                if !s.lagged.swap(true, Ordering::AcqRel) {
                    tracing::warn!(consumer = s.name, "media feed: a consumer fell behind; it resyncs from the window");
                }
                self.dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
    }

    /// Events dropped for slow consumers since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Consumers subscribed now.
    pub fn consumers(&self) -> usize {
        self.subscribers.lock().len()
    }
}

/// A consumer's end of the feed.
pub struct Subscription {
    rx: mpsc::Receiver<Arc<MediaEvent>>,
    lagged: Arc<AtomicBool>,
}

impl Subscription {
    /// The next delivery; `None` when the feed is closed (the broadcast is over) and everything queued
    /// was delivered.
    pub async fn recv(&mut self) -> Option<Delivery> {
        match self.rx.try_recv() {
            Ok(ev) => return Some(Delivery::Event(ev)),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        if self.lagged.swap(false, Ordering::AcqRel) {
            return Some(Delivery::Lagged);
        }
        self.rx.recv().await.map(Delivery::Event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn playlist(n: usize) -> MediaEvent {
        MediaEvent::PlaylistWritten { variant: Some(n) }
    }

    #[tokio::test]
    async fn every_consumer_gets_every_event_in_order() {
        let feed = Feed::default();
        let mut a = feed.subscribe("a");
        let mut b = feed.subscribe("b");
        for n in 0..3 {
            feed.publish(playlist(n));
        }
        for sub in [&mut a, &mut b] {
            for n in 0..3 {
                match sub.recv().await {
                    Some(Delivery::Event(ev)) => assert_eq!(*ev, playlist(n)),
                    other => panic!("expected event {n}, got {other:?}"),
                }
            }
        }
        assert_eq!(feed.dropped(), 0);
    }

    #[tokio::test]
    async fn a_full_consumer_loses_events_alone_and_is_told_it_lagged() {
        let feed = Feed::default();
        let mut slow = feed.subscribe("slow");
        let mut fast = feed.subscribe("fast");
        for n in 0..CAPACITY + 10 {
            feed.publish(playlist(n));
            // The fast consumer keeps up.
            assert!(matches!(fast.recv().await, Some(Delivery::Event(_))));
        }
        assert_eq!(feed.dropped(), 10);
        // The slow one gets what was queued, in order, then the notice, then new events again.
        for n in 0..CAPACITY {
            match slow.recv().await {
                Some(Delivery::Event(ev)) => assert_eq!(*ev, playlist(n)),
                other => panic!("expected event {n}, got {other:?}"),
            }
        }
        assert!(matches!(slow.recv().await, Some(Delivery::Lagged)));
        feed.publish(playlist(9999));
        match slow.recv().await {
            Some(Delivery::Event(ev)) => assert_eq!(*ev, playlist(9999)),
            other => panic!("expected the new event, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_closed_feed_delivers_what_is_queued_then_ends() {
        let feed = Feed::default();
        let mut sub = feed.subscribe("a");
        feed.publish(playlist(1));
        feed.close();
        feed.publish(playlist(2));
        assert!(matches!(sub.recv().await, Some(Delivery::Event(ev)) if *ev == playlist(1)));
        assert!(sub.recv().await.is_none(), "nothing after the close");
        assert!(feed.subscribe("late").recv().await.is_none(), "a late subscriber ends at once");
    }

    #[tokio::test]
    async fn a_dropped_subscription_is_forgotten() {
        let feed = Feed::default();
        let sub = feed.subscribe("gone");
        assert_eq!(feed.consumers(), 1);
        drop(sub);
        feed.publish(MediaEvent::StreamEnded);
        assert_eq!(feed.consumers(), 0);
    }
}
