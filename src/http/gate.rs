//! The viewer gate's seam: what stands in front of every way out of a channel that is not public.
//!
//! A channel's [`Gate`] (the `access` feature's) sees every request of the channel's router and of its
//! fast lanes before the handler does. While the channel is public and no admission hook asks about
//! viewers, [`Gate::open`] says so and requests go straight through (one atomic load on the HLS hot
//! path). Otherwise [`Gate::admit`] either answers the request itself (401/403 with a
//! `StatusResponse`, a redirect to the viewer page) or admits it, with the viewer's [`ViewerPass`] in
//! the request's extensions for the handlers that keep a connection open (chat sockets, WHEP sessions:
//! they end when [`ViewerPass::ended`] resolves) or that read who the viewer is (chat sign-in with a
//! JWT's name).
//!
//! Players that send no cookie (VLC, mpv, smart TVs) carry the pass in the query (`?pass=`): the gate
//! then asks for it to be written into every URI of the playlists it serves ([`carry_query`]), so the
//! player's next requests carry it too.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use super::lanes::{Lane, LaneFuture};

/// Largest playlist the gate rewrites (a longer one is served as it is).
const MAX_PLAYLIST_BYTES: usize = 4 * 1024 * 1024;

/// A viewer's pass, as the gate admitted it (in the request's extensions).
#[derive(Debug, Clone)]
pub struct ViewerPass {
    /// Who holds it: `password:<id>`, `invite:<id>`, `jwt:<sub>` (for logs and the admission hook).
    pub subject: String,
    /// The chat display name the pass carries (a JWT's name claim), if any.
    pub name: Option<String>,
    /// When it expires, Unix seconds.
    pub expires_at: i64,
    /// Cancelled when the pass stops being valid before it expires: its password or invite link was
    /// revoked, the JWT issuer changed, or the channel's signing key was rotated.
    pub revoked: CancellationToken,
}

impl ViewerPass {
    /// Resolves when the pass ends: revoked, or expired.
    pub async fn ended(&self) {
        let now = chrono::Utc::now().timestamp();
        let left = std::time::Duration::from_secs(self.expires_at.saturating_sub(now).max(0) as u64);
        tokio::select! {
            _ = self.revoked.cancelled() => {}
            _ = tokio::time::sleep(left) => {}
        }
    }
}

/// What the gate lets through with a request.
#[derive(Debug, Default)]
pub struct Admitted {
    /// The viewer's pass (none on a channel without passes).
    pub pass: Option<ViewerPass>,
    /// A query (`pass=...`) to write into every URI of a playlist answer (the pass came in the query).
    pub carry: Option<String>,
    /// A `Set-Cookie` to add to the answer (a pass was just issued: invite link, JWT).
    pub cookie: Option<HeaderValue>,
    /// The answer is for pass holders only: a shared cache (CDN, proxy) must not keep it
    /// (`Cache-Control: private`).
    pub private: bool,
}

/// What [`Gate::admit`] returns.
pub type GateFuture<'a> = Pin<Box<dyn Future<Output = Result<Admitted, Response>> + Send + 'a>>;

/// What a gate may answer in front of a route instead of its handler ([`Gate::guards`]): what the API
/// document lists on the route besides the route's own answers (`openapi::error_statuses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Guarded {
    /// Not gated: the route's own answers only.
    #[default]
    No,
    /// A pass is needed for the details (401 with a `StatusResponse`); the channel admin's Basic
    /// credentials admit too (429, 503 while they cannot be checked).
    Pass,
    /// A way out: [`Guarded::Pass`], and the admission hook's say (403 when it refuses, 503 when it
    /// cannot be reached on a channel that needs a pass).
    PassAndHook,
}

/// The check in front of a channel's ways out (see the module doc).
pub trait Gate: Send + Sync + 'static {
    /// Nothing to check at the moment: every request goes straight through.
    fn open(&self) -> bool;
    /// Admit the request (`peer`: the connection's address) or answer it.
    fn admit<'a>(&'a self, parts: &'a Parts, peer: Option<SocketAddr>) -> GateFuture<'a>;
    /// Where the playlists rewritten for `?pass=` are remembered (none: rewritten every time).
    fn rewrites(&self) -> Option<&Rewrites> {
        None
    }
    /// What the gate may answer, at any visibility, in front of the route `method path` (the path as
    /// registered, `{name}` parameters and all): what the API document says of it. Unless the gate
    /// says otherwise, every route is a way out.
    fn guards(&self, method: &axum::http::Method, path: &str) -> Guarded {
        let _ = (method, path);
        Guarded::PassAndHook
    }
}

/// Most rewritten playlists a [`Rewrites`] keeps.
const MAX_REWRITES: usize = 1024;
/// Most bytes a [`Rewrites`] keeps (the playlists as served and as rewritten, and the passes).
const MAX_REWRITE_BYTES: usize = 16 * 1024 * 1024;

type RewriteKey = (String, bytes::Bytes);

/// Playlists as rewritten for a pass, by (the pass' query, the playlist as served): a player polling a
/// live playlist gets the same bytes until the playlist changes, so each version is rewritten once per
/// pass, not once per request. Bounded by count ([`MAX_REWRITES`]) and by bytes
/// ([`MAX_REWRITE_BYTES`]), the oldest evicted first; a playlist bigger than the bound is not kept.
#[derive(Default)]
pub struct Rewrites(parking_lot::Mutex<RewriteMemo>);

#[derive(Default)]
pub struct RewriteMemo {
    map: std::collections::HashMap<RewriteKey, bytes::Bytes>,
    order: std::collections::VecDeque<RewriteKey>,
    bytes: usize,
}

fn rewrite_cost(key: &RewriteKey, done: &bytes::Bytes) -> usize {
    key.0.len() + key.1.len() + done.len()
}

impl Rewrites {
    fn get(&self, carry: String, playlist: bytes::Bytes, text: &str) -> bytes::Bytes {
        let key = (carry, playlist);
        if let Some(done) = self.0.lock().map.get(&key) {
            return done.clone();
        }
        let done = bytes::Bytes::from(carry_query(text, &key.0));
        self.put(key, done.clone());
        done
    }

    fn put(&self, key: RewriteKey, done: bytes::Bytes) {
        let cost = rewrite_cost(&key, &done);
        if cost > MAX_REWRITE_BYTES {
            return;
        }
        let mut m = self.0.lock();
        if m.map.contains_key(&key) {
            return;
        }
        while m.map.len() >= MAX_REWRITES || m.bytes + cost > MAX_REWRITE_BYTES {
            let Some(old) = m.order.pop_front() else { break };
            if let Some(gone) = m.map.remove(&old) {
                m.bytes -= rewrite_cost(&old, &gone);
            }
        }
        m.bytes += cost;
        m.order.push_back(key.clone());
        m.map.insert(key, done);
    }

    /// Bytes and playlists kept.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let m = self.0.lock();
        (m.bytes, m.map.len())
    }
}

/// The router's middleware for a gate (`Registry::gate`).
pub async fn middleware(State(gate): State<Arc<dyn Gate>>, req: Request, next: Next) -> Response {
    if gate.open() {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let admitted = match gate.admit(&parts, peer).await {
        Ok(a) => a,
        Err(resp) => return resp,
    };
    let mut req = Request::from_parts(parts, body);
    if let Some(pass) = admitted.pass.clone() {
        req.extensions_mut().insert(pass);
    }
    finish(next.run(req).await, admitted, gate.rewrites()).await
}

/// A fast lane behind a gate (`Registry::gate` wraps every lane in one).
pub struct GatedLane {
    pub gate: Arc<dyn Gate>,
    pub lane: Arc<dyn Lane>,
}

impl Lane for GatedLane {
    fn takes(&self, path: &str) -> bool {
        self.lane.takes(path)
    }

    fn serve(&self, req: Request, peer: SocketAddr) -> LaneFuture {
        if self.gate.open() {
            return self.lane.serve(req, peer);
        }
        let (gate, lane) = (self.gate.clone(), self.lane.clone());
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let admitted = match gate.admit(&parts, Some(peer)).await {
                Ok(a) => a,
                Err(resp) => return resp,
            };
            let mut req = Request::from_parts(parts, body);
            if let Some(pass) = admitted.pass.clone() {
                req.extensions_mut().insert(pass);
            }
            finish(lane.serve(req, peer).await, admitted, gate.rewrites()).await
        })
    }
}

/// Add what the gate asked for to an admitted request's answer: the cookie, the pass in the
/// playlist's URIs.
async fn finish(mut resp: Response, admitted: Admitted, rewrites: Option<&Rewrites>) -> Response {
    if let Some(cookie) = admitted.cookie {
        resp.headers_mut().append(header::SET_COOKIE, cookie);
    }
    let is_playlist = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().windows(7).any(|w| w.eq_ignore_ascii_case(b"mpegurl")));
    let Some(carry) = admitted.carry.filter(|_| is_playlist && resp.status().is_success()) else {
        if admitted.private {
            mark_private(resp.headers_mut());
        }
        return resp;
    };
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_PLAYLIST_BYTES).await else {
        parts.status = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(text) = std::str::from_utf8(&bytes) else { return Response::from_parts(parts, Body::from(bytes)) };
    let text = match rewrites {
        Some(r) => r.get(carry, bytes.clone(), text),
        None => bytes::Bytes::from(carry_query(text, &carry)),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    // What a cache may keep differs per pass now.
    parts.headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    Response::from_parts(parts, Body::from(text))
}

/// `Cache-Control` of an answer for pass holders only: `public` becomes `private`, and an answer without
/// either gets `private` (its other directives, `max-age` for one, are kept).
fn mark_private(headers: &mut axum::http::HeaderMap) {
    let now = headers.get(header::CACHE_CONTROL).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let has = |word: &[u8]| now.as_bytes().windows(word.len()).any(|w| w.eq_ignore_ascii_case(word));
    if has(b"private") || has(b"no-store") {
        return;
    }
    let kept: Vec<&str> =
        now.split(',').map(str::trim).filter(|d| !d.is_empty() && !d.eq_ignore_ascii_case("public")).collect();
    let value = if kept.is_empty() { "private".to_string() } else { format!("private, {}", kept.join(", ")) };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(header::CACHE_CONTROL, v);
    }
}

/// `playlist` with `query` added to every URI in it: the URI lines and the `URI="..."` attributes
/// (`EXT-X-MAP`, `EXT-X-MEDIA`, `EXT-X-PART`, `EXT-X-PRELOAD-HINT`, `EXT-X-RENDITION-REPORT`, ...).
pub fn carry_query(playlist: &str, query: &str) -> String {
    let mut out = String::with_capacity(playlist.len() + 64 * query.len().min(256));
    for line in playlist.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => match b.strip_suffix('\r') {
                Some(b2) => (b2, "\r\n"),
                None => (b, "\n"),
            },
            None => (line, ""),
        };
        if body.is_empty() {
        } else if body.starts_with('#') {
            carry_in_attributes(&mut out, body, query);
        } else {
            push_with_query(&mut out, body.trim(), query);
        }
        out.push_str(end);
    }
    out
}

/// Whether `uri` is castd's own (relative: no scheme, no `//host`): the only kind a pass goes into.
/// An absolute URI is another host's (an object-storage bucket, a CDN), whose logs must not see it.
pub fn is_own_uri(uri: &str) -> bool {
    if uri.starts_with("//") || uri.starts_with("\\\\") {
        return false;
    }
    let head = &uri[..uri.find(['/', '?', '#']).unwrap_or(uri.len())];
    !head.contains(':')
}

fn push_with_query(out: &mut String, uri: &str, query: &str) {
    if !is_own_uri(uri) {
        out.push_str(uri);
        return;
    }
    let (base, fragment) = match uri.find('#') {
        Some(i) => (&uri[..i], &uri[i..]),
        None => (uri, ""),
    };
    out.push_str(base);
    out.push(if base.contains('?') { '&' } else { '?' });
    out.push_str(query);
    out.push_str(fragment);
}

fn carry_in_attributes(out: &mut String, tag: &str, query: &str) {
    const ATTR: &str = "URI=\"";
    let mut rest = tag;
    while let Some(i) = rest.find(ATTR) {
        // `URI=` as an attribute name of its own, not the tail of another name.
        let own = i == 0 || matches!(rest.as_bytes()[i - 1], b',' | b':');
        let start = i + ATTR.len();
        let Some(len) = rest[start..].find('"') else { break };
        out.push_str(&rest[..start]);
        let uri = &rest[start..start + len];
        if own && !uri.is_empty() {
            push_with_query(out, uri, query);
        } else {
            out.push_str(uri);
        }
        rest = &rest[start + len..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rewrite_memo_is_bounded_by_bytes_and_evicts_the_oldest() {
        let r = Rewrites::default();
        // 8 playlists of 3 MiB (each kept with its rewrite: 6 MiB): only two fit in 16 MiB.
        let big = |i: u8| {
            let mut text = format!("#EXTM3U\n#{i}\n");
            text.push_str(&"#".repeat(3 * 1024 * 1024));
            text
        };
        for i in 0..8u8 {
            let t = big(i);
            r.get("pass=x".into(), bytes::Bytes::from(t.clone()), &t);
            let (bytes, _) = r.held();
            assert!(bytes <= MAX_REWRITE_BYTES, "{bytes} bytes held");
        }
        let (_, count) = r.held();
        assert_eq!(count, 2);
        // The newest are the ones kept.
        let m = r.0.lock();
        assert!(m.map.keys().all(|(_, p)| p.starts_with(b"#EXTM3U\n#6\n") || p.starts_with(b"#EXTM3U\n#7\n")));
        drop(m);
        // One bigger than the bound is rewritten but not kept.
        let huge = "#".repeat(9 * 1024 * 1024);
        let out = r.get("pass=y".into(), bytes::Bytes::from(huge.clone()), &huge);
        assert_eq!(out.len(), huge.len());
        assert_eq!(r.held().1, 2);
        // Many small ones: bounded by count.
        for i in 0..(MAX_REWRITES + 10) {
            let t = format!("#EXTM3U\n#{i}\n");
            r.get("pass=z".into(), bytes::Bytes::from(t.clone()), &t);
        }
        assert_eq!(r.held().1, MAX_REWRITES);
    }

    #[test]
    fn answers_for_pass_holders_are_private() {
        let mut h = axum::http::HeaderMap::new();
        mark_private(&mut h);
        assert_eq!(h[header::CACHE_CONTROL], "private");
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=60"));
        mark_private(&mut h);
        assert_eq!(h[header::CACHE_CONTROL], "private, max-age=60");
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        mark_private(&mut h);
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
    }

    #[test]
    fn the_pass_is_carried_into_every_uri_of_a_playlist() {
        let master = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-STREAM-INF:BANDWIDTH=1200000\n0/stream.m3u8\n\
                      #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",URI=\"a/stream.m3u8\"\n";
        let got = carry_query(master, "pass=P");
        assert!(got.contains("\n0/stream.m3u8?pass=P\n"), "{got}");
        assert!(got.contains("URI=\"a/stream.m3u8?pass=P\""), "{got}");
        let ll = "#EXTM3U\r\n#EXT-X-MAP:URI=\"init.mp4\"\r\n#EXT-X-PART:DURATION=0.5,URI=\"p1.m4s?x=1\"\r\n\
                  #EXTINF:2.0,\r\nseg1.m4s\r\n#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p2.m4s\"\r\n\
                  #EXT-X-RENDITION-REPORT:URI=\"../1/stream.m3u8\",LAST-MSN=4\r\n";
        let got = carry_query(ll, "pass=P");
        for want in [
            "URI=\"init.mp4?pass=P\"",
            "URI=\"p1.m4s?x=1&pass=P\"",
            "\r\nseg1.m4s?pass=P\r\n",
            "URI=\"p2.m4s?pass=P\"",
            "URI=\"../1/stream.m3u8?pass=P\",LAST-MSN=4",
        ] {
            assert!(got.contains(want), "{want} in {got}");
        }
        assert!(got.starts_with("#EXTM3U\r\n"));
        assert_eq!(carry_query("#EXT-X-KEY:METHOD=NONE,XURI=\"k\"\n", "pass=P"), "#EXT-X-KEY:METHOD=NONE,XURI=\"k\"\n");
    }

    #[test]
    fn the_pass_goes_only_into_castds_own_uris() {
        let replay = "#EXTM3U\n#EXT-X-MAP:URI=\"https://bucket.example/r/init.mp4\"\n#EXTINF:2.0,\n\
                      https://bucket.example/r/seg1.ts?X-Amz-Signature=abc\n#EXTINF:2.0,\n//cdn.example/seg2.ts\n\
                      #EXTINF:2.0,\nseg3.ts\n#EXTINF:2.0,\n/hls/0/seg4.ts\n";
        let got = carry_query(replay, "pass=P");
        for line in got.lines().filter(|l| l.contains("example")) {
            assert!(!line.contains("pass="), "{line} in {got}");
        }
        assert!(got.contains("\nseg3.ts?pass=P\n") && got.contains("\n/hls/0/seg4.ts?pass=P\n"), "{got}");
        for (uri, own) in [
            ("seg.ts", true),
            ("/hls/0/seg.ts", true),
            ("../1/stream.m3u8", true),
            ("a/b:c.ts", true),
            ("seg.ts?t=1:2", true),
            ("https://b.example/x", false),
            ("HTTP://b.example/x", false),
            ("//b.example/x", false),
            ("s3:thing", false),
        ] {
            assert_eq!(is_own_uri(uri), own, "{uri}");
        }
    }
}
