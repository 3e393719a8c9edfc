//! The transcode worker: runs in the child process (`castd worker --config <json>`).
//!
//! It reads its input from stdin with libavformat, opened with the demuxer of the publisher's container
//! (`WorkerConfig::container`: FLV from RTMP, MPEG-TS from SRT; nothing is probed), and decodes the video **once** on the main thread (one
//! decoding thread up to 1080p60). Each software-encoded variant runs in a `stage` thread of its own
//! that scales its picture from the nearest larger picture already scaled for another variant (`scale`
//! for exact 2:1 and 3:2 steps, libswscale bilinear otherwise) and encodes it with the variant's
//! `EncoderRecipe`; passthrough variants copy the input video. The main thread decides per frame which
//! variants take it, muxes what the stages send back, and copies or encodes audio to AAC (decoded
//! once). Each variant goes to libavformat's HLS muxer in `<hls_dir>/N/stream.m3u8`; once every
//! variant has a segment the master playlist `<hls_dir>/stream.m3u8` is written (temp file + rename).
//! Keyframes are forced at segment boundaries computed from the input time, so all variants cut their
//! segments at the same instants.
//! Frame-rate conversion drops frames whose output timestamp does not advance (no duplication).
//! When any variant's encoder is a hardware one, the whole encoded ladder goes through `hw` instead
//! (device, hardware decode or one upload, libavfilter graph from `hwaccel::ladder`); encoder failures
//! come back as `TranscodeError::Encoder`, reported as a `WorkerEvent::EncoderFailed` and exit status 3.
//! Events go to stdout as JSON lines (`WorkerEvent`), logs to stderr.
//!
//! Files: `pipeline` (demux, decode, dispatch, finish), `variant` (one variant's setup: sink, video,
//! audio), `stage` (the software ladder's encoding stages: a thread per variant that scales, encodes
//! and passes the picture on), `scale` (fast area downscaling for the exact 2:1 and 3:2 ladder steps;
//! the rest is libswscale), `timing` (output frame slots: frame-rate conversion, segment boundaries;
//! shared by `stage` and `hw`'s path), `hw` (the hardware path: device, hardware decode or one upload,
//! libavfilter ladder), `sink` (the HLS muxer or the CMAF packager), `cmaf` (the CMAF (fMP4) packager
//! of LL-HLS: init segment, parts, segments, reported per part; `WorkerConfig::part_seconds`),
//! `headroom` (the capacity policy's measurements and its preset changes, `transcode::capacity`),
//! `report` (what the worker reports about the files it wrote; classic HLS: its own muxer's
//! playlist), `codecs` (the `CODECS` strings), `master` (the master playlist), `emit` (events to
//! stdout), `realtime` (the real-time variant's access units and Opus audio to the daemon, for WebRTC
//! viewers); this file is the process entry. None of them is used outside the worker process.

mod cmaf;
mod codecs;
mod emit;
mod headroom;
mod hw;
mod master;
mod pipeline;
mod realtime;
mod report;
mod scale;
mod sink;
mod stage;
mod timing;
mod variant;

use ff::{Dictionary, Packet};
use ffmpeg_next as ff;

use self::emit::emit;
use self::pipeline::Pipeline;
use super::{TranscodeError, WorkerConfig, WorkerEvent};
use crate::media::Container;

pub use self::master::write_master;
pub use self::variant::target_size;

/// Run the worker until stdin ends. Returns an error (and the process exits non-zero) on failure.
pub fn run(cfg: WorkerConfig) -> Result<(), TranscodeError> {
    if cfg.variants.is_empty() {
        return Err(TranscodeError::Config("no variants".into()));
    }
    ff::init()?;
    ff::util::log::set_level(ff::util::log::Level::Error);
    std::fs::create_dir_all(&cfg.hls_dir)?;
    let mut opts = Dictionary::new();
    opts.set("analyzeduration", "500000");
    opts.set("probesize", "1000000");
    opts.set("fflags", "+genpts");
    let mut ictx = open_input(cfg.container, opts)?;
    let mut pipeline = Pipeline::open(cfg, &ictx)?;
    let mut errors = 0u32;
    loop {
        // A fresh packet per read: av_read_frame overwrites the packet it is given without releasing
        // the buffer it held, so reusing one leaked every input packet (about the input's bitrate).
        let mut packet = Packet::empty();
        match packet.read(&mut ictx) {
            Ok(()) => {
                errors = 0;
                pipeline.on_packet(&packet)?;
            }
            Err(ff::Error::Eof) => break,
            Err(e) => {
                errors += 1;
                if errors > 100 {
                    return Err(e.into());
                }
            }
        }
    }
    pipeline.finish()?;
    emit(&WorkerEvent::Finished);
    Ok(())
}

/// Open stdin with the container's demuxer.
fn open_input(container: Container, opts: Dictionary) -> Result<ff::format::context::Input, TranscodeError> {
    let Some(name) = container.demuxer() else {
        return Err(TranscodeError::Config(format!("the worker cannot read {container:?} directly")));
    };
    let cname = std::ffi::CString::new(name).map_err(|e| TranscodeError::Config(e.to_string()))?;
    // SAFETY: av_find_input_format takes a NUL-terminated name and returns a pointer to one of
    // libavformat's static demuxer descriptions (or null); it is only read.
    let format = unsafe { ff::ffi::av_find_input_format(cname.as_ptr()) };
    if format.is_null() {
        return Err(TranscodeError::Config(format!("this libavformat has no {name} demuxer")));
    }
    // SAFETY: `format` is non-null and points at a static AVInputFormat that outlives the process.
    let format = unsafe { ff::format::format::Input::wrap(format as *mut _) };
    match ff::format::open_with("pipe:0", &ff::Format::Input(format), opts)? {
        ff::format::context::Context::Input(input) => Ok(input),
        ff::format::context::Context::Output(_) => Err(TranscodeError::Config("opened an output".into())),
    }
}

/// Entry point of `castd worker`: parse the config, run, report a failure as an event.
pub fn main(config_json: &str) -> i32 {
    let cfg: WorkerConfig = match serde_json::from_str(config_json) {
        Ok(c) => c,
        Err(e) => {
            emit(&WorkerEvent::Error { message: format!("invalid worker config: {e}") });
            return 2;
        }
    };
    match run(cfg) {
        Ok(()) => 0,
        Err(TranscodeError::Encoder { encoder, hardware, message }) => {
            tracing::error!("transcode worker: encoder {encoder} failed: {message}");
            emit(&WorkerEvent::EncoderFailed { encoder, hardware, message });
            3
        }
        Err(e) => {
            tracing::error!("transcode worker failed: {e}");
            emit(&WorkerEvent::Error { message: e.to_string() });
            1
        }
    }
}
