//! Sources: who publishes the live media, over which protocol and in which container, and the rule
//! that there is at most one publisher at a time.
//!
//! Every ingest protocol (RTMP, SRT, WHIP) claims its channel's `PublisherSlot` before it hands media
//! on, and describes its publisher as a `Source`. The slot is what `GET /api/admin/disconnect` closes,
//! whatever the protocol; the broadcast holds the `PublisherGuard` until the transcoder has ended it,
//! so a second publisher on the channel is refused until then.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::channel::ChannelId;
use super::flv::FlvTag;

/// The protocol a publisher came in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Rtmp,
    Srt,
    Whip,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Rtmp => "rtmp",
            Protocol::Srt => "srt",
            Protocol::Whip => "whip",
        }
    }
}

/// The container the publisher's media arrives in, as the transcode worker reads it (the worker opens
/// its input with this demuxer instead of probing for one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Container {
    /// FLV tags (RTMP).
    Flv,
    /// FLV tags whose video is Enhanced RTMP (FourCC: HEVC, AV1, VP9; RTMP). The chunks are FLV tags
    /// as for `Flv`; the transcoder re-wraps them as Matroska (`media::mkv`) for the worker, as
    /// libavformat 5.1's flv demuxer reads no Enhanced RTMP video.
    FlvEnhanced,
    /// An MPEG transport stream (SRT).
    MpegTs,
    /// Elementary access units (RTP depacketised: WHIP).
    AccessUnits,
}

impl Container {
    /// The libavformat demuxer that reads this container from a byte stream; `None` for access units,
    /// which a protocol muxes into one of the others before the worker sees them.
    pub fn demuxer(self) -> Option<&'static str> {
        match self {
            Container::Flv => Some("flv"),
            Container::FlvEnhanced => Some("matroska"),
            Container::MpegTs => Some("mpegts"),
            Container::AccessUnits => None,
        }
    }
}

/// One piece of a publisher's media, in its source's container, as a protocol hands it to the
/// transcoder (`ingest::Feeder::push`).
#[derive(Debug, Clone)]
pub enum MediaChunk {
    /// One FLV tag (RTMP). The transcoder frames the tags into an FLV byte stream and replays the
    /// sequence headers to a restarted worker.
    Flv(FlvTag),
    /// A run of a byte-stream container (whole 188-byte MPEG-TS packets from SRT), passed on as it
    /// is. `random_access`: the run starts where a decoder can join (program tables, then a video
    /// keyframe), as the protocol's demuxer found; a worker starts, and after a restart or a skip
    /// resumes, only at such a run.
    Bytes { data: Bytes, random_access: bool },
}

impl MediaChunk {
    /// A decoder can start here.
    pub fn is_random_access(&self) -> bool {
        match self {
            MediaChunk::Flv(tag) => tag.is_video_keyframe(),
            MediaChunk::Bytes { random_access, .. } => *random_access,
        }
    }

    /// Codec set-up a decoder needs whatever the position (FLV sequence headers); never skipped.
    pub fn is_setup(&self) -> bool {
        matches!(self, MediaChunk::Flv(tag) if tag.is_sequence_header())
    }
}

/// A publisher, as the media plane knows it.
#[derive(Debug, Clone)]
pub struct Source {
    pub protocol: Protocol,
    pub container: Container,
    pub remote: SocketAddr,
}

/// The one live publisher, if any (every protocol shares it).
#[derive(Default)]
pub struct PublisherSlot {
    current: Mutex<Option<Held>>,
}

/// Who holds a slot.
struct Held {
    source: Source,
    notify: Arc<Notify>,
    /// Served as passthrough (over capacity): its broadcast encodes nothing.
    passthrough: bool,
}

impl PublisherSlot {
    /// Ask the live publisher's connection to close. False when nobody is publishing.
    pub fn disconnect(&self) -> bool {
        match &*self.current.lock() {
            Some(held) => {
                held.notify.notify_one();
                true
            }
            None => false,
        }
    }

    pub fn is_taken(&self) -> bool {
        self.current.lock().is_some()
    }

    /// The live publisher.
    pub fn source(&self) -> Option<Source> {
        self.current.lock().as_ref().map(|h| h.source.clone())
    }

    /// Whether the publisher holding the slot is served as passthrough (over capacity).
    pub fn is_passthrough(&self) -> bool {
        self.current.lock().as_ref().is_some_and(|h| h.passthrough)
    }
}

/// Held while a broadcast runs (by the transcode supervisor, until the stream is offline); frees the
/// slot on drop.
pub struct PublisherGuard {
    slot: Arc<PublisherSlot>,
    notify: Arc<Notify>,
    source: Source,
    channel: ChannelId,
    passthrough: Option<String>,
}

impl PublisherGuard {
    /// Take the slot of `channel` for `source`, or `None` when another publisher has it.
    pub fn claim(slot: &Arc<PublisherSlot>, source: Source, channel: ChannelId) -> Option<PublisherGuard> {
        Self::claim_as(slot, source, channel, None)
    }

    /// Take the slot; `passthrough`: the publisher is served as passthrough, for this reason (over
    /// capacity, see `media::capacity`).
    pub(super) fn claim_as(
        slot: &Arc<PublisherSlot>,
        source: Source,
        channel: ChannelId,
        passthrough: Option<String>,
    ) -> Option<PublisherGuard> {
        let mut cur = slot.current.lock();
        if cur.is_some() {
            return None;
        }
        let notify = Arc::new(Notify::new());
        *cur = Some(Held { source: source.clone(), notify: notify.clone(), passthrough: passthrough.is_some() });
        Some(PublisherGuard { slot: slot.clone(), notify, source, channel, passthrough })
    }

    /// Why the publisher is served as passthrough (over capacity), if it is.
    pub fn passthrough(&self) -> Option<&str> {
        self.passthrough.as_deref()
    }

    /// The channel whose slot this is.
    pub fn channel(&self) -> &ChannelId {
        &self.channel
    }

    /// The publisher holding the slot.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Say which container the publisher's media is in, once its first media told (RTMP: legacy
    /// FLV or Enhanced RTMP video); before the hand-off to the media plane.
    pub fn set_container(&mut self, container: Container) {
        self.source.container = container;
        if let Some(held) = self.slot.current.lock().as_mut() {
            held.source.container = container;
        }
    }

    /// Resolves when the publisher is asked to go (the admin's disconnect, or transcoding gave up).
    pub async fn disconnected(&self) {
        self.notify.notified().await
    }

    /// Drop the publisher's connection (transcoding gave up).
    pub fn disconnect(&self) {
        self.notify.notify_one();
    }

    /// The notification the protocol's connection waits on.
    pub fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }
}

impl Drop for PublisherGuard {
    fn drop(&mut self) {
        *self.slot.current.lock() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtmp() -> Source {
        Source { protocol: Protocol::Rtmp, container: Container::Flv, remote: "127.0.0.1:5000".parse().unwrap() }
    }

    #[test]
    fn one_publisher_at_a_time_whatever_the_protocol() {
        let slot = Arc::new(PublisherSlot::default());
        assert!(!slot.disconnect(), "nobody to disconnect");
        let ch = ChannelId::default_channel;
        let guard = PublisherGuard::claim(&slot, rtmp(), ch()).expect("free slot");
        let srt = Source { protocol: Protocol::Srt, container: Container::MpegTs, ..rtmp() };
        assert!(PublisherGuard::claim(&slot, srt.clone(), ch()).is_none(), "a second publisher is refused");
        assert_eq!(slot.source().map(|s| s.protocol), Some(Protocol::Rtmp));
        assert!(slot.disconnect());
        drop(guard);
        assert!(!slot.is_taken());
        assert!(PublisherGuard::claim(&slot, srt, ch()).is_some(), "free again once the stream is over");
    }
}
