//! The RTMP(S) publishing client: rml_rtmp's `ClientSession` over a tokio TCP stream, wrapped in TLS
//! (tokio-rustls, rustls with ring) for `rtmps://`.
//!
//! `Publisher::connect` resolves the host through the channel's reach (`outbound::Reach::resolve`: a
//! channel's target only to the addresses the guard allows) and connects to those addresses
//! (`CONNECT_TIMEOUT` for the whole set-up), does the RTMP
//! handshake, `connect`s to the URL's application (with `tcUrl`, which the platforms require) and
//! `publish`es the stream key as a live stream; a refusal is reported with the remote's own words
//! (the `_error`'s description or the `onStatus` code). `Publisher::forward` then sends the source's
//! FLV tags as RTMP audio/video messages, answers the server (acknowledgements, pings) and reports
//! what it sent; at the end of the stream (or when the target is stopped) it sends `FCUnpublish` and
//! `deleteStream` and closes the socket.
//!
//! TLS trusts the Mozilla roots (webpki-roots) plus, for tests and private platforms, the PEM
//! certificates in the file named by `CASTD_SIMULCAST_CA_FILE` (read at start; see `tls_config`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rml_rtmp::handshake::{Handshake, HandshakeProcessResult, PeerType};
use rml_rtmp::rml_amf0::Amf0Value;
use rml_rtmp::sessions::{
    ClientSession, ClientSessionConfig, ClientSessionError, ClientSessionEvent, ClientSessionResult, PublishRequestType,
};
use rml_rtmp::time::RtmpTimestamp;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::SimulcastError;
use crate::media::flv::{TAG_AUDIO, TAG_VIDEO};
use crate::media::{MediaChunk, TapReader};

use super::variant::VariantReader;

/// Time for TCP, TLS, the RTMP handshake, connect and publish together.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A write the server does not take within this long ends the connection (it is retried).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The environment variable naming extra trusted CA certificates (PEM) for `rtmps://`.
pub const CA_FILE_ENV: &str = "CASTD_SIMULCAST_CA_FILE";

/// Where an `rtmp://` or `rtmps://` URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// The application: the URL's path (`live2`, `app`, `rtmp`).
    pub app: String,
    /// The URL without a trailing slash, sent as `tcUrl`.
    pub tc_url: String,
}

impl Endpoint {
    /// Parse `rtmp[s]://host[:port]/app[/...][?query]` (default ports 1935 and 443). The path is taken
    /// as written (no dot-segment folding): it is the platform's application name.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (scheme, rest) = url.split_once("://").ok_or("not a URL (rtmp://host/app)")?;
        let scheme = scheme.to_ascii_lowercase();
        let tls = match scheme.as_str() {
            "rtmp" => false,
            "rtmps" => true,
            other => return Err(format!("not an RTMP URL ({other}://)")),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (path, query) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path, None),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or("bad IPv6 address")?;
            (h, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() || host.contains(['@', ' ', '/']) {
            return Err("the URL has no host".into());
        }
        let port = match port {
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or("bad port")?,
            None if tls => 443,
            None => 1935,
        };
        let app = path.trim_matches('/').to_string();
        if app.is_empty() {
            return Err("the URL has no application (rtmp://host/app)".into());
        }
        let shown_host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        let mut tc_url = format!("{scheme}://{shown_host}:{port}/{app}");
        if let Some(q) = query {
            tc_url.push('?');
            tc_url.push_str(q);
        }
        Ok(Endpoint { tls, host: host.to_string(), port, app, tc_url })
    }
}

/// The TLS client configuration: the Mozilla roots plus the certificates of `CASTD_SIMULCAST_CA_FILE`.
pub fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(path) = std::env::var_os(CA_FILE_ENV) {
        use rustls::pki_types::pem::PemObject;
        match rustls::pki_types::CertificateDer::pem_file_iter(&path) {
            Ok(certs) => {
                for cert in certs.flatten() {
                    if let Err(e) = roots.add(cert) {
                        warn!("{CA_FILE_ENV}: a certificate was not added: {e}");
                    }
                }
            }
            Err(e) => warn!("{CA_FILE_ENV}: cannot read {}: {e}", path.to_string_lossy()),
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Fails only for a provider without a safe protocol version, which ring is not.
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
        .map_err(|e| format!("TLS configuration: {e}"))
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Why forwarding ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The stream ended: the target was stopped cleanly.
    StreamEnded,
    /// The target was stopped (disabled, changed, castd stopping).
    Stopped,
}

/// Where a target's media comes from.
pub enum Source {
    /// The broadcaster's own stream (`source` targets).
    Tap(TapReader),
    /// One variant of the transcoder's output, remuxed (`variant` targets).
    Variant(Box<VariantReader>),
}

impl Source {
    pub async fn recv(&mut self) -> Result<Option<MediaChunk>, SimulcastError> {
        match self {
            Source::Tap(r) => Ok(r.recv().await),
            Source::Variant(r) => r.recv().await,
        }
    }
}

/// Counters a forward updates while it runs.
pub trait Progress: Send + Sync {
    /// `bytes` more went to the server.
    fn sent(&self, bytes: u64);
}

/// A publishing RTMP connection.
pub struct Publisher {
    io: Box<dyn Io>,
    session: ClientSession,
    buf: Vec<u8>,
}

fn session_err(e: ClientSessionError) -> SimulcastError {
    SimulcastError::Remote(format!("RTMP session: {e:?}"))
}

/// The description (or the code) of an `_error`/`onStatus` information object.
fn status_text(values: &[Amf0Value]) -> Option<String> {
    values.iter().find_map(|v| match v {
        Amf0Value::Object(props) => {
            let get = |k: &str| match props.get(k) {
                Some(Amf0Value::Utf8String(s)) if !s.is_empty() => Some(s.clone()),
                _ => None,
            };
            match (get("code"), get("description")) {
                (Some(c), Some(d)) => Some(format!("{d} ({c})")),
                (c, d) => d.or(c),
            }
        }
        _ => None,
    })
}

/// An `onStatus` code that means the publish failed.
/// The status of an unexpected `_result`/`onStatus` if it says something failed (level `error`, or a
/// failure code); a success (a server's second answer to `connect`, as castd itself sends to Enhanced
/// RTMP publishers) is no refusal.
fn failure_text(values: &[Amf0Value]) -> Option<String> {
    let failed = values.iter().any(|v| match v {
        Amf0Value::Object(props) => {
            let level_error = matches!(props.get("level"), Some(Amf0Value::Utf8String(l)) if l == "error");
            let code_failed = matches!(props.get("code"), Some(Amf0Value::Utf8String(c)) if is_failure_code(c));
            level_error || code_failed
        }
        _ => false,
    });
    if failed {
        status_text(values)
    } else {
        None
    }
}

fn is_failure_code(code: &str) -> bool {
    ["BadName", "Rejected", "Failed", "Unauthorized", "Error", "Denied", "Forbidden"].iter().any(|w| code.contains(w))
}

impl Publisher {
    /// Connect to `ep` and publish `key` (see the module doc).
    pub async fn connect(
        ep: &Endpoint,
        key: &str,
        tls: &Result<Arc<rustls::ClientConfig>, String>,
        reach: &crate::outbound::Reach,
    ) -> Result<Publisher, SimulcastError> {
        match tokio::time::timeout(CONNECT_TIMEOUT, Self::connect_inner(ep, key, tls, reach)).await {
            Ok(r) => r,
            Err(_) => Err(SimulcastError::Remote(format!(
                "no answer within {} s while connecting and publishing",
                CONNECT_TIMEOUT.as_secs()
            ))),
        }
    }

    async fn connect_inner(
        ep: &Endpoint,
        key: &str,
        tls: &Result<Arc<rustls::ClientConfig>, String>,
        reach: &crate::outbound::Reach,
    ) -> Result<Publisher, SimulcastError> {
        // The connection goes to the addresses checked here, never to a fresh lookup of the name.
        let addrs = super::resolve(reach, &ep.host, ep.port).await?;
        let tcp = TcpStream::connect(&addrs[..])
            .await
            .map_err(|e| SimulcastError::Remote(format!("connect to {}:{}: {e}", ep.host, ep.port)))?;
        let _ = tcp.set_nodelay(true);
        let mut io: Box<dyn Io> = if ep.tls {
            let name = ServerName::try_from(ep.host.clone())
                .map_err(|e| SimulcastError::Remote(format!("TLS server name {}: {e}", ep.host)))?;
            let tls = tls.as_ref().map_err(|e| SimulcastError::Remote(e.clone()))?;
            let conn = tokio_rustls::TlsConnector::from(tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| SimulcastError::Remote(format!("TLS: {e}")))?;
            Box::new(conn)
        } else {
            Box::new(tcp)
        };
        let leftover = handshake(&mut io).await?;
        let mut config = ClientSessionConfig::new();
        config.tc_url = Some(ep.tc_url.clone());
        config.flash_version = "FMLE/3.0 (compatible; castd)".into();
        let (session, initial) = ClientSession::new(config).map_err(session_err)?;
        let mut p = Publisher { io, session, buf: vec![0u8; 64 * 1024] };
        p.write_results(initial).await?;
        let req = p.session.request_connection(ep.app.clone()).map_err(session_err)?;
        p.write_results(vec![req]).await?;
        let mut connected = false;
        let mut pending = leftover;
        loop {
            if pending.is_empty() {
                let n = p.io.read(&mut p.buf).await.map_err(|e| SimulcastError::Remote(format!("read: {e}")))?;
                if n == 0 {
                    return Err(SimulcastError::Remote(if connected {
                        "the server closed the connection at publish".into()
                    } else {
                        "the server closed the connection at connect".into()
                    }));
                }
                pending = p.buf[..n].to_vec();
            }
            let results = p.session_input(&pending)?;
            pending.clear();
            for event in p.write_results(results).await? {
                match event {
                    ClientSessionEvent::ConnectionRequestAccepted => {
                        connected = true;
                        // No releaseStream/FCPublish before publishing: the platforms do not need them,
                        // and some servers' answers to them (ffmpeg's `-listen` RTMP server's) make
                        // rml_rtmp's command parser fail.
                        let req = p
                            .session
                            .request_publishing(key.to_string(), PublishRequestType::Live)
                            .map_err(session_err)?;
                        p.write_results(vec![req]).await?;
                    }
                    ClientSessionEvent::ConnectionRequestRejected { description } => {
                        return Err(SimulcastError::Refused(format!("connect refused: {description}")));
                    }
                    ClientSessionEvent::PublishRequestAccepted => return Ok(p),
                    ClientSessionEvent::UnknownTransactionResultReceived { additional_values, .. } => {
                        if let Some(text) = failure_text(&additional_values) {
                            if connected {
                                return Err(SimulcastError::Refused(format!("publish refused: {text}")));
                            }
                        }
                    }
                    ClientSessionEvent::UnhandleableOnStatusCode { code } if is_failure_code(&code) => {
                        return Err(SimulcastError::Refused(format!("publish refused: {code}")));
                    }
                    _ => {}
                }
            }
        }
    }

    fn session_input(&mut self, bytes: &[u8]) -> Result<Vec<ClientSessionResult>, SimulcastError> {
        // rml_rtmp's chunk parser can panic on malformed input (see ingest::rtmp::session_input).
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.session.handle_input(bytes))) {
            Ok(r) => r.map_err(session_err),
            Err(_) => Err(SimulcastError::Remote("malformed RTMP from the server".into())),
        }
    }

    /// Write the session's packets; return its events.
    async fn write_results(
        &mut self,
        results: Vec<ClientSessionResult>,
    ) -> Result<Vec<ClientSessionEvent>, SimulcastError> {
        let mut events = Vec::new();
        for r in results {
            match r {
                ClientSessionResult::OutboundResponse(p) => self.write(&p.bytes).await?,
                ClientSessionResult::RaisedEvent(e) => events.push(e),
                ClientSessionResult::UnhandleableMessageReceived(_) => {}
            }
        }
        Ok(events)
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), SimulcastError> {
        match tokio::time::timeout(WRITE_TIMEOUT, self.io.write_all(bytes)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SimulcastError::Remote(format!("write: {e}"))),
            Err(_) => Err(SimulcastError::Remote(format!("the server took nothing for {} s", WRITE_TIMEOUT.as_secs()))),
        }
    }

    /// An AMF0 command rml_rtmp has no call for (`FCUnpublish`): sent on
    /// the control stream with transaction id 0 (no answer awaited), framed by `raw_chunks`.
    async fn command(&mut self, name: &str, key: &str) -> Result<(), SimulcastError> {
        let msg = rml_rtmp::messages::RtmpMessage::Amf0Command {
            command_name: name.to_string(),
            transaction_id: 0.0,
            command_object: Amf0Value::Null,
            additional_arguments: vec![Amf0Value::Utf8String(key.to_string())],
        };
        let payload = msg
            .into_message_payload(RtmpTimestamp::new(0), 0)
            .map_err(|e| SimulcastError::Remote(format!("RTMP message: {e:?}")))?;
        self.write(&raw_chunks(payload.type_id, &payload.data)).await
    }

    /// Forward the tap's media until the stream ends or `stop` is cancelled; then unpublish cleanly.
    pub async fn forward(
        mut self,
        mut reader: Source,
        key: &str,
        stop: &CancellationToken,
        progress: &(dyn Progress + Sync),
    ) -> Result<Ended, SimulcastError> {
        let mut inbuf = vec![0u8; 16 * 1024];
        let ended = loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break Ended::Stopped,
                r = self.io.read(&mut inbuf) => {
                    let n = r.map_err(|e| SimulcastError::Remote(format!("read: {e}")))?;
                    if n == 0 {
                        return Err(SimulcastError::Remote("the server closed the connection".into()));
                    }
                    let results = self.session_input(&inbuf[..n])?;
                    for event in self.write_results(results).await? {
                        match event {
                            ClientSessionEvent::UnhandleableOnStatusCode { code } if is_failure_code(&code) => {
                                return Err(SimulcastError::Remote(format!("the server ended the publish: {code}")));
                            }
                            ClientSessionEvent::UnknownTransactionResultReceived { additional_values, .. } => {
                                if let Some(text) = failure_text(&additional_values) {
                                    return Err(SimulcastError::Remote(format!("the server ended the publish: {text}")));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                chunk = reader.recv() => {
                    let Some(chunk) = chunk? else { break Ended::StreamEnded };
                    let MediaChunk::Flv(tag) = chunk else {
                        return Err(SimulcastError::Unsupported(
                            "the source is MPEG-TS (SRT); RTMP targets forward RTMP sources".into(),
                        ));
                    };
                    let ts = RtmpTimestamp::new(tag.timestamp);
                    let can_drop = !tag.is_sequence_header() && !tag.is_video_keyframe();
                    let result = match tag.kind {
                        TAG_VIDEO => self.session.publish_video_data(tag.data.clone(), ts, can_drop),
                        TAG_AUDIO => self.session.publish_audio_data(tag.data.clone(), ts, can_drop),
                        _ => continue,
                    }
                    .map_err(session_err)?;
                    if let ClientSessionResult::OutboundResponse(p) = result {
                        self.write(&p.bytes).await?;
                        progress.sent(p.bytes.len() as u64);
                    }
                }
            }
        };
        self.unpublish(key).await;
        Ok(ended)
    }

    /// `FCUnpublish` and `deleteStream`, then close; errors are of no interest any more.
    async fn unpublish(&mut self, key: &str) {
        let deadline = Instant::now() + Duration::from_secs(2);
        let _ = tokio::time::timeout_at(deadline.into(), async {
            let _ = self.command("FCUnpublish", key).await;
            if let Ok(results) = self.session.stop_publishing() {
                let _ = self.write_results(results).await;
            }
            let _ = self.io.flush().await;
            let _ = self.io.shutdown().await;
        })
        .await;
    }
}

/// The client side of the RTMP handshake; returns the bytes after it.
async fn handshake(io: &mut Box<dyn Io>) -> Result<Vec<u8>, SimulcastError> {
    let hs_err = |e| SimulcastError::Remote(format!("RTMP handshake: {e:?}"));
    let mut hs = Handshake::new(PeerType::Client);
    let p0p1 = hs.generate_outbound_p0_and_p1().map_err(hs_err)?;
    io.write_all(&p0p1).await.map_err(|e| SimulcastError::Remote(format!("write: {e}")))?;
    let mut buf = [0u8; 4096];
    loop {
        let n = io.read(&mut buf).await.map_err(|e| SimulcastError::Remote(format!("read: {e}")))?;
        if n == 0 {
            return Err(SimulcastError::Remote("the server closed the connection in the RTMP handshake".into()));
        }
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hs.process_bytes(&buf[..n])))
            .map_err(|_| SimulcastError::Remote("malformed RTMP handshake from the server".into()))?
            .map_err(hs_err)?;
        match step {
            HandshakeProcessResult::InProgress { response_bytes } => {
                io.write_all(&response_bytes).await.map_err(|e| SimulcastError::Remote(format!("write: {e}")))?
            }
            HandshakeProcessResult::Completed { response_bytes, remaining_bytes } => {
                io.write_all(&response_bytes).await.map_err(|e| SimulcastError::Remote(format!("write: {e}")))?;
                return Ok(remaining_bytes);
            }
        }
    }
}

/// The chunk stream the extra commands go on: one rml_rtmp's serializer never uses (it uses 2 to 6),
/// so its header compression on the others stays in step with the server.
const EXTRA_CSID: u8 = 7;

/// A message as RTMP chunks on `EXTRA_CSID`: a full (type 0) header at timestamp 0 on message stream 0,
/// then type 3 continuations every `ClientSessionConfig`'s chunk size (4096, in force once connected).
fn raw_chunks(type_id: u8, data: &[u8]) -> Vec<u8> {
    let chunk_size = ClientSessionConfig::new().chunk_size as usize;
    let mut out = Vec::with_capacity(data.len() + 16);
    out.push(EXTRA_CSID);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    out.push(type_id);
    out.extend_from_slice(&0u32.to_le_bytes());
    for (i, part) in data.chunks(chunk_size).enumerate() {
        if i > 0 {
            out.push(0xc0 | EXTRA_CSID);
        }
        out.extend_from_slice(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn urls() {
        let e = Endpoint::parse("rtmp://a.rtmp.youtube.com/live2").unwrap();
        assert_eq!((e.tls, e.host.as_str(), e.port, e.app.as_str()), (false, "a.rtmp.youtube.com", 1935, "live2"));
        assert_eq!(e.tc_url, "rtmp://a.rtmp.youtube.com:1935/live2");
        let e = Endpoint::parse("rtmps://live-api-s.facebook.com:443/rtmp/").unwrap();
        assert_eq!((e.tls, e.port, e.app.as_str()), (true, 443, "rtmp"));
        let e = Endpoint::parse("rtmps://127.0.0.1:9443/live").unwrap();
        assert_eq!((e.tls, e.host.as_str(), e.port), (true, "127.0.0.1", 9443));
        assert!(Endpoint::parse("rtmp://host").is_err(), "no app");
        assert!(Endpoint::parse("http://host/live").is_err());
        assert!(Endpoint::parse("rtmp:///live").is_err());
    }

    #[test]
    fn extra_commands_are_whole_chunks_on_their_own_stream() {
        let out = raw_chunks(20, &[1, 2, 3]);
        assert_eq!(out, vec![7, 0, 0, 0, 0, 0, 3, 20, 0, 0, 0, 0, 1, 2, 3]);
        let big = vec![0u8; 5000];
        let out = raw_chunks(20, &big);
        assert_eq!(out.len(), 12 + 5000 + 1);
        assert_eq!(out[12 + 4096], 0xc7);
    }

    #[test]
    fn refusals_are_told_in_the_remotes_words() {
        let mut props = HashMap::new();
        props.insert("code".to_string(), Amf0Value::Utf8String("NetStream.Publish.BadName".into()));
        props.insert("description".to_string(), Amf0Value::Utf8String("invalid stream key".into()));
        assert_eq!(
            status_text(&[Amf0Value::Null, Amf0Value::Object(props.clone())]).as_deref(),
            Some("invalid stream key (NetStream.Publish.BadName)")
        );
        assert!(is_failure_code("NetStream.Publish.BadName"));
        assert!(!is_failure_code("NetStream.Publish.Start"));
        let values = [Amf0Value::Null, Amf0Value::Object(props)];
        assert_eq!(failure_text(&values).as_deref(), Some("invalid stream key (NetStream.Publish.BadName)"));
    }

    /// A second `_result` to `connect` (castd answers Enhanced RTMP publishers with its own first) is
    /// no refusal; an `error` level is, whatever its code.
    #[test]
    fn a_success_status_is_not_a_refusal() {
        let status = |level: &str, code: &str| {
            let mut props = HashMap::new();
            props.insert("level".to_string(), Amf0Value::Utf8String(level.into()));
            props.insert("code".to_string(), Amf0Value::Utf8String(code.into()));
            props.insert("description".to_string(), Amf0Value::Utf8String("Successfully connected.".into()));
            [Amf0Value::Object(props)]
        };
        assert_eq!(failure_text(&status("status", "NetConnection.Connect.Success")), None);
        assert!(failure_text(&status("error", "Some.Odd.Code")).is_some());
    }
}
