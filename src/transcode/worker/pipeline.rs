//! The worker's pipeline: demux once, decode once, and dispatch each packet or frame to the variants
//! (passthrough copies, the software stages, or the hardware ladder); mux what comes back, report the
//! files written (`WorkerEvent`s) and the progress, write the master playlist once every variant has a
//! segment, and finalise everything when the input ends.

use std::time::Instant;

use ff::codec::{self, threading};
use ff::{frame, media, picture, Packet, Rational};
use ffmpeg_next as ff;
use hwaccel::{EncoderInfo, InputSpec};

use super::codecs::codec_from_annexb;
use super::emit::emit;
use super::headroom::{Headroom, VariantName};
use super::hw::HwPath;
use super::master::{standard_rate, write_master};
use super::realtime::RealtimeOut;
use super::sink::Sink;
use super::stage::{self, Encoded, Ladder, Plan};
use super::timing::{output_pts, output_slot};
use super::variant::{audio_encoded, AudioPath, Setup, Source, StageInfo, Variant, VideoPath};
use crate::media::SegmentWritten;
use crate::stream::VariantProgress;
use crate::transcode::capacity;
use crate::transcode::recipe::{self, encoder_error};
use crate::transcode::{TranscodeError, WorkerConfig, WorkerEvent};

/// The running pipeline: the input's decoders, every variant, the software stages or the hardware
/// ladder, and what has been reported.
pub(super) struct Pipeline {
    cfg: WorkerConfig,
    variants: Vec<Variant>,
    /// Software-encoded variants, largest picture first.
    order: Vec<usize>,
    /// Their encoding stages (threads), when there are any.
    ladder: Option<Ladder>,
    v_index: usize,
    v_tb: Rational,
    a_index: Option<usize>,
    a_tb: Rational,
    vdec: Option<ff::decoder::Video>,
    adec: Option<ff::decoder::Audio>,
    /// The hardware ladder, when any encoder is a hardware one.
    hw: Option<HwPath>,
    /// Scratch frame for filtered pictures (hardware ladder).
    filtered: frame::Video,
    master_written: bool,
    warned_audio: bool,
    /// Decoded audio waiting to fill the AAC encoder's frames.
    fifo: AudioFifo,
    /// Time of the first decoded frame: segment boundaries count from here, so the first segment
    /// is one segment long (the HLS muxer cuts at `hls_time` after the first packet).
    t0: Option<f64>,
    start: Instant,
    last_report: Instant,
    /// The real-time output (WebRTC viewers), when the daemon asked for it.
    realtime: Option<RealtimeOut>,
    /// The capacity policy of the software ladder's x264 rungs, when there are any.
    headroom: Option<Headroom>,
}

impl Pipeline {
    /// Open the pipeline on the input: its streams, the hardware ladder (when any encoder is a hardware
    /// one), the decoders, every variant, and the software stages; then report `Started`.
    pub(super) fn open(cfg: WorkerConfig, ictx: &ff::format::context::Input) -> Result<Pipeline, TranscodeError> {
        let input = Input::probe(ictx)?;
        let infos = (0..cfg.variants.len()).map(|n| cfg.encoder_of(n)).collect::<Result<Vec<_>, _>>()?;
        let (hw, hw_pos) = hardware_ladder(&cfg, &infos, &input.v_par)?;
        let any_encode = cfg.variants.iter().any(|v| !v.video_passthrough);
        // SAFETY: plain fields of the parameters we own.
        let (in_w, in_h) =
            unsafe { ((*input.v_par.as_ptr()).width.max(0) as u32, (*input.v_par.as_ptr()).height.max(0) as u32) };
        let all_smaller = every_rung_smaller(&cfg.variants, in_w, in_h);
        let vdec = open_video_decoder(hw.as_ref(), any_encode, all_smaller, &input)?;
        let (sw, sh) = input_size(vdec.as_ref(), &input.v_par)?;
        let wants_audio = cfg.realtime.is_some() || cfg.variants.iter().any(|v| audio_encoded(v, input.a_par.as_ref()));
        let adec = match (&input.a_par, wants_audio) {
            (Some(p), true) => Some(codec::context::Context::from_parameters(p.clone())?.decoder().audio()?),
            _ => None,
        };

        let setup = Setup {
            cfg: &cfg,
            source: Source { par: &input.v_par, tb: input.v_tb, fps: input.fps, width: sw, height: sh },
            a_par: input.a_par.as_ref(),
            a_tb: input.a_tb,
            adec: adec.as_ref(),
            hw: hw.as_ref(),
            hw_pos: &hw_pos,
            infos: &infos,
        };
        let mut variants = Vec::with_capacity(cfg.variants.len());
        for (n, v) in cfg.variants.iter().enumerate() {
            variants.push(Variant::open(n, v, &setup)?);
        }
        let order = scaling_order(&mut variants, sw, sh);
        let ladder = start_stages(&mut variants, &order)?;
        let headroom = ladder.as_ref().and_then(|l| watch_headroom(&cfg, &infos, &variants, l));
        emit(&WorkerEvent::Started {
            width: sw,
            height: sh,
            encoders: variants.iter().map(|v| v.encoder_name.clone()).collect(),
        });
        log_variants(&variants);
        let realtime = cfg.realtime.as_ref().and_then(RealtimeOut::connect);
        Ok(Pipeline {
            cfg,
            variants,
            order,
            ladder,
            v_index: input.v_index,
            v_tb: input.v_tb,
            a_index: input.a_index,
            a_tb: input.a_tb,
            vdec,
            adec,
            hw,
            filtered: frame::Video::empty(),
            master_written: false,
            warned_audio: false,
            fifo: AudioFifo::default(),
            t0: None,
            start: Instant::now(),
            last_report: Instant::now(),
            realtime,
            headroom,
        })
    }

    pub(super) fn on_packet(&mut self, packet: &Packet) -> Result<(), TranscodeError> {
        let idx = packet.stream();
        if idx == self.v_index {
            for n in 0..self.variants.len() {
                if matches!(self.variants[n].video, VideoPath::Copy) {
                    let p = packet.clone();
                    let v = &mut self.variants[n];
                    if !self.master_written {
                        let at = p.dts().or(p.pts()).map(|t| t as f64 * f64::from(self.v_tb));
                        v.measured.add(at, p.size());
                    }
                    v.frames += 1;
                    if let Some(pts) = p.pts() {
                        v.media_time = pts as f64 * f64::from(self.v_tb);
                    }
                    let key = p.is_key();
                    v.sink.write_video(p, self.v_tb, v.v_ost)?;
                    self.after_video_write(n, key)?;
                }
            }
            if self.vdec.is_some() {
                if let Some(d) = self.vdec.as_mut() {
                    d.send_packet(packet)?;
                }
                self.drain_video()?;
            }
        } else if Some(idx) == self.a_index {
            for n in 0..self.variants.len() {
                let v = &mut self.variants[n];
                if let (AudioPath::Copy, Some(a_ost)) = (&v.audio, v.a_ost) {
                    v.sink.write_audio(packet.clone(), self.a_tb, a_ost)?;
                }
            }
            if self.adec.is_some() {
                if let Some(d) = self.adec.as_mut() {
                    d.send_packet(packet)?;
                }
                self.drain_audio()?;
            }
        }
        self.report();
        Ok(())
    }

    fn drain_video(&mut self) -> Result<(), TranscodeError> {
        let mut decoded = frame::Video::empty();
        loop {
            let got = match self.vdec.as_mut() {
                Some(d) => d.receive_frame(&mut decoded).is_ok(),
                None => false,
            };
            if !got {
                return Ok(());
            }
            self.on_frame(&mut decoded)?;
        }
    }

    fn on_frame(&mut self, decoded: &mut frame::Video) -> Result<(), TranscodeError> {
        let Some(ts) = decoded.timestamp() else { return Ok(()) };
        let t = ts as f64 * f64::from(self.v_tb);
        let t0 = *self.t0.get_or_insert(t);
        if let Some(limit) = self.cfg.debug_encoder_fault.filter(|l| t - t0 >= *l) {
            let encoder = self.variants.iter().map(|v| v.encoder_name.clone()).find(|e| e != "copy");
            let encoder = encoder.unwrap_or_else(|| recipe::SOFTWARE_ENCODER.into());
            return Err(TranscodeError::Encoder {
                hardware: recipe::is_hardware(&encoder),
                encoder,
                message: format!("simulated encoder fault after {limit} s (--debug-encoder-fault)"),
            });
        }
        if self.hw.is_some() {
            self.on_frame_hw(decoded, t0)?;
            // A decode path's x264 rungs are stepped like the CPU ladder's.
            if let Some(h) = self.headroom.as_mut() {
                h.on_frame(t, t0);
            }
            return Ok(());
        }
        let n = self.variants.len();
        let mut plan = Plan { t, t0, wants: vec![false; n], needed: vec![false; n], pts: vec![0; n] };
        for &i in &self.order {
            if let VideoPath::Stage(st) = &mut self.variants[i].video {
                let pts = output_pts(t, t0, f64::from(st.framerate));
                plan.pts[i] = pts;
                plan.wants[i] = st.last_pts.is_none_or(|l| pts > l);
                if plan.wants[i] {
                    st.last_pts = Some(pts);
                    let v = &mut self.variants[i];
                    v.frames += 1;
                    v.media_time = pts as f64 / v.framerate;
                }
            }
        }
        for &i in self.order.iter().rev() {
            if plan.wants[i] || plan.needed[i] {
                plan.needed[i] = true;
                if let VideoPath::Stage(StageInfo { source: Some(j), .. }) = self.variants[i].video {
                    plan.needed[j] = true;
                }
            }
        }
        if let Some(ladder) = &self.ladder {
            if let Err(e) = ladder.send(decoded, plan) {
                // Prefer the stage's own reason (an encoder error) to "it stopped".
                self.collect(false)?;
                return Err(e);
            }
        }
        if let Some(h) = self.headroom.as_mut() {
            h.on_frame(t, t0);
        }
        self.collect(false)
    }

    /// Mux what the stages have encoded so far (`wait`: until they have all stopped).
    fn collect(&mut self, wait: bool) -> Result<(), TranscodeError> {
        loop {
            let Some(ladder) = &self.ladder else { return Ok(()) };
            let next = if wait { ladder.output.recv().ok() } else { ladder.output.try_recv().ok() };
            match next {
                None => return Ok(()),
                Some(Encoded::Failed(e)) => return Err(e),
                Some(Encoded::Packet { variant, packet }) => {
                    let fps = match &self.variants.get(variant).map(|v| &v.video) {
                        Some(VideoPath::Stage(st)) => st.framerate,
                        _ => continue,
                    };
                    self.mux_video(variant, packet, Rational(1, fps as i32))?;
                }
            }
        }
    }

    /// The hardware ladder: one frame into the graph; every variant's filtered frames into its encoder (a
    /// hardware encoder here, on this thread) or its stage thread (libx264 on a decode path, each rung
    /// encoding in parallel); then mux what the stages encoded.
    fn on_frame_hw(&mut self, decoded: &frame::Video, t0: f64) -> Result<(), TranscodeError> {
        let Some(hw) = self.hw.as_mut() else { return Ok(()) };
        hw.push(decoded, self.v_tb)?;
        let n = self.variants.len();
        for i in 0..n {
            loop {
                let Some(hw) = self.hw.as_mut() else { return Ok(()) };
                let v = &mut self.variants[i];
                if let VideoPath::Stage(st) = &mut v.video {
                    let Some(pos) = st.graph_out else { break };
                    // A picture of its own per pull: the stage keeps a reference to it.
                    let mut picture = frame::Video::empty();
                    if !hw.pull(pos, &mut picture)? {
                        break;
                    }
                    let Some(ts) = picture.pts() else { continue };
                    let t = ts as f64 * f64::from(self.v_tb);
                    let pts = output_pts(t, t0, f64::from(st.framerate));
                    if st.last_pts.is_some_and(|l| pts <= l) {
                        continue;
                    }
                    st.last_pts = Some(pts);
                    v.frames += 1;
                    v.media_time = pts as f64 / v.framerate;
                    let mut plan = Plan { t, t0, wants: vec![false; n], needed: vec![false; n], pts: vec![0; n] };
                    (plan.wants[i], plan.needed[i], plan.pts[i]) = (true, true, pts);
                    let Some(ladder) = &self.ladder else { break };
                    if let Err(e) = ladder.send_to(i, &picture, plan) {
                        // Prefer the stage's own reason (an encoder error) to "it stopped".
                        self.collect(false)?;
                        return Err(e);
                    }
                    continue;
                }
                let VideoPath::Hw(enc) = &mut v.video else { break };
                if !hw.pull(enc.pos, &mut self.filtered)? {
                    break;
                }
                if enc.encoder.is_none() {
                    enc.encoder = Some(hw.open_encoder(enc.pos, &enc.recipe)?);
                }
                let Some(ts) = self.filtered.pts() else { continue };
                let t = ts as f64 * f64::from(self.v_tb);
                let fps = f64::from(enc.recipe.framerate);
                let pts = output_pts(t, t0, fps);
                if enc.last_pts.is_some_and(|l| pts <= l) {
                    continue;
                }
                let gop = i64::from(enc.recipe.gop.max(1));
                let segment = output_slot(t - t0, fps).div_euclid(gop);
                let key = enc.last_segment != Some(segment) || stage::take_forced_keyframe(i);
                enc.last_segment = Some(segment);
                enc.last_pts = Some(pts);
                self.filtered.set_pts(Some(pts));
                self.filtered.set_kind(if key { picture::Type::I } else { picture::Type::None });
                if let Some(encoder) = enc.encoder.as_mut() {
                    encoder.send_frame(&self.filtered).map_err(|e| encoder_error(&enc.recipe, e))?;
                }
                v.frames += 1;
                v.media_time = pts as f64 / fps;
                self.drain_encoder(i)?;
            }
        }
        self.collect(false)
    }

    fn drain_encoder(&mut self, i: usize) -> Result<(), TranscodeError> {
        loop {
            let mut pkt = Packet::empty();
            let v = &mut self.variants[i];
            let Some((encoder, rec)) = v.video.encoder() else { return Ok(()) };
            match encoder.receive_packet(&mut pkt) {
                Ok(()) => {}
                Err(ff::Error::Eof) | Err(ff::Error::Other { errno: ff::util::error::EAGAIN }) => return Ok(()),
                Err(e) => return Err(encoder_error(rec, e)),
            }
            let enc_tb = Rational(1, rec.framerate as i32);
            self.mux_video(i, pkt, enc_tb)?;
        }
    }

    /// Write an encoded video packet (time base `enc_tb`) to variant `i`'s muxer.
    fn mux_video(&mut self, i: usize, pkt: Packet, enc_tb: Rational) -> Result<(), TranscodeError> {
        let v = &mut self.variants[i];
        if v.codecs.is_none() && pkt.is_key() {
            v.codecs = pkt.data().and_then(codec_from_annexb);
        }
        let key = pkt.is_key();
        if let Some(rt) = self.realtime.as_mut().filter(|rt| rt.variant == i) {
            rt.video(&pkt, enc_tb);
        }
        v.sink.write_video(pkt, enc_tb, v.v_ost)?;
        self.after_video_write(i, key)
    }

    fn drain_audio(&mut self) -> Result<(), TranscodeError> {
        let mut decoded = frame::Audio::empty();
        loop {
            let got = match self.adec.as_mut() {
                Some(d) => d.receive_frame(&mut decoded).is_ok(),
                None => false,
            };
            if !got {
                return Ok(());
            }
            let Some(ts) = decoded.timestamp() else { continue };
            if let Some(rt) = self.realtime.as_mut() {
                rt.audio(&decoded, ts as f64 * f64::from(self.a_tb));
            }
            // Every encoded variant's AAC encoder takes the same format, frame size and rate.
            let target = self.variants.iter().find_map(|v| match &v.audio {
                AudioPath::Encode(e) => Some((e.format(), e.frame_size() as usize, e.rate())),
                _ => None,
            });
            let Some((format, size, rate)) = target else { continue };
            let pts = (ts as f64 * f64::from(self.a_tb) * f64::from(rate)).round() as i64;
            if decoded.format() == format && (size == 0 || decoded.samples() == size) {
                decoded.set_pts(Some(pts));
                self.encode_audio(&decoded)?;
                continue;
            }
            let planar_f32 = ff::format::Sample::F32(ff::format::sample::Type::Planar);
            if decoded.format() != planar_f32 || format != planar_f32 || decoded.rate() != rate || size == 0 {
                if !self.warned_audio {
                    tracing::warn!(
                        "audio frames ({} samples, {:?}, {} Hz) do not fit the AAC encoder; the variants go without audio",
                        decoded.samples(),
                        decoded.format(),
                        decoded.rate()
                    );
                    self.warned_audio = true;
                }
                continue;
            }
            // Another frame size (Opus: 960 samples; AAC takes 1024): through the sample queue.
            self.fifo.push(&decoded, pts);
            while let Some(frame) = self.fifo.pop(size, decoded.channel_layout(), rate) {
                self.encode_audio(&frame)?;
            }
        }
    }

    /// Encode one frame (its pts in samples) on every variant that encodes audio.
    fn encode_audio(&mut self, frame: &frame::Audio) -> Result<(), TranscodeError> {
        for v in self.variants.iter_mut() {
            let (AudioPath::Encode(enc), Some(a_ost)) = (&mut v.audio, v.a_ost) else { continue };
            let rate = enc.rate() as i32;
            enc.send_frame(frame)?;
            let mut pkt = Packet::empty();
            while enc.receive_packet(&mut pkt).is_ok() {
                v.sink.write_audio(std::mem::replace(&mut pkt, Packet::empty()), Rational(1, rate), a_ost)?;
            }
        }
        Ok(())
    }

    /// After a video packet: notice new segments (the playlist is rewritten) and write the master
    /// playlist once every variant has one.
    fn after_video_write(&mut self, i: usize, key: bool) -> Result<(), TranscodeError> {
        if self.master_written && !key && matches!(self.variants[i].sink, Sink::Hls(..)) {
            return Ok(());
        }
        let v = &mut self.variants[i];
        if let Sink::Cmaf(c) = &mut v.sink {
            for r in c.reports.drain(..) {
                if !v.init_reported {
                    emit(&WorkerEvent::InitWritten { variant: i, file: r.init.clone() });
                    v.init_reported = true;
                }
                let segment = r.segment.as_ref().map(|file| SegmentWritten {
                    variant: i,
                    msn: r.msn,
                    file: file.clone(),
                    duration: r.segment_duration,
                    program_date_time: Some(r.pdt_ms),
                    bytes: std::fs::metadata(v.playlist.with_file_name(file)).map(|m| m.len()).unwrap_or(0),
                    independent: true,
                });
                emit(&WorkerEvent::PartWritten(r));
                if let Some(seg) = segment {
                    emit(&WorkerEvent::SegmentWritten(seg));
                    // The plain playlist on disk (thumbnails, players once the stream has ended).
                    emit(&WorkerEvent::PlaylistWritten { variant: i });
                }
            }
            v.has_segment = c.has_part;
        } else if let Some(watch) = v.watch.as_mut() {
            let written = watch.poll();
            if !written.is_empty() {
                v.has_segment = true;
                for seg in written {
                    emit(&WorkerEvent::SegmentWritten(seg));
                }
                emit(&WorkerEvent::PlaylistWritten { variant: i });
            }
        }
        if !self.master_written && self.variants.iter().all(|v| v.has_segment) {
            let entries: Vec<_> = self
                .variants
                .iter()
                .map(|v| {
                    let video = v.codecs.clone().filter(|c| !c.is_empty()).unwrap_or_else(|| "avc1.64001f".into());
                    let codecs = match v.audio {
                        AudioPath::None => video,
                        _ => format!("{video},mp4a.40.2"),
                    };
                    // A passthrough says what the publisher sends (`master`).
                    let (bandwidth, fps) = match v.video {
                        VideoPath::Copy => (
                            v.measured.video_bps().map_or(v.bandwidth, |bps| bps + v.audio_kbps * 1000),
                            v.measured.fps().unwrap_or_else(|| standard_rate(v.framerate)),
                        ),
                        _ => (v.bandwidth, v.framerate),
                    };
                    (bandwidth, v.width, v.height, codecs, fps)
                })
                .collect();
            write_master(&self.cfg.hls_dir, &entries)?;
            self.master_written = true;
            emit(&WorkerEvent::Ready);
        }
        Ok(())
    }

    fn report(&mut self) {
        let dt = self.last_report.elapsed().as_secs_f64();
        if dt < 1.0 {
            return;
        }
        self.last_report = Instant::now();
        let measured = self.headroom.as_mut().map(|h| h.sample(dt));
        let variants = self
            .variants
            .iter_mut()
            .enumerate()
            .map(|(n, v)| {
                let p = VariantProgress {
                    variant: n,
                    encoder: v.encoder_name.clone(),
                    fps: (v.frames - v.last_report_frames) as f64 / dt,
                    speed: ((v.media_time - v.last_report_media_time) / dt).max(0.0),
                    frames: v.frames,
                    busy: measured.as_ref().and_then(|m| m.busy.get(n).copied()).unwrap_or(0.0),
                    preset: measured.as_ref().and_then(|m| m.presets.get(n).cloned().flatten()),
                    lag: match (&v.video, &measured) {
                        (VideoPath::Stage(_), Some(m)) => m.lag,
                        _ => 0.0,
                    },
                };
                v.last_report_frames = v.frames;
                v.last_report_media_time = v.media_time;
                p
            })
            .collect();
        let (lag, headroom) = measured.map(|m| (m.lag, m.headroom)).unwrap_or((0.0, None));
        emit(&WorkerEvent::Progress { variants, lag, headroom });
    }

    pub(super) fn finish(&mut self) -> Result<(), TranscodeError> {
        if let Some(d) = self.vdec.as_mut() {
            let _ = d.send_eof();
        }
        self.drain_video()?;
        if let Some(ladder) = self.ladder.as_mut() {
            ladder.close();
        }
        self.collect(true)?;
        if let Some(ladder) = self.ladder.as_mut() {
            ladder.join();
        }
        if let Some(d) = self.adec.as_mut() {
            let _ = d.send_eof();
        }
        self.drain_audio()?;
        for i in 0..self.variants.len() {
            if let Some((encoder, _)) = self.variants[i].video.encoder() {
                let _ = encoder.send_eof();
                self.drain_encoder(i)?;
            }
            let v = &mut self.variants[i];
            if let (AudioPath::Encode(enc), Some(a_ost)) = (&mut v.audio, v.a_ost) {
                let _ = enc.send_eof();
                let rate = enc.rate() as i32;
                let mut pkt = Packet::empty();
                while enc.receive_packet(&mut pkt).is_ok() {
                    v.sink.write_audio(std::mem::replace(&mut pkt, Packet::empty()), Rational(1, rate), a_ost)?;
                }
            }
            v.sink.finish()?;
            self.after_video_write(i, true)?;
        }
        let total = self.start.elapsed().as_secs_f64();
        tracing::info!(seconds = total, "input ended; playlists finalised");
        Ok(())
    }
}

/// The input's streams: the best video stream (required) and the best audio stream, if any.
struct Input {
    v_index: usize,
    v_tb: Rational,
    v_par: codec::Parameters,
    /// The video's average frame rate, snapped to a standard one (30 when the input does not say).
    fps: f64,
    a_index: Option<usize>,
    a_tb: Rational,
    a_par: Option<codec::Parameters>,
}

impl Input {
    fn probe(ictx: &ff::format::context::Input) -> Result<Input, TranscodeError> {
        let ist = ictx.streams().best(media::Type::Video).ok_or(TranscodeError::NoVideo)?;
        let fr = ist.avg_frame_rate();
        let fps = if fr.denominator() > 0 && fr.numerator() > 0 { standard_rate(f64::from(fr)) } else { 30.0 };
        let audio = ictx.streams().best(media::Type::Audio);
        let (a_index, a_tb, a_par) = match &audio {
            Some(s) => (Some(s.index()), s.time_base(), Some(s.parameters())),
            None => (None, Rational(1, 1000), None),
        };
        Ok(Input { v_index: ist.index(), v_tb: ist.time_base(), v_par: ist.parameters(), fps, a_index, a_tb, a_par })
    }
}

/// The hardware ladder, when any encoded variant's encoder is a hardware one, and each variant's output
/// position on its filter graph (`None` for passthrough variants, and for all when there is no ladder).
fn hardware_ladder(
    cfg: &WorkerConfig,
    infos: &[EncoderInfo],
    v_par: &codec::Parameters,
) -> Result<(Option<HwPath>, Vec<Option<usize>>), TranscodeError> {
    let mut hw_pos = vec![None; cfg.variants.len()];
    // A hardware encoder, or a decode path (the GPU decodes and scales for libx264).
    let hw_ladder = cfg.variants.iter().zip(infos).any(|(v, e)| !v.video_passthrough && e.uses_device());
    if !hw_ladder {
        return Ok((None, hw_pos));
    }
    let probe = codec::context::Context::from_parameters(v_par.clone())?;
    // SAFETY: plain fields of a context we own (filled from the stream parameters).
    let (pix, w, h) = unsafe {
        let c = probe.as_ptr();
        (ff::format::Pixel::from((*c).pix_fmt), (*c).width.max(0) as u32, (*c).height.max(0) as u32)
    };
    let input = InputSpec {
        codec: ff::decoder::find(v_par.id()).map(|c| c.name().to_string()).unwrap_or_default(),
        pix_fmt: pix.descriptor().map(|d| d.name().to_string()).unwrap_or_default(),
        width: w,
        height: h,
    };
    let (mut encs, mut specs) = (Vec::new(), Vec::new());
    for (n, v) in cfg.variants.iter().enumerate().filter(|(_, v)| !v.video_passthrough) {
        hw_pos[n] = Some(encs.len());
        encs.push(infos[n].clone());
        specs.push(recipe::variant_spec(v, cfg.segment_seconds));
    }
    let ladder = hwaccel::ladder(&encs, &specs, &input);
    if ladder.device.is_none() {
        // A decode path on input the device cannot decode (4:2:2, 10-bit): the CPU does it all.
        tracing::info!(input = ?input, "the GPU cannot decode this input; the ladder runs on the CPU");
        return Ok((None, vec![None; cfg.variants.len()]));
    }
    tracing::info!(graph = %ladder.filter_graph(), decode = ?ladder.decode, "hardware ladder");
    Ok((Some(HwPath::new(ladder)?), hw_pos))
}

/// Whether every encoded rung (passthroughs aside) is smaller than the `in_w`×`in_h` input: then the
/// software decoder may skip deblocking frames nothing is predicted from (`open_video_decoder`). A rung
/// without a size keeps the input's, so it is not smaller.
fn every_rung_smaller(variants: &[crate::config::StreamOutputVariant], in_w: u32, in_h: u32) -> bool {
    variants
        .iter()
        .filter(|v| !v.video_passthrough)
        .all(|v| (v.scaled_height > 0 && v.scaled_height < in_h) || (v.scaled_width > 0 && v.scaled_width < in_w))
}

/// The video decoder: the hardware path's, a software one when any variant encodes, none when every
/// variant copies the input video. `all_smaller`: every encoded rung is smaller than the input.
fn open_video_decoder(
    hw: Option<&HwPath>,
    any_encode: bool,
    all_smaller: bool,
    input: &Input,
) -> Result<Option<ff::decoder::Video>, TranscodeError> {
    let v_par = &input.v_par;
    Ok(match hw {
        Some(h) => Some(h.open_decoder(v_par.clone())?),
        None if any_encode => {
            let mut ctx = codec::context::Context::from_parameters(v_par.clone())?;
            // SAFETY: plain fields of the parameters we own.
            let (w, h) = unsafe { ((*v_par.as_ptr()).width.max(0) as u32, (*v_par.as_ptr()).height.max(0) as u32) };
            let count = decoder_threads(w, h, input.fps);
            ctx.set_threading(threading::Config { kind: threading::Type::Frame, count, ..Default::default() });
            // When every rung is smaller than the input: no deblocking of frames nothing else is
            // predicted from (the broadcaster's non-reference B-frames). A skipped filter there cannot
            // spread to other frames, and scaling down smooths what the filter would have. 5 % less CPU
            // for the ladder at the same PSNR/SSIM against the source (bench/transcode, issue 44: 720p
            // 36.640 vs 36.641 dB). A full-size rung keeps every frame filtered.
            if all_smaller {
                // SAFETY: a plain field of the context we own, set before it is opened.
                unsafe { (*ctx.as_mut_ptr()).skip_loop_filter = ff::ffi::AVDiscard::AVDISCARD_NONREF };
            }
            Some(ctx.decoder().video()?)
        }
        None => None,
    })
}

/// The input picture size: the decoder's, else the stream parameters'.
fn input_size(vdec: Option<&ff::decoder::Video>, v_par: &codec::Parameters) -> Result<(u32, u32), TranscodeError> {
    let (sw, sh) = match vdec {
        Some(d) => (d.width(), d.height()),
        None => {
            // SAFETY: plain fields of the parameters we own.
            unsafe { ((*v_par.as_ptr()).width.max(0) as u32, (*v_par.as_ptr()).height.max(0) as u32) }
        }
    };
    if sw == 0 || sh == 0 {
        return Err(TranscodeError::Other("could not determine the input video size".into()));
    }
    Ok((sw, sh))
}

/// Decoder threads: 1 up to 1080p60 (frame threads cost CPU time in synchronisation, and the encodes
/// already run on threads of their own, so one decoding thread keeps up with room to spare), 0 (one
/// frame thread per core) for larger inputs.
fn decoder_threads(width: u32, height: u32, fps: f64) -> usize {
    if f64::from(width) * f64::from(height) * fps <= 1920.0 * 1080.0 * 60.0 {
        1
    } else {
        0
    }
}

/// The software-encoded variants, largest picture first; each is set to take its picture from the
/// smallest larger one (smaller than the input), else from the decoded frame. Variants fed by the hardware
/// ladder's filter graph (a decode path) take their picture from it: no source.
fn scaling_order(variants: &mut [Variant], sw: u32, sh: u32) -> Vec<usize> {
    let sizes: Vec<(u32, u32)> = variants.iter().map(|v| (v.width, v.height)).collect();
    let from_graph: Vec<bool> =
        variants.iter().map(|v| matches!(&v.video, VideoPath::Encode(e) if e.graph_out.is_some())).collect();
    let mut order: Vec<usize> =
        (0..variants.len()).filter(|&i| matches!(variants[i].video, VideoPath::Encode(_))).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(u64::from(sizes[i].0) * u64::from(sizes[i].1)));
    for (k, &i) in order.iter().enumerate() {
        if from_graph[i] {
            continue;
        }
        let (w, h) = sizes[i];
        let best = order[..k]
            .iter()
            .copied()
            .filter(|&j| !from_graph[j])
            .filter(|&j| sizes[j].0 >= w && sizes[j].1 >= h && (sizes[j].0 < sw || sizes[j].1 < sh))
            .min_by_key(|&j| u64::from(sizes[j].0) * u64::from(sizes[j].1));
        if let (Some(j), VideoPath::Encode(enc)) = (best, &mut variants[i].video) {
            enc.source = Some(j);
        }
    }
    order
}

/// Move the software encoders (in `order`) into their stage threads; the variants keep a `Stage`.
fn start_stages(variants: &mut [Variant], order: &[usize]) -> Result<Option<Ladder>, TranscodeError> {
    let mut encodes = Vec::new();
    for &i in order {
        let placeholder = VideoPath::Stage(StageInfo { framerate: 0, source: None, graph_out: None, last_pts: None });
        if let VideoPath::Encode(enc) = std::mem::replace(&mut variants[i].video, placeholder) {
            variants[i].video = VideoPath::Stage(StageInfo {
                framerate: enc.recipe.framerate,
                source: enc.source,
                graph_out: enc.graph_out,
                last_pts: None,
            });
            encodes.push((i, *enc));
        }
    }
    Ok(if encodes.is_empty() { None } else { Some(Ladder::start(encodes)?) })
}

/// The capacity policy of the software ladder's x264 rungs (`None` without any).
fn watch_headroom(
    cfg: &WorkerConfig,
    infos: &[EncoderInfo],
    variants: &[Variant],
    ladder: &Ladder,
) -> Option<Headroom> {
    let configured: Vec<Option<usize>> = cfg
        .variants
        .iter()
        .zip(infos)
        .map(|(v, info)| {
            let x264 = !v.video_passthrough && info.name == recipe::SOFTWARE_ENCODER;
            x264.then(|| capacity::preset_index(recipe::x264_preset(v.cpu_usage_level))).flatten()
        })
        .collect();
    let names = cfg
        .variants
        .iter()
        .zip(variants)
        .map(|(c, v)| VariantName {
            name: if c.name.trim().is_empty() { format!("{}p", v.height) } else { c.name.clone() },
            width: v.width,
            height: v.height,
            fps: v.framerate,
        })
        .collect();
    Headroom::new(&ladder.controls, &configured, names, cfg.ladder_step, cfg.debug_ladder_step_at)
}

/// Log each variant's size, encoder and picture source.
fn log_variants(variants: &[Variant]) {
    for (n, v) in variants.iter().enumerate() {
        let src = match &v.video {
            VideoPath::Encode(e) => format!("{:?}", e.source),
            VideoPath::Stage(e) => e.source.map_or("decoded frame".into(), |j| format!("variant {j}")),
            VideoPath::Hw(e) => format!("hw out{}", e.pos),
            VideoPath::Copy => "copy".into(),
        };
        tracing::info!(variant = n, width = v.width, height = v.height, encoder = %v.encoder_name, source = %src, "variant ready");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StreamOutputVariant;

    /// Deblocking is skipped on non-reference frames only when every encoded rung is smaller than the input
    /// (a full-size rung shows every frame as decoded; passthroughs do not decode).
    #[test]
    fn non_reference_deblocking_is_skipped_only_when_every_encoded_rung_is_smaller() {
        let rung = |w: u32, h: u32| StreamOutputVariant { scaled_width: w, scaled_height: h, ..Default::default() };
        let copy = StreamOutputVariant { video_passthrough: true, ..Default::default() };
        assert!(every_rung_smaller(&[rung(1280, 720), rung(640, 360)], 1920, 1080));
        assert!(every_rung_smaller(&[rung(0, 720), rung(854, 0)], 1920, 1080), "one side given");
        assert!(every_rung_smaller(&[rung(1280, 720), copy], 1920, 1080), "a passthrough aside");
        assert!(!every_rung_smaller(&[rung(1920, 1080), rung(640, 360)], 1920, 1080), "a full-size rung");
        assert!(!every_rung_smaller(&[rung(0, 0), rung(640, 360)], 1920, 1080), "a rung at the input's size");
        assert!(!every_rung_smaller(&[rung(1280, 720)], 1280, 720), "input smaller than asked");
    }

    #[test]
    fn opus_sized_frames_become_aac_sized_frames_with_continuous_timestamps() {
        let format = ff::format::Sample::F32(ff::format::sample::Type::Planar);
        let layout = ff::ChannelLayout::STEREO;
        let mut fifo = AudioFifo::default();
        let mut popped = Vec::new();
        for n in 0..4i64 {
            let mut f = frame::Audio::new(format, 960, layout);
            for ch in 0..2 {
                for (i, s) in f.plane_mut::<f32>(ch).iter_mut().enumerate() {
                    *s = (n * 960 + i as i64) as f32 + ch as f32 * 0.5;
                }
            }
            fifo.push(&f, 1000 + n * 960);
            while let Some(out) = fifo.pop(1024, layout, 48_000) {
                popped.push(out);
            }
        }
        // 3840 samples in: three frames of 1024 out, 768 left.
        assert_eq!(popped.len(), 3);
        for (k, out) in popped.iter().enumerate() {
            assert_eq!(out.samples(), 1024);
            assert_eq!(out.pts(), Some(1000 + k as i64 * 1024));
            assert_eq!(out.plane::<f32>(0)[0], (k * 1024) as f32, "samples keep their order");
            assert_eq!(out.plane::<f32>(1)[5], (k * 1024 + 5) as f32 + 0.5, "and their channel");
        }
    }

    #[test]
    fn one_decoder_thread_up_to_1080p60() {
        assert_eq!(decoder_threads(1920, 1080, 30.0), 1);
        assert_eq!(decoder_threads(1920, 1080, 60.0), 1);
        assert_eq!(decoder_threads(2560, 1440, 60.0), 0);
        assert_eq!(decoder_threads(3840, 2160, 30.0), 0);
    }
}

/// Planar float samples between a decoder and an encoder with another frame size.
#[derive(Default)]
struct AudioFifo {
    planes: Vec<Vec<f32>>,
    /// The pts (in samples) of the first queued sample.
    next_pts: Option<i64>,
}

impl AudioFifo {
    /// Queue a planar float frame whose pts (in samples) is `pts`.
    fn push(&mut self, f: &frame::Audio, pts: i64) {
        let channels = usize::from(f.channels());
        if self.planes.len() != channels {
            self.planes = vec![Vec::new(); channels];
            self.next_pts = None;
        }
        if self.planes.first().is_none_or(|p| p.is_empty()) {
            self.next_pts = Some(pts);
        }
        for (ch, plane) in self.planes.iter_mut().enumerate() {
            let samples = f.plane::<f32>(ch);
            plane.extend_from_slice(&samples[..f.samples().min(samples.len())]);
        }
    }

    /// A frame of `size` samples, when that many are queued.
    fn pop(&mut self, size: usize, layout: ff::ChannelLayout, rate: u32) -> Option<frame::Audio> {
        if self.planes.is_empty() || self.planes.iter().any(|p| p.len() < size) {
            return None;
        }
        let format = ff::format::Sample::F32(ff::format::sample::Type::Planar);
        let mut out = frame::Audio::new(format, size, layout);
        out.set_rate(rate);
        for (ch, plane) in self.planes.iter_mut().enumerate() {
            out.plane_mut::<f32>(ch)[..size].copy_from_slice(&plane[..size]);
            plane.drain(..size);
        }
        let pts = self.next_pts.unwrap_or(0);
        out.set_pts(Some(pts));
        self.next_pts = Some(pts + size as i64);
        Some(out)
    }
}
