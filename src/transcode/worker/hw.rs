//! The worker's hardware path: one device, hardware decode (or one upload), and a libavfilter graph that
//! feeds every encoded variant of a ladder in which at least one encoder is a hardware one.
//!
//! The plan is `hwaccel::ladder` (pure data); this module turns it into libav calls, following the
//! documented API: `av_hwdevice_ctx_create` once; for hardware decode the decoder gets the device as
//! `hw_device_ctx` and a `get_format` that picks the device's pixel format; the filter graph
//! (`Ladder::filter_graph`) is built on the first decoded frame (its `hw_frames_ctx`, when decoded on the
//! device, is handed to the `[in]` buffer source), every filter gets the device when the ladder uploads;
//! each encoder is opened on its first filtered frame with the sink's `hw_frames_ctx`.
//!
//! A ladder whose encoders are all libx264 on a decode path (a GPU that decodes but cannot encode) runs
//! here too: the device decodes and every rung is scaled on it and downloaded (`scale_cuda`,
//! `hwdownload`); the pipeline hands each rung's downloaded picture to that rung's encoding stage thread,
//! as it does on the CPU path.
//!
//! Every failure comes back as `TranscodeError::Encoder { hardware: true, .. }`: the worker exits and
//! the supervisor restarts it with libx264 on the CPU. The decoder is set up by `hwaccel::hwdec`, the same
//! code the probe runs on the device (and a unit test opens without one); the rest needs a GPU
//! (`bench/gpu/run.sh` runs it on one).

use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;

use ff::ffi;
use ff::{codec, filter, frame, Dictionary, Rational};
use ffmpeg_next as ff;
use hwaccel::{hwdec, Decode, Ladder, Recipe};

use crate::transcode::TranscodeError;

/// An owned `AVBufferRef` (device or frames context).
struct BufferRef(*mut ffi::AVBufferRef);

impl BufferRef {
    /// A new reference for a libav field that takes ownership.
    fn new_ref(&self) -> Result<*mut ffi::AVBufferRef, TranscodeError> {
        // SAFETY: self.0 is a valid buffer reference we own.
        let r = unsafe { ffi::av_buffer_ref(self.0) };
        if r.is_null() {
            return Err(hw_error("hw", "out of memory referencing the device"));
        }
        Ok(r)
    }
}

impl Drop for BufferRef {
    fn drop(&mut self) {
        // SAFETY: we own this reference; av_buffer_unref accepts null and nulls the pointer.
        unsafe { ffi::av_buffer_unref(&mut self.0) }
    }
}

fn hw_error(encoder: &str, message: impl Into<String>) -> TranscodeError {
    TranscodeError::Encoder { encoder: encoder.to_string(), hardware: true, message: message.into() }
}

fn av_err(encoder: &str, what: &str, code: i32) -> TranscodeError {
    hw_error(encoder, format!("{what}: {}", ff::Error::from(code)))
}

/// The hardware ladder at run time.
pub struct HwPath {
    pub ladder: Ladder,
    /// Name of the first hardware encoder (named in errors).
    name: String,
    device: BufferRef,
    graph: Option<filter::Graph>,
}

impl HwPath {
    /// Create the device for `ladder` (it must have one).
    pub fn new(ladder: Ladder) -> Result<HwPath, TranscodeError> {
        let dev = ladder.device.clone().ok_or_else(|| hw_error("hw", "the ladder has no hardware device"))?;
        // Errors name the hardware encoder, else the decode path (as `EncoderInfo::label` does).
        let name = ladder.variants.iter().find(|r| r.hardware).map(|r| r.encoder.clone()).unwrap_or_else(|| {
            let device = match (dev.kind, dev.path.as_deref()) {
                (hwaccel::HwDeviceKind::Cuda, Some(i)) => format!("cuda:{i}"),
                (_, Some(p)) => p.to_string(),
                (k, None) => k.av_name().to_string(),
            };
            format!("{} (decode and scaling on {device})", hwaccel::SOFTWARE_ENCODER)
        });
        let kind_name = CString::new(dev.kind.av_name()).map_err(|e| hw_error(&name, e.to_string()))?;
        let path = dev.path.as_deref().map(CString::new).transpose().map_err(|e| hw_error(&name, e.to_string()))?;
        let mut device: *mut ffi::AVBufferRef = ptr::null_mut();
        // SAFETY: documented use of av_hwdevice_find_type_by_name / av_hwdevice_ctx_create; `device` is
        // only kept when creation succeeded.
        let rc = unsafe {
            let kind = ffi::av_hwdevice_find_type_by_name(kind_name.as_ptr());
            if kind == ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_NONE {
                return Err(hw_error(&name, format!("libavutil has no {} device type", dev.kind.av_name())));
            }
            let p = path.as_ref().map_or(ptr::null(), |c| c.as_ptr());
            ffi::av_hwdevice_ctx_create(&mut device, kind, p, ptr::null_mut(), 0)
        };
        if rc < 0 || device.is_null() {
            return Err(av_err(&name, &format!("cannot create the {} device", dev.kind.av_name()), rc));
        }
        Ok(HwPath { ladder, name, device: BufferRef(device), graph: None })
    }

    /// A path on a device context allocated but not initialised: enough to open the decoder (which reaches
    /// the device only at its first picture), so a test can open it on a box without the device.
    #[cfg(test)]
    fn on_uninitialised_device(ladder: Ladder) -> HwPath {
        let kind = ladder.device.as_ref().map_or(hwaccel::HwDeviceKind::Cuda, |d| d.kind);
        // SAFETY: allocation only; the buffer is owned by the returned path.
        let device = unsafe { ffi::av_hwdevice_ctx_alloc(hwdec::device_type(kind)) };
        assert!(!device.is_null(), "libavutil has the {kind:?} device type");
        HwPath { ladder, name: "test".into(), device: BufferRef(device), graph: None }
    }

    /// Open the video decoder as the ladder says: on the device (`hwaccel::hwdec`: the device as
    /// `hw_device_ctx`, a `get_format` that picks its pixel format, opened with its codec — or the dedicated
    /// decoder such as `h264_qsv`) or in software.
    pub fn open_decoder(&self, par: codec::Parameters) -> Result<ff::decoder::Video, TranscodeError> {
        let id = par.id();
        let mut ctx = codec::context::Context::from_parameters(par)?;
        let Decode::Hardware { device, .. } = &self.ladder.decode else {
            return Ok(ctx.decoder().video()?);
        };
        let codec = hwdec::decoder_codec(&self.ladder.decode, id).map_err(|e| hw_error(&self.name, e))?;
        // SAFETY: the context is valid and not yet opened; the device reference is ours.
        unsafe { hwdec::attach_device(ctx.as_mut_ptr(), self.device.0, *device) }
            .map_err(|e| hw_error(&self.name, e))?;
        ctx.decoder()
            .open_as(codec)
            .and_then(|d| d.video())
            .map_err(|e| hw_error(&self.name, format!("opening the hardware decoder: {e}")))
    }

    /// Feed a decoded frame (time base `tb`) into the graph, building it on the first frame.
    pub fn push(&mut self, decoded: &frame::Video, tb: Rational) -> Result<(), TranscodeError> {
        if self.graph.is_none() {
            self.graph = Some(self.build(decoded, tb)?);
        }
        let graph = self.graph.as_mut().ok_or_else(|| hw_error("hw", "no filter graph"))?;
        let mut src = graph.get("in").ok_or_else(|| hw_error(&self.name, "the graph lost its source"))?;
        // SAFETY: av_buffersrc_write_frame takes a new reference (the frame stays ours).
        let rc = unsafe { ffi::av_buffersrc_write_frame(src.as_mut_ptr(), decoded.as_ptr()) };
        if rc < 0 {
            return Err(av_err(&self.name, "feeding the filter graph", rc));
        }
        Ok(())
    }

    /// The next filtered frame for ladder output `pos`, if one is ready.
    pub fn pull(&mut self, pos: usize, out: &mut frame::Video) -> Result<bool, TranscodeError> {
        let Some(graph) = self.graph.as_mut() else { return Ok(false) };
        let mut sink = graph.get(&format!("out{pos}")).ok_or_else(|| hw_error(&self.name, "missing sink"))?;
        // SAFETY: the sink moves its frame into `out` without releasing what `out` held: release it first.
        unsafe { ffi::av_frame_unref(out.as_mut_ptr()) };
        match sink.sink().frame(out) {
            Ok(()) => Ok(true),
            Err(ff::Error::Other { errno: ff::util::error::EAGAIN }) | Err(ff::Error::Eof) => Ok(false),
            Err(e) => Err(hw_error(&self.name, format!("filter graph: {e}"))),
        }
    }

    fn build(&self, decoded: &frame::Video, tb: Rational) -> Result<filter::Graph, TranscodeError> {
        let name = self.name.as_str();
        // SAFETY: reading the frame's hardware context pointer.
        let frames_ctx = unsafe { (*decoded.as_ptr()).hw_frames_ctx };
        if matches!(self.ladder.decode, Decode::Hardware { .. }) && frames_ctx.is_null() {
            return Err(hw_error(name, "the hardware decoder returned frames in system memory"));
        }
        let mut graph = filter::Graph::new();
        let fmt: ffi::AVPixelFormat = decoded.format().into();
        let args = format!(
            "video_size={}x{}:pix_fmt={}:time_base={}/{}:pixel_aspect=1/1",
            decoded.width(),
            decoded.height(),
            fmt as i32,
            tb.numerator(),
            tb.denominator().max(1)
        );
        let buffer = filter::find("buffer").ok_or_else(|| hw_error(name, "no buffer filter"))?;
        let sink = filter::find("buffersink").ok_or_else(|| hw_error(name, "no buffersink filter"))?;
        let mut src = graph.add(&buffer, "in", &args).map_err(|e| hw_error(name, format!("buffer source: {e}")))?;
        if !frames_ctx.is_null() {
            // SAFETY: documented buffersrc parameters API; the parameters take no ownership of the frame's
            // context (av_buffersrc_parameters_set references it) and are freed here.
            unsafe {
                let par = ffi::av_buffersrc_parameters_alloc();
                if par.is_null() {
                    return Err(hw_error(name, "out of memory"));
                }
                (*par).hw_frames_ctx = frames_ctx;
                let rc = ffi::av_buffersrc_parameters_set(src.as_mut_ptr(), par);
                ffi::av_free(par as *mut c_void);
                if rc < 0 {
                    return Err(av_err(name, "hardware frames on the buffer source", rc));
                }
            }
        }
        let n = self.ladder.variants.len();
        for i in 0..n {
            graph.add(&sink, &format!("out{i}"), "").map_err(|e| hw_error(name, format!("buffer sink: {e}")))?;
        }
        let mut parser = graph.output("in", 0).map_err(|e| hw_error(name, e.to_string()))?;
        for i in 0..n {
            parser = parser.input(&format!("out{i}"), 0).map_err(|e| hw_error(name, e.to_string()))?;
        }
        let spec = self.ladder.filter_graph();
        parser.parse(&spec).map_err(|e| hw_error(name, format!("filter graph '{spec}': {e}")))?;
        if self.ladder.filters_need_device {
            // SAFETY: as the ffmpeg CLI does, after parsing and before configuring: each filter gets its own
            // reference to the device (freed with the filter).
            unsafe {
                let g = graph.as_mut_ptr();
                for k in 0..(*g).nb_filters as usize {
                    let f = *(*g).filters.add(k);
                    (*f).hw_device_ctx = self.device.new_ref()?;
                }
            }
        }
        graph.validate().map_err(|e| hw_error(name, format!("configuring '{spec}': {e}")))?;
        Ok(graph)
    }

    /// Open the encoder of ladder output `pos` for the frames its sink produces (size, and the sink's
    /// `hw_frames_ctx` for hardware pixel formats).
    pub fn open_encoder(&mut self, pos: usize, recipe: &Recipe) -> Result<ff::encoder::Video, TranscodeError> {
        let enc_name = recipe.encoder.clone();
        let fail = |m: String| TranscodeError::Encoder { encoder: enc_name.clone(), hardware: true, message: m };
        let graph = self.graph.as_mut().ok_or_else(|| fail("the filter graph is not built".into()))?;
        let mut sink = graph.get(&format!("out{pos}")).ok_or_else(|| fail("missing sink".into()))?;
        let codec = ff::encoder::find_by_name(&recipe.encoder).ok_or_else(|| fail("not in this libavcodec".into()))?;
        let pix_fmt: ff::format::Pixel =
            recipe.pix_fmt.parse().map_err(|_| fail(format!("unknown pixel format {}", recipe.pix_fmt)))?;
        let mut enc = codec::context::Context::new_with_codec(codec).encoder().video()?;
        // SAFETY: reading the configured sink's properties; the encoder takes its own frames reference.
        unsafe {
            let s = sink.as_mut_ptr();
            enc.set_width(ffi::av_buffersink_get_w(s).max(0) as u32);
            enc.set_height(ffi::av_buffersink_get_h(s).max(0) as u32);
            let frames = ffi::av_buffersink_get_hw_frames_ctx(s);
            if recipe.hardware && !frames.is_null() {
                let r = ffi::av_buffer_ref(frames);
                if r.is_null() {
                    return Err(fail("out of memory".into()));
                }
                (*enc.as_mut_ptr()).hw_frames_ctx = r;
            }
        }
        enc.set_format(pix_fmt);
        enc.set_time_base(Rational(1, recipe.framerate as i32));
        enc.set_frame_rate(Some(Rational(recipe.framerate as i32, 1)));
        let mut opts = Dictionary::new();
        for (k, v) in &recipe.options {
            opts.set(k, v);
        }
        enc.open_as_with(codec, opts).map_err(|e| fail(format!("opening: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwaccel::{EncoderInfo, EncoderKind, HwDeviceKind, InputSpec, VariantSpec};

    /// The worker's own `open_decoder` opens the hardware decoder of a CUDA decode path and of a VA-API
    /// ladder: the codec is passed to `avcodec_open2` (a context made from stream parameters carries only the
    /// codec id; opening it without the codec failed on a real GPU with "No codec provided to
    /// avcodec_open2()", so the GPU was never used).
    #[test]
    fn the_hardware_decoder_opens_with_its_codec() {
        ff::init().unwrap();
        let v720 = VariantSpec {
            width: 1280,
            height: 720,
            bitrate_kbps: 1800,
            framerate: 30,
            segment_seconds: 2,
            ..Default::default()
        };
        let input = InputSpec { codec: "h264".into(), pix_fmt: "yuv420p".into(), width: 1920, height: 1080 };
        let gpu = |kind: EncoderKind, decode: Option<HwDeviceKind>, device: &str| EncoderInfo {
            name: if kind == EncoderKind::Vaapi { "h264_vaapi".into() } else { "libx264".into() },
            kind,
            available: true,
            device: device.into(),
            reason: String::new(),
            decode,
        };
        for e in [
            gpu(EncoderKind::Software, Some(HwDeviceKind::Cuda), "cuda:0"),
            gpu(EncoderKind::Vaapi, None, "/dev/dri/renderD128"),
        ] {
            let ladder = hwaccel::ladder(std::slice::from_ref(&e), std::slice::from_ref(&v720), &input);
            assert!(matches!(ladder.decode, Decode::Hardware { .. }), "{e:?}: decoded on the device");
            let path = HwPath::on_uninitialised_device(ladder);
            let mut par = codec::Parameters::new();
            // SAFETY: plain fields of parameters we own.
            unsafe {
                let p = par.as_mut_ptr();
                (*p).codec_type = ffi::AVMediaType::AVMEDIA_TYPE_VIDEO;
                (*p).codec_id = ffi::AVCodecID::AV_CODEC_ID_H264;
                (*p).width = 1920;
                (*p).height = 1080;
            }
            let decoder = path.open_decoder(par);
            assert!(decoder.is_ok(), "{e:?}: {:?}", decoder.err());
        }
    }
}
