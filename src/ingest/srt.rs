//! SRT ingest: accepts the broadcaster's MPEG-TS over SRT on `srtServerPort` (srt-tokio, a pure-Rust
//! SRT stack that speaks libsrt's handshake, so ffmpeg, GStreamer and OBS publish to it).
//!
//! The stream key travels in the SRT `streamid`: `KEY`, `live/KEY`, or the SRT access-control syntax
//! `#!::r=live/KEY,m=publish` (comma-separated `key=value` pairs; `u=`, `s=`, `h=` and unknown keys are
//! allowed; the key may also be in `s=` when `r=` is `live` or absent). Everything is decided in the
//! handshake, which answers a refusal with an SRT reject reason: a wrong or missing key
//! `2401 unauthorized`, a mode other than publish (`m=request`, a player) `2405 bad mode`, a second
//! publisher while one is live `2409 conflict` (the media plane's one-publisher rule), a server over
//! capacity that refuses (`media::capacity`) `2503 down` (the reason in the log and the channel's health), a malformed
//! streamid `2400 bad request`, a publisher the channel's admission hook refuses `2403 forbidden` (the
//! hook's reason in the log), an address that sent too many wrong keys or passphrases
//! (`Ingest::check_key`'s backoff, shared with RTMP and WHIP) `2402 overload`, before anything else
//! is looked at. With a passphrase set (`srt/passphrase`), the connection is encrypted
//! and a publisher with the wrong passphrase is refused by the handshake (`1010 bad secret`), one
//! without any (`1011 unsecure`); that counts as a wrong secret too. Without a passphrase, an
//! encrypting publisher is refused `1011`.
//! srt-protocol 0.4.4 panicked on that and on other packets from the network (unknown handshake
//! extensions such as a packet filter, short extensions, peer-error packets), taking the listener task
//! and every SRT connection with it; castd builds a patched copy (`vendor/srt-protocol`, see its
//! CASTD-CHANGES.md; the `srt` fuzz target drives its listener and connection with arbitrary
//! datagrams). `serve` still binds the listener again should its task ever end.
//!
//! The accepted publisher's payloads are cut into TS packets and runs (`media::ts`) and handed on
//! through the ingest's `Feeder`; the program tables give the broadcaster details (codecs, encoder),
//! the H.264 SPS the picture size and frame rate, and the payload bytes the measured bitrates. A publisher that sends nothing for `IDLE_TIMEOUT` is
//! dropped; so is one the admin disconnects.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use srt_protocol::packet::CoreRejectReason;
use srt_protocol::settings::KeySettings;
use srt_tokio::access::{RejectReason, ServerRejectReason};
use srt_tokio::options::{KeySize, Passphrase};
use srt_tokio::{ConnectionRequest, SrtListener, SrtSocket};
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::{Feeder, Ingest, KeyRefused, PublishAttempt, IDLE_TIMEOUT};
use crate::media::ts::{Demux, Framer};
use crate::media::{Container, Protocol, PublisherGuard, Source};
use crate::stream::StreamDetails;
use crate::tasks::{Stage, Tasks};

/// The default SRT port (mediamtx's too); 0 disables SRT.
pub const DEFAULT_PORT: u16 = crate::config::DEFAULT_SRT_PORT;
/// The receive latency castd asks for (the larger of both sides' wins): room for a few retransmissions
/// on lossy, long links (about 4 round trips of 120 ms); HLS segments are seconds long anyway. With
/// 250 ms, 5% loss at a 100 ms round trip left unrepaired packets (tests/srt.rs).
pub const RECEIVE_LATENCY: Duration = Duration::from_millis(500);
/// Connection requests decided at once; more are refused as overloaded.
pub const MAX_PENDING: usize = 16;
/// Time an accepted handshake has to complete.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the inbound bitrate is measured.
const BITRATE_WINDOW: Duration = Duration::from_secs(2);
/// Pause before the listener is bound again after a failure.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Why a publisher's streamid is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamIdRefusal {
    /// Syntax the access-control grammar does not allow (2400).
    Malformed,
    /// Not a publish (`m=request`, `m=bidirectional`) or not a stream (`t=file`) (2405).
    NotPublish,
    /// No key at all (2401).
    NoKey,
}

/// The stream key of a streamid, as the module doc describes.
pub fn stream_key(stream_id: &str) -> Result<String, StreamIdRefusal> {
    if let Some(acl) = stream_id.strip_prefix("#!::") {
        let (mut resource, mut session) = (None, None);
        for pair in acl.split(',') {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(StreamIdRefusal::Malformed);
            };
            match k.trim() {
                "r" => resource = Some(v),
                "s" => session = Some(v),
                "m" if v != "publish" => return Err(StreamIdRefusal::NotPublish),
                "t" if v != "stream" => return Err(StreamIdRefusal::NotPublish),
                "" => return Err(StreamIdRefusal::Malformed),
                _ => {}
            }
        }
        let from_resource = resource.map(path_key).filter(|k| !k.is_empty());
        let key = from_resource.or(session.map(str::to_string)).unwrap_or_default();
        return if key.is_empty() { Err(StreamIdRefusal::NoKey) } else { Ok(key) };
    }
    let key = path_key(stream_id);
    if key.is_empty() {
        Err(StreamIdRefusal::NoKey)
    } else {
        Ok(key)
    }
}

/// The stream key a publisher's streamid names, as `stream_key` reads it; when that is not a valid key
/// (`valid`) and the streamid holds `%XX` escapes, its percent-decoded form is tried too (a client that
/// does not decode its URL's query sends `%23%21%3A%3Ar%3Dlive%2FKEY` for `#!::r=live/KEY`; a key that
/// really contains `%` still works as it is).
pub fn publish_key(stream_id: &str, valid: impl Fn(&str) -> bool) -> Result<String, StreamIdRefusal> {
    let plain = stream_key(stream_id);
    if matches!(&plain, Ok(k) if valid(k)) || !stream_id.contains('%') {
        return plain;
    }
    match percent_encoding::percent_decode_str(stream_id).decode_utf8() {
        Ok(decoded) if decoded != stream_id => match stream_key(&decoded) {
            Ok(k) if valid(&k) => Ok(k),
            _ => plain,
        },
        _ => plain,
    }
}

/// `KEY`, `live/KEY`, `/live/KEY` (a `?query` is ignored); `live` alone has no key.
fn path_key(path: &str) -> String {
    let path = path.split('?').next().unwrap_or("").trim_matches('/');
    let key = match path.strip_prefix(super::APP_NAME) {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => &rest[1..],
        _ => path,
    };
    key.to_string()
}

/// Where the SRT server listens: the same address as RTMP (`rtmp::bind_address`).
pub fn bind_address(s: &crate::config::Settings) -> Result<std::net::IpAddr, std::net::AddrParseError> {
    super::rtmp::bind_address(s)
}

/// Listen for SRT publishers on `socket` until `stop` fires; then the live SRT broadcaster (if any)
/// is dropped, which ends the stream the normal way.
///
/// Should srt-tokio's listener task end on its own (it panicked on network input before castd patched
/// srt-protocol; see the module doc), the listener is bound again (which also drops a live SRT
/// publisher), so SRT ingest stays up.
pub fn start(ingest: Arc<Ingest>, socket: UdpSocket, tasks: &Tasks) {
    tasks.spawn(Stage::Ingest, "srt listener", serve(ingest, socket, tasks.clone()));
}

/// The SRT listener until the `Ingest` stage stops (see `start`). Each publisher is a task of the
/// stage.
pub async fn serve(ingest: Arc<Ingest>, socket: UdpSocket, tasks: Tasks) {
    let stop = tasks.token(Stage::Ingest);
    let local = match socket.local_addr() {
        Ok(a) => a,
        Err(e) => {
            warn!("srt: the socket has no address: {e}");
            return;
        }
    };
    let mut socket = Some(socket);
    loop {
        let sock = match socket.take() {
            Some(s) => s,
            None => match UdpSocket::bind(local).await {
                Ok(s) => s,
                Err(e) => {
                    debug!("srt: binding {local} again failed: {e}; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(RESTART_DELAY) => continue,
                        _ = stop.cancelled() => return,
                    }
                }
            },
        };
        if listen(&ingest, sock, local, &tasks, &stop).await {
            return;
        }
        error!("srt: the SRT stack failed on a packet it does not handle; listening on {local} again");
        tokio::select! {
            _ = tokio::time::sleep(RESTART_DELAY) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// One listener's life: true when `stop` ended it, false when the SRT stack failed.
async fn listen(
    ingest: &Arc<Ingest>,
    socket: UdpSocket,
    local: SocketAddr,
    tasks: &Tasks,
    stop: &CancellationToken,
) -> bool {
    let bound = SrtListener::builder().receive_latency(RECEIVE_LATENCY).socket(socket).bind(local).await;
    let (mut listener, mut incoming) = match bound {
        Ok(l) => l,
        Err(e) => {
            warn!("srt: cannot listen on {local}: {e}");
            return false;
        }
    };
    let pending = Arc::new(Semaphore::new(MAX_PENDING));
    let requests = incoming.incoming();
    loop {
        let request = tokio::select! {
            r = requests.next() => r,
            _ = stop.cancelled() => break,
        };
        // The request channel closes only when the listener task is gone (it panicked).
        let Some(request) = request else { return false };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            warn!(addr = %request.remote(), "too many srt connection requests; refusing this one");
            let _ = request.reject(RejectReason::Server(ServerRejectReason::Overload)).await;
            continue;
        };
        let ingest = ingest.clone();
        let stop = stop.clone();
        let addr = request.remote();
        tasks.spawn(Stage::Ingest, format!("srt connection {addr}"), async move {
            match decide(&ingest, request, permit).await {
                Some((guard, socket)) => publish(ingest, guard, socket, addr, stop).await,
                None => debug!(%addr, "srt connection request refused"),
            }
        });
    }
    // The live SRT publisher (if any) sees `stop` too and ends the stream the normal way.
    listener.close().await;
    true
}

fn server(reason: ServerRejectReason) -> RejectReason {
    RejectReason::Server(reason)
}

/// Accept the request (holding the publisher slot) or refuse it in the handshake.
async fn decide(
    ingest: &Ingest,
    request: ConnectionRequest,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Option<(PublisherGuard, SrtSocket)> {
    let addr = request.remote();
    if ingest.may_try_key(addr.ip()).is_err() {
        debug!(%addr, "srt publish refused: the address waits after wrong stream keys");
        let _ = request.reject(server(ServerRejectReason::Overload)).await;
        return None;
    }
    let stream_id = request.stream_id().map(|s| s.to_string()).unwrap_or_default();
    let mut channel = crate::media::ChannelId::default_channel();
    let mut right_key = None;
    let refusal = match publish_key(&stream_id, |k| ingest.stream_key_valid(k)) {
        Err(StreamIdRefusal::Malformed) => Some((server(ServerRejectReason::BadRequest), "a malformed streamid")),
        Err(StreamIdRefusal::NotPublish) => Some((server(ServerRejectReason::BadMode), "not a publish")),
        Err(StreamIdRefusal::NoKey) => Some((server(ServerRejectReason::Unauthorized), "no stream key")),
        Ok(key) => match ingest.check_key(addr.ip(), &key) {
            Ok(ch) => {
                channel = ch;
                right_key = Some(key);
                None
            }
            Err(KeyRefused::Invalid) => Some((server(ServerRejectReason::Unauthorized), "an invalid stream key")),
            Err(KeyRefused::Limited(_)) => {
                Some((server(ServerRejectReason::Overload), "the address waits after wrong stream keys"))
            }
        },
    };
    if let Some((reason, why)) = refusal {
        warn!(%addr, "srt publish refused: {why}");
        let _ = request.reject(reason).await;
        return None;
    }
    if let Some(key) = right_key {
        let attempt = PublishAttempt { key, address: addr.ip(), user_agent: None };
        if let Err(why) = ingest.admit(&channel, attempt).await {
            warn!(%addr, %channel, "srt publish refused by the admission hook: {why}");
            let _ = request.reject(server(ServerRejectReason::Forbidden)).await;
            return None;
        }
    }
    let passphrase = ingest.settings.get().ingest.srt_passphrase.clone();
    let keys = if passphrase.is_empty() {
        if request.key_size() != KeySize::Unspecified {
            warn!(%addr, "srt publish refused: it encrypts, but no passphrase is set");
            let _ = request.reject(RejectReason::Core(CoreRejectReason::Unsecure)).await;
            return None;
        }
        None
    } else {
        let Ok(passphrase) = Passphrase::try_from(passphrase) else {
            warn!(%addr, "srt publish refused: the saved passphrase is not a valid SRT passphrase");
            let _ = request.reject(server(ServerRejectReason::InternalServerError)).await;
            return None;
        };
        // The publisher's key length (pbkeylen; unspecified: AES-128) must be the one used here.
        Some(KeySettings { key_size: request.key_size(), passphrase })
    };
    let source = Source { protocol: Protocol::Srt, container: Container::MpegTs, remote: addr };
    let guard = match ingest.claim(&channel, source) {
        Ok(guard) => guard,
        Err(crate::media::ClaimRefused::Busy) => {
            warn!(%addr, "a second publisher was refused: a stream is already live");
            let _ = request.reject(server(ServerRejectReason::Conflict)).await;
            return None;
        }
        // The reason is the media plane's to log and the channel's health to show; SRT carries a code.
        Err(crate::media::ClaimRefused::OverCapacity(_)) => {
            let _ = request.reject(server(ServerRejectReason::Down)).await;
            return None;
        }
    };
    let socket = match tokio::time::timeout(ACCEPT_TIMEOUT, request.accept(keys)).await {
        Ok(Ok(s)) => s,
        // A wrong or missing passphrase: the handshake refused it (bad secret / unsecure). The
        // passphrase is a secret too: the failure counts against the address like a wrong key.
        Ok(Err(e)) => {
            warn!(%addr, "srt publish refused in the handshake (wrong or missing passphrase?): {e}");
            ingest.key_backoff.failed(addr.ip());
            return None;
        }
        Err(_) => {
            warn!(%addr, "srt handshake did not complete");
            return None;
        }
    };
    ingest.key_proven(addr.ip());
    drop(permit);
    Some((guard, socket))
}

/// What an accepted publisher's media becomes.
struct Publish {
    ingest: Arc<Ingest>,
    feeder: Feeder,
    framer: Framer,
    demux: Demux,
    details: StreamDetails,
    window_start: Instant,
}

async fn publish(
    ingest: Arc<Ingest>,
    guard: PublisherGuard,
    mut socket: SrtSocket,
    addr: SocketAddr,
    stop: CancellationToken,
) {
    let notify = guard.notify();
    info!(%addr, "srt broadcaster connected; stream starting");
    let feeder = ingest.hand_off(guard);
    let mut p = Publish {
        ingest,
        feeder,
        framer: Framer::default(),
        demux: Demux::default(),
        details: StreamDetails::default(),
        window_start: Instant::now(),
    };
    loop {
        let next = tokio::select! {
            r = tokio::time::timeout(IDLE_TIMEOUT, socket.next()) => r,
            _ = notify.notified() => {
                info!(%addr, "dropping the srt broadcaster");
                break;
            }
            _ = stop.cancelled() => break,
        };
        match next {
            Ok(Some(Ok((_, data)))) => p.media(&data),
            Ok(Some(Err(e))) => {
                info!(%addr, "srt connection failed: {e}");
                break;
            }
            Ok(None) => break,
            Err(_) => {
                info!(%addr, "srt broadcaster sent nothing for {IDLE_TIMEOUT:?}; dropping it");
                break;
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), socket.close()).await;
    info!(%addr, "srt broadcaster disconnected");
    p.ingest.telemetry(&p.feeder.broadcast().channel).set_ingest_kbps(None);
}

impl Publish {
    fn media(&mut self, data: &[u8]) {
        let demux = &mut self.demux;
        self.framer.push(data, |packet| demux.packet(packet));
        let mut changed = false;
        if let Some(program) = self.demux.take_program_change() {
            let d = &mut self.details;
            d.video_codec = program.video_codec;
            d.audio_codec = program.audio_codec;
            d.encoder = program.encoder;
            changed = true;
        }
        if let Some(picture) = self.demux.take_picture_change() {
            let d = &mut self.details;
            (d.width, d.height) = (picture.width, picture.height);
            d.framerate = picture.framerate.unwrap_or_default();
            changed = true;
        }
        let elapsed = self.window_start.elapsed();
        if elapsed >= BITRATE_WINDOW {
            let (video, audio) = self.demux.take_bytes();
            let kbps = |bytes: u64| (bytes as f64 * 8.0 / 1000.0 / elapsed.as_secs_f64()).round();
            let (video, audio) = (kbps(video), kbps(audio));
            self.ingest.telemetry(&self.feeder.broadcast().channel).set_ingest_kbps(Some(video + audio));
            self.details.video_bitrate = video as u32;
            self.details.audio_bitrate = audio as u32;
            self.window_start = Instant::now();
            changed = true;
        }
        if changed {
            self.feeder.details(self.details.clone());
        }
        for chunk in self.demux.take_chunks() {
            self.feeder.push(chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoded_stream_ids_are_decoded_only_when_that_names_a_valid_key() {
        let valid = |k: &str| k == "abc123" || k == "50%off";
        assert_eq!(publish_key("%23%21%3A%3Ar%3Dlive%2Fabc123%2Cm%3Dpublish", valid), Ok("abc123".into()));
        assert_eq!(publish_key("live%2Fabc123", valid), Ok("abc123".into()));
        // A key that contains `%` is taken as it is; so is one that does not decode to a valid key.
        assert_eq!(publish_key("50%off", valid), Ok("50%off".into()));
        assert_eq!(publish_key("live%2Fwrong", valid), Ok("live%2Fwrong".into()));
        assert_eq!(publish_key("%ff%fe", valid), Ok("%ff%fe".into()));
        // Decoded, a refusal is still a refusal (and the plain reading's answer is kept).
        assert_eq!(
            publish_key("%23%21%3A%3Ar%3Dlive%2Fabc123%2Cm%3Drequest", valid),
            Ok("%23%21%3A%3Ar%3Dlive%2Fabc123%2Cm%3Drequest".into())
        );
    }

    #[test]
    fn stream_id_forms() {
        assert_eq!(stream_key("abc123"), Ok("abc123".into()));
        assert_eq!(stream_key("live/abc123"), Ok("abc123".into()));
        assert_eq!(stream_key("/live/abc123?x=1"), Ok("abc123".into()));
        assert_eq!(stream_key("#!::r=live/abc123,m=publish"), Ok("abc123".into()));
        assert_eq!(stream_key("#!::u=me,r=live/abc123,m=publish,s=sess"), Ok("abc123".into()));
        assert_eq!(stream_key("#!::r=abc123"), Ok("abc123".into()));
        assert_eq!(stream_key("#!::r=live,s=abc123,m=publish"), Ok("abc123".into()));
        assert_eq!(stream_key("#!::m=publish,s=abc123"), Ok("abc123".into()));
        assert_eq!(stream_key("#!::r=live/abc123,m=request"), Err(StreamIdRefusal::NotPublish));
        assert_eq!(stream_key("#!::r=live/abc123,m=bidirectional"), Err(StreamIdRefusal::NotPublish));
        assert_eq!(stream_key("#!::r=live/abc123,t=file"), Err(StreamIdRefusal::NotPublish));
        assert_eq!(stream_key("#!::r=live/abc123,junk"), Err(StreamIdRefusal::Malformed));
        assert_eq!(stream_key("#!::m=publish"), Err(StreamIdRefusal::NoKey));
        assert_eq!(stream_key(""), Err(StreamIdRefusal::NoKey));
        assert_eq!(stream_key("live"), Err(StreamIdRefusal::NoKey));
        assert_eq!(stream_key("live/"), Err(StreamIdRefusal::NoKey));
    }
}
