//! Chat fan-out load generator (bench/chat): N listening websocket clients plus 20 senders that
//! each send one stamped message a second (so no per-client rate limit is touched), against castd
//! (`--target castd`, registering users first) or the naive anchor hub (`--target anchor`).
//! Latency = receive time − send stamp, at every listening client; the server's CPU time over the
//! send window and its RSS growth per connection are read from /proc/<pid>.
//!
//! Usage: chat-load --target castd|anchor --addr 127.0.0.1:PORT --clients N --pid PID
//!        [--senders 20] [--seconds 20] [--threads 2]
//!
//! A cluster (bench/cluster): `--addr A,B,C --pid P1,P2,P3`: listeners and senders are spread over
//! the nodes in turn (users registered on the first); CPU and RSS are the nodes' sums.
//!
//! castd limits chat sockets and registrations per client address, so the clients come from many
//! loopback addresses (127.1.0.0 onwards, `PER_ADDRESS` to an address), as viewers come from many hosts.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{watch, Semaphore};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// (utime + stime) in clock ticks, RSS in KiB, summed over the processes.
fn proc_stats(pids: &[u32]) -> (u64, u64) {
    pids.iter().map(|p| proc_stats_of(*p)).fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

fn proc_stats_of(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (ticks, rss)
}

fn stamps(text: &str, now: u64, out: &mut Vec<u32>) {
    let mut rest = text;
    while let Some(i) = rest.find("bench:") {
        rest = &rest[i + 6..];
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if let Ok(sent) = rest[..end].parse::<u64>() {
            out.push(now.saturating_sub(sent).min(u32::MAX as u64) as u32);
        }
        rest = &rest[end..];
    }
}

/// Clients per loopback address (castd allows 20 chat sockets and a burst of 20 registrations each).
const PER_ADDRESS: usize = 10;

/// The loopback address the `i`th client connects from.
fn source(i: usize) -> IpAddr {
    let n = u32::try_from(i / PER_ADDRESS).unwrap_or(u32::MAX).min(0x00fe_ffff);
    IpAddr::from(0x7f01_0000u32.wrapping_add(n).to_be_bytes())
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A websocket to `url` (on `at`, `HOST:PORT`) from the address `from`.
async fn connect(url: String, at: &str, from: IpAddr) -> Result<Ws, String> {
    let Ok(to) = at.parse::<SocketAddr>() else {
        return tokio_tungstenite::connect_async_with_config(url, Some(config()), false)
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| e.to_string());
    };
    let sock = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    sock.bind(SocketAddr::new(from, 0)).map_err(|e| e.to_string())?;
    let tcp = sock.connect(to).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
    tokio_tungstenite::client_async_with_config(url, stream, Some(config()))
        .await
        .map(|(ws, _)| ws)
        .map_err(|e| e.to_string())
}

async fn register(addr: &str, name: &str, from: IpAddr) -> String {
    let client = reqwest::Client::builder().local_address(from).build().expect("client");
    let v: serde_json::Value = client
        .post(format!("http://{addr}/api/chat/register"))
        .json(&serde_json::json!({ "displayName": name }))
        .send()
        .await
        .expect("register")
        .json()
        .await
        .expect("register json");
    v["accessToken"].as_str().expect("token").to_string()
}

fn config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(8 * 1024).write_buffer_size(0)
}

fn main() {
    // The load generator's own threads (2 by default): bench/cluster gives it 2 per node, so the
    // cluster's 3 x N clients are read as fast as one node's N.
    let threads: usize = arg("--threads").and_then(|v| v.parse().ok()).unwrap_or(2).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let target = arg("--target").unwrap_or_else(|| "castd".into());
    let addrs: Vec<String> = arg("--addr").expect("--addr HOST:PORT").split(',').map(str::to_string).collect();
    let addr = addrs[0].clone();
    let clients: usize = arg("--clients").and_then(|v| v.parse().ok()).unwrap_or(1000);
    let senders: usize = arg("--senders").and_then(|v| v.parse().ok()).unwrap_or(20);
    let seconds: u64 = arg("--seconds").and_then(|v| v.parse().ok()).unwrap_or(20);
    let pid: Vec<u32> = arg("--pid").map(|v| v.split(',').filter_map(|p| p.parse().ok()).collect()).unwrap_or_default();
    let pid = &pid[..];
    let castd = target == "castd";

    // Senders come from the addresses after the listeners'.
    let sender_source = |i: usize| source(clients + PER_ADDRESS * i);
    let (listen_url, sender_urls) = if castd {
        let t = register(&addr, "listener", source(0)).await;
        let mut s = Vec::new();
        for i in 0..senders {
            let at = addrs[i % addrs.len()].clone();
            let token = register(&addr, &format!("sender{i}"), sender_source(i)).await;
            s.push((format!("ws://{at}/ws?accessToken={token}"), at));
        }
        (addrs.iter().map(|a| (format!("ws://{a}/ws?accessToken={t}"), a.clone())).collect::<Vec<_>>(), s)
    } else {
        (vec![(format!("ws://{addr}/ws"), addr.clone())], vec![(format!("ws://{addr}/ws"), addr.clone()); senders])
    };

    let (_, rss0) = proc_stats(pid);
    let (stop_tx, stop_rx) = watch::channel(false);
    let connected = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let closed_early = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(64));
    let t_connect = std::time::Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for i in 0..clients {
        let (url, at) = listen_url[i % listen_url.len()].clone();
        let (gate, mut stop) = (gate.clone(), stop_rx.clone());
        let (connected, failed, closed_early) = (connected.clone(), failed.clone(), closed_early.clone());
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await.ok();
            let ws = match connect(url, &at, source(i)).await {
                Ok(ws) => ws,
                Err(_) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return Vec::new();
                }
            };
            drop(permit);
            connected.fetch_add(1, Ordering::Relaxed);
            let (_sink, mut stream) = ws.split();
            let mut lat = Vec::new();
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    m = stream.next() => match m {
                        Some(Ok(Message::Text(t))) => stamps(t.as_str(), now_us(), &mut lat),
                        Some(Ok(_)) => {}
                        _ => {
                            if !*stop.borrow() {
                                closed_early.fetch_add(1, Ordering::Relaxed);
                            }
                            break;
                        }
                    }
                }
            }
            lat
        }));
    }
    while connected.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < clients {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let connect_secs = t_connect.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (cpu0, rss1) = proc_stats(pid);

    // senders: each sends one message a second, staggered over the second
    let sent = Arc::new(AtomicUsize::new(0));
    let mut stasks = Vec::new();
    for (i, (url, at)) in sender_urls.into_iter().enumerate() {
        let (sent, mut stop) = (sent.clone(), stop_rx.clone());
        let offset = Duration::from_millis((1000 * i / senders.max(1)) as u64);
        let from = sender_source(i);
        stasks.push(tokio::spawn(async move {
            let Ok(ws) = connect(url, &at, from).await else {
                return;
            };
            let (mut sink, mut stream) = ws.split();
            let drain = tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = stop.changed() => break,
                        m = stream.next() => if !matches!(m, Some(Ok(_))) { break },
                    }
                }
            });
            tokio::time::sleep(offset).await;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            for _ in 0..seconds {
                tick.tick().await;
                let body = serde_json::json!({ "type": "CHAT", "body": format!("bench:{}", now_us()) }).to_string();
                if sink.send(Message::Text(body.into())).await.is_err() {
                    break;
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
            let _ = drain.await;
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds + 1)).await;
    let (cpu1, rss2) = proc_stats(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop_tx.send(true);
    let mut all: Vec<u32> = Vec::new();
    for t in tasks {
        if let Ok(v) = t.await {
            all.extend(v);
        }
    }
    for t in stasks {
        let _ = t.await;
    }
    all.sort_unstable();
    let sent = sent.load(Ordering::Relaxed);
    let n = connected.load(Ordering::Relaxed);
    let expected = sent * n;
    let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1))).copied();
    let ms = |v: Option<u32>| v.map(|u| format!("{:.1}", u as f64 / 1000.0)).unwrap_or_else(|| "-".into());
    let tck = 100.0; // USER_HZ
    let cpu_pct = (cpu1.saturating_sub(cpu0)) as f64 / tck / (seconds as f64 + 1.0) * 100.0;
    // CPU per delivered message: the server's CPU time over the window ÷ the messages delivered.
    let cpu_per_msg =
        if all.is_empty() { 0.0 } else { (cpu1.saturating_sub(cpu0)) as f64 / tck * 1e6 / all.len() as f64 };
    let per_conn_kib = if n > 0 { rss1.saturating_sub(rss0) as f64 / n as f64 } else { 0.0 };
    println!(
        "{target:7} nodes={} clients={n:6} failed={} dropped={} connect={connect_secs:.1}s sent={sent} delivered={:.2}% \
         p50={}ms p99={}ms max={}ms server_cpu={cpu_pct:.0}% cpu/msg={cpu_per_msg:.2}us rss={}MiB rss/conn={per_conn_kib:.1}KiB",
        addrs.len(),
        failed.load(Ordering::Relaxed),
        closed_early.load(Ordering::Relaxed),
        if expected > 0 { all.len() as f64 * 100.0 / expected as f64 } else { 0.0 },
        ms(pct(0.5)),
        ms(pct(0.99)),
        ms(all.last().copied()),
        rss2 / 1024,
    );
}
