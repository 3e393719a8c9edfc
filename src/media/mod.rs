//! The media plane: the one owner of the live media between ingest and every output.
//!
//! ```text
//! ingest/{rtmp,srt,whip} --claims--> source::PublisherSlot (one publisher, any protocol)
//!        |  container bytes
//!        v
//! transcode (worker child process) --reports exactly what it wrote--> MediaPlane::publish
//!                                                                         |  retention records it first
//!                                                                         v
//!                        feed::Feed (typed MediaEvents, a bounded queue per consumer)
//!                          |            |             |          |        (next: recordings, webrtc)
//!                         hls         llhls        storage   simulcast (variant targets)
//!
//! ingest --Feeder--> tap::SourceTap (the source's own chunks, one bounded ring) --> simulcast (source targets)
//! ```
//! - `source`: publishers and the single-publisher rule.
//! - `flv`: FLV tags, the container RTMP publishers send.
//! - `ts`: MPEG-TS, the container SRT publishers send: packet framing, program tables, random access.
//! - `tsmux`: MPEG-TS written from bare H.264 and Opus access units (WHIP), for the worker's demuxer.
//! - `h264`: H.264 Annex-B NAL units, keyframes and the SPS's picture size and frame rate.
//! - `feed`: the typed output feed (`SegmentWritten`, `PartWritten`, `InitWritten`, `PlaylistWritten`,
//!   `SegmentRetired`, `StreamEnded`), separate from the control bus.
//! - `retention`: live windows per variant and holds; the only deleter of segment files.
//! - `realtime`: the real-time feed for WebRTC viewers (one variant's H.264 access units and Opus
//!   audio, from the worker), a bounded broadcast with coalesced keyframe requests.
//! - `tap`: the live source's own media for consumers that forward it without an encode (a late
//!   reader starts at a keyframe; a slow one skips to the next; the publisher never waits).
//!
//! This module is in the bottom layer: features use it, it imports no feature.

pub mod feed;
pub mod flv;
pub mod h264;
pub mod realtime;
pub mod retention;
pub mod source;
pub mod tap;
pub mod ts;
pub mod tsmux;

use std::path::PathBuf;
use std::sync::Arc;

pub use feed::{Delivery, Feed, HlsPart, MediaEvent, SegmentWritten, Subscription};
pub use retention::{Hold, Retention};
pub use source::{Container, MediaChunk, Protocol, PublisherGuard, PublisherSlot, Source};
pub use tap::{SourceTap, TapReader, TapStream};

/// The plane's shared state: the feed, retention, the publisher slot and the source tap.
pub struct MediaPlane {
    pub feed: Feed,
    pub retention: Arc<Retention>,
    pub slot: Arc<PublisherSlot>,
    /// The real-time feed (WHEP).
    pub realtime: Arc<realtime::Realtime>,
    pub tap: Arc<SourceTap>,
}

impl MediaPlane {
    /// The plane for the HLS directory `hls_dir` (`<data-dir>/hls`).
    pub fn new(hls_dir: PathBuf) -> Arc<MediaPlane> {
        Arc::new(MediaPlane {
            feed: Feed::default(),
            retention: Retention::new(hls_dir),
            slot: Arc::new(PublisherSlot::default()),
            realtime: Arc::new(realtime::Realtime::default()),
            tap: Arc::new(SourceTap::default()),
        })
    }

    /// A new stream: empty windows of `list_size` segments (plus the grace). The previous stream's last
    /// windows are retired (consumers let them go: storage deletes them from the bucket).
    pub fn start_stream(&self, list_size: usize) {
        for old in self.retention.start_stream(list_size) {
            self.feed.publish(MediaEvent::SegmentRetired { variant: old.variant, file: old.file });
        }
    }

    /// Publish what the worker wrote: retention records segments and parts first (and retires what left
    /// a window, publishing that too), then every consumer gets the event.
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
}
