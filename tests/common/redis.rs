//! A real `redis-server` (Debian's) for the cluster tests: started on a free loopback port with its own
//! directory, with the append-only file on and fsynced on every write, so a restart on the same
//! directory keeps what it acknowledged (as a production Redis for castd is configured).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Redis {
    pub fn start() -> Redis {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let mut r = Redis { child: None, port, dir };
        r.spawn();
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (packaging/deps.sh installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.ping() {
            assert!(Instant::now() < deadline, "redis-server did not start on {}", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether it answers PING.
    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
    }

    /// SIGKILL (no shutdown save: what survives is what the append-only file has).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
