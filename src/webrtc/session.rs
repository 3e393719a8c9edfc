//! The session driver: one task per WebRTC session owns its `Rtc` and runs str0m's loop (every
//! mutation followed by draining `poll_output` to its timeout): datagrams from the demultiplexer, the
//! timeouts str0m asks for, the application's own mutations (`Peer::poll_app`, how WHEP will write
//! media), and the session's stop token. What str0m transmits is sent on the shared socket: the
//! datagrams of one drain (a video frame is several packets) are gathered and sent together, with one
//! `sendmmsg` per `SEND_BATCH` (one syscall instead of one per packet).

use std::future::poll_fn;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use str0m::net::{Protocol, Receive};
use str0m::{Event, IceConnectionState, Input, Output, Rtc};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// Time a session has to connect (ICE and DTLS) after its answer; then it ends.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

use super::Datagram;

/// Datagrams sent with one `sendmmsg` at most.
const SEND_BATCH: usize = 32;

/// Whether a session goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Close,
}

/// What a session does with its connection: one per session, owned by its driver.
pub trait Peer: Send + 'static {
    /// An event of the connection (media in, state changes, keyframe requests, statistics).
    fn event(&mut self, rtc: &mut Rtc, event: Event) -> Flow;

    /// Ready when the application has a mutation to make (WHEP: media to send). The driver then calls
    /// `app`. The default is never.
    fn poll_app(&mut self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }

    /// Make the mutation `poll_app` announced (one; the driver drains the output after it).
    fn app(&mut self, _rtc: &mut Rtc) -> Flow {
        Flow::Continue
    }

    /// The session ended (whatever the reason); called once.
    fn closed(&mut self) {}
}

/// One session's loop.
pub(super) struct Driver {
    pub(super) rtc: Rtc,
    pub(super) peer: Box<dyn Peer>,
    pub(super) rx: mpsc::Receiver<Datagram>,
    pub(super) socket: Arc<UdpSocket>,
    pub(super) local: SocketAddr,
    pub(super) stop: CancellationToken,
    pub(super) label: String,
    /// Whether ICE and DTLS are up (`Event::Connected`).
    pub(super) connected: bool,
    /// What str0m transmitted and is not sent yet (kept between drains for its capacity).
    pub(super) out: Vec<(SocketAddr, Vec<u8>)>,
}

enum Wake {
    Datagram(Datagram),
    App,
    Timeout,
    Stop,
    /// The session's datagram queue is gone (the WebRTC stack forgot the session).
    Gone,
}

impl Driver {
    pub(super) async fn run(mut self) {
        let label = self.label.clone();
        debug!("webrtc {label}: started");
        let connect_by = Instant::now() + CONNECT_TIMEOUT;
        // One timer for the session's life, moved when str0m's deadline moves (a new `Sleep` per
        // wake registered and removed a timer entry each time).
        let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(connect_by));
        tokio::pin!(sleep);
        loop {
            let Some(deadline) = self.drain().await else { break };
            if !self.rtc.is_alive() {
                debug!("webrtc {label}: the connection is no longer alive");
                break;
            }
            if !self.connected && Instant::now() >= connect_by {
                info!("webrtc {label}: did not connect within {CONNECT_TIMEOUT:?}");
                break;
            }
            let deadline = if self.connected { deadline } else { deadline.min(connect_by) };
            let deadline = tokio::time::Instant::from_std(deadline);
            if sleep.deadline() != deadline {
                sleep.as_mut().reset(deadline);
            }
            let peer = &mut self.peer;
            let wake = tokio::select! {
                d = self.rx.recv() => d.map_or(Wake::Gone, Wake::Datagram),
                _ = poll_fn(|cx| peer.poll_app(cx)) => Wake::App,
                _ = &mut sleep => Wake::Timeout,
                _ = self.stop.cancelled() => Wake::Stop,
            };
            let result = match wake {
                Wake::Datagram(d) => {
                    let Ok(contents) = d.data[..].try_into() else { continue };
                    let input = Input::Receive(
                        d.at,
                        Receive { proto: Protocol::Udp, source: d.from, destination: self.local, contents },
                    );
                    if !self.rtc.accepts(&input) {
                        continue;
                    }
                    self.rtc.handle_input(input)
                }
                Wake::App => {
                    if self.peer.app(&mut self.rtc) == Flow::Close {
                        debug!("webrtc {label}: closed by castd");
                        break;
                    }
                    Ok(())
                }
                Wake::Timeout => self.rtc.handle_input(Input::Timeout(Instant::now())),
                Wake::Stop => {
                    debug!("webrtc {label}: stopped (closed, or the server stops)");
                    break;
                }
                Wake::Gone => {
                    debug!("webrtc {label}: its datagram queue is gone");
                    break;
                }
            };
            if let Err(e) = result {
                info!("webrtc {label}: the connection failed: {e}");
                break;
            }
        }
        self.rtc.disconnect();
        // Flush what disconnecting sends (nothing with ICE-lite, but keep the invariant).
        let _ = self.drain().await;
        self.peer.closed();
        debug!("webrtc {label}: ended");
    }

    /// Drain `poll_output` to its timeout: send transmits, hand events to the peer. `None` when the
    /// session is over (the peer closed it, the remote disconnected, str0m failed).
    async fn drain(&mut self) -> Option<Instant> {
        let next = self.poll_all();
        self.flush().await;
        next
    }

    /// `drain` without the sending: the transmits wait in `out`.
    fn poll_all(&mut self) -> Option<Instant> {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => return Some(t),
                Ok(Output::Transmit(t)) => self.out.push((t.destination, t.contents.into())),
                Ok(Output::Event(e)) => {
                    let gone = matches!(e, Event::IceConnectionStateChange(IceConnectionState::Disconnected));
                    if gone {
                        info!("webrtc {}: the peer went away", self.label);
                    }
                    // Not `==`: str0m's PartialEq for Event is false for Connected.
                    if matches!(e, Event::Connected) {
                        self.connected = true;
                    }
                    if self.peer.event(&mut self.rtc, e) == Flow::Close || gone {
                        return None;
                    }
                }
                Err(e) => {
                    info!("webrtc {}: {e}", self.label);
                    return None;
                }
            }
        }
    }

    /// Send what `out` holds, `SEND_BATCH` messages a syscall; waits while the socket's send buffer
    /// is full. A datagram the kernel refuses (no route, say) is skipped, as a network would lose it.
    async fn flush(&mut self) {
        let mut sent = 0;
        while sent < self.out.len() {
            let rest = &self.out[sent..];
            let gso = GSO.load(Ordering::Relaxed);
            match self.socket.try_io(Interest::WRITABLE, || send_batch(self.socket.as_raw_fd(), rest, gso)) {
                Ok(n) => sent += n.max(1),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Err(e) = self.socket.writable().await {
                        debug!("webrtc {}: socket: {e}", self.label);
                        break;
                    }
                }
                Err(e) if gso && gso_group(rest, true) > 1 => {
                    // The path cannot take this group segmented (its MTU, or no segmentation offload
                    // at all): send it datagram by datagram; stop asking where the kernel has no GSO.
                    if matches!(e.raw_os_error(), Some(libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP)) {
                        info!("webrtc: UDP segmentation offload unavailable ({e}); sending datagram by datagram");
                        GSO.store(false, Ordering::Relaxed);
                    }
                    let one = gso_group(rest, false);
                    match self
                        .socket
                        .try_io(Interest::WRITABLE, || send_batch(self.socket.as_raw_fd(), &rest[..one], false))
                    {
                        Ok(n) => sent += n.max(1),
                        // Wait for room rather than retrying at once (which would spin).
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if let Err(e) = self.socket.writable().await {
                                debug!("webrtc {}: socket: {e}", self.label);
                                break;
                            }
                        }
                        Err(e) => {
                            debug!("webrtc {}: send to {}: {e}", self.label, rest[0].0);
                            sent += 1;
                        }
                    }
                }
                Err(e) => {
                    debug!("webrtc {}: send to {}: {e}", self.label, rest[0].0);
                    sent += 1;
                }
            }
        }
        self.out.clear();
    }
}

/// Whether to send runs of datagrams to one address as one UDP GSO message (`UDP_SEGMENT`: one trip
/// through the IP stack, the kernel or the NIC cuts it); off for good once the kernel says it cannot.
static GSO: AtomicBool = AtomicBool::new(true);
/// `UDP_SEGMENT` (linux/udp.h; not in the libc crate for glibc targets).
const UDP_SEGMENT: libc::c_int = 103;
/// Datagrams in one GSO message at most (the kernel's `UDP_MAX_SEGMENTS` is 64 or more).
const GSO_SEGMENTS: usize = 64;
/// Bytes of one GSO message at most (a UDP datagram's largest payload, with room to spare).
const GSO_BYTES: usize = 60_000;
/// iovecs for one `send_batch` (a GSO message takes one per datagram).
const SEND_IOVS: usize = 4 * SEND_BATCH;

/// How many datagrams from the start of `batch` go as one message: with `gso`, the run to the same
/// address whose datagrams are all as long as the first except the last, which may be shorter (what
/// the kernel cuts back into the same datagrams); else one.
fn gso_group(batch: &[(SocketAddr, Vec<u8>)], gso: bool) -> usize {
    let Some((to, first)) = batch.first() else { return 0 };
    if !gso {
        return 1;
    }
    let seg = first.len();
    let (mut n, mut bytes) = (1, seg);
    while let Some((next_to, next)) = batch.get(n) {
        if next_to != to || next.len() > seg || n == GSO_SEGMENTS || bytes + next.len() > GSO_BYTES {
            break;
        }
        n += 1;
        bytes += next.len();
        if next.len() < seg {
            break;
        }
    }
    n
}

/// `sendmmsg` of up to `SEND_BATCH` messages from `batch` on the UDP socket `fd` (with `gso`, a run of
/// datagrams to one address is one message, see `gso_group`): how many datagrams were sent (at least
/// one), or the error of the first message.
fn send_batch(fd: std::os::fd::RawFd, batch: &[(SocketAddr, Vec<u8>)], gso: bool) -> std::io::Result<usize> {
    // SAFETY: all-zero bytes are valid values of these plain C structs.
    let mut addrs: [libc::sockaddr_storage; SEND_BATCH] = unsafe { std::mem::zeroed() };
    let mut iovs: [libc::iovec; SEND_IOVS] = unsafe { std::mem::zeroed() };
    let mut msgs: [libc::mmsghdr; SEND_BATCH] = unsafe { std::mem::zeroed() };
    // One control message (UDP_SEGMENT, a u16) per message; u64s for cmsghdr's alignment.
    let mut controls = [[0u64; 4]; SEND_BATCH];
    let mut counts = [0usize; SEND_BATCH];
    let (mut m, mut i, mut iov) = (0, 0, 0);
    while i < batch.len() && m < SEND_BATCH {
        let n = gso_group(&batch[i..], gso).min(SEND_IOVS - iov);
        if n == 0 {
            break;
        }
        let len = write_sockaddr(&batch[i].0, &mut addrs[m]);
        for (k, (_, data)) in batch[i..i + n].iter().enumerate() {
            iovs[iov + k] = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
        }
        let hdr = &mut msgs[m].msg_hdr;
        hdr.msg_name = (&mut addrs[m] as *mut libc::sockaddr_storage).cast();
        hdr.msg_namelen = len;
        hdr.msg_iov = &mut iovs[iov];
        hdr.msg_iovlen = n;
        if n > 1 {
            let seg = u16::try_from(batch[i].1.len()).unwrap_or(u16::MAX);
            hdr.msg_control = controls[m].as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE is arithmetic; the buffer (32 bytes) holds one cmsghdr and a u16.
            hdr.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as libc::c_uint) } as usize;
            // SAFETY: msg_control/msg_controllen describe `controls[m]`, so CMSG_FIRSTHDR is non-null
            // and points into it, with room for the header and CMSG_LEN(2) bytes of data.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(hdr);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as libc::c_uint) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
            }
        }
        counts[m] = n;
        m += 1;
        i += n;
        iov += n;
    }
    // SAFETY: `msgs[..m]` point at `addrs`, `iovs` and `controls`, which point at live buffers of
    // `batch`; all outlive the call, and the kernel only reads them (it writes each `msg_len`).
    let rc = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), m as libc::c_uint, libc::MSG_DONTWAIT) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(counts[..rc as usize].iter().sum())
}

/// Write `addr` into `storage` as the kernel reads it; returns its length.
fn write_sockaddr(addr: &SocketAddr, storage: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in.
            let sin = unsafe { &mut *(storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in6.
            let sin6 = unsafe { &mut *(storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr { s6_addr: a.ip().octets() };
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch larger than `SEND_BATCH` to two receivers: one call sends `SEND_BATCH` datagrams,
    /// each arrives whole at the address it was for, in order.
    #[test]
    fn a_batch_goes_out_in_one_call_to_each_address() {
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (to_a, to_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let batch: Vec<(SocketAddr, Vec<u8>)> =
            (0..SEND_BATCH + 3).map(|i| (if i % 2 == 0 { to_a } else { to_b }, vec![i as u8; 100 + i])).collect();
        let n = send_batch(tx.as_raw_fd(), &batch, false).unwrap();
        assert_eq!(n, SEND_BATCH, "one call sends SEND_BATCH at most");
        let n2 = send_batch(tx.as_raw_fd(), &batch[n..], false).unwrap();
        assert_eq!(n2, 3);
        let mut buf = [0u8; 2048];
        for (i, (to, data)) in batch.iter().enumerate() {
            let sock = if *to == to_a { &a } else { &b };
            let (len, from) = sock.recv_from(&mut buf).unwrap();
            assert_eq!(from, tx.local_addr().unwrap());
            assert_eq!(&buf[..len], &data[..], "datagram {i}");
        }
    }

    /// IPv6 addresses are written the way the kernel reads them (where the machine has ::1).
    #[test]
    fn a_batch_reaches_an_ipv6_address() {
        let (Ok(tx), Ok(rx)) = (std::net::UdpSocket::bind("[::1]:0"), std::net::UdpSocket::bind("[::1]:0")) else {
            eprintln!("no IPv6 loopback here: skipped");
            return;
        };
        let batch = vec![(rx.local_addr().unwrap(), b"six".to_vec())];
        assert_eq!(send_batch(tx.as_raw_fd(), &batch, false).unwrap(), 1);
        let mut buf = [0u8; 16];
        let (len, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"six");
    }

    /// Runs to one address go as one GSO message each (equal datagrams, the last may be shorter);
    /// the receiver still gets every datagram whole, in order, as separate datagrams.
    #[test]
    fn gso_groups_runs_and_the_receiver_gets_each_datagram() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let d = |to, len: usize| (to, vec![0u8; len]);
        let batch = vec![d(a, 1200), d(a, 1200), d(a, 700), d(a, 1200), d(b, 1200), d(b, 1300), d(a, 100)];
        assert_eq!(gso_group(&batch, true), 3, "two full and a shorter last");
        assert_eq!(gso_group(&batch[3..], true), 1, "the address changes");
        assert_eq!(gso_group(&batch[4..], true), 1, "a longer datagram cannot follow");
        assert_eq!(gso_group(&batch, false), 1);
        let many = vec![d(a, 900); GSO_SEGMENTS + 5];
        assert_eq!(gso_group(&many, true), GSO_SEGMENTS);
        let big = vec![d(a, 1200); GSO_SEGMENTS];
        assert_eq!(gso_group(&big, true), GSO_BYTES / 1200, "at most GSO_BYTES in one message");

        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (to, to2) = (rx.local_addr().unwrap(), other.local_addr().unwrap());
        let msg = |to, i: u8, len: usize| (to, (0..len).map(|k| i.wrapping_add(k as u8)).collect::<Vec<u8>>());
        let batch =
            [msg(to, 1, 1200), msg(to, 2, 1200), msg(to, 3, 1200), msg(to, 4, 333), msg(to2, 5, 1200), msg(to, 6, 50)];
        let mut sent = 0;
        while sent < batch.len() {
            sent += send_batch(tx.as_raw_fd(), &batch[sent..], true).unwrap();
        }
        let mut buf = [0u8; 4096];
        for (i, (dest, data)) in batch.iter().enumerate() {
            let sock = if *dest == to { &rx } else { &other };
            let (len, _) = sock.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..len], &data[..], "datagram {i}");
        }
    }
}
