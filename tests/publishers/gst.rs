//! GStreamer's `gst-launch-1.0` as a broadcaster: a live test pattern and a 440 Hz tone, x264 and AAC,
//! muxed to FLV and published by one of GStreamer's two RTMP sinks:
//! - `rtmp2sink` (gst-plugins-bad's own RTMP implementation, on GIO),
//! - `rtmpsink` (gst-plugins-bad's wrapper around librtmp, rtmpdump's library).
//!
//! `-e` makes the pipeline end with EOS, so the sink unpublishes and closes as a client would.

use std::path::Path;
use std::process::Command;

use super::procs::{require, Proc};

/// The two RTMP sinks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sink {
    Rtmp2,
    LibRtmp,
}

impl Sink {
    pub fn element(self) -> &'static str {
        match self {
            Sink::Rtmp2 => "rtmp2sink",
            Sink::LibRtmp => "rtmpsink",
        }
    }

    /// The sink with its location (librtmp takes options after the URL; `live=1` marks a live stream).
    fn with_location(self, url: &str) -> String {
        match self {
            Sink::Rtmp2 => format!("rtmp2sink location={url}"),
            Sink::LibRtmp => format!("rtmpsink location=\"{url} live=1\""),
        }
    }
}

/// Fails with the package to install when gst-launch-1.0 or one of the pipeline's elements is missing.
pub fn require_elements(sink: Sink) {
    require("gst-launch-1.0", "gstreamer1.0-tools");
    require("gst-inspect-1.0", "gstreamer1.0-tools");
    for (element, package) in [
        ("videotestsrc", "gstreamer1.0-plugins-base"),
        ("audiotestsrc", "gstreamer1.0-plugins-base"),
        ("x264enc", "gstreamer1.0-plugins-ugly"),
        ("h264parse", "gstreamer1.0-plugins-bad"),
        ("avenc_aac", "gstreamer1.0-libav"),
        ("aacparse", "gstreamer1.0-plugins-good"),
        ("flvmux", "gstreamer1.0-plugins-good"),
        (sink.element(), "gstreamer1.0-plugins-bad"),
    ] {
        let ok =
            Command::new("gst-inspect-1.0").arg("--exists").arg(element).status().map(|s| s.success()).unwrap_or(false);
        assert!(ok, "GStreamer element {element} is missing (Debian package {package}): run ./packaging/deps.sh");
    }
}

/// Publish `secs` seconds of a 640x360 30 fps test pattern (keyframe every 2 s) and a tone to `url`.
pub fn publish(sink: Sink, url: &str, secs: u32, dir: &Path, name: &str) -> Proc {
    let pipeline = format!(
        "videotestsrc is-live=true pattern=ball num-buffers={frames} \
           ! video/x-raw,width=640,height=360,framerate=30/1 \
           ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=60 bitrate=800 \
           ! video/x-h264,profile=main ! h264parse ! queue ! mux. \
         audiotestsrc is-live=true wave=sine freq=440 samplesperbuffer=1024 num-buffers={audio_buffers} \
           ! audioconvert ! audioresample ! audio/x-raw,rate=48000,channels=2 \
           ! avenc_aac bitrate=128000 ! aacparse ! queue ! mux. \
         flvmux name=mux streamable=true ! {sink}",
        frames = secs * 30,
        audio_buffers = secs * 48_000 / 1024,
        sink = sink.with_location(url),
    );
    let mut cmd = Command::new("gst-launch-1.0");
    cmd.arg("-e");
    // gst-launch takes the pipeline as argv words; quoted values (librtmp's location) stay one word.
    cmd.args(split_pipeline(&pipeline));
    Proc::spawn(name, cmd, dir)
}

/// Split a pipeline description on whitespace, keeping "double-quoted" parts together (quotes removed).
fn split_pipeline(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}
