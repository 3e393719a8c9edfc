//! WHIP ingest (RFC 9725): OBS 30+ and browsers publish H.264 and Opus over WebRTC.
//!
//! `POST /whip` with `Content-Type: application/sdp` and `Authorization: Bearer <stream key>`: a
//! wrong or missing key is a 401 (an address that sent too many wrong keys, over any protocol, gets 429
//! with `Retry-After` before its key is looked at: `Ingest::check_key`), an offer that is not SDP or has no H.264 video a 400, a second
//! publisher while one is live (whatever its protocol: the media plane's `PublisherSlot`) a 409, a
//! server over capacity that refuses (`media::capacity`) a 503 with the reason, a publisher the
//! channel's admission hook refuses (`Ingest::admit`) a 403 with the hook's reason;
//! otherwise castd answers `201 Created` with its SDP answer and the session resource in `Location`
//! (`/whip/{id}`). `DELETE /whip/{id}` ends the publish (`200` with an empty body and
//! `Content-Length: 0`, what FFmpeg's and OBS's WHIP clients read as a clean end), as do the remote
//! going away and the admin's disconnect. `OPTIONS` answers CORS preflights; `PATCH` is 405 (no trickle ICE). The WebRTC side
//! (the single UDP port, ICE-lite, DTLS-SRTP, NACK) is `crate::webrtc`'s.
//!
//! Media: str0m depacketises H.264 (packetization-mode 1) into access units and hands Opus packets
//! on; `media::tsmux` muxes both into MPEG-TS with timestamps from the RTP clocks (each stream's
//! first packet placed at its arrival time), so the worker reads the same container as from SRT and
//! decodes Opus into AAC. castd asks for a keyframe (PLI) until the first one arrives, whenever video
//! arrives with a gap NACK could not fill, and when the last keyframe is older than `KEYFRAME_INTERVAL`
//! (WebRTC encoders send keyframes only when asked; HLS segments start at them). The stream goes live with the first media; the
//! broadcaster details (codecs, size from the SPS, measured framerate and bitrates, the client's
//! `User-Agent` as the encoder, its address) are reported as RTMP's and SRT's are.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::{info, warn};

use super::{Feeder, Ingest, KeyRefused, PublishAttempt};
use crate::http::{BodyDoc, Registry, ResponseDoc};
use crate::media::h264;
use crate::media::tsmux::TsMuxer;
use crate::media::{Container, Protocol, PublisherGuard, Source};
use crate::stream::StreamDetails;
use crate::tasks::{Stage, Tasks};
use crate::webrtc::str0m::format::CodecExtra;
use crate::webrtc::str0m::media::{KeyframeRequestKind, MediaData, MediaKind, Mid};
use crate::webrtc::str0m::{Event, Rtc, RtcConfig};
use crate::webrtc::{http as wh, Flow, Peer, WebRtc, WebRtcError};

/// The endpoint.
pub const PATH: &str = "/whip";
/// What the registry calls WHIP sessions.
const KIND: &str = "whip";
/// Keyframe requests at most this often.
const PLI_INTERVAL: Duration = Duration::from_secs(1);
/// A keyframe is asked for when the last one is older than this. WebRTC encoders send keyframes only
/// when asked (Chromium: hardly ever otherwise), and HLS segments, passthrough ones above all, start at
/// keyframes: this keeps a keyframe at least every 2 s.
const KEYFRAME_INTERVAL: Duration = Duration::from_secs(2);
/// How often the inbound bitrate and framerate are measured.
const STATS_WINDOW: Duration = Duration::from_secs(2);
/// Where the first media lands on the 90 kHz timeline (room for the PCR to run behind it).
const TIMELINE_START: u64 = 90_000;

/// The WebRTC stack WHIP publishes through, and the tasks its sessions run in (given by the daemon,
/// which binds the WebRTC socket before it builds ingest).
pub struct Whip {
    pub webrtc: Arc<WebRtc>,
    pub tasks: Tasks,
}

/// `None` means WebRTC is off and `POST /whip` answers 503.
pub type WhipSlot = Option<Whip>;

pub fn routes(reg: &mut Registry, ingest: Arc<Ingest>) {
    use crate::http::Auth;
    let mut reg = reg.scope(ingest);
    reg.route(
        Method::POST,
        PATH,
        "ingest",
        Auth::Integration("stream key"),
        "WHIP publish: an SDP offer in, the SDP answer out (201, Location of the session)",
        BodyDoc::Content(wh::SDP),
        post,
    )
    .answers(ResponseDoc::Created(wh::SDP))
    .error(403, "Refused by the channel's admission hook (the message is its reason)")
    .error(409, "Another broadcaster is live")
    .error(429, "Too many wrong stream keys from this address: wait the Retry-After seconds")
    .error(415, "The offer is not application/sdp")
    .error(503, "WebRTC is off (no UDP port), or the server is over capacity (the message says which limit)");
    reg.route(Method::OPTIONS, PATH, "ingest", Auth::Public, "CORS preflight of the WHIP endpoint", BodyDoc::None, {
        || async { wh::options(wh::ENDPOINT_ALLOW) }
    })
    .answers(ResponseDoc::NoContent);
    let resource = "/whip/{id}";
    reg.route(
        Method::DELETE,
        resource,
        "ingest",
        Auth::Public,
        "End a WHIP publish (200, an empty body with Content-Length: 0)",
        BodyDoc::None,
        delete,
    )
    .answers(ResponseDoc::Any);
    reg.route(Method::OPTIONS, resource, "ingest", Auth::Public, "CORS preflight of a WHIP session", BodyDoc::None, {
        || async { wh::options(wh::RESOURCE_ALLOW) }
    })
    .answers(ResponseDoc::NoContent);
    // PATCH (trickle ICE, ICE restarts) is not routed: the router answers 405 with `Allow: DELETE, OPTIONS`
    // (a StatusResponse body), RFC 9725's answer from a server without trickle ICE.
}

fn unauthorized(message: &str) -> Response {
    let mut resp = wh::error(StatusCode::UNAUTHORIZED, message);
    resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

async fn post(
    State(ingest): State<Arc<Ingest>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(whip) = ingest.whip.as_ref() else {
        return wh::error(StatusCode::SERVICE_UNAVAILABLE, "WebRTC is off: castd has no WebRTC UDP port");
    };
    let Some(key) = wh::bearer(&headers) else {
        return unauthorized("the stream key goes in Authorization: Bearer <stream key>");
    };
    let ip = crate::http::client_ip(peer, &headers);
    let channel = match ingest.check_key(ip, key) {
        Ok(channel) => {
            ingest.key_proven(ip);
            channel
        }
        Err(KeyRefused::Invalid) => {
            warn!(%ip, "whip publish refused: an invalid stream key");
            return unauthorized("invalid stream key");
        }
        Err(KeyRefused::Limited(wait)) => return wh::too_many(wait, wait.to_string()),
    };
    let offer = match wh::offer(&headers, &body) {
        Ok(o) => o,
        Err(refused) => return refused.into_response(),
    };
    if let Err(e) = crate::webrtc::str0m::change::SdpOffer::from_sdp_string(&offer) {
        return wh::error(StatusCode::BAD_REQUEST, format!("the SDP offer is malformed: {e}"));
    }
    if !offers_h264(&offer) {
        return wh::error(StatusCode::BAD_REQUEST, "the offer has no H.264 video (castd takes H.264 and Opus)");
    }
    let user_agent =
        headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).map(|s| s.chars().take(128).collect());
    let attempt = PublishAttempt { key: key.to_string(), address: ip, user_agent };
    if let Err(why) = ingest.admit(&channel, attempt).await {
        warn!(%ip, %channel, "whip publish refused by the admission hook: {why}");
        return wh::error(StatusCode::FORBIDDEN, why);
    }
    let remote = SocketAddr::new(ip, peer.port());
    let source = Source { protocol: Protocol::Whip, container: Container::MpegTs, remote };
    let guard = match ingest.claim(&channel, source) {
        Ok(guard) => guard,
        Err(crate::media::ClaimRefused::Busy) => {
            warn!(%remote, "a second publisher was refused: a stream is already live");
            return wh::error(StatusCode::CONFLICT, "another broadcaster is live");
        }
        Err(crate::media::ClaimRefused::OverCapacity(why)) => {
            return wh::error(StatusCode::SERVICE_UNAVAILABLE, why);
        }
    };
    let notify = guard.notify();
    let encoder = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.chars().take(128).collect())
        .unwrap_or_default();
    let publish = Publish::new(ingest.clone(), guard, remote, encoder);
    let config = RtcConfig::new().clear_codecs().enable_h264(true).enable_opus(true, false);
    let opened = match whip.webrtc.open(KIND, &offer, config, Box::new(publish), &whip.tasks, Stage::Ingest) {
        Ok(o) => o,
        Err(e @ (WebRtcError::BadOffer(_) | WebRtcError::Rejected(_))) => {
            return wh::error(StatusCode::BAD_REQUEST, e.to_string());
        }
        Err(e @ WebRtcError::Full) => return wh::error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    // The admin's disconnect (or transcoding giving up) ends the session.
    let stop = opened.stop.clone();
    whip.tasks.spawn(Stage::Ingest, "whip disconnect watch", async move {
        tokio::select! {
            _ = notify.notified() => {
                info!("dropping the whip broadcaster");
                stop.cancel();
            }
            _ = stop.cancelled() => {}
        }
    });
    info!(%remote, id = %opened.id, "whip broadcaster accepted");
    wh::created(&format!("{PATH}/{}", opened.id), &opened.id, opened.answer)
}

async fn delete(State(ingest): State<Arc<Ingest>>, Path(id): Path<String>) -> Response {
    match ingest.whip.as_ref() {
        Some(whip) if whip.webrtc.close(KIND, &id) => {
            info!(%id, "whip publish ended by DELETE");
            wh::ended()
        }
        _ => wh::error(StatusCode::NOT_FOUND, "no such WHIP session"),
    }
}

/// Whether an SDP offer has a video section offering H.264.
pub fn offers_h264(sdp: &str) -> bool {
    let mut in_video = false;
    for line in sdp.lines() {
        let line = line.trim();
        if let Some(m) = line.strip_prefix("m=") {
            in_video = m.starts_with("video");
        } else if in_video && line.starts_with("a=rtpmap:") && line.to_ascii_uppercase().contains(" H264/90000") {
            return true;
        }
    }
    false
}

/// One stream's RTP clock mapped onto the 90 kHz timeline.
struct Clock {
    /// The first packet's RTP time (in its clock's ticks) and where it lands on the timeline.
    first: Option<(u64, u64)>,
}

impl Clock {
    fn pts(&mut self, ticks: u64, rate: u32, arrival: Instant, t0: Instant) -> u64 {
        let rate = u64::from(rate.max(1));
        let (first_ticks, first_pts) = *self.first.get_or_insert_with(|| {
            let since = arrival.saturating_duration_since(t0);
            (ticks, TIMELINE_START + (since.as_micros() as u64) * 9 / 100)
        });
        let delta = ticks.saturating_sub(first_ticks);
        first_pts + delta * 90_000 / rate
    }
}

/// A WHIP publisher's session.
struct Publish {
    ingest: Arc<Ingest>,
    /// The slot, until the first media hands it to the transcoder.
    guard: Option<PublisherGuard>,
    feeder: Option<Feeder>,
    remote: SocketAddr,
    mux: TsMuxer,
    details: StreamDetails,
    video: Clock,
    audio: Clock,
    t0: Option<Instant>,
    video_mid: Option<Mid>,
    last_pli: Option<Instant>,
    last_keyframe: Option<Instant>,
    window_start: Instant,
    window_bytes: (u64, u64),
    window_frames: u32,
}

impl Publish {
    fn new(ingest: Arc<Ingest>, guard: PublisherGuard, remote: SocketAddr, encoder: String) -> Self {
        let details = StreamDetails {
            video_codec: "H.264".into(),
            audio_codec: "Opus".into(),
            encoder,
            ..StreamDetails::default()
        };
        Publish {
            ingest,
            guard: Some(guard),
            feeder: None,
            remote,
            mux: TsMuxer::new(2),
            details,
            video: Clock { first: None },
            audio: Clock { first: None },
            t0: None,
            video_mid: None,
            last_pli: None,
            last_keyframe: None,
            window_start: Instant::now(),
            window_bytes: (0, 0),
            window_frames: 0,
        }
    }

    /// Ask the publisher for a keyframe (at most once per `PLI_INTERVAL`).
    fn request_keyframe(&mut self, rtc: &mut Rtc, data: &MediaData) {
        let now = Instant::now();
        if self.last_pli.is_some_and(|t| now.duration_since(t) < PLI_INTERVAL) {
            return;
        }
        self.last_pli = Some(now);
        if let Some(mut w) = rtc.writer(data.mid) {
            if let Err(e) = w.request_keyframe(data.rid, KeyframeRequestKind::Pli) {
                tracing::debug!("whip: keyframe request: {e}");
            }
        }
    }

    fn media(&mut self, rtc: &mut Rtc, data: MediaData) {
        let t0 = *self.t0.get_or_insert(data.network_time);
        let is_video = Some(data.mid) == self.video_mid || matches!(data.codec_extra, CodecExtra::H264(_));
        let chunk = if is_video {
            let keyframe = h264::is_keyframe(&data.data);
            let now = Instant::now();
            if keyframe {
                self.last_keyframe = Some(now);
            }
            let stale = self.last_keyframe.is_none_or(|t| now.duration_since(t) >= KEYFRAME_INTERVAL);
            if !self.mux.started() || !data.contiguous || stale {
                self.request_keyframe(rtc, &data);
            }
            if keyframe {
                if let Some(sps) = h264::find_sps(&data.data) {
                    if (sps.width, sps.height) != (self.details.width, self.details.height) {
                        self.details.width = sps.width;
                        self.details.height = sps.height;
                        self.report();
                    }
                }
            }
            self.window_bytes.0 += data.data.len() as u64;
            self.window_frames += 1;
            let pts = self.video.pts(data.time.numer(), data.time.denom(), data.network_time, t0);
            self.mux.video(&data.data, pts)
        } else {
            self.window_bytes.1 += data.data.len() as u64;
            let pts = self.audio.pts(data.time.numer(), data.time.denom(), data.network_time, t0);
            self.mux.audio(&data.data, pts)
        };
        let Some(chunk) = chunk else { return };
        if self.feeder.is_none() {
            let Some(guard) = self.guard.take() else { return };
            info!(addr = %self.remote, "whip broadcaster connected; stream starting");
            self.feeder = Some(self.ingest.hand_off(guard));
            self.report();
        }
        if let Some(f) = self.feeder.as_mut() {
            f.push(chunk);
        }
        self.measure();
    }

    fn measure(&mut self) {
        let elapsed = self.window_start.elapsed();
        if elapsed < STATS_WINDOW {
            return;
        }
        let secs = elapsed.as_secs_f64();
        let kbps = |bytes: u64| (bytes as f64 * 8.0 / 1000.0 / secs).round();
        let (video, audio) = (kbps(self.window_bytes.0), kbps(self.window_bytes.1));
        if let Some(f) = &self.feeder {
            self.ingest.telemetry(&f.broadcast().channel).set_ingest_kbps(Some(video + audio));
        }
        self.details.video_bitrate = video as u32;
        self.details.audio_bitrate = audio as u32;
        self.details.framerate = (f64::from(self.window_frames) / secs * 10.0).round() / 10.0;
        self.window_bytes = (0, 0);
        self.window_frames = 0;
        self.window_start = Instant::now();
        self.report();
    }

    fn report(&self) {
        if let Some(f) = &self.feeder {
            f.details(self.details.clone());
        }
    }
}

impl Peer for Publish {
    fn event(&mut self, rtc: &mut Rtc, event: Event) -> Flow {
        match event {
            Event::MediaAdded(m) if m.kind == MediaKind::Video => {
                self.video_mid = Some(m.mid);
            }
            Event::Connected => info!(addr = %self.remote, "whip: WebRTC connected"),
            Event::MediaData(data) => self.media(rtc, data),
            _ => {}
        }
        Flow::Continue
    }

    fn closed(&mut self) {
        if let Some(feeder) = self.feeder.take() {
            info!(addr = %self.remote, "whip broadcaster disconnected");
            self.ingest.telemetry(&feeder.broadcast().channel).set_ingest_kbps(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h264_in_the_offer() {
        let sdp = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\nm=video 9 UDP/TLS/RTP/SAVPF 96 102\r\na=rtpmap:96 VP8/90000\r\na=rtpmap:102 H264/90000\r\n";
        assert!(offers_h264(sdp));
        assert!(!offers_h264(&sdp.replace("H264", "VP9")));
        assert!(!offers_h264("v=0\r\nm=audio 9 x 102\r\na=rtpmap:102 H264/90000\r\n"));
    }

    #[test]
    fn rtp_clocks_land_on_the_timeline() {
        let t0 = Instant::now();
        let mut c = Clock { first: None };
        assert_eq!(c.pts(1_000_000, 90_000, t0, t0), TIMELINE_START);
        assert_eq!(c.pts(1_003_000, 90_000, t0, t0), TIMELINE_START + 3000);
        let mut a = Clock { first: None };
        let later = t0 + Duration::from_millis(100);
        assert_eq!(a.pts(480, 48_000, later, t0), TIMELINE_START + 9000);
        assert_eq!(a.pts(480 + 960, 48_000, later, t0), TIMELINE_START + 9000 + 1800);
    }
}
