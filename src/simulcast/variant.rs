//! A `variant` target's media: the transcoder's output for one variant of the ladder, no extra encode.
//!
//! The reader follows the media feed: from the variant's next independent segment on, each
//! `SegmentWritten` of that variant is held (`media::Retention::hold`, so the window cannot delete it
//! while it is read), read and written to a `castd remux` child (`transcode::remux`: MPEG-TS segments
//! remuxed to FLV, packets copied), whose FLV output is cut into tags and handed to the RTMP client like
//! the source tap's. Latency is a segment or two more than a source target's. Segments of LL-HLS levels
//! (fMP4) are not forwarded (the target says so). Slow consumer: the feed's own policy (a lagging
//! subscription resyncs); the child's input is this reader's own buffer, so the transcoder never waits.

use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::SimulcastError;
use crate::media::flv::{FlvTag, TAG_AUDIO, TAG_VIDEO};
use crate::media::{Broadcast, Delivery, MediaChunk, MediaEvent, Subscription};

/// Segment bytes waiting for the child at most (a few segments); more and the oldest wait is cut short
/// by restarting at the next independent segment.
const MAX_PENDING: usize = 32 * 1024 * 1024;

/// One variant target's reader.
pub struct VariantReader {
    broadcast: Arc<Broadcast>,
    variant: usize,
    feed: Subscription,
    /// The remux child (`None`: raw mode, the segments' MPEG-TS as it is, for SRT targets).
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Bytes for the child's stdin, and how many of them went.
    pending: Vec<u8>,
    written: usize,
    flv: Cutter,
    started: bool,
}

/// FLV bytes from the child not yet cut into tags (the file header is skipped first).
#[derive(Default)]
struct Cutter {
    flv: Vec<u8>,
    header_skipped: bool,
}

impl Cutter {
    /// The next audio or video tag, if a whole one is buffered (script tags are skipped).
    fn next(&mut self) -> Option<FlvTag> {
        if !self.header_skipped {
            if self.flv.len() < 13 {
                return None;
            }
            self.flv.drain(..13);
            self.header_skipped = true;
        }
        loop {
            if self.flv.len() < 11 {
                return None;
            }
            let size = u32::from_be_bytes([0, self.flv[1], self.flv[2], self.flv[3]]) as usize;
            if self.flv.len() < 11 + size + 4 {
                return None;
            }
            let kind = self.flv[0] & 0x1f;
            let ts = u32::from_be_bytes([self.flv[7], self.flv[4], self.flv[5], self.flv[6]]);
            let data = Bytes::copy_from_slice(&self.flv[11..11 + size]);
            self.flv.drain(..11 + size + 4);
            if kind == TAG_VIDEO || kind == TAG_AUDIO {
                return Some(FlvTag { kind, timestamp: ts, data });
            }
        }
    }
}

impl VariantReader {
    /// Follow `variant`, its segments' MPEG-TS as it is (`recv` yields `MediaChunk::Bytes`, one per
    /// segment): for SRT targets.
    pub fn start_raw(b: &Arc<Broadcast>, variant: usize) -> VariantReader {
        VariantReader {
            broadcast: b.clone(),
            variant,
            feed: b.subscribe("simulcast variant target"),
            child: None,
            stdin: None,
            stdout: None,
            pending: Vec::new(),
            written: 0,
            flv: Cutter::default(),
            started: false,
        }
    }

    /// Start following `variant` (spawns the remux child).
    pub fn start(b: &Arc<Broadcast>, variant: usize) -> Result<VariantReader, SimulcastError> {
        let exe = crate::transcode::child::own_exe()
            .map_err(|e| SimulcastError::Remote(format!("castd's executable: {e}")))?;
        let mut child = Command::new(exe)
            .arg("remux")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| SimulcastError::Remote(format!("the remux process: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| SimulcastError::Remote("remux stdout missing".into()))?;
        Ok(VariantReader {
            broadcast: b.clone(),
            variant,
            feed: b.subscribe("simulcast variant target"),
            child: Some(child),
            stdin,
            stdout: Some(stdout),
            pending: Vec::new(),
            written: 0,
            flv: Cutter::default(),
            started: false,
        })
    }

    /// Queue a finished segment of this variant for the child.
    async fn segment(&mut self, file: &str, independent: bool) -> Result<(), SimulcastError> {
        if !self.started && !independent {
            return Ok(());
        }
        if !file.ends_with(".ts") {
            return Err(SimulcastError::Unsupported(
                "variant targets forward MPEG-TS segments: choose a latency level without LL-HLS, or forward the \
                 source"
                    .into(),
            ));
        }
        let Some(hold) = self.broadcast.retention.hold(self.variant, file) else { return Ok(()) };
        let mut bytes = Vec::new();
        let read = async {
            let mut f = tokio::fs::File::open(hold.path()).await?;
            f.read_to_end(&mut bytes).await
        };
        if let Err(e) = read.await {
            return Err(SimulcastError::Remote(format!("segment {file}: {e}")));
        }
        drop(hold);
        if self.pending.len() - self.written + bytes.len() > MAX_PENDING {
            // The remote takes less than the variant's rate: start again at the next independent segment.
            self.pending.clear();
            self.written = 0;
            self.started = false;
            return Ok(());
        }
        self.started = true;
        self.pending.drain(..self.written);
        self.written = 0;
        self.pending.extend_from_slice(&bytes);
        Ok(())
    }

    /// The next chunk (an FLV tag of the variant); `None` at the end of the stream.
    pub async fn recv(&mut self) -> Result<Option<MediaChunk>, SimulcastError> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if self.child.is_none() && self.written < self.pending.len() {
                let data = Bytes::copy_from_slice(&self.pending[self.written..]);
                self.pending.clear();
                self.written = 0;
                return Ok(Some(MediaChunk::Bytes { data, random_access: true }));
            }
            if let Some(tag) = self.flv.next() {
                return Ok(Some(MediaChunk::Flv(tag)));
            }
            let writable = self.written < self.pending.len() && self.stdin.is_some();
            tokio::select! {
                d = self.feed.recv() => match d {
                    None => return Ok(None),
                    Some(Delivery::Lagged) => self.started = false,
                    Some(Delivery::Event(ev)) => match &*ev {
                        MediaEvent::SegmentWritten(seg) if seg.variant == self.variant => {
                            let (file, independent) = (seg.file.clone(), seg.independent);
                            self.segment(&file, independent).await?;
                        }
                        MediaEvent::StreamEnded => return Ok(None),
                        _ => {}
                    },
                },
                n = async {
                    match self.stdin.as_mut() {
                        Some(stdin) => stdin.write(&self.pending[self.written..]).await,
                        None => std::future::pending().await,
                    }
                }, if writable => match n {
                    Ok(n) => self.written += n,
                    Err(e) => return Err(SimulcastError::Remote(format!("remux input: {e}"))),
                },
                n = async {
                    match self.stdout.as_mut() {
                        Some(out) => out.read(&mut buf).await,
                        None => std::future::pending().await,
                    }
                } => match n {
                    Ok(0) | Err(_) => {
                        let status = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
                        return Err(SimulcastError::Remote(format!("the remux process ended ({status:?})")));
                    }
                    Ok(n) => self.flv.flv.extend_from_slice(&buf[..n]),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flv_output_is_cut_into_tags() {
        let mut out = crate::media::flv::FLV_HEADER.to_vec();
        FlvTag { kind: 18, timestamp: 0, data: Bytes::from_static(b"meta") }.write_to(&mut out);
        FlvTag { kind: TAG_VIDEO, timestamp: 0x0100_0203, data: Bytes::from_static(&[0x17, 0, 1]) }.write_to(&mut out);
        // Fed in two pieces.
        let mut r = Cutter::default();
        r.flv.extend_from_slice(&out[..20]);
        assert!(r.next().is_none());
        r.flv.extend_from_slice(&out[20..]);
        let tag = r.next().expect("a video tag (the script tag skipped)");
        assert_eq!((tag.kind, tag.timestamp, &tag.data[..]), (TAG_VIDEO, 0x0100_0203, &[0x17, 0, 1][..]));
        assert!(r.next().is_none());
    }
}
