//! WHEP playback (the WebRTC-HTTP Egress Protocol): viewers watch the real-time feed
//! (`media::realtime`: one encoded variant's H.264 and Opus encoded once) over WebRTC, through the one
//! WebRTC stack (`crate::webrtc`: the single UDP port, ICE-lite, DTLS-SRTP, NACK/RTX).
//!
//! `POST /whep` (`Content-Type: application/sdp`) answers `201 Created` with the SDP answer and the
//! session in `Location` (`/whep/{id}`); `DELETE /whep/{id}` ends it; `OPTIONS` answers CORS
//! preflights; `PATCH` is 405 (no trickle ICE). Refusals are StatusResponse bodies: WebRTC playback
//! off (`config/webrtc/enabled`) 403; a chat access token required (`config/webrtc/requireauthentication`)
//! and missing or unknown 401; a body that is not an SDP offer 400 (415 when not application/sdp);
//! the stream offline 404; `config/webrtc/maxviewers` viewers already watching 503 (the player falls
//! back to LL-HLS); no WebRTC UDP port, or no encoded variant to send (every variant passthrough), 503;
//! the client's address already holding `SESSIONS_PER_ADDRESS` sessions (connected or still waiting to
//! connect, which they may for `webrtc::CONNECT_TIMEOUT`) 429 with `Retry-After`, so one address cannot
//! take every viewer slot (the player falls back to LL-HLS on any refusal).
//!
//! A viewer (`viewer::Viewer`) joins at a keyframe: it asks for one when it connects (requests are
//! coalesced in `media::realtime`: at most one forced keyframe a second for all viewers) and sends no
//! video before it. PLI/FIR from the viewer become (coalesced) keyframe requests. Slow-viewer policy:
//! each viewer reads the bounded broadcast at its own pace; one that falls `realtime::CAPACITY` frames
//! behind loses them, skips video to the next keyframe (asking for one) and goes on, so no viewer holds
//! more memory than the broadcast's bound and none slows the others or the encoder. Each frame is
//! packetised once for every viewer (`rtp`); a viewer only numbers, encrypts and sends the packets.
//!
//! A WebRTC viewer counts in the viewer count, `/api/admin/viewers` and Prometheus's active viewers as
//! an HLS viewer does (by address and User-Agent, touched every few seconds while its session lives),
//! and is a playback client of its own (`source: "webrtc"`, with its packet loss and round-trip time)
//! in `/api/admin/viewers/playback`; `castd_webrtc_viewers` counts the connected ones.
//!
//! On a channel that needs a viewing pass, the gate (`http::gate`) admits an offer only with one (the
//! `castd_pass` cookie, `?pass=` or `Authorization: Bearer <pass>`); the session it opens ends when
//! that pass is revoked or expires (`ViewerPass::ended`).

mod rtp;
pub mod settings;
mod viewer;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::info;

use crate::http::gate::ViewerPass;
use crate::http::{Auth, BodyDoc, Registry, ResponseDoc};
use crate::media::MediaPlane;
use crate::store::settings::SettingsStore;
use crate::store::Store;
use crate::stream::StreamWatch;
use crate::tasks::{Stage, Tasks};
use crate::throttle::{CapRefused, Caps, Limited};
use crate::webrtc::str0m::rtp::Extension;
use crate::webrtc::str0m::RtcConfig;
use crate::webrtc::{http as wh, WebRtc, WebRtcError};

/// The endpoint.
pub const PATH: &str = "/whep";
/// WHEP sessions one client address (an IPv6 /64) may hold at once: a household's or a small office's
/// screens behind one NAT; beyond it a viewer there watches over LL-HLS. `webrtc/maxviewers` still
/// bounds the total.
pub const SESSIONS_PER_ADDRESS: usize = 10;
/// How long a viewer refused for its address's cap is asked to wait before offering again.
const CAP_RETRY: std::time::Duration = std::time::Duration::from_secs(5);
/// What the WebRTC registry calls WHEP sessions.
pub const KIND: &str = "whep";

/// The WHEP feature's state.
pub struct Whep {
    pub settings: SettingsStore,
    pub stream: StreamWatch,
    pub media: Arc<MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    /// Chat users (their access tokens) live here.
    pub store: Store,
    /// Viewers: a WebRTC viewer counts as one (by address and User-Agent, as HLS viewers are) while
    /// its session lives.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The WebRTC stack and the tasks its sessions run in (none when WebRTC is off).
    pub webrtc: Option<(Arc<WebRtc>, Tasks)>,
    /// Sessions per client address ([`per_address_caps`]); each viewer holds its place until it ends.
    pub per_address: Caps,
}

/// At most [`SESSIONS_PER_ADDRESS`] sessions per address (the total is `webrtc/maxviewers`'s).
pub fn per_address_caps() -> Caps {
    Caps::new(SESSIONS_PER_ADDRESS, usize::MAX)
}

impl Whep {
    /// WebRTC viewers now.
    pub fn viewers(&self) -> usize {
        self.webrtc.as_ref().map_or(0, |(w, _)| w.count(KIND))
    }
}

pub fn routes(reg: &mut Registry, whep: Arc<Whep>) {
    settings::routes(reg, whep.clone());
    let mut reg = reg.scope(whep);
    reg.route(
        Method::POST,
        PATH,
        "playback",
        Auth::Public,
        "WHEP playback: an SDP offer in, the SDP answer out (201, Location of the session)",
        BodyDoc::Content(wh::SDP),
        post,
    )
    .answers(ResponseDoc::Created(wh::SDP))
    .error(401, "A chat access token is required")
    .error(403, "WebRTC playback is disabled")
    .error(404, "The stream is offline")
    .error(415, "The offer is not application/sdp")
    .error(429, "This address already holds as many WebRTC sessions as one address may")
    .error(503, "Too many WebRTC viewers, or WebRTC is off (no UDP port)");
    reg.route(Method::OPTIONS, PATH, "playback", Auth::Public, "CORS preflight of the WHEP endpoint", BodyDoc::None, {
        || async { wh::options(wh::ENDPOINT_ALLOW) }
    })
    .answers(ResponseDoc::NoContent);
    let resource = "/whep/{id}";
    reg.route(Method::DELETE, resource, "playback", Auth::Public, "End a WHEP session", BodyDoc::None, delete)
        .answers(ResponseDoc::NoContent);
    reg.route(
        Method::OPTIONS,
        resource,
        "playback",
        Auth::Public,
        "CORS preflight of a WHEP session",
        BodyDoc::None,
        || async { wh::options(wh::RESOURCE_ALLOW) },
    )
    .answers(ResponseDoc::NoContent);
}

/// How often the WebRTC socket's drop counts are copied into Prometheus.
const DROPS_SYNC: std::time::Duration = std::time::Duration::from_secs(5);

/// When the broadcast ends, end every WHEP session: the viewers' players go back to the offline page
/// (and DELETE, which then finds nothing), and no session waits for a feed that is not coming.
/// Also copies the WebRTC socket's drop counts into `castd_webrtc_dropped_datagrams` every 5 s.
pub fn start(whep: Arc<Whep>, tasks: &Tasks) {
    let mut stream = whep.media.watch(&whep.channel);
    tasks.spawn_until_stopped(Stage::Connections, "whep: end sessions with the stream", async move {
        let mut was_online = stream.borrow().is_some();
        let mut sync = tokio::time::interval(DROPS_SYNC);
        sync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = (0u64, 0u64);
        loop {
            tokio::select! {
                changed = stream.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let online = stream.borrow_and_update().is_some();
                    if was_online && !online {
                        if let Some((webrtc, _)) = whep.webrtc.as_ref() {
                            let n = webrtc.close_all(KIND);
                            if n > 0 {
                                info!(sessions = n, "whep: the stream ended; its WebRTC viewers' sessions are closed");
                            }
                        }
                    }
                    was_online = online;
                }
                _ = sync.tick() => {
                    if let Some((webrtc, _)) = whep.webrtc.as_ref() {
                        seen = sync_drops(&whep.metrics.prom, webrtc.dropped(), seen);
                    }
                }
            }
        }
    });
}

/// Add what the socket dropped since `seen` to the Prometheus counters; returns the new `seen`.
fn sync_drops(prom: &crate::metrics::prometheus::Prom, now: (u64, u64), seen: (u64, u64)) -> (u64, u64) {
    let label = |reason: &str| vec![("reason".to_string(), reason.to_string())];
    prom.webrtc_dropped.get_or_create(&label("queue_full")).inc_by(now.0.saturating_sub(seen.0));
    prom.webrtc_dropped.get_or_create(&label("unclaimed")).inc_by(now.1.saturating_sub(seen.1));
    (now.0.max(seen.0), now.1.max(seen.1))
}

fn unauthorized(message: &str) -> Response {
    let mut resp = wh::error(StatusCode::UNAUTHORIZED, message);
    resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

async fn post(
    State(whep): State<Arc<Whep>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    pass: Option<axum::Extension<ViewerPass>>,
    body: Bytes,
) -> Response {
    let s = whep.settings.get();
    if !s.webrtc.webrtc_enabled {
        return wh::error(StatusCode::FORBIDDEN, "WebRTC playback is disabled on this server");
    }
    if s.webrtc.webrtc_require_authentication {
        let Some(token) = wh::bearer(&headers).map(str::to_string) else {
            return unauthorized("WebRTC playback needs a chat access token in Authorization: Bearer <token>");
        };
        let user = whep.store.call(move |c| crate::chat::users::by_token(c, &token)).await;
        match user {
            Ok(Some(u)) if u.disabled_at.is_none() => {}
            Ok(_) => return unauthorized("unknown or disabled chat access token"),
            Err(e) => {
                tracing::warn!("whep: token lookup: {e}");
                return wh::error(StatusCode::SERVICE_UNAVAILABLE, "cannot check the access token now");
            }
        }
    }
    let offer = match wh::offer(&headers, &body) {
        Ok(o) => o,
        Err(refused) => return refused.into_response(),
    };
    if let Err(e) = crate::webrtc::str0m::change::SdpOffer::from_sdp_string(&offer) {
        return wh::error(StatusCode::BAD_REQUEST, format!("the SDP offer is malformed: {e}"));
    }
    if !crate::ingest::whip::offers_h264(&offer) {
        return wh::error(StatusCode::BAD_REQUEST, "the offer has no H.264 video (castd sends H.264 and Opus)");
    }
    // The broadcast being served, as it runs (its profile), whatever the settings say now.
    let live = whep.media.current(&whep.channel).and_then(|b| Some((b.profile()?, b)));
    let Some((profile, broadcast)) = live else {
        return wh::error(StatusCode::NOT_FOUND, "the stream is offline");
    };
    let Some((webrtc, tasks)) = whep.webrtc.as_ref() else {
        return wh::error(StatusCode::SERVICE_UNAVAILABLE, "WebRTC is off: castd has no WebRTC UDP port");
    };
    if profile.realtime_variant.is_none() {
        return wh::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no real-time feed: every video variant is passthrough (WebRTC sends an encoded variant); watch over HLS",
        );
    }
    let max = s.webrtc.webrtc_max_viewers as usize;
    if webrtc.count(KIND) >= max {
        return wh::error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the WebRTC viewer limit ({max}) is reached; watch over HLS"),
        );
    }
    let remote = SocketAddr::new(crate::http::client_ip(peer, &headers), peer.port());
    let place = match whep.per_address.try_acquire(remote.ip()) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(%remote, "whep offer refused: {e}");
            let message = match e {
                CapRefused::PerAddress(n) => {
                    format!("this address already holds {n} WebRTC sessions, the most one address may; watch over HLS")
                }
                CapRefused::Total(n) => format!("{n} WebRTC sessions are open, the most allowed; watch over HLS"),
            };
            return wh::too_many(Limited(CAP_RETRY), message);
        }
    };
    let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    // Cancelled when the viewer (the session) is dropped: the watcher of its pass stops then.
    let ended = tasks.token(Stage::Connections).child_token();
    let viewer = viewer::Viewer::new(
        broadcast.realtime.clone(),
        remote,
        whep.metrics.clone(),
        agent,
        place,
        ended.clone().drop_guard(),
    );
    let config = viewer_config();
    match webrtc.open(KIND, &offer, config, Box::new(viewer), tasks, Stage::Connections) {
        Ok(o) => {
            info!(%remote, id = %o.id, "whep viewer accepted");
            if let Some(axum::Extension(pass)) = pass {
                // The session ends with the viewer's pass (revoked or expired).
                let (stop, id) = (o.stop.clone(), o.id.clone());
                tasks.spawn_until_stopped(Stage::Connections, "whep: viewing pass watch", async move {
                    tokio::select! {
                        _ = pass.ended() => {
                            info!(%id, "whep session closed: its viewing pass ended");
                            stop.cancel();
                        }
                        _ = ended.cancelled() => {}
                        _ = stop.cancelled() => {}
                    }
                });
            }
            wh::created(&format!("{PATH}/{}", o.id), &o.id, o.answer)
        }
        Err(e @ (WebRtcError::BadOffer(_) | WebRtcError::Rejected(_))) => {
            wh::error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Err(e @ WebRtcError::Full) => wh::error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// A viewer's `RtcConfig`: H.264 and Opus, str0m's statistics every `STATS_INTERVAL`, and the RTP
/// header extensions of str0m's standard map without transport-wide congestion control
/// (`transport-cc`): castd does no bandwidth estimation, so with TWCC negotiated every packet sent
/// was registered for nothing and every viewer sent feedback (about 10 RTCP packets a second) that
/// castd decrypted, parsed and applied for nothing (bench/webrtc/PROFILE.md).
fn viewer_config() -> RtcConfig {
    RtcConfig::new()
        .clear_codecs()
        .enable_h264(true)
        .enable_opus(true, false)
        .set_stats_interval(Some(viewer::STATS_INTERVAL))
        .clear_extension_map()
        .set_extension(1, Extension::AudioLevel)
        .set_extension(2, Extension::AbsoluteSendTime)
        .set_extension(4, Extension::RtpMid)
        .set_extension(13, Extension::VideoOrientation)
}

async fn delete(State(whep): State<Arc<Whep>>, Path(id): Path<String>) -> Response {
    match whep.webrtc.as_ref() {
        Some((webrtc, _)) if webrtc.close(KIND, &id) => wh::deleted(),
        _ => wh::error(StatusCode::NOT_FOUND, "no such WHEP session"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The socket's running totals become counter increments: each drop is counted once.
    #[test]
    fn drop_totals_are_added_once() {
        let prom = crate::metrics::prometheus::Prom::new();
        let seen = sync_drops(&prom, (3, 1), (0, 0));
        let seen = sync_drops(&prom, (5, 1), seen);
        assert_eq!(seen, (5, 1));
        let text = prom.encode().unwrap();
        assert!(text.contains("castd_webrtc_dropped_datagrams_total{reason=\"queue_full\"} 5"), "{text}");
        assert!(text.contains("castd_webrtc_dropped_datagrams_total{reason=\"unclaimed\"} 1"), "{text}");
    }
}
