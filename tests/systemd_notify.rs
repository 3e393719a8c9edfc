//! The systemd side of the daemon, exercised the way systemd drives it: a real `NOTIFY_SOCKET` datagram
//! socket (READY=1 only once the web server answers, STATUS= with the stream state, WATCHDOG=1 at half of
//! WATCHDOG_USEC, STOPPING=1 on SIGTERM) and the journal log format (`JOURNAL_STREAM` naming stderr).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::BIN;

struct Notified {
    child: Child,
    sock: UnixDatagram,
    _dir: tempfile::TempDir,
}

impl Notified {
    /// Start castd on port 0 with `NOTIFY_SOCKET` pointing at a socket this test reads, plus `env`.
    fn start(env: &[(&str, String)]) -> Notified {
        let dir = tempfile::tempdir().unwrap();
        let sock_path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&sock_path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--webserverip", "127.0.0.1", "--webserverport", "0", "--rtmpport", "0"])
            .env("NOTIFY_SOCKET", &sock_path)
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        Notified { child, sock, _dir: dir }
    }

    /// The next datagram, split into its `KEY=value` lines.
    fn recv(&self) -> Vec<String> {
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).expect("a notification from castd");
        String::from_utf8_lossy(&buf[..n]).lines().map(str::to_string).collect()
    }

    /// Every datagram that arrives within `window`.
    fn collect(&self, window: Duration) -> Vec<Vec<String>> {
        let end = Instant::now() + window;
        let mut all = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return all;
            }
            self.sock.set_read_timeout(Some(left)).unwrap();
            let mut buf = [0u8; 4096];
            match self.sock.recv(&mut buf) {
                Ok(n) => all.push(String::from_utf8_lossy(&buf[..n]).lines().map(str::to_string).collect()),
                Err(_) => return all,
            }
        }
    }

    fn term(&mut self) -> i32 {
        common::unsafe_kill(self.child.id(), 15);
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait for the READY=1 datagram; returns it.
fn wait_ready(n: &Notified) -> Vec<String> {
    loop {
        let msg = n.recv();
        if msg.iter().any(|l| l == "READY=1") {
            return msg;
        }
    }
}

fn port_from_status(msg: &[String]) -> u16 {
    let status = msg.iter().find_map(|l| l.strip_prefix("STATUS=")).expect("STATUS= with READY=1");
    let rest = status.split("http://").nth(1).expect("listen URL in status");
    rest.split(';').next().unwrap().rsplit(':').next().unwrap().parse().expect("port")
}

#[test]
fn ready_after_listening_with_stream_state_then_stopping() {
    let mut n = Notified::start(&[]);
    let ready = wait_ready(&n);
    let status = ready.iter().find(|l| l.starts_with("STATUS=")).unwrap();
    assert!(status.starts_with("STATUS=listening on http://127.0.0.1:"), "{status}");
    assert!(status.ends_with("; stream offline"), "{status}");
    // READY=1 comes only after the web server is bound: the API answers right away.
    let port = port_from_status(&ready);
    let body: serde_json::Value =
        reqwest::blocking::get(format!("http://127.0.0.1:{port}/api/status")).unwrap().json().unwrap();
    assert_eq!(body["online"], false);
    // No watchdog was asked for, so none is sent.
    let extra = n.collect(Duration::from_millis(600));
    assert!(extra.iter().all(|m| !m.contains(&"WATCHDOG=1".to_string())), "{extra:?}");
    assert_eq!(n.term(), 0);
    let after = n.collect(Duration::from_millis(300));
    assert!(after.iter().any(|m| m.contains(&"STOPPING=1".to_string())), "no STOPPING=1 after SIGTERM: {after:?}");
}

#[test]
fn watchdog_pings_at_half_the_timeout() {
    // 400 ms timeout → a ping every 200 ms.
    let n = Notified::start(&[("WATCHDOG_USEC", "400000".into())]);
    wait_ready(&n);
    let msgs = n.collect(Duration::from_millis(1500));
    let pings = msgs.iter().filter(|m| m.contains(&"WATCHDOG=1".to_string())).count();
    assert!((5..=10).contains(&pings), "expected ~7 WATCHDOG=1 in 1.5 s, got {pings}: {msgs:?}");
}

#[test]
fn watchdog_meant_for_another_pid_is_ignored() {
    // A re-executed worker inherits WATCHDOG_USEC with the daemon's WATCHDOG_PID: it must not ping.
    let n = Notified::start(&[("WATCHDOG_USEC", "200000".into()), ("WATCHDOG_PID", "1".into())]);
    wait_ready(&n);
    let msgs = n.collect(Duration::from_millis(800));
    assert!(msgs.iter().all(|m| !m.contains(&"WATCHDOG=1".to_string())), "{msgs:?}");
}

/// Start castd with stderr on a pipe and read its log lines until "castd is ready".
fn log_lines(journal: bool) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(dir.path())
        .args(["--webserverip", "127.0.0.1", "--webserverport", "0", "--rtmpport", "0"])
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if journal {
        use std::os::unix::fs::MetadataExt;
        let fd = std::os::fd::OwnedFd::from(writer.try_clone().unwrap());
        let meta = std::fs::File::from(fd).metadata().unwrap();
        cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    }
    let mut child = cmd.stderr(writer).spawn().unwrap();
    drop(cmd);
    let mut lines = Vec::new();
    for line in BufReader::new(reader).lines() {
        let line = line.unwrap();
        let done = line.contains("castd is ready");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn logs_are_plain_lines_and_carry_priorities_for_the_journal() {
    let plain = log_lines(false);
    assert!(plain.iter().any(|l| l.contains("castd is ready")), "{plain:?}");
    assert!(plain.iter().all(|l| !l.contains('\x1b')), "ANSI colours on a pipe: {plain:?}");
    // Outside the journal: a timestamp first, no priority prefix.
    assert!(plain.iter().all(|l| l.as_bytes().first().is_some_and(u8::is_ascii_digit)), "{plain:?}");

    let journal = log_lines(true);
    assert!(journal.iter().all(|l| !l.contains('\x1b')), "{journal:?}");
    let ready = journal.iter().find(|l| l.contains("castd is ready")).unwrap();
    assert!(ready.starts_with("<6> INFO castd is ready") || ready.starts_with("<6>INFO castd is ready"), "{ready}");
    let warn = journal.iter().find(|l| l.contains("generated an admin password")).expect("first-start warning");
    assert!(warn.starts_with("<4>"), "warnings map to priority 4: {warn}");
    // No timestamp under the journal (it adds its own).
    assert!(journal.iter().all(|l| l.starts_with('<')), "{journal:?}");
}
