//! Encoder discovery: open each known encoder for real through libavcodec on the real device.
//!
//! For every encoder in `KNOWN_ENCODERS` the probe looks the encoder up in libavcodec, creates its
//! hardware device (CUDA by index for NVENC, each `/dev/dri/renderD*` for VA-API, the default QSV
//! session), creates a hardware frames context, opens the encoder on a small picture and encodes one
//! frame. An encoder is available only when all of that works; otherwise `reason` is libav's error
//! (`av_strerror`) plus the messages the driver logged through `av_log` while it failed.
//!
//! Decode paths (`KNOWN_DECODE_PATHS`: libx264 encoding pictures decoded and scaled on a GPU) are probed
//! the same way, per device: [`probe_decode_path`] encodes a few frames of H.264 with libx264, decodes them
//! on the device (`hwdec`, the worker's own set-up), scales the picture there with the ladder's own scaler
//! and downloads it (`scale_cuda`/`scale_vaapi`, `hwdownload`): available only when a downloaded, scaled
//! NV12 picture comes out.
//!
//! Probing calls into vendor drivers, which can hang or crash. [`probe_bounded`] runs each probe on its
//! own thread and gives up on it after a time limit; crash isolation is the caller's job (castd runs
//! `castd encoders --json` as a child process).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::mpsc;
use std::time::Duration;

use ffmpeg_next as ffmpeg;
use ffmpeg_next::ffi;

use crate::recipe::{Decode, HwDeviceKind};
use crate::{hwdec, EncoderInfo, EncoderKind, KNOWN_DECODE_PATHS, KNOWN_ENCODERS, SOFTWARE_ENCODER};

/// Size of the probe picture (a multiple of 16, above every encoder's minimum).
const PROBE_W: c_int = 256;
const PROBE_H: c_int = 144;
/// How many CUDA devices the probe looks at.
const MAX_CUDA_DEVICES: u32 = 8;
/// At most this many driver log lines are kept per failure.
const MAX_LOG_LINES: usize = 6;

/// Why probing could not even start.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("libav initialisation failed: {0}")]
    Init(String),
}

/// The `va_list` argument type of libav's log callback as bindgen spells it: a pointer to the tag array on
/// x86_64, the `va_list` type itself elsewhere (aarch64 passes its struct the same way C does).
#[cfg(target_arch = "x86_64")]
type VaList = *mut ffi::__va_list_tag;
#[cfg(not(target_arch = "x86_64"))]
type VaList = ffi::va_list;

thread_local! {
    /// Warnings and errors libav logged on this thread while a probe step ran.
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// `av_log` callback: keep errors, warnings and verbose lines (where libva and the device code say why they
/// failed) of the calling thread when it is capturing, stay silent
/// otherwise (a failing probe is reported through `reason`, not through stderr noise).
unsafe extern "C" fn capture_log(avcl: *mut c_void, level: c_int, fmt: *const c_char, vl: VaList) {
    if level > ffi::AV_LOG_VERBOSE as c_int {
        return;
    }
    let mut buf = [0 as c_char; 512];
    let mut prefix: c_int = 0;
    // SAFETY: buf is a valid writable buffer of the given length; fmt and vl come from libav unchanged.
    unsafe { ffi::av_log_format_line2(avcl, level, fmt, vl, buf.as_mut_ptr(), buf.len() as c_int, &mut prefix) };
    // SAFETY: av_log_format_line2 always NUL-terminates within the buffer.
    let line = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().trim().to_string();
    if line.is_empty() {
        return;
    }
    CAPTURED.with(|c| {
        if let Some(lines) = c.borrow_mut().as_mut() {
            if lines.len() < MAX_LOG_LINES && !lines.contains(&line) {
                lines.push(line);
            }
        }
    });
}

/// libav's text for an error code.
pub fn av_error(code: c_int) -> String {
    let mut buf = [0 as c_char; 256];
    // SAFETY: buf is writable and its length is passed.
    unsafe { ffi::av_strerror(code, buf.as_mut_ptr(), buf.len()) };
    // SAFETY: av_strerror NUL-terminates.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Run `f` with this thread's libav log captured; on error the reason gets the driver's messages appended.
fn with_captured_log<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let result = f();
    let lines = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    result.map_err(|reason| if lines.is_empty() { reason } else { format!("{reason} ({})", lines.join("; ")) })
}

/// Initialise libav once and route its log through the capturing callback.
pub fn init() -> Result<(), ProbeError> {
    ffmpeg::init().map_err(|e| ProbeError::Init(e.to_string()))?;
    // SAFETY: installing a process-wide log callback with the signature libav expects.
    unsafe { ffi::av_log_set_callback(Some(capture_log)) };
    Ok(())
}

/// Owned libav objects, freed on drop.
struct Owned {
    ctx: *mut ffi::AVCodecContext,
    device: *mut ffi::AVBufferRef,
    frames: *mut ffi::AVBufferRef,
    frame: *mut ffi::AVFrame,
    packet: *mut ffi::AVPacket,
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: each pointer is null or owned by this struct; the free functions accept null.
        unsafe {
            ffi::av_packet_free(&mut self.packet);
            ffi::av_frame_free(&mut self.frame);
            ffi::avcodec_free_context(&mut self.ctx);
            ffi::av_buffer_unref(&mut self.frames);
            ffi::av_buffer_unref(&mut self.device);
        }
    }
}

/// Turn a libav return code into `Err("<step>: <error>")`.
fn check(ret: c_int, step: &str) -> Result<c_int, String> {
    if ret < 0 {
        Err(format!("{step}: {}", av_error(ret)))
    } else {
        Ok(ret)
    }
}

/// A hardware target: device type, device string, hardware pixel format.
struct HwTarget {
    device_type: ffi::AVHWDeviceType,
    device: Option<String>,
    pix_fmt: ffi::AVPixelFormat,
    label: &'static str,
}

/// Open `encoder` and encode one frame, in software (`hw` None) or on a hardware device with a frames
/// context. Returns the error reason on failure.
fn open_and_encode(encoder: &str, hw: Option<&HwTarget>) -> Result<(), String> {
    let codec = ffmpeg::encoder::find_by_name(encoder)
        .ok_or_else(|| format!("{encoder} is not built into this libavcodec ({})", libavcodec_version()))?;
    let mut o = Owned {
        ctx: ptr::null_mut(),
        device: ptr::null_mut(),
        frames: ptr::null_mut(),
        frame: ptr::null_mut(),
        packet: ptr::null_mut(),
    };
    // SAFETY: plain libav API use; every pointer is checked before use and freed by `Owned`.
    unsafe {
        if let Some(t) = hw {
            let dev = t.device.as_deref().map(CString::new).transpose().map_err(|_| "bad device path".to_string())?;
            let dev_ptr = dev.as_ref().map_or(ptr::null(), |d| d.as_ptr());
            check(
                ffi::av_hwdevice_ctx_create(&mut o.device, t.device_type, dev_ptr, ptr::null_mut(), 0),
                &format!("creating the {} device", t.label),
            )?;
            o.frames = ffi::av_hwframe_ctx_alloc(o.device);
            if o.frames.is_null() {
                return Err(format!("allocating {} frames failed", t.label));
            }
            let fc = (*o.frames).data as *mut ffi::AVHWFramesContext;
            (*fc).format = t.pix_fmt;
            (*fc).sw_format = ffi::AVPixelFormat::AV_PIX_FMT_NV12;
            (*fc).width = PROBE_W;
            (*fc).height = PROBE_H;
            (*fc).initial_pool_size = 8;
            check(ffi::av_hwframe_ctx_init(o.frames), &format!("creating the {} frames context", t.label))?;
        }
        o.ctx = ffi::avcodec_alloc_context3(codec.as_ptr());
        if o.ctx.is_null() {
            return Err("allocating the codec context failed".into());
        }
        let ctx = &mut *o.ctx;
        ctx.width = PROBE_W;
        ctx.height = PROBE_H;
        ctx.time_base = ffi::AVRational { num: 1, den: 30 };
        ctx.framerate = ffi::AVRational { num: 30, den: 1 };
        ctx.bit_rate = 500_000;
        ctx.gop_size = 30;
        ctx.max_b_frames = 0;
        if let Some(t) = hw {
            ctx.pix_fmt = t.pix_fmt;
            ctx.hw_device_ctx = ffi::av_buffer_ref(o.device);
            ctx.hw_frames_ctx = ffi::av_buffer_ref(o.frames);
        } else {
            ctx.pix_fmt = ffi::AVPixelFormat::AV_PIX_FMT_YUV420P;
        }
        check(ffi::avcodec_open2(o.ctx, codec.as_ptr(), ptr::null_mut()), "opening the encoder")?;

        o.frame = ffi::av_frame_alloc();
        o.packet = ffi::av_packet_alloc();
        if o.frame.is_null() || o.packet.is_null() {
            return Err("allocating a frame failed".into());
        }
        if hw.is_some() {
            check(ffi::av_hwframe_get_buffer(o.frames, o.frame, 0), "getting a hardware frame")?;
        } else {
            (*o.frame).format = ffi::AVPixelFormat::AV_PIX_FMT_YUV420P as c_int;
            (*o.frame).width = PROBE_W;
            (*o.frame).height = PROBE_H;
            check(ffi::av_frame_get_buffer(o.frame, 0), "allocating a frame")?;
            for plane in 0..3 {
                let h = if plane == 0 { PROBE_H } else { PROBE_H / 2 };
                let size = (*o.frame).linesize[plane] as usize * h as usize;
                ptr::write_bytes((*o.frame).data[plane], 128, size);
            }
        }
        (*o.frame).pts = 0;
        check(ffi::avcodec_send_frame(o.ctx, o.frame), "encoding a frame")?;
        check(ffi::avcodec_send_frame(o.ctx, ptr::null()), "flushing the encoder")?;
        let mut packets = 0;
        loop {
            let ret = ffi::avcodec_receive_packet(o.ctx, o.packet);
            if ret == ffi::AVERROR_EOF {
                break;
            }
            check(ret, "receiving a packet")?;
            packets += 1;
            ffi::av_packet_unref(o.packet);
        }
        if packets == 0 {
            return Err("the encoder produced no packet".into());
        }
    }
    Ok(())
}

fn libavcodec_version() -> String {
    // SAFETY: a pure getter.
    let v = unsafe { ffi::avcodec_version() };
    format!("libavcodec {}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}

fn info(name: &str, kind: EncoderKind, device: &str, result: Result<(), String>) -> EncoderInfo {
    let (available, reason) = match result {
        Ok(()) => (true, String::new()),
        Err(r) => (false, r),
    };
    EncoderInfo { name: name.into(), kind, available, device: device.into(), reason, decode: None }
}

/// The render nodes VA-API can use, sorted.
pub fn render_nodes() -> Vec<String> {
    let mut nodes: Vec<String> = std::fs::read_dir("/dev/dri")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().to_string_lossy().into_owned())
                .filter(|p| p.rsplit('/').next().is_some_and(|n| n.starts_with("renderD")))
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    nodes
}

/// Probe one encoder by name; VA-API gives one entry per render node, NVENC one per working CUDA device.
/// Call [`init`] first.
pub fn probe_encoder(name: &str) -> Vec<EncoderInfo> {
    let Some(kind) = KNOWN_ENCODERS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k) else {
        return vec![EncoderInfo {
            name: name.into(),
            kind: EncoderKind::Software,
            available: false,
            device: String::new(),
            reason: format!("castd does not know the encoder '{name}'"),
            decode: None,
        }];
    };
    match kind {
        EncoderKind::Software => vec![info(name, kind, "", with_captured_log(|| open_and_encode(name, None)))],
        EncoderKind::Nvenc => {
            let mut found = Vec::new();
            for index in 0..MAX_CUDA_DEVICES {
                let target = HwTarget {
                    device_type: ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA,
                    device: Some(index.to_string()),
                    pix_fmt: ffi::AVPixelFormat::AV_PIX_FMT_CUDA,
                    label: "CUDA",
                };
                let result = with_captured_log(|| open_and_encode(name, Some(&target)));
                let no_device = result.as_ref().err().is_some_and(|r| r.starts_with("creating the CUDA device"));
                if index > 0 && no_device {
                    break;
                }
                found.push(info(name, kind, &format!("cuda:{index}"), result));
                if no_device {
                    break;
                }
            }
            found
        }
        EncoderKind::Vaapi => {
            let nodes = render_nodes();
            let vaapi = |device: Option<String>| HwTarget {
                device_type: ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_VAAPI,
                device,
                pix_fmt: ffi::AVPixelFormat::AV_PIX_FMT_VAAPI,
                label: "VA-API",
            };
            if nodes.is_empty() {
                // No render node: still ask libva for its default display so the reason is the driver's.
                let result = with_captured_log(|| open_and_encode(name, Some(&vaapi(None))))
                    .map_err(|r| format!("no /dev/dri/renderD* device; {r}"));
                return vec![info(name, kind, "", result)];
            }
            nodes
                .into_iter()
                .map(|node| {
                    let result = with_captured_log(|| open_and_encode(name, Some(&vaapi(Some(node.clone())))));
                    info(name, kind, &node, result)
                })
                .collect()
        }
        EncoderKind::Qsv => {
            let target = HwTarget {
                device_type: ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_QSV,
                device: None,
                pix_fmt: ffi::AVPixelFormat::AV_PIX_FMT_QSV,
                label: "QSV",
            };
            vec![info(name, kind, "", with_captured_log(|| open_and_encode(name, Some(&target))))]
        }
    }
}

/// H.264 access units (Annex B, SPS/PPS in band) of a few small frames, encoded with libx264.
fn test_stream() -> Result<Vec<Vec<u8>>, String> {
    let codec = ffmpeg::encoder::find_by_name(SOFTWARE_ENCODER).ok_or("libx264 is not in this libavcodec")?;
    let mut o = Owned {
        ctx: ptr::null_mut(),
        device: ptr::null_mut(),
        frames: ptr::null_mut(),
        frame: ptr::null_mut(),
        packet: ptr::null_mut(),
    };
    let mut units = Vec::new();
    // SAFETY: plain libav API use; every pointer is checked before use and freed by `Owned`.
    unsafe {
        o.ctx = ffi::avcodec_alloc_context3(codec.as_ptr());
        if o.ctx.is_null() {
            return Err("allocating the codec context failed".into());
        }
        let ctx = &mut *o.ctx;
        ctx.width = PROBE_W;
        ctx.height = PROBE_H;
        ctx.time_base = ffi::AVRational { num: 1, den: 30 };
        ctx.pix_fmt = ffi::AVPixelFormat::AV_PIX_FMT_YUV420P;
        ctx.gop_size = 30;
        ctx.max_b_frames = 0;
        check(ffi::avcodec_open2(o.ctx, codec.as_ptr(), ptr::null_mut()), "opening libx264")?;
        o.frame = ffi::av_frame_alloc();
        o.packet = ffi::av_packet_alloc();
        if o.frame.is_null() || o.packet.is_null() {
            return Err("allocating a frame failed".into());
        }
        (*o.frame).format = ffi::AVPixelFormat::AV_PIX_FMT_YUV420P as c_int;
        (*o.frame).width = PROBE_W;
        (*o.frame).height = PROBE_H;
        check(ffi::av_frame_get_buffer(o.frame, 0), "allocating a frame")?;
        for pts in 0..3 {
            check(ffi::av_frame_make_writable(o.frame), "allocating a frame")?;
            for plane in 0..3 {
                let h = if plane == 0 { PROBE_H } else { PROBE_H / 2 };
                let size = (*o.frame).linesize[plane] as usize * h as usize;
                ptr::write_bytes((*o.frame).data[plane], 64 + 32 * pts as u8, size);
            }
            (*o.frame).pts = pts;
            check(ffi::avcodec_send_frame(o.ctx, o.frame), "encoding the test picture")?;
        }
        check(ffi::avcodec_send_frame(o.ctx, ptr::null()), "flushing libx264")?;
        loop {
            let ret = ffi::avcodec_receive_packet(o.ctx, o.packet);
            if ret == ffi::AVERROR_EOF {
                break;
            }
            check(ret, "receiving a packet")?;
            let p = &*o.packet;
            units.push(std::slice::from_raw_parts(p.data, p.size.max(0) as usize).to_vec());
            ffi::av_packet_unref(o.packet);
        }
    }
    if units.is_empty() {
        return Err("libx264 produced no packet".into());
    }
    Ok(units)
}

/// A filter graph, freed on drop.
struct Graph(*mut ffi::AVFilterGraph);

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: owned; avfilter_graph_free accepts null.
        unsafe { ffi::avfilter_graph_free(&mut self.0) }
    }
}

/// Decode H.264 on the device (`device` a CUDA index or a render node), scale the picture there to half its
/// size and download it, as the worker's decode path does. Returns the reason on failure.
fn decode_and_scale(kind: HwDeviceKind, device: Option<&str>, units: &[Vec<u8>]) -> Result<(), String> {
    let label = match kind {
        HwDeviceKind::Cuda => "CUDA",
        HwDeviceKind::Vaapi => "VA-API",
        HwDeviceKind::Qsv => "QSV",
    };
    let decode = Decode::Hardware { device: kind, decoder: None, output_format: kind.av_name() };
    let codec = hwdec::decoder_codec(&decode, ffmpeg::codec::Id::H264)?;
    let mut o = Owned {
        ctx: ptr::null_mut(),
        device: ptr::null_mut(),
        frames: ptr::null_mut(),
        frame: ptr::null_mut(),
        packet: ptr::null_mut(),
    };
    let dev = device.map(CString::new).transpose().map_err(|_| "bad device path".to_string())?;
    let (w, h) = (PROBE_W / 2, PROBE_H / 2);
    // SAFETY: plain libav API use; every pointer is checked before use and freed by `Owned` or `Graph`.
    unsafe {
        let dev_ptr = dev.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        check(
            ffi::av_hwdevice_ctx_create(&mut o.device, hwdec::device_type(kind), dev_ptr, ptr::null_mut(), 0),
            &format!("creating the {label} device"),
        )?;
        o.ctx = ffi::avcodec_alloc_context3(codec.as_ptr());
        if o.ctx.is_null() {
            return Err("allocating the decoder failed".into());
        }
        hwdec::attach_device(o.ctx, o.device, kind)?;
        check(ffi::avcodec_open2(o.ctx, codec.as_ptr(), ptr::null_mut()), "opening the hardware decoder")?;
        o.frame = ffi::av_frame_alloc();
        o.packet = ffi::av_packet_alloc();
        if o.frame.is_null() || o.packet.is_null() {
            return Err("allocating a frame failed".into());
        }
        let mut decoded = false;
        for unit in units.iter().map(Some).chain(std::iter::once(None)) {
            match unit {
                Some(bytes) => {
                    check(ffi::av_new_packet(o.packet, bytes.len() as c_int), "allocating a packet")?;
                    ptr::copy_nonoverlapping(bytes.as_ptr(), (*o.packet).data, bytes.len());
                    let rc = ffi::avcodec_send_packet(o.ctx, o.packet);
                    ffi::av_packet_unref(o.packet);
                    check(rc, &format!("decoding H.264 on the {label} device"))?;
                }
                None => check(ffi::avcodec_send_packet(o.ctx, ptr::null()), "flushing the decoder").map(|_| ())?,
            }
            let rc = ffi::avcodec_receive_frame(o.ctx, o.frame);
            if rc == 0 {
                decoded = true;
                break;
            }
            if rc != ffi::AVERROR(ffi::EAGAIN) && rc != ffi::AVERROR_EOF {
                check(rc, &format!("decoding H.264 on the {label} device"))?;
            }
        }
        if !decoded {
            return Err(format!("the {label} decoder returned no picture"));
        }
        if (*o.frame).format != *hwdec::hw_pix(kind) as c_int || (*o.frame).hw_frames_ctx.is_null() {
            return Err(format!("the {label} device does not decode H.264 here (the decoder fell back to the CPU)"));
        }
        // The ladder's own chain for a software-encoded rung: scale on the device, download the small picture.
        let spec = format!("{},hwdownload,format=nv12", kind.scaler(i64::from(w), i64::from(h)));
        let graph = Graph(ffi::avfilter_graph_alloc());
        if graph.0.is_null() {
            return Err("allocating a filter graph failed".into());
        }
        let name = |s: &str| CString::new(s).map_err(|_| "bad filter name".to_string());
        let (buffer, sink) = (name("buffer")?, name("buffersink")?);
        let args = name(&format!(
            "video_size={}x{}:pix_fmt={}:time_base=1/30:pixel_aspect=1/1",
            (*o.frame).width,
            (*o.frame).height,
            (*o.frame).format
        ))?;
        let (in_name, out_name) = (name("in")?, name("out")?);
        let mut src: *mut ffi::AVFilterContext = ptr::null_mut();
        let mut dst: *mut ffi::AVFilterContext = ptr::null_mut();
        check(
            ffi::avfilter_graph_create_filter(
                &mut src,
                ffi::avfilter_get_by_name(buffer.as_ptr()),
                in_name.as_ptr(),
                args.as_ptr(),
                ptr::null_mut(),
                graph.0,
            ),
            "creating the buffer source",
        )?;
        let par = ffi::av_buffersrc_parameters_alloc();
        if par.is_null() {
            return Err("out of memory".into());
        }
        (*par).hw_frames_ctx = (*o.frame).hw_frames_ctx;
        let rc = ffi::av_buffersrc_parameters_set(src, par);
        ffi::av_free(par as *mut c_void);
        check(rc, "hardware frames on the buffer source")?;
        check(
            ffi::avfilter_graph_create_filter(
                &mut dst,
                ffi::avfilter_get_by_name(sink.as_ptr()),
                out_name.as_ptr(),
                ptr::null(),
                ptr::null_mut(),
                graph.0,
            ),
            "creating the buffer sink",
        )?;
        let mut outputs = ffi::avfilter_inout_alloc();
        let mut inputs = ffi::avfilter_inout_alloc();
        if outputs.is_null() || inputs.is_null() {
            ffi::avfilter_inout_free(&mut outputs);
            ffi::avfilter_inout_free(&mut inputs);
            return Err("out of memory".into());
        }
        (*outputs).name = ffi::av_strdup(in_name.as_ptr());
        (*outputs).filter_ctx = src;
        (*inputs).name = ffi::av_strdup(out_name.as_ptr());
        (*inputs).filter_ctx = dst;
        let spec_c = name(&spec)?;
        let rc = ffi::avfilter_graph_parse_ptr(graph.0, spec_c.as_ptr(), &mut inputs, &mut outputs, ptr::null_mut());
        ffi::avfilter_inout_free(&mut outputs);
        ffi::avfilter_inout_free(&mut inputs);
        check(rc, &format!("the filter graph '{spec}'"))?;
        check(ffi::avfilter_graph_config(graph.0, ptr::null_mut()), &format!("configuring '{spec}'"))?;
        check(ffi::av_buffersrc_add_frame(src, o.frame), "feeding the filter graph")?;
        let mut out = ffi::av_frame_alloc();
        if out.is_null() {
            return Err("out of memory".into());
        }
        let rc = ffi::av_buffersink_get_frame(dst, out);
        let got = ((*out).width, (*out).height, (*out).format);
        ffi::av_frame_free(&mut out);
        check(rc, &format!("scaling on the {label} device ('{spec}')"))?;
        if got != (w, h, ffi::AVPixelFormat::AV_PIX_FMT_NV12 as c_int) {
            return Err(format!("'{spec}' gave a {}x{} picture of format {}", got.0, got.1, got.2));
        }
    }
    Ok(())
}

/// Probe a decode path (`decode:cuda`, `decode:vaapi`): one entry per CUDA device (until one cannot be
/// created) or render node, named after the encoder it serves (libx264) with `decode` set. Call [`init`]
/// first.
pub fn probe_decode_path(key: &str) -> Vec<EncoderInfo> {
    let entry = |kind: HwDeviceKind, device: &str, result: Result<(), String>| EncoderInfo {
        decode: Some(kind),
        ..info(SOFTWARE_ENCODER, EncoderKind::Software, device, result)
    };
    let kind = KNOWN_DECODE_PATHS.iter().find(|(k, _)| *k == key).map(|(_, kind)| *kind);
    // The test stream is made outside the captured log: libx264's own lines are not the driver's reason.
    let units = match (kind, test_stream()) {
        (Some(kind), Err(e)) => return vec![entry(kind, "", Err(format!("making the test stream: {e}")))],
        (_, Ok(units)) => units,
        (None, Err(_)) => Vec::new(),
    };
    match kind {
        Some(HwDeviceKind::Cuda) => {
            let mut found = Vec::new();
            for index in 0..MAX_CUDA_DEVICES {
                let result =
                    with_captured_log(|| decode_and_scale(HwDeviceKind::Cuda, Some(&index.to_string()), &units));
                let no_device = result.as_ref().err().is_some_and(|r| r.starts_with("creating the CUDA device"));
                if index > 0 && no_device {
                    break;
                }
                found.push(entry(HwDeviceKind::Cuda, &format!("cuda:{index}"), result));
                if no_device {
                    break;
                }
            }
            found
        }
        Some(HwDeviceKind::Vaapi) => {
            let nodes = render_nodes();
            if nodes.is_empty() {
                let result = with_captured_log(|| decode_and_scale(HwDeviceKind::Vaapi, None, &units))
                    .map_err(|r| format!("no /dev/dri/renderD* device; {r}"));
                return vec![entry(HwDeviceKind::Vaapi, "", result)];
            }
            nodes
                .into_iter()
                .map(|node| {
                    let result = with_captured_log(|| decode_and_scale(HwDeviceKind::Vaapi, Some(&node), &units));
                    entry(HwDeviceKind::Vaapi, &node, result)
                })
                .collect()
        }
        _ => vec![EncoderInfo {
            name: key.into(),
            kind: EncoderKind::Software,
            available: false,
            device: String::new(),
            reason: format!("castd does not know the decode path '{key}'"),
            decode: None,
        }],
    }
}

/// Probe an encoder (`libx264`, `h264_nvenc`, …) or a decode path (`decode:cuda`, `decode:vaapi`) by name.
/// Call [`init`] first.
pub fn probe_named(name: &str) -> Vec<EncoderInfo> {
    if name.starts_with("decode:") {
        probe_decode_path(name)
    } else {
        probe_encoder(name)
    }
}

/// Every name [`probe_named`] takes, in preference order (encoders, then decode paths).
pub fn probe_names() -> Vec<&'static str> {
    let hardware = KNOWN_ENCODERS.iter().filter(|(_, k)| *k != EncoderKind::Software).map(|(n, _)| *n);
    let decode = KNOWN_DECODE_PATHS.iter().map(|(n, _)| *n);
    hardware.chain(decode).chain(std::iter::once(SOFTWARE_ENCODER)).collect()
}

/// Probe every known encoder, each on its own thread with `per_encoder` as its time limit. An encoder
/// whose probe does not finish in time is reported unavailable (its thread is left behind; run this in a
/// process that exits afterwards). Software comes last so that the list reads in preference order.
pub fn probe_bounded(per_encoder: Duration) -> Result<Vec<EncoderInfo>, ProbeError> {
    init()?;
    let mut all = Vec::new();
    for name in probe_names() {
        let kind = KNOWN_ENCODERS.iter().find(|(n, _)| *n == name).map_or(EncoderKind::Software, |(_, k)| *k);
        let (tx, rx) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new().name(format!("probe-{name}")).spawn(move || {
            let _ = tx.send(probe_named(name));
        });
        let result = match spawned {
            Ok(_) => rx.recv_timeout(per_encoder).map_err(|e| match e {
                mpsc::RecvTimeoutError::Timeout => format!("the probe did not finish within {per_encoder:?}"),
                mpsc::RecvTimeoutError::Disconnected => "the probe thread panicked".to_string(),
            }),
            Err(e) => Err(format!("cannot start a probe thread: {e}")),
        };
        match result {
            Ok(found) => all.extend(found),
            Err(reason) => all.push(EncoderInfo {
                name: if name.starts_with("decode:") { SOFTWARE_ENCODER.into() } else { name.into() },
                kind,
                available: false,
                device: String::new(),
                reason,
                decode: KNOWN_DECODE_PATHS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k),
            }),
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libx264_opens_for_real() {
        init().unwrap();
        let found = probe_encoder("libx264");
        assert_eq!(found.len(), 1);
        assert!(found[0].available, "libx264: {}", found[0].reason);
        assert!(found[0].reason.is_empty());
    }

    #[test]
    fn unknown_and_missing_encoders_say_why() {
        init().unwrap();
        let found = probe_encoder("h264_nonexistent");
        assert!(!found[0].available);
        assert!(found[0].reason.contains("does not know"));
        let err = open_and_encode("h264_nonexistent", None).unwrap_err();
        assert!(err.contains("not built into this libavcodec"), "{err}");
    }

    /// On a box without the device the decode path says why in the driver's words; where the device works
    /// (a real GPU) it is available. Either way the probe decodes a real H.264 stream made by libx264.
    #[test]
    fn decode_paths_say_why_or_work() {
        init().unwrap();
        assert!(test_stream().unwrap().len() >= 3);
        for (key, kind) in KNOWN_DECODE_PATHS {
            let found = probe_named(key);
            assert!(!found.is_empty(), "{key}");
            for e in found {
                assert_eq!((e.name.as_str(), e.decode), (SOFTWARE_ENCODER, Some(kind)));
                assert!(e.available || !e.reason.is_empty(), "{key} unavailable without a reason");
            }
        }
        assert!(!probe_named("decode:nope")[0].available);
    }

    #[test]
    fn bounded_probe_lists_every_known_encoder() {
        let all = probe_bounded(Duration::from_secs(20)).unwrap();
        assert!(all.iter().any(|e| e.decode == Some(HwDeviceKind::Cuda)), "the CUDA decode path is listed");
        for (name, _) in KNOWN_ENCODERS {
            let entries: Vec<_> = all.iter().filter(|e| e.name == name).collect();
            assert!(!entries.is_empty(), "{name} missing");
            for e in entries {
                assert!(e.available || !e.reason.is_empty(), "{name} unavailable without a reason");
            }
        }
    }
}
