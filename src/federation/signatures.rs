//! HTTP Signatures (draft-cavage-http-signatures-12, as Mastodon and Owncast use them): signing
//! outbound requests and verifying inbound ones with RSA-SHA256 (`rsa-sha256`, and `hs2019` with an
//! RSA key), the `Digest: SHA-256=` body hash, and the `Date` window (12 hours back, 1 hour ahead).
//!
//! A signature must cover `(request-target)`, `host` and `date`, and `digest` for a request with a
//! body (Mastodon signs all four); the inbox also checks that the `Host` is this server's.
//!
//! Pure functions over header values; fetching the key belongs to `client`.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use chrono::{DateTime, Utc};
use rsa::pkcs1v15::{Signature, SigningKey, VerifyingKey};
use rsa::signature::{SignatureEncoding, Signer, Verifier};
use rsa::{RsaPrivateKey, RsaPublicKey};
use sha2::{Digest as _, Sha256};

/// How far in the past a request's `Date` may be (Mastodon's window).
pub const DATE_WINDOW: chrono::TimeDelta = chrono::TimeDelta::hours(12);
/// How far in the future a request's `Date` may be (clock skew; Mastodon's margin).
pub const FUTURE_SKEW: chrono::TimeDelta = chrono::TimeDelta::hours(1);
/// Longest `Signature` header accepted.
const MAX_HEADER: usize = 8 * 1024;

/// Why a signature was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigError {
    #[error("no Signature header")]
    Missing,
    #[error("malformed Signature header: {0}")]
    Malformed(String),
    #[error("unsupported signature algorithm {0}")]
    Algorithm(String),
    #[error("the signature does not cover {0}")]
    NotCovered(&'static str),
    #[error("signed header {0} is missing")]
    MissingHeader(String),
    #[error("the Date header is missing or invalid")]
    BadDate,
    #[error("the Date header is outside the allowed window")]
    StaleDate,
    #[error("the Digest header does not match the body")]
    DigestMismatch,
    #[error("the signature does not verify")]
    Invalid,
}

/// `SHA-256=<base64>` of `body`.
pub fn digest(body: &[u8]) -> String {
    format!("SHA-256={}", B64.encode(Sha256::digest(body)))
}

/// An HTTP date (RFC 7231 IMF-fixdate).
pub fn http_date(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// The headers to add to a request: `host`, `date`, `digest` (when there is a body) and `signature`,
/// covering `(request-target) host date [digest]`.
pub fn sign(
    key: &RsaPrivateKey,
    key_id: &str,
    method: &str,
    url: &url::Url,
    body: Option<&[u8]>,
    now: DateTime<Utc>,
) -> Vec<(&'static str, String)> {
    let host = authority(url);
    let target = match url.query() {
        Some(q) => format!("{} {}?{q}", method.to_ascii_lowercase(), url.path()),
        None => format!("{} {}", method.to_ascii_lowercase(), url.path()),
    };
    let date = http_date(now);
    let mut out = vec![("host", host.clone()), ("date", date.clone())];
    let mut names = "(request-target) host date".to_string();
    let mut text = format!("(request-target): {target}\nhost: {host}\ndate: {date}");
    if let Some(b) = body {
        let d = digest(b);
        text.push_str(&format!("\ndigest: {d}"));
        names.push_str(" digest");
        out.push(("digest", d));
    }
    let signer = SigningKey::<Sha256>::new(key.clone());
    let sig = signer.sign(text.as_bytes()).to_bytes();
    out.push((
        "signature",
        format!("keyId=\"{key_id}\",algorithm=\"rsa-sha256\",headers=\"{names}\",signature=\"{}\"", B64.encode(sig)),
    ));
    out
}

/// `host[:port]` of a URL, as the Host header carries it (default ports omitted).
pub fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// A parsed `Signature` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigParams {
    pub key_id: String,
    pub algorithm: Option<String>,
    /// Lower-cased header names, in order (default `date`, as the draft says).
    pub headers: Vec<String>,
    pub signature: Vec<u8>,
}

/// Parse `keyId="..",algorithm="..",headers="..",signature=".."`.
pub fn parse(header: &str) -> Result<SigParams, SigError> {
    if header.len() > MAX_HEADER {
        return Err(SigError::Malformed("too long".into()));
    }
    let (mut key_id, mut algorithm, mut headers, mut signature) = (None, None, None, None);
    let mut rest = header.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=').ok_or_else(|| SigError::Malformed("expected name=value".into()))?;
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').ok_or_else(|| SigError::Malformed("unterminated quote".into()))?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            match after.find(',') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "keyid" => key_id = Some(value.to_string()),
            "algorithm" => algorithm = Some(value.to_ascii_lowercase()),
            "headers" => headers = Some(value.split_whitespace().map(|h| h.to_ascii_lowercase()).collect()),
            "signature" => {
                signature = Some(B64.decode(value).map_err(|_| SigError::Malformed("signature is not base64".into()))?)
            }
            _ => {}
        }
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Ok(SigParams {
        key_id: key_id.filter(|k| !k.is_empty()).ok_or_else(|| SigError::Malformed("no keyId".into()))?,
        algorithm,
        headers: headers.unwrap_or_else(|| vec!["date".to_string()]),
        signature: signature.ok_or_else(|| SigError::Malformed("no signature".into()))?,
    })
}

/// Verify a request signed as `params` says: [`check`], then [`verify_key`].
pub fn verify(
    params: &SigParams,
    method: &str,
    path_and_query: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: Option<&[u8]>,
    key: &RsaPublicKey,
    now: DateTime<Utc>,
) -> Result<(), SigError> {
    check(params, header, body, now)?;
    verify_key(params, method, path_and_query, header, key)
}

/// What needs no key, checked before anything is fetched: a supported algorithm; a signature that
/// covers `(request-target)`, `host` and `date` (and `digest` when there is a body: a POST); a `Date`
/// at most [`DATE_WINDOW`] before `now` and [`FUTURE_SKEW`] after it; a digest that matches the body. `header` looks up a request
/// header (case-insensitive, several values joined with `", "`). Returns the signed date.
pub fn check(
    params: &SigParams,
    header: &dyn Fn(&str) -> Option<String>,
    body: Option<&[u8]>,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, SigError> {
    match params.algorithm.as_deref() {
        None | Some("rsa-sha256") | Some("hs2019") => {}
        Some(other) => return Err(SigError::Algorithm(other.to_string())),
    }
    for needed in ["(request-target)", "host", "date"] {
        if !params.headers.iter().any(|h| h == needed) {
            return Err(SigError::NotCovered(needed));
        }
    }
    let date = header("date").ok_or(SigError::BadDate)?;
    let sent = DateTime::parse_from_rfc2822(date.trim()).map_err(|_| SigError::BadDate)?.with_timezone(&Utc);
    if now - sent > DATE_WINDOW || sent - now > FUTURE_SKEW {
        return Err(SigError::StaleDate);
    }
    if let Some(b) = body {
        if !params.headers.iter().any(|h| h == "digest") {
            return Err(SigError::NotCovered("digest"));
        }
        let given = header("digest").ok_or(SigError::DigestMismatch)?;
        let want = digest(b);
        let ok = given.split(',').any(|part| {
            let part = part.trim();
            match part.split_once('=') {
                Some((alg, _)) if alg.eq_ignore_ascii_case("sha-256") => part[alg.len()..] == want[7..],
                _ => false,
            }
        });
        if !ok {
            return Err(SigError::DigestMismatch);
        }
    }
    Ok(sent)
}

/// The RSA-SHA256 check of the text the signature covers (`path_and_query` is the request target).
pub fn verify_key(
    params: &SigParams,
    method: &str,
    path_and_query: &str,
    header: &dyn Fn(&str) -> Option<String>,
    key: &RsaPublicKey,
) -> Result<(), SigError> {
    let mut lines = Vec::with_capacity(params.headers.len());
    for h in &params.headers {
        if h == "(request-target)" {
            lines.push(format!("(request-target): {} {path_and_query}", method.to_ascii_lowercase()));
        } else {
            let v = header(h).ok_or_else(|| SigError::MissingHeader(h.clone()))?;
            lines.push(format!("{h}: {}", v.trim()));
        }
    }
    let text = lines.join("\n");
    let sig = Signature::try_from(params.signature.as_slice()).map_err(|_| SigError::Invalid)?;
    VerifyingKey::<Sha256>::new(key.clone()).verify(text.as_bytes(), &sig).map_err(|_| SigError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn key() -> RsaPrivateKey {
        // 1024 bits keeps the unit test quick; the daemon uses 2048.
        RsaPrivateKey::new(&mut rand::thread_rng(), 1024).unwrap()
    }

    fn headers_of(signed: &[(&'static str, String)]) -> HashMap<String, String> {
        signed.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn check(h: &HashMap<String, String>, body: &[u8], pk: &RsaPublicKey, now: DateTime<Utc>) -> Result<(), SigError> {
        let p = parse(h.get("signature").unwrap())?;
        let get = |n: &str| h.get(n).cloned();
        verify(&p, "POST", "/federation/user/streamer/inbox", &get, Some(body), pk, now)
    }

    #[test]
    fn sign_then_verify_and_tampering_fails() {
        let k = key();
        let pk = RsaPublicKey::from(&k);
        let url = url::Url::parse("http://127.0.0.1:8080/federation/user/streamer/inbox").unwrap();
        let body = br#"{"type":"Like"}"#;
        let now = Utc::now();
        let signed = sign(&k, "http://x/actor#main-key", "POST", &url, Some(body), now);
        let h = headers_of(&signed);
        assert_eq!(h["host"], "127.0.0.1:8080");
        let p = parse(&h["signature"]).unwrap();
        assert_eq!(p.key_id, "http://x/actor#main-key");
        assert_eq!(p.headers, ["(request-target)", "host", "date", "digest"]);
        check(&h, body, &pk, now).unwrap();

        // a different body: the digest no longer matches
        assert_eq!(check(&h, br#"{"type":"Follow"}"#, &pk, now), Err(SigError::DigestMismatch));
        // a digest that matches the tampered body but was not what was signed
        let mut h2 = h.clone();
        h2.insert("digest".into(), digest(b"other"));
        assert_eq!(check(&h2, b"other", &pk, now), Err(SigError::Invalid));
        // a changed signed header
        let mut h3 = h.clone();
        h3.insert("host".into(), "evil.example".into());
        assert_eq!(check(&h3, body, &pk, now), Err(SigError::Invalid));
        // another key
        let other = RsaPublicKey::from(&key());
        assert_eq!(check(&h, body, &other, now), Err(SigError::Invalid));
        // stale and future dates
        assert_eq!(check(&h, body, &pk, now + chrono::TimeDelta::hours(13)), Err(SigError::StaleDate));
        assert_eq!(check(&h, body, &pk, now - chrono::TimeDelta::hours(13)), Err(SigError::StaleDate));
        assert_eq!(check(&h, body, &pk, now - chrono::TimeDelta::minutes(61)), Err(SigError::StaleDate), "future");
        assert_eq!(check(&h, body, &pk, now + chrono::TimeDelta::hours(11)), Ok(()));
        // a flipped signature byte
        let mut p = parse(&h["signature"]).unwrap();
        p.signature[5] ^= 1;
        let get = |n: &str| h.get(n).cloned();
        assert_eq!(
            verify(&p, "POST", "/federation/user/streamer/inbox", &get, Some(body), &pk, now),
            Err(SigError::Invalid)
        );
        // the wrong request target
        let p = parse(&h["signature"]).unwrap();
        assert_eq!(verify(&p, "POST", "/other", &get, Some(body), &pk, now), Err(SigError::Invalid));
    }

    #[test]
    fn digest_must_be_signed_and_date_required() {
        let k = key();
        let pk = RsaPublicKey::from(&k);
        let url = url::Url::parse("https://a.example/inbox").unwrap();
        let now = Utc::now();
        // signed without a body: no digest covered
        let h = headers_of(&sign(&k, "k", "POST", &url, None, now));
        let p = parse(&h["signature"]).unwrap();
        let get = |n: &str| h.get(n).cloned();
        assert_eq!(verify(&p, "POST", "/inbox", &get, Some(b"{}"), &pk, now), Err(SigError::NotCovered("digest")));
        assert_eq!(verify(&p, "POST", "/inbox", &get, None, &pk, now), Ok(()));
        let no_date = |n: &str| if n == "date" { None } else { h.get(n).cloned() };
        assert_eq!(verify(&p, "POST", "/inbox", &no_date, None, &pk, now), Err(SigError::BadDate));
    }

    #[test]
    fn host_must_be_signed() {
        let k = key();
        let pk = RsaPublicKey::from(&k);
        let now = Utc::now();
        let body = b"{}";
        let date = http_date(now);
        let d = digest(body);
        let text = format!("(request-target): post /inbox\ndate: {date}\ndigest: {d}");
        let sig = SigningKey::<Sha256>::new(k.clone()).sign(text.as_bytes()).to_bytes();
        let h: HashMap<String, String> = [
            ("date".to_string(), date),
            ("digest".to_string(), d),
            ("host".to_string(), "a.example".to_string()),
            (
                "signature".to_string(),
                format!(
                    "keyId=\"k\",algorithm=\"rsa-sha256\",headers=\"(request-target) date digest\",signature=\"{}\"",
                    B64.encode(sig)
                ),
            ),
        ]
        .into_iter()
        .collect();
        let p = parse(&h["signature"]).unwrap();
        let get = |n: &str| h.get(n).cloned();
        assert_eq!(verify_key(&p, "POST", "/inbox", &get, &pk), Ok(()), "the signature itself is good");
        assert_eq!(verify(&p, "POST", "/inbox", &get, Some(body), &pk, now), Err(SigError::NotCovered("host")));
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(parse("").is_err());
        assert!(parse("keyId=\"a\"").is_err());
        assert!(parse("keyId=\"a\",signature=\"!!!\"").is_err());
        assert!(parse("keyId=\"a,signature=\"AA==\"").is_err());
        let p = parse("keyId=\"a\", algorithm=\"hs2019\", signature=\"AAAA\"").unwrap();
        assert_eq!(p.headers, ["date"]);
        assert_eq!(p.algorithm.as_deref(), Some("hs2019"));
        assert_eq!(digest(b"hello"), "SHA-256=LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=");
    }
}
