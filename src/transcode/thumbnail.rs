//! The stream's thumbnail and animated preview, made with libav in a child process.
//!
//! Decoding untrusted media is kept out of the daemon, as the transcode worker is: the supervisor runs
//! `castd thumbnail --variant-dir DIR --out DIR` (`main`). While the stream is live, every `INTERVAL`
//! (the first time as soon as a segment exists) the newest
//! segment listed in the highest variant's playlist is decoded: its first frame becomes
//! `<data-dir>/thumbnail.jpg` (mjpeg), and its first second at 8 fps, 480 px wide, becomes
//! `<data-dir>/preview.gif` through Owncast's filter chain (lanczos scale, palettegen/paletteuse).
//! Both are written to a temp file and renamed, so readers never see half a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ff::software::scaling;
use ff::{codec, frame, media, Packet, Rational};
use ffmpeg_next as ff;
use tokio_util::sync::CancellationToken;

use crate::tasks::{Stage, Tasks};

/// File names of the images, in the data dir (the HLS feature serves them).
pub const THUMBNAIL_FILE: &str = "thumbnail.jpg";
pub const PREVIEW_FILE: &str = "preview.gif";
/// Exit code of `castd thumbnail` when no segment is listed yet.
pub const EXIT_NO_SEGMENT: i32 = 3;
/// How long one child run may take.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the images are refreshed (Owncast: 20 s).
pub const INTERVAL: Duration = Duration::from_secs(20);
/// Preview frame rate and width (Owncast's).
pub const PREVIEW_FPS: i32 = 8;
pub const PREVIEW_WIDTH: u32 = 480;

#[derive(Debug, thiserror::Error)]
pub enum ThumbnailError {
    #[error("libav: {0}")]
    Av(#[from] ff::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("no segment yet")]
    NoSegment,
    #[error("no video frame in the segment")]
    NoFrame,
}

/// `castd thumbnail`: make both images once; 0 on success, `EXIT_NO_SEGMENT` without a segment.
pub fn main(variant_dir: &Path, out_dir: &Path) -> i32 {
    match generate(variant_dir, out_dir) {
        Ok(()) => 0,
        Err(ThumbnailError::NoSegment) => EXIT_NO_SEGMENT,
        Err(e) => {
            eprintln!("thumbnail: {e}");
            1
        }
    }
}

/// One child run: `Ok(true)` images made, `Ok(false)` no segment yet.
async fn run_child(variant_dir: &Path, out_dir: &Path) -> Result<bool, String> {
    let exe = super::child::own_exe().map_err(|e| e.to_string())?;
    let child = tokio::process::Command::new(exe)
        .arg("thumbnail")
        .arg("--variant-dir")
        .arg(variant_dir)
        .arg("--out")
        .arg(out_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the thumbnail process: {e}"))?;
    let out = tokio::time::timeout(CHILD_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| format!("the thumbnail process took longer than {CHILD_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(EXIT_NO_SEGMENT) => Ok(false),
        _ => Err(format!("{} ({})", String::from_utf8_lossy(&out.stderr).trim(), out.status)),
    }
}

/// Refresh the images every `INTERVAL` from `variant_dir` into `out_dir` (a task of the `Stream`
/// stage) until the returned token is cancelled or the stage stops (a thumbnail child being made is
/// killed on drop).
pub fn spawn_loop(tasks: &Tasks, variant_dir: PathBuf, out_dir: PathBuf) -> CancellationToken {
    tasks.spawn_cancellable(Stage::Stream, "thumbnails", async move {
        loop {
            let wait = match run_child(&variant_dir, &out_dir).await {
                Ok(true) => {
                    tracing::debug!("thumbnail updated");
                    INTERVAL
                }
                // The first segment is not listed yet: look again soon.
                Ok(false) => Duration::from_secs(1),
                Err(e) => {
                    tracing::warn!("thumbnail: {e}");
                    INTERVAL
                }
            };
            tokio::time::sleep(wait).await;
        }
    })
}

/// The newest complete segment listed in `variant_dir/stream.m3u8`.
pub fn newest_segment(variant_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(variant_dir.join("stream.m3u8")).ok()?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty() && !l.starts_with('#'))?;
    let name = Path::new(line.trim()).file_name()?;
    Some(variant_dir.join(name))
}

/// The `EXT-X-MAP` init segment named in `variant_dir/stream.m3u8`, if any (fMP4 playlists).
pub fn init_segment(variant_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(variant_dir.join("stream.m3u8")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\""))?;
    let name = Path::new(line.split('"').next()?).file_name()?;
    Some(variant_dir.join(name))
}

/// Make both images from the newest segment in `variant_dir`, into `out_dir`.
pub fn generate(variant_dir: &Path, out_dir: &Path) -> Result<(), ThumbnailError> {
    ff::init()?;
    ff::util::log::set_level(ff::util::log::Level::Error);
    let seg = newest_segment(variant_dir).ok_or(ThumbnailError::NoSegment)?;
    // An fMP4 segment (LL-HLS) decodes after its init segment: both into one temp file.
    let joined = match init_segment(variant_dir) {
        Some(init) => {
            let mut bytes = std::fs::read(init)?;
            bytes.extend_from_slice(&std::fs::read(&seg)?);
            let tmp = out_dir.join(".thumbnail-source.mp4");
            std::fs::write(&tmp, bytes)?;
            Some(tmp)
        }
        None => None,
    };
    let frames = decode_first_second(joined.as_deref().unwrap_or(&seg));
    if let Some(tmp) = joined {
        let _ = std::fs::remove_file(tmp);
    }
    let frames = frames?;
    let first = frames.first().ok_or(ThumbnailError::NoFrame)?;
    let jpeg = encode_jpeg(first)?;
    // The preview first: once the thumbnail exists, so does the preview.
    let tmp = out_dir.join(".preview.gif.tmp");
    encode_gif(&frames, &tmp)?;
    std::fs::rename(&tmp, out_dir.join(PREVIEW_FILE))?;
    write_atomic(&out_dir.join(THUMBNAIL_FILE), &jpeg)?;
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The frames of the segment's first second, one per 1/8 s.
fn decode_first_second(seg: &Path) -> Result<Vec<frame::Video>, ThumbnailError> {
    let mut ictx = ff::format::input(seg)?;
    let st = ictx.streams().best(media::Type::Video).ok_or(ThumbnailError::NoFrame)?;
    let idx = st.index();
    let tb = st.time_base();
    let mut dec = codec::context::Context::from_parameters(st.parameters())?.decoder().video()?;
    let mut out = Vec::new();
    let mut first_t: Option<f64> = None;
    let mut next = 0.0f64;
    let mut take = |f: &frame::Video, out: &mut Vec<frame::Video>| -> bool {
        let t = f.timestamp().unwrap_or(0) as f64 * f64::from(tb);
        let t0 = *first_t.get_or_insert(t);
        let rel = t - t0;
        if rel >= 1.0 {
            return false;
        }
        if rel + 1e-6 >= next {
            out.push(f.clone());
            next += 1.0 / f64::from(PREVIEW_FPS);
        }
        true
    };
    let mut decoded = frame::Video::empty();
    'read: loop {
        // A fresh packet per read: av_read_frame does not release the buffer of the packet it fills.
        let mut packet = Packet::empty();
        match packet.read(&mut ictx) {
            Ok(()) => {
                if packet.stream() != idx {
                    continue;
                }
                if dec.send_packet(&packet).is_err() {
                    continue;
                }
                while dec.receive_frame(&mut decoded).is_ok() {
                    if !take(&decoded, &mut out) {
                        break 'read;
                    }
                }
            }
            Err(ff::Error::Eof) => {
                let _ = dec.send_eof();
                while dec.receive_frame(&mut decoded).is_ok() {
                    if !take(&decoded, &mut out) {
                        break;
                    }
                }
                break;
            }
            Err(_) => break,
        }
    }
    Ok(out)
}

fn encode_jpeg(src: &frame::Video) -> Result<Vec<u8>, ThumbnailError> {
    let fmt = ff::format::Pixel::YUVJ420P;
    let (w, h) = (src.width(), src.height());
    let mut scaler = scaling::Context::get(src.format(), w, h, fmt, w, h, scaling::Flags::BILINEAR)?;
    let mut pic = frame::Video::empty();
    scaler.run(src, &mut pic)?;
    let codec = ff::encoder::find(codec::Id::MJPEG).ok_or(ff::Error::EncoderNotFound)?;
    let mut enc = codec::context::Context::new_with_codec(codec).encoder().video()?;
    enc.set_width(w);
    enc.set_height(h);
    enc.set_format(fmt);
    enc.set_time_base(Rational(1, 25));
    let mut enc = enc.open_as(codec)?;
    pic.set_pts(Some(0));
    enc.send_frame(&pic)?;
    enc.send_eof()?;
    let mut pkt = Packet::empty();
    enc.receive_packet(&mut pkt)?;
    Ok(pkt.data().unwrap_or_default().to_vec())
}

fn encode_gif(frames: &[frame::Video], path: &Path) -> Result<(), ThumbnailError> {
    let first = frames.first().ok_or(ThumbnailError::NoFrame)?;
    let pix: ff::ffi::AVPixelFormat = first.format().into();
    let mut graph = ff::filter::Graph::new();
    let args = format!(
        "video_size={}x{}:pix_fmt={}:time_base=1/{PREVIEW_FPS}:pixel_aspect=1/1",
        first.width(),
        first.height(),
        pix as i32
    );
    let buffer = ff::filter::find("buffer").ok_or(ff::Error::FilterNotFound)?;
    let sink = ff::filter::find("buffersink").ok_or(ff::Error::FilterNotFound)?;
    graph.add(&buffer, "in", &args)?;
    graph.add(&sink, "out", "")?;
    let spec = format!(
        "scale=w={PREVIEW_WIDTH}:h=-2:flags=lanczos,split[a][b];[a]palettegen=stats_mode=full[p];[b][p]paletteuse=new=1"
    );
    graph.output("in", 0)?.input("out", 0)?.parse(&spec)?;
    graph.validate()?;
    {
        let mut src = graph.get("in").ok_or(ff::Error::FilterNotFound)?;
        for (i, f) in frames.iter().enumerate() {
            let mut f = f.clone();
            f.set_pts(Some(i as i64));
            src.source().add(&f)?;
        }
        src.source().flush()?;
    }
    let mut out_frames = Vec::new();
    let mut sink_ctx = graph.get("out").ok_or(ff::Error::FilterNotFound)?;
    let mut f = frame::Video::empty();
    while sink_ctx.sink().frame(&mut f).is_ok() {
        out_frames.push(f.clone());
    }
    let last = out_frames.first().ok_or(ThumbnailError::NoFrame)?;
    let codec = ff::encoder::find(codec::Id::GIF).ok_or(ff::Error::EncoderNotFound)?;
    let mut octx = ff::format::output_as(path, "gif")?;
    let mut enc = codec::context::Context::new_with_codec(codec).encoder().video()?;
    enc.set_width(last.width());
    enc.set_height(last.height());
    enc.set_format(ff::format::Pixel::PAL8);
    enc.set_time_base(Rational(1, PREVIEW_FPS));
    let mut enc = enc.open_as(codec)?;
    let mut ost = octx.add_stream(codec)?;
    ost.set_parameters(&enc);
    octx.write_header()?;
    let ost_tb = octx.stream(0).map(|s| s.time_base()).unwrap_or(Rational(1, 100));
    let mut pkt = Packet::empty();
    for (i, f) in out_frames.iter_mut().enumerate() {
        f.set_pts(Some(i as i64));
        enc.send_frame(f)?;
        while enc.receive_packet(&mut pkt).is_ok() {
            pkt.set_stream(0);
            pkt.rescale_ts(Rational(1, PREVIEW_FPS), ost_tb);
            pkt.write_interleaved(&mut octx)?;
        }
    }
    enc.send_eof()?;
    while enc.receive_packet(&mut pkt).is_ok() {
        pkt.set_stream(0);
        pkt.rescale_ts(Rational(1, PREVIEW_FPS), ost_tb);
        pkt.write_interleaved(&mut octx)?;
    }
    octx.write_trailer()?;
    Ok(())
}
