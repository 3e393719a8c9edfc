//! Publisher flapping: 50 connect / publish / disconnect cycles leave no growth in castd's file
//! descriptors, threads, worker processes, and only bounded growth of its resident memory.
//!
//! Each cycle replays a recorded ffmpeg RTMP publish (`tests/fuzz/corpus/rtmp/ffmpeg-publish`, the
//! bytes ffmpeg sent: handshake, connect, publish with the key `fuzzkey1234`, ~1 s of H.264/AAC) over a
//! fresh TCP connection, waits for the stream to go live, then drops the connection.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Server;

const CYCLES: usize = 50;
const KEY: &str = "fuzzkey1234";

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

/// One publish: replay the recording, wait until live, disconnect, wait until offline.
fn cycle(server: &Server, recording: &[u8]) -> bool {
    let port = server.rtmp_port.expect("rtmp port");
    let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect to RTMP");
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut sink = [0u8; 16 * 1024];
    // Interleave writes with reads of the answers so neither side's buffers fill up.
    for chunk in recording.chunks(4096) {
        if sock.write_all(chunk).is_err() {
            break;
        }
        let _ = sock.read(&mut sink);
    }
    let live = wait(server, true, Duration::from_secs(10));
    drop(sock);
    assert!(wait(server, false, Duration::from_secs(15)), "the stream did not end after the publisher left");
    live
}

#[test]
#[ignore = "not yet passing: a cycle takes far longer than planned (run with --ignored)"]
fn fifty_publish_cycles_leak_no_fds_threads_workers_or_memory() {
    let recording =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz/corpus/rtmp/ffmpeg-publish")).unwrap();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let pid = server.pid().expect("pid");
    let started = Instant::now();
    // Warm up: the first publishes create what lives on (pools, caches, the worker binary's pages).
    for _ in 0..3 {
        cycle(&server, &recording);
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = usage(pid);
    let mut live = 0;
    let mut peak = before;
    for _ in 0..CYCLES {
        if cycle(&server, &recording) {
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
