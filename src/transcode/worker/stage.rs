//! Encoding stages of the software ladder: every software-encoded variant runs on a thread of its
//! own, which takes its picture (the decoded frame, or the picture of the next larger variant),
//! scales it (`scale` for exact 2:1 and 3:2 steps, libswscale otherwise), hands a reference to the
//! stages that scale from it, encodes it, and sends the packets back to the worker's main thread,
//! which muxes them. The variants run in parallel without slice threads inside each encoder and
//! pictures are shared by reference, not copied.
//!
//! Channels: frames into a stage are bounded (`FRAMES_IN_FLIGHT`) and the sender blocks, so the
//! worker runs at the pace of its slowest encoder and stdin back-pressures the daemon's feed (which
//! applies its own policy to a worker that cannot keep up). Packets back are unbounded, but each stage
//! holds at most `FRAMES_IN_FLIGHT` frames, so at most a few packets per stage are ever queued; an
//! unbounded return path is what keeps a blocked sender from deadlocking the muxer.
//!
//! Capacity (`transcode::capacity`): each stage adds the wall time it spends scaling and encoding to
//! its `StageControl`, which the main thread reads once a second (the stage's busy fraction). When the
//! policy moves an x264 rung to another preset, the main thread sets it there and the stage switches at
//! its next segment boundary (the keyframe it forces anyway): it drains its encoder and opens a new
//! libx264 encoder with the same recipe but that preset (same size, pixel format, time base, GOP,
//! bitrate and threads, and the configured preset's SPS and PPS: `hwaccel::recipe::stepped_x264_recipe`),
//! so the packets continue on the same timeline under the same parameter sets (the CMAF init segment stays
//! valid), and the worker keeps its decoder and everything else.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ff::software::scaling;
use ff::{frame, picture, Dictionary, Packet, Rational};
use ffmpeg_next as ff;

use super::scale;
use crate::transcode::capacity;
use crate::transcode::recipe::EncoderRecipe;
use crate::transcode::TranscodeError;

/// The variant whose encoder takes forced keyframes (the real-time variant; `usize::MAX`: none). The
/// worker is a process of its own, so there is one per process.
pub static FORCE_KEYFRAME_VARIANT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// A keyframe request (from a WebRTC viewer, coalesced by the daemon) waiting for the next frame.
pub static FORCE_KEYFRAME: AtomicBool = AtomicBool::new(false);

/// Whether variant `variant`'s next frame is forced to be a keyframe (takes the request). A forced
/// keyframe adds an IDR inside a segment; segments still end at the boundary keyframes.
pub fn take_forced_keyframe(variant: usize) -> bool {
    FORCE_KEYFRAME_VARIANT.load(Ordering::Relaxed) == variant && FORCE_KEYFRAME.swap(false, Ordering::Relaxed)
}

/// Frames queued into a stage before its feeder blocks.
pub const FRAMES_IN_FLIGHT: usize = 2;

/// One software-encoded variant: its open encoder and how it gets its picture.
pub struct VideoEncode {
    pub encoder: ff::encoder::Video,
    pub recipe: EncoderRecipe,
    /// The recipe as configured, before any capacity step (each step is made from it).
    pub configured: EncoderRecipe,
    pub width: u32,
    pub height: u32,
    pub pix_fmt: ff::format::Pixel,
    /// libx264's `threads` the encoder was opened with (kept when the preset changes).
    pub threads: Option<u32>,
    /// The variant this one scales from (`None`: the decoded frame, or the filter graph's output).
    pub source: Option<usize>,
    /// The hardware ladder's filter-graph output that feeds it (already scaled on the device and
    /// downloaded), if any.
    pub graph_out: Option<usize>,
}

/// Open a software video encoder for `rec` at `width`×`height` in `pix_fmt` (time base 1/frame rate),
/// with the recipe's options and, for libx264, `threads`.
pub fn open_encoder(
    rec: &EncoderRecipe,
    width: u32,
    height: u32,
    pix_fmt: ff::format::Pixel,
    threads: Option<u32>,
) -> Result<ff::encoder::Video, TranscodeError> {
    let codec =
        ff::encoder::find_by_name(&rec.encoder).ok_or_else(|| TranscodeError::EncoderMissing(rec.encoder.clone()))?;
    let mut enc = ff::codec::context::Context::new_with_codec(codec).encoder().video()?;
    enc.set_width(width);
    enc.set_height(height);
    enc.set_format(pix_fmt);
    enc.set_time_base(Rational(1, rec.framerate as i32));
    enc.set_frame_rate(Some(Rational(rec.framerate as i32, 1)));
    let mut opts = Dictionary::new();
    for (k, val) in &rec.options {
        opts.set(k, val);
    }
    if let Some(t) = threads {
        opts.set("threads", &t.to_string());
    }
    Ok(enc.open_as_with(codec, opts)?)
}

/// `usize::MAX` in a preset slot: not an x264 rung.
const NO_PRESET: usize = usize::MAX;

/// What a stage shares with the main thread (see the module doc): the wall time it worked since the
/// last read, and its x264 preset (an index in `hwaccel::recipe::X264_PRESETS`), wanted and applied.
#[derive(Debug)]
pub struct StageControl {
    work_ns: AtomicU64,
    wanted: AtomicUsize,
    applied: AtomicUsize,
}

impl StageControl {
    fn new(recipe: &EncoderRecipe) -> StageControl {
        let preset = x264_preset_of(recipe).unwrap_or(NO_PRESET);
        StageControl { work_ns: AtomicU64::new(0), wanted: AtomicUsize::new(preset), applied: AtomicUsize::new(preset) }
    }

    /// The work time since the last call.
    pub fn take_work(&self) -> Duration {
        Duration::from_nanos(self.work_ns.swap(0, Ordering::Relaxed))
    }

    fn add_work(&self, d: Duration) {
        self.work_ns.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Ask for preset `preset` from the next segment on (x264 rungs only).
    pub fn want(&self, preset: usize) {
        if self.applied.load(Ordering::Relaxed) != NO_PRESET {
            self.wanted.store(preset, Ordering::Relaxed);
        }
    }

    /// The preset the encoder runs now (`None`: not an x264 rung).
    pub fn applied(&self) -> Option<usize> {
        Some(self.applied.load(Ordering::Relaxed)).filter(|p| *p != NO_PRESET)
    }

    /// Whether the encoder runs the preset asked for.
    pub fn settled(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) == self.applied.load(Ordering::Relaxed)
    }
}

/// The x264 preset of a libx264 recipe (an index in `X264_PRESETS`).
fn x264_preset_of(recipe: &EncoderRecipe) -> Option<usize> {
    if recipe.encoder != hwaccel::recipe::SOFTWARE_ENCODER {
        return None;
    }
    recipe.option("preset").and_then(capacity::preset_index)
}

/// What every stage needs to know about one input frame, decided once by the main thread.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Input time of the frame and of the run's first frame (seconds).
    pub t: f64,
    pub t0: f64,
    /// Per variant: encode this frame (frame-rate conversion drops the others).
    pub wants: Vec<bool>,
    /// Per variant: scale this frame (it wants it, or a variant scaled from it does).
    pub needed: Vec<bool>,
    /// Per variant: the output timestamp in 1/framerate.
    pub pts: Vec<i64>,
}

struct FrameMsg {
    picture: frame::Video,
    plan: Arc<Plan>,
}

/// What stages send back.
pub enum Encoded {
    Packet { variant: usize, packet: Packet },
    Failed(TranscodeError),
}

/// The running stages of a ladder.
pub struct Ladder {
    /// Senders of the stages fed with decoded frames, by variant.
    roots: Vec<(usize, SyncSender<FrameMsg>)>,
    pub output: Receiver<Encoded>,
    threads: Vec<JoinHandle<()>>,
    /// Each stage's control, by variant.
    pub controls: Vec<(usize, Arc<StageControl>)>,
}

fn stopped(variant: usize) -> TranscodeError {
    TranscodeError::Other(format!("the encoding stage of variant {variant} stopped"))
}

/// A new reference to `f`'s buffers (no pixel copy).
fn new_ref(f: &frame::Video) -> Result<frame::Video, TranscodeError> {
    // SAFETY: av_frame_clone makes a new AVFrame referencing the same (refcounted) buffers; the
    // wrapper owns and frees it.
    unsafe {
        let p = ff::ffi::av_frame_clone(f.as_ptr());
        if p.is_null() {
            return Err(TranscodeError::Other("out of memory referencing a frame".into()));
        }
        Ok(frame::Video::wrap(p))
    }
}

fn writable(f: &frame::Video) -> bool {
    // SAFETY: reads the refcounts of a frame we own.
    unsafe { ff::ffi::av_frame_is_writable(f.as_ptr() as *mut _) > 0 }
}

/// libswscale's context, owned by one stage.
struct Scaler(scaling::Context);

// SAFETY: an SwsContext has no thread affinity; the stage that creates it is the only one using it.
unsafe impl Send for Scaler {}

struct Stage {
    index: usize,
    enc: VideoEncode,
    scaler: Option<Scaler>,
    /// The last scaled picture, reused once nobody else holds it.
    spare: Option<frame::Video>,
    children: Vec<(usize, SyncSender<FrameMsg>)>,
    last_segment: Option<i64>,
    out: Sender<Encoded>,
    control: Arc<StageControl>,
}

impl Stage {
    fn run(mut self, input: Receiver<FrameMsg>) {
        while let Ok(msg) = input.recv() {
            if let Err(e) = self.on_frame(msg) {
                let _ = self.out.send(Encoded::Failed(e));
                return;
            }
        }
        // Input closed: flush the encoder; dropping `children` then closes theirs.
        let _ = self.enc.encoder.send_eof();
        if let Err(e) = self.drain() {
            let _ = self.out.send(Encoded::Failed(e));
        }
    }

    fn encoder_error(&self, e: ff::Error) -> TranscodeError {
        crate::transcode::recipe::encoder_error(&self.enc.recipe, e)
    }

    fn on_frame(&mut self, msg: FrameMsg) -> Result<(), TranscodeError> {
        let i = self.index;
        let src = msg.picture;
        let direct =
            src.width() == self.enc.width && src.height() == self.enc.height && src.format() == self.enc.pix_fmt;
        let started = Instant::now();
        let mut pic = if direct { src } else { self.scale(&src)? };
        self.control.add_work(started.elapsed());
        for (c, tx) in &self.children {
            if msg.plan.needed.get(*c).copied().unwrap_or(false) {
                // A child that stopped has sent its reason first; the main thread reports that one.
                tx.send(FrameMsg { picture: new_ref(&pic)?, plan: msg.plan.clone() }).map_err(|_| stopped(*c))?;
            }
        }
        if msg.plan.wants.get(i).copied().unwrap_or(false) {
            let rec = &self.enc.recipe;
            let pts = msg.plan.pts.get(i).copied().unwrap_or_default();
            let fps = f64::from(rec.framerate);
            let gop = i64::from(rec.gop.max(1));
            let segment = super::timing::output_slot(msg.plan.t - msg.plan.t0, fps).div_euclid(gop);
            let boundary = self.last_segment != Some(segment);
            let key = boundary || take_forced_keyframe(i);
            self.last_segment = Some(segment);
            let started = Instant::now();
            if boundary && !self.control.settled() {
                self.switch_preset()?;
            }
            pic.set_pts(Some(pts));
            pic.set_kind(if key { picture::Type::I } else { picture::Type::None });
            self.enc.encoder.send_frame(&pic).map_err(|e| self.encoder_error(e))?;
            self.drain()?;
            self.control.add_work(started.elapsed());
        }
        if !direct {
            self.spare = Some(pic);
        }
        Ok(())
    }

    /// Move to the preset the main thread asked for: drain the encoder, open a new one with that preset.
    fn switch_preset(&mut self) -> Result<(), TranscodeError> {
        let wanted = self.control.wanted.load(Ordering::Relaxed);
        let Some(name) = hwaccel::recipe::X264_PRESETS.get(wanted) else { return Ok(()) };
        let rec = hwaccel::recipe::stepped_x264_recipe(&self.enc.configured, name);
        let _ = self.enc.encoder.send_eof();
        self.drain()?;
        let (w, h, fmt) = (self.enc.width, self.enc.height, self.enc.pix_fmt);
        self.enc.encoder = open_encoder(&rec, w, h, fmt, self.enc.threads).map_err(|e| TranscodeError::Encoder {
            encoder: rec.encoder.clone(),
            hardware: false,
            message: format!("reopening at preset {name}: {e}"),
        })?;
        tracing::info!(variant = self.index, preset = %name, "x264 preset changed at a segment boundary");
        self.enc.recipe = rec;
        self.control.applied.store(wanted, Ordering::Relaxed);
        Ok(())
    }

    /// Scale `src` into the spare picture (or a new one while the spare is still referenced).
    fn scale(&mut self, src: &frame::Video) -> Result<frame::Video, TranscodeError> {
        let (w, h, fmt) = (self.enc.width, self.enc.height, self.enc.pix_fmt);
        let mut dst = match self.spare.take() {
            Some(p) if p.width() == w && p.height() == h && p.format() == fmt && writable(&p) => p,
            _ => frame::Video::new(fmt, w, h),
        };
        if let Some(step) = scale::step_for(src, fmt, w, h) {
            scale::run(step, src, &mut dst);
            return Ok(dst);
        }
        let flags = scaler_flags(self.enc.recipe.sws_flags);
        let scaler = match self.scaler.take() {
            Some(Scaler(mut s)) => {
                s.cached(src.format(), src.width(), src.height(), fmt, w, h, flags);
                s
            }
            None => scaling::Context::get(src.format(), src.width(), src.height(), fmt, w, h, flags)?,
        };
        self.scaler.insert(Scaler(scaler)).0.run(src, &mut dst)?;
        Ok(dst)
    }

    fn drain(&mut self) -> Result<(), TranscodeError> {
        loop {
            let mut packet = Packet::empty();
            match self.enc.encoder.receive_packet(&mut packet) {
                Ok(()) => {
                    if self.out.send(Encoded::Packet { variant: self.index, packet }).is_err() {
                        return Ok(()); // the main thread is gone
                    }
                }
                Err(ff::Error::Eof) | Err(ff::Error::Other { errno: ff::util::error::EAGAIN }) => return Ok(()),
                Err(e) => return Err(self.encoder_error(e)),
            }
        }
    }
}

impl Ladder {
    /// Start a thread per encode. A stage whose `source` is another variant gets its pictures from
    /// that variant's stage; the others are fed by `send` with decoded frames.
    pub fn start(encodes: Vec<(usize, VideoEncode)>) -> Result<Ladder, TranscodeError> {
        let (out_tx, output) = mpsc::channel();
        let sources: Vec<(usize, Option<usize>)> = encodes.iter().map(|(i, e)| (*i, e.source)).collect();
        let mut channels = Vec::new();
        let mut senders = Vec::new();
        for (i, enc) in encodes {
            let (tx, rx) = mpsc::sync_channel(FRAMES_IN_FLIGHT);
            senders.push((i, tx));
            channels.push((i, enc, rx));
        }
        let sender_of = |c: usize| senders.iter().find(|(n, _)| *n == c).map(|(_, tx)| tx.clone());
        let mut roots = Vec::new();
        let mut threads = Vec::new();
        let mut controls = Vec::new();
        for (i, enc, rx) in channels {
            if enc.source.is_none() {
                roots.extend(sender_of(i).map(|tx| (i, tx)));
            }
            let children = sources
                .iter()
                .filter(|(_, s)| *s == Some(i))
                .filter_map(|(c, _)| sender_of(*c).map(|tx| (*c, tx)))
                .collect();
            let control = Arc::new(StageControl::new(&enc.recipe));
            controls.push((i, control.clone()));
            let stage = Stage {
                index: i,
                enc,
                scaler: None,
                spare: None,
                children,
                last_segment: None,
                out: out_tx.clone(),
                control,
            };
            let out = out_tx.clone();
            let thread = std::thread::Builder::new().name(format!("encode-{i}")).spawn(move || {
                // A panic in a codec wrapper must not leave the variant silently stalled.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stage.run(rx))).is_err() {
                    let _ = out.send(Encoded::Failed(TranscodeError::Other(format!("encoding stage {i} panicked"))));
                }
            })?;
            threads.push(thread);
        }
        Ok(Ladder { roots, output, threads, controls })
    }

    /// Hand a decoded frame to the stages that scale from it (blocks while one of them is
    /// `FRAMES_IN_FLIGHT` frames behind). An error means a stage stopped; its reason, if it gave one,
    /// is waiting in `output`.
    pub fn send(&self, decoded: &frame::Video, plan: Plan) -> Result<(), TranscodeError> {
        let plan = Arc::new(plan);
        for (i, tx) in &self.roots {
            if plan.needed.get(*i).copied().unwrap_or(false) {
                tx.send(FrameMsg { picture: new_ref(decoded)?, plan: plan.clone() }).map_err(|_| stopped(*i))?;
            }
        }
        Ok(())
    }

    /// Hand variant `variant`'s own picture (the hardware ladder's downloaded output for it) to its stage
    /// (blocks while it is `FRAMES_IN_FLIGHT` frames behind). An error means the stage stopped.
    pub fn send_to(&self, variant: usize, picture: &frame::Video, plan: Plan) -> Result<(), TranscodeError> {
        let Some((_, tx)) = self.roots.iter().find(|(i, _)| *i == variant) else {
            return Err(stopped(variant));
        };
        tx.send(FrameMsg { picture: new_ref(picture)?, plan: Arc::new(plan) }).map_err(|_| stopped(variant))
    }

    /// Close the input: every stage flushes its encoder and stops; `output` ends when all have.
    pub fn close(&mut self) {
        self.roots.clear();
    }

    /// Wait for the stage threads (after `close` and after `output` ended).
    pub fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// libswscale's flags for a recipe's scaler name (`sws_flags`; bilinear unless named otherwise).
fn scaler_flags(name: &str) -> scaling::Flags {
    match name {
        "fast_bilinear" => scaling::Flags::FAST_BILINEAR,
        "bicubic" => scaling::Flags::BICUBIC,
        "lanczos" => scaling::Flags::LANCZOS,
        _ => scaling::Flags::BILINEAR,
    }
}
