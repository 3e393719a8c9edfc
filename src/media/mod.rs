//! The media plane: the one owner of the live media between ingest and every output.
//!
//! ```text
//! ingest/{rtmp,srt,whip} --claim(channel, Source)--> the channel's PublisherSlot (one publisher per channel)
//!        | go_live: a Broadcast, every registered reader attached before anything is published
//!        v
//!   SourceWriter --the publisher's media--> transcode (the source's first reader; the feed's writer:
//!        |                                   Started{profile}, what the worker wrote, StreamEnded)
//!        +--> the channel's SourceTap (simulcast `source` targets)
//!                                                       |
//!                         Broadcast::publish: the channel's retention records it first, then the feed
//!                                                       v
//!                        feed::Feed (typed MediaEvents, a bounded queue per reader)
//!                 |        |         |          |          |           |             |
//!                hls     llhls    storage    replays   simulcast     metrics      whep (realtime feed)
//! ```
//! Every output reads a broadcast the same way: it registers once (`MediaPlane::reader`) and is handed
//! each new broadcast with its own feed subscription (`broadcast::Attached`), or asks for a channel's
//! current one (`MediaPlane::current`, `watch`); it reads what is running from the broadcast's profile
//! (`Broadcast::profile`), never from the current settings.
//!
//! - `channel`: channel names (`ChannelId`: `default`, or a slug).
//! - `capacity`: how many channels may be live and how much transcoding the box takes, decided when a
//!   publisher claims (`MediaPlane::claim`): refused, or served as passthrough, beyond them.
//! - `profile`: a broadcast's running `Profile` (what the transcoder runs).
//! - `broadcast`: the broadcast (`Broadcast`, its running `Profile`, the
//!   ingest's `SourceWriter`, the transcoder's `SourceReader`) and the reader contract (`Attached`,
//!   `BroadcastReader`).
//! - `source`: publishers and the single-publisher rule (per channel).
//! - `flv`: FLV tags, the container RTMP publishers send (legacy and Enhanced RTMP video tags).
//! - `mkv`: live Matroska written from Enhanced RTMP FLV tags (HEVC, AV1, VP9), for the worker's demuxer.
//! - `ts`: MPEG-TS, the container SRT publishers send: packet framing, program tables, random access.
//! - `tsmux`: MPEG-TS written from bare H.264 and Opus access units (WHIP), for the worker's demuxer.
//! - `h264`: H.264 Annex-B NAL units, keyframes and the SPS's picture size and frame rate.
//! - `feed`: the typed output feed (`Started`, `SegmentWritten`, `PartWritten`, `InitWritten`,
//!   `PlaylistWritten`, `SegmentRetired`, `StreamEnded`), separate from the control bus.
//! - `retention`: live windows per variant and holds; the only deleter of segment files.
//! - `realtime`: the real-time feed for WebRTC viewers (one variant's H.264 access units and Opus
//!   audio, from the worker), a bounded broadcast with coalesced keyframe requests.
//! - `tap`: the live source's own media for consumers that forward it without an encode (a late
//!   reader starts at a keyframe; a slow one skips to the next; the publisher never waits).
//!
//! This module is in the bottom layer: features use it, it imports no feature.

pub mod broadcast;
pub mod capacity;
pub mod channel;
pub mod feed;
pub mod flv;
pub mod h264;
pub mod mkv;
pub mod profile;
pub mod realtime;
pub mod retention;
pub mod source;
pub mod tap;
pub mod ts;
pub mod tsmux;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};

use capacity::{Admission, Load, Policy};

pub use broadcast::{
    Attached, BadSlug, Broadcast, BroadcastReader, ChannelId, Profile, SlugError, SourceReader, SourceWriter,
    READER_QUEUE,
};
pub use capacity::{CapacityPolicy, Limits};
pub use feed::{Delivery, Feed, HlsPart, MediaEvent, SegmentWritten, Subscription};
pub use retention::{Hold, Retention};
pub use source::{Container, MediaChunk, Protocol, PublisherGuard, PublisherSlot, Source};
pub use tap::{SourceTap, TapReader, TapStream};

/// One channel's lasting media state: its folders, its publisher slot, its retention and source tap
/// (they outlive a broadcast: the last window stays servable until the next one starts), and its current
/// broadcast.
pub struct Channel {
    pub id: ChannelId,
    /// The HLS folder (`<data-dir>/hls` for the default channel).
    pub dir: PathBuf,
    /// Where the thumbnail and preview go (the data dir for the default channel).
    pub images_dir: PathBuf,
    pub slot: Arc<PublisherSlot>,
    pub retention: Arc<Retention>,
    pub tap: Arc<SourceTap>,
    current: watch::Sender<Option<Arc<Broadcast>>>,
    /// Why the channel's last publisher was refused, or its broadcast is served as passthrough (over
    /// capacity); `None` once a publisher went live with the channel's ladder.
    capacity_notice: watch::Sender<Option<String>>,
}

/// Why a publisher could not claim its channel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefused {
    /// Another publisher holds the channel's slot.
    #[error("another stream is already live on this channel")]
    Busy,
    /// The server is over capacity (`media::capacity`); the reason says which limit.
    #[error("{0}")]
    OverCapacity(String),
}

struct Reader {
    name: &'static str,
    /// Only this channel's broadcasts (`None`: every channel's).
    channel: Option<ChannelId>,
    tx: mpsc::Sender<Attached>,
}

/// The plane: channels by id, and the registered readers (see the module doc).
pub struct MediaPlane {
    /// The default channel's HLS folder.
    hls_dir: PathBuf,
    /// The default channel's image folder (the data dir); other channels live under
    /// `<images_dir>/channels/<slug>/`.
    images_dir: PathBuf,
    channels: Mutex<HashMap<ChannelId, Arc<Channel>>>,
    readers: Mutex<Vec<Reader>>,
    next_id: AtomicU64,
    /// The server's capacity (see `capacity`); no limits until the daemon sets one.
    capacity: RwLock<Policy>,
    /// Held while a claim is decided, so two publishers claiming at once are counted one after the other.
    admission: Mutex<()>,
}

impl MediaPlane {
    /// The plane for the default channel's HLS folder `hls_dir` (`<data-dir>/hls`) and image folder
    /// `images_dir` (the data dir).
    pub fn new(hls_dir: PathBuf, images_dir: PathBuf) -> Arc<MediaPlane> {
        Arc::new(MediaPlane {
            hls_dir,
            images_dir,
            channels: Mutex::default(),
            readers: Mutex::default(),
            next_id: AtomicU64::new(1),
            capacity: RwLock::new(Arc::new(capacity::Unlimited)),
            admission: Mutex::new(()),
        })
    }

    /// The server's capacity policy (the daemon's: limits from the server-wide settings, each
    /// channel's planned ladder).
    pub fn set_capacity(&self, policy: Policy) {
        *self.capacity.write() = policy;
    }

    /// Channel `id`'s media state (made on first use).
    pub fn channel(&self, id: &ChannelId) -> Arc<Channel> {
        let mut channels = self.channels.lock();
        if let Some(c) = channels.get(id) {
            return c.clone();
        }
        // The default channel's HLS folder is the plane's own; another channel's is in its folder.
        let images_dir = id.folder_in(&self.images_dir);
        let dir = if images_dir == self.images_dir { self.hls_dir.clone() } else { images_dir.join("hls") };
        let c = Arc::new(Channel {
            id: id.clone(),
            retention: Retention::new(dir.clone()),
            dir,
            images_dir,
            slot: Arc::new(PublisherSlot::default()),
            tap: Arc::new(SourceTap::default()),
            current: watch::channel(None).0,
            capacity_notice: watch::channel(None).0,
        });
        channels.insert(id.clone(), c.clone());
        c
    }

    /// The default channel's media state.
    pub fn default_channel(&self) -> Arc<Channel> {
        self.channel(&ChannelId::default_channel())
    }

    /// Take channel `id`'s publisher slot for `source`: refused while another publisher has it, or
    /// when the server is over capacity and the policy refuses (see `capacity`); over capacity with
    /// `overcapacity=passthrough` the guard is marked, and its broadcast is served as passthrough. The
    /// channel's capacity notice follows the decision. The stream starts with `go_live`; dropping the
    /// guard before that frees the slot.
    pub fn claim(&self, id: &ChannelId, source: Source) -> Result<PublisherGuard, ClaimRefused> {
        let c = self.channel(id);
        let _deciding = self.admission.lock();
        if c.slot.is_taken() {
            return Err(ClaimRefused::Busy);
        }
        let policy = self.capacity.read().clone();
        let admission = capacity::admit(&policy.limits(), self.load(id, &*policy), policy.planned_cost(id));
        let passthrough = match admission {
            Admission::Ladder => None,
            Admission::Passthrough(why) => Some(why),
            Admission::Refused(why) => {
                tracing::warn!(channel = %id, "a publisher was refused: {why}");
                let at = chrono::Utc::now().format("%H:%M:%S");
                c.capacity_notice.send_replace(Some(format!("A publisher was refused at {at} UTC, {why}.")));
                return Err(ClaimRefused::OverCapacity(why));
            }
        };
        if let Some(why) = &passthrough {
            tracing::warn!(channel = %id, "{why}");
        }
        let guard =
            PublisherGuard::claim_as(&c.slot, source, id.clone(), passthrough.clone()).ok_or(ClaimRefused::Busy)?;
        c.capacity_notice.send_replace(passthrough);
        Ok(guard)
    }

    /// What every channel but `id` holding its publisher slot costs (see `capacity`): a passthrough
    /// one nothing, a running one its profile's encoded rungs, one about to start its planned ladder.
    fn load(&self, id: &ChannelId, policy: &dyn capacity::CapacityPolicy) -> Load {
        let channels: Vec<Arc<Channel>> =
            self.channels.lock().values().filter(|c| c.id != *id && c.slot.is_taken()).cloned().collect();
        let mut load = Load::default();
        for c in channels {
            load.live += 1;
            let cost = if c.slot.is_passthrough() {
                0
            } else {
                match c.current.borrow().as_ref().and_then(|b| b.profile()) {
                    Some(p) => capacity::ladder_cost(&p.variants),
                    None => policy.planned_cost(&c.id),
                }
            };
            load.cost = load.cost.saturating_add(cost);
        }
        load
    }

    /// Follow channel `id`'s capacity notice: why its last publisher was refused, or its broadcast is
    /// served as passthrough (`None` once one went live with the channel's ladder).
    pub fn capacity_notice(&self, id: &ChannelId) -> watch::Receiver<Option<String>> {
        self.channel(id).capacity_notice.subscribe()
    }

    /// Ask channel `id`'s publisher to go; false when nobody publishes there.
    pub fn disconnect(&self, id: &ChannelId) -> bool {
        self.channel(id).slot.disconnect()
    }

    /// Ask every channel's publisher to go (shutdown); returns how many there were.
    pub fn disconnect_all(&self) -> usize {
        let channels: Vec<Arc<Channel>> = self.channels.lock().values().cloned().collect();
        channels.iter().filter(|c| c.slot.disconnect()).count()
    }

    /// The publisher holding `guard` goes live: a new broadcast on its channel, handed to every
    /// registered reader (with its feed subscription) before anything can be published on it; returns
    /// the ingest's writer. A reader whose queue of new broadcasts is full misses this one (logged).
    pub fn go_live(&self, guard: PublisherGuard) -> SourceWriter {
        let channel = &guard.channel().clone();
        let c = self.channel(channel);
        let parts = broadcast::Parts {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            dir: c.dir.clone(),
            images_dir: c.images_dir.clone(),
            retention: c.retention.clone(),
            tap: c.tap.clone(),
        };
        let (b, writer) = Broadcast::create(guard, parts);
        let mut readers = self.readers.lock();
        readers.retain(|r| {
            if r.channel.as_ref().is_some_and(|c| c != channel) {
                return !r.tx.is_closed();
            }
            let attached = Attached { broadcast: b.clone(), feed: b.subscribe(r.name) };
            match r.tx.try_send(attached) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(reader = r.name, channel = %channel, "a media reader is behind; it misses a broadcast");
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        drop(readers);
        c.current.send_replace(Some(b.clone()));
        writer
    }

    /// The transcoder is done with `b`: it ends (see `Broadcast::finish`) and stops being its channel's
    /// current broadcast.
    pub fn end(&self, b: &Arc<Broadcast>) {
        if b.finish() {
            let c = self.channel(&b.channel);
            if let Some(why) = &b.passthrough {
                // Served as passthrough no more.
                c.capacity_notice.send_if_modified(|n| {
                    let same = n.as_ref() == Some(why);
                    if same {
                        *n = None;
                    }
                    same
                });
            }
            c.current.send_if_modified(|cur| {
                if cur.as_ref().is_some_and(|c| Arc::ptr_eq(c, b)) {
                    *cur = None;
                    true
                } else {
                    false
                }
            });
        }
    }

    /// Register a reader of every future broadcast (each output once, at start; `name` appears in the
    /// log when it falls behind). Its queue holds [`READER_QUEUE`] new broadcasts.
    pub fn reader(&self, name: &'static str) -> BroadcastReader {
        self.add_reader(name, None)
    }

    /// Register a reader of channel `id`'s future broadcasts only (a channel's own outputs).
    pub fn reader_for(&self, id: &ChannelId, name: &'static str) -> BroadcastReader {
        self.add_reader(name, Some(id.clone()))
    }

    fn add_reader(&self, name: &'static str, channel: Option<ChannelId>) -> BroadcastReader {
        let (tx, rx) = mpsc::channel(READER_QUEUE);
        self.readers.lock().push(Reader { name, channel, tx });
        BroadcastReader { rx }
    }

    /// Forget channel `id` (deleted; nothing live on it): its state and its readers go.
    pub fn forget(&self, id: &ChannelId) {
        self.channels.lock().remove(id);
        self.readers.lock().retain(|r| r.channel.as_ref() != Some(id));
    }

    /// Channel `id`'s live broadcast, if any.
    pub fn current(&self, id: &ChannelId) -> Option<Arc<Broadcast>> {
        self.channel(id).current.borrow().clone()
    }

    /// Follow channel `id`'s live broadcast.
    pub fn watch(&self, id: &ChannelId) -> watch::Receiver<Option<Arc<Broadcast>>> {
        self.channel(id).current.subscribe()
    }

    /// The running profile of channel `id`'s live broadcast (`None` offline, or before transcoding started).
    pub fn running(&self, id: &ChannelId) -> Option<Arc<Profile>> {
        self.current(id).and_then(|b| b.profile())
    }

    /// Every live broadcast.
    pub fn live(&self) -> Vec<Arc<Broadcast>> {
        let channels: Vec<Arc<Channel>> = self.channels.lock().values().cloned().collect();
        channels.iter().filter_map(|c| c.current.borrow().clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(port: u16) -> Source {
        Source { protocol: Protocol::Rtmp, container: Container::Flv, remote: ([127, 0, 0, 1], port).into() }
    }

    fn profile(id: &str, list_size: u32) -> Profile {
        Profile {
            stream_id: id.into(),
            started_at: chrono::Utc::now(),
            variants: Vec::new(),
            segment_seconds: 2,
            list_size,
            latency_level: 2,
            low_latency: false,
            realtime_variant: None,
            encoders: Vec::new(),
        }
    }

    /// Write segment `msn` of variant 0 into `b`'s folder and publish it as the worker would.
    fn segment(b: &Broadcast, msn: u64) -> String {
        let file = format!("seg-{msn}.ts");
        let dir = b.dir.join("0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(&file), b"media").unwrap();
        b.publish(MediaEvent::SegmentWritten(SegmentWritten {
            variant: 0,
            msn,
            file: file.clone(),
            duration: 2.0,
            program_date_time: None,
            bytes: 5,
            independent: true,
        }));
        file
    }

    /// Everything `feed` has queued now (the feed is closed first, so this does not wait).
    async fn drain(feed: &mut Subscription) -> Vec<MediaEvent> {
        let mut out = Vec::new();
        while let Ok(Some(d)) = tokio::time::timeout(std::time::Duration::from_millis(50), feed.recv()).await {
            if let Delivery::Event(ev) = d {
                out.push((*ev).clone());
            }
        }
        out
    }

    #[tokio::test]
    async fn two_broadcasts_on_two_channels_keep_their_feeds_windows_and_files_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let plane = MediaPlane::new(tmp.path().join("hls"), tmp.path().to_path_buf());
        let mut reader = plane.reader("test");
        let (a, b) = (ChannelId::default_channel(), ChannelId::new("second").unwrap());

        // One publisher per channel; a second on the same channel is refused, on another it is not.
        let ga = plane.claim(&a, source(1)).expect("the default channel is free");
        assert_eq!(plane.claim(&a, source(2)).err(), Some(ClaimRefused::Busy), "one publisher per channel");
        let gb = plane.claim(&b, source(3)).expect("another channel is free");
        let wa = plane.go_live(ga);
        let wb = plane.go_live(gb);
        let (ba, bb) = (wa.broadcast().clone(), wb.broadcast().clone());
        assert_ne!(ba.dir, bb.dir, "each channel has its own folder");
        assert_eq!(ba.dir, tmp.path().join("hls"), "the default channel's folder is where it always was");
        assert_eq!(bb.dir, tmp.path().join("channels/second/hls"));
        assert!(!bb.dir.starts_with(&ba.dir), "emptying the default folder cannot touch another channel's");

        // The reader was handed both broadcasts, each with its own subscription.
        let mut att_a = reader.next().await.unwrap();
        let mut att_b = reader.next().await.unwrap();
        assert_eq!((att_a.broadcast.channel.clone(), att_b.broadcast.channel.clone()), (a.clone(), b.clone()));
        assert_eq!(plane.live().len(), 2);

        // List size 1 (+ the grace of 2): the fourth segment retires the first, per channel.
        ba.start(profile("stream-a", 1));
        bb.start(profile("stream-b", 1));
        let files_a: Vec<String> = (0..4).map(|n| segment(&ba, n)).collect();
        let files_b: Vec<String> = (0..2).map(|n| segment(&bb, n)).collect();
        assert_eq!(ba.retention.window(0).len(), 3);
        assert_eq!(bb.retention.window(0).len(), 2, "channel b's window is its own");
        assert!(!ba.dir.join("0").join(&files_a[0]).exists(), "a's retired segment is deleted");
        assert!(bb.dir.join("0").join(&files_b[0]).exists(), "b's files are untouched by a's retention");
        assert_eq!(plane.running(&a).unwrap().stream_id, "stream-a");
        assert_eq!(plane.running(&b).unwrap().stream_id, "stream-b");

        // Ending a leaves b live; each feed got only its own broadcast's events.
        plane.end(&ba);
        assert!(plane.current(&a).is_none() && plane.current(&b).is_some());
        assert!(plane.claim(&a, source(4)).is_ok(), "a's slot is free once its broadcast ended");
        let got_a = drain(&mut att_a.feed).await;
        plane.end(&bb);
        let got_b = drain(&mut att_b.feed).await;
        let written = |evs: &[MediaEvent]| -> Vec<String> {
            evs.iter()
                .filter_map(|e| match e {
                    MediaEvent::SegmentWritten(s) => Some(s.file.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(written(&got_a), files_a);
        assert_eq!(written(&got_b), files_b);
        assert!(matches!(&got_a[0], MediaEvent::Started(p) if p.stream_id == "stream-a"), "Started comes first");
        assert!(matches!(got_a.last(), Some(MediaEvent::StreamEnded)), "StreamEnded comes last");
        assert!(got_a.iter().any(|e| matches!(e, MediaEvent::SegmentRetired { file, .. } if *file == files_a[0])));
        assert!(!got_b.iter().any(|e| matches!(e, MediaEvent::SegmentRetired { .. })), "nothing of b retired");
        assert!(att_a.feed.recv().await.is_none(), "the feed closes with the broadcast");
    }

    #[tokio::test]
    async fn the_source_goes_to_its_one_reader_and_the_profile_follows_the_transcoder() {
        let tmp = tempfile::tempdir().unwrap();
        let plane = MediaPlane::new(tmp.path().join("hls"), tmp.path().to_path_buf());
        let guard = plane.claim(&ChannelId::default_channel(), source(1)).unwrap();
        let mut writer = plane.go_live(guard);
        let b = writer.broadcast().clone();
        assert!(b.profile().is_none(), "no profile before the transcoder starts the broadcast");
        let mut src = b.take_source().expect("the transcoder takes the source");
        assert!(b.take_source().is_none(), "the source has one reader");
        writer.push(MediaChunk::Bytes { data: bytes::Bytes::from_static(b"ts"), random_access: true });
        assert!(matches!(src.media.recv().await, Some(MediaChunk::Bytes { .. })));
        b.start(profile("s1", 3));
        b.update_profile(|p| p.encoders = vec!["libx264".into()]);
        let p = b.profile().unwrap();
        assert_eq!((p.stream_id.as_str(), p.encoders.as_slice()), ("s1", &["libx264".to_string()][..]));
        drop(writer);
        assert!(src.media.recv().await.is_none(), "the source ends when the publisher leaves");
    }
    /// A policy with fixed limits and every channel planning the same ladder.
    struct Fixed(Limits, u64);

    impl CapacityPolicy for Fixed {
        fn limits(&self) -> Limits {
            self.0
        }
        fn planned_cost(&self, _: &ChannelId) -> u64 {
            self.1
        }
    }

    #[tokio::test]
    async fn over_capacity_a_claim_is_refused_or_marked_passthrough_and_the_live_ones_keep_theirs() {
        use crate::config::{OverCapacity, StreamOutputVariant};
        let tmp = tempfile::tempdir().unwrap();
        let plane = MediaPlane::new(tmp.path().join("hls"), tmp.path().to_path_buf());
        let rung = StreamOutputVariant { scaled_width: 640, scaled_height: 360, framerate: 30, ..Default::default() };
        let cost = capacity::ladder_cost(std::slice::from_ref(&rung));
        let limits = Limits { max_live: 2, budget: u64::MAX, over: OverCapacity::Refuse };
        plane.set_capacity(Arc::new(Fixed(limits, cost)));
        let ch = |s: &str| ChannelId::new(s).unwrap();

        let a = plane.go_live(plane.claim(&ch("a"), source(1)).expect("first"));
        let b = plane.go_live(plane.claim(&ch("b"), source(2)).expect("second"));
        let mut notice = plane.capacity_notice(&ch("c"));
        let refused = plane.claim(&ch("c"), source(3)).err();
        assert!(
            matches!(&refused, Some(ClaimRefused::OverCapacity(why)) if why.contains("maxlivechannels 2")),
            "{refused:?}"
        );
        assert!(
            notice.borrow_and_update().as_deref().is_some_and(|n| n.contains("refused")),
            "the channel is told why"
        );
        assert!(!plane.channel(&ch("c")).slot.is_taken());
        assert_eq!(plane.live().len(), 2, "the live ones are untouched");

        // Passthrough instead: the third goes live, marked; the notice goes when it ends.
        plane.set_capacity(Arc::new(Fixed(Limits { over: OverCapacity::Passthrough, ..limits }, cost)));
        let c = plane.go_live(plane.claim(&ch("c"), source(3)).expect("served as passthrough"));
        let why = c.broadcast().passthrough.clone().expect("marked passthrough");
        assert!(why.contains("maxlivechannels"), "{why}");
        assert_eq!(notice.borrow_and_update().as_deref(), Some(why.as_str()));
        assert!(a.broadcast().passthrough.is_none() && b.broadcast().passthrough.is_none());
        plane.end(c.broadcast());
        assert_eq!(*notice.borrow_and_update(), None, "no longer served as passthrough");

        // The budget: one running rung beside; a second is over, a passthrough one costs nothing.
        for w in [&a, &b] {
            w.broadcast().start(Profile { variants: vec![rung.clone()], ..profile("s", 3) });
        }
        plane.end(b.broadcast());
        drop(b);
        let budget = Limits { max_live: 0, budget: cost + cost / 2, over: OverCapacity::Refuse };
        plane.set_capacity(Arc::new(Fixed(budget, cost)));
        let refused = plane.claim(&ch("d"), source(4)).err();
        assert!(
            matches!(&refused, Some(ClaimRefused::OverCapacity(why)) if why.contains("transcode budget")),
            "{refused:?}"
        );
        plane.set_capacity(Arc::new(Fixed(budget, 0)));
        assert!(plane.claim(&ch("d"), source(4)).is_ok(), "a passthrough ladder fits any budget");
        assert_eq!(*plane.capacity_notice(&ch("d")).borrow(), None);
    }
}
