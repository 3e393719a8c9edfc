//! The source tap: the live publisher's own media (`MediaChunk`s, in its container, as the ingest hands
//! them to the transcoder) for consumers that forward the source without an encode (simulcast's
//! `source` targets; recordings of the source next).
//!
//! The transcoder's `Feeder` publishes every chunk here before its own queue (`begin` when a publisher
//! goes live, `publish` per chunk, `end` when it leaves). A consumer `subscribe`s and reads with
//! `TapReader::recv`: it gets the stream's latest codec set-up first (FLV sequence headers; MPEG-TS
//! runs carry their program tables in every random-access run), then the media from the next
//! random-access chunk (a video keyframe), so a late subscriber (a target enabled while live, a
//! reconnect) starts where a decoder can join. `recv` answers `None` once that stream has ended.
//!
//! Slow-consumer policy: one bounded broadcast ring (`TAP_CAPACITY` chunks) shared by every reader;
//! publishing never waits (the transcoder is never held up by a forward target). A reader that falls
//! more than the ring behind loses the oldest chunks and skips to the next random-access chunk (the
//! set-up replayed first), and the chunks it lost are counted (`TapReader::skipped`). With no reader
//! the ring keeps nothing.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use super::flv::{TAG_AUDIO, TAG_VIDEO};
use super::source::{Container, MediaChunk};

/// Chunks the ring holds: several seconds of media (an FLV stream is ~80 tags a second).
pub const TAP_CAPACITY: usize = 512;

/// The live source as the tap knows it: `id` tells one broadcast from the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapStream {
    pub id: u64,
    pub container: Container,
}

#[derive(Default)]
struct TapState {
    next_id: u64,
    /// Latest FLV sequence headers of the live stream (video, audio).
    video_setup: Option<MediaChunk>,
    audio_setup: Option<MediaChunk>,
}

/// The source tap (see the module doc); one per media plane.
pub struct SourceTap {
    tx: broadcast::Sender<(u64, MediaChunk)>,
    state: Mutex<TapState>,
    live: watch::Sender<Option<TapStream>>,
}

impl Default for SourceTap {
    fn default() -> Self {
        SourceTap { tx: broadcast::channel(TAP_CAPACITY).0, state: Mutex::default(), live: watch::channel(None).0 }
    }
}

impl SourceTap {
    /// A publisher went live with media in `container`; returns the stream's id for `publish`/`end`.
    pub fn begin(&self, container: Container) -> u64 {
        let mut st = self.state.lock();
        st.next_id += 1;
        st.video_setup = None;
        st.audio_setup = None;
        let id = st.next_id;
        self.live.send_replace(Some(TapStream { id, container }));
        id
    }

    /// One chunk of stream `id`; never waits.
    pub fn publish(&self, id: u64, chunk: &MediaChunk) {
        let mut st = self.state.lock();
        if st.next_id != id {
            return;
        }
        if let MediaChunk::Flv(tag) = chunk {
            if tag.is_sequence_header() {
                match tag.kind {
                    TAG_VIDEO => st.video_setup = Some(chunk.clone()),
                    TAG_AUDIO => st.audio_setup = Some(chunk.clone()),
                    _ => {}
                }
            }
        }
        if self.tx.receiver_count() > 0 {
            // Only fails with no receiver, which is fine.
            let _ = self.tx.send((id, chunk.clone()));
        }
    }

    /// Stream `id` ended (its publisher left).
    pub fn end(&self, id: u64) {
        self.live.send_if_modified(|cur| {
            if cur.is_some_and(|s| s.id == id) {
                *cur = None;
                true
            } else {
                false
            }
        });
    }

    /// The live source, if any; changes when a stream begins or ends.
    pub fn live(&self) -> watch::Receiver<Option<TapStream>> {
        self.live.subscribe()
    }

    /// Read the live stream from now on (`None` when nothing is live).
    pub fn subscribe(self: &Arc<Self>) -> Option<TapReader> {
        let st = self.state.lock();
        let stream = (*self.live.borrow())?;
        let setup: Vec<MediaChunk> = st.video_setup.iter().chain(st.audio_setup.iter()).cloned().collect();
        Some(TapReader {
            tap: self.clone(),
            rx: self.tx.subscribe(),
            live: self.live.subscribe(),
            stream,
            pending: setup,
            waiting_for_random_access: true,
            skipped: 0,
        })
    }

    fn setup(&self) -> Vec<MediaChunk> {
        let st = self.state.lock();
        st.video_setup.iter().chain(st.audio_setup.iter()).cloned().collect()
    }
}

/// One consumer's read position in the tap.
pub struct TapReader {
    tap: Arc<SourceTap>,
    rx: broadcast::Receiver<(u64, MediaChunk)>,
    live: watch::Receiver<Option<TapStream>>,
    stream: TapStream,
    /// Set-up to hand out before the next chunk.
    pending: Vec<MediaChunk>,
    waiting_for_random_access: bool,
    skipped: u64,
}

impl TapReader {
    /// The stream this reader follows.
    pub fn stream(&self) -> TapStream {
        self.stream
    }

    /// Chunks lost because this reader fell behind (see the slow-consumer policy).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next chunk: set-up first, then media from a random-access chunk on. `None` once the stream
    /// has ended (or another has begun).
    pub async fn recv(&mut self) -> Option<MediaChunk> {
        if !self.pending.is_empty() {
            return Some(self.pending.remove(0));
        }
        loop {
            let item = tokio::select! {
                biased;
                r = self.rx.recv() => r,
                _ = self.live.wait_for(|l| l.map(|s| s.id) != Some(self.stream.id)) => return None,
            };
            match item {
                Ok((id, chunk)) => {
                    if id != self.stream.id {
                        if id > self.stream.id {
                            return None;
                        }
                        continue;
                    }
                    if self.waiting_for_random_access {
                        if chunk.is_setup() {
                            return Some(chunk);
                        }
                        if !chunk.is_random_access() {
                            self.skipped += 1;
                            continue;
                        }
                        self.waiting_for_random_access = false;
                    }
                    return Some(chunk);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.skipped += n;
                    self.waiting_for_random_access = true;
                    // The set-up may have changed among the lost chunks.
                    self.pending = self.tap.setup();
                    if !self.pending.is_empty() {
                        return Some(self.pending.remove(0));
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::flv::FlvTag;
    use bytes::Bytes;

    fn tag(kind: u8, ts: u32, data: &'static [u8]) -> MediaChunk {
        MediaChunk::Flv(FlvTag { kind, timestamp: ts, data: Bytes::from_static(data) })
    }

    fn ts_of(c: &MediaChunk) -> u32 {
        match c {
            MediaChunk::Flv(t) => t.timestamp,
            MediaChunk::Bytes { .. } => u32::MAX,
        }
    }

    #[tokio::test]
    async fn a_late_reader_gets_the_setup_then_starts_at_a_keyframe() {
        let tap = Arc::new(SourceTap::default());
        assert!(tap.subscribe().is_none(), "nothing live");
        let id = tap.begin(Container::Flv);
        tap.publish(id, &tag(TAG_VIDEO, 0, &[0x17, 0, 1]));
        tap.publish(id, &tag(TAG_AUDIO, 0, &[0xaf, 0, 2]));
        let mut r = tap.subscribe().expect("live");
        tap.publish(id, &tag(TAG_VIDEO, 33, &[0x27, 1, 3])); // inter frame: skipped
        tap.publish(id, &tag(TAG_AUDIO, 40, &[0xaf, 1, 4])); // before the keyframe: skipped
        tap.publish(id, &tag(TAG_VIDEO, 66, &[0x17, 1, 5]));
        tap.publish(id, &tag(TAG_AUDIO, 70, &[0xaf, 1, 6]));
        let got: Vec<u32> = [r.recv().await, r.recv().await, r.recv().await, r.recv().await]
            .iter()
            .map(|c| ts_of(c.as_ref().expect("chunk")))
            .collect();
        assert_eq!(got, vec![0, 0, 66, 70]);
        assert_eq!(r.skipped(), 2);
        tap.end(id);
        assert!(r.recv().await.is_none(), "the stream ended");
        assert!(tap.subscribe().is_none());
    }

    #[tokio::test]
    async fn a_lagging_reader_skips_to_the_next_keyframe_and_the_publisher_never_waits() {
        let tap = Arc::new(SourceTap::default());
        let id = tap.begin(Container::Flv);
        tap.publish(id, &tag(TAG_VIDEO, 0, &[0x17, 0, 1]));
        let mut r = tap.subscribe().expect("live");
        assert_eq!(r.recv().await.map(|c| ts_of(&c)), Some(0), "set-up");
        for i in 0..(TAP_CAPACITY as u32 * 2) {
            let data: &'static [u8] = if i % 100 == 0 { &[0x17, 1, 0] } else { &[0x27, 1, 0] };
            tap.publish(id, &tag(TAG_VIDEO, i + 1, data));
        }
        // The set-up again, then the first keyframe still in the ring.
        assert_eq!(r.recv().await.map(|c| ts_of(&c)), Some(0));
        let next = r.recv().await.expect("chunk");
        assert!(next.is_random_access() && ts_of(&next) > TAP_CAPACITY as u32, "{}", ts_of(&next));
        assert!(r.skipped() >= TAP_CAPACITY as u64);
    }

    #[tokio::test]
    async fn a_new_stream_ends_the_readers_of_the_last() {
        let tap = Arc::new(SourceTap::default());
        let first = tap.begin(Container::Flv);
        let mut r = tap.subscribe().expect("live");
        let second = tap.begin(Container::MpegTs);
        tap.publish(first, &tag(TAG_VIDEO, 1, &[0x17, 1, 0]));
        assert!(r.recv().await.is_none());
        tap.end(first);
        assert_eq!(tap.live().borrow().map(|s| s.id), Some(second), "ending an old stream leaves the new one");
    }
}
