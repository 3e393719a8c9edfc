//! Media helpers for tests: the ffmpeg CLI as an RTMP broadcaster (lavfi test pattern and tone).
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Api, Server};

/// Publish `secs` seconds of testsrc2 at `size` (`WxH`, 30 fps) + a 440 Hz tone to `live/<key>`, in
/// real time (`-re`), with x264 ultrafast and AAC.
pub fn publish(server: &Server, key: &str, size: &str, secs: u32) -> Child {
    let url = format!("rtmp://127.0.0.1:{}/live/{key}", server.rtmp_port.expect("rtmp port in the log"));
    publish_to(&url, "flv", size, secs)
}

/// The same test pattern and tone (a keyframe every 2 s) sent as `format` (`flv`, `mpegts`) to `url`.
pub fn publish_to(url: &str, format: &str, size: &str, secs: u32) -> Child {
    Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=size={size}:rate=30"))
        .args(["-f", "lavfi", "-i", "sine=frequency=440", "-t"])
        .arg(secs.to_string())
        .args(["-c:v", "libx264", "-preset", "ultrafast", "-g", "60", "-c:a", "aac", "-f", format])
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ffmpeg")
}

/// Whether `/api/status` says the stream is online.
pub fn online(server: &impl Api) -> bool {
    server.get_json("/api/status")["online"].as_bool().unwrap_or(false)
}

/// The body of a successful GET of `path`.
pub fn text(server: &impl Api, path: &str) -> Option<String> {
    let r = server.get(path);
    r.status().is_success().then(|| r.text().unwrap_or_default())
}

/// Segment names listed in a playlist.
pub fn segments(playlist: &str) -> Vec<String> {
    playlist.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect()
}

/// Wait for `child` to exit, at most `timeout`; kills it after that.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
