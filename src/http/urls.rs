//! URLs that come from a user, made safe before they are checked, stored or sent back:
//!
//! - [`normalize_path`]: a root-relative path (a chat emoji's `src`) as a browser would resolve it:
//!   percent-decoded until nothing changes (so `%2e%2e` and double encodings such as `%252e` are seen
//!   as what they become), backslashes read as `/` (as browsers read them in `http(s)` URLs), repeated
//!   slashes collapsed and `.`/`..` segments resolved. A check is made on this form, and only this
//!   form (re-encoded by [`encode_path`]) is stored or served, so what is checked is what a browser
//!   requests.
//! - [`local_redirect`]: a `Location` built from a request (an invite link's page, a sign-in's way
//!   back) is a same-origin path: it starts with one `/` and not `//` or `/\` (either makes a browser
//!   read a host), and has no whitespace or control character (browsers drop tabs and newlines, so
//!   `/\t/evil.example` would become `//evil.example`); anything else is `/`.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// How many times a path is percent-decoded at most; one still changing after that is refused.
const MAX_DECODES: usize = 4;

/// What [`encode_path`] leaves as it is in a segment: letters, digits and `-._~` (RFC 3986's
/// unreserved characters).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The decoded, resolved form of the root-relative path `raw` (see the module doc), or `None` when it
/// is not one: not starting with `/` or `\`, with a query or fragment, still changing after
/// [`MAX_DECODES`] decodings, not UTF-8, or holding a control character once decoded. `..` above the
/// root stays at the root, as a browser resolves it. A trailing `/` is kept.
pub fn normalize_path(raw: &str) -> Option<String> {
    let decoded = fully_decoded(raw)?;
    if decoded.chars().any(char::is_control) || decoded.contains(['?', '#']) {
        return None;
    }
    let decoded = decoded.replace('\\', "/");
    if !decoded.starts_with('/') {
        return None;
    }
    let segments = resolved_segments(decoded.split('/'));
    let mut out = String::with_capacity(decoded.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    let last = decoded.rsplit('/').next().unwrap_or_default();
    let ends_in_folder = decoded.ends_with('/') || last == "." || last == "..";
    if out.is_empty() || (ends_in_folder && !segments.is_empty()) {
        out.push('/');
    }
    Some(out)
}

/// `raw` percent-decoded until nothing changes, or `None` when it still changes after
/// [`MAX_DECODES`] decodings or is not UTF-8 once decoded (a caller checking for danger treats that as
/// dangerous).
fn fully_decoded(raw: &str) -> Option<String> {
    let mut decoded = raw.to_string();
    for _ in 0..MAX_DECODES {
        let next = percent_decode_str(&decoded).decode_utf8().ok()?.into_owned();
        if next == decoded {
            return Some(decoded);
        }
        decoded = next;
    }
    None
}

/// Path segments as a browser resolves them: empty and `.` segments dropped, `..` removing the one
/// before it (never above the root).
fn resolved_segments<'a>(segments: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for seg in segments {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    out
}

/// A path from [`normalize_path`] as a URL path again: each segment percent-encoded (everything but
/// RFC 3986's unreserved characters), the slashes kept.
pub fn encode_path(path: &str) -> String {
    path.split('/').map(|s| utf8_percent_encode(s, SEGMENT).to_string()).collect::<Vec<_>>().join("/")
}

/// `target` when it is a same-origin path a `Location` may carry (see the module doc), else `/`.
pub fn local_redirect(target: &str) -> String {
    if is_local_path(target) {
        target.to_string()
    } else {
        "/".to_string()
    }
}

/// Whether `target` is a same-origin path: one leading `/`, not `//` or `/\`, printable ASCII with no
/// space or backslash.
pub fn is_local_path(target: &str) -> bool {
    let b = target.as_bytes();
    b.first() == Some(&b'/')
        && !matches!(b.get(1), Some(b'/') | Some(b'\\'))
        && b.iter().all(|c| c.is_ascii_graphic() && *c != b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_in_every_encoding_are_resolved() {
        for raw in [
            "/img/emoji/%2e%2e/%2e%2e/api/admin/disconnect",
            "/img/emoji/%2E%2E/%2e%2E/api/admin/disconnect",
            "/img/emoji/%252e%252e/%252e%252e/api/admin/disconnect",
            "/img/emoji/%25252e%25252e/%25252e./api/admin/disconnect",
            "/img/emoji/..%2f..%2fapi/admin/disconnect",
            "/img/emoji/..%5c..%5capi/admin/disconnect",
            "/img/emoji/..\\..\\api\\admin\\disconnect",
            "/img/emoji/%5c..%5c..%5capi%5cadmin%5cdisconnect",
            "/img/emoji/../../api/admin/disconnect",
            "/img//emoji/./../../api/admin/disconnect",
            "/img/emoji/../../../../api/admin/disconnect",
        ] {
            assert_eq!(normalize_path(raw).as_deref(), Some("/api/admin/disconnect"), "{raw}");
        }
        assert_eq!(normalize_path("/img//emoji///a.gif").as_deref(), Some("/img/emoji/a.gif"));
        assert_eq!(normalize_path("/img/emoji/").as_deref(), Some("/img/emoji/"));
        assert_eq!(normalize_path("/img/emoji/..").as_deref(), Some("/img/"));
        assert_eq!(normalize_path("/..").as_deref(), Some("/"));
        assert_eq!(normalize_path("/img/emoji/a%20b.gif").as_deref(), Some("/img/emoji/a b.gif"));
    }

    #[test]
    fn what_is_not_a_plain_path_is_refused() {
        for raw in [
            "img/emoji/a.gif",
            "https://evil.example/a.gif",
            "/img/emoji/a.gif?x=1",
            "/img/emoji/a%3fx",
            "/img/emoji/a%00.gif",
            "/img/emoji/a%0a.gif",
            "/img/emoji/%ff.gif",
            // Still changing after four decodings.
            "/img/emoji/%252525252e",
        ] {
            assert_eq!(normalize_path(raw), None, "{raw}");
        }
        assert_eq!(encode_path("/img/emoji/a b%.gif"), "/img/emoji/a%20b%25.gif");
    }

    #[test]
    fn redirects_stay_on_this_origin() {
        for ok in ["/", "/c/music/", "/x?y=1&z=%2F", "/a//b"] {
            assert_eq!(local_redirect(ok), ok);
        }
        for bad in [
            "//evil.example/x",
            "/\\evil.example/x",
            "https://evil.example/",
            "",
            "x",
            "/\t/evil.example",
            "/a b",
            "/é",
        ] {
            assert_eq!(local_redirect(bad), "/", "{bad:?}");
        }
    }
}
