//! Zero-copy sending of files held in memory: what lets castd serve live segments with nginx's
//! `sendfile` economy while keeping them in memory.
//!
//! A segment loaded with [`MappedFile::load`] is the segment file itself mapped read-only into the
//! process (its pages are the page cache's: held in memory once, by the kernel, with no copy on the
//! heap) and exposed as ordinary `Bytes`, so the rest of the server (ETag, Range, HEAD, tests) sees no
//! difference. Every live mapping is listed in a process-wide table of address ranges with the open
//! file. The web server's connections are [`ZeroCopyStream`]s: when hyper writes a buffer that lies
//! inside a listed mapping, the stream asks the kernel to `sendfile` those bytes from the file
//! instead of copying them through `write` (half the CPU time of serving a 2 MB segment was that
//! copy). Anything else is written as usual. (An earlier version copied each segment into a sealed
//! memfd; `sendfile` from shmem's 4 KiB pages cost a fifth more CPU per segment than from the
//! filesystem's page cache, which nginx sends from.)
//!
//! Safety argument: a buffer hyper passes to `poll_write*` is borrowed from a `Bytes` it holds, so the
//! mapping it points into is alive for the duration of the call; a mapping is removed from the table
//! before it is unmapped (`Drop`), so a listed range always belongs to a live mapping. The file's
//! content does not change while it is mapped: castd writes each segment once, under a name never
//! reused, and only ever deletes segments (an unlinked file stays readable while mapped). Someone
//! truncating a live segment in the data directory by hand would make reads of the mapping fault,
//! as for any program that maps files.

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::body::Bytes;
use parking_lot::RwLock;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Live mappings by start address: (length, file).
static REGIONS: RwLock<BTreeMap<usize, (usize, RawFd)>> = RwLock::new(BTreeMap::new());
/// Number of entries in `REGIONS`, read without the lock (no mapping: nothing to look up).
static REGION_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The file and the mapping `(fd, offset)` of a buffer that lies wholly inside a live mapping.
fn lookup(buf: &[u8]) -> Option<(RawFd, usize)> {
    if buf.is_empty() || REGION_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let addr = buf.as_ptr() as usize;
    let regions = REGIONS.read();
    let (&start, &(len, fd)) = regions.range(..=addr).next_back()?;
    let offset = addr - start;
    (offset + buf.len() <= len).then_some((fd, offset))
}

/// A file mapped read-only (see the module doc).
pub struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is read-only and its file is not rewritten (module doc); sharing it between
// threads is sharing immutable memory.
unsafe impl Send for MappedFile {}
unsafe impl Sync for MappedFile {}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if REGIONS.write().remove(&(self.ptr as usize)).is_some() {
            REGION_COUNT.fetch_sub(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr`/`len` are the mapping made in `load`; no `Bytes` points into it any more.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

impl MappedFile {
    /// Map `path` read-only. Empty files come back as plain empty `Bytes`.
    pub fn load(path: &Path) -> io::Result<Bytes> {
        let file = std::fs::File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).map_err(|_| io::Error::other("file too large"))?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let fd = OwnedFd::from(file);
        // SAFETY: a read-only shared mapping of a descriptor this function owns, checked for failure.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        REGIONS.write().insert(ptr as usize, (len, fd.as_raw_fd()));
        REGION_COUNT.fetch_add(1, Ordering::Relaxed);
        Ok(Bytes::from_owner(MappedFile { ptr, len, fd }))
    }

    /// The mapped file's descriptor (for tests).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A TCP listener whose connections are [`ZeroCopyStream`]s (with `TCP_NODELAY`, as nginx sets for
/// keep-alive connections).
pub struct ZeroCopyListener(pub TcpListener);

impl axum::serve::Listener for ZeroCopyListener {
    type Io = ZeroCopyStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    return (ZeroCopyStream { inner: stream, sent: Arc::new(AtomicUsize::new(0)) }, addr);
                }
                // A connection that died before it was accepted: take the next one.
                Err(e) if is_connection_error(&e) => continue,
                // Out of descriptors and the like: wait instead of spinning (as axum does).
                Err(e) => {
                    tracing::error!("accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// A TCP connection that sends mapped files with `sendfile` (see the module doc).
pub struct ZeroCopyStream {
    inner: TcpStream,
    /// Bytes sent with `sendfile` on this connection (for tests).
    sent: Arc<AtomicUsize>,
}

impl ZeroCopyStream {
    /// The TCP stream (the chat websocket takes it over after the upgrade).
    pub fn into_inner(self) -> TcpStream {
        self.inner
    }

    fn poll_sendfile(&self, cx: &mut Context<'_>, fd: RawFd, offset: usize, len: usize) -> Poll<io::Result<usize>> {
        let sock = self.inner.as_raw_fd();
        loop {
            ready!(self.inner.poll_write_ready(cx))?;
            let sent = self.inner.try_io(Interest::WRITABLE, || {
                let mut off = libc::off_t::try_from(offset).map_err(|_| io::Error::other("offset too large"))?;
                // SAFETY: both descriptors are open (the socket is ours, the file belongs to a live
                // mapping, see the module doc); `off` is a valid out-parameter.
                let n = unsafe { libc::sendfile(sock, fd, &mut off, len) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            });
            match sent {
                Ok(n) => {
                    self.sent.fetch_add(n, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl ZeroCopyStream {
    fn poll_send_more(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let sock = self.inner.as_raw_fd();
        loop {
            ready!(self.inner.poll_write_ready(cx))?;
            let sent = self.inner.try_io(Interest::WRITABLE, || {
                // SAFETY: `msg` points at `bufs` (IoSlice is ABI-compatible with iovec) for the call.
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
                msg.msg_iovlen = bufs.len() as _;
                let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_MORE | libc::MSG_NOSIGNAL) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            });
            match sent {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncRead for ZeroCopyStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ZeroCopyStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if let Some((fd, offset)) = lookup(buf) {
            return self.poll_sendfile(cx, fd, offset, buf.len());
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Buffers before the first mapped one go out with writev; a mapped one goes alone with
        // sendfile. Either way the count returned is what was sent, so hyper resumes correctly.
        match bufs.iter().position(|b| lookup(b).is_some()) {
            Some(0) => {
                let Some((fd, offset)) = lookup(&bufs[0]) else { return Poll::Ready(Ok(0)) };
                self.poll_sendfile(cx, fd, offset, bufs[0].len())
            }
            // What precedes a mapped body (the response head) goes with MSG_MORE, so the kernel
            // sends it in the same packets as the body (nginx's `tcp_nopush` with sendfile).
            Some(n) => self.poll_send_more(cx, &bufs[..n]),
            None => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn mapped_bytes_are_the_file_and_are_listed_while_alive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.ts");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let bytes = MappedFile::load(&path).unwrap();
        assert_eq!(&bytes[..], &data[..]);
        let part = bytes.slice(10..2000);
        assert_eq!(lookup(&part).map(|(_, off)| off), Some(10));
        assert!(lookup(&data[..]).is_none(), "heap memory is not a mapping");
        let addr = part.as_ptr() as usize;
        drop(bytes);
        assert!(lookup(&part).is_some(), "a slice keeps the mapping alive");
        drop(part);
        assert!(REGIONS.read().range(..=addr).next_back().is_none_or(|(s, (l, _))| s + l <= addr));
        assert_eq!(
            MappedFile::load(&dir.path().join("missing")).err().map(|e| e.kind()),
            Some(io::ErrorKind::NotFound)
        );
    }

    #[tokio::test]
    async fn a_mapped_buffer_goes_out_with_sendfile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.ts");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let bytes = MappedFile::load(&path).unwrap();

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut zl = ZeroCopyListener(listener);
        let (mut stream, _) = axum::serve::Listener::accept(&mut zl).await;
        let sent = stream.sent.clone();
        let head = b"HEAD ".to_vec();
        let body = bytes.slice(1000..);
        let mut bufs = [IoSlice::new(&head), IoSlice::new(&body)];
        let mut slices: &mut [IoSlice] = &mut bufs;
        while !slices.is_empty() {
            let n = stream.write_vectored(slices).await.unwrap();
            IoSlice::advance_slices(&mut slices, n);
        }
        stream.shutdown().await.unwrap();
        drop(stream);
        let got = reader.await.unwrap();
        assert_eq!(&got[..5], b"HEAD ");
        assert_eq!(&got[5..], &data[1000..]);
        assert_eq!(sent.load(Ordering::Relaxed), data.len() - 1000, "the body went out with sendfile");
    }
}
