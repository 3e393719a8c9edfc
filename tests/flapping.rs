//! Publisher flapping: 50 connect / publish / disconnect cycles leave no growth in castd's file
//! descriptors, threads, worker processes, and only bounded growth of its resident memory.
//!
//! Each cycle is a real publish: ffmpeg sends a small pre-encoded clip (copied, no encoding) until the
//! stream is live and is then killed, and the test waits for the stream to go offline. castd runs one
//! passthrough variant, so each cycle costs a publish's life cycle, not an encode.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Server;

const CYCLES: usize = 50;
const KEY: &str = "flapping-key-1";

#[derive(Debug, Clone, Copy)]
struct Usage {
    fds: usize,
    threads: usize,
    rss_kb: u64,
    children: usize,
}

fn usage(pid: u32) -> Usage {
    let count = |p: String| std::fs::read_dir(p).map(|d| d.count()).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut children = 0;
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) {
            // pid (comm) state ppid ...
            let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or_default();
            if after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
                children += 1;
            }
        }
    }
    Usage { fds: count(format!("/proc/{pid}/fd")), threads: count(format!("/proc/{pid}/task")), rss_kb, children }
}

fn online(server: &Server) -> bool {
    server.get_json("/api/status")["online"].as_bool().unwrap_or(false)
}

fn wait(server: &Server, want: bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if online(server) == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// One publish: ffmpeg sends the clip (copied, in real time) until the stream is live, then is killed
/// (the connection drops as a crashing encoder's would); wait until the stream is offline.
fn cycle(server: &Server, clip: &Path) -> bool {
    let url = format!("rtmp://127.0.0.1:{}/live/{KEY}", server.rtmp_port.expect("rtmp port"));
    let mut ff = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-re", "-i"])
        .arg(clip)
        .args(["-c", "copy", "-f", "flv"])
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run ffmpeg");
    let started = Instant::now();
    let live = wait(server, true, Duration::from_secs(10));
    let went_live = started.elapsed();
    let _ = ff.kill();
    let _ = ff.wait();
    assert!(wait(server, false, Duration::from_secs(15)), "the stream did not end after the publisher left");
    if std::env::var_os("CASTD_FLAPPING_TRACE").is_some() {
        println!("cycle: live after {went_live:?}, offline {:?} after leaving", started.elapsed() - went_live);
    }
    live
}

#[test]
fn fifty_publish_cycles_leak_no_fds_threads_workers_or_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let clip = tmp.path().join("clip.flv");
    let made = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440", "-t", "5", "-c:v", "libx264", "-preset", "ultrafast"])
        .args(["-g", "30", "-c:a", "aac", "-f", "flv"])
        .arg(&clip)
        .status()
        .expect("run ffmpeg");
    assert!(made.success(), "making the clip");
    let server = Server::start_with_args(&["--streamkey", KEY]);
    // The publisher's life cycle is what is measured, not encoding: one passthrough variant keeps each
    // cycle short (the worker only remuxes the recording's second of media).
    server.set(
        "video/streamoutputvariants",
        serde_json::json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]),
    );
    let pid = server.pid().expect("pid");
    let started = Instant::now();
    // Warm up: the first publishes create what lives on (pools, caches, the worker binary's pages).
    for _ in 0..3 {
        cycle(&server, &clip);
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = usage(pid);
    let mut live = 0;
    let mut peak = before;
    for _ in 0..CYCLES {
        if cycle(&server, &clip) {
            live += 1;
        }
        let u = usage(pid);
        peak = Usage {
            fds: peak.fds.max(u.fds),
            threads: peak.threads.max(u.threads),
            rss_kb: peak.rss_kb.max(u.rss_kb),
            children: peak.children.max(u.children),
        };
    }
    std::thread::sleep(Duration::from_millis(1000));
    let after = usage(pid);
    println!(
        "flapping: {CYCLES} cycles ({live} went live) in {:.1} s; before {before:?}, after {after:?}, peak {peak:?}",
        started.elapsed().as_secs_f64()
    );
    assert!(live >= CYCLES * 9 / 10, "only {live} of {CYCLES} publishes went live");
    assert!(after.fds <= before.fds + 2, "file descriptors grew: {before:?} -> {after:?}");
    assert!(after.threads <= before.threads + 2, "threads grew: {before:?} -> {after:?}");
    assert!(after.children <= before.children, "worker processes left behind: {before:?} -> {after:?}");
    assert!(
        after.rss_kb <= before.rss_kb + 32 * 1024,
        "resident memory grew by more than 32 MiB: {before:?} -> {after:?}"
    );
    // Still serving.
    assert!(server.get("/api/status").status().is_success());
}
