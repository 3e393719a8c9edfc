//! Helpers of `tests/obs.rs`: real RTMP broadcasters (OBS Studio, GStreamer) and the checks of what
//! castd makes of them. Kept out of `tests/common` so that no other test file has to change.
#![allow(dead_code)]

pub mod gst;
pub mod hls;
pub mod obs;
pub mod procs;
pub mod viewer;
