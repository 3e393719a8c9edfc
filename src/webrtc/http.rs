//! The HTTP side WHIP (RFC 9725) and WHEP share: the SDP offer body, the `201 Created` answer with
//! the session resource's `Location` and `ETag`, `OPTIONS` (CORS preflight with `Accept-Post` and
//! `Allow`) and errors as StatusResponse JSON. `PATCH` on a session (trickle ICE, ICE restarts) is not routed:
//! the router answers 405 with `Allow` (a StatusResponse body), RFC 9725's answer from a server without
//! trickle ICE; the offer carries every candidate the client gathered. The
//! endpoints are open to any origin (browsers publish and play from other pages), and expose
//! `Location` and `ETag` to scripts.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::http::StatusResponse;

/// The SDP media type.
pub const SDP: &str = "application/sdp";
/// Largest offer accepted (a browser's offer is a few KiB).
pub const MAX_OFFER_BYTES: usize = 64 * 1024;
/// What an endpoint (`POST /whip`) allows.
pub const ENDPOINT_ALLOW: &str = "POST, OPTIONS";
/// What a session resource (`/whip/{id}`) allows.
pub const RESOURCE_ALLOW: &str = "DELETE, OPTIONS";

/// A StatusResponse error with `status`, open to any origin.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = Json(StatusResponse { success: false, message: message.into() });
    cors((status, body).into_response())
}

/// 429 with `Retry-After` (a StatusResponse, open to any origin): the client's address must wait
/// (wrong stream keys) or holds as many sessions as one address may.
pub fn too_many(limited: crate::throttle::Limited, message: impl Into<String>) -> Response {
    let mut resp = error(StatusCode::TOO_MANY_REQUESTS, message);
    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(limited.retry_after_secs()));
    resp
}

/// Why an offer's body was refused: the status and the message of its StatusResponse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused(pub StatusCode, pub &'static str);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

/// The SDP offer of a POST: `Content-Type: application/sdp` (else 415), a UTF-8 session description
/// starting with `v=0` of at most `MAX_OFFER_BYTES` (else 400, 413).
pub fn offer(headers: &HeaderMap, body: &Bytes) -> Result<String, Refused> {
    let ctype = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let media = ctype.split(';').next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case(SDP) {
        return Err(Refused(StatusCode::UNSUPPORTED_MEDIA_TYPE, "the offer must be sent as application/sdp"));
    }
    if body.len() > MAX_OFFER_BYTES {
        return Err(Refused(StatusCode::PAYLOAD_TOO_LARGE, "the SDP offer is too large"));
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(Refused(StatusCode::BAD_REQUEST, "the SDP offer is not UTF-8 text"));
    };
    if !text.trim_start().starts_with("v=0") {
        return Err(Refused(StatusCode::BAD_REQUEST, "the body is not an SDP session description"));
    }
    Ok(text.to_string())
}

/// The bearer token of `Authorization: Bearer <token>`, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// `201 Created` with the SDP answer, the session resource's `location` and its `ETag` (the id).
pub fn created(location: &str, id: &str, answer: String) -> Response {
    let mut resp = (StatusCode::CREATED, answer).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(SDP));
    if let Ok(v) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("\"{id}\"")) {
        h.insert(header::ETAG, v);
    }
    cors(resp)
}

/// `204 No Content` (a WHEP session ended by DELETE).
pub fn deleted() -> Response {
    cors(StatusCode::NO_CONTENT.into_response())
}

/// `200 OK` with an empty body and `Content-Length: 0` (a WHIP session ended by DELETE). RFC 9725
/// allows any 2xx; FFmpeg's WHIP muxer reads this as a clean end (on a 204 it logs "Failed to
/// dispose resource"), and OBS's WHIP output warns on anything but 200.
pub fn ended() -> Response {
    let mut resp = StatusCode::OK.into_response();
    resp.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    cors(resp)
}

/// The CORS preflight of an endpoint or resource that allows `allow`.
pub fn options(allow: &'static str) -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert(header::ALLOW, HeaderValue::from_static(allow));
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(allow));
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("Content-Type, Authorization, If-Match"));
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    if allow.contains("POST") {
        h.insert("accept-post", HeaderValue::from_static(SDP));
    }
    cors(resp)
}

/// Open to any origin; `Location` and `ETag` readable by scripts.
fn cors(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Location, ETag, Link"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_offer() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer  abc "));
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
        let body = Bytes::from_static(b"v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n");
        assert_eq!(offer(&h, &body).unwrap_err().0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/sdp; charset=utf-8"));
        assert!(offer(&h, &body).is_ok());
        assert_eq!(offer(&h, &Bytes::from_static(b"hello")).unwrap_err().0, StatusCode::BAD_REQUEST);
    }
}
