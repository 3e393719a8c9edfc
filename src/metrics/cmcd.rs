//! CMCD (CTA-5004 / CTA-5004-A): the dictionary syntax, the three ways a report arrives (JSON body,
//! `?CMCD=` query, `CMCD-*` headers) and the mapping of the keys castd uses.
//!
//! The dictionary syntax is RFC 8941's: `key=value` members separated by `,`; values are integers,
//! decimals, quoted strings (`\"` and `\\` escapes), tokens (`sta=p`), `?0`/`?1` booleans, inner
//! lists `(a b)` and `:base64:` bytes; a bare key is the boolean `true`; `;param` parameters are
//! read and dropped. Keys may carry upper-case letters and dots so CMCD custom keys
//! (`com.example-myKey`) are accepted. A duplicated key keeps its last value.
//!
//! Every known key is mapped ([`Report`]); unknown keys are accepted and ignored; the version `v`
//! never causes a rejection. The reporting mode (CMCD v2) is read from the keys: a report with `e`
//! is an event report, one with `ttlb`/`ttfb`/`rc`/`url` a response report, anything else request
//! data (all of CMCD v1). `playback::harvest_request` is the seam for the HLS handler: it collects the
//! request-mode data that players (hls.js, dash.js) put on the media requests themselves.

use axum::http::HeaderMap;
use serde_json::{Map, Number, Value};

/// Errors in CMCD data.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CmcdError {
    #[error("invalid CMCD data at byte {pos}: {what}")]
    Syntax { pos: usize, what: &'static str },
    #[error("CMCD key '{key}' must be {expected}")]
    Type { key: String, expected: &'static str },
    #[error("the CMCD report has no keys")]
    Empty,
}

fn syntax(pos: usize, what: &'static str) -> CmcdError {
    CmcdError::Syntax { pos, what }
}

/// Parse a CMCD dictionary (`br=3200,bs,d=4004,mtp=25400,ot=v,sid="6e2f..."`) into JSON values:
/// numbers, strings (quoted strings, tokens and byte sequences), booleans and arrays (inner lists).
pub fn parse_dictionary(input: &str) -> Result<Map<String, Value>, CmcdError> {
    let mut p = Parser { s: input.as_bytes(), i: 0 };
    let mut out = Map::new();
    p.skip_ws();
    if p.done() {
        return Ok(out);
    }
    loop {
        let key = p.key()?;
        let value = if p.peek() == Some(b'=') {
            p.i += 1;
            if p.peek() == Some(b'(') {
                p.inner_list()?
            } else {
                p.bare_item()?
            }
        } else {
            Value::Bool(true)
        };
        p.parameters()?;
        out.insert(key, value);
        p.skip_ws();
        if p.done() {
            return Ok(out);
        }
        if p.peek() != Some(b',') {
            return Err(syntax(p.i, "expected ',' between members"));
        }
        p.i += 1;
        p.skip_ws();
        if p.done() {
            return Err(syntax(p.i, "trailing ','"));
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn key(&mut self) -> Result<String, CmcdError> {
        let start = self.i;
        match self.peek() {
            Some(c) if c.is_ascii_alphabetic() || c == b'*' => self.i += 1,
            _ => return Err(syntax(self.i, "expected a key")),
        }
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'*')) {
            self.i += 1;
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn bare_item(&mut self) -> Result<Value, CmcdError> {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b'?') => {
                self.i += 1;
                let v = match self.peek() {
                    Some(b'1') => true,
                    Some(b'0') => false,
                    _ => return Err(syntax(self.i, "a boolean is ?0 or ?1")),
                };
                self.i += 1;
                Ok(Value::Bool(v))
            }
            Some(b':') => {
                self.i += 1;
                let start = self.i;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')) {
                    self.i += 1;
                }
                if self.peek() != Some(b':') {
                    return Err(syntax(self.i, "unterminated byte sequence"));
                }
                let v = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                Ok(Value::String(v))
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'*' => {
                let start = self.i;
                while matches!(self.peek(), Some(c) if is_tchar(c) || c == b':' || c == b'/') {
                    self.i += 1;
                }
                Ok(Value::String(String::from_utf8_lossy(&self.s[start..self.i]).into_owned()))
            }
            _ => Err(syntax(self.i, "expected a value")),
        }
    }

    fn string(&mut self) -> Result<Value, CmcdError> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(syntax(self.i, "unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(Value::String(out));
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(c @ (b'"' | b'\\')) => out.push(c as char),
                        _ => return Err(syntax(self.i, "only \\\" and \\\\ may be escaped")),
                    }
                    self.i += 1;
                }
                Some(c) if (0x20..0x7f).contains(&c) => {
                    out.push(c as char);
                    self.i += 1;
                }
                Some(_) => return Err(syntax(self.i, "strings hold printable ASCII only")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, CmcdError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits_start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.i == digits_start {
            return Err(syntax(self.i, "expected a digit"));
        }
        let mut decimal = false;
        if self.peek() == Some(b'.') {
            decimal = true;
            self.i += 1;
            let frac = self.i;
            while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
                self.i += 1;
            }
            if self.i == frac {
                return Err(syntax(self.i, "a decimal needs digits after '.'"));
            }
        }
        if self.i - digits_start > 20 {
            return Err(syntax(start, "number too long"));
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| syntax(start, "bad number"))?;
        if !decimal {
            if let Ok(n) = text.parse::<i64>() {
                return Ok(Value::Number(n.into()));
            }
        }
        text.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| syntax(start, "bad number"))
    }

    fn inner_list(&mut self) -> Result<Value, CmcdError> {
        self.i += 1; // '('
        let mut items = Vec::new();
        loop {
            while self.peek() == Some(b' ') {
                self.i += 1;
            }
            match self.peek() {
                Some(b')') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(syntax(self.i, "unterminated inner list")),
                _ => {
                    items.push(self.bare_item()?);
                    self.parameters()?;
                    if !matches!(self.peek(), Some(b' ' | b')')) {
                        return Err(syntax(self.i, "expected ' ' or ')' in an inner list"));
                    }
                }
            }
        }
    }

    /// `;key[=value]` parameters: read and dropped.
    fn parameters(&mut self) -> Result<(), CmcdError> {
        while self.peek() == Some(b';') {
            self.i += 1;
            self.skip_ws();
            self.key()?;
            if self.peek() == Some(b'=') {
                self.i += 1;
                self.bare_item()?;
            }
        }
        Ok(())
    }
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// The CMCD dictionary in a query string (`...&CMCD=br%3D3200%2Cbs&...`), if there is one.
pub fn from_query(query: &str) -> Result<Option<Map<String, Value>>, CmcdError> {
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        if k.eq_ignore_ascii_case("cmcd") {
            return parse_dictionary(&v).map(Some);
        }
    }
    Ok(None)
}

/// The CMCD data of the `CMCD-Request`, `CMCD-Object`, `CMCD-Status` and `CMCD-Session` headers
/// (and any other `CMCD-*` header), merged; `None` when there are none.
pub fn from_headers(headers: &HeaderMap) -> Result<Option<Map<String, Value>>, CmcdError> {
    let mut out: Option<Map<String, Value>> = None;
    for (name, value) in headers {
        if !name.as_str().starts_with("cmcd-") {
            continue;
        }
        let text = value.to_str().map_err(|_| syntax(0, "a CMCD header must be ASCII"))?;
        out.get_or_insert_with(Map::new).extend(parse_dictionary(text)?);
    }
    Ok(out)
}

/// The CMCD data of a request from its query string or, failing that, its headers.
pub fn from_request(query: Option<&str>, headers: &HeaderMap) -> Result<Option<Map<String, Value>>, CmcdError> {
    if let Some(q) = query {
        if let Some(m) = from_query(q)? {
            return Ok(Some(m));
        }
    }
    from_headers(headers)
}

/// How a report was sent (CMCD v2 reporting modes; v1 has request mode only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Data attached to a media request (v1, and v2 request mode).
    #[default]
    Request,
    /// v2 response mode: timings of a completed request (`ttlb`, `ttfb`, `rc`, `url`).
    Response,
    /// v2 event mode: the `e` key names the event.
    Event,
}

/// The CMCD keys castd uses, mapped from a report. Units are CMCD's (kbps, milliseconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// `v`; absent means version 1.
    pub version: u32,
    pub sid: Option<String>,
    /// `e`: event type (v2 event mode): `ps` play state, `e` error, `t` time interval, ...
    pub event: Option<String>,
    /// `ts`: epoch milliseconds.
    pub ts: Option<f64>,
    /// `sta`: player state token (`s` starting, `p` playing, `k` seeking, `r` rebuffering, ...).
    pub state: Option<String>,
    /// `mtp`: measured throughput, kbps.
    pub throughput_kbps: Option<f64>,
    /// `ltc`: live latency, ms.
    pub latency_ms: Option<f64>,
    /// `bs`: buffer starvation since the last report.
    pub buffer_starvation: bool,
    /// `ec`: error code(s) accompanying an error event.
    pub error_code: Option<String>,
    /// `ttlb`: time to last byte of the reported response, ms.
    pub ttlb_ms: Option<f64>,
    /// `sn`: sequence number.
    pub sequence: Option<u64>,
    /// `br`: encoded bitrate of the object being played, kbps.
    pub bitrate_kbps: Option<f64>,
    /// `rc`: HTTP response code (response mode).
    pub response_code: Option<u16>,
    /// `ot`: object type (`m` manifest, `a` audio, `v` video, `av` muxed, `i` init, ...).
    pub object_type: Option<String>,
    pub mode: Mode,
    /// Number of keys in the report, known or not.
    pub keys: usize,
}

fn num(map: &Map<String, Value>, key: &str) -> Result<Option<f64>, CmcdError> {
    let bad = || CmcdError::Type { key: key.to_string(), expected: "a number" };
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(bad),
        // CMCD v2 turns some keys into inner lists (one entry per media type): take the first.
        Some(Value::Array(items)) => match items.first() {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(bad),
            Some(_) => Err(bad()),
        },
        Some(Value::String(s)) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()).map(Some).ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

fn text(map: &Map<String, Value>, key: &str) -> Result<Option<String>, CmcdError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::Array(items)) => Ok(Some(
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
        )),
        Some(_) => Err(CmcdError::Type { key: key.to_string(), expected: "a string" }),
    }
}

fn boolean(map: &Map<String, Value>, key: &str) -> Result<bool, CmcdError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Array(items)) => Ok(items.iter().any(|v| v == &Value::Bool(true))),
        Some(_) => Err(CmcdError::Type { key: key.to_string(), expected: "a boolean" }),
    }
}

impl Report {
    /// Map the known keys of one report; a known key of the wrong type is an error, unknown keys are
    /// accepted, and an empty report is refused.
    pub fn from_map(map: &Map<String, Value>) -> Result<Report, CmcdError> {
        if map.is_empty() {
            return Err(CmcdError::Empty);
        }
        let nonneg = |key: &str| -> Result<Option<f64>, CmcdError> {
            match num(map, key)? {
                Some(x) if x < 0.0 => Err(CmcdError::Type { key: key.to_string(), expected: "a number >= 0" }),
                other => Ok(other),
            }
        };
        let version = match num(map, "v")? {
            None => 1,
            Some(v) if v >= 0.0 && v <= f64::from(u32::MAX) => v as u32,
            Some(_) => return Err(CmcdError::Type { key: "v".into(), expected: "a version number" }),
        };
        let event = text(map, "e")?.filter(|s| !s.is_empty());
        let ttlb_ms = nonneg("ttlb")?;
        let response_code = nonneg("rc")?.map(|c| c.min(999.0) as u16);
        let mode = if event.is_some() {
            Mode::Event
        } else if ttlb_ms.is_some() || response_code.is_some() || map.contains_key("ttfb") || map.contains_key("url") {
            Mode::Response
        } else {
            Mode::Request
        };
        Ok(Report {
            version,
            sid: text(map, "sid")?.filter(|s| !s.is_empty()),
            event,
            ts: num(map, "ts")?,
            state: text(map, "sta")?,
            throughput_kbps: nonneg("mtp")?,
            latency_ms: nonneg("ltc")?,
            buffer_starvation: boolean(map, "bs")?,
            error_code: text(map, "ec")?.filter(|s| !s.is_empty()),
            ttlb_ms,
            sequence: nonneg("sn")?.map(|s| s as u64),
            bitrate_kbps: nonneg("br")?,
            response_code,
            object_type: text(map, "ot")?,
            mode,
            keys: map.len(),
        })
    }

    /// Whether the report announces an error: an error event, an error code, or a failed response.
    pub fn is_error(&self) -> bool {
        self.event.as_deref() == Some("e") || self.error_code.is_some() || self.response_code.is_some_and(|c| c >= 400)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_spec_example() {
        let m = parse_dictionary(
            r#"br=3200,bs,d=4004,mtp=25400,ot=v,rtp=15000,sid="6e2fb550-c457-11e9-bb97-0800200c9a66",tb=6000"#,
        )
        .unwrap();
        assert_eq!(m["br"], json!(3200));
        assert_eq!(m["bs"], json!(true));
        assert_eq!(m["ot"], json!("v"));
        assert_eq!(m["sid"], json!("6e2fb550-c457-11e9-bb97-0800200c9a66"));
        assert_eq!(m.len(), 8);
    }

    #[test]
    fn value_kinds() {
        let m = parse_dictionary(
            r#"a=?0,b=?1,c=-1.5,d="q\"x\\y",e=(1 2;x=3 "s"),f=:aGk=:,com.example-myKey=tok/x:y,g;p=1"#,
        )
        .unwrap();
        assert_eq!(m["a"], json!(false));
        assert_eq!(m["b"], json!(true));
        assert_eq!(m["c"], json!(-1.5));
        assert_eq!(m["d"], json!("q\"x\\y"));
        assert_eq!(m["e"], json!([1, 2, "s"]));
        assert_eq!(m["f"], json!("aGk="));
        assert_eq!(m["com.example-myKey"], json!("tok/x:y"));
        assert_eq!(m["g"], json!(true));
        // spaces around commas are tolerated; the last duplicate wins
        let m = parse_dictionary("x=1 , x=2").unwrap();
        assert_eq!(m["x"], json!(2));
        assert!(parse_dictionary("").unwrap().is_empty());
    }

    #[test]
    fn rejects_malformed() {
        for bad in ["=1", "a=", "a=1,", "a=\"open", "a=1;", "a=(1 2", "a=?2", "a=1 b=2", "a=\"\\n\"", "a=1.", "a=é"] {
            assert!(parse_dictionary(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn query_and_headers() {
        let m = from_query("foo=1&CMCD=bs%2Csid%3D%22abc%22%2Cmtp%3D1200").unwrap().unwrap();
        assert_eq!(m["sid"], json!("abc"));
        assert_eq!(m["mtp"], json!(1200));
        assert_eq!(from_query("foo=1").unwrap(), None);
        let mut h = HeaderMap::new();
        h.insert("cmcd-request", "bl=21300,mtp=25400".parse().unwrap());
        h.insert("cmcd-session", "sid=\"s1\",v=2".parse().unwrap());
        h.insert("cmcd-status", "bs".parse().unwrap());
        let m = from_headers(&h).unwrap().unwrap();
        assert_eq!((m["bl"].clone(), m["sid"].clone(), m["bs"].clone()), (json!(21300), json!("s1"), json!(true)));
        assert_eq!(from_headers(&HeaderMap::new()).unwrap(), None);
    }

    #[test]
    fn maps_reports_and_modes() {
        let r = Report::from_map(
            json!({"v": 2, "sid": "s", "sta": "p", "mtp": [5000, 100], "ltc": 3200, "bs": true, "sn": 4, "x-custom": {}})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(r.version, 2);
        assert_eq!(r.throughput_kbps, Some(5000.0));
        assert_eq!(r.latency_ms, Some(3200.0));
        assert!(r.buffer_starvation);
        assert_eq!(r.mode, Mode::Request);
        assert!(!r.is_error());

        let r = Report::from_map(json!({"e": "e", "ec": ["MEDIA_ERR"], "v": 99}).as_object().unwrap()).unwrap();
        assert_eq!((r.mode, r.version, r.is_error()), (Mode::Event, 99, true));
        assert_eq!(r.error_code.as_deref(), Some("MEDIA_ERR"));

        let r = Report::from_map(json!({"ttlb": 850, "rc": 200, "sid": "s"}).as_object().unwrap()).unwrap();
        assert_eq!((r.mode, r.version), (Mode::Response, 1));
        assert!(!r.is_error());

        assert_eq!(Report::from_map(&Map::new()), Err(CmcdError::Empty));
        assert!(Report::from_map(json!({"mtp": "fast"}).as_object().unwrap()).is_err());
        assert!(Report::from_map(json!({"ltc": -5}).as_object().unwrap()).is_err());
        assert!(Report::from_map(json!({"bs": 3}).as_object().unwrap()).is_err());
        assert!(Report::from_map(json!({"sid": {"a": 1}}).as_object().unwrap()).is_err());
    }
}
