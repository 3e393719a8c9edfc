//! Encoder discovery: open each known encoder for real through libavcodec on the real device.
//!
//! For every encoder in `KNOWN_ENCODERS` the probe looks the encoder up in libavcodec, creates its
//! hardware device (CUDA by index for NVENC, each `/dev/dri/renderD*` for VA-API, the default QSV
//! session), creates a hardware frames context, opens the encoder on a small picture and encodes one
//! frame. An encoder is available only when all of that works; otherwise `reason` is libav's error
//! (`av_strerror`) plus the messages the driver logged through `av_log` while it failed.
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

use crate::{EncoderInfo, EncoderKind, KNOWN_ENCODERS};

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
    EncoderInfo { name: name.into(), kind, available, device: device.into(), reason }
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

/// Probe every known encoder, each on its own thread with `per_encoder` as its time limit. An encoder
/// whose probe does not finish in time is reported unavailable (its thread is left behind; run this in a
/// process that exits afterwards). Software comes last so that the list reads in preference order.
pub fn probe_bounded(per_encoder: Duration) -> Result<Vec<EncoderInfo>, ProbeError> {
    init()?;
    let mut all = Vec::new();
    for (name, kind) in KNOWN_ENCODERS {
        let (tx, rx) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new().name(format!("probe-{name}")).spawn(move || {
            let _ = tx.send(probe_encoder(name));
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
            Err(reason) => {
                all.push(EncoderInfo { name: name.into(), kind, available: false, device: String::new(), reason })
            }
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

    #[test]
    fn bounded_probe_lists_every_known_encoder() {
        let all = probe_bounded(Duration::from_secs(20)).unwrap();
        for (name, _) in KNOWN_ENCODERS {
            let entries: Vec<_> = all.iter().filter(|e| e.name == name).collect();
            assert!(!entries.is_empty(), "{name} missing");
            for e in entries {
                assert!(e.available || !e.reason.is_empty(), "{name} unavailable without a reason");
            }
        }
    }
}
