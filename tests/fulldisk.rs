//! Full disk: the HLS directory on a small tmpfs fills up during a live stream. castd stays up and
//! chat keeps working, health reports it, old segments are deleted, the stream resumes once there is
//! room again, and the database (on another filesystem) is unaffected.
//!
//! Needs root (to mount the tmpfs), as CI runs; elsewhere it says so and passes without checking.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use common::chatclient::{join, next_of, say};
use common::media::{publish, wait_exit};
use common::Server;
use serde_json::json;

const KEY: &str = "fulldisk-key-1";

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Uid:").map(|v| v.split_whitespace().next() == Some("0"))))
        .unwrap_or(false)
}

/// A tmpfs mounted on a directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Media segments under `dir`, with their modification times.
fn segments(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let mut out = Vec::new();
    for v in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(v.path()).into_iter().flatten().flatten() {
            let p = f.path();
            if p.extension().is_some_and(|e| e == "ts" || e == "m4s") {
                if let Ok(m) = f.metadata().and_then(|m| m.modified()) {
                    out.push((p, m));
                }
            }
        }
    }
    out
}

/// Fill the filesystem of `dir` with one file until writes fail.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0xa5u8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

fn health(server: &Server) -> String {
    server.admin_json("/api/admin/status")["health"].to_string()
}

fn wait_for(server: &Server, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    if server.wait_for(timeout, || f().then_some(())).is_none() {
        panic!("timed out waiting for {what}; castd's log:\n{}", server.log_text());
    }
}

fn chat_works(server: &Server, name: &str) {
    let mut c = join(server, name);
    say(&mut c.ws, &format!("still here {name}"));
    let got = next_of(&mut c.ws, "CHAT", Duration::from_secs(5)).expect("chat echo while the disk is full");
    assert!(got["body"].as_str().unwrap_or_default().contains("still here"));
}

#[test]
fn a_full_hls_directory_pauses_the_stream_and_nothing_else() {
    if !is_root() {
        println!("fulldisk: skipped: mounting the tmpfs for the HLS directory needs root (CI runs as root)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let hls = data.join("hls");
    let Some(_mount) = Tmpfs::mount(&hls, "6m") else {
        println!("fulldisk: skipped: cannot mount a tmpfs here (no mount namespace privileges)");
        return;
    };
    let started = Instant::now();
    let server = Server::start_in(&data, &["--streamkey", KEY]);
    let mut ff = publish(&server, KEY, "320x180", 60);
    wait_for(&server, "the first segments", Duration::from_secs(30), || segments(&hls).len() >= 2);

    // Fill the tmpfs.
    let filler = hls.join("filler");
    fill(&filler);
    wait_for(&server, "health to report the full HLS directory", Duration::from_secs(30), || {
        health(&server).contains("full")
    });
    assert!(server.log_text().contains("old segments deleted"), "no segments were pruned");
    assert!(server.get("/api/status").status().is_success(), "the daemon answers");
    chat_works(&server, "diskfull");
    // The database is on the data directory's filesystem: settings still save.
    server.set("streamtitle", json!("written while the HLS directory is full"));

    // Room again: the stream resumes with new segments and the alert clears.
    std::fs::remove_file(&filler).unwrap();
    let freed_at = SystemTime::now();
    wait_for(&server, "new segments after the space returned", Duration::from_secs(30), || {
        segments(&hls).iter().any(|(_, m)| *m > freed_at)
    });
    wait_for(&server, "the health alert to clear", Duration::from_secs(30), || !health(&server).contains("full"));
    assert_eq!(server.get_json("/api/status")["online"], true, "the broadcaster was kept");
    chat_works(&server, "diskback");
    assert_eq!(
        server.admin_json("/api/admin/serverconfig")["instanceDetails"]["streamTitle"],
        "written while the HLS directory is full"
    );
    let _ = ff.kill();
    wait_exit(&mut ff, Duration::from_secs(5));
    drop(server);
    let db = rusqlite::Connection::open(data.join("castd.db")).unwrap();
    let check: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    println!("fulldisk: filled, pruned, resumed in {:.1} s", started.elapsed().as_secs_f64());
}
