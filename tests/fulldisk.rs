//! Full disk: the HLS directory on a small tmpfs fills up during a live stream. castd stays up and
//! chat keeps working, health reports it, old segments are deleted, the stream resumes once there is
//! room again, and the database (on another filesystem) is unaffected.
//!
//! Needs root (to mount the tmpfs), as CI runs. Where it cannot run (not root, or no tmpfs can be mounted) it
//! fails with the reason, unless `CASTD_SKIP_FULLDISK=1` says to skip: then it prints SKIPPED, never "ok".
//! A test that passes without checking would be worse than none, so this file has its own `main` (no libtest
//! harness, `harness = false` in Cargo.toml), which can say "skipped".

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

const NAME: &str = "a_full_hls_directory_pauses_the_stream_and_nothing_else";

/// `cargo test` passes libtest's arguments: a name filter selects tests, `--list` lists them, flags are ignored.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{NAME}: test");
        return;
    }
    let exact = args.iter().any(|a| a == "--exact");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty()
        && !filters.iter().any(|f| if exact { f.as_str() == NAME } else { NAME.contains(f.as_str()) })
    {
        println!("\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out\n");
        return;
    }
    println!("\nrunning 1 test");
    let tmp = tempfile::tempdir().expect("temporary directory");
    let data = tmp.path().join("data");
    let hls = data.join("hls");
    let mount = if !is_root() {
        Err("mounting a tmpfs for the HLS directory needs root (CI runs as root)")
    } else {
        Tmpfs::mount(&hls, "6m").ok_or("cannot mount a tmpfs here (no privilege to mount in this container)")
    };
    match mount {
        Ok(_mount) => {
            a_full_hls_directory_pauses_the_stream_and_nothing_else(&data, &hls);
            println!("test {NAME} ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured\n");
        }
        Err(why) if std::env::var("CASTD_SKIP_FULLDISK").as_deref() == Ok("1") => {
            println!("test {NAME} ... SKIPPED (CASTD_SKIP_FULLDISK=1): {why}");
            println!("\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured\n");
        }
        Err(why) => {
            println!("test {NAME} ... FAILED\n\nfulldisk: cannot run: {why}. Set CASTD_SKIP_FULLDISK=1 to skip it.");
            println!("\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured\n");
            std::process::exit(101);
        }
    }
}

fn a_full_hls_directory_pauses_the_stream_and_nothing_else(data: &Path, hls: &Path) {
    let started = Instant::now();
    let server = Server::start_in(data, &["--streamkey", KEY]);
    let mut ff = publish(&server, KEY, "320x180", 60);
    wait_for(&server, "the first segments", Duration::from_secs(30), || segments(hls).len() >= 2);

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
        segments(hls).iter().any(|(_, m)| *m > freed_at)
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
