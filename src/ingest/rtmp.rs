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
//! with the wait in the description, without its key being looked at. After any refusal castd half-closes
//! and reads what the client still sends (at most `REJECT_LINGER`), so that the client reads the reason
//! instead of a reset.
//!
//! While publishing, audio/video messages become FLV tags handed on through the ingest's `Feeder`
//! (bounded; see `transcode::supervisor` for the slow-consumer policy), and `onMetaData`, the sequence
//! headers and the measured inbound bitrate make the broadcaster details, which the feeder passes on.
//!
//! Enhanced RTMP (OBS 30+, ffmpeg 6.1+): `connect` is answered with the video FourCCs castd takes
//! (`fourCcList`, and `videoFourCcInfoMap` saying it decodes and forwards each), in a `_result` sent
//! just before rml_rtmp's own (which carries no such list; clients act on the first `_result` of a
//! transaction and ignore the second). The media is handed to the media plane at the first video
//! tag, which says the container: legacy FLV, or `Container::FlvEnhanced` for FourCC video (the
//! transcoder re-wraps it for the worker); the tags before it (metadata, audio set-up) wait, at most
//! `PENDING_TAGS` of them. A video FourCC castd cannot decode gets an `onStatus` error
//! (`NetStream.Publish.Rejected`, naming the codec and those castd takes) and the socket is closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rml_rtmp::chunk_io::ChunkSerializer;
use rml_rtmp::handshake::{Handshake, HandshakeProcessResult, PeerType};
use rml_rtmp::messages::RtmpMessage;
use rml_rtmp::rml_amf0::Amf0Value;
use rml_rtmp::sessions::{ServerSession, ServerSessionConfig, ServerSessionEvent, ServerSessionResult, StreamMetadata};
use rml_rtmp::time::RtmpTimestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::tasks::{Stage, Tasks};
use crate::throttle::{CapPermit, CapRefused, Caps, Limited};

use super::{Feeder, Ingest, KeyRefused, PublishAttempt};
use crate::media::flv::{self, FlvTag, VideoPacket, VideoTag, SUPPORTED_FOURCCS, TAG_AUDIO, TAG_VIDEO};
use crate::media::{ClaimRefused, PublisherGuard};
use crate::media::{Container, MediaChunk, Protocol, Source};
use crate::stream::StreamDetails;

/// Tags held between the publish and the first video tag (which says the container); past this the
/// stream is handed on as legacy FLV (audio only so far).
pub const PENDING_TAGS: usize = 512;
/// The chunk size rml_rtmp's server session announces (`ServerSessionConfig::new`), which the
/// packets castd serializes itself (the `connect` answer, a codec refusal) use too.
const CHUNK_SIZE: u32 = 4096;

/// How long a refused client has, after the refusal, to read it and close (`Conn::linger`).
pub const REJECT_LINGER: Duration = Duration::from_secs(5);
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
    /// Published, not yet handed on: the slot and the tags before the first video tag.
    pending: Option<(PublisherGuard, Vec<FlvTag>)>,
    /// The media was refused (a video codec castd cannot decode): why, said before the socket closes.
    refused: Option<String>,
    /// The message stream the publisher publishes on (for an `onStatus` of castd's own).
    stream_id: u32,
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
        pending: None,
        refused: None,
        stream_id: 1,
    };
    conn.results(initial).await?;
    conn.input(&leftover).await?;
    let mut buf = vec![0u8; 64 * 1024];
    while !conn.finished {
        let publishing = conn.feeder.is_some() || conn.pending.is_some();
        let deadline = if publishing { tokio::time::Instant::now() + IDLE_TIMEOUT } else { setup_deadline };
        let notify = conn.notify.clone();
        let disconnect = async move {
            match notify {
                Some(n) => n.notified().await,
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            r = tokio::time::timeout_at(deadline, conn.sock.read(&mut buf)) => {
                r.map_err(|_| IngestError::Timeout(if publishing { "no media" } else { "no publish" }))??
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
        if let Some(why) = conn.refused.take() {
            conn.refuse_codec(&why).await;
            return Err(IngestError::Rejected(why));
        }
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
        self.linger().await;
        Err(IngestError::Rejected(why.to_string()))
    }

    /// After a refusal is written: send FIN behind it and read (discarding) what the client still
    /// sends until it closes, at most `REJECT_LINGER`. Closing at once could lose the refusal: a client
    /// still writing (ffmpeg echoes the chunk size before it reads the `_error`) would get a reset, fail
    /// with "Broken pipe", and never read why; unread bytes at close make the kernel reset too.
    async fn linger(&mut self) {
        let _ = self.sock.flush().await;
        let _ = self.sock.shutdown().await;
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + REJECT_LINGER;
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, self.sock.read(&mut buf)).await {
            if n == 0 {
                break;
            }
        }
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
                self.connect_answer(&results).await?;
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
                if let Some(id) = results.iter().find_map(|r| match r {
                    ServerSessionResult::OutboundResponse(p) => status_stream_id(&p.bytes),
                    _ => None,
                }) {
                    self.stream_id = id;
                }
                self.results(results).await?;
                info!(addr = %self.addr, "broadcaster connected; stream starting");
                self.window_start = Instant::now();
                self.window_bytes = (0, 0);
                // Handed on at the first video tag, which tells the container.
                self.pending = Some((guard, Vec::new()));
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
            d.video_codec = flv::metadata_video_codec(id).to_string();
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

    /// Hand the stream on once its first video tag says the container (or too many tags waited).
    fn hand_off_at(&mut self, tag: &FlvTag) {
        let Some((_, waiting)) = self.pending.as_mut() else { return };
        if tag.kind != TAG_VIDEO && waiting.len() < PENDING_TAGS {
            waiting.push(tag.clone());
            return;
        }
        let Some((mut guard, waiting)) = self.pending.take() else { return };
        if tag.is_enhanced_video() {
            guard.set_container(Container::FlvEnhanced);
        }
        let feeder = self.ingest.hand_off(guard);
        feeder.details(self.details.clone());
        self.feeder = Some(feeder);
        for t in waiting {
            self.media(t);
        }
    }

    fn media(&mut self, tag: FlvTag) {
        if self.refused.is_some() {
            return;
        }
        if tag.kind == TAG_VIDEO {
            if let Err(why) = check_video(&tag) {
                warn!(addr = %self.addr, "publish refused: {why}");
                self.refused = Some(why);
                return;
            }
        }
        if self.pending.is_some() {
            self.hand_off_at(&tag);
            if self.pending.is_some() {
                return;
            }
        }
        let Some(feeder) = self.feeder.as_mut() else { return };
        let mut changed = false;
        if tag.is_sequence_header() {
            let d = &mut self.details;
            if tag.kind == TAG_VIDEO && (d.video_codec.is_empty() || tag.is_enhanced_video()) {
                if let Ok(v) = VideoTag::parse(&tag.data) {
                    changed = d.video_codec != v.codec_name();
                    d.video_codec = v.codec_name().to_string();
                }
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

impl Conn {
    /// Send castd's own `connect` answer (with the FourCCs it takes) before rml_rtmp's `_result` in
    /// `results`, with the same transaction id; nothing when that `_result` is not found.
    async fn connect_answer(&mut self, results: &[ServerSessionResult]) -> Result<(), IngestError> {
        let Some(transaction) = results.iter().find_map(|r| match r {
            ServerSessionResult::OutboundResponse(p) => result_transaction(&p.bytes),
            _ => None,
        }) else {
            return Ok(());
        };
        if let Some(bytes) = connect_result(transaction) {
            self.sock.write_all(&bytes).await?;
        }
        Ok(())
    }

    /// Tell the publisher its media is refused (`onStatus` error on its stream), then the caller
    /// closes the socket.
    async fn refuse_codec(&mut self, why: &str) {
        if let Some(bytes) = on_status(self.stream_id, "error", "NetStream.Publish.Rejected", why) {
            let _ = self.sock.write_all(&bytes).await;
            self.linger().await;
        }
    }
}

/// Refuse a video tag castd cannot decode: an Enhanced RTMP FourCC it does not take. Legacy tags pass
/// as before.
pub fn check_video(tag: &FlvTag) -> Result<(), String> {
    if !tag.is_enhanced_video() {
        return Ok(());
    }
    match VideoTag::parse(&tag.data) {
        Ok(v) if SUPPORTED_FOURCCS.contains(&v.fourcc) => Ok(()),
        // Multitrack and ModEx packets (E-RTMP v2) carry no FourCC where v1 tags do: not judged here.
        Ok(v) if v.packet == VideoPacket::Other => Ok(()),
        Ok(v) => Err(format!(
            "video codec {} cannot be decoded by this server; publish H.264, HEVC (hvc1), AV1 (av01) or VP9 (vp09)",
            flv::fourcc_str(v.fourcc)
        )),
        // A truncated tag is dropped by the decoder, not refused.
        Err(_) => Ok(()),
    }
}

/// One AMF0 command serialized as a whole RTMP message (a full chunk header), chunked at the session's
/// chunk size.
fn command_packet(
    stream_id: u32,
    name: &str,
    transaction: f64,
    object: Amf0Value,
    args: Vec<Amf0Value>,
) -> Option<Vec<u8>> {
    let message = RtmpMessage::Amf0Command {
        command_name: name.to_string(),
        transaction_id: transaction,
        command_object: object,
        additional_arguments: args,
    };
    let payload = message.into_message_payload(RtmpTimestamp::new(0), stream_id).ok()?;
    let mut serializer = ChunkSerializer::new();
    serializer.set_max_chunk_size(CHUNK_SIZE, RtmpTimestamp::new(0)).ok()?;
    Some(serializer.serialize(&payload, true, false).ok()?.bytes)
}

fn status_object(level: &str, code: &str, description: &str) -> Amf0Value {
    Amf0Value::Object(
        [("level", level), ("code", code), ("description", description)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Amf0Value::Utf8String(v.to_string())))
            .collect(),
    )
}

/// castd's answer to `connect` (transaction `transaction`): rml_rtmp's fields plus the Enhanced RTMP
/// `fourCcList` and `videoFourCcInfoMap` (each FourCC: can decode (1) and forward (4)).
pub fn connect_result(transaction: f64) -> Option<Vec<u8>> {
    let fourccs: Vec<String> = SUPPORTED_FOURCCS.iter().map(|f| flv::fourcc_str(*f)).collect();
    let mut props = std::collections::HashMap::new();
    props.insert("fmsVer".to_string(), Amf0Value::Utf8String("FMS/3,0,1,1233".into()));
    props.insert("capabilities".to_string(), Amf0Value::Number(31.0));
    props.insert(
        "fourCcList".to_string(),
        Amf0Value::StrictArray(fourccs.iter().map(|f| Amf0Value::Utf8String(f.clone())).collect()),
    );
    props.insert(
        "videoFourCcInfoMap".to_string(),
        Amf0Value::Object(fourccs.iter().map(|f| (f.clone(), Amf0Value::Number(5.0))).collect()),
    );
    let Amf0Value::Object(mut info) = status_object("status", "NetConnection.Connect.Success", "Connected.") else {
        return None;
    };
    info.insert("objectEncoding".to_string(), Amf0Value::Number(0.0));
    command_packet(0, "_result", transaction, Amf0Value::Object(props), vec![Amf0Value::Object(info)])
}

/// An `onStatus` on message stream `stream_id`.
pub fn on_status(stream_id: u32, level: &str, code: &str, description: &str) -> Option<Vec<u8>> {
    command_packet(stream_id, "onStatus", 0.0, Amf0Value::Null, vec![status_object(level, code, description)])
}

/// The transaction id of a `_result` command in an outbound packet rml_rtmp serialized.
fn result_transaction(bytes: &[u8]) -> Option<f64> {
    const NAME: &[u8] = b"\x02\x00\x07_result\x00";
    let at = bytes.windows(NAME.len()).position(|w| w == NAME)? + NAME.len();
    let n: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(f64::from_be_bytes(n))
}

/// The message stream id of an outbound `onStatus` packet with a full (type 0) one-byte-csid header.
fn status_stream_id(bytes: &[u8]) -> Option<u32> {
    const NAME: &[u8] = b"\x02\x00\x08onStatus";
    if bytes.first()? >> 6 != 0 || bytes[0] & 0x3f < 2 || !bytes.windows(NAME.len()).any(|w| w == NAME) {
        return None;
    }
    Some(u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read one whole message back from castd's serialized packet.
    fn message(bytes: &[u8]) -> (u32, RtmpMessage) {
        let mut d = rml_rtmp::chunk_io::ChunkDeserializer::new();
        d.set_max_chunk_size(CHUNK_SIZE as usize).unwrap();
        let payload = d.get_next_message(bytes).unwrap().expect("one whole message");
        (payload.message_stream_id, payload.to_rtmp_message().unwrap())
    }

    #[test]
    fn connect_answer_lists_the_fourccs() {
        let (stream, msg) = message(&connect_result(1.0).unwrap());
        assert_eq!(stream, 0);
        let RtmpMessage::Amf0Command { command_name, transaction_id, command_object, additional_arguments } = msg
        else {
            panic!("not a command: {msg:?}")
        };
        assert_eq!((command_name.as_str(), transaction_id), ("_result", 1.0));
        let Amf0Value::Object(props) = command_object else { panic!("no command object") };
        let Some(Amf0Value::StrictArray(list)) = props.get("fourCcList") else { panic!("no fourCcList: {props:?}") };
        let list: Vec<_> = list
            .iter()
            .filter_map(|v| if let Amf0Value::Utf8String(s) = v { Some(s.as_str()) } else { None })
            .collect();
        assert_eq!(list, ["av01", "vp09", "hvc1", "avc1"]);
        let Some(Amf0Value::Object(map)) = props.get("videoFourCcInfoMap") else { panic!("no videoFourCcInfoMap") };
        assert_eq!(map.get("hvc1"), Some(&Amf0Value::Number(5.0)));
        let Some(Amf0Value::Object(info)) = additional_arguments.first() else { panic!("no information object") };
        assert_eq!(info.get("code"), Some(&Amf0Value::Utf8String("NetConnection.Connect.Success".into())));
    }

    #[test]
    fn transaction_and_stream_are_read_from_rml_packets() {
        let bytes = connect_result(7.0).unwrap();
        assert_eq!(result_transaction(&bytes), Some(7.0));
        let status = on_status(3, "error", "NetStream.Publish.Rejected", "no");
        let status = status.unwrap();
        assert_eq!(status_stream_id(&status), Some(3));
        assert_eq!(status_stream_id(&bytes), None, "a _result is not an onStatus");
        let (stream, msg) = message(&status);
        assert_eq!(stream, 3);
        let RtmpMessage::Amf0Command { command_name, additional_arguments, .. } = msg else { panic!("not a command") };
        assert_eq!(command_name, "onStatus");
        let Some(Amf0Value::Object(info)) = additional_arguments.first() else { panic!("no information object") };
        assert_eq!(info.get("level"), Some(&Amf0Value::Utf8String("error".into())));
    }

    #[test]
    fn unknown_fourccs_are_refused_legacy_passes() {
        let tag = |data: &'static [u8]| FlvTag { kind: TAG_VIDEO, timestamp: 0, data: bytes::Bytes::from_static(data) };
        assert!(check_video(&tag(&[0x90, b'h', b'v', b'c', b'1', 1])).is_ok());
        assert!(check_video(&tag(&[0x90, b'a', b'v', b'0', b'1', 1])).is_ok());
        assert!(check_video(&tag(&[0x90, b'v', b'p', b'0', b'9', 1])).is_ok());
        assert!(check_video(&tag(&[0x17, 0, 0, 0, 0])).is_ok(), "legacy H.264 unchanged");
        assert!(
            check_video(&tag(&[0x96, 0x00, b'h', b'v', b'c', b'1'])).is_ok(),
            "a multitrack packet is not judged by v1 rules"
        );
        let why = check_video(&tag(&[0x90, b'v', b'v', b'c', b'1', 1])).unwrap_err();
        assert!(why.contains("vvc1") && why.contains("HEVC"), "{why}");
    }

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
