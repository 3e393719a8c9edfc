//! The CMAF (fragmented MP4) packager of one variant, for low-latency HLS.
//!
//! libavformat's `mp4` muxer (`empty_moov+default_base_moof+frag_custom`) writes into memory through a
//! custom IO context: its header is the init segment (`init-<id>.mp4`), and each explicit flush
//! (`av_write_frame(NULL)`) is one part (a `moof`+`mdat` pair). This module decides where parts and
//! segments begin: a part ends before the video frame that would take it past the part target, and
//! before every keyframe (so a part that starts with a keyframe is `INDEPENDENT`); a segment ends at
//! the first keyframe at least one segment length after its start (the encoders force keyframes on
//! the segment grid, so segments are whole GOPs made of parts). Each part is written to
//! `<dir>/part-<id>-<msn>-<n>.m4s`, each finished segment (its parts concatenated) to
//! `<dir>/seg-<id>-<msn>.m4s`, and a plain fMP4 playlist of the finished segments to `stream.m3u8`
//! (what the thumbnail, and players once the stream has ended, read). Every part is reported to the
//! daemon (`media::HlsPart`), which renders the LL-HLS playlists and serves the parts from memory.
//! Nothing is deleted here: the daemon's retention (`media::retention`) owns when files go.
//!
//! The header waits for the first video keyframe: hardware and libx264 encoders give no global header,
//! so the SPS/PPS of that keyframe become the track's extradata. Audio before it is dropped.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use ff::format::context::{Output, StreamIo};
use ff::{Dictionary, Packet, Rational};
use ffmpeg_next as ff;

use crate::media::HlsPart;
use crate::transcode::{TranscodeError, WorkerConfig};

/// Default part length (seconds): 6 frames at 30 fps, the shortest Apple's LL-HLS rules suggest;
/// PART-HOLD-BACK is three of these (0.6 s). Same as `--llhls-part-ms`'s default.
pub const DEFAULT_PART_SECONDS: f64 = 0.2;

impl WorkerConfig {
    /// The LL-HLS part target in seconds (200–500 ms; the default when unset).
    pub fn part_seconds(&self) -> f64 {
        if self.part_ms == 0 {
            DEFAULT_PART_SECONDS
        } else {
            f64::from(self.part_ms.clamp(200, 500)) / 1000.0
        }
    }
}

/// Where the muxer's bytes land until a part is cut.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuf {
    fn take(&self) -> Vec<u8> {
        self.0.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }
}

/// Segment and part lengths, the window, and where files go.
#[derive(Debug, Clone)]
pub struct CmafSettings {
    pub variant: usize,
    pub dir: PathBuf,
    pub id: String,
    pub part_seconds: f64,
    pub segment_seconds: u32,
    pub list_size: u32,
}

struct Finished {
    msn: u64,
    duration: f64,
    name: String,
    pdt_ms: i64,
}

/// One variant's packager (see the module doc).
pub struct Cmaf {
    octx: Output,
    buf: SharedBuf,
    set: CmafSettings,
    header: bool,
    /// Stream indexes of video and audio in the muxer.
    v_ost: usize,
    init_name: String,
    msn: u64,
    part: u32,
    seg_start: f64,
    part_start: f64,
    last_video: f64,
    frame_dur: f64,
    independent: bool,
    seg_bytes: Vec<u8>,
    /// Wall clock (ms) of media time `t_first`.
    wall0_ms: i64,
    t_first: f64,
    seg_pdt_ms: i64,
    window: VecDeque<Finished>,
    /// Whether any part was written (the variant is playable).
    pub has_part: bool,
    /// Parts reported, for the caller to emit.
    pub reports: Vec<HlsPart>,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// SPS and PPS NAL units of an Annex-B access unit, with 4-byte start codes.
pub fn annexb_parameter_sets(data: &[u8]) -> Vec<u8> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    for (k, &s) in starts.iter().enumerate() {
        let mut end = starts.get(k + 1).map_or(data.len(), |n| n - 3);
        while end > s && data[end - 1] == 0 {
            end -= 1;
        }
        if s < end && matches!(data[s] & 0x1f, 7 | 8) {
            out.extend_from_slice(&[0, 0, 0, 1]);
            out.extend_from_slice(&data[s..end]);
        }
    }
    out
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

impl Cmaf {
    /// An `mp4` muxer writing to memory; add the streams to `octx()` before the first packet.
    pub fn new(set: CmafSettings) -> Result<Cmaf, TranscodeError> {
        let buf = SharedBuf::default();
        let io = StreamIo::from_write(buf.clone())?;
        let octx = ff::format::output_to_stream(io, None, Some("mp4"))?;
        let init_name = format!("init-{}.mp4", set.id);
        Ok(Cmaf {
            octx,
            buf,
            set,
            header: false,
            v_ost: 0,
            init_name,
            msn: 0,
            part: 0,
            seg_start: 0.0,
            part_start: 0.0,
            last_video: 0.0,
            frame_dur: 1.0 / 30.0,
            independent: true,
            seg_bytes: Vec::new(),
            wall0_ms: 0,
            t_first: 0.0,
            seg_pdt_ms: 0,
            window: VecDeque::new(),
            has_part: false,
            reports: Vec::new(),
        })
    }

    pub fn octx(&mut self) -> &mut Output {
        &mut self.octx
    }

    /// The nominal frame duration (seconds) of the video, used to keep parts within the target.
    pub fn set_frame_rate(&mut self, fps: f64) {
        if fps > 0.0 {
            self.frame_dur = 1.0 / fps;
        }
    }

    fn prefix(&self) -> String {
        format!("part-{}-", self.set.id)
    }

    fn part_name(&self, msn: u64, part: u32) -> String {
        format!("{}{msn}-{part}.m4s", self.prefix())
    }

    fn segment_name(&self, msn: u64) -> String {
        format!("seg-{}-{msn}.m4s", self.set.id)
    }

    fn write_header(&mut self, first_key: &Packet) -> Result<(), TranscodeError> {
        // SAFETY: the stream's parameters are owned by the output context; extradata is allocated with
        // av_malloc (padding zeroed) as libavformat frees it with av_free.
        unsafe {
            let ctx = self.octx.as_mut_ptr();
            let st = *(*ctx).streams.add(self.v_ost);
            let par = (*st).codecpar;
            if (*par).extradata.is_null() || (*par).extradata_size == 0 {
                let sets = first_key.data().map(annexb_parameter_sets).unwrap_or_default();
                if !sets.is_empty() {
                    let pad = ff::ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize;
                    let p = ff::ffi::av_mallocz(sets.len() + pad) as *mut u8;
                    if !p.is_null() {
                        std::ptr::copy_nonoverlapping(sets.as_ptr(), p, sets.len());
                        (*par).extradata = p;
                        (*par).extradata_size = sets.len() as i32;
                    }
                }
            }
        }
        let mut opts = Dictionary::new();
        opts.set("movflags", "empty_moov+default_base_moof+frag_custom");
        self.octx.write_header_with(opts)?;
        self.flush_io();
        let init = self.buf.take();
        write_atomic(&self.set.dir.join(&self.init_name), &init)?;
        self.header = true;
        Ok(())
    }

    fn flush_io(&mut self) {
        // SAFETY: pb is the custom IO context the output owns.
        unsafe {
            let ctx = self.octx.as_mut_ptr();
            if !(*ctx).pb.is_null() {
                ff::ffi::avio_flush((*ctx).pb);
            }
        }
    }

    /// Write a video packet (timestamps in `from_tb`) into stream `ost`, cutting parts and segments
    /// before it as needed.
    pub fn write_video(&mut self, pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        self.v_ost = ost;
        let ts = pkt.dts().or(pkt.pts()).unwrap_or(0);
        let t = ts as f64 * f64::from(from_tb);
        let key = pkt.is_key();
        if !self.header {
            if !key {
                return Ok(());
            }
            self.write_header(&pkt)?;
            self.t_first = t;
            self.wall0_ms = now_ms();
            self.seg_start = t;
            self.part_start = t;
            self.seg_pdt_ms = self.wall0_ms;
            self.independent = true;
        } else if t > self.last_video || key {
            let new_segment = key && t - self.seg_start >= f64::from(self.set.segment_seconds) - self.frame_dur / 2.0;
            let over = t + self.frame_dur - self.part_start > self.set.part_seconds + 1e-4;
            if new_segment || key || over {
                self.cut(t, new_segment)?;
                self.independent = key;
            }
        }
        self.last_video = self.last_video.max(t);
        self.put(pkt, from_tb, ost)
    }

    /// Write an audio packet; dropped until the header is written.
    pub fn write_audio(&mut self, pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        if !self.header {
            return Ok(());
        }
        self.put(pkt, from_tb, ost)
    }

    /// Write `pkt` to output stream `ost`, its timestamps from `from_tb` into that stream's time base.
    fn put(&mut self, mut pkt: Packet, from_tb: Rational, ost: usize) -> Result<(), TranscodeError> {
        let tb = self.octx.stream(ost).map(|s| s.time_base()).unwrap_or(from_tb);
        pkt.rescale_ts(from_tb, tb);
        pkt.set_stream(ost);
        pkt.set_position(-1);
        pkt.write(&mut self.octx)?;
        Ok(())
    }

    /// End the current part at media time `t_next` (and its segment, when `segment_ends`).
    fn cut(&mut self, t_next: f64, segment_ends: bool) -> Result<(), TranscodeError> {
        // SAFETY: a NULL packet asks a muxer with AVFMT_ALLOW_FLUSH (mp4, frag_custom) to write its fragment.
        unsafe {
            ff::ffi::av_write_frame(self.octx.as_mut_ptr(), std::ptr::null_mut());
        }
        self.flush_io();
        let bytes = self.buf.take();
        if bytes.is_empty() {
            return Ok(());
        }
        let duration = (t_next - self.part_start).max(0.0);
        let name = self.part_name(self.msn, self.part);
        write_atomic(&self.set.dir.join(&name), &bytes)?;
        self.seg_bytes.extend_from_slice(&bytes);
        let mut report = HlsPart {
            variant: self.set.variant,
            init: self.init_name.clone(),
            msn: self.msn,
            part: self.part,
            name,
            duration,
            independent: self.independent,
            pdt_ms: self.seg_pdt_ms,
            segment: None,
            segment_duration: 0.0,
            part_target: self.set.part_seconds,
            target_duration: self.set.segment_seconds,
            list_size: self.set.list_size,
            prefix: self.prefix(),
        };
        self.has_part = true;
        self.part_start = t_next;
        if segment_ends {
            let seg_name = self.segment_name(self.msn);
            let seg_duration = t_next - self.seg_start;
            write_atomic(&self.set.dir.join(&seg_name), &self.seg_bytes)?;
            self.seg_bytes.clear();
            report.segment = Some(seg_name.clone());
            report.segment_duration = seg_duration;
            self.window.push_back(Finished {
                msn: self.msn,
                duration: seg_duration,
                name: seg_name,
                pdt_ms: self.seg_pdt_ms,
            });
            self.write_playlist(false)?;
            self.prune();
            self.msn += 1;
            self.part = 0;
            self.seg_start = t_next;
            self.seg_pdt_ms = self.wall0_ms + ((t_next - self.t_first) * 1000.0).round() as i64;
        } else {
            self.part += 1;
        }
        self.reports.push(report);
        Ok(())
    }

    /// Forget segments that left the window (the playlist lists the newest `list_size`; two more are
    /// remembered for slack). Files are deleted by the daemon's retention (`media::retention`), which
    /// knows who still holds them.
    fn prune(&mut self) {
        let keep = self.set.list_size.max(1) as usize + 2;
        while self.window.len() > keep {
            self.window.pop_front();
        }
    }

    /// The plain fMP4 playlist of finished segments, on disk.
    fn write_playlist(&self, end: bool) -> std::io::Result<()> {
        let shown: Vec<&Finished> =
            self.window.iter().rev().take(self.set.list_size.max(1) as usize).collect::<Vec<_>>();
        let Some(first) = shown.last() else { return Ok(()) };
        let target = shown.iter().map(|f| f.duration.round() as u32).max().unwrap_or(0).max(self.set.segment_seconds);
        let mut s = format!(
            "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:{target}\n#EXT-X-MEDIA-SEQUENCE:{}\n#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-MAP:URI=\"{}\"\n",
            first.msn, self.init_name
        );
        for f in shown.iter().rev() {
            s.push_str(&format!(
                "#EXT-X-PROGRAM-DATE-TIME:{}\n#EXTINF:{:.5},\n{}\n",
                pdt_string(f.pdt_ms),
                f.duration,
                f.name
            ));
        }
        if end {
            s.push_str("#EXT-X-ENDLIST\n");
        }
        write_atomic(&self.set.dir.join("stream.m3u8"), s.as_bytes())
    }

    /// The input ended: the last part ends one frame after the last video frame.
    pub fn finish(&mut self) -> Result<(), TranscodeError> {
        if self.header {
            let end = self.last_video + self.frame_dur;
            self.cut(end, true)?;
            self.write_playlist(true)?;
        }
        Ok(())
    }
}

/// `EXT-X-PROGRAM-DATE-TIME` form of a wall-clock time in ms.
pub fn pdt_string(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_sets_from_an_access_unit() {
        let au = [0, 0, 0, 1, 0x09, 0xf0, 0, 0, 0, 1, 0x67, 0x64, 0, 0x1f, 0, 0, 1, 0x68, 0xee, 0, 0, 1, 0x65, 1, 2];
        assert_eq!(annexb_parameter_sets(&au), vec![0, 0, 0, 1, 0x67, 0x64, 0, 0x1f, 0, 0, 0, 1, 0x68, 0xee]);
        assert!(annexb_parameter_sets(&[0, 0, 1, 0x65, 1]).is_empty());
    }

    #[test]
    fn program_date_time_format() {
        assert_eq!(pdt_string(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
