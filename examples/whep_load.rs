//! `whep_load`: N concurrent WHEP viewers of castd in one process, for `bench/webrtc/run.sh`.
//!
//! Each viewer is a real WebRTC peer built on the str0m castd uses (`castd::webrtc::str0m`, the same
//! crypto provider): its own UDP socket on 127.0.0.1, a recvonly H.264 + Opus offer (`sdp_api`)
//! POSTed to `/whep` as `application/sdp`, the 201 answer applied (castd is ICE-lite and lists its
//! host candidates in the answer; the client is the controlling ICE agent), then ICE, DTLS and SRTP
//! for real. str0m depacketises: each `Event::MediaData` is one whole video access unit or one Opus
//! packet. A viewer sends RTCP as str0m does (receiver reports, NACK) and a PLI only where a browser
//! would: no keyframe yet 2 s after connecting, or video that cannot be decoded (a first frame that is
//! not a keyframe, a gap str0m reports as not contiguous), at most one a second. At the end every
//! session is DELETEd.
//!
//! Measurement: after every viewer has its first frame (or failed, or `--connect-timeout` passed) and
//! `--warmup` more seconds, a window of `--seconds`. Per viewer, the video frames that arrived in the
//! window against the frames the source produced in that span, from the frames' RTP timestamps (the
//! first and last frame received in the window and the usual frame interval: missing frames show as
//! gaps in the timeline) and against `--fps` × the window (capped at 100 %); "delivered" is the lower
//! of the two; audio frames are counted against 50 a second. Time to first frame
//! is from the viewer's POST to its first depacketised video frame. With `--castd-pid`, castd's CPU
//! (utime+stime of the main process; its children, the transcode worker, apart) over a baseline window
//! with no viewers (`--baseline`) and over the measured window, and its RSS (before the viewers, and
//! the peak during the window), read from /proc. The client's own CPU is printed too (it shares the
//! machine), and the datagrams the kernel dropped in the window at the viewers' sockets and, with
//! `--castd-udp-port`, at castd's WebRTC socket (/proc/net/udp), and castd's busiest thread over the
//! window (from /proc/PID/task: is the sending spread over cores?). castd's CPU per viewer is printed
//! beside SRS's published figure (2,000 players per core at 600 kbit/s, 0.05 % of a core each). The last
//! line is one markdown table row for `bench/webrtc/run.sh`.
//!
//! Usage: `whep_load --url http://127.0.0.1:PORT --peers N [--seconds 20] [--warmup 5] [--baseline 10]
//!         [--castd-pid PID] [--castd-udp-port PORT] [--fps 30] [--connect-concurrency 10]
//!         [--connect-timeout 30]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use castd::webrtc::str0m;
use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::format::CodecExtra;
use str0m::media::{Direction, KeyframeRequestKind, MediaKind, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig};
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// PLIs at most this often per viewer.
const PLI_INTERVAL: Duration = Duration::from_secs(1);
/// A viewer with no keyframe this long after connecting asks for one.
const FIRST_KEYFRAME_WAIT: Duration = Duration::from_secs(2);

struct Args {
    url: String,
    peers: usize,
    seconds: f64,
    warmup: f64,
    baseline: f64,
    castd_pid: Option<u32>,
    castd_udp_port: Option<u16>,
    fps: f64,
    connect_concurrency: usize,
    connect_timeout: f64,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        url: String::new(),
        peers: 10,
        seconds: 20.0,
        warmup: 5.0,
        baseline: 10.0,
        castd_pid: None,
        castd_udp_port: None,
        fps: 30.0,
        connect_concurrency: 10,
        connect_timeout: 30.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| anyhow!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = value()?.trim_end_matches('/').to_string(),
            "--peers" => a.peers = value()?.parse().context("--peers")?,
            "--seconds" => a.seconds = value()?.parse().context("--seconds")?,
            "--warmup" => a.warmup = value()?.parse().context("--warmup")?,
            "--baseline" => a.baseline = value()?.parse().context("--baseline")?,
            "--castd-pid" => a.castd_pid = Some(value()?.parse().context("--castd-pid")?),
            "--castd-udp-port" => a.castd_udp_port = Some(value()?.parse().context("--castd-udp-port")?),
            "--fps" => a.fps = value()?.parse().context("--fps")?,
            "--connect-concurrency" => a.connect_concurrency = value()?.parse().context("--connect-concurrency")?,
            "--connect-timeout" => a.connect_timeout = value()?.parse().context("--connect-timeout")?,
            "-h" | "--help" => {
                println!(
                    "whep_load --url http://127.0.0.1:PORT --peers N [--seconds 20] [--warmup 5] [--baseline 10] \
                     [--castd-pid PID] [--castd-udp-port PORT] [--fps 30] [--connect-concurrency 10] [--connect-timeout 30]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other} (--help)"),
        }
    }
    if a.url.is_empty() {
        bail!("--url is required (castd's base URL, e.g. http://127.0.0.1:8080)");
    }
    if a.seconds <= 0.0 || a.fps <= 0.0 || a.connect_concurrency == 0 {
        bail!("--seconds, --fps and --connect-concurrency must be positive");
    }
    Ok(a)
}

/// One depacketised video frame.
struct Frame {
    at: Instant,
    /// RTP timestamp (90 kHz, extended by str0m).
    ts: u64,
}

/// What one viewer saw.
#[derive(Default)]
struct Record {
    posted: Option<Instant>,
    connected: Option<Instant>,
    first_video: Option<Instant>,
    video: Vec<Frame>,
    audio: Vec<Instant>,
    /// Video frames str0m reported as not contiguous with the one before (a loss NACK did not repair).
    discontinuities: u32,
    plis: u32,
    /// PLIs due while str0m had no receive stream for the video yet.
    plis_unsent: u32,
    /// Frames after a gap that were keyframes (castd skipping to a keyframe, or a lost keyframe's
    /// successor being one).
    keys_after_gap: u32,
    /// The viewer's UDP port (for its drop count in /proc/net/udp).
    port: u16,
    deleted: bool,
    error: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let load0 = loadavg();
    // castd caps WHEP sessions per client address (`whep::SESSIONS_PER_ADDRESS`): viewers POST from
    // many loopback addresses, five to each, as viewers come from many hosts.
    let http_from = |i: usize| -> anyhow::Result<reqwest::Client> {
        let n = u16::try_from(i / 5).unwrap_or(u16::MAX).to_be_bytes();
        let from = std::net::IpAddr::from([127, 2, n[0], n[1]]);
        Ok(reqwest::Client::builder().local_address(from).timeout(Duration::from_secs(15)).build()?)
    };
    let crypto = Arc::new(str0m::crypto::from_feature_flags());

    // castd with no viewers.
    let mut base_cpu = None;
    if let (Some(pid), true) = (args.castd_pid, args.baseline > 0.0) {
        let c0 = cpu(pid);
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs_f64(args.baseline)).await;
        let c1 = cpu(pid);
        base_cpu = Some(c1.minus(&c0).per_second(t0.elapsed()));
    }
    let rss_before = args.castd_pid.and_then(rss_mb);

    // The viewers.
    let stop = CancellationToken::new();
    let permits = Arc::new(Semaphore::new(args.connect_concurrency));
    let progress = Arc::new(Progress::default());
    let started = Instant::now();
    let mut handles = Vec::with_capacity(args.peers);
    for i in 0..args.peers {
        let viewer = Viewer {
            url: args.url.clone(),
            http: http_from(i)?,
            crypto: crypto.clone(),
            stop: stop.clone(),
            permits: permits.clone(),
            progress: progress.clone(),
        };
        handles.push(tokio::spawn(viewer.run()));
    }
    // Every viewer has its first frame (or failed), then the warm-up.
    let connect_by = started + Duration::from_secs_f64(args.connect_timeout);
    while progress.settled() < args.peers && Instant::now() < connect_by {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let connect_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;

    // The window.
    let me0 = cpu_self();
    let udp0 = udp_drops();
    let c0 = args.castd_pid.map(cpu);
    let th0 = args.castd_pid.map(thread_secs).unwrap_or_default();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(args.seconds);
    let mut rss_peak: Option<f64> = None;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1).min(end.saturating_duration_since(Instant::now()))).await;
        if let Some(r) = args.castd_pid.and_then(rss_mb) {
            rss_peak = Some(rss_peak.map_or(r, |p: f64| p.max(r)));
        }
    }
    let t1 = Instant::now();
    let window = t1 - t0;
    let castd_cpu = match (args.castd_pid, c0) {
        (Some(pid), Some(c0)) => Some(cpu(pid).minus(&c0).per_second(window)),
        _ => None,
    };
    let busiest = args.castd_pid.map(|pid| busiest_thread(&th0, &thread_secs(pid), window));
    let me = cpu_self().minus(&me0).per_second(window);
    let udp1 = udp_drops();
    let load1 = loadavg();

    stop.cancel();
    let mut records = Vec::with_capacity(handles.len());
    for h in handles {
        records.push(h.await.unwrap_or_else(|e| Record { error: Some(format!("task: {e}")), ..Record::default() }));
    }

    // Datagrams the kernel dropped in the window at the viewers' sockets and at castd's.
    let diff = |port: u16| udp1.get(&port).copied().unwrap_or(0).saturating_sub(udp0.get(&port).copied().unwrap_or(0));
    let drops = (records.iter().filter(|r| r.port != 0).map(|r| diff(r.port)).sum(), args.castd_udp_port.map(diff));
    let cpu = CastdCpu { base: base_cpu, window: castd_cpu, busiest };
    report(&args, &records, t0, t1, connect_secs, cpu, me, rss_before, rss_peak, (load0, load1), drops);
    Ok(())
}

/// How many viewers have their first frame or failed.
#[derive(Default)]
struct Progress {
    settled: std::sync::atomic::AtomicUsize,
}

impl Progress {
    fn settle(&self) {
        self.settled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn settled(&self) -> usize {
        self.settled.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One WHEP viewer.
struct Viewer {
    url: String,
    http: reqwest::Client,
    crypto: Arc<str0m::crypto::CryptoProvider>,
    stop: CancellationToken,
    permits: Arc<Semaphore>,
    progress: Arc<Progress>,
}

impl Viewer {
    async fn run(self) -> Record {
        let mut rec = Record::default();
        let mut location = None;
        let result = self.session(&mut rec, &mut location).await;
        if let Err(e) = result {
            if rec.first_video.is_none() {
                self.progress.settle();
            }
            rec.error = Some(format!("{e:#}"));
        }
        if let Some(loc) = location {
            let failed = match self.http.delete(&loc).send().await {
                Ok(r) if r.status().is_success() => None,
                Ok(r) => Some(format!("DELETE {loc}: {}", r.status())),
                Err(e) => Some(format!("DELETE {loc}: {e}")),
            };
            rec.deleted = failed.is_none();
            if rec.error.is_none() {
                rec.error = failed;
            }
        }
        rec
    }

    /// POST the offer, apply the answer, run the connection until `stop`.
    async fn session(&self, rec: &mut Record, location: &mut Option<String>) -> anyhow::Result<()> {
        let socket = UdpSocket::bind("127.0.0.1:0").await.context("bind")?;
        let local = socket.local_addr()?;
        rec.port = local.port();
        let mut rtc = RtcConfig::new()
            .clear_codecs()
            .enable_h264(true)
            .enable_opus(true, false)
            .set_crypto_provider(self.crypto.clone())
            .build(Instant::now());
        rtc.add_local_candidate(Candidate::host(local, "udp")?);
        let mut change = rtc.sdp_api();
        let video = change.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
        let audio = change.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let (offer, pending) = change.apply().ok_or_else(|| anyhow!("str0m made no offer"))?;

        let answer = {
            let _permit = self.permits.acquire().await?;
            rec.posted = Some(Instant::now());
            self.post(offer.to_sdp_string(), location).await?
        };
        accept(&mut rtc, pending, &answer)?;

        let mut state = State { video, audio, need_key: true, last_pli: None };
        let mut buf = vec![0u8; 2048];
        loop {
            let deadline = self.drain(&mut rtc, &socket, rec, &mut state).await?;
            if !rtc.is_alive() {
                bail!("the connection closed");
            }
            if state.pli_due(rec) {
                if let Some(rx) = rtc.direct_api().stream_rx_by_mid(state.video, None) {
                    rx.request_keyframe(KeyframeRequestKind::Pli);
                    rec.plis += 1;
                } else {
                    rec.plis_unsent += 1;
                }
                state.last_pli = Some(Instant::now());
                continue;
            }
            let wake = tokio::select! {
                r = socket.recv_from(&mut buf) => Some(r),
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => None,
                _ = self.stop.cancelled() => return Ok(()),
            };
            match wake {
                Some(Ok((n, from))) => {
                    let Ok(contents) = buf[..n].try_into() else { continue };
                    let input = Input::Receive(
                        Instant::now(),
                        Receive { proto: Protocol::Udp, source: from, destination: local, contents },
                    );
                    if rtc.accepts(&input) {
                        rtc.handle_input(input)?;
                    }
                }
                Some(Err(e)) => bail!("recv: {e}"),
                None => rtc.handle_input(Input::Timeout(Instant::now()))?,
            }
        }
    }

    /// POST /whep; the answer's SDP. Sets `location` to the session's URL.
    async fn post(&self, offer: String, location: &mut Option<String>) -> anyhow::Result<String> {
        let resp = self
            .http
            .post(format!("{}/whep", self.url))
            .header(reqwest::header::CONTENT_TYPE, "application/sdp")
            .body(offer)
            .send()
            .await
            .context("POST /whep")?;
        let status = resp.status();
        let loc = resp.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = resp.text().await.context("POST /whep: the body")?;
        if status != reqwest::StatusCode::CREATED {
            bail!("POST /whep: {status}: {}", body.chars().take(200).collect::<String>());
        }
        let loc = loc.ok_or_else(|| anyhow!("POST /whep: 201 without Location"))?;
        *location = Some(if loc.starts_with('/') { format!("{}{loc}", self.url) } else { loc });
        Ok(body)
    }

    /// Drain str0m's output to its next timeout: send what it transmits, record media.
    async fn drain(
        &self,
        rtc: &mut Rtc,
        socket: &UdpSocket,
        rec: &mut Record,
        state: &mut State,
    ) -> anyhow::Result<Instant> {
        loop {
            match rtc.poll_output()? {
                Output::Timeout(t) => return Ok(t),
                Output::Transmit(t) => {
                    // Loopback: a failed send is a lost datagram, as on a network.
                    let _ = socket.send_to(&t.contents, t.destination).await;
                }
                Output::Event(e) => match e {
                    Event::Connected => rec.connected = Some(Instant::now()),
                    Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                        bail!("ICE disconnected")
                    }
                    Event::MediaData(d) if d.mid == state.video => {
                        let key = matches!(d.codec_extra, CodecExtra::H264(x) if x.is_keyframe);
                        if rec.first_video.is_none() {
                            rec.first_video = Some(d.network_time);
                            self.progress.settle();
                        }
                        if !d.contiguous {
                            rec.discontinuities += 1;
                            state.need_key = true;
                        }
                        if key && !d.contiguous {
                            rec.keys_after_gap += 1;
                        }
                        if key {
                            state.need_key = false;
                        }
                        rec.video.push(Frame { at: d.network_time, ts: d.time.numer() });
                    }
                    Event::MediaData(d) if d.mid == state.audio => rec.audio.push(d.network_time),
                    _ => {}
                },
            }
        }
    }
}

/// Apply the WHEP answer.
fn accept(rtc: &mut Rtc, pending: SdpPendingOffer, answer: &str) -> anyhow::Result<()> {
    let answer = SdpAnswer::from_sdp_string(answer).context("the answer is not SDP")?;
    rtc.sdp_api().accept_answer(pending, answer).context("the answer was not accepted")?;
    Ok(())
}

/// A viewer's media lines and keyframe state.
struct State {
    video: Mid,
    audio: Mid,
    /// No decodable video yet, or a loss since the last keyframe.
    need_key: bool,
    last_pli: Option<Instant>,
}

impl State {
    /// Whether to send a PLI now (as a browser would; at most one per `PLI_INTERVAL`).
    fn pli_due(&self, rec: &Record) -> bool {
        if !self.need_key || self.last_pli.is_some_and(|t| t.elapsed() < PLI_INTERVAL) {
            return false;
        }
        let Some(connected) = rec.connected else { return false };
        // Video that cannot be decoded, or none yet well after connecting.
        !rec.video.is_empty() || connected.elapsed() >= FIRST_KEYFRAME_WAIT
    }
}

/// CPU seconds of a process (and of its children, apart).
#[derive(Clone, Copy, Default)]
struct Cpu {
    main: f64,
    children: f64,
}

impl Cpu {
    fn minus(&self, o: &Cpu) -> Cpu {
        Cpu { main: self.main - o.main, children: self.children - o.children }
    }
    /// As a fraction of one core over `d`.
    fn per_second(&self, d: Duration) -> Cpu {
        let s = d.as_secs_f64().max(1e-9);
        Cpu { main: self.main / s, children: self.children / s }
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime+stime of `/proc/<what>/stat` in seconds.
fn stat_secs(what: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{what}/stat")) else { return 0.0 };
    let Some((_, rest)) = s.rsplit_once(") ") else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (n(11) + n(12)) / clock_ticks()
}

/// castd's CPU: the main process, and its children alive now (the transcode worker).
fn cpu(pid: u32) -> Cpu {
    let mut children = 0.0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(t.path().join("children")) else { continue };
            children += list.split_whitespace().map(stat_secs).sum::<f64>();
        }
    }
    Cpu { main: stat_secs(&pid.to_string()), children }
}

/// utime+stime of each thread of `pid` in seconds, by thread id, with the thread's name.
fn thread_secs(pid: u32) -> std::collections::HashMap<String, (String, f64)> {
    let mut out = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in tasks.flatten() {
        let tid = t.file_name().to_string_lossy().into_owned();
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default().trim().to_string();
        out.insert(tid.clone(), (name, stat_secs(&format!("{pid}/task/{tid}"))));
    }
    out
}

/// The busiest thread of castd over the window: its name, its CPU (fraction of a core), and how many
/// threads did at least 10 % of the process's work (the sending spread over cores, or not).
struct Busiest {
    name: String,
    cpu: f64,
    busy_threads: usize,
}

fn busiest_thread(
    before: &std::collections::HashMap<String, (String, f64)>,
    after: &std::collections::HashMap<String, (String, f64)>,
    window: Duration,
) -> Busiest {
    let s = window.as_secs_f64().max(1e-9);
    let mut per: Vec<(String, f64)> = after
        .iter()
        .map(|(tid, (name, secs))| (name.clone(), (secs - before.get(tid).map_or(0.0, |b| b.1)) / s))
        .collect();
    per.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = per.iter().map(|p| p.1).sum();
    let busy_threads = per.iter().filter(|p| p.1 >= 0.1 * total && p.1 > 0.0).count();
    let (name, cpu) = per.first().cloned().unwrap_or_default();
    Busiest { name, cpu, busy_threads }
}

/// castd's CPU: with no viewers, over the window, and its busiest thread over the window.
struct CastdCpu {
    base: Option<Cpu>,
    window: Option<Cpu>,
    busiest: Option<Busiest>,
}

/// SRS's published figure (shared/ANCHORS.md): 2,000 WebRTC players on one core at 600 kbit/s, that
/// is 0.05 % of a core per viewer.
const SRS_PER_VIEWER: f64 = 1.0 / 2000.0;

fn cpu_self() -> Cpu {
    Cpu { main: stat_secs("self"), children: 0.0 }
}

fn rss_mb(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Datagrams each 127.0.0.1 UDP socket dropped so far (its receive buffer was full), by port, from
/// /proc/net/udp.
fn udp_drops() -> std::collections::HashMap<u16, u64> {
    let mut out = std::collections::HashMap::new();
    let Ok(s) = std::fs::read_to_string("/proc/net/udp") else { return out };
    for line in s.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(drops)) = (f.get(1), f.last()) else { continue };
        let Some((ip, port)) = local.split_once(':') else { continue };
        let (Ok(port), Ok(drops)) = (u16::from_str_radix(port, 16), drops.parse::<u64>()) else { continue };
        if ip == "0100007F" {
            out.insert(port, drops);
        }
    }
    out
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One viewer's figures over the window.
struct Delivered {
    frames: usize,
    /// Frames the source produced between the first and last frame received (RTP timeline).
    expected_rtp: f64,
    /// Frames missing inside the window (RTP timeline gaps).
    missing: u64,
    gaps: u32,
    audio: usize,
}

fn delivered(rec: &Record, t0: Instant, t1: Instant) -> Delivered {
    let frames: Vec<&Frame> = rec.video.iter().filter(|f| f.at >= t0 && f.at < t1).collect();
    let mut deltas: Vec<u64> =
        frames.windows(2).filter_map(|w| w[1].ts.checked_sub(w[0].ts)).filter(|d| *d > 0).collect();
    deltas.sort_unstable();
    let interval = deltas.get(deltas.len() / 2).copied().unwrap_or(0);
    let (mut missing, mut gaps) = (0u64, 0u32);
    if interval > 0 {
        for w in frames.windows(2) {
            let d = w[1].ts.saturating_sub(w[0].ts);
            if d * 2 > interval * 3 {
                gaps += 1;
                missing += (d + interval / 2) / interval - 1;
            }
        }
    }
    let expected_rtp = match (frames.first(), frames.last(), interval) {
        (Some(a), Some(b), i) if i > 0 => ((b.ts - a.ts.min(b.ts)) as f64 / i as f64).round() + 1.0,
        _ => 0.0,
    };
    let audio = rec.audio.iter().filter(|a| **a >= t0 && **a < t1).count();
    Delivered { frames: frames.len(), expected_rtp, missing, gaps, audio }
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// Per-viewer figures need the third decimal (the target is 0.05 %).
fn pct3(x: f64) -> String {
    format!("{:.3} %", x * 100.0)
}

/// The value at fraction `q` of sorted `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

#[allow(clippy::too_many_arguments)]
fn report(
    args: &Args,
    records: &[Record],
    t0: Instant,
    t1: Instant,
    connect_secs: f64,
    cpu: CastdCpu,
    me: Cpu,
    rss_before: Option<f64>,
    rss_peak: Option<f64>,
    load: (String, String),
    drops: (u64, Option<u64>),
) {
    let secs = (t1 - t0).as_secs_f64();
    let n = args.peers;
    let connected = records.iter().filter(|r| r.connected.is_some()).count();
    let playing: Vec<&Record> = records.iter().filter(|r| r.first_video.is_some()).collect();
    let deleted = records.iter().filter(|r| r.deleted).count();
    let mut errors: Vec<&str> = records.iter().filter_map(|r| r.error.as_deref()).collect();
    errors.sort_unstable();
    errors.dedup();

    // Every viewer that was asked for counts: one that never played delivered nothing.
    let d: Vec<Delivered> = records.iter().map(|r| delivered(r, t0, t1)).collect();
    let wall_expected = args.fps * secs;
    let mut frames: Vec<f64> = d.iter().map(|x| x.frames as f64).collect();
    frames.sort_by(f64::total_cmp);
    // Delivered against the source's own timeline (the larger of the RTP span and the frames seen plus
    // the gaps), and against fps x the window.
    let mut rtp_ratio: Vec<f64> = d
        .iter()
        .map(|x| {
            let exp = x.expected_rtp.max(x.frames as f64 + x.missing as f64);
            if exp > 0.0 {
                x.frames as f64 / exp
            } else {
                0.0
            }
        })
        .collect();
    let mut wall_ratio: Vec<f64> = d.iter().map(|x| x.frames as f64 / wall_expected).collect();
    // The figure in the table: the lower of the two per viewer (the RTP span alone misses a viewer that
    // stalls before the window ends; fps x window alone is off by the frames at the window's edges).
    let mut ratio: Vec<f64> = rtp_ratio.iter().zip(&wall_ratio).map(|(r, w)| r.min(w.min(1.0))).collect();
    rtp_ratio.sort_by(f64::total_cmp);
    wall_ratio.sort_by(f64::total_cmp);
    ratio.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
    let mut audio: Vec<f64> = d.iter().map(|x| x.audio as f64).collect();
    audio.sort_by(f64::total_cmp);
    let gaps: u32 = d.iter().map(|x| x.gaps).sum();
    let missing: u64 = d.iter().map(|x| x.missing).sum();
    let with_gaps = d.iter().filter(|x| x.gaps > 0).count();
    let disc: u32 = records.iter().map(|r| r.discontinuities).sum();
    let plis: u32 = records.iter().map(|r| r.plis).sum();
    let plis_unsent: u32 = records.iter().map(|r| r.plis_unsent).sum();
    let keys_after_gap: u32 = records.iter().map(|r| r.keys_after_gap).sum();
    let mut ttff: Vec<f64> = playing
        .iter()
        .filter_map(|r| Some(r.first_video?.saturating_duration_since(r.posted?).as_secs_f64()))
        .collect();
    ttff.sort_by(f64::total_cmp);

    println!("== {n} WHEP viewers, {secs:.1} s window (load average {} -> {})", load.0, load.1);
    println!(
        "viewers: {connected}/{n} connected, {}/{n} playing ({connect_secs:.1} s until all played or failed), {deleted}/{n} deleted at the end",
        playing.len()
    );
    for e in errors.iter().take(5) {
        println!("  error: {e}");
    }
    println!(
        "video frames per viewer: min {:.0}, median {:.0} (fps x window = {wall_expected:.0})",
        quantile(&frames, 0.0),
        quantile(&frames, 0.5)
    );
    println!(
        "delivered (the lower of the two): min {}, mean {}; RTP timeline: min {}, mean {}; vs {} fps x window: min {}, mean {}",
        pct(quantile(&ratio, 0.0)),
        pct(mean(&ratio)),
        pct(quantile(&rtp_ratio, 0.0)),
        pct(mean(&rtp_ratio)),
        args.fps,
        pct(quantile(&wall_ratio, 0.0)),
        pct(mean(&wall_ratio))
    );
    println!(
        "gaps in the window: {gaps} ({missing} frames missing) over {with_gaps} viewers; not contiguous (whole run): {disc}, of them keyframes: {keys_after_gap}; PLIs sent: {plis} (due before the stream was known: {plis_unsent})"
    );
    println!(
        "UDP datagrams dropped by the kernel in the window (receive buffer full): at the viewers' sockets {}, at castd's {}",
        drops.0,
        drops.1.map_or("not measured (--castd-udp-port)".to_string(), |d| d.to_string())
    );
    println!(
        "audio frames per viewer: min {:.0}, median {:.0} (50/s x window = {:.0})",
        quantile(&audio, 0.0),
        quantile(&audio, 0.5),
        50.0 * secs
    );
    println!("first frame after POST: p50 {:.2} s, p95 {:.2} s", quantile(&ttff, 0.5), quantile(&ttff, 0.95));
    println!("whep_load's own CPU: {} of a core", pct(me.main));
    let per = |x: f64| if playing.is_empty() { f64::NAN } else { x / playing.len() as f64 };
    let (cpu_cells, rss_cells) = match (cpu.window, rss_before, rss_peak) {
        (Some(c), Some(r0), Some(r1)) => {
            let base = cpu.base.unwrap_or_default();
            let per_viewer = per(c.main - base.main);
            println!(
                "castd CPU: {} of a core with viewers ({} with none), worker {}; RSS {r0:.1} MB before, {r1:.1} MB peak",
                pct(c.main),
                cpu.base.map_or("not measured".into(), |b| pct(b.main)),
                pct(c.children)
            );
            println!(
                "CPU per viewer: castd {} of a core (about {:.0} viewers per core) | SRS, published: {} (2,000 per core at 600 kbit/s) | castd / SRS = {:.1}x",
                pct3(per_viewer),
                1.0 / per_viewer,
                pct3(SRS_PER_VIEWER),
                per_viewer / SRS_PER_VIEWER
            );
            let busiest = cpu.busiest.as_ref().map_or("-".to_string(), |b| {
                println!(
                    "castd's busiest thread: {} at {} of a core; {} threads did ≥ 10 % of castd's work",
                    b.name,
                    pct(b.cpu),
                    b.busy_threads
                );
                format!("{} ({} threads ≥ 10 %)", pct(b.cpu), b.busy_threads)
            });
            (
                format!(
                    "{} | {} | **{}** | {} | {:.1}x | {busiest} | {}",
                    pct(base.main),
                    pct(c.main),
                    pct3(per_viewer),
                    pct3(SRS_PER_VIEWER),
                    per_viewer / SRS_PER_VIEWER,
                    pct(c.children)
                ),
                format!("{r0:.0} → {r1:.0} MB | {:.0} KiB", per((r1 - r0) * 1024.0)),
            )
        }
        _ => ("- | - | - | - | - | - | -".into(), "- | -".into()),
    };
    println!(
        "row: | {n} | {}/{n} | {cpu_cells} | {rss_cells} | {:.0} / {:.0} | {} / {} | {gaps} ({missing}) | {} / {} | {:.2} / {:.2} s | {} | {} → {} |",
        playing.len(),
        quantile(&frames, 0.0),
        quantile(&frames, 0.5),
        pct(quantile(&ratio, 0.0)),
        pct(mean(&ratio)),
        drops.1.map_or("-".to_string(), |d| d.to_string()),
        drops.0,
        quantile(&ttff, 0.5),
        quantile(&ttff, 0.95),
        pct(me.main),
        load.0,
        load.1,
    );
}
