//! Pure helpers over HLS playlists and object keys: the segments a playlist names, its target
//! duration, the served copy with absolute segment URLs, and where a file of a channel's HLS folder
//! lives under `pathPrefix` in the bucket.

/// The file names of the media a playlist lists (URI lines; an `EXT-X-MAP` init section too), in order.
pub fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        let uri = if let Some(tag) = line.strip_prefix("#EXT-X-MAP:") {
            match attribute(tag, "URI") {
                Some(u) => u,
                None => continue,
            }
        } else if line.is_empty() || line.starts_with('#') {
            continue;
        } else {
            line
        };
        if let Some(name) = file_name(uri) {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// `#EXT-X-TARGETDURATION` in seconds.
pub fn target_duration(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.trim().strip_prefix("#EXT-X-TARGETDURATION:")?.trim().parse().ok())
}

/// The playlist with every media URI (and `EXT-X-MAP` URI) replaced by `base` + its file name.
pub fn rewrite(text: &str, base: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64 * 8);
    for line in text.lines() {
        let t = line.trim();
        if let Some(tag) = t.strip_prefix("#EXT-X-MAP:") {
            match attribute(tag, "URI").and_then(|u| Some((u, file_name(u)?))) {
                Some((uri, name)) => out.push_str(&t.replacen(&format!("\"{uri}\""), &format!("\"{base}{name}\""), 1)),
                None => out.push_str(line),
            }
        } else if !t.is_empty() && !t.starts_with('#') {
            match file_name(t) {
                Some(name) => {
                    out.push_str(base);
                    out.push_str(name);
                }
                None => out.push_str(line),
            }
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `pathPrefix` as a key prefix: no leading or trailing `/`, empty parts dropped, `/` appended when
/// not empty.
pub fn normalise_prefix(prefix: &str) -> String {
    let parts: Vec<&str> = prefix.split('/').map(str::trim).filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}/", parts.join("/"))
    }
}

/// The key of `rel` (a path under a channel's HLS folder, such as `0/stream.m3u8`) under a normalised
/// prefix (with the channel's folder appended: `uploader::channel_folder`).
pub fn key(prefix: &str, rel: &str) -> String {
    format!("{prefix}hls/{rel}")
}

/// The last path component of a URI (query and fragment dropped), if it is a plain file name.
fn file_name(uri: &str) -> Option<&str> {
    let path = uri.split(['?', '#']).next()?;
    let name = path.rsplit('/').next()?;
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then_some(name)
}

/// The quoted value of `name` in an attribute list (`URI="init.mp4",BYTERANGE=...`).
fn attribute<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    let start = list.find(&format!("{name}=\""))? + name.len() + 2;
    let end = list[start..].find('"')? + start;
    Some(&list[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAYLIST: &str = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:5\n\
        #EXTINF:2.0,\nstream-abc-5.ts\n#EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z\n#EXTINF:2.0,\nstream-abc-6.ts\n";

    #[test]
    fn lists_segments_and_target() {
        assert_eq!(segments(PLAYLIST), ["stream-abc-5.ts", "stream-abc-6.ts"]);
        assert_eq!(target_duration(PLAYLIST), Some(2.0));
        let fmp4 = "#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:1,\nseg-1.m4s\n";
        assert_eq!(segments(fmp4), ["init.mp4", "seg-1.m4s"]);
        assert!(segments("#EXTM3U\n../../etc/passwd\n").contains(&"passwd".to_string()));
        assert!(segments("#EXTM3U\n.hidden\n").is_empty());
    }

    #[test]
    fn rewrites_uris_only() {
        let out = rewrite(PLAYLIST, "http://cdn.test/live/hls/0/");
        assert!(out.contains("\nhttp://cdn.test/live/hls/0/stream-abc-5.ts\n"), "{out}");
        assert!(out.contains("#EXT-X-PROGRAM-DATE-TIME:2026-01-01T00:00:00Z\n"));
        assert_eq!(out.lines().count(), PLAYLIST.lines().count());
        let fmp4 = rewrite("#EXT-X-MAP:URI=\"init.mp4\"\nseg-1.m4s\n", "https://b/");
        assert_eq!(fmp4, "#EXT-X-MAP:URI=\"https://b/init.mp4\"\nhttps://b/seg-1.m4s\n");
    }

    #[test]
    fn keys_under_the_prefix() {
        assert_eq!(normalise_prefix(""), "");
        assert_eq!(normalise_prefix("/a//b/"), "a/b/");
        assert_eq!(key(&normalise_prefix("live"), "0/stream.m3u8"), "live/hls/0/stream.m3u8");
        assert_eq!(key("", "stream.m3u8"), "hls/stream.m3u8");
    }
}
