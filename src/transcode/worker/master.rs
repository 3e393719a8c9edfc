//! The master playlist `<hls_dir>/stream.m3u8`: one `EXT-X-STREAM-INF` per variant, written once every
//! variant has a segment.

use std::path::Path;

/// Write the master playlist atomically (temp file + rename).
pub fn write_master(hls_dir: &Path, entries: &[(u64, u32, u32, String, f64)]) -> std::io::Result<()> {
    let mut s = String::from("#EXTM3U\n#EXT-X-VERSION:3\n");
    for (i, (bandwidth, w, h, codecs, fps)) in entries.iter().enumerate() {
        s.push_str(&format!(
            "#EXT-X-STREAM-INF:BANDWIDTH={bandwidth},RESOLUTION={w}x{h},CODECS=\"{codecs}\",FRAME-RATE={fps:.3}\n{i}/stream.m3u8\n"
        ));
    }
    let tmp = hls_dir.join(".stream.m3u8.tmp");
    std::fs::write(&tmp, s)?;
    std::fs::rename(&tmp, hls_dir.join("stream.m3u8"))
}
