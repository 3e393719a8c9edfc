//! A slow network in front of a loopback server: a TCP proxy on 127.0.0.1 that holds every chunk a
//! client sends for a fixed delay before passing it on (answers come back at once). Used to make the
//! S3 server slow for castd's uploader. With no delay it is a stable address for a server that
//! restarts on another port (`retarget`), as the cluster test's origin.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct SlowProxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    upstream: Arc<AtomicU16>,
}

impl SlowProxy {
    /// Proxy `127.0.0.1:upstream`, delaying each client chunk (at most 16 KiB) by `delay`.
    pub fn start(upstream: u16, delay: Duration) -> SlowProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let upstream = Arc::new(AtomicU16::new(upstream));
        let target = upstream.clone();
        listener.set_nonblocking(true).expect("non-blocking accept");
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        if let Ok(server) = TcpStream::connect(("127.0.0.1", target.load(Ordering::Relaxed))) {
                            pipe(client, server, delay);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        SlowProxy { port, stop, upstream }
    }

    /// New connections go to `127.0.0.1:upstream` from now on.
    pub fn retarget(&self, upstream: u16) {
        self.upstream.store(upstream, Ordering::Relaxed);
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn pipe(client: TcpStream, server: TcpStream, delay: Duration) {
    let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else { return };
    let (mut s_read, mut c_write) = (server, client);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = c_read.read(&mut buf) {
            if n == 0 {
                break;
            }
            std::thread::sleep(delay);
            if s_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut s_read, &mut c_write);
        let _ = c_write.shutdown(Shutdown::Write);
    });
}
