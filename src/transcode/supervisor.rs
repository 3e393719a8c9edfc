//! Supervision of the transcode worker and the stream's life cycle.
//!
//! The transcoder is the media plane's first reader: `run` is handed every new broadcast
//! (`media::MediaPlane::reader`); for each it takes the publisher's media (`Broadcast::take_source`:
//! `media::MediaChunk`s, FLV tags from RTMP, container bytes such as MPEG-TS from SRT, and the
//! broadcaster's details), clears the channel's HLS folder, marks the stream online, publishes
//! STREAM_STARTED and spawns the supervisor task. The supervisor (`Supervisor`, one per broadcast:
//! `plan`, then `run`: `start_worker`, `watch`, `failed` for the restart policy, `end`) decides the
//! running profile (ladder, segment length, latency mode, real-time variant, encoders: read from the
//! settings once, here, and
//! nowhere else; a broadcast marked passthrough by the media plane's capacity check gets one
//! passthrough variant instead of the ladder; an Enhanced RTMP source (`Container::FlvEnhanced`:
//! HEVC, AV1, VP9) gets a passthrough `source` variant after the ladder, served as fMP4) and starts the broadcast with it (`Broadcast::start`: `Started` on the feed), runs the
//! worker (`castd worker`, told the source's `Container`), writes the byte stream to its stdin (FLV
//! tags framed into an FLV stream, Enhanced RTMP tags re-wrapped as Matroska by `media::mkv`,
//! byte-stream containers as they came) and reads its events: control
//! events go to the bus (stream started/stopped), what the worker wrote goes to the broadcast
//! (`Broadcast::publish`: retention, then the typed feed); a fallback changes the profile with it.
//!
//! Policies:
//! - Slow consumer: the source's queue and its policy are the media plane's (`media::SourceWriter`).
//! - Worker failure: if the worker exits, or stops reporting for `STALL_TIMEOUT` while media flows,
//!   or does not take input for `WRITE_TIMEOUT`, it is killed and started again with `append` (its
//!   playlists continue with `EXT-X-DISCONTINUITY`), fed from the next random-access point (FLV: the
//!   sequence headers replayed before the next keyframe), and the reason is
//!   logged. A worker that reports a hardware encoder failure (`WorkerEvent::EncoderFailed`), or a
//!   hardware ladder that fails `HW_FAILURES_BEFORE_FALLBACK` times, is restarted with every variant
//!   on libx264; a worker whose software encoder reports a failure is restarted with every variant as
//!   passthrough (the broadcaster's own video), so viewers keep watching (`encoders::report_fallback`:
//!   health notice, log, stream state). More than `MAX_RESTARTS` restarts within `RESTART_WINDOW`
//!   drops the broadcaster.
//! - Full disk: the supervisor checks the HLS directory's free space every second (`free_bytes`; the
//!   worker's muxer loses writes to a full disk without failing) and restarts the worker when less
//!   than one segment's room is left. A worker that failed while the HLS directory has no room
//!   (`has_room`) is not counted as a failure: the oldest segments are deleted (the media plane's
//!   `Retention::prune_oldest`, the live stream winning over holders),
//!   health says so (`hls` alert), and the worker is started again every `DISK_FULL_RETRY` for as
//!   long as the broadcaster stays; once a worker starts, or the running one finds, room again the
//!   alert is cleared. Chat, the API and the database are elsewhere and carry on.
//! - Capacity (`capacity`): the worker steps its x264 rungs to faster presets when it falls behind real
//!   time and back when headroom returns, without a restart; each `WorkerEvent::LadderChanged` becomes
//!   the health's ladder notice (`capacity::health_message`, cleared back at the configured presets and
//!   when the stream stops), a TRANSCODE_DEGRADED event on the bus, and the step a restarted worker
//!   starts at (`WorkerConfig::ladder_step`); the progress reports feed `castd_transcode_speed` and
//!   `castd_transcode_headroom` (telemetry).
//! - Encoders: at stream start the selected encoder (`encoders::selected`) is planned per
//!   variant with `hwaccel::plan_sessions` (NVENC's session cap from NVML, when there is a driver).
//! - End: when the broadcaster leaves, the worker's stdin is closed so it finalises the playlists
//!   (any playlist still without `EXT-X-ENDLIST` gets one), the stream goes offline, and
//!   STREAM_STOPPED is published. The publisher slot is freed only then.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

use super::capacity::{self, RungPreset};
use super::child::own_exe;
use super::encoders;
use super::recipe::{self, SOFTWARE_ENCODER};
use super::{new_segment_id, thumbnail, LadderChange, Transcoder, WorkerConfig, WorkerEvent};
use crate::events::{DegradedVariant, Event, TranscodeDegraded};
use crate::health::HealthInput;
use crate::media::flv::{FlvTag, FLV_HEADER, TAG_AUDIO, TAG_VIDEO};
use crate::media::mkv::MkvWriter;
use crate::media::{Attached, Broadcast, BroadcastReader, MediaChunk, MediaEvent, Profile, SourceReader};
use crate::stream::{stream_event, Broadcaster, StreamDetails};
use crate::tasks::{Stage, Tasks};
use tokio_util::sync::CancellationToken;

/// Worker events buffered; progress lines beyond this are dropped.
pub const EVENT_CAPACITY: usize = 64;
/// A worker silent this long while media flows is restarted.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(20);
/// A worker that does not take input for this long is restarted.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_RESTARTS: usize = 5;
pub const RESTART_WINDOW: Duration = Duration::from_secs(120);
pub const HW_FAILURES_BEFORE_FALLBACK: u32 = 2;
/// How often a worker is tried again while the HLS directory is full.
pub const DISK_FULL_RETRY: Duration = Duration::from_secs(1);
/// Free room the HLS directory must have to count as not full (one segment of a modest ladder).
const HLS_PROBE_BYTES: usize = 256 * 1024;
/// How long a finishing worker may take to finalise its playlists.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(15);

impl Transcoder {
    /// The reader of this transcoder's channel's broadcasts (register it before anyone can go live).
    pub fn reader(&self) -> BroadcastReader {
        self.deps.media.reader_for(&self.deps.channel, "transcode")
    }

    /// Transcode every new broadcast the media plane hands `reader`, until shutdown; the channel's
    /// capacity notice (a publisher refused, or served as passthrough, over capacity) goes to its
    /// health as it changes.
    pub async fn run(self: Arc<Self>, mut reader: BroadcastReader) {
        let mut notice = self.deps.media.capacity_notice(&self.deps.channel);
        let mut notices = true;
        loop {
            tokio::select! {
                attached = reader.next() => match attached {
                    Some(attached) => start(&self, attached),
                    None => break,
                },
                changed = notice.changed(), if notices => {
                    if changed.is_err() {
                        notices = false;
                        continue;
                    }
                    let now = notice.borrow_and_update().clone();
                    self.deps.health.submit(HealthInput::Capacity(now));
                }
            }
        }
    }
}

/// A broadcast went live: state, event, and the supervisor task.
fn start(t: &Arc<Transcoder>, attached: Attached) {
    // The transcoder writes the feed; it does not read it.
    let Attached { broadcast: b, feed } = attached;
    drop(feed);
    let Some(source) = b.take_source() else {
        warn!(channel = %b.channel, "a broadcast without its source; nothing to transcode");
        return;
    };
    let remote = b.source.remote;
    // The last broadcast's playlists go before the stream is announced, so no player that sees it
    // online fetches them.
    if let Err(e) = reset_dir(&b.dir) {
        error!("cannot prepare {}: {e}", b.dir.display());
    }
    let now = Utc::now();
    t.deps.stream.update(|st| {
        st.online = true;
        st.stream_id = Some(crate::password::random_token(10));
        st.last_connect_time = Some(now);
        st.broadcaster = Some(Broadcaster { remote_addr: remote.to_string(), time: Some(now), ..Default::default() });
        st.worker_pid = None;
        st.transcode.clear();
    });
    publish_stream_event(t, Event::StreamStarted);
    // Chat sends Owncast's "Stay tuned, the stream is starting!" when it sees STREAM_STARTED.
    t.deps.tasks.spawn(Stage::Stream, "stream supervisor", supervise(t.clone(), b, source));
}

/// Publish STREAM_STARTED or STREAM_STOPPED with the current state.
fn publish_stream_event(t: &Transcoder, kind: fn(crate::events::StreamEvent) -> Event) {
    let event = stream_event(&t.deps.settings.get(), &t.deps.stream.get(), &t.deps.viewers);
    t.deps.bus.publish(kind(event));
}

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    events: mpsc::Receiver<WorkerEvent>,
    pid: Option<u32>,
}

fn spawn_worker(cfg: &WorkerConfig, tasks: &Tasks) -> std::io::Result<Worker> {
    let exe = own_exe()?;
    let json = serde_json::to_string(cfg).map_err(std::io::Error::other)?;
    let mut child = Command::new(exe)
        .arg("worker")
        .arg("--config")
        .arg(json)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("worker stdout missing"))?;
    let (tx, rx) = mpsc::channel(EVENT_CAPACITY);
    // Ends when the worker's stdout closes.
    tasks.spawn(Stage::Stream, "worker events", async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<WorkerEvent>(&line) {
                Ok(ev @ WorkerEvent::Progress { .. }) => {
                    let _ = tx.try_send(ev);
                }
                Ok(ev) => {
                    if tx.send(ev).await.is_err() {
                        break;
                    }
                }
                Err(_) => warn!("unexpected line from the transcode worker: {line}"),
            }
        }
    });
    let pid = child.id();
    Ok(Worker { child, stdin, events: rx, pid })
}

/// Make sure a playlist ends with `#EXT-X-ENDLIST`.
pub fn ensure_endlist(playlist: &Path) -> std::io::Result<()> {
    let Ok(text) = std::fs::read_to_string(playlist) else { return Ok(()) };
    if text.contains("#EXT-X-ENDLIST") {
        return Ok(());
    }
    let mut text = text;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("#EXT-X-ENDLIST\n");
    let tmp = playlist.with_extension("m3u8.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, playlist)
}

/// The variant the thumbnail comes from: a passthrough one, else the highest video bitrate.
pub fn highest_variant(variants: &[crate::config::StreamOutputVariant]) -> usize {
    if let Some(i) = variants.iter().position(|v| v.video_passthrough) {
        return i;
    }
    variants.iter().enumerate().max_by_key(|(_, v)| recipe::encoder_bitrate(v)).map(|(i, _)| i).unwrap_or(0)
}

enum Outcome {
    /// The broadcaster left.
    Ended,
    /// The worker failed.
    Failed(String),
}

/// Supervise one broadcast from its start to its end (the task `start` spawns).
async fn supervise(t: Arc<Transcoder>, b: Arc<Broadcast>, source: SourceReader) {
    Supervisor::plan(t, b, source).await.run().await;
}

/// One broadcast's supervision: the running profile, the publisher's media, and what is kept across
/// worker restarts (sequence headers, restart history, capacity step, disk-full state).
struct Supervisor {
    t: Arc<Transcoder>,
    b: Arc<Broadcast>,
    rx: mpsc::Receiver<MediaChunk>,
    details: watch::Receiver<StreamDetails>,
    /// The next worker's configuration (a restart or a fallback changes it).
    cfg: WorkerConfig,
    dir: PathBuf,
    realtime_variant: Option<usize>,
    thumb_variant: usize,
    variant_count: usize,
    seq_video: Option<FlvTag>,
    seq_audio: Option<FlvTag>,
    restarts: VecDeque<Instant>,
    hw_failures: u32,
    /// What the running worker reported about a failing encoder.
    encoder_failure: Option<EncoderFailure>,
    thumbnails: Option<CancellationToken>,
    ladder: LadderState,
    disk_full: bool,
}

/// What a failed worker leads to.
enum Next {
    /// Start another worker.
    Restart,
    /// The broadcaster was dropped.
    Stop,
}

impl Supervisor {
    /// Decide the running profile (ladder, encoders, latency: the settings are read here, once) and
    /// start the broadcast with it.
    async fn plan(t: Arc<Transcoder>, b: Arc<Broadcast>, source: SourceReader) -> Self {
        let SourceReader { media: rx, details } = source;
        let s = t.deps.settings.get();
        let (seg, list) = s.latency();
        let dir = b.dir.clone();
        let ladder = plan_ladder(&b, s.video.video_quality_variants.clone());
        let encoders = plan_encoders(&t, &ladder, seg).await;
        let cfg = WorkerConfig {
            hls_dir: dir.clone(),
            container: b.source.container,
            segment_seconds: seg,
            list_size: list,
            variants: ladder,
            encoder: SOFTWARE_ENCODER.into(),
            encoders,
            debug_encoder_fault: t.deps.debug_encoder_fault,
            append: false,
            segment_id: new_segment_id(),
            low_latency: s.low_latency_hls(),
            part_ms: t.deps.llhls_part_ms,
            realtime: None,
            ladder_step: 0,
            debug_ladder_step_at: None,
        };
        let realtime_variant = s.webrtc.realtime_variant(&cfg.variants);
        b.start(Profile {
            stream_id: t.deps.stream.get().stream_id.unwrap_or_default(),
            started_at: t.deps.stream.get().last_connect_time.unwrap_or_else(Utc::now),
            variants: cfg.variants.clone(),
            segment_seconds: seg,
            list_size: list,
            latency_level: s.video.latency_level,
            low_latency: cfg.low_latency,
            realtime_variant,
            encoders: cfg.encoders.iter().map(|e| e.name.clone()).collect(),
        });
        let names = cfg
            .variants
            .iter()
            .enumerate()
            .map(|(n, v)| if v.name.trim().is_empty() { format!("variant {n}") } else { v.name.clone() })
            .collect();
        Supervisor {
            thumb_variant: highest_variant(&cfg.variants),
            variant_count: cfg.variants.len(),
            ladder: LadderState { step: 0, names },
            t,
            b,
            rx,
            details,
            cfg,
            dir,
            realtime_variant,
            seq_video: None,
            seq_audio: None,
            restarts: VecDeque::new(),
            hw_failures: 0,
            encoder_failure: None,
            thumbnails: None,
            disk_full: false,
        }
    }

    /// Run workers until the broadcaster leaves (or is dropped), then finish the stream.
    async fn run(mut self) {
        loop {
            let Some(mut worker) = self.start_worker() else { break };
            match self.watch(&mut worker).await {
                Outcome::Ended => {
                    finish_worker(&mut worker, |ev| self.on_event(ev)).await;
                    break;
                }
                Outcome::Failed(why) => match self.failed(worker, why).await {
                    Next::Restart => {}
                    Next::Stop => break,
                },
            }
        }
        self.end();
    }

    /// Start a worker with the current configuration and say what runs (profile, stream state).
    /// None: it could not be started, and the broadcaster is dropped.
    fn start_worker(&mut self) -> Option<Worker> {
        let t = &self.t;
        // A restarted worker continues at the capacity step its predecessor had reached.
        self.cfg.ladder_step = self.ladder.step;
        if self.disk_full && has_room(&self.dir, 4 * HLS_PROBE_BYTES) {
            self.disk_full = false;
            room_again(t);
        }
        self.cfg.realtime = self.realtime_variant.and_then(|variant| {
            let socket = super::rtlink::socket_path(&self.cfg.segment_id);
            match super::rtlink::start(&socket, self.b.realtime.clone(), &t.deps.tasks) {
                Ok(()) => Some(super::RealtimeConfig { variant, socket }),
                Err(e) => {
                    warn!("no real-time output (WebRTC playback): cannot listen on {}: {e}", socket.display());
                    None
                }
            }
        });
        let worker = match spawn_worker(&self.cfg, &t.deps.tasks) {
            Ok(w) => w,
            Err(e) => {
                error!("cannot start the transcode worker: {e}");
                self.b.disconnect();
                return None;
            }
        };
        let names: Vec<String> = self.cfg.encoders.iter().map(|e| e.name.clone()).collect();
        // What the admin sees in use: a decode path says where it decodes and scales.
        let labels: Vec<String> = self.cfg.encoders.iter().map(|e| e.label()).collect();
        info!(pid = worker.pid, encoders = ?labels, append = self.cfg.append, "transcode worker started");
        // What runs now (a fallback changes the encoders, or every variant to passthrough).
        let variants = self.cfg.variants.clone();
        self.b.update_profile(|p| {
            p.variants = variants;
            p.encoders = names;
        });
        t.deps.stream.update(|st| {
            st.worker_pid = worker.pid;
            st.encoders = labels;
        });
        self.encoder_failure = None;
        Some(worker)
    }

    /// Feed the worker and watch it until the broadcaster leaves or the worker fails (exits, stalls,
    /// takes no input, or the HLS directory fills up).
    async fn watch(&mut self, worker: &mut Worker) -> Outcome {
        let mut input = WorkerInput::new(self.b.source.container);
        let mut last_input = Instant::now();
        let mut last_output = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut buf = Vec::with_capacity(64 * 1024);
        loop {
            tokio::select! {
                chunk = self.rx.recv() => {
                    let Some(chunk) = chunk else { return Outcome::Ended };
                    last_input = Instant::now();
                    buf.clear();
                    match frame_chunk(&chunk, &mut input, &mut self.seq_video, &mut self.seq_audio, &mut buf) {
                        Framed::Skip => continue,
                        // The worker's silence is measured from its first input.
                        Framed::First => last_output = Instant::now(),
                        Framed::More => {}
                    }
                    if let Err(why) = write_input(worker, &buf).await {
                        return Outcome::Failed(why);
                    }
                }
                Ok(()) = self.details.changed() => self.details_changed(),
                ev = worker.events.recv() => {
                    let Some(ev) = ev else {
                        let status = worker.child.wait().await;
                        return Outcome::Failed(format!("the worker exited ({})", status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())));
                    };
                    last_output = Instant::now();
                    if let WorkerEvent::EncoderFailed { encoder, hardware, message } = &ev {
                        self.encoder_failure = Some(EncoderFailure { encoder: encoder.clone(), hardware: *hardware, message: message.clone() });
                    }
                    self.on_event(ev);
                }
                _ = tick.tick() => {
                    if let Some(why) = self.check_room() {
                        return Outcome::Failed(why);
                    }
                    if input.started && last_input.elapsed() < Duration::from_secs(5) && last_output.elapsed() > STALL_TIMEOUT {
                        return Outcome::Failed(format!("the worker stalled (no progress for {STALL_TIMEOUT:?})"));
                    }
                }
            }
        }
    }

    /// The broadcaster's details changed: the stream state takes them (keeping the size the worker
    /// reported when the publisher's has none).
    fn details_changed(&mut self) {
        let d = self.details.borrow_and_update().clone();
        self.t.deps.stream.update(|st| {
            if let Some(b) = st.broadcaster.as_mut() {
                let (w, h) = (b.stream_details.width, b.stream_details.height);
                b.stream_details = d;
                if b.stream_details.width == 0 {
                    (b.stream_details.width, b.stream_details.height) = (w, h);
                }
            }
        });
    }

    /// The once-a-second look at the HLS directory's room. The worker's muxer does not fail on a
    /// full disk (it loses the writes), so the supervisor watches the room itself. Some: the worker
    /// must be restarted, for this reason.
    fn check_room(&mut self) -> Option<String> {
        match free_bytes(&self.dir) {
            Some(free) if free < HLS_PROBE_BYTES as u64 => {
                return Some(format!("{free} bytes left in the HLS directory"));
            }
            Some(free) if self.disk_full && free >= 4 * HLS_PROBE_BYTES as u64 => {
                self.disk_full = false;
                room_again(&self.t);
            }
            _ => {}
        }
        None
    }

    /// The worker failed: kill it, and decide what next (wait for room, restart, fall back, or drop
    /// the broadcaster).
    async fn failed(&mut self, mut worker: Worker, why: String) -> Next {
        let _ = worker.child.start_kill();
        let status = worker.child.wait().await;
        if !has_room(&self.dir, HLS_PROBE_BYTES) {
            self.wait_for_room(&why).await;
            self.next_segments();
            return Next::Restart;
        }
        warn!(pid = worker.pid, ?status, "transcode worker failed ({why}); restarting it");
        if self.too_many_restarts() {
            error!(
                "the transcode worker failed {} times in {:?}; dropping the broadcaster",
                self.restarts.len(),
                RESTART_WINDOW
            );
            self.b.disconnect();
            return Next::Stop;
        }
        self.choose_fallback(&why);
        self.next_segments();
        Next::Restart
    }

    /// The HLS directory is full: delete the oldest segments, raise the alert (once), and pause
    /// before the next try. Not counted as a failure.
    async fn wait_for_room(&mut self, why: &str) {
        let dir = &self.dir;
        let freed = self.b.retention.prune_oldest();
        warn!(freed, "the HLS directory {} is full ({why}); old segments deleted, retrying", dir.display());
        if !self.disk_full {
            let alert =
                format!("the video directory ({}) is full; the stream pauses until there is room", dir.display());
            self.t.deps.health.submit(HealthInput::Hardware { metric: "hls", alert: Some(alert) });
        }
        self.disk_full = true;
        tokio::time::sleep(DISK_FULL_RETRY).await;
    }

    /// Count a restart: whether more than `MAX_RESTARTS` fell within `RESTART_WINDOW`.
    fn too_many_restarts(&mut self) -> bool {
        let now = Instant::now();
        self.restarts.push_back(now);
        while self.restarts.front().is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW) {
            self.restarts.pop_front();
        }
        self.restarts.len() > MAX_RESTARTS
    }

    /// The encoders for the next worker: libx264 after a hardware encoder's failure (or repeated
    /// failures of a hardware ladder), passthrough after the software encoder's.
    fn choose_fallback(&mut self, why: &str) {
        let t = &self.t;
        // A hardware encoder or a decode path (a GPU decodes and scales for libx264).
        let hardware = self.cfg.encoders.iter().find(|e| e.uses_device()).map(|e| e.label());
        match (self.encoder_failure.take(), hardware) {
            (Some(f), _) if f.hardware => fall_back(t, &mut self.cfg, &f.encoder, &f.message),
            (Some(f), None) => pass_through(t, &mut self.cfg, &f.encoder, &f.message),
            (_, Some(name)) => {
                self.hw_failures += 1;
                if self.hw_failures >= HW_FAILURES_BEFORE_FALLBACK {
                    let reason = format!("the worker failed {} times: {why}", self.hw_failures);
                    fall_back(t, &mut self.cfg, &name, &reason);
                }
            }
            _ => {}
        }
    }

    /// The next worker appends to the playlists (`EXT-X-DISCONTINUITY`) with new segment names.
    fn next_segments(&mut self) {
        self.cfg.append = true;
        self.cfg.segment_id = new_segment_id();
    }

    /// What the worker wrote or said: the broadcast's feed, telemetry, stream state, health.
    fn on_event(&mut self, ev: WorkerEvent) {
        let (t, b) = (&self.t, &self.b);
        let dir = &b.dir;
        match ev {
            WorkerEvent::Progress { variants, headroom, .. } => progress(t, variants, headroom),
            WorkerEvent::LadderChanged(change) => ladder_changed(t, &mut self.ladder, change),
            WorkerEvent::Started { width, height, encoders } => {
                info!(width, height, ?encoders, "transcoding");
                t.deps.stream.update(|st| {
                    if let Some(b) = st.broadcaster.as_mut() {
                        if b.stream_details.width == 0 {
                            b.stream_details.width = width;
                            b.stream_details.height = height;
                        }
                    }
                });
            }
            WorkerEvent::SegmentWritten(seg) => {
                b.publish(MediaEvent::SegmentWritten(seg));
                if self.thumbnails.is_none() {
                    self.thumbnails = Some(thumbnail::spawn_loop(
                        &t.deps.tasks,
                        dir.join(self.thumb_variant.to_string()),
                        b.images_dir.clone(),
                    ));
                }
            }
            WorkerEvent::PlaylistWritten { variant } => {
                b.publish(MediaEvent::PlaylistWritten { variant: Some(variant) })
            }
            WorkerEvent::Ready => {
                info!("stream playable: {}", dir.join("stream.m3u8").display());
                b.publish(MediaEvent::PlaylistWritten { variant: None });
            }
            WorkerEvent::PartWritten(part) => b.publish(MediaEvent::PartWritten(part)),
            WorkerEvent::InitWritten { variant, file } => b.publish(MediaEvent::InitWritten { variant, file }),
            WorkerEvent::Error { message } => error!("transcode worker: {message}"),
            WorkerEvent::EncoderFailed { encoder, hardware, message } => {
                error!(hardware, "transcode worker: encoder {encoder} failed: {message}")
            }
            WorkerEvent::Finished => info!("transcode worker finished"),
        }
    }

    /// The broadcaster left (or was dropped): finalise the playlists (`EXT-X-ENDLIST`), the stream
    /// goes offline, the broadcast ends (the publisher slot is freed), health clears, STREAM_STOPPED.
    fn end(mut self) {
        let t = &self.t;
        if let Some(t) = self.thumbnails.take() {
            t.cancel();
        }
        for n in 0..self.variant_count {
            if let Err(e) = ensure_endlist(&self.dir.join(n.to_string()).join("stream.m3u8")) {
                warn!("cannot finalise playlist {n}: {e}");
            }
        }
        t.deps.stream.update(|st| {
            st.online = false;
            st.stream_id = None;
            st.last_disconnect_time = Some(Utc::now());
            st.broadcaster = None;
            st.worker_pid = None;
            st.transcode.clear();
            st.encoders.clear();
        });
        // StreamEnded, the feed closes, the publisher slot is free.
        t.deps.media.end(&self.b);
        t.deps.telemetry.clear_stream();
        t.deps.health.submit(HealthInput::Encoder(None));
        t.deps.health.submit(HealthInput::Ladder(None));
        t.deps.health.submit(HealthInput::Hardware { metric: "hls", alert: None });
        publish_stream_event(t, Event::StreamStopped);
        info!("stream offline");
    }
}

/// The variants a broadcast is served in: one passthrough variant over capacity (`media::capacity`),
/// else the channel's ladder (`configured`), with a passthrough `source` variant after it for an
/// Enhanced RTMP source.
fn plan_ladder(
    b: &Broadcast,
    configured: Vec<crate::config::StreamOutputVariant>,
) -> Vec<crate::config::StreamOutputVariant> {
    if let Some(why) = &b.passthrough {
        info!(channel = %b.channel, "served as passthrough: {why}");
        return vec![passthrough_variant()];
    }
    let mut ladder = configured;
    // An Enhanced RTMP source (HEVC, AV1, VP9) is also served as it came, in fMP4, after the
    // H.264 rungs: players that decode it may pick it, the others keep to H.264.
    if b.source.container == crate::media::Container::FlvEnhanced && !ladder.iter().any(|v| v.video_passthrough) {
        ladder.push(crate::config::StreamOutputVariant { name: "source".into(), ..passthrough_variant() });
    }
    ladder
}

/// The encoder of each variant: the selected encoder (`encoders::selected`) planned per variant
/// with `hwaccel::plan_sessions` (NVENC's session cap), libx264 if the plan names one that is unknown.
async fn plan_encoders(
    t: &Arc<Transcoder>,
    ladder: &[crate::config::StreamOutputVariant],
    seg: u32,
) -> Vec<hwaccel::EncoderInfo> {
    let chosen = encoders::selected(t);
    let specs: Vec<_> = ladder.iter().map(|v| recipe::variant_spec(v, seg)).collect();
    let cap = nvenc_cap(&chosen).await;
    let plan = hwaccel::plan_sessions(&specs, &chosen.name, cap);
    encoders::report_session_plan(t, &plan);
    plan.encoders
        .iter()
        .map(|name| if *name == chosen.name { Ok(chosen.clone()) } else { recipe::encoder_info(name) })
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| {
            warn!("{e}; using {SOFTWARE_ENCODER}");
            software_encoders(ladder)
        })
}

/// Write one framed chunk to the worker's stdin, within `WRITE_TIMEOUT`. Err: why the worker failed.
async fn write_input(worker: &mut Worker, buf: &[u8]) -> Result<(), String> {
    let Some(stdin) = worker.stdin.as_mut() else { return Err("stdin closed".into()) };
    match tokio::time::timeout(WRITE_TIMEOUT, stdin.write_all(buf)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("writing to the worker: {e}")),
        Err(_) => Err(format!("the worker took no input for {WRITE_TIMEOUT:?}")),
    }
}

/// A worker's progress report: telemetry (speed, capacity, headroom) and the stream state's
/// per-variant transcode status.
fn progress(t: &Transcoder, variants: Vec<super::VariantProgress>, headroom: Option<f64>) {
    for v in &variants {
        t.deps.telemetry.encoder_progress(v.variant, &v.encoder, v.fps, v.speed);
        let capacity = v.preset.as_ref().map(|_| if v.busy > 0.01 { (v.speed / v.busy).min(99.0) } else { 99.0 });
        t.deps.telemetry.encoder_capacity(v.variant, capacity);
    }
    t.deps.telemetry.set_transcode_headroom(headroom);
    t.deps.stream.update(|st| st.transcode = variants);
}

/// The capacity step of the stream's ladder (`capacity`), kept across worker restarts, and the
/// variants' names for the health message.
struct LadderState {
    step: u32,
    names: Vec<String>,
}

/// The worker changed its ladder's presets (`capacity`): the health notice, TRANSCODE_DEGRADED, and the
/// step for the next worker.
fn ladder_changed(t: &Transcoder, ladder: &mut LadderState, change: LadderChange) {
    ladder.step = change.step;
    let name = |n: usize| ladder.names.get(n).cloned().unwrap_or_else(|| format!("variant {n}"));
    let rungs: Vec<RungPreset> = change
        .presets
        .iter()
        .zip(&change.configured)
        .enumerate()
        .filter_map(|(n, (p, c))| Some(RungPreset { name: name(n), preset: p.clone()?, configured: c.clone()? }))
        .collect();
    let message = capacity::health_message(&rungs, change.fits, &change.reason, change.speed, &change.heaviest);
    match &message {
        Some(m) => warn!(step = change.step, "{m}"),
        None => info!("the transcoder keeps up again at the configured x264 presets"),
    }
    t.deps.health.submit(HealthInput::Ladder(message.clone()));
    let degraded = change.presets.iter().zip(&change.configured).any(|(p, c)| p != c);
    let variants = change
        .presets
        .iter()
        .zip(&change.configured)
        .enumerate()
        .map(|(n, (p, c))| DegradedVariant {
            variant: n,
            name: name(n),
            preset: p.clone(),
            configured_preset: c.clone(),
            speed: change.speeds.get(n).copied().unwrap_or(0.0),
        })
        .collect();
    t.deps.bus.publish(Event::TranscodeDegraded(TranscodeDegraded {
        stream_id: t.deps.stream.get().stream_id.unwrap_or_default(),
        degraded,
        fits: change.fits,
        step: change.step,
        variants,
        speed: change.speed,
        headroom: change.headroom,
        reason: change.reason,
        message: message.unwrap_or_default(),
        timestamp: Utc::now(),
    }));
}

/// What a worker said about its failing encoder.
struct EncoderFailure {
    encoder: String,
    hardware: bool,
    message: String,
}

/// NVENC's session cap on the chosen GPU (None: not NVENC, no NVML, or no driver cap).
async fn nvenc_cap(chosen: &hwaccel::EncoderInfo) -> Option<u32> {
    let chosen = chosen.clone();
    tokio::task::spawn_blocking(move || hwaccel::gpu::GpuMonitor::cap_for(&chosen)).await.ok().flatten()
}

/// The one variant of a broadcast served as passthrough over capacity: the broadcaster's own video and
/// audio, nothing encoded.
fn passthrough_variant() -> crate::config::StreamOutputVariant {
    crate::config::StreamOutputVariant {
        name: "passthrough".into(),
        video_passthrough: true,
        audio_passthrough: true,
        ..Default::default()
    }
}

/// libx264 for every encoded variant, `copy` for passthrough.
fn software_encoders(variants: &[crate::config::StreamOutputVariant]) -> Vec<hwaccel::EncoderInfo> {
    variants
        .iter()
        .map(|v| {
            let name = if v.video_passthrough { "copy" } else { SOFTWARE_ENCODER };
            recipe::encoder_info(name).unwrap_or_else(|_| hwaccel::software_encoders().remove(0))
        })
        .collect()
}

/// Move the whole ladder to libx264 for the next worker and say so (admin status, health, log).
fn fall_back(t: &Transcoder, cfg: &mut WorkerConfig, from: &str, reason: &str) {
    cfg.encoders = software_encoders(&cfg.variants);
    cfg.debug_encoder_fault = None;
    let names = cfg.encoders.iter().map(|e| e.name.clone()).collect();
    encoders::report_fallback(t, from, SOFTWARE_ENCODER, reason, names);
}

/// The software encoder itself failed: serve the broadcaster's own video in every variant (no
/// encoding at all) for the rest of this stream, and say so.
fn pass_through(t: &Transcoder, cfg: &mut WorkerConfig, from: &str, reason: &str) {
    for v in &mut cfg.variants {
        v.video_passthrough = true;
    }
    cfg.encoders = software_encoders(&cfg.variants);
    cfg.debug_encoder_fault = None;
    let names = cfg.encoders.iter().map(|e| e.name.clone()).collect();
    encoders::report_fallback(t, from, "copy", reason, names);
    // Nothing is encoded any more: no x264 preset to speak of.
    t.deps.health.submit(HealthInput::Ladder(None));
}

/// Empty `dir` (creating it if needed). The directory itself stays: it may be a mount point (a
/// tmpfs for the segments).
fn reset_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// Whether the filesystem of `dir` has room for `bytes` more: a probe file that size can be written.
/// Only "no space" counts as no room (the stream is paused for it); other errors are the worker's.
/// The alert is raised below one segment's room and cleared above four (no flapping).
pub fn has_room(dir: &Path, bytes: usize) -> bool {
    use std::io::Write as _;
    let probe = dir.join(".space-probe");
    let chunk = [0u8; 64 * 1024];
    let written = std::fs::File::create(&probe).and_then(|mut f| {
        for _ in 0..bytes.div_ceil(chunk.len()) {
            f.write_all(&chunk)?;
        }
        f.sync_data()
    });
    let _ = std::fs::remove_file(&probe);
    !matches!(written, Err(e) if e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28))
}

/// Bytes an unprivileged writer may still write on the filesystem of `dir` (None if it cannot be told).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is a NUL-terminated string and `st` is a writable statvfs that the call fills.
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// What `frame_chunk` made of a chunk.
#[derive(Debug, PartialEq, Eq)]
enum Framed {
    /// Nothing to write (before the first random-access point, or set-up kept for later).
    Skip,
    /// The worker's first input: container header (FLV) and set-up, then the chunk.
    First,
    More,
}

/// What one worker has been given so far: whether its input has started, and for Enhanced RTMP
/// video (`Container::FlvEnhanced`) the Matroska writer its FLV tags go through.
#[derive(Debug, Default)]
struct WorkerInput {
    started: bool,
    /// FLV tags are re-wrapped as Matroska (`media::mkv`) instead of framed as FLV.
    matroska: bool,
    mkv: Option<MkvWriter>,
}

impl WorkerInput {
    fn new(container: crate::media::Container) -> Self {
        WorkerInput { matroska: container == crate::media::Container::FlvEnhanced, ..Default::default() }
    }
}

/// Turn a chunk into the bytes for the worker's stdin in `buf`. A worker (a fresh one, or one
/// restarted mid-stream) starts at a random-access point; FLV gets its file header and the last
/// sequence headers (re-stamped to the keyframe's time) in front, Enhanced RTMP FLV tags a Matroska
/// header made of the last sequence headers, byte-stream containers go as they came. FLV sequence
/// headers are remembered for the next worker.
fn frame_chunk(
    chunk: &MediaChunk,
    input: &mut WorkerInput,
    seq_video: &mut Option<FlvTag>,
    seq_audio: &mut Option<FlvTag>,
    buf: &mut Vec<u8>,
) -> Framed {
    match chunk {
        MediaChunk::Flv(tag) => {
            if tag.is_sequence_header() {
                if tag.kind == TAG_VIDEO {
                    *seq_video = Some(tag.clone())
                }
                if tag.kind == TAG_AUDIO {
                    *seq_audio = Some(tag.clone())
                }
                if !input.started {
                    return Framed::Skip;
                }
            }
            let mut framed = Framed::More;
            if !input.started {
                if !tag.is_video_keyframe() {
                    return Framed::Skip;
                }
                if input.matroska {
                    let Some(video) = seq_video.as_ref() else { return Framed::Skip };
                    match MkvWriter::start(video, seq_audio.as_ref(), buf) {
                        Ok(w) => input.mkv = Some(w),
                        Err(e) => {
                            buf.clear();
                            debug!("cannot start the worker's Matroska input yet: {e}");
                            return Framed::Skip;
                        }
                    }
                } else {
                    buf.extend_from_slice(&FLV_HEADER);
                    for s in [seq_video.as_ref(), seq_audio.as_ref()].into_iter().flatten() {
                        s.at(tag.timestamp).write_to(buf);
                    }
                }
                input.started = true;
                framed = Framed::First;
            }
            match input.mkv.as_mut() {
                Some(mkv) => mkv.write(tag, buf),
                None => tag.write_to(buf),
            }
            framed
        }
        MediaChunk::Bytes { data, random_access } => {
            let mut framed = Framed::More;
            if !input.started {
                if !random_access {
                    return Framed::Skip;
                }
                input.started = true;
                framed = Framed::First;
            }
            buf.extend_from_slice(data);
            framed
        }
    }
}

/// The HLS directory has room again: the alert clears.
fn room_again(t: &Transcoder) {
    info!("the HLS directory has room again; the stream resumes");
    t.deps.health.submit(HealthInput::Hardware { metric: "hls", alert: None });
}

/// Close stdin so the worker flushes and finalises (what it writes meanwhile, the last segments and
/// playlists, still goes to `on`); kill it if it takes too long.
async fn finish_worker(worker: &mut Worker, mut on: impl FnMut(WorkerEvent)) {
    drop(worker.stdin.take());
    let wait = async {
        while let Some(ev) = worker.events.recv().await {
            on(ev);
        }
        worker.child.wait().await
    };
    match tokio::time::timeout(FINISH_TIMEOUT, wait).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(status) => warn!(?status, "transcode worker ended with an error"),
        Err(_) => {
            warn!("transcode worker did not finish in {FINISH_TIMEOUT:?}; killing it");
            let _ = worker.child.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn tag(kind: u8, timestamp: u32, data: &'static [u8]) -> MediaChunk {
        MediaChunk::Flv(FlvTag { kind, timestamp, data: Bytes::from_static(data) })
    }

    #[test]
    fn flv_starts_at_a_keyframe_with_the_sequence_headers_in_front() {
        let (mut started, mut sv, mut sa, mut buf) = (WorkerInput::default(), None, None, Vec::new());
        let seq_v = tag(TAG_VIDEO, 0, &[0x17, 0, 0, 0, 0]);
        let seq_a = tag(TAG_AUDIO, 0, &[0xaf, 0]);
        let inter = tag(TAG_VIDEO, 40, &[0x27, 1, 0, 0, 0]);
        let key = tag(TAG_VIDEO, 80, &[0x17, 1, 0, 0, 0]);
        assert_eq!(frame_chunk(&seq_v, &mut started, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert_eq!(frame_chunk(&seq_a, &mut started, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert_eq!(frame_chunk(&inter, &mut started, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert!(buf.is_empty(), "nothing before the first keyframe");
        assert_eq!(frame_chunk(&key, &mut started, &mut sv, &mut sa, &mut buf), Framed::First);
        assert!(buf.starts_with(&FLV_HEADER), "FLV file header first");
        // header + two sequence headers (11-byte tag header + data + 4-byte size each) + the keyframe.
        assert_eq!(buf.len(), FLV_HEADER.len() + (11 + 5 + 4) + (11 + 2 + 4) + (11 + 5 + 4));
        // The replayed sequence headers carry the keyframe's time (80 ms), not their own.
        let ts = |at: usize| u32::from_be_bytes([buf[at + 7], buf[at + 4], buf[at + 5], buf[at + 6]]);
        assert_eq!(ts(FLV_HEADER.len()), 80);
        buf.clear();
        assert_eq!(frame_chunk(&inter, &mut started, &mut sv, &mut sa, &mut buf), Framed::More);
        assert_eq!(buf.len(), 11 + 5 + 4);
    }

    #[test]
    fn byte_streams_pass_unchanged_from_a_random_access_point() {
        let (mut started, mut sv, mut sa, mut buf) = (WorkerInput::default(), None, None, Vec::new());
        let mid = MediaChunk::Bytes { data: Bytes::from_static(&[0x47; 188]), random_access: false };
        let join = MediaChunk::Bytes { data: Bytes::from_static(&[0x47, 1, 2]), random_access: true };
        assert_eq!(frame_chunk(&mid, &mut started, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert!(buf.is_empty());
        assert_eq!(frame_chunk(&join, &mut started, &mut sv, &mut sa, &mut buf), Framed::First);
        assert_eq!(buf, [0x47, 1, 2], "no header is added to a byte-stream container");
        buf.clear();
        assert_eq!(frame_chunk(&mid, &mut started, &mut sv, &mut sa, &mut buf), Framed::More);
        assert_eq!(buf.len(), 188);
    }

    #[test]
    fn enhanced_rtmp_starts_a_matroska_stream_at_a_keyframe() {
        let mut input = WorkerInput::new(crate::media::Container::FlvEnhanced);
        let (mut sv, mut sa, mut buf) = (None, None, Vec::new());
        let seq_v = tag(TAG_VIDEO, 0, &[0x90, b'h', b'v', b'c', b'1', 1, 2, 3]);
        let seq_a = tag(TAG_AUDIO, 0, &[0xaf, 0, 0x11, 0x90]);
        let inter = tag(TAG_VIDEO, 40, &[0xa1, b'h', b'v', b'c', b'1', 0, 0, 0, 5]);
        let key = tag(TAG_VIDEO, 80, &[0x91, b'h', b'v', b'c', b'1', 0, 0, 0, 6]);
        assert_eq!(frame_chunk(&seq_v, &mut input, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert_eq!(frame_chunk(&seq_a, &mut input, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert_eq!(frame_chunk(&inter, &mut input, &mut sv, &mut sa, &mut buf), Framed::Skip);
        assert!(buf.is_empty(), "nothing before the first keyframe");
        assert_eq!(frame_chunk(&key, &mut input, &mut sv, &mut sa, &mut buf), Framed::First);
        assert!(buf.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]), "an EBML header, not FLV");
        assert!(buf.windows(16).any(|w| w == b"V_MPEGH/ISO/HEVC"));
        buf.clear();
        assert_eq!(frame_chunk(&inter, &mut input, &mut sv, &mut sa, &mut buf), Framed::More);
        assert!(buf.starts_with(&[0x1f, 0x43, 0xb6, 0x75]), "one cluster per frame");
    }
}
