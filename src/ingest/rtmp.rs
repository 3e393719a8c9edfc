//! RTMP ingest: accepts the broadcaster's publish on `rtmpServerPort` (rml_rtmp on tokio).
//!
//! Accepted: application `live` (a `?query` on it or on the key is ignored, as OBS-style URLs carry
//! one) and a key the ingest accepts (`Ingest::check_key`). A wrong app or key, or a second
//! publisher while one is live (the media plane's `PublisherSlot`), gets an RTMP `_error` and the socket
//! is closed; so does a publisher the server is over capacity for (`NetStream.Publish.Rejected`, the
//! reason as the description), and one the channel's admission hook refuses (`NetStream.Publish.Rejected`
//! with the hook's reason). Garbage, a stalled handshake or a client that never publishes is dropped after
//! `SETUP_TIMEOUT`; a publisher that goes silent for `IDLE_TIMEOUT` is dropped too.
//!
//! Sockets that have not yet published with a valid key are capped: at most `PREAUTH_PER_ADDRESS` per
//! client address and `MAX_CONNECTIONS` in all; more are closed at accept (before the handshake, where
//! RTMP has no way to say why). So one address holding idle sockets cannot lock the broadcaster out, and
//! the accepted publisher no longer counts. An address that sent too many wrong keys (`Ingest::check_key`)
//! is refused on connect (`NetConnection.Connect.Rejected`) and on publish (`NetStream.Publish.Rejected`),
//! with the wait in the description, without its key being looked at.
//!
//! While publishing, audio/video messages become FLV tags handed on through the ingest's `Feeder`
//! (bounded; see `transcode::supervisor` for the slow-consumer policy), and `onMetaData`, the sequence
//! headers and the measured inbound bitrate make the broadcaster details, which the feeder passes on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rml_rtmp::handshake::{Handshake, HandshakeProcessResult, PeerType};
use rml_rtmp::sessions::{ServerSession, ServerSessionConfig, ServerSessionEvent, ServerSessionResult, StreamMetadata};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::tasks::{Stage, Tasks};
use crate::throttle::{CapPermit, CapRefused, Caps, Limited};

use super::{Feeder, Ingest, KeyRefused, PublishAttempt};
use crate::media::flv::{self, FlvTag, TAG_AUDIO, TAG_VIDEO};
use crate::media::ClaimRefused;
use crate::media::{Container, MediaChunk, Protocol, Source};
use crate::stream::StreamDetails;

/// How often the inbound bitrate is measured.
const BITRATE_WINDOW: Duration = Duration::from_secs(2);

/// The RTMP application name broadcasters publish to.
pub const APP_NAME: &str = "live";
/// Time a connection has to finish the handshake and start publishing.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// A publisher that sends nothing for this long is dropped.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Sockets not yet publishing (handshake, connect, publish with a valid key still to come) at once,
/// from all addresses. Such a socket is a task and a few KiB until `SETUP_TIMEOUT`; 256 of them take
/// `256 / PREAUTH_PER_ADDRESS` addresses to fill.
pub const MAX_CONNECTIONS: usize = 256;
/// Sockets not yet publishing from one client address (an IPv6 /64) at once. A broadcaster opens one
/// (a main and a backup encoder behind one NAT: two); a reconnecting encoder's old socket may linger.
pub const PREAUTH_PER_ADDRESS: usize = 4;

/// Errors of one RTMP connection (each ends that connection only).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("handshake: {0:?}")]
    Handshake(rml_rtmp::handshake::HandshakeError),
    #[error("rtmp session: {0:?}")]
    Session(rml_rtmp::sessions::ServerSessionError),
    #[error("timed out: {0}")]
    Timeout(&'static str),
    #[error("rejected: {0}")]
    Rejected(String),
    /// Refused because the address waits after wrong stream keys (logged quietly: a guesser's
    /// refusals would fill the log).
    #[error("refused: the address waits after wrong stream keys")]
    Waiting,
    #[error("malformed RTMP: {0}")]
    Malformed(String),
}

/// Feed `bytes` to the RTMP session. rml_rtmp's chunk parser can panic on malformed chunks (an
/// arithmetic underflow found by `tests/fuzz.rs`); that is caught here and ends this connection only.
pub fn session_input(session: &mut ServerSession, bytes: &[u8]) -> Result<Vec<ServerSessionResult>, IngestError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| session.handle_input(bytes))) {
        Ok(r) => Ok(r?),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(IngestError::Malformed(format!("the chunk parser failed: {what}")))
        }
    }
}

/// The handshake step of `bytes`, with the parser's panics caught as for `session_input`.
pub fn handshake_input(hs: &mut Handshake, bytes: &[u8]) -> Result<HandshakeProcessResult, IngestError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hs.process_bytes(bytes))) {
        Ok(r) => Ok(r?),
        Err(_) => Err(IngestError::Malformed("the handshake parser failed".into())),
    }
}

impl From<rml_rtmp::handshake::HandshakeError> for IngestError {
    fn from(e: rml_rtmp::handshake::HandshakeError) -> Self {
        IngestError::Handshake(e)
    }
}

impl From<rml_rtmp::sessions::ServerSessionError> for IngestError {
    fn from(e: rml_rtmp::sessions::ServerSessionError) -> Self {
        IngestError::Session(e)
    }
}

/// Where the RTMP server listens: the saved bind address, except that a loopback web server (as in
/// tests and local setups) keeps RTMP on loopback too unless an RTMP address was set explicitly.
pub fn bind_address(s: &crate::config::Settings) -> Result<std::net::IpAddr, std::net::AddrParseError> {
    let rtmp: std::net::IpAddr = s.server.rtmp_server_bind_address.parse()?;
    let web: Option<std::net::IpAddr> = s.server.web_server_ip.parse().ok();
    match web {
        Some(w) if w.is_loopback() && rtmp.is_unspecified() => Ok(w),
        _ => Ok(rtmp),
    }
}

/// Start the RTMP server on `tasks` (stage `Ingest`, see [`serve`]).
pub fn start(ingest: Arc<Ingest>, listener: TcpListener, tasks: &Tasks) {
    tasks.spawn(Stage::Ingest, "rtmp listener", serve(ingest, listener, tasks.clone()));
}

/// Accept RTMP connections until the `Ingest` stage stops; then the live broadcaster (if any) is
/// dropped, which ends the stream the normal way (the supervisor finalises the playlists). Each
/// connection is a task of the stage, dropped when it stops.
pub async fn serve(ingest: Arc<Ingest>, listener: TcpListener, tasks: Tasks) {
    let stop = tasks.token(Stage::Ingest);
    let preauth = Caps::new(PREAUTH_PER_ADDRESS, MAX_CONNECTIONS);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.cancelled() => {
                let dropped = ingest.media.disconnect_all();
                if dropped > 0 {
                    info!(dropped, "shutting down: dropping the broadcasters");
                }
                return;
            }
        };
        let (sock, addr) = match accepted {
            Ok(c) => c,
            Err(e) => {
                warn!("rtmp accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let permit = match preauth.try_acquire(addr.ip()) {
            Ok(p) => p,
            // Each refusal is one line at most per accept; an address over its cap is logged quietly.
            Err(e @ CapRefused::PerAddress(_)) => {
                debug!(%addr, "rtmp connection closed at accept: {e} sockets not yet publishing");
                continue;
            }
            Err(e @ CapRefused::Total(_)) => {
                warn!(%addr, "rtmp connection closed at accept: {e} sockets not yet publishing");
                continue;
            }
        };
        let ingest = ingest.clone();
        tasks.spawn_until_stopped(Stage::Ingest, format!("rtmp connection {addr}"), async move {
            match handle(ingest, sock, addr, permit).await {
                Ok(()) => debug!(%addr, "rtmp connection closed"),
                Err(e @ IngestError::Waiting) => debug!(%addr, "rtmp connection closed: {e}"),
                Err(e) => info!(%addr, "rtmp connection closed: {e}"),
            }
        });
    }
}

/// The part of a name before `?`.
fn strip_query(s: &str) -> &str {
    s.split('?').next().unwrap_or("").trim_end_matches('/')
}

async fn handshake(sock: &mut TcpStream) -> Result<Vec<u8>, IngestError> {
    let mut hs = Handshake::new(PeerType::Server);
    let mut buf = [0u8; 4096];
    loop {
        let n = sock.read(&mut buf).await?;
        if n == 0 {
            return Err(IngestError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        match handshake_input(&mut hs, &buf[..n])? {
            HandshakeProcessResult::InProgress { response_bytes } => sock.write_all(&response_bytes).await?,
            HandshakeProcessResult::Completed { response_bytes, remaining_bytes } => {
                sock.write_all(&response_bytes).await?;
                return Ok(remaining_bytes);
            }
        }
    }
}

struct Conn {
    ingest: Arc<Ingest>,
    addr: SocketAddr,
    sock: TcpStream,
    session: ServerSession,
    feeder: Option<Feeder>,
    notify: Option<Arc<Notify>>,
    /// Its place among the sockets not yet publishing, given back once it publishes.
    preauth: Option<CapPermit>,
    finished: bool,
    /// What the broadcaster told and what was measured (passed on through the feeder).
    details: StreamDetails,
    /// Media bytes (video, audio) since `window_start`, for the measured bitrate.
    window_bytes: (u64, u64),
    window_start: Instant,
    /// The bitrates onMetaData announced (0: none; then the measured ones are shown).
    announced: (u32, u32),
}

async fn handle(
    ingest: Arc<Ingest>,
    mut sock: TcpStream,
    addr: SocketAddr,
    preauth: CapPermit,
) -> Result<(), IngestError> {
    let _ = sock.set_nodelay(true);
    let setup_deadline = tokio::time::Instant::now() + SETUP_TIMEOUT;
    let leftover = tokio::time::timeout_at(setup_deadline, handshake(&mut sock))
        .await
        .map_err(|_| IngestError::Timeout("handshake"))??;
    let (session, initial) = ServerSession::new(ServerSessionConfig::new())?;
    let mut conn = Conn {
        ingest,
        addr,
        sock,
        session,
        feeder: None,
        notify: None,
        preauth: Some(preauth),
        finished: false,
        details: StreamDetails::default(),
        window_bytes: (0, 0),
        window_start: Instant::now(),
        announced: (0, 0),
    };
    conn.results(initial).await?;
    conn.input(&leftover).await?;
    let mut buf = vec![0u8; 64 * 1024];
    while !conn.finished {
        let deadline = if conn.feeder.is_some() { tokio::time::Instant::now() + IDLE_TIMEOUT } else { setup_deadline };
        let notify = conn.notify.clone();
        let disconnect = async move {
            match notify {
                Some(n) => n.notified().await,
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            r = tokio::time::timeout_at(deadline, conn.sock.read(&mut buf)) => {
                r.map_err(|_| IngestError::Timeout(if conn.feeder.is_some() { "no media" } else { "no publish" }))??
            }
            _ = disconnect => {
                info!(addr = %conn.addr, "dropping the broadcaster");
                break;
            }
        };
        if n == 0 {
            break;
        }
        conn.input(&buf[..n]).await?;
    }
    if let Some(feeder) = conn.feeder.take() {
        info!(addr = %conn.addr, "broadcaster disconnected");
        conn.ingest.telemetry(&feeder.broadcast().channel).set_ingest_kbps(None);
    }
    Ok(())
}

impl Conn {
    async fn results(&mut self, results: Vec<ServerSessionResult>) -> Result<(), IngestError> {
        for r in results {
            match r {
                ServerSessionResult::OutboundResponse(p) => self.sock.write_all(&p.bytes).await?,
                ServerSessionResult::RaisedEvent(e) => Box::pin(self.event(e)).await?,
                ServerSessionResult::UnhandleableMessageReceived(_) => {}
            }
        }
        Ok(())
    }

    async fn input(&mut self, bytes: &[u8]) -> Result<(), IngestError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let results = session_input(&mut self.session, bytes)?;
        self.results(results).await
    }

    async fn reject(&mut self, request_id: u32, code: &str, why: &str) -> Result<(), IngestError> {
        let results = self.session.reject_request(request_id, code, why)?;
        self.results(results).await?;
        let _ = self.sock.flush().await;
        Err(IngestError::Rejected(why.to_string()))
    }

    /// Refuse `request_id` because the address waits `wait` after wrong stream keys.
    async fn reject_waiting(&mut self, request_id: u32, code: &str, wait: Limited) -> Result<(), IngestError> {
        let _ = self.reject(request_id, code, &wait.to_string()).await;
        Err(IngestError::Waiting)
    }

    async fn event(&mut self, e: ServerSessionEvent) -> Result<(), IngestError> {
        match e {
            ServerSessionEvent::ConnectionRequested { request_id, app_name } => {
                if let Err(wait) = self.ingest.may_try_key(self.addr.ip()) {
                    return self.reject_waiting(request_id, "NetConnection.Connect.Rejected", wait).await;
                }
                if strip_query(&app_name) != APP_NAME {
                    // The name is not logged: a misconfigured encoder puts its key there (`rtmp://host/KEY`).
                    warn!(addr = %self.addr, "rtmp connect to an application other than `{APP_NAME}` refused");
                    return self.reject(request_id, "NetConnection.Connect.Rejected", "unknown application").await;
                }
                let results = self.session.accept_request(request_id)?;
                self.results(results).await?;
            }
            ServerSessionEvent::PublishStreamRequested { request_id, app_name, stream_key, .. } => {
                let key = strip_query(&stream_key);
                if strip_query(&app_name) != APP_NAME {
                    return self.reject(request_id, "NetStream.Publish.BadName", "unknown application").await;
                }
                let channel = match self.ingest.check_key(self.addr.ip(), key) {
                    Ok(channel) => {
                        self.ingest.key_proven(self.addr.ip());
                        channel
                    }
                    Err(KeyRefused::Invalid) => {
                        warn!(addr = %self.addr, "publish with an invalid stream key refused");
                        return self.reject(request_id, "NetStream.Publish.BadName", "invalid stream key").await;
                    }
                    Err(KeyRefused::Limited(wait)) => {
                        return self.reject_waiting(request_id, "NetStream.Publish.Rejected", wait).await;
                    }
                };
                if self.feeder.is_some() {
                    return self.reject(request_id, "NetStream.Publish.BadName", "already publishing").await;
                }
                let attempt = PublishAttempt { key: key.to_string(), address: self.addr.ip(), user_agent: None };
                if let Err(why) = self.ingest.admit(&channel, attempt).await {
                    warn!(addr = %self.addr, %channel, "publish refused by the admission hook: {why}");
                    return self.reject(request_id, "NetStream.Publish.Rejected", &why).await;
                }
                let source = Source { protocol: Protocol::Rtmp, container: Container::Flv, remote: self.addr };
                let guard = match self.ingest.claim(&channel, source) {
                    Ok(guard) => guard,
                    Err(ClaimRefused::Busy) => {
                        warn!(addr = %self.addr, "a second publisher was refused: a stream is already live");
                        return self
                            .reject(request_id, "NetStream.Publish.BadName", "another stream is already live")
                            .await;
                    }
                    Err(ClaimRefused::OverCapacity(why)) => {
                        return self.reject(request_id, "NetStream.Publish.Rejected", &why).await;
                    }
                };
                self.notify = Some(guard.notify());
                self.preauth = None;
                let results = self.session.accept_request(request_id)?;
                self.results(results).await?;
                info!(addr = %self.addr, "broadcaster connected; stream starting");
                self.window_start = Instant::now();
                self.window_bytes = (0, 0);
                self.feeder = Some(self.ingest.hand_off(guard));
            }
            ServerSessionEvent::StreamMetadataChanged { metadata, .. } => self.metadata(&metadata),
            ServerSessionEvent::VideoDataReceived { data, timestamp, .. } => {
                self.media(FlvTag { kind: TAG_VIDEO, timestamp: timestamp.value, data })
            }
            ServerSessionEvent::AudioDataReceived { data, timestamp, .. } => {
                self.media(FlvTag { kind: TAG_AUDIO, timestamp: timestamp.value, data })
            }
            ServerSessionEvent::PublishStreamFinished { .. } => self.finished = true,
            // releaseStream / FCPublish / FCUnpublish and the rest need no answer.
            _ => {}
        }
        Ok(())
    }

    fn metadata(&mut self, m: &StreamMetadata) {
        let d = &mut self.details;
        d.width = m.video_width.unwrap_or(d.width);
        d.height = m.video_height.unwrap_or(d.height);
        d.framerate = m.video_frame_rate.map(f64::from).unwrap_or(d.framerate);
        self.announced = (m.video_bitrate_kbps.unwrap_or(0), m.audio_bitrate_kbps.unwrap_or(0));
        if self.announced.0 > 0 {
            d.video_bitrate = self.announced.0;
        }
        if self.announced.1 > 0 {
            d.audio_bitrate = self.announced.1;
        }
        if let Some(id) = m.video_codec_id {
            d.video_codec = flv::video_codec_name(id as u8).to_string();
        }
        if let Some(id) = m.audio_codec_id {
            d.audio_codec = flv::audio_codec_name(id as u8).to_string();
        }
        if let Some(enc) = &m.encoder {
            d.encoder = enc.clone();
        }
        if let Some(f) = &self.feeder {
            f.details(self.details.clone());
        }
    }

    fn media(&mut self, tag: FlvTag) {
        let Some(feeder) = self.feeder.as_mut() else { return };
        let mut changed = false;
        if tag.is_sequence_header() {
            let d = &mut self.details;
            if tag.kind == TAG_VIDEO && d.video_codec.is_empty() {
                d.video_codec = flv::video_codec_name(tag.data[0] & 0x0f).to_string();
                changed = true;
            }
            if tag.kind == TAG_AUDIO && d.audio_codec.is_empty() {
                d.audio_codec = flv::audio_codec_name(tag.data[0] >> 4).to_string();
                changed = true;
            }
        }
        // The inbound bitrate, measured from the bytes received (metadata may carry none).
        let len = tag.data.len() as u64;
        if tag.kind == TAG_VIDEO {
            self.window_bytes.0 += len;
        } else {
            self.window_bytes.1 += len;
        }
        let elapsed = self.window_start.elapsed();
        if elapsed >= BITRATE_WINDOW {
            let kbps = |bytes: u64| (bytes as f64 * 8.0 / 1000.0 / elapsed.as_secs_f64()).round();
            let (video, audio) = (kbps(self.window_bytes.0), kbps(self.window_bytes.1));
            self.ingest.telemetry(&feeder.broadcast().channel).set_ingest_kbps(Some(video + audio));
            if self.announced.0 == 0 {
                self.details.video_bitrate = video as u32;
                changed = true;
            }
            if self.announced.1 == 0 {
                self.details.audio_bitrate = audio as u32;
                changed = true;
            }
            self.window_bytes = (0, 0);
            self.window_start = Instant::now();
        }
        if changed {
            feeder.details(self.details.clone());
        }
        feeder.push(MediaChunk::Flv(tag));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_ignored() {
        assert_eq!(strip_query("live"), "live");
        assert_eq!(strip_query("live/"), "live");
        assert_eq!(strip_query("abc?token=1"), "abc");
        assert_eq!(strip_query(""), "");
    }

    #[test]
    fn loopback_web_keeps_rtmp_local() {
        let mut s = crate::config::Settings::default();
        s.server.web_server_ip = "127.0.0.1".into();
        assert_eq!(bind_address(&s).unwrap().to_string(), "127.0.0.1");
        s.server.web_server_ip = "0.0.0.0".into();
        assert_eq!(bind_address(&s).unwrap().to_string(), "0.0.0.0");
        s.server.rtmp_server_bind_address = "192.0.2.1".into();
        s.server.web_server_ip = "127.0.0.1".into();
        assert_eq!(bind_address(&s).unwrap().to_string(), "192.0.2.1");
    }
}
