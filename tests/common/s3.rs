//! A real S3 server for tests: `s3s-fs` (installed by `packaging/deps.sh`) on 127.0.0.1 over a
//! temporary folder, checking SigV4 signatures with a key pair. `public()` starts a second instance on
//! the same folder without credentials: anonymous reads of the same bucket, as a public-read bucket or
//! a CDN in front of it would give.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ACCESS_KEY: &str = "castdtestaccess";
pub const SECRET_KEY: &str = "castd-test-secret-0123456789";
pub const BUCKET: &str = "castd";

/// A running s3s-fs.
pub struct S3Server {
    child: Option<Child>,
    pub port: u16,
    pub root: PathBuf,
    credentials: bool,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn spawn(root: &Path, port: u16, credentials: bool) -> Child {
    let mut cmd = Command::new("s3s-fs");
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()]);
    if credentials {
        cmd.args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY]);
    }
    let child = cmd
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run s3s-fs (packaging/deps.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "s3s-fs did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

impl S3Server {
    /// Start on `root` (created, with the bucket folder) with the test key pair.
    pub fn start(root: &Path) -> S3Server {
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket folder");
        let port = free_port();
        S3Server { child: Some(spawn(root, port, true)), port, root: root.to_path_buf(), credentials: true }
    }

    /// A second instance on the same folder that answers anonymous requests.
    pub fn public(&self) -> S3Server {
        let port = free_port();
        S3Server { child: Some(spawn(&self.root, port, false)), port, root: self.root.clone(), credentials: false }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kill it (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same port and folder.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Some(spawn(&self.root, self.port, self.credentials));
    }

    /// The keys under `prefix` (anonymous ListObjectsV2; use on a `public()` instance).
    pub fn list(&self, client: &reqwest::blocking::Client, prefix: &str) -> Vec<String> {
        let url = format!("{}/{BUCKET}?list-type=2&prefix={prefix}", self.endpoint());
        let text = client.get(url).send().and_then(|r| r.text()).unwrap_or_default();
        text.split("<Key>").skip(1).filter_map(|s| s.split("</Key>").next()).map(str::to_string).collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}
