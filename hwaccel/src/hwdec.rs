//! Hardware decoding set-up, shared by the probe and castd's transcode worker so that the path the probe
//! proves is the path the worker runs.
//!
//! libavcodec decodes on a device when the decoder's context has the device as `hw_device_ctx` and its
//! `get_format` callback picks the device's pixel format among the formats the decoder offers; the
//! decoder must still be opened **with its codec** (`avcodec_open2(ctx, codec, ..)`): a context made
//! from stream parameters carries only the codec id, and opening it without the codec fails with "No
//! codec provided to avcodec_open2()". [`decoder_codec`] names the codec (the dedicated decoder, such as
//! `h264_qsv`, when the recipe says so, else libavcodec's decoder for the stream's codec id with the
//! device's hwaccel), [`attach_device`] sets the device and the callback.

use std::os::raw::c_void;

use ffmpeg_next as ffmpeg;
use ffmpeg_next::ffi;

use crate::recipe::{Decode, HwDeviceKind};

/// Pixel formats `get_format` asks for, one per device kind (static so a decoder's `opaque` can point at
/// them for as long as it lives).
static PIX_CUDA: ffi::AVPixelFormat = ffi::AVPixelFormat::AV_PIX_FMT_CUDA;
static PIX_VAAPI: ffi::AVPixelFormat = ffi::AVPixelFormat::AV_PIX_FMT_VAAPI;
static PIX_QSV: ffi::AVPixelFormat = ffi::AVPixelFormat::AV_PIX_FMT_QSV;

/// The hardware pixel format of a device kind.
pub fn hw_pix(kind: HwDeviceKind) -> &'static ffi::AVPixelFormat {
    match kind {
        HwDeviceKind::Cuda => &PIX_CUDA,
        HwDeviceKind::Vaapi => &PIX_VAAPI,
        HwDeviceKind::Qsv => &PIX_QSV,
    }
}

/// libav's device type for a device kind.
pub fn device_type(kind: HwDeviceKind) -> ffi::AVHWDeviceType {
    match kind {
        HwDeviceKind::Cuda => ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA,
        HwDeviceKind::Vaapi => ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_VAAPI,
        HwDeviceKind::Qsv => ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_QSV,
    }
}

/// `get_format` for hardware decoding: the format `opaque` points at when the decoder offers it, else the
/// first (software) one — the caller then finds frames in system memory and says so.
///
/// # Safety
/// Called by libavcodec with a valid context whose `opaque` is null or points at an `AVPixelFormat`
/// that outlives it, and a list of formats ending with `AV_PIX_FMT_NONE`.
pub unsafe extern "C" fn get_hw_format(
    ctx: *mut ffi::AVCodecContext,
    formats: *const ffi::AVPixelFormat,
) -> ffi::AVPixelFormat {
    // SAFETY: as documented above.
    unsafe {
        let wanted = (*ctx).opaque as *const ffi::AVPixelFormat;
        let mut p = formats;
        while !p.is_null() && *p != ffi::AVPixelFormat::AV_PIX_FMT_NONE {
            if !wanted.is_null() && *p == *wanted {
                return *p;
            }
            p = p.add(1);
        }
        if formats.is_null() {
            ffi::AVPixelFormat::AV_PIX_FMT_NONE
        } else {
            *formats
        }
    }
}

/// The codec to open a decoder with for `decode` on a stream of codec `id`: the dedicated decoder named by
/// the recipe, else libavcodec's decoder for the id. `Err` names what is missing.
pub fn decoder_codec(decode: &Decode, id: ffmpeg::codec::Id) -> Result<ffmpeg::Codec, String> {
    match decode {
        Decode::Hardware { decoder: Some(name), .. } => {
            ffmpeg::decoder::find_by_name(name).ok_or_else(|| format!("decoder {name} is not in this libavcodec"))
        }
        _ => ffmpeg::decoder::find(id).ok_or_else(|| format!("this libavcodec has no decoder for {id:?}")),
    }
}

/// Make the (not yet opened) decoder context `ctx` decode on `device` (a device context of `kind`): its own
/// reference to the device, and a `get_format` that picks the device's pixel format.
///
/// # Safety
/// `ctx` is a valid codec context that has not been opened; `device` a valid `AVBufferRef` of a hardware
/// device context.
pub unsafe fn attach_device(
    ctx: *mut ffi::AVCodecContext,
    device: *mut ffi::AVBufferRef,
    kind: HwDeviceKind,
) -> Result<(), String> {
    // SAFETY: as documented above; the context owns the new reference, `opaque` points at a static.
    unsafe {
        let r = ffi::av_buffer_ref(device);
        if r.is_null() {
            return Err("out of memory referencing the device".into());
        }
        (*ctx).hw_device_ctx = r;
        (*ctx).opaque = hw_pix(kind) as *const ffi::AVPixelFormat as *mut c_void;
        (*ctx).get_format = Some(get_hw_format);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    /// The decoder a hardware-decoding recipe opens is always named: the default decoder with the hwaccel
    /// (CUDA, VA-API) or the dedicated one (QSV). Opening through `attach_device` on a device context that
    /// is allocated but never initialised (no driver needed: the decoder reaches the device only in
    /// `get_format`, at the first picture) proves the codec is passed to `avcodec_open2`.
    #[test]
    fn hardware_decoders_open_with_their_codec() {
        ffmpeg::init().unwrap();
        for kind in [HwDeviceKind::Cuda, HwDeviceKind::Vaapi] {
            let decode = Decode::Hardware { device: kind, decoder: None, output_format: kind.av_name() };
            let codec = decoder_codec(&decode, ffmpeg::codec::Id::H264).unwrap();
            assert_eq!(codec.name(), "h264");
            // SAFETY: plain libav calls on objects created and freed here.
            unsafe {
                let mut device = ffi::av_hwdevice_ctx_alloc(device_type(kind));
                assert!(!device.is_null(), "{kind:?}: libavutil has this device type");
                let mut ctx = ffi::avcodec_alloc_context3(ptr::null());
                (*ctx).codec_type = ffi::AVMediaType::AVMEDIA_TYPE_VIDEO;
                (*ctx).codec_id = ffi::AVCodecID::AV_CODEC_ID_H264;
                attach_device(ctx, device, kind).unwrap();
                assert!(!(*ctx).hw_device_ctx.is_null());
                let rc = ffi::avcodec_open2(ctx, codec.as_ptr(), ptr::null_mut());
                assert_eq!(rc, 0, "{kind:?}: opening the decoder with its codec");
                ffi::avcodec_free_context(&mut ctx);
                ffi::av_buffer_unref(&mut device);
            }
        }
        let qsv =
            Decode::Hardware { device: HwDeviceKind::Qsv, decoder: Some("h264_qsv".into()), output_format: "qsv" };
        match decoder_codec(&qsv, ffmpeg::codec::Id::H264) {
            Ok(c) => assert_eq!(c.name(), "h264_qsv"),
            Err(e) => assert!(e.contains("h264_qsv"), "{e}"),
        }
        let missing =
            Decode::Hardware { device: HwDeviceKind::Qsv, decoder: Some("nope_qsv".into()), output_format: "qsv" };
        assert!(decoder_codec(&missing, ffmpeg::codec::Id::H264).err().unwrap_or_default().contains("nope_qsv"));
    }

    #[test]
    fn get_format_picks_the_device_format_or_the_first() {
        let formats = [
            ffi::AVPixelFormat::AV_PIX_FMT_YUV420P,
            ffi::AVPixelFormat::AV_PIX_FMT_CUDA,
            ffi::AVPixelFormat::AV_PIX_FMT_NONE,
        ];
        // SAFETY: a zeroed context is only read for `opaque` by the callback.
        unsafe {
            let mut ctx: ffi::AVCodecContext = std::mem::zeroed();
            ctx.opaque = hw_pix(HwDeviceKind::Cuda) as *const _ as *mut c_void;
            assert_eq!(get_hw_format(&mut ctx, formats.as_ptr()), ffi::AVPixelFormat::AV_PIX_FMT_CUDA);
            ctx.opaque = hw_pix(HwDeviceKind::Vaapi) as *const _ as *mut c_void;
            assert_eq!(get_hw_format(&mut ctx, formats.as_ptr()), ffi::AVPixelFormat::AV_PIX_FMT_YUV420P);
        }
    }
}
