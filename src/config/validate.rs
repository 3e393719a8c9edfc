//! Validation of setting values that arrive from the admin API.
//!
//! Each function takes the raw JSON `value` of a `{"value": ...}` request and returns the typed value
//! or a `ValidationError` whose text is shown to the owner as is, so it says what was wrong.

use std::net::IpAddr;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ExternalAction, S3Info, SocialHandle, StreamKey, StreamOutputVariant};

/// An http(s) URL that `url` takes, as a regular expression without anchors, for the setters' documented
/// value shapes (`concat!` it into a JSON Schema). The last host label starts with a letter (a name
/// ending in a number would be read as IPv4).
macro_rules! url_re {
    () => {
        r"https?://([A-Za-z0-9]+[.-])*[A-Za-z][A-Za-z0-9]*(:[0-9]{1,4})?(/[A-Za-z0-9._~-]*)*"
    };
}
pub(crate) use url_re;

/// The documented value of a setter that takes `url(v, true)`: an http(s) URL or empty.
pub const URL_OR_EMPTY_SCHEMA: &str =
    concat!(r#"{"type":"string","maxLength":2048,"pattern":"^("#, url_re!(), r#")?$"}"#);

/// A value that does not fit the setting it was sent for.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ValidationError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError(msg.into()))
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A string, at most `max` characters.
pub fn string(v: &Value, max: usize) -> Result<String, ValidationError> {
    match v {
        Value::String(s) if s.chars().count() <= max => Ok(s.clone()),
        Value::String(_) => err(format!("value is too long (at most {max} characters)")),
        other => err(format!("value must be a string, not {}", kind_of(other))),
    }
}

/// A boolean.
pub fn boolean(v: &Value) -> Result<bool, ValidationError> {
    v.as_bool().map_or_else(|| err(format!("value must be a boolean, not {}", kind_of(v))), Ok)
}

/// A whole number in `lo..=hi` (`2.0` is one, as JSON Schema counts it).
pub fn integer(v: &Value, lo: i64, hi: i64) -> Result<i64, ValidationError> {
    let whole = v
        .as_i64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_991.0).map(|f| f as i64));
    match whole {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        Some(n) => err(format!("value {n} is out of range ({lo} to {hi})")),
        None if v.is_number() => err("value must be a whole number"),
        None => err(format!("value must be a number, not {}", kind_of(v))),
    }
}

/// A TCP port, 1..=65535.
pub fn port(v: &Value) -> Result<u16, ValidationError> {
    // The range check above makes the narrowing exact.
    integer(v, 1, 65535).map(|n| n as u16)
}

/// An IP address to bind to.
pub fn ip_address(v: &Value) -> Result<String, ValidationError> {
    let s = string(v, 64)?;
    match s.trim().parse::<IpAddr>() {
        Ok(ip) => Ok(ip.to_string()),
        Err(_) => err(format!("'{s}' is not an IP address")),
    }
}

/// An array of strings; each is trimmed, empty ones dropped, at most `max_items`.
pub fn string_list(v: &Value, max_items: usize) -> Result<Vec<String>, ValidationError> {
    let Value::Array(items) = v else {
        return err(format!("value must be an array of strings, not {}", kind_of(v)));
    };
    if items.len() > max_items {
        return err(format!("too many items (at most {max_items})"));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::String(s) = item else {
            return err(format!("every item must be a string, found {}", kind_of(item)));
        };
        let s = s.trim();
        if !s.is_empty() {
            out.push(s.to_string());
        }
    }
    Ok(out)
}

/// An http(s) URL, or the empty string when `allow_empty`.
pub fn url(v: &Value, allow_empty: bool) -> Result<String, ValidationError> {
    let s = string(v, 2048)?;
    let s = s.trim();
    if s.is_empty() && allow_empty {
        return Ok(String::new());
    }
    Ok(normal_http_url(s)?.trim_end_matches('/').to_string())
}

/// An http(s) URL as it is stored: `s` itself, or the URL parser's normalised form (dot segments,
/// backslashes, encoded dots resolved, as a browser resolves them) when that form means something
/// else than the text (more than a trailing `/`). What is checked later is what a browser follows.
fn normal_http_url(s: &str) -> Result<String, ValidationError> {
    let u = check_http_url(s)?;
    let normal = u.as_str();
    Ok(if normal == s || normal.strip_suffix('/') == Some(s) { s.to_string() } else { normal.to_string() })
}

fn check_http_url(s: &str) -> Result<url::Url, ValidationError> {
    match url::Url::parse(s) {
        Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => Ok(u),
        Ok(_) => err(format!("'{s}' must be an http or https URL")),
        Err(e) => err(format!("'{s}' is not a valid URL: {e}")),
    }
}

/// Deserialize `v` into `T`, naming the problem when it does not fit.
pub fn typed<T: DeserializeOwned>(v: &Value, what: &str) -> Result<T, ValidationError> {
    serde_json::from_value(v.clone()).map_err(|e| ValidationError(format!("invalid {what}: {e}")))
}

/// Stream keys: at least one, each a valid `stream_key` (stored trimmed), repeats dropped. Short keys
/// are accepted, as Owncast accepts them (its default is `abc123`); `Settings::security_warnings`
/// reports them.
pub fn stream_keys(v: &Value) -> Result<Vec<StreamKey>, ValidationError> {
    let keys: Vec<StreamKey> = typed(v, "stream keys (expected [{key, comment}])")?;
    if keys.is_empty() {
        return err("at least one stream key is required");
    }
    let mut out: Vec<StreamKey> = Vec::with_capacity(keys.len());
    for k in keys {
        let key = stream_key(&k.key)?;
        // A repeated key adds nothing: the first one (and its comment) is kept.
        if !out.iter().any(|o| o.key == key) {
            out.push(StreamKey { key, comment: k.comment });
        }
    }
    Ok(out)
}

/// Longest stream key, in characters.
pub const MAX_STREAM_KEY_CHARS: usize = 256;

/// One stream key (also the `--streamkey` flag): any non-empty text once trimmed, at most
/// `MAX_STREAM_KEY_CHARS` characters, without control characters. Returns the trimmed key.
pub fn stream_key(key: &str) -> Result<String, ValidationError> {
    let key = key.trim();
    if key.is_empty() {
        return err("a stream key must not be empty");
    }
    if key.chars().count() > MAX_STREAM_KEY_CHARS {
        return err(format!("a stream key may be at most {MAX_STREAM_KEY_CHARS} characters long"));
    }
    if key.chars().any(char::is_control) {
        return err("a stream key may not contain control characters");
    }
    Ok(key.to_string())
}

/// The chat websocket host override: empty, or a URL with a host and one of the schemes `ws`,
/// `wss`, `http` or `https` (stored as given, trimmed).
pub fn socket_url(v: &Value) -> Result<String, ValidationError> {
    let s = string(v, 2048)?;
    let s = s.trim();
    if s.is_empty() {
        return Ok(String::new());
    }
    match url::Url::parse(s) {
        Ok(u) if matches!(u.scheme(), "ws" | "wss" | "http" | "https") && u.host().is_some() => Ok(s.to_string()),
        Ok(_) => err(format!("'{s}' must be a ws, wss, http or https URL")),
        Err(e) => err(format!("'{s}' is not a valid URL: {e}")),
    }
}

/// Output variants: 1..=10 of them, each with sane numbers.
pub fn variants(v: &Value) -> Result<Vec<StreamOutputVariant>, ValidationError> {
    let list: Vec<StreamOutputVariant> = typed(v, "video variants")?;
    if list.is_empty() {
        return err("at least one video variant is required");
    }
    if list.len() > 10 {
        return err("at most 10 video variants are supported");
    }
    for (i, var) in list.iter().enumerate() {
        let n = i + 1;
        if var.video_bitrate > 100_000 {
            return err(format!("variant {n}: videoBitrate {} kbps is out of range (0 to 100000)", var.video_bitrate));
        }
        if var.audio_bitrate > 1_000 {
            return err(format!("variant {n}: audioBitrate {} kbps is out of range (0 to 1000)", var.audio_bitrate));
        }
        if var.scaled_width > 7680 || var.scaled_height > 4320 {
            return err(format!("variant {n}: scaled size is out of range (at most 7680x4320)"));
        }
        if var.scaled_width % 2 == 1 || var.scaled_height % 2 == 1 {
            return err(format!("variant {n}: scaledWidth and scaledHeight must be even"));
        }
        if var.framerate > 120 {
            return err(format!("variant {n}: framerate {} is out of range (0 to 120)", var.framerate));
        }
        if var.cpu_usage_level > 4 {
            return err(format!("variant {n}: cpuUsageLevel {} is out of range (0 to 4)", var.cpu_usage_level));
        }
    }
    Ok(list)
}

/// Social handles: a platform and an http(s) URL each.
pub fn social_handles(v: &Value) -> Result<Vec<SocialHandle>, ValidationError> {
    let mut list: Vec<SocialHandle> = typed(v, "social handles (expected [{platform, url, icon}])")?;
    for h in &mut list {
        if h.platform.trim().is_empty() {
            return err("every social handle needs a platform");
        }
        let url = normal_http_url(h.url.trim())?;
        if url != h.url.trim() {
            h.url = url;
        }
    }
    Ok(list)
}

/// External actions: a title and either an http(s) URL or HTML each.
pub fn external_actions(v: &Value) -> Result<Vec<ExternalAction>, ValidationError> {
    let mut list: Vec<ExternalAction> = typed(v, "external actions")?;
    for a in &mut list {
        if a.title.trim().is_empty() {
            return err("every external action needs a title");
        }
        match (a.url.trim().is_empty(), a.html.trim().is_empty()) {
            (true, true) => return err(format!("external action '{}' needs a url or html", a.title)),
            (false, _) => {
                let url = normal_http_url(a.url.trim())?;
                if url != a.url.trim() {
                    a.url = url;
                }
            }
            _ => {}
        }
    }
    Ok(list)
}

/// Object storage settings: when enabled, endpoint (URL), bucket and credentials are required.
pub fn s3(v: &Value) -> Result<S3Info, ValidationError> {
    let s: S3Info = typed(v, "storage settings")?;
    if s.enabled {
        check_http_url(s.endpoint.trim())?;
        if s.bucket.trim().is_empty() {
            return err("a bucket is required when storage is enabled");
        }
        if s.access_key.is_empty() || s.secret.is_empty() {
            return err("accessKey and secret are required when storage is enabled");
        }
    }
    Ok(s)
}

/// A name usable as a fediverse account: 1..=30 of `[A-Za-z0-9_]`.
pub fn federation_username(v: &Value) -> Result<String, ValidationError> {
    let s = string(v, 30)?;
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return err("the username may only contain letters, digits and _ (1 to 30 characters)");
    }
    Ok(s)
}

/// A domain name for the blocked-domains list.
pub fn domains(v: &Value) -> Result<Vec<String>, ValidationError> {
    let list = string_list(v, 1000)?;
    for d in &list {
        if !d.contains('.') || !d.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') {
            return err(format!("'{d}' is not a domain name"));
        }
    }
    Ok(list.into_iter().map(|d| d.to_ascii_lowercase()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_and_ranges() {
        assert_eq!(port(&json!(8080)), Ok(8080));
        assert!(port(&json!(0)).is_err());
        assert!(port(&json!(70000)).is_err());
        assert!(port(&json!("8080")).is_err());
        assert!(integer(&json!(1.5), 0, 4).is_err());
        assert_eq!(integer(&json!(2.0), 0, 4), Ok(2));
        assert!(integer(&json!(1e300), 0, 4).is_err());
    }

    #[test]
    fn urls() {
        assert_eq!(url(&json!("https://example.com/"), false), Ok("https://example.com".into()));
        assert_eq!(url(&json!(""), true), Ok(String::new()));
        assert!(url(&json!(""), false).is_err());
        assert!(url(&json!("ftp://x.y"), true).is_err());
        assert!(url(&json!("not a url"), true).is_err());
        // Stored in the form a browser follows, not as written.
        for raw in [
            "https://x.example/a/%2e%2e/%2E%2e/admin/",
            "https://x.example/a\\..\\..\\admin",
            "https://x.example//a/../../admin",
        ] {
            assert_eq!(url(&json!(raw), false), Ok("https://x.example/admin".into()), "{raw}");
        }
        let h =
            social_handles(&json!([{"platform": "x", "url": "https://x.example/a/%2e%2e/me", "icon": ""}])).unwrap();
        assert_eq!(h[0].url, "https://x.example/me");
    }

    #[test]
    fn variants_checked() {
        assert!(variants(&json!([{"videoBitrate": 1200, "framerate": 30}])).is_ok());
        assert!(variants(&json!([])).is_err());
        assert!(variants(&json!([{"cpuUsageLevel": 9}])).is_err());
        assert!(variants(&json!([{"scaledWidth": 641}])).is_err());
        assert!(variants(&json!([{"videoBitrate": "fast"}])).is_err());
    }

    #[test]
    fn stream_keys_checked() {
        assert!(stream_keys(&json!([{"key": "abcdefgh", "comment": "c"}])).is_ok());
        // Owncast's values: short keys and its default abc123
        assert_eq!(stream_keys(&json!([{"key": " abc123 "}])).unwrap()[0].key, "abc123");
        assert!(stream_keys(&json!([{"key": "abc def gh"}])).is_ok());
        // A repeated key (once trimmed) is dropped, the first kept.
        let keys =
            stream_keys(&json!([{"key": "abcdefgh", "comment": "a"}, {"key": " abcdefgh", "comment": "b"}])).unwrap();
        assert_eq!(keys, vec![StreamKey { key: "abcdefgh".into(), comment: "a".into() }]);
        assert!(stream_keys(&json!([{"key": "   "}])).is_err());
        assert!(stream_keys(&json!([{"key": "a\u{7}b"}])).is_err());
        assert!(stream_keys(&json!([{"key": "x".repeat(257)}])).is_err());
        assert!(stream_keys(&json!([])).is_err());
    }

    #[test]
    fn socket_urls() {
        for ok in ["", "ws://chat.example.com", "wss://chat.example.com:8443/", "http://x.y", "https://x.y"] {
            assert_eq!(socket_url(&json!(ok)), Ok(ok.to_string()), "{ok}");
        }
        for bad in ["no url", "ftp://x.y", "ws://", "javascript:alert(1)"] {
            assert!(socket_url(&json!(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn lists_and_domains() {
        assert_eq!(string_list(&json!([" a ", "", "b"]), 10), Ok(vec!["a".into(), "b".into()]));
        assert!(string_list(&json!([1]), 10).is_err());
        assert_eq!(domains(&json!(["Bad.Example"])), Ok(vec!["bad.example".into()]));
        assert!(domains(&json!(["no_dots"])).is_err());
        assert!(federation_username(&json!("ok_name1")).is_ok());
        assert!(federation_username(&json!("bad name")).is_err());
    }
}
