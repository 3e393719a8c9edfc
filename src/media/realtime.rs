//! The real-time feed: one quality variant's encoded H.264 access units and the audio encoded once to
//! Opus, for every WebRTC (WHEP) viewer.
//!
//! The transcode worker encodes the variant (`config/webrtc/variant`) as it does for HLS and also hands
//! each access unit (Annex B, SPS/PPS before every keyframe) and each 20 ms Opus packet to the
//! supervisor, which publishes them here. The feed is a bounded broadcast (`CAPACITY` frames): the
//! publisher never waits. A subscriber that falls more than `CAPACITY` frames behind loses the frames
//! it missed; `Subscription` then skips video to the next keyframe (audio goes on) and asks for one.
//!
//! Keyframe requests from viewers (a join, a PLI) are coalesced: at most one per `KEYFRAME_INTERVAL`
//! reaches the encoder, however many viewers ask.

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{broadcast, Notify};
use tokio_util::sync::ReusableBoxFuture;

/// Frames the broadcast holds (about 4 s of 30 fps video and 50 Opus packets a second).
pub const CAPACITY: usize = 512;
/// Forced keyframes at most this often.
pub const KEYFRAME_INTERVAL: Duration = Duration::from_secs(1);

/// One frame of the feed.
#[derive(Debug, Clone)]
pub struct RtFrame {
    /// Video (H.264 access unit, Annex B) or audio (one Opus packet).
    pub video: bool,
    /// A video keyframe (IDR with SPS and PPS in front).
    pub keyframe: bool,
    /// Presentation time in microseconds on the worker's timeline.
    pub pts_us: u64,
    /// When the supervisor received it.
    pub at: Instant,
    pub data: Bytes,
}

/// The feed: the broadcast, the keyframe requests, the cached parameter sets.
pub struct Realtime {
    tx: broadcast::Sender<RtFrame>,
    /// Wakes the worker link to send a keyframe request.
    keyframe: Notify,
    last_request: Mutex<Option<Instant>>,
    /// Keyframe requests sent to the encoder so far (after coalescing).
    pub requests_sent: AtomicU64,
    /// The last SPS/PPS seen, put in front of a keyframe that lacks them.
    params: Mutex<Option<Bytes>>,
}

impl Default for Realtime {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Realtime {
            tx,
            keyframe: Notify::new(),
            last_request: Mutex::new(None),
            requests_sent: AtomicU64::new(0),
            params: Mutex::new(None),
        }
    }
}

impl Realtime {
    /// Publish a frame to every subscriber (never waits; nobody listening is fine).
    pub fn publish(&self, mut frame: RtFrame) {
        if frame.video && frame.keyframe {
            let nals: Vec<&[u8]> = super::h264::nal_units(&frame.data).collect();
            let has_sps = nals.iter().any(|n| n.first().is_some_and(|b| b & 0x1f == 7));
            if has_sps {
                let mut ps = Vec::new();
                for n in nals.iter().filter(|n| n.first().is_some_and(|b| matches!(b & 0x1f, 7 | 8))) {
                    ps.extend_from_slice(&[0, 0, 0, 1]);
                    ps.extend_from_slice(n);
                }
                *self.params.lock() = Some(Bytes::from(ps));
            } else if let Some(ps) = self.params.lock().clone() {
                let mut with = Vec::with_capacity(ps.len() + frame.data.len());
                with.extend_from_slice(&ps);
                with.extend_from_slice(&frame.data);
                frame.data = Bytes::from(with);
            }
        }
        let _ = self.tx.send(frame);
    }

    /// A new subscriber: it starts at the next keyframe.
    pub fn subscribe(&self) -> Subscription {
        Subscription { next: ReusableBoxFuture::new(recv(self.tx.subscribe())), closed: false, wait_key: true }
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Ask the encoder for a keyframe; coalesced to one per `KEYFRAME_INTERVAL`.
    pub fn request_keyframe(&self) {
        let now = Instant::now();
        let mut last = self.last_request.lock();
        if last.is_some_and(|t| now.duration_since(t) < KEYFRAME_INTERVAL) {
            return;
        }
        *last = Some(now);
        self.requests_sent.fetch_add(1, Ordering::Relaxed);
        self.keyframe.notify_one();
    }

    /// Wait for a (coalesced) keyframe request: the worker link forwards it.
    pub async fn keyframe_requested(&self) {
        self.keyframe.notified().await
    }
}

type Next = (Result<RtFrame, broadcast::error::RecvError>, broadcast::Receiver<RtFrame>);

/// One receive, handing the receiver back (the subscription reuses one boxed future for every frame).
async fn recv(mut rx: broadcast::Receiver<RtFrame>) -> Next {
    let r = rx.recv().await;
    (r, rx)
}

/// One subscriber's view of the feed: video from a keyframe on; after a loss, video skips to the next
/// keyframe (audio goes on).
pub struct Subscription {
    next: ReusableBoxFuture<'static, Next>,
    /// The feed is gone (its sender dropped): nothing more will come.
    closed: bool,
    wait_key: bool,
}

/// What a subscriber gets.
pub enum Received {
    Frame(RtFrame),
    /// Frames were lost (the subscriber was too slow): ask for a keyframe.
    Lost(u64),
}

impl Subscription {
    /// The next frame to send, or a loss. `Pending` until there is one.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Received> {
        loop {
            if self.closed {
                return Poll::Pending;
            }
            let (r, rx) = match self.next.poll(cx) {
                Poll::Ready(x) => x,
                Poll::Pending => return Poll::Pending,
            };
            self.next.set(recv(rx));
            match r {
                Ok(f) if f.video && self.wait_key && !f.keyframe => continue,
                Ok(f) => {
                    if f.video {
                        self.wait_key = false;
                    }
                    return Poll::Ready(Received::Frame(f));
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.wait_key = true;
                    return Poll::Ready(Received::Lost(n));
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.closed = true;
                    return Poll::Pending;
                }
            }
        }
    }

    /// Send no more video until the next keyframe (a viewer that just connected).
    pub fn wait_for_keyframe(&mut self) {
        self.wait_key = true;
    }

    /// Whether video waits for a keyframe.
    pub fn waiting_for_keyframe(&self) -> bool {
        self.wait_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(video: bool, keyframe: bool, n: u64) -> RtFrame {
        let data = if keyframe {
            vec![0, 0, 0, 1, 0x67, 1, 0, 0, 0, 1, 0x68, 2, 0, 0, 0, 1, 0x65, 3]
        } else {
            vec![0, 0, 0, 1, 0x41, n as u8]
        };
        RtFrame { video, keyframe, pts_us: n, at: Instant::now(), data: Bytes::from(data) }
    }

    /// Everything the subscription yields until it has nothing for 50 ms: (frames' pts, a loss seen).
    async fn drain(sub: &mut Subscription) -> (Vec<u64>, bool) {
        let (mut got, mut lost) = (Vec::new(), false);
        while let Ok(r) =
            tokio::time::timeout(Duration::from_millis(50), std::future::poll_fn(|cx| sub.poll_next(cx))).await
        {
            match r {
                Received::Frame(f) => got.push(f.pts_us),
                Received::Lost(_) => lost = true,
            }
        }
        (got, lost)
    }

    #[tokio::test]
    async fn joins_at_a_keyframe_and_skips_to_the_next_after_a_loss() {
        let rt = Realtime::default();
        let mut sub = rt.subscribe();
        rt.publish(frame(true, false, 1));
        rt.publish(frame(false, false, 2));
        rt.publish(frame(true, true, 3));
        let (got, lost) = drain(&mut sub).await;
        assert_eq!(got, vec![2, 3], "audio passes, video starts at the keyframe");
        assert!(!lost);
        for n in 0..(CAPACITY as u64 + 10) {
            rt.publish(frame(true, false, 100 + n));
        }
        rt.publish(frame(true, true, 9999));
        let (after, lost) = drain(&mut sub).await;
        assert!(lost);
        assert_eq!(after, vec![9999], "after the loss, video waits for the keyframe");
    }

    #[test]
    fn keyframe_requests_are_coalesced() {
        let rt = Realtime::default();
        for _ in 0..100 {
            rt.request_keyframe();
        }
        assert_eq!(rt.requests_sent.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_keyframe_without_parameter_sets_gets_the_last_ones() {
        let rt = Realtime::default();
        let mut sub = rt.subscribe();
        rt.publish(frame(true, true, 1));
        let bare = RtFrame { data: Bytes::from_static(&[0, 0, 0, 1, 0x65, 9]), ..frame(true, true, 2) };
        rt.publish(bare);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut last = None;
        while let Poll::Ready(Received::Frame(f)) = sub.poll_next(&mut cx) {
            last = Some(f);
        }
        let last = last.expect("frames");
        assert!(last.data.starts_with(&[0, 0, 0, 1, 0x67]), "SPS in front");
    }
}
