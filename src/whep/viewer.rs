//! One WHEP viewer's session (`webrtc::Peer`): the real-time feed's RTP payloads, made once per frame
//! for every viewer (`rtp`: H.264 packetization-mode 1 and Opus), written to the viewer's send streams
//! (str0m's `StreamTx::write_rtp`, on the payload types the offer negotiated, with the viewer's own
//! sequence numbers); str0m answers NACKs from its send buffer and sends RTX when negotiated. Video starts at a keyframe, asked for when the
//! connection is up; PLI and FIR become coalesced keyframe requests; a viewer that loses frames (too
//! slow for the bounded broadcast) skips video to the next keyframe (see the module doc of `whep`).
//!
//! While connected the viewer is a playback client of its own (`source: "webrtc"` in
//! `/api/admin/viewers/playback`): str0m's egress statistics (every `STATS_INTERVAL`) give the bitrate
//! sent and, from the viewer's RTCP receiver reports, its packet loss and round-trip time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio_util::sync::DropGuard;
use tracing::{debug, info};

use crate::media::realtime::{Realtime, Received, RtFrame, Subscription};
use crate::metrics::playback::{self, ClientCtx, WebrtcSample};
use crate::throttle::CapPermit;
use crate::webrtc::str0m::format::Codec;
use crate::webrtc::str0m::media::{MediaKind, Mid, Pt};
use crate::webrtc::str0m::rtp::{RtpWrite, SeqNo};
use crate::webrtc::str0m::{Event, Rtc};
use crate::webrtc::{Flow, Peer};

use super::rtp;

/// How often a connected viewer is touched in the viewer list (it expires after 15 s without).
const TOUCH_INTERVAL: Duration = Duration::from_secs(5);
/// How often str0m reports a session's statistics (set on the session's `RtcConfig`).
pub(super) const STATS_INTERVAL: Duration = Duration::from_secs(2);

/// A viewer's sending side.
pub(super) struct Viewer {
    rt: Arc<Realtime>,
    sub: Subscription,
    remote: SocketAddr,
    video: Option<Mid>,
    audio: Option<Mid>,
    video_pt: Option<Pt>,
    audio_pt: Option<Pt>,
    /// The next RTP sequence number of each send stream (random start, RFC 3550).
    video_seq: SeqNo,
    audio_seq: SeqNo,
    connected: bool,
    pending: Option<RtFrame>,
    /// Frames written and frames lost to slowness (for the logs).
    sent: u64,
    lost: u64,
    metrics: Arc<crate::metrics::Metrics>,
    agent: String,
    touched: Option<Instant>,
    /// Its playback-client entry (`webrtc-<random>`), and the last video egress sample (bytes, when).
    client_id: String,
    last_egress: Option<(u64, Instant)>,
    /// Its address's place among `SESSIONS_PER_ADDRESS`, given back when the session ends.
    _place: CapPermit,
    /// Cancels its token when the session ends (the watcher of its viewing pass stops then).
    _ended: DropGuard,
}

impl Viewer {
    pub(super) fn new(
        rt: Arc<Realtime>,
        remote: SocketAddr,
        metrics: Arc<crate::metrics::Metrics>,
        agent: String,
        place: CapPermit,
        ended: DropGuard,
    ) -> Viewer {
        let sub = rt.subscribe();
        Viewer {
            rt,
            sub,
            remote,
            video: None,
            audio: None,
            video_pt: None,
            audio_pt: None,
            video_seq: SeqNo::from(u64::from(rand::random::<u16>())),
            audio_seq: SeqNo::from(u64::from(rand::random::<u16>())),
            connected: false,
            pending: None,
            sent: 0,
            lost: 0,
            metrics,
            agent,
            touched: None,
            client_id: format!("webrtc-{}", crate::password::random_token(12)),
            last_egress: None,
            _place: place,
            _ended: ended,
        }
    }

    /// A stats sample of the video stream: the bitrate since the last one, loss and RTT from RTCP.
    fn egress_stats(&mut self, bytes: u64, at: Instant, loss: Option<f32>, rtt: Option<Duration>) {
        let sent_kbps = self.last_egress.and_then(|(b, t)| {
            let secs = at.checked_duration_since(t)?.as_secs_f64();
            (secs > 0.0).then(|| (bytes.saturating_sub(b) as f64 * 8.0 / 1000.0 / secs).round())
        });
        self.last_egress = Some((bytes, at));
        let sample = WebrtcSample { loss: loss.map(f64::from), rtt_seconds: rtt.map(|d| d.as_secs_f64()), sent_kbps };
        let ctx = ClientCtx::new(self.remote.ip(), &self.agent);
        playback::record_webrtc(&self.metrics.playback, &ctx, &self.client_id, sample);
    }

    /// The payload type of `codec` on `mid` (H.264: packetization mode 1).
    fn pt(rtc: &mut Rtc, mid: Mid, codec: Codec) -> Option<Pt> {
        let w = rtc.writer(mid)?;
        let found = w
            .payload_params()
            .find(|p| {
                let spec = p.spec();
                spec.codec == codec && (codec != Codec::H264 || spec.format.packetization_mode == Some(1))
            })
            .map(|p| p.pt());
        found.or_else(|| {
            let w = rtc.writer(mid)?;
            let pt = w.payload_params().find(|p| p.spec().codec == codec).map(|p| p.pt());
            pt
        })
    }
}

impl Peer for Viewer {
    fn event(&mut self, _rtc: &mut Rtc, event: Event) -> Flow {
        match event {
            Event::MediaAdded(m) => match m.kind {
                MediaKind::Video => self.video = Some(m.mid),
                MediaKind::Audio => self.audio = Some(m.mid),
            },
            Event::Connected => {
                info!(addr = %self.remote, "whep: viewer connected");
                if !self.connected {
                    self.metrics.prom.webrtc_viewers.inc();
                }
                self.connected = true;
                self.sub.wait_for_keyframe();
                self.rt.request_keyframe();
            }
            Event::KeyframeRequest(_) => self.rt.request_keyframe(),
            Event::MediaEgressStats(st) if Some(st.mid) == self.video && self.connected => {
                self.egress_stats(st.bytes, st.timestamp, st.loss, st.rtt);
            }
            _ => {}
        }
        Flow::Continue
    }

    fn poll_app(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match self.sub.poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Received::Lost(n)) => {
                    self.lost += n;
                    self.rt.request_keyframe();
                }
                Poll::Ready(Received::Frame(f)) => {
                    if self.connected {
                        self.pending = Some(f);
                        return Poll::Ready(());
                    }
                }
            }
        }
    }

    fn app(&mut self, rtc: &mut Rtc) -> Flow {
        if self.touched.is_none_or(|t| t.elapsed() >= TOUCH_INTERVAL) {
            self.touched = Some(Instant::now());
            self.metrics.viewers.touch(self.remote.ip(), &self.agent);
        }
        let Some(f) = self.pending.take() else { return Flow::Continue };
        let (mid, pt, time, seq) = if f.video {
            let Some(mid) = self.video else { return Flow::Continue };
            if self.video_pt.is_none() {
                self.video_pt = Self::pt(rtc, mid, Codec::H264);
            }
            let Some(pt) = self.video_pt else { return Flow::Continue };
            // RTP time: 90 kHz for video, 48 kHz for Opus; it wraps, as RTP time does.
            (mid, pt, (f.pts_us * 9 / 100) as u32, &mut self.video_seq)
        } else {
            let Some(mid) = self.audio else { return Flow::Continue };
            if self.audio_pt.is_none() {
                self.audio_pt = Self::pt(rtc, mid, Codec::Opus);
            }
            let Some(pt) = self.audio_pt else { return Flow::Continue };
            (mid, pt, (f.pts_us * 48 / 1000) as u32, &mut self.audio_seq)
        };
        let payloads = rtp::payloads(&f);
        let mut api = rtc.direct_api();
        let Some(tx) = api.stream_tx_by_mid(mid, None) else {
            debug!("whep: no send stream for {mid}");
            return Flow::Continue;
        };
        for p in payloads.iter() {
            let packet = RtpWrite::new(pt, seq.inc(), time, f.at, p.data.clone()).marker(p.marker).nackable(f.video);
            tx.write_rtp(packet);
        }
        self.sent += 1;
        Flow::Continue
    }

    fn closed(&mut self) {
        if self.connected {
            self.metrics.prom.webrtc_viewers.dec();
        }
        self.metrics.playback.remove(&self.client_id);
        info!(addr = %self.remote, sent = self.sent, lost = self.lost, "whep: viewer left");
    }
}
