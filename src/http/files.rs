//! HTTP semantics for files served from memory or disk: strong `ETag` and `If-None-Match` (304),
//! `Last-Modified` and `If-Modified-Since` (304), a single byte `Range` (206, or 416 when it cannot be
//! satisfied; several ranges get the whole file, which RFC 9110 allows), `Content-Length`, and `HEAD`
//! (axum answers HEAD from the GET route without the body). The body is shared `Bytes`, so a file held
//! in memory is never copied per request.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};

/// A file ready to serve.
#[derive(Debug, Clone)]
pub struct FileBody {
    pub bytes: Bytes,
    /// A strong validator, quoted (`"..."`).
    pub etag: String,
    pub modified: SystemTime,
    pub content_type: &'static str,
    pub cache_control: &'static str,
    /// `etag` and `modified` as header values, made once per file rather than once per request.
    etag_header: HeaderValue,
    last_modified: HeaderValue,
    /// `Content-Encoding` of `bytes` (a precompressed copy), if any.
    pub encoding: Option<&'static str>,
    /// Whether the representation was chosen by `Accept-Encoding` (answers carry `Vary`).
    pub negotiated: bool,
}

impl FileBody {
    /// A file with a validator the caller made (quoted, e.g. from a content hash).
    pub fn new(
        bytes: Bytes,
        etag: String,
        modified: SystemTime,
        content_type: &'static str,
        cache_control: &'static str,
    ) -> Self {
        let etag_header = HeaderValue::from_str(&etag).unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
        let last_modified = HeaderValue::from_str(&http_date(modified))
            .unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"));
        Self {
            bytes,
            etag,
            modified,
            content_type,
            cache_control,
            etag_header,
            last_modified,
            encoding: None,
            negotiated: false,
        }
    }

    /// The same file as one of several encodings chosen by `Accept-Encoding` (`None`: identity).
    pub fn negotiated(mut self, encoding: Option<&'static str>) -> Self {
        self.encoding = encoding;
        self.negotiated = true;
        self
    }

    /// A file whose validator is derived from its content (for files held in memory).
    pub fn from_content(
        bytes: Bytes,
        modified: SystemTime,
        content_type: &'static str,
        cache_control: &'static str,
    ) -> Self {
        let etag = content_etag(&bytes);
        Self::new(bytes, etag, modified, content_type, cache_control)
    }

    /// A file read from disk: the validator is its length and modification time (as nginx does).
    pub fn from_disk(
        bytes: Bytes,
        modified: SystemTime,
        content_type: &'static str,
        cache_control: &'static str,
    ) -> Self {
        let nanos = modified.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let etag = format!("\"{:x}-{:x}\"", bytes.len(), nanos);
        Self::new(bytes, etag, modified, content_type, cache_control)
    }
}

/// A strong validator from the content (FNV-1a 64 over the bytes, plus the length).
pub fn content_etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{:x}-{h:016x}\"", bytes.len())
}

/// `Last-Modified` form of a time (IMF-fixdate, second resolution).
pub fn http_date(t: SystemTime) -> String {
    let t: DateTime<Utc> = t.into();
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

fn parse_http_date(s: &str) -> Option<SystemTime> {
    let t = DateTime::parse_from_rfc2822(s.trim().replace("GMT", "+0000").as_str()).ok()?;
    Some(t.with_timezone(&Utc).into())
}

/// Whether an `Accept-Encoding` value allows `coding` (listed by name or `*`, without `q=0`).
pub fn accepts_encoding(accept: Option<&str>, coding: &str) -> bool {
    let Some(accept) = accept else { return false };
    let mut star = false;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or_default().trim();
        let zero =
            parts.any(|p| p.trim().strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)));
        if name.eq_ignore_ascii_case(coding) {
            return !zero;
        }
        if name == "*" {
            star = !zero;
        }
    }
    star
}

/// Whether `If-None-Match` lists `etag` (or `*`); weak comparison, as RFC 9110 asks for this header.
fn none_match(value: &str, etag: &str) -> bool {
    let bare = etag.trim_start_matches("W/");
    value.split(',').map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == bare)
}

/// A single range that starts past the end of the file (answered 416).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsatisfiable;

/// The byte range a `Range` header asks for, within `len`: `Ok(None)` serves the whole file (no header,
/// another unit, several ranges, or a malformed header, all of which RFC 9110 lets a server ignore);
/// `Err(Unsatisfiable)` answers 416.
pub fn byte_range(value: Option<&str>, len: u64) -> Result<Option<(u64, u64)>, Unsatisfiable> {
    let Some(spec) = value.and_then(|v| v.trim().strip_prefix("bytes=")) else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((start, end)) = spec.trim().split_once('-') else { return Ok(None) };
    let (start, end) = (start.trim(), end.trim());
    let range = match (start.is_empty(), end.is_empty()) {
        (true, true) => return Ok(None),
        // the last N bytes
        (true, false) => {
            let Ok(n) = end.parse::<u64>() else { return Ok(None) };
            if n == 0 || len == 0 {
                return Err(Unsatisfiable);
            }
            (len.saturating_sub(n), len - 1)
        }
        (false, _) => {
            let Ok(a) = start.parse::<u64>() else { return Ok(None) };
            let b = if end.is_empty() {
                len.saturating_sub(1)
            } else {
                let Ok(b) = end.parse::<u64>() else { return Ok(None) };
                if b < a {
                    return Ok(None);
                }
                b.min(len.saturating_sub(1))
            };
            if a >= len {
                return Err(Unsatisfiable);
            }
            (a, b)
        }
    };
    Ok(Some(range))
}

/// Answer `req` for `file`: 304, 206, 416 or 200, with the validators and caching headers. The body
/// shares the file's bytes.
pub fn respond(req: &HeaderMap, file: &FileBody) -> Response {
    let mut headers = HeaderMap::with_capacity(8);
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    headers.insert(header::ETAG, file.etag_header.clone());
    headers.insert(header::LAST_MODIFIED, file.last_modified.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(file.cache_control));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(file.content_type));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if file.negotiated {
        headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    if let Some(encoding) = file.encoding {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }

    let inm = req.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok());
    let not_modified = match inm {
        Some(v) => none_match(v, &file.etag),
        None => req
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_http_date)
            .and_then(|since| {
                let modified = file.modified.duration_since(UNIX_EPOCH).ok()?.as_secs();
                Some(modified <= since.duration_since(UNIX_EPOCH).ok()?.as_secs())
            })
            .unwrap_or(false),
    };
    if not_modified {
        headers.remove(header::CONTENT_TYPE);
        return answer(StatusCode::NOT_MODIFIED, headers, Body::empty());
    }

    let len = file.bytes.len() as u64;
    // A Range with If-Range that does not match serves the whole file.
    let if_range_ok = req
        .get(header::IF_RANGE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.trim() == file.etag || file.last_modified.to_str().is_ok_and(|lm| v.trim() == lm));
    let range = if if_range_ok { req.get(header::RANGE).and_then(|v| v.to_str().ok()) } else { None };
    match byte_range(range, len) {
        Ok(None) => answer(StatusCode::OK, headers, Body::from(file.bytes.clone())),
        Ok(Some((a, b))) => {
            set(&mut headers, header::CONTENT_RANGE, &format!("bytes {a}-{b}/{len}"));
            let part = file.bytes.slice(a as usize..=b as usize);
            answer(StatusCode::PARTIAL_CONTENT, headers, Body::from(part))
        }
        Err(Unsatisfiable) => {
            set(&mut headers, header::CONTENT_RANGE, &format!("bytes */{len}"));
            headers.remove(header::CONTENT_TYPE);
            answer(StatusCode::RANGE_NOT_SATISFIABLE, headers, Body::empty())
        }
    }
}

/// A response made of its parts (the header map is moved in, not merged into a new one).
fn answer(status: StatusCode, headers: HeaderMap, body: Body) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding() {
        assert!(accepts_encoding(Some("gzip, deflate, br"), "br"));
        assert!(accepts_encoding(Some("gzip;q=1.0, br;q=0.5"), "br"));
        assert!(!accepts_encoding(Some("gzip, br;q=0"), "br"));
        assert!(accepts_encoding(Some("*"), "gzip"));
        assert!(!accepts_encoding(Some("*, gzip;q=0"), "gzip"));
        assert!(!accepts_encoding(Some("identity"), "gzip"));
        assert!(!accepts_encoding(None, "gzip"));
    }

    #[test]
    fn ranges() {
        assert_eq!(byte_range(None, 10), Ok(None));
        assert_eq!(byte_range(Some("bytes=0-3"), 10), Ok(Some((0, 3))));
        assert_eq!(byte_range(Some("bytes=4-"), 10), Ok(Some((4, 9))));
        assert_eq!(byte_range(Some("bytes=-3"), 10), Ok(Some((7, 9))));
        assert_eq!(byte_range(Some("bytes=-30"), 10), Ok(Some((0, 9))));
        assert_eq!(byte_range(Some("bytes=5-100"), 10), Ok(Some((5, 9))));
        assert_eq!(byte_range(Some("bytes=10-"), 10), Err(Unsatisfiable));
        assert_eq!(byte_range(Some("bytes=-0"), 10), Err(Unsatisfiable));
        assert_eq!(byte_range(Some("bytes=0-1,4-5"), 10), Ok(None), "several ranges: the whole file");
        assert_eq!(byte_range(Some("items=0-1"), 10), Ok(None));
        assert_eq!(byte_range(Some("bytes=x-1"), 10), Ok(None));
        assert_eq!(byte_range(Some("bytes=5-2"), 10), Ok(None));
    }

    #[test]
    fn validators() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(http_date(t), "Tue, 14 Nov 2023 22:13:20 GMT");
        assert_eq!(parse_http_date("Tue, 14 Nov 2023 22:13:20 GMT"), Some(t));
        assert!(none_match("\"a\", \"b\"", "\"b\""));
        assert!(none_match("*", "\"b\""));
        assert!(none_match("W/\"b\"", "\"b\""));
        assert!(!none_match("\"c\"", "\"b\""));
        assert_ne!(content_etag(b"abc"), content_etag(b"abd"));
    }

    #[test]
    fn conditional_and_partial_answers() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let file = FileBody::from_content(Bytes::from_static(b"0123456789"), t, "video/mp2t", "max-age=1");
        let mut req = HeaderMap::new();
        assert_eq!(respond(&req, &file).status(), StatusCode::OK);
        req.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&file.etag).unwrap());
        assert_eq!(respond(&req, &file).status(), StatusCode::NOT_MODIFIED);
        let mut req = HeaderMap::new();
        req.insert(header::IF_MODIFIED_SINCE, HeaderValue::from_static("Tue, 14 Nov 2023 22:13:20 GMT"));
        assert_eq!(respond(&req, &file).status(), StatusCode::NOT_MODIFIED);
        let mut req = HeaderMap::new();
        req.insert(header::RANGE, HeaderValue::from_static("bytes=2-4"));
        let r = respond(&req, &file);
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(r.headers()[header::CONTENT_RANGE], "bytes 2-4/10");
        req.insert(header::IF_RANGE, HeaderValue::from_static("\"other\""));
        assert_eq!(respond(&req, &file).status(), StatusCode::OK);
        let mut req = HeaderMap::new();
        req.insert(header::RANGE, HeaderValue::from_static("bytes=20-"));
        assert_eq!(respond(&req, &file).status(), StatusCode::RANGE_NOT_SATISFIABLE);
    }
}
