//! A broadcast: one live stream on one channel, from the moment a publisher goes live until the
//! transcoder has finished its playlists.
//!
//! ```text
//! ingest --claim(channel, Source)--> PublisherGuard --go_live--> Broadcast --SourceWriter (ingest)
//!                                                        |  every registered reader is attached here,
//!                                                        |  before anything is published:
//!                                                        v
//!      BroadcastReader ("transcode", "hls", "llhls", "storage", "replays", ...): Attached{broadcast, feed}
//!      transcode: take_source() (the publisher's media), start(Profile) -> Started, publish(..), end()
//! ```
//! A `Broadcast` holds what belongs to this one stream: its channel and source, the **running
//! profile** (stream id, the ladder as transcoded, segment length and list size, latency mode, the
//! real-time variant, the encoders, the start time: what every output and report reads instead of the
//! current settings, which an admin may change mid-stream), its output feed (`Started` first, the
//! worker's files, `StreamEnded` last, then closed), the real-time feed, and the source's media until the
//! transcoder takes it. Retention and the source tap belong to the channel (a finished broadcast's last
//! window stays servable until the channel's next one starts) and are shared with the broadcast.
//!
//! Writers: the ingest writes the source (`SourceWriter`), the transcoder alone writes the profile and
//! the feed. Readers: everyone else, through `Attached` (one bounded queue of new broadcasts per reader,
//! see `MediaPlane::reader`) or by asking the plane for a channel's current broadcast.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch, Notify};

pub use super::channel::{BadSlug, ChannelId, SlugError};
use super::feed::{Feed, MediaEvent, Subscription};
pub use super::profile::Profile;
use super::realtime::Realtime;
use super::retention::Retention;
use super::source::{MediaChunk, PublisherGuard, Source};
use super::tap::SourceTap;
use crate::stream::StreamDetails;

/// Media chunks (FLV tags, container runs) buffered between the ingest and the transcoder.
pub const SOURCE_CAPACITY: usize = 2048;

/// The ingest's end of a broadcast's source: hands the publisher's media to the transcoder without
/// waiting. Every chunk also goes to the channel's source tap first (so a transcoder that is behind
/// does not cost a forward target media).
///
/// Slow-consumer policy: the queue holds [`SOURCE_CAPACITY`] chunks (several seconds of media). When it
/// is full, chunks are dropped until the next random-access point (a video keyframe: a decoder cannot
/// use anything between; FLV sequence headers are never dropped), and that is logged. Dropping the
/// writer ends the source (the publisher left).
pub struct SourceWriter {
    tx: mpsc::Sender<MediaChunk>,
    details: watch::Sender<StreamDetails>,
    skipping: bool,
    dropped: u64,
    tap: Arc<SourceTap>,
    tap_stream: u64,
    broadcast: Arc<Broadcast>,
}

impl Drop for SourceWriter {
    fn drop(&mut self) {
        self.tap.end(self.tap_stream);
    }
}

impl SourceWriter {
    /// What the broadcaster sends (metadata, codecs, measured bitrate); the transcoder shows it.
    pub fn details(&self, details: StreamDetails) {
        self.details.send_replace(details);
    }

    /// Hand a chunk of media on without waiting (see the slow-consumer policy above).
    pub fn push(&mut self, chunk: MediaChunk) {
        self.tap.publish(self.tap_stream, &chunk);
        if self.skipping {
            if chunk.is_random_access() {
                tracing::warn!(dropped = self.dropped, "transcoder was behind; media skipped up to this keyframe");
                self.skipping = false;
                self.dropped = 0;
            } else if !chunk.is_setup() {
                self.dropped += 1;
                return;
            }
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(chunk) {
            self.skipping = true;
            self.dropped += 1;
        }
    }

    /// The broadcast this writer feeds.
    pub fn broadcast(&self) -> &Arc<Broadcast> {
        &self.broadcast
    }
}

/// The transcoder's end of the source: the publisher's media and details, in order.
pub struct SourceReader {
    pub media: mpsc::Receiver<MediaChunk>,
    pub details: watch::Receiver<StreamDetails>,
}

/// One live stream (see the module doc).
pub struct Broadcast {
    /// Tells one broadcast from another (unique in the process).
    pub id: u64,
    pub channel: ChannelId,
    pub source: Source,
    /// The channel's HLS folder (variant N in `<dir>/N/`).
    pub dir: PathBuf,
    /// Where the channel's thumbnail and preview go.
    pub images_dir: PathBuf,
    /// The channel's retention (live windows, holds).
    pub retention: Arc<Retention>,
    /// The channel's source tap and this broadcast's stream on it.
    pub tap: Arc<SourceTap>,
    pub tap_stream: u64,
    /// The real-time feed (WHEP viewers).
    pub realtime: Arc<Realtime>,
    /// Why this broadcast is served as passthrough (the server was over capacity when its publisher
    /// claimed the channel, see `media::capacity`): the transcoder runs one passthrough variant instead
    /// of the channel's ladder. `None`: the channel's ladder.
    pub passthrough: Option<String>,
    feed: Feed,
    profile: watch::Sender<Option<Arc<Profile>>>,
    source_media: Mutex<Option<SourceReader>>,
    guard: Mutex<Option<PublisherGuard>>,
    disconnect: Arc<Notify>,
    ended: AtomicBool,
    ended_tx: watch::Sender<bool>,
}

impl std::fmt::Debug for Broadcast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broadcast").field("id", &self.id).field("channel", &self.channel).finish_non_exhaustive()
    }
}

/// What a broadcast is made from (`MediaPlane::go_live`).
pub(super) struct Parts {
    pub id: u64,
    pub dir: PathBuf,
    pub images_dir: PathBuf,
    pub retention: Arc<Retention>,
    pub tap: Arc<SourceTap>,
}

impl Broadcast {
    /// A new broadcast and the ingest's writer for it; `guard` (the channel's publisher slot) is held
    /// until the broadcast ends.
    pub(super) fn create(guard: PublisherGuard, parts: Parts) -> (Arc<Broadcast>, SourceWriter) {
        let channel = guard.channel().clone();
        let (tx, rx) = mpsc::channel(SOURCE_CAPACITY);
        let (details_tx, details_rx) = watch::channel(StreamDetails::default());
        let source = guard.source().clone();
        let disconnect = guard.notify();
        let tap_stream = parts.tap.begin(source.container);
        let passthrough = guard.passthrough().map(str::to_string);
        let broadcast = Arc::new(Broadcast {
            id: parts.id,
            channel,
            source,
            dir: parts.dir,
            images_dir: parts.images_dir,
            retention: parts.retention,
            tap: parts.tap.clone(),
            tap_stream,
            realtime: Arc::new(Realtime::default()),
            passthrough,
            feed: Feed::default(),
            profile: watch::channel(None).0,
            source_media: Mutex::new(Some(SourceReader { media: rx, details: details_rx })),
            guard: Mutex::new(Some(guard)),
            disconnect,
            ended: AtomicBool::new(false),
            ended_tx: watch::channel(false).0,
        });
        let writer = SourceWriter {
            tx,
            details: details_tx,
            skipping: false,
            dropped: 0,
            tap: parts.tap,
            tap_stream,
            broadcast: broadcast.clone(),
        };
        (broadcast, writer)
    }

    /// The publisher's media, for the transcoder (the source's first and only reader): `Some` once.
    pub fn take_source(&self) -> Option<SourceReader> {
        self.source_media.lock().take()
    }

    /// The running profile, once the transcoder started the broadcast.
    pub fn profile(&self) -> Option<Arc<Profile>> {
        self.profile.borrow().clone()
    }

    /// Follow the running profile.
    pub fn watch_profile(&self) -> watch::Receiver<Option<Arc<Profile>>> {
        self.profile.subscribe()
    }

    /// A new subscription to the output feed from now on (a reader that joins mid-stream resyncs from the
    /// live window). Readers registered with the plane get theirs when the broadcast is created.
    pub fn subscribe(&self, name: &'static str) -> Subscription {
        self.feed.subscribe(name)
    }

    /// The transcoder starts the broadcast: the profile, `Started`, then the channel's previous windows
    /// retired (consumers let them go: storage deletes them from the bucket).
    pub fn start(&self, profile: Profile) {
        let profile = Arc::new(profile);
        self.profile.send_replace(Some(profile.clone()));
        self.feed.publish(MediaEvent::Started(profile.clone()));
        for old in self.retention.start_stream(profile.list_size as usize) {
            self.feed.publish(MediaEvent::SegmentRetired { variant: old.variant, file: old.file });
        }
    }

    /// The transcoder changed what it runs (a fallback): the profile follows.
    pub fn update_profile(&self, change: impl FnOnce(&mut Profile)) {
        self.profile.send_modify(|p| {
            if let Some(p) = p {
                let mut next = (**p).clone();
                change(&mut next);
                *p = Arc::new(next);
            }
        });
    }

    /// Publish what the worker wrote: retention records segments and parts first (and retires what
    /// left a window, publishing that too), then every reader gets the event.
    pub fn publish(&self, event: MediaEvent) {
        match &event {
            MediaEvent::SegmentWritten(seg) => {
                let retired = self.retention.add_segment(seg);
                self.feed.publish(event);
                for old in retired {
                    self.feed.publish(MediaEvent::SegmentRetired { variant: old.variant, file: old.file });
                }
                return;
            }
            MediaEvent::PartWritten(part) => self.retention.add_part(part),
            _ => {}
        }
        self.feed.publish(event);
    }

    /// Ask the publisher's connection to close (the admin's disconnect, or transcoding gave up).
    pub fn disconnect(&self) {
        self.disconnect.notify_one();
    }

    /// Whether the broadcast is over.
    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Resolves once the broadcast is over.
    pub async fn ended(&self) {
        let mut rx = self.ended_tx.subscribe();
        let _ = rx.wait_for(|e| *e).await;
    }

    /// The transcoder finished: `StreamEnded`, the feed closes, the publisher slot is free. Only the
    /// first call does anything. The plane forgets it as the channel's current broadcast
    /// (`MediaPlane::end`).
    pub(super) fn finish(&self) -> bool {
        if self.ended.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.feed.publish(MediaEvent::StreamEnded);
        self.feed.close();
        self.source_media.lock().take();
        drop(self.guard.lock().take());
        self.ended_tx.send_replace(true);
        true
    }

    /// Readers subscribed to the feed now.
    pub fn readers(&self) -> usize {
        self.feed.consumers()
    }

    /// Events dropped for slow readers so far.
    pub fn dropped(&self) -> u64 {
        self.feed.dropped()
    }
}

/// A broadcast handed to a registered reader: the broadcast and the reader's own subscription to its
/// feed, made before the broadcast's first event.
pub struct Attached {
    pub broadcast: Arc<Broadcast>,
    pub feed: Subscription,
}

/// New broadcasts queued per reader; a reader that leaves this many unattended misses the next.
pub const READER_QUEUE: usize = 16;

/// A registered reader's end: every new broadcast, on every channel (see `MediaPlane::reader`).
pub struct BroadcastReader {
    pub(super) rx: mpsc::Receiver<Attached>,
}

impl BroadcastReader {
    /// The next new broadcast; `None` when the plane is gone.
    pub async fn next(&mut self) -> Option<Attached> {
        self.rx.recv().await
    }
}
