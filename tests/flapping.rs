//! Publisher flapping: 50 connect / publish / disconnect cycles leave no growth in castd's file
//! descriptors, threads, worker processes, and only bounded growth of its resident memory.
//!
//! Each cycle is a real publish: ffmpeg sends a small pre-encoded clip (copied, no encoding on its side)
//! until castd's transcode worker is running and the stream is live, and is then killed, and the test waits
//! for the stream to go offline. castd transcodes one small variant (160x90, x264 at the fastest preset), so
//! every cycle starts and stops a real worker process: the test checks that each cycle had a worker of its
//! own and that none is left behind.

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

/// The pids of `pid`'s transcode workers (`castd worker ...` children).
fn workers(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or_default();
        if after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) != Some(pid) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).nth(1) == Some(&b"worker"[..]) {
            out.push(child);
        }
    }
    out
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

/// What one publish saw: whether the stream went live, and the transcode worker that ran for it.
struct Cycle {
    live: bool,
    worker: Option<u32>,
}

/// One publish: ffmpeg sends the clip (copied, in real time) until the stream is live and castd's transcode
/// worker runs, then is killed (the connection drops as a crashing encoder's would); wait until the stream
/// is offline and its worker has exited.
fn cycle(server: &Server, clip: &Path) -> Cycle {
    let url = format!("rtmp://127.0.0.1:{}/live/{KEY}", server.rtmp_port.expect("rtmp port"));
    let castd = server.pid().expect("pid");
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
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut worker = None;
    while live && worker.is_none() && Instant::now() < deadline {
        worker = workers(castd).first().copied();
        if worker.is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = ff.kill();
    let _ = ff.wait();
    assert!(wait(server, false, Duration::from_secs(15)), "the stream did not end after the publisher left");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !workers(castd).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(workers(castd).is_empty(), "a transcode worker outlived its stream by 10 s");
    if std::env::var_os("CASTD_FLAPPING_TRACE").is_some() {
        println!(
            "cycle: live after {went_live:?}, worker {worker:?}, offline {:?} after",
            started.elapsed() - went_live
        );
    }
    Cycle { live, worker }
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
    // One small transcoded variant: each cycle starts and stops a real transcode worker.
    server.set(
        "video/streamoutputvariants",
        serde_json::json!([{
            "name": "low", "videoPassthrough": false, "audioPassthrough": true, "videoBitrate": 150,
            "scaledWidth": 160, "scaledHeight": 90, "framerate": 15, "cpuUsageLevel": 1
        }]),
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
    let mut seen_workers = std::collections::BTreeSet::new();
    let mut peak = before;
    for _ in 0..CYCLES {
        let c = cycle(&server, &clip);
        if c.live {
            live += 1;
            seen_workers.extend(c.worker);
        }
        let u = usage(pid);
        peak = Usage {
            fds: peak.fds.max(u.fds),
            threads: peak.threads.max(u.threads),
            rss_kb: peak.rss_kb.max(u.rss_kb),
            children: peak.children.max(u.children),
        };
    }
    // Settle: tokio's blocking-pool threads stay 10 s after their last job (a leak stays for good), so
    // wait up to 15 s for the thread and descriptor counts to come back before judging them.
    let settle = Instant::now();
    let mut after = usage(pid);
    while (after.threads > before.threads + 2 || after.fds > before.fds + 2)
        && settle.elapsed() < Duration::from_secs(15)
    {
        std::thread::sleep(Duration::from_millis(500));
        after = usage(pid);
    }
    println!(
        "flapping: {CYCLES} cycles ({live} went live, {} transcode workers) in {:.1} s; before {before:?}, \
         after {after:?}, peak {peak:?}",
        seen_workers.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(live >= CYCLES * 9 / 10, "only {live} of {CYCLES} publishes went live");
    // Every live cycle transcoded: a worker process of its own started (pids are not reused this quickly)
    // and, as `cycle` checks, exited with its stream.
    assert_eq!(seen_workers.len(), live, "{live} cycles went live but {} transcode workers ran", seen_workers.len());
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
