//! The worker's real-time output (`WorkerConfig::realtime`): the real-time variant's encoded access
//! units as they come out of its encoder, and the decoded audio encoded once to Opus (libopus, 48 kHz
//! stereo, 20 ms frames), written to the daemon's Unix socket (`rtlink` framing) by a writer thread.
//! The queue to that thread is bounded (`QUEUE`) and never blocks the pipeline: when it is full the
//! frame is dropped, and video then waits for the next keyframe (and asks for one). A reader thread
//! turns the daemon's keyframe requests into `stage::FORCE_KEYFRAME`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};

use ff::software::resampling;
use ff::{codec, frame, Packet, Rational};
use ffmpeg_next as ff;

use super::stage::{FORCE_KEYFRAME, FORCE_KEYFRAME_VARIANT};
use crate::transcode::rtlink;
use crate::transcode::RealtimeConfig;

/// Frames queued for the writer thread.
const QUEUE: usize = 256;
/// Opus: 48 kHz, stereo, 20 ms.
const RATE: u32 = 48_000;
const OPUS_KBPS: usize = 96;

/// The real-time output while the worker runs.
pub(super) struct RealtimeOut {
    pub(super) variant: usize,
    tx: SyncSender<Vec<u8>>,
    /// Video was dropped: skip to the next keyframe.
    skip_video: bool,
    opus: Option<Opus>,
    opus_failed: bool,
}

impl RealtimeOut {
    /// Connect to the daemon's socket; `None` (logged) when that fails: the worker goes on without.
    pub(super) fn connect(cfg: &RealtimeConfig) -> Option<RealtimeOut> {
        let stream = match UnixStream::connect(&cfg.socket) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("real-time output: cannot connect to {}: {e}", cfg.socket.display());
                return None;
            }
        };
        let mut reader = stream.try_clone().ok()?;
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
        let mut writer = stream;
        std::thread::Builder::new()
            .name("realtime-out".into())
            .spawn(move || {
                while let Ok(buf) = rx.recv() {
                    if writer.write_all(&buf).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        std::thread::Builder::new()
            .name("realtime-in".into())
            .spawn(move || {
                let mut b = [0u8; 64];
                while let Ok(n) = reader.read(&mut b) {
                    if n == 0 {
                        return;
                    }
                    if b[..n].contains(&rtlink::KEYFRAME_REQUEST) {
                        FORCE_KEYFRAME.store(true, Ordering::Relaxed);
                    }
                }
            })
            .ok()?;
        FORCE_KEYFRAME_VARIANT.store(cfg.variant, Ordering::Relaxed);
        tracing::info!(variant = cfg.variant, "real-time output connected");
        Some(RealtimeOut { variant: cfg.variant, tx, skip_video: false, opus: None, opus_failed: false })
    }

    fn send(&mut self, kind: u8, key: bool, pts_us: u64, data: &[u8]) -> bool {
        let mut buf = Vec::with_capacity(rtlink::HEADER + data.len());
        buf.extend_from_slice(&rtlink::header(kind, key, pts_us, data.len()));
        buf.extend_from_slice(data);
        match self.tx.try_send(buf) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// An encoded packet of the real-time variant (time base `tb`).
    pub(super) fn video(&mut self, pkt: &Packet, tb: Rational) {
        let Some(data) = pkt.data() else { return };
        let key = pkt.is_key();
        if self.skip_video && !key {
            return;
        }
        let pts = pkt.pts().or(pkt.dts()).unwrap_or(0).max(0);
        let pts_us = (pts as f64 * f64::from(tb) * 1e6) as u64;
        if self.send(rtlink::VIDEO, key, pts_us, data) {
            self.skip_video = false;
        } else {
            self.skip_video = true;
            FORCE_KEYFRAME.store(true, Ordering::Relaxed);
        }
    }

    /// A decoded audio frame whose time is `t` seconds: resampled to 48 kHz stereo and encoded to Opus.
    pub(super) fn audio(&mut self, decoded: &frame::Audio, t: f64) {
        if self.opus_failed {
            return;
        }
        if self.opus.is_none() {
            match Opus::open(decoded) {
                Ok(o) => self.opus = Some(o),
                Err(e) => {
                    tracing::warn!("real-time output: no Opus encoder ({e}); WebRTC viewers get no audio");
                    self.opus_failed = true;
                    return;
                }
            }
        }
        let mut packets = Vec::new();
        if let Some(o) = self.opus.as_mut() {
            if let Err(e) = o.push(decoded, t, &mut packets) {
                tracing::warn!("real-time output: Opus: {e}");
                self.opus_failed = true;
            }
        }
        for (pts, data) in packets {
            self.send(rtlink::AUDIO, false, pts, &data);
        }
    }
}

/// The Opus encoder and what feeds it: a resampler to 48 kHz packed float stereo and a sample queue
/// (the encoder takes 960-sample frames).
struct Opus {
    enc: ff::encoder::Audio,
    resampler: resampling::Context,
    /// Interleaved stereo samples waiting for a full frame.
    queue: Vec<f32>,
    /// The pts (in 48 kHz samples) of the first queued sample.
    next_pts: Option<i64>,
    frame_size: usize,
}

fn layout_of(f: &frame::Audio) -> ff::ChannelLayout {
    let l = f.channel_layout();
    if l.is_empty() {
        ff::ChannelLayout::default(i32::from(f.channels()))
    } else {
        l
    }
}

impl Opus {
    fn open(first: &frame::Audio) -> Result<Opus, ff::Error> {
        let codec = ff::encoder::find_by_name("libopus")
            .or_else(|| ff::encoder::find(codec::Id::OPUS))
            .ok_or(ff::Error::EncoderNotFound)?;
        let packed = ff::format::Sample::F32(ff::format::sample::Type::Packed);
        let mut enc = codec::context::Context::new_with_codec(codec).encoder().audio()?;
        enc.set_rate(RATE as i32);
        enc.set_channel_layout(ff::ChannelLayout::STEREO);
        enc.set_format(packed);
        enc.set_bit_rate(OPUS_KBPS * 1000);
        enc.set_time_base(Rational(1, RATE as i32));
        let mut opts = ff::Dictionary::new();
        opts.set("application", "lowdelay");
        opts.set("frame_duration", "20");
        let enc = enc.open_as_with(codec, opts)?;
        let frame_size = (enc.frame_size() as usize).max(1);
        let resampler = resampling::Context::get(
            first.format(),
            layout_of(first),
            first.rate(),
            packed,
            ff::ChannelLayout::STEREO,
            RATE,
        )?;
        Ok(Opus { enc, resampler, queue: Vec::new(), next_pts: None, frame_size })
    }

    /// Resample `decoded` (at `t` seconds), encode every full frame, collect (pts µs, packet).
    fn push(&mut self, decoded: &frame::Audio, t: f64, out: &mut Vec<(u64, Vec<u8>)>) -> Result<(), ff::Error> {
        let packed = ff::format::Sample::F32(ff::format::sample::Type::Packed);
        let cap = decoded.samples() * 2 + 256;
        let mut res = frame::Audio::new(packed, cap, ff::ChannelLayout::STEREO);
        res.set_rate(RATE);
        let mut input = decoded.clone();
        input.set_channel_layout(layout_of(decoded));
        self.resampler.run(&input, &mut res)?;
        let n = res.samples();
        if self.queue.is_empty() || self.next_pts.is_none() {
            self.next_pts = Some((t * f64::from(RATE)).round() as i64 - (self.queue.len() / 2) as i64);
        }
        let bytes = &res.data(0)[..n * 2 * 4];
        self.queue.extend(bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])));
        let size = self.frame_size;
        while self.queue.len() >= size * 2 {
            let mut f = frame::Audio::new(packed, size, ff::ChannelLayout::STEREO);
            f.set_rate(RATE);
            let pts = self.next_pts.unwrap_or(0);
            f.set_pts(Some(pts));
            {
                let dst = f.data_mut(0);
                for (i, s) in self.queue.drain(..size * 2).enumerate() {
                    dst[i * 4..i * 4 + 4].copy_from_slice(&s.to_ne_bytes());
                }
            }
            self.next_pts = Some(pts + size as i64);
            self.enc.send_frame(&f)?;
            let mut pkt = Packet::empty();
            while self.enc.receive_packet(&mut pkt).is_ok() {
                if let Some(d) = pkt.data() {
                    let p = pkt.pts().unwrap_or(pts).max(0);
                    out.push((p as u64 * 1_000_000 / u64::from(RATE), d.to_vec()));
                }
            }
        }
        Ok(())
    }
}
