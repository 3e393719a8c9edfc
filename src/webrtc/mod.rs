//! WebRTC: the one WebRTC stack of castd (str0m, sans-IO), shared by WHIP ingest and WHEP playback.
//!
//! It owns:
//! - the single UDP socket every session shares (`--webrtc-udp-port`, default 8189; `0` picks an
//!   ephemeral port, which the log names: `webrtc listening on udp://ADDR`), so one firewall rule
//!   covers every publisher and viewer;
//! - the ICE host candidates castd offers: the socket's address (each interface address when it is
//!   bound to the unspecified address) and `--webrtc-public-ip` on the same port for a box behind NAT.
//!   castd is ICE-lite: the remote peer checks, castd answers;
//! - the demultiplexing of datagrams to sessions (`demux`): a STUN binding request names the session
//!   by its local ICE ufrag (the part before the colon of USERNAME), which ties the sender's address
//!   to the session; every later datagram from that address (DTLS, SRTP, SRTCP) goes there. This is
//!   what str0m's `Rtc::accepts` decides inside one `Rtc`, done once for all of them;
//! - the session registry (`Sessions`): every live session by its resource id, with its direction's
//!   name, so the HTTP resources (`/whip/{id}`, `/whep/{id}`) can end one;
//! - the session driver (`session`; a session that does not connect within `CONNECT_TIMEOUT` ends):
//!   one task per session (spawned through `tasks`, in the stage its
//!   opener names), which owns the `Rtc`, feeds it datagrams and timeouts, sends what it transmits
//!   and hands its events to the session's `Peer` (WHIP: media in; WHEP: media out, through
//!   `Peer::poll_app`);
//! - the shared HTTP resource handling of WHIP and WHEP (`http`): the SDP offer body, the 201 answer
//!   with `Location` and `ETag`, `OPTIONS` (CORS, `Accept-Post`, `Allow`), `PATCH` (405 with `Allow`:
//!   no trickle ICE; the offer carries the candidates it has) and StatusResponse errors.
//!
//! Datagrams to a session wait in a bounded queue (`SESSION_QUEUE`); when a session falls behind,
//! further datagrams to it are dropped (as the network would; NACK and PLI repair media) and counted.

pub mod http;
mod session;
mod stun;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use str0m::{Candidate, Rtc, RtcConfig};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::tasks::{Stage, Tasks};

pub use session::{Flow, Peer, CONNECT_TIMEOUT};
pub use str0m;

/// The default UDP port of every WebRTC session (mediamtx's WebRTC port is 8189 too).
pub const DEFAULT_UDP_PORT: u16 = 8189;
/// Datagrams waiting for one session; beyond it they are dropped.
pub const SESSION_QUEUE: usize = 512;
/// Largest datagram read.
const MAX_DATAGRAM: usize = 2048;
/// Sessions at once (WHIP is one, WHEP viewers the rest).
pub const MAX_SESSIONS: usize = 1024;
/// Receive buffer asked for on the shared socket (the kernel caps it at `net.core.rmem_max`): every
/// session's STUN, RTCP (NACKs, receiver reports) and WHIP media arrives on this one socket, and with
/// the Linux default (208 KiB) a busy machine dropped hundreds of datagrams in 20 s at 200 WHEP viewers
/// while the reader waited for a CPU (bench/webrtc).
const RECV_BUFFER: usize = 4 << 20;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum WebRtcError {
    #[error("the SDP offer is malformed: {0}")]
    BadOffer(String),
    #[error("the offer was not accepted: {0}")]
    Rejected(String),
    #[error("too many WebRTC sessions")]
    Full,
}

/// A datagram for a session: when it arrived, from where, what.
struct Datagram {
    at: Instant,
    from: SocketAddr,
    data: Bytes,
}

/// One live session, as the registry knows it.
struct Entry {
    /// "whip" or "whep".
    kind: &'static str,
    ufrag: String,
    tx: mpsc::Sender<Datagram>,
    stop: CancellationToken,
}

/// Every live session and the routes to it.
#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, Entry>,
    /// Local ICE ufrag -> session id.
    by_ufrag: HashMap<String, String>,
    /// Remote address -> session id (learnt from STUN).
    by_addr: HashMap<SocketAddr, String>,
}

/// The WebRTC stack: the socket, the candidates, the sessions.
pub struct WebRtc {
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    candidates: Vec<SocketAddr>,
    sessions: Mutex<Sessions>,
    /// Datagrams dropped because their session's queue was full, or no session claimed them.
    dropped: AtomicU64,
    unclaimed: AtomicU64,
}

/// A new session: its resource id and the SDP answer.
pub struct Opened {
    pub id: String,
    pub answer: String,
    /// Ends the session (its driver disconnects the peer and stops).
    pub stop: CancellationToken,
}

impl WebRtc {
    /// The stack on a bound socket; `public_ip` is offered as a host candidate on the same port.
    pub fn new(socket: UdpSocket, public_ip: Option<IpAddr>) -> std::io::Result<Arc<WebRtc>> {
        let local = socket.local_addr()?;
        size_recv_buffer(&socket, RECV_BUFFER);
        let mut candidates = if local.ip().is_unspecified() {
            interface_addresses(local.is_ipv6()).into_iter().map(|ip| SocketAddr::new(ip, local.port())).collect()
        } else {
            vec![local]
        };
        if let Some(ip) = public_ip {
            let public = SocketAddr::new(ip, local.port());
            if !candidates.contains(&public) {
                candidates.insert(0, public);
            }
        }
        info!("webrtc listening on udp://{local} (candidates: {candidates:?})");
        Ok(Arc::new(WebRtc {
            socket: Arc::new(socket),
            local,
            candidates,
            sessions: Mutex::new(Sessions::default()),
            dropped: AtomicU64::new(0),
            unclaimed: AtomicU64::new(0),
        }))
    }

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The ICE host candidates offered in every answer.
    pub fn candidates(&self) -> &[SocketAddr] {
        &self.candidates
    }

    /// Live sessions of `kind` ("whip", "whep").
    pub fn count(&self, kind: &str) -> usize {
        self.sessions.lock().by_id.values().filter(|e| e.kind == kind).count()
    }

    /// End every session of `kind` (WHEP viewers when the stream ends); returns how many.
    pub fn close_all(&self, kind: &str) -> usize {
        let sessions = self.sessions.lock();
        let mut n = 0;
        for e in sessions.by_id.values().filter(|e| e.kind == kind) {
            e.stop.cancel();
            n += 1;
        }
        n
    }

    /// Datagrams dropped so far: (a session's queue was full, no session claimed them).
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped.load(Ordering::Relaxed), self.unclaimed.load(Ordering::Relaxed))
    }

    /// End the session `id` of `kind`; false when there is none.
    pub fn close(&self, kind: &str, id: &str) -> bool {
        match self.sessions.lock().by_id.get(id) {
            Some(e) if e.kind == kind => {
                e.stop.cancel();
                true
            }
            _ => false,
        }
    }

    /// Answer `offer` (SDP text) with an `Rtc` built from `config` (the codecs and directions the
    /// session wants) and start its driver in `stage`: `peer` gets its events until it says `Close`,
    /// the remote goes away, `Opened::stop` is cancelled or `stage` stops.
    pub fn open(
        self: &Arc<Self>,
        kind: &'static str,
        offer: &str,
        config: RtcConfig,
        peer: Box<dyn Peer>,
        tasks: &Tasks,
        stage: Stage,
    ) -> Result<Opened, WebRtcError> {
        let offer =
            str0m::change::SdpOffer::from_sdp_string(offer).map_err(|e| WebRtcError::BadOffer(e.to_string()))?;
        let ufrag = crate::password::random_token(12);
        let pass = crate::password::random_token(32);
        let creds = str0m::IceCreds { ufrag: ufrag.clone(), pass };
        let mut rtc: Rtc = config
            .set_ice_lite(true)
            .set_local_ice_credentials(creds)
            .set_crypto_provider(Arc::new(str0m::crypto::from_feature_flags()))
            .build(Instant::now());
        for addr in &self.candidates {
            match Candidate::host(*addr, "udp") {
                Ok(c) => {
                    rtc.add_local_candidate(c);
                }
                Err(e) => debug!(%addr, "not a usable candidate: {e}"),
            }
        }
        let answer = rtc.sdp_api().accept_offer(offer).map_err(|e| WebRtcError::Rejected(e.to_string()))?;
        let id = crate::password::random_token(16);
        let (tx, rx) = mpsc::channel(SESSION_QUEUE);
        let stop = tasks.token(stage).child_token();
        {
            let mut s = self.sessions.lock();
            if s.by_id.len() >= MAX_SESSIONS {
                return Err(WebRtcError::Full);
            }
            s.by_ufrag.insert(ufrag.clone(), id.clone());
            s.by_id.insert(id.clone(), Entry { kind, ufrag, tx, stop: stop.clone() });
        }
        let driver = session::Driver {
            rtc,
            peer,
            rx,
            socket: self.socket.clone(),
            local: self.local,
            stop: stop.clone(),
            label: format!("{kind} {id}"),
            connected: false,
            out: Vec::new(),
        };
        let me = self.clone();
        let sid = id.clone();
        tasks.spawn(stage, format!("webrtc {kind} session"), async move {
            driver.run().await;
            me.forget(&sid);
        });
        Ok(Opened { id, answer: answer.to_sdp_string(), stop })
    }

    fn forget(&self, id: &str) {
        let mut s = self.sessions.lock();
        if let Some(e) = s.by_id.remove(id) {
            s.by_ufrag.remove(&e.ufrag);
            s.by_addr.retain(|_, v| v != id);
        }
    }

    /// Hand a datagram to its session: by its sender's address, or, for a STUN request from a new
    /// address, by the local ufrag it names (which ties that address to the session).
    fn demux(&self, from: SocketAddr, data: &[u8]) {
        let tx = {
            let mut s = self.sessions.lock();
            let ufrag = stun::local_ufrag(data);
            let id = match (s.by_addr.get(&from), ufrag) {
                (Some(id), _) => Some(id.clone()),
                (None, Some(u)) => s.by_ufrag.get(u).cloned(),
                (None, None) => None,
            };
            let Some((id, tx)) = id.and_then(|id| s.by_id.get(&id).map(|e| (id, e.tx.clone()))) else {
                self.unclaimed.fetch_add(1, Ordering::Relaxed);
                return;
            };
            if ufrag.is_some() && !s.by_addr.contains_key(&from) {
                s.by_addr.insert(from, id);
            }
            tx
        };
        let d = Datagram { at: Instant::now(), from, data: Bytes::copy_from_slice(data) };
        if tx.try_send(d).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Read the socket until `Stage::Connections` stops (after ingest, so a WHIP publisher ends the
/// stream the normal way; WHEP sessions stop with their own stage).
pub fn start(rtc: Arc<WebRtc>, tasks: &Tasks) {
    let stop = tasks.token(Stage::Connections);
    tasks.spawn(Stage::Connections, "webrtc socket", async move {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            let got = tokio::select! {
                r = rtc.socket.recv_from(&mut buf) => r,
                _ = stop.cancelled() => break,
            };
            match got {
                Ok((n, from)) => rtc.demux(from, &buf[..n]),
                // ICMP port unreachable and the like surface here on some systems: not fatal.
                Err(e) => debug!("webrtc socket: {e}"),
            }
        }
    });
}

/// Ask for a receive buffer of `bytes` on `socket`; returns what the kernel granted (it caps the
/// request at `net.core.rmem_max`).
fn set_recv_buffer(socket: &UdpSocket, bytes: usize) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live c_int on an fd the socket owns.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut granted: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into a live c_int and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut granted as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Linux reports twice what it grants (the doubling covers its bookkeeping).
    Ok(usize::try_from(granted).unwrap_or(0) / 2)
}

/// Set the receive buffer, and say so when the kernel gives less than asked (many viewers then lose
/// datagrams in bursts: `castd_webrtc_dropped_datagrams` does not see those, the kernel drops them).
fn size_recv_buffer(socket: &UdpSocket, bytes: usize) {
    match set_recv_buffer(socket, bytes) {
        Ok(granted) if granted < bytes => warn!(
            "webrtc: the kernel gave the UDP socket a {} KiB receive buffer of the {} KiB asked for \
             (net.core.rmem_max caps it); with many WebRTC viewers, raise it: sysctl -w net.core.rmem_max={bytes}",
            granted / 1024,
            bytes / 1024
        ),
        Ok(_) => {}
        Err(e) => warn!("webrtc: cannot set the UDP receive buffer: {e}"),
    }
}

/// The addresses of the machine's interfaces that are up (IPv4 or IPv6), for host candidates when
/// the socket is bound to the unspecified address.
fn interface_addresses(v6: bool) -> Vec<IpAddr> {
    let mut out = Vec::new();
    // SAFETY: getifaddrs fills a linked list that freeifaddrs releases; we only read it in between.
    unsafe {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            warn!("webrtc: cannot list the network interfaces");
            return out;
        }
        let mut cur = list;
        while !cur.is_null() {
            let ifa = &*cur;
            cur = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || ifa.ifa_flags & libc::IFF_UP as u32 == 0 {
                continue;
            }
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    out.push(IpAddr::from(u32::from_be(sa.sin_addr.s_addr).to_be_bytes()));
                }
                libc::AF_INET6 if v6 => {
                    let sa = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    let ip = std::net::Ipv6Addr::from(sa.sin6_addr.s6_addr);
                    // Link-local addresses need a scope id a candidate cannot carry.
                    if ip.segments()[0] & 0xffc0 != 0xfe80 {
                        out.push(IpAddr::V6(ip));
                    }
                }
                _ => {}
            }
        }
        libc::freeifaddrs(list);
    }
    out.sort_by_key(|ip| ip.is_loopback());
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel grants a small buffer in full and caps a huge one (at rmem_max); both are reported.
    #[tokio::test]
    async fn the_receive_buffer_reports_what_the_kernel_granted() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let small = set_recv_buffer(&socket, 64 * 1024).unwrap();
        assert!(small >= 64 * 1024, "64 KiB asked, {small} granted");
        let huge = set_recv_buffer(&socket, 1 << 30).unwrap();
        assert!(huge < 1 << 30, "1 GiB asked, {huge} granted: rmem_max must cap it");
        assert!(huge >= small, "a bigger request never shrinks the buffer below the small one's");
    }
}
