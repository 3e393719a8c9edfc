//! The edge's HTTP front: the web UI and the chat websocket are served here; every other request
//! (`/api/*`, HLS and LL-HLS, thumbnails, logo, emoji, public files, federation, ...) goes to the
//! origin unchanged (method, path, query, headers but the hop-by-hop ones, body; `Host` too, so the
//! origin sees the host the client asked for: signed federation requests cover it, and the admin's
//! same-origin check compares it), with the client's address in `X-Forwarded-For` and the cluster's
//! edge mark in `X-Castd-Edge` (`http::headers::EDGE_MARK_HEADER`: the origin does not count the
//! viewers behind it again, the edge does, see `hls::FROM_EDGE_HEADER`; and it believes the edge's
//! `X-Forwarded-For` wherever the edge runs, see `http::headers::set_edge_mark`). A client's
//! `X-Castd-Cluster-Secret` is never passed on.
//!
//! Channels (`/c/{slug}/...`, see `channels`) go to the origin like the rest, their HLS
//! (`/c/{slug}/hls/...`) through the same cache, but for a channel's chat websocket (`/c/{slug}/ws`):
//! the edge holds it in its own chat of the channel's room (`edge_channels`; over Redis like the
//! default channel's `/ws`), and refuses it (404) for a channel it does not follow (deleted on the
//! origin, or not listed yet).
//!
//! On a channel that needs a viewing pass, every request passes the edge's own check first
//! (`access::edge`, with the origin's snapshot from `edge_access`): a way out without a valid pass is
//! refused here (401) and never reaches the cache, the local routes or the origin; the chat socket
//! this edge holds gets the viewer's `ViewerPass` (it ends with the pass). An invite link or a token to
//! redeem goes to the origin uncached (its `Set-Cookie` comes back), and so does a play the admission
//! hook is asked about.
//!
//! HLS (`GET /hls/...`) goes through a small cache: identical requests in flight share one origin
//! request (so a blocking LL-HLS playlist reload from many players is one request to the origin), and
//! an answer whose `Cache-Control` allows it (`public`/`max-age`, no `no-store`/`no-cache`/`private`)
//! is kept for its max-age. At most `CACHE_ENTRIES` answers are kept; expired ones are dropped as new
//! ones come.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::OnceCell;
use tower::ServiceExt;

use super::{edge_access, Cluster, SECRET_HEADER};
use crate::access::edge::Verdict;
use crate::http::ApiError;
use crate::media::ChannelId;

/// Largest request body forwarded to the origin.
const MAX_REQUEST_BODY: usize = 32 << 20;
/// Most cached answers.
const CACHE_ENTRIES: usize = 4096;
/// How long an origin request may take (a blocking playlist reload waits up to a few part lengths).
const ORIGIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Paths the edge serves itself (the web UI and the chat websocket).
fn is_local(path: &str) -> bool {
    matches!(path, "/" | "/ws" | "/admin" | "/favicon.ico" | "/robots.txt" | "/serviceworker.js")
        || ["/admin/", "/assets/", "/embed/"].iter().any(|p| path.starts_with(p))
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// Whether `path` is a channel's HLS (`/c/{slug}/hls/...`).
fn is_channel_hls(path: &str) -> bool {
    channel_rest(path).is_some_and(|rest| rest.starts_with("/hls/"))
}

/// The part after `/c/{slug}` of a channel path.
fn channel_rest(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/c/")?;
    let slash = rest.find('/')?;
    Some(&rest[slash..])
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if !HOP_BY_HOP.contains(&name.as_str()) && name.as_str() != SECRET_HEADER {
            to.append(name.clone(), value.clone());
        }
    }
}

/// A request's headers for the origin: [`copy_headers`], and the client's `Host`.
fn request_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    copy_headers(from, &mut out);
    if let Some(host) = from.get(header::HOST) {
        out.insert(header::HOST, host.clone());
    }
    out
}

/// One cached (or shared in-flight) origin answer.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    /// Until when it may be served again (`None`: only to the requests that shared it).
    fresh_until: Option<Instant>,
}

type Slot = Arc<OnceCell<Result<Arc<Answer>, String>>>;

/// The edge's HLS cache (see the module doc).
#[derive(Default)]
pub struct Cache {
    slots: Mutex<HashMap<String, (Instant, Slot)>>,
}

impl Cache {
    /// The slot for `key`: the cached one while fresh or in flight, else a new one.
    fn slot(&self, key: &str) -> Slot {
        let now = Instant::now();
        let mut slots = self.slots.lock();
        if let Some((_, slot)) = slots.get(key) {
            match slot.get() {
                None => return slot.clone(),
                Some(Ok(a)) if a.fresh_until.is_some_and(|t| t > now) => return slot.clone(),
                _ => {}
            }
        }
        if slots.len() >= CACHE_ENTRIES {
            slots.retain(|_, (_, s)| match s.get() {
                None => true,
                Some(Ok(a)) => a.fresh_until.is_some_and(|t| t > now),
                Some(Err(_)) => false,
            });
            if slots.len() >= CACHE_ENTRIES {
                // Everything is fresh: forget the oldest half.
                let mut ages: Vec<Instant> = slots.values().map(|(t, _)| *t).collect();
                ages.sort();
                let cut = ages[ages.len() / 2];
                slots.retain(|_, (t, _)| *t > cut);
            }
        }
        let slot: Slot = Arc::default();
        slots.insert(key.to_string(), (now, slot.clone()));
        slot
    }
}

/// How long `Cache-Control` lets a shared cache keep an answer.
pub fn cache_lifetime(headers: &HeaderMap) -> Option<Duration> {
    let cc = headers.get(header::CACHE_CONTROL)?.to_str().ok()?.to_ascii_lowercase();
    let directives: Vec<&str> = cc.split(',').map(str::trim).collect();
    if directives.iter().any(|d| matches!(*d, "no-store" | "no-cache" | "private")) {
        return None;
    }
    let age = |name: &str| {
        directives
            .iter()
            .find_map(|d| d.strip_prefix(name).and_then(|v| v.strip_prefix('=')).and_then(|v| v.parse().ok()))
    };
    age("s-maxage").or_else(|| age("max-age")).filter(|s: &u64| *s > 0).map(Duration::from_secs)
}

#[derive(Clone)]
struct Front {
    cluster: Arc<Cluster>,
    local: Router,
}

/// The edge's router: `local` (the daemon's own routes) for the UI and `/ws`, the origin for the rest.
pub fn front(cluster: Arc<Cluster>, local: Router) -> Router {
    Router::new().fallback(handle).with_state(Front { cluster, local })
}

async fn handle(State(front): State<Front>, req: Request) -> Response {
    if req.uri().path().starts_with("/api/cluster/") {
        return ApiError::NotFound("not found".into()).into_response();
    }
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let ip = peer.map(|p| crate::http::client_ip(p, req.headers()));
    // The viewer's pass is checked here, before the cache, the local routes or the origin see the request.
    let (mut parts, body) = req.into_parts();
    let (slug, own) = channel_of(parts.uri.path());
    // Every chat socket is this edge's: the default channel's `/ws`, and a channel's in its room here.
    let edge_ws = own == "/ws";
    let room = match parts.uri.path().starts_with("/c/") && edge_ws {
        false => None,
        true => match front.cluster.room_for(slug) {
            Some((_, chat)) => Some(chat),
            None => return ApiError::NotFound("no such channel on this server".into()).into_response(),
        },
    };
    let mut verdict = front.cluster.access.admit(slug, own, &parts);
    if edge_ws && matches!(verdict, Verdict::Origin) {
        // This edge holds the socket, so the origin cannot decide for it: a pass issued since the last
        // snapshot (a new invite link's) is checked against a fresh one.
        edge_access::refresh(&front.cluster).await;
        verdict = front.cluster.access.admit(slug, own, &parts);
    }
    let (pass, uncached) = match verdict {
        Verdict::Deny(resp) => return resp,
        Verdict::Admit(pass) => (pass, false),
        Verdict::Hook(pass) if edge_ws => {
            // The edge holds this socket: the origin asks its admission hook first.
            let ua = parts.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok());
            let subject = pass.as_ref().map(|p| p.subject.as_str());
            if let Err(resp) = edge_access::ask_play(&front.cluster, slug, subject, ip, ua).await {
                return resp;
            }
            (pass, false)
        }
        Verdict::Hook(pass) => (pass, true),
        // The edge holds this socket and cannot redeem an invite link or a token for it.
        Verdict::Origin if edge_ws => {
            return match front.cluster.access.knows(slug) {
                true => ApiError::NeedsPass("unlock the channel on its page first (a viewing pass is needed)".into()),
                false => {
                    ApiError::Unavailable("this edge does not know the channel's access yet; try again soon".into())
                }
            }
            .into_response();
        }
        Verdict::Origin => (None, true),
    };
    if let Some(pass) = pass {
        // For the chat socket this edge holds: it ends when the pass does.
        parts.extensions.insert(pass);
    }
    if let Some(chat) = room {
        return room_socket(chat, parts, body).await;
    }
    let req = Request::from_parts(parts, body);
    // A page with an invite link or a token to redeem goes to the origin (it sets the pass's cookie).
    if is_local(req.uri().path()) && !uncached {
        return match front.local.oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
    }
    let path = req.uri().path();
    let cacheable = !uncached && req.method() == Method::GET && (path.starts_with("/hls/") || is_channel_hls(path));
    // A channel's viewers are counted by the origin (its edge mark is the default channel's).
    let default_hls = path.starts_with("/hls/");
    if let (true, Some(peer)) = (default_hls && req.method() == Method::GET && path.ends_with(".m3u8"), peer) {
        // The viewer watches through this node: counted here (presence adds the nodes up).
        front.cluster.metrics.viewers.mark_request(peer, req.headers());
    }
    let path_query = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_string();
    if cacheable {
        // Keyed by the whole path and query: a playlist asked for with `?pass=` (whose URIs carry the
        // pass) is only ever shared with requests that carry the same pass.
        let slot = front.cluster.cache.slot(&path_query);
        let cluster = front.cluster.clone();
        let (method, headers) = (req.method().clone(), req.headers().clone());
        let answer = slot
            .get_or_init(|| async move {
                let mut a = fetch(&cluster, method, &path_query, &headers, ip, Bytes::new()).await?;
                a.fresh_until = cache_lifetime(&a.headers).map(|d| Instant::now() + d);
                Ok::<_, String>(Arc::new(a))
            })
            .await;
        return match answer {
            Ok(a) => respond(a),
            Err(e) => bad_gateway(e),
        };
    }
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BODY).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad(format!("could not read the request body: {e}")).into_response(),
    };
    match fetch(&front.cluster, parts.method, &path_query, &parts.headers, ip, body).await {
        Ok(a) => respond(&a),
        Err(e) => bad_gateway(&e),
    }
}

/// A channel's chat socket (`/c/{slug}/ws`, admitted) in the edge's chat of its room, as `/ws` with the
/// query kept (the connection's extensions, the viewer's pass among them, go with it).
async fn room_socket(chat: Arc<crate::chat::Chat>, mut parts: axum::http::request::Parts, body: Body) -> Response {
    let uri = match parts.uri.query() {
        Some(q) => format!("/ws?{q}"),
        None => "/ws".to_string(),
    };
    match uri.parse() {
        Ok(uri) => parts.uri = uri,
        Err(_) => return ApiError::bad("a path castd cannot read").into_response(),
    }
    let router = Router::new().route("/ws", axum::routing::get(crate::chat::ws::handler)).with_state(chat);
    match router.oneshot(Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// The channel a path is for (its slug, `default` for the root) and the channel's own path.
fn channel_of(path: &str) -> (&str, &str) {
    let Some(rest) = path.strip_prefix("/c/") else { return (ChannelId::DEFAULT, path) };
    match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    }
}

fn bad_gateway(e: &str) -> Response {
    tracing::warn!("cluster: the origin did not answer: {e}");
    let body = serde_json::json!({ "success": false, "message": "the origin server did not answer" });
    (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response()
}

fn respond(a: &Answer) -> Response {
    let mut resp = Response::new(Body::from(a.body.clone()));
    *resp.status_mut() = a.status;
    *resp.headers_mut() = a.headers.clone();
    resp
}

async fn fetch(
    cluster: &Cluster,
    method: Method,
    path_query: &str,
    headers: &HeaderMap,
    ip: Option<std::net::IpAddr>,
    body: Bytes,
) -> Result<Answer, String> {
    let origin = cluster.config.origin.as_ref().ok_or("no origin")?;
    let url = origin.join(path_query).map_err(|e| e.to_string())?;
    let mut out = request_headers(headers);
    if let Some(ip) = ip {
        if let Ok(v) = HeaderValue::from_str(&ip.to_string()) {
            out.insert(HeaderName::from_static("x-forwarded-for"), v);
        }
    }
    // This edge counted the viewer (presence); the origin does not count it again.
    if let Ok(v) = HeaderValue::from_str(&cluster.edge_mark) {
        out.insert(HeaderName::from_static(crate::http::headers::EDGE_MARK_HEADER), v);
    }
    let idempotent = matches!(method, Method::GET | Method::HEAD);
    let send = || {
        cluster
            .http
            .request(method.clone(), url.clone())
            .headers(out.clone())
            .body(body.clone())
            .timeout(ORIGIN_TIMEOUT)
            .send()
    };
    // A GET once more on a connection error: a kept-alive connection to an origin that restarted is dead.
    let resp = match send().await {
        Err(e) if idempotent && (e.is_connect() || e.is_request()) => send().await,
        other => other,
    }
    .map_err(|e| e.to_string())?;
    let status = resp.status();
    let mut headers = HeaderMap::new();
    copy_headers(resp.headers(), &mut headers);
    let body = resp.bytes().await.map_err(|e| e.to_string())?;
    Ok(Answer { status, headers, body, fresh_until: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn only_what_cache_control_allows_is_kept() {
        assert_eq!(cache_lifetime(&cc("public, max-age=31536000, immutable")), Some(Duration::from_secs(31536000)));
        assert_eq!(cache_lifetime(&cc("public, max-age=1, s-maxage=2")), Some(Duration::from_secs(2)));
        assert_eq!(cache_lifetime(&cc("no-cache, no-store, must-revalidate")), None);
        assert_eq!(cache_lifetime(&cc("private, max-age=60")), None);
        assert_eq!(cache_lifetime(&HeaderMap::new()), None);
    }

    #[test]
    fn a_path_names_the_channel_whose_pass_it_needs() {
        assert_eq!(channel_of("/hls/0/seg1.ts"), ("default", "/hls/0/seg1.ts"));
        assert_eq!(channel_of("/c/music/hls/0/seg1.ts"), ("music", "/hls/0/seg1.ts"));
        assert_eq!(channel_of("/c/music/ws"), ("music", "/ws"));
        assert_eq!(channel_of("/c/music"), ("music", "/"));
    }

    #[test]
    fn channel_paths_are_told_apart() {
        assert!(is_channel_hls("/c/church/hls/0/stream.m3u8"));
        assert!(!is_channel_hls("/c/church/api/status"));
        assert_eq!(channel_of("/c/church/ws/x"), ("church", "/ws/x"), "not a chat socket");
    }

    #[test]
    fn the_ui_and_the_websocket_are_local_and_the_rest_goes_to_the_origin() {
        for p in ["/", "/ws", "/admin", "/admin/chat", "/assets/index.js", "/embed/chat/readwrite", "/favicon.ico"] {
            assert!(is_local(p), "{p}");
        }
        for p in ["/api/status", "/hls/0/stream.m3u8", "/thumbnail.jpg", "/logo", "/img/emoji/a.png", "/public/x"] {
            assert!(!is_local(p), "{p}");
        }
    }
}
