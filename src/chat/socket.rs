//! The chat websocket's wire: the HTTP/1.1 upgrade, server frame encoding, and each connection's
//! [`Writer`], through which every byte the server sends on that socket goes.
//!
//! Why castd does not write through tungstenite's sink: one chat message goes to every socket, and
//! server frames are not masked, so the encoded frame is the same bytes for every client. The hub
//! encodes it once and its fan-out threads hand it to each connection's writer, which writes it to the
//! socket at once (a non-blocking write, no task woken, no per-client framing or queue). Only when a
//! socket's buffer is full is the rest queued; the connection's own task is then woken to drain the
//! queue as the socket becomes writable. Reading still goes through tungstenite (masking,
//! fragmentation, control frames, UTF-8, size limits); what tungstenite itself writes (pong and close
//! replies) goes through the same writer, so frames from the fan-out and from the reader never
//! interleave mid-frame.
//!
//! Invariant behind the direct writes: a write is only attempted directly (with a no-op waker) while
//! the queue is empty, and the connection task only waits for writability while it is not, so the
//! socket's write waker is never taken from the task that needs it.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Version};
use axum::response::Response;
use bytes::Bytes;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto::upgrade::downcast;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use crate::http::zerocopy::ZeroCopyStream;
use crate::http::ApiError;
use crate::tasks::{Stage, Tasks};

/// Writes (a frame, or a batch of room frames from the fan-out) a connection may have queued behind a
/// full socket before it counts as a slow consumer and is disconnected.
pub const MAX_QUEUED: usize = 256;
/// Frames written in one vectored write when draining the queue.
const MAX_IOV: usize = 64;

/// A ping with no payload.
pub const PING: Bytes = Bytes::from_static(&[0x89, 0x00]);
/// A close frame with no status (what the connection sends when it closes).
pub const CLOSE: Bytes = Bytes::from_static(&[0x88, 0x00]);

/// A server text frame (FIN, opcode 1, unmasked) carrying `payload`.
pub fn text_frame(payload: &[u8]) -> Bytes {
    let len = payload.len();
    let mut out = Vec::with_capacity(len + 10);
    out.push(0x81);
    if len < 126 {
        out.push(len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    Bytes::from(out)
}

/// A server close frame (unmasked) with `code` and `reason` (cut to the 123 bytes a control frame
/// may carry, at a character boundary).
pub fn close_frame(code: u16, reason: &str) -> Bytes {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let reason = &reason.as_bytes()[..end];
    let mut out = Vec::with_capacity(4 + reason.len());
    out.push(0x88);
    out.push((2 + reason.len()) as u8);
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(reason);
    Bytes::from(out)
}

/// The outcome of offering a frame to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Written to the socket.
    Sent,
    /// Queued behind earlier frames; the connection task drains it.
    Queued,
    /// The queue was full: the connection is now closed as a slow consumer.
    Slow,
    /// The connection is closed (or its socket failed); nothing was sent.
    Closed,
}

/// Where a connection's bytes go.
pub enum Sink {
    /// The TCP socket itself (the daemon's listener): a direct write is one non-blocking `send(2)` on
    /// its descriptor, without tokio's readiness bookkeeping (tokio only treats readiness as a hint:
    /// a drain that finds the socket full after all re-arms it).
    Tcp { fd: RawFd, half: OwnedWriteHalf },
    /// Any other transport (the router served over another listener).
    Other(Box<dyn AsyncWrite + Send + Unpin>),
}

impl Sink {
    pub fn tcp(half: OwnedWriteHalf) -> Self {
        // Kept beside the half: reading it through the stream costs a cache miss per write.
        Sink::Tcp { fd: half.as_ref().as_raw_fd(), half }
    }

    /// Write without waiting: `Pending` when the socket is full.
    fn try_write(&mut self, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            &mut Sink::Tcp { fd, .. } => {
                loop {
                    // SAFETY: `fd` is the open socket `half` owns; `buf` is valid for `buf.len()` bytes.
                    let n = unsafe {
                        libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                    };
                    if let Ok(n) = usize::try_from(n) {
                        return Poll::Ready(Ok(n));
                    }
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::Interrupted => continue,
                        io::ErrorKind::WouldBlock => return Poll::Pending,
                        _ => return Poll::Ready(Err(e)),
                    }
                }
            }
            Sink::Other(io) => Pin::new(io).poll_write(&mut Context::from_waker(Waker::noop()), buf),
        }
    }

    fn poll_write_vectored(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self {
            Sink::Tcp { half, .. } => Pin::new(half).poll_write_vectored(cx, bufs),
            Sink::Other(io) => Pin::new(io).poll_write_vectored(cx, bufs),
        }
    }
}

struct State {
    /// The socket's write side; `None` once the connection is closed.
    io: Option<Sink>,
    /// Whole frames (the first possibly partly written) waiting for the socket.
    queue: VecDeque<Bytes>,
    /// Close the connection once the queue is drained.
    closing: bool,
    /// The connection task while it waits in `drain` for the socket: woken when the connection is
    /// closed from elsewhere (slow consumer, kill), as the socket may never become writable.
    drainer: Option<Waker>,
}

impl State {
    /// Drop the socket's write side and the queue; the caller wakes the returned drainer.
    fn close(&mut self) -> Option<Waker> {
        self.io = None;
        self.queue.clear();
        self.drainer.take()
    }

    /// See [`Writer::offer`]; the caller wakes the connection task unless the frame was sent. The
    /// frame is borrowed and only cloned when it must wait: one broadcast frame is offered to every
    /// client from several threads, and a clone per client would bounce its reference count between
    /// them.
    fn offer(&mut self, frame: &Bytes) -> Offer {
        let Some(io) = self.io.as_mut() else { return Offer::Closed };
        if !self.queue.is_empty() {
            if self.queue.len() >= MAX_QUEUED {
                if let Some(w) = self.close() {
                    w.wake();
                }
                return Offer::Slow;
            }
            self.queue.push_back(frame.clone());
            return Offer::Queued;
        }
        let mut written = 0;
        while written < frame.len() {
            match io.try_write(&frame[written..]) {
                Poll::Ready(Ok(n)) if n > 0 => written += n,
                Poll::Ready(_) => {
                    // Nothing is queued, so no drainer waits.
                    self.io = None;
                    return Offer::Closed;
                }
                Poll::Pending => break,
            }
        }
        if written == frame.len() {
            return Offer::Sent;
        }
        self.queue.push_back(frame.slice(written..));
        Offer::Queued
    }
}

/// Everything the server writes on one websocket (see the module docs).
pub struct Writer {
    state: Mutex<State>,
    /// Wakes the connection task: frames were queued, or the connection was closed or asked to close.
    pub wake: Notify,
}

impl Writer {
    pub fn new(io: Sink) -> Self {
        let state = State { io: Some(io), queue: VecDeque::new(), closing: false, drainer: None };
        Self { state: Mutex::new(state), wake: Notify::new() }
    }

    /// Send `frame` (one or more whole frames): at once when nothing is queued and the socket takes it,
    /// else behind the queue. A full queue closes the connection (slow consumer).
    pub fn offer(&self, frame: &Bytes) -> Offer {
        let mut st = self.state.lock();
        if st.closing {
            return Offer::Closed;
        }
        let offer = st.offer(frame);
        drop(st);
        if offer != Offer::Sent {
            self.wake.notify_one();
        }
        offer
    }

    /// Write the queue out, waiting for the socket as needed. Err once the connection is closed or
    /// its socket fails. The caller bounds it with its write timeout.
    pub async fn drain(&self) -> io::Result<()> {
        poll_fn(|cx| {
            let mut st = self.state.lock();
            let state = &mut *st;
            loop {
                let Some(io) = state.io.as_mut() else {
                    return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
                };
                if state.queue.is_empty() {
                    state.drainer = None;
                    return Poll::Ready(Ok(()));
                }
                let slices: Vec<IoSlice<'_>> = state.queue.iter().take(MAX_IOV).map(|f| IoSlice::new(f)).collect();
                let n = match io.poll_write_vectored(cx, &slices) {
                    Poll::Pending => {
                        if !state.drainer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            state.drainer = Some(cx.waker().clone());
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(n)) if n > 0 => n,
                    Poll::Ready(result) => {
                        state.close();
                        let e = result.err().unwrap_or_else(|| io::ErrorKind::WriteZero.into());
                        return Poll::Ready(Err(e));
                    }
                };
                drop(slices);
                advance(&mut state.queue, n);
            }
        })
        .await
    }

    /// Queue a close frame and close once everything before it is written.
    pub fn finish(&self) {
        self.finish_with(&CLOSE);
    }

    /// Queue `close` (a close frame, [`close_frame`]) and close once everything before it is written.
    pub fn finish_with(&self, close: &Bytes) {
        {
            let mut st = self.state.lock();
            if st.closing {
                return;
            }
            st.closing = true;
            st.offer(close);
        }
        self.wake.notify_one();
    }

    /// Whether `finish` was called and the queue is now empty (time to close the socket).
    pub fn finished(&self) -> bool {
        let st = self.state.lock();
        st.closing && st.queue.is_empty()
    }

    /// Close at once: drop what is queued and the socket's write side.
    pub fn kill(&self) {
        let drainer = self.state.lock().close();
        if let Some(w) = drainer {
            w.wake();
        }
        self.wake.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().io.is_none()
    }

    /// Whether writes go straight to the TCP socket's descriptor (the daemon's listener) rather than
    /// through a split stream.
    pub fn is_direct(&self) -> bool {
        matches!(self.state.lock().io, Some(Sink::Tcp { .. }))
    }
}

/// Drop `n` written bytes from the front of the queue.
fn advance(queue: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = queue.front_mut() else { return };
        if n >= front.len() {
            n -= front.len();
            queue.pop_front();
        } else {
            *front = front.slice(n..);
            return;
        }
    }
}

/// The socket as tungstenite sees it: reads from the connection, writes through its [`Writer`].
pub struct Io {
    read: Box<dyn AsyncRead + Send + Unpin>,
    writer: std::sync::Arc<Writer>,
}

impl AsyncRead for Io {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for Io {
    /// tungstenite writes whole frames (pong and close replies) from its buffer; each call is taken
    /// whole, so a frame is never split around one from the fan-out.
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.writer.offer(&Bytes::copy_from_slice(buf)) {
            Offer::Sent | Offer::Queued => Poll::Ready(Ok(buf.len())),
            Offer::Slow | Offer::Closed => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A chat websocket: tungstenite for reading, the writer for writing.
pub type Socket = WebSocketStream<Io>;

/// The `/ws` upgrade request, checked as axum's `WebSocketUpgrade` checks it (HTTP/1.1 only; castd
/// does not serve HTTP/2).
pub struct Upgrade {
    key: HeaderValue,
    on_upgrade: hyper::upgrade::OnUpgrade,
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        if parts.version != Version::HTTP_11 || parts.method != Method::GET {
            return Err(ApiError::bad("a websocket upgrade is an HTTP/1.1 GET"));
        }
        if !has_token(&parts.headers, header::CONNECTION, "upgrade")
            || !has_token(&parts.headers, header::UPGRADE, "websocket")
        {
            return Err(ApiError::bad("the request does not ask for a websocket upgrade"));
        }
        if parts.headers.get(header::SEC_WEBSOCKET_VERSION).is_none_or(|v| v != "13") {
            return Err(ApiError::bad("Sec-WebSocket-Version must be 13"));
        }
        let key = parts
            .headers
            .get(header::SEC_WEBSOCKET_KEY)
            .cloned()
            .ok_or_else(|| ApiError::bad("Sec-WebSocket-Key is missing"))?;
        let on_upgrade = parts
            .extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .ok_or_else(|| ApiError::bad("this connection cannot be upgraded"))?;
        Ok(Self { key, on_upgrade })
    }
}

impl Upgrade {
    /// Answer 101 and run `f` on the socket once the upgrade completes (a task of the `Connections`
    /// stage: the socket ends with its close frame).
    pub fn on_upgrade<F, Fut>(self, tasks: &Tasks, config: WebSocketConfig, f: F) -> Response
    where
        F: FnOnce(Socket, std::sync::Arc<Writer>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(self.key.as_bytes());
        let on_upgrade = self.on_upgrade;
        tasks.spawn(Stage::Connections, "chat socket", async move {
            let upgraded = match on_upgrade.await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!("websocket upgrade failed: {e}");
                    return;
                }
            };
            let (read, sink) = split(upgraded);
            let writer = std::sync::Arc::new(Writer::new(sink));
            let io = Io { read, writer: writer.clone() };
            let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            f(socket, writer).await;
        });
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(v) = HeaderValue::from_str(&accept) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
        }
        response
    }
}

/// The upgraded connection's read side and its sink: the TCP socket itself when the connection came
/// from the daemon's listener, else the upgraded stream split in two.
fn split(upgraded: Upgraded) -> (Box<dyn AsyncRead + Send + Unpin>, Sink) {
    match downcast::<TokioIo<ZeroCopyStream>>(upgraded) {
        Ok(parts) => {
            let (read, write) = parts.io.into_inner().into_inner().into_split();
            if parts.read_buf.is_empty() {
                return (Box::new(read), Sink::tcp(write));
            }
            // Bytes the HTTP parser had read past the request come first (copied: `read_buf` shares the
            // parser's whole buffer).
            let early = Bytes::copy_from_slice(&parts.read_buf);
            (Box::new(std::io::Cursor::new(early).chain(read)), Sink::tcp(write))
        }
        Err(upgraded) => {
            let (read, write) = tokio::io::split(TokioIo::new(upgraded));
            (Box::new(read), Sink::Other(Box::new(write)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    #[test]
    fn frames_are_encoded_with_the_right_length_form() {
        assert_eq!(&text_frame(b"hi")[..], &[0x81, 2, b'h', b'i']);
        let mid = text_frame(&[b'a'; 300]);
        assert_eq!(&mid[..4], &[0x81, 126, 1, 44]);
        assert_eq!(mid.len(), 304);
        let big = text_frame(&vec![b'b'; 70_000]);
        assert_eq!(&big[..2], &[0x81, 127]);
        assert_eq!(u64::from_be_bytes(big[2..10].try_into().unwrap()), 70_000);
        assert_eq!(big.len(), 70_010);
    }

    #[test]
    fn advance_drops_whole_frames_and_slices_the_partial_one() {
        let mut q: VecDeque<Bytes> = ["abc", "de", "fgh"].iter().map(|s| Bytes::from_static(s.as_bytes())).collect();
        advance(&mut q, 4);
        assert_eq!(q.iter().map(|b| &b[..]).collect::<Vec<_>>(), vec![&b"e"[..], b"fgh"]);
        advance(&mut q, 4);
        assert!(q.is_empty());
    }

    /// A connected pair (the writing side first) with small, fixed socket buffers (setting them turns
    /// the kernel's autotuning off: the reader's receive buffer through the listener, whose accepted
    /// socket inherits it), so how much fits in flight does not depend on the machine's `tcp_rmem` /
    /// `tcp_wmem` (a box with a 32 MB receive maximum took all 4 MB the test sent without queueing).
    async fn small_buffered_pair() -> (TcpStream, TcpStream) {
        let listening = tokio::net::TcpSocket::new_v4().unwrap();
        listening.set_recv_buffer_size(64 * 1024).unwrap();
        listening.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = listening.listen(8).unwrap();
        let writing = tokio::net::TcpSocket::new_v4().unwrap();
        writing.set_send_buffer_size(64 * 1024).unwrap();
        let server = writing.connect(listener.local_addr().unwrap()).await.unwrap();
        let (client, _) = listener.accept().await.unwrap();
        (server, client)
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (server, client)
    }

    /// Every frame arrives whole and in order, the close frame last, whether it went out at once or
    /// through the queue and a drain.
    async fn frames_arrive_in_order(sink: Sink, mut client: TcpStream) {
        let writer = std::sync::Arc::new(Writer::new(sink));
        let frames: Vec<Bytes> = (0..200u32).map(|i| text_frame(&vec![(i % 250) as u8; 20_000])).collect();
        let expected: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        let drainer = {
            let writer = writer.clone();
            tokio::spawn(async move {
                loop {
                    writer.wake.notified().await;
                    if writer.drain().await.is_err() {
                        return;
                    }
                    if writer.finished() {
                        writer.kill();
                        return;
                    }
                }
            })
        };
        let mut queued = 0;
        for f in frames {
            match writer.offer(&f) {
                Offer::Sent => {}
                Offer::Queued => queued += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(queued > 0, "4 MB without a reader fill the socket buffers");
        writer.finish();
        assert_eq!(writer.offer(&text_frame(b"late")), Offer::Closed, "nothing goes after the close frame");
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap_or_default();
        drainer.await.unwrap();
        assert_eq!(got.len(), expected.len() + CLOSE.len());
        assert!(got[..expected.len()] == expected[..], "frames arrive whole and in order");
        assert_eq!(&got[expected.len()..], &CLOSE[..]);
    }

    #[tokio::test]
    async fn a_tcp_sink_delivers_every_frame_through_queue_and_drain() {
        let (server, client) = small_buffered_pair().await;
        let (_read, write) = server.into_split();
        frames_arrive_in_order(Sink::tcp(write), client).await;
    }

    #[tokio::test]
    async fn any_other_sink_delivers_every_frame_through_queue_and_drain() {
        let (server, client) = small_buffered_pair().await;
        frames_arrive_in_order(Sink::Other(Box::new(server)), client).await;
    }

    #[tokio::test]
    async fn a_client_that_never_reads_is_dropped_as_a_slow_consumer_and_its_drain_ends() {
        let (server, _client) = pair().await;
        let writer = std::sync::Arc::new(Writer::new(Sink::tcp(server.into_split().1)));
        let frame = text_frame(&[b'x'; 4_000]);
        let mut outcome = Offer::Sent;
        while outcome == Offer::Sent {
            outcome = writer.offer(&frame);
        }
        assert_eq!(outcome, Offer::Queued, "the socket buffer filled up");
        // The connection task waits in `drain` for a socket that never drains ...
        let drain = tokio::spawn({
            let writer = writer.clone();
            async move { writer.drain().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!drain.is_finished());
        for _ in 0..MAX_QUEUED * 2 {
            outcome = writer.offer(&frame);
            if outcome == Offer::Slow {
                break;
            }
        }
        assert_eq!(outcome, Offer::Slow);
        assert!(writer.is_closed());
        assert_eq!(writer.offer(&frame), Offer::Closed);
        // ... and is let go at once when the connection is dropped as a slow consumer.
        let drained = tokio::time::timeout(Duration::from_secs(1), drain).await.expect("drain ends").unwrap();
        assert!(drained.is_err());
    }

    #[tokio::test]
    async fn kill_ends_a_waiting_drain() {
        let (server, _client) = pair().await;
        let writer = std::sync::Arc::new(Writer::new(Sink::tcp(server.into_split().1)));
        while writer.offer(&text_frame(&[b'y'; 8_000])) == Offer::Sent {}
        let drain = tokio::spawn({
            let writer = writer.clone();
            async move { writer.drain().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.kill();
        let drained = tokio::time::timeout(Duration::from_secs(1), drain).await.expect("drain ends").unwrap();
        assert!(drained.is_err());
    }

    /// Served by the daemon's own listener, an upgrade takes the TCP socket itself (the direct path
    /// the fan-out relies on), talks websocket both ways, and a request that is no upgrade gets a
    /// `StatusResponse` 400.
    #[tokio::test]
    async fn the_daemons_listener_gives_an_upgrade_its_tcp_socket() {
        use axum::response::IntoResponse;
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<bool>(1);
        let handler = move |up: Result<Upgrade, ApiError>| {
            let tx = tx.clone();
            async move {
                let up = match up {
                    Ok(up) => up,
                    Err(e) => return e.into_response(),
                };
                up.on_upgrade(&Tasks::new(), WebSocketConfig::default(), move |mut socket, writer| async move {
                    let _ = tx.send(writer.is_direct()).await;
                    writer.offer(&text_frame(b"hello"));
                    if let Some(Ok(Message::Text(t))) = socket.next().await {
                        writer.offer(&text_frame(format!("echo {t}").as_bytes()));
                    }
                    writer.finish();
                    let _ = writer.drain().await;
                })
            }
        };
        let app = axum::Router::new().route("/ws", axum::routing::get(handler));
        tokio::spawn(async move { axum::serve(crate::http::zerocopy::ZeroCopyListener(listener), app).await });

        let plain = reqwest::get(format!("http://{addr}/ws")).await.unwrap();
        assert_eq!(plain.status().as_u16(), 400);
        let body: serde_json::Value = plain.json().await.unwrap();
        assert_eq!(body["success"], false);

        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws")).await.unwrap();
        assert_eq!(rx.recv().await, Some(true), "the upgrade writes to the TCP socket directly");
        assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("hello"));
        ws.send(Message::text("me")).await.unwrap();
        assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("echo me"));
        assert!(matches!(ws.next().await, Some(Ok(Message::Close(_)))), "the close frame ends it");
    }
}
