//! Test harness: starts the real `castd` binary on port 0 with a temporary data dir and talks to it
//! over HTTP. Every integration test file does `mod common;` and uses `Server`.
#![allow(dead_code)]

pub mod chatclient;
pub mod fedactor;
pub mod media;
pub mod push;
pub mod receiver;
pub mod redis;
pub mod s3;
pub mod sdp;
pub mod slowproxy;
pub mod target;

#[allow(unused_imports)]
pub(crate) use target::{each_channel, each_channel_known_bug};
#[allow(unused_imports)]
pub use target::{Api, On, Target};

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_castd");

/// The daemon the harness starts: this build's, or `CASTD_TEST_BIN` (to show a test failing on an older
/// build: `CASTD_TEST_BIN=/path/to/old/castd cargo test --test NAME`).
pub fn daemon_bin() -> String {
    std::env::var("CASTD_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// A running castd.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub web_port: u16,
    /// The RTMP port, when the daemon reports one.
    pub rtmp_port: Option<u16>,
    /// The SRT port, when SRT is on (the harness turns it off unless a test passes `--srtport`).
    pub srt_port: Option<u16>,
    pub data_dir: PathBuf,
    /// Keeps a temporary data dir alive for the server's lifetime (None when the caller owns the dir).
    _tmp: Option<Arc<tempfile::TempDir>>,
    pub admin_password: String,
    pub log: Arc<Mutex<Vec<String>>>,
    pub client: Client,
    extra_args: Vec<String>,
    /// Environment variables given to the daemon (kept across `restart`).
    extra_env: Vec<(String, String)>,
    /// Whether the server keeps its default `allowPrivateTargets` (off) rather than the harness's on.
    default_targets: bool,
}

type Spawned = (Child, Arc<Mutex<Vec<String>>>, u16, Option<u16>, Option<u16>);

fn spawn(dir: &Path, extra: &[String], env: &[(String, String)]) -> Spawned {
    let mut cmd = Command::new(daemon_bin());
    cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.arg("--data-dir")
        .arg(dir)
        .args(["--webserverip", "127.0.0.1", "--webserverport", "0", "--rtmpport", "0", "--log-level"])
        // CASTD_TEST_LOG_LEVEL=debug (with CASTD_TEST_ECHO=1) shows a daemon's debug log while chasing a failure.
        .arg(std::env::var("CASTD_TEST_LOG_LEVEL").unwrap_or_else(|_| "info".into()))
        .args(extra)
        .env_remove("CASTD_STREAMKEY")
        .env_remove("CASTD_SRTPORT")
        .env_remove("CASTD_WEBRTC_UDP_PORT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SRT off unless the test asks for a port: parallel daemons would all want 8890.
    if !extra.iter().any(|a| a == "--srtport") {
        cmd.args(["--srtport", "0"]);
    }
    // WebRTC on an ephemeral UDP port unless the test names one: parallel daemons would all want 8189.
    if !extra.iter().any(|a| a == "--webrtc-udp-port") {
        cmd.args(["--webrtc-udp-port", "0"]);
    }
    let mut child = cmd.spawn().expect("start castd");
    let stderr = child.stderr.take().expect("stderr");
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let log2 = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if std::env::var_os("CASTD_TEST_ECHO").is_some() {
                eprintln!("[castd] {line}");
            }
            log2.lock().unwrap().push(line.clone());
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut web, mut rtmp, mut srt) = (None, None, None);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(_) => panic!("castd did not become ready; log:\n{}", log.lock().unwrap().join("\n")),
        };
        if let Some(rest) = line.split("web server listening on http://").nth(1) {
            web = rest.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        }
        if let Some(rest) = line.split("rtmp server listening on rtmp://").nth(1) {
            rtmp = rest.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        }
        if let Some(rest) = line.split("srt server listening on srt://").nth(1) {
            srt = rest.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        }
        if line.contains("castd is ready") {
            break;
        }
    }
    (child, log, web.expect("web port in log"), rtmp, srt)
}

impl Server {
    /// Start on a fresh temporary data dir.
    pub fn start() -> Server {
        Self::start_with_args(&[])
    }

    pub fn start_with_args(extra: &[&str]) -> Server {
        let tmp = Arc::new(tempfile::tempdir().expect("tempdir"));
        let dir = tmp.path().to_path_buf();
        let mut s = Self::start_in(&dir, extra);
        s._tmp = Some(tmp);
        s
    }

    /// Start on a fresh temporary data dir with extra environment variables (test/debug switches
    /// such as `CASTD_VIEWER_IDLE_SECS`).
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let tmp = Arc::new(tempfile::tempdir().expect("tempdir"));
        let dir = tmp.path().to_path_buf();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut s = Self::start_in_env(&dir, extra, env);
        s._tmp = Some(tmp);
        s
    }

    /// Start on `dir` (which the caller keeps).
    pub fn start_in(dir: &Path, extra: &[&str]) -> Server {
        Self::start_in_env(dir, extra, Vec::new())
    }

    /// Start on a fresh temporary data dir keeping the server's default `allowPrivateTargets` (off:
    /// channels' webhooks, hooks, JWKS, Discord and simulcast URLs reach only public addresses). Every
    /// other start turns it on as the server admin, since tests run their receivers on 127.0.0.1.
    pub fn start_with_default_targets(extra: &[&str]) -> Server {
        let tmp = Arc::new(tempfile::tempdir().expect("tempdir"));
        let dir = tmp.path().to_path_buf();
        let mut s = Self::start_in_mode(&dir, extra, Vec::new(), true);
        s._tmp = Some(tmp);
        s
    }

    fn start_in_env(dir: &Path, extra: &[&str], extra_env: Vec<(String, String)>) -> Server {
        Self::start_in_mode(dir, extra, extra_env, false)
    }

    fn start_in_mode(dir: &Path, extra: &[&str], extra_env: Vec<(String, String)>, default_targets: bool) -> Server {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, log, web_port, rtmp_port, srt_port) = spawn(dir, &extra, &extra_env);
        let pw_file = dir.join("initial-admin-password");
        let admin_password = std::fs::read_to_string(&pw_file).map(|s| s.trim().to_string()).unwrap_or_default();
        let server = Server {
            child: Some(child),
            base: format!("http://127.0.0.1:{web_port}"),
            web_port,
            rtmp_port,
            srt_port,
            data_dir: dir.to_path_buf(),
            _tmp: None,
            admin_password,
            log,
            client: Client::builder().timeout(Duration::from_secs(30)).build().unwrap(),
            extra_args: extra,
            extra_env,
            default_targets,
        };
        if !default_targets {
            server.allow_private_targets();
        }
        server
    }

    /// As the server admin, let channels' URLs reach loopback and private addresses (the test
    /// receivers listen on 127.0.0.1). Quiet when the daemon has no admin API to take it (an edge, a
    /// password the harness does not know): a test that needs it then fails on its own assertion.
    fn allow_private_targets(&self) {
        let flag = self.extra_args.iter().position(|a| a == "--adminpassword").and_then(|i| self.extra_args.get(i + 1));
        let password = if self.admin_password.is_empty() {
            flag.cloned().unwrap_or_default()
        } else {
            self.admin_password.clone()
        };
        let sent = self
            .client
            .post(self.url("/api/admin/config/allowprivatetargets"))
            .basic_auth("admin", Some(&password))
            .json(&serde_json::json!({ "value": true }))
            .send();
        match sent {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => eprintln!("[harness] allowprivatetargets not set: {}", r.status()),
            Err(e) => eprintln!("[harness] allowprivatetargets not set: {e}"),
        }
    }

    /// Stop with SIGTERM and start again on the same data dir.
    pub fn restart(mut self) -> Server {
        self.stop();
        let extra: Vec<&str> = self.extra_args.iter().map(String::as_str).collect();
        let env = std::mem::take(&mut self.extra_env);
        let mut next = Server::start_in_mode(&self.data_dir, &extra, env, self.default_targets);
        next.admin_password = self.admin_password.clone();
        next._tmp = self._tmp.take();
        next
    }

    /// SIGTERM, then wait (at most 20 s) for a clean exit; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        unsafe_kill(child.id(), 15);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("castd did not stop within 20 s after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).send().expect("GET")
    }

    pub fn get_json(&self, path: &str) -> Value {
        let r = self.get(path);
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().expect("json")
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Response {
        self.client.post(self.url(path)).json(body).send().expect("POST")
    }

    pub fn admin_get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).basic_auth("admin", Some(&self.admin_password)).send().expect("GET")
    }

    pub fn admin_json(&self, path: &str) -> Value {
        let r = self.admin_get(path);
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().expect("json")
    }

    pub fn admin_post(&self, path: &str, body: &Value) -> Response {
        self.client
            .post(self.url(path))
            .basic_auth("admin", Some(&self.admin_password))
            .json(body)
            .send()
            .expect("POST")
    }

    /// POST a setter and assert it succeeded.
    pub fn set(&self, name: &str, value: Value) {
        let r = self.admin_post(&format!("/api/admin/config/{name}"), &serde_json::json!({ "value": value }));
        let status = r.status();
        let text = r.text().unwrap_or_default();
        assert!(status.is_success(), "setting {name}: {status} {text}");
    }

    /// The log lines so far.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Poll `f` every 200 ms until it returns Some or `timeout` passes.
    pub fn wait_for<T>(&self, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = f() {
                return Some(v);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Send a signal with the `kill` command (no libc dependency in tests).
pub fn unsafe_kill(pid: u32, sig: i32) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}
