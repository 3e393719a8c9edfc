//! The channel's gate (`http::gate::Gate`): which requests are ways out that need a viewing pass,
//! where a pass is read from (the channel's cookie, `?pass=`, `Authorization: Bearer`), what it
//! answers without one (401 with a `StatusResponse`; the status' `online` alone; a page navigation is
//! sent to the channel's page, where the viewer is asked for a password), the invite links and tokens
//! redeemed on the way in (`?invite=`, `?jwt=`, a Bearer JWT), and the admission hook's say on play.

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::Access;
use crate::http::gate::{Admitted, Gate, GateFuture, Guarded, ViewerPass};
use crate::http::setters::SettingsHost as _;
use crate::http::ApiError;

/// What a request is, to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// Not a way out (its own auth, a page shell, the unlock routes): let through.
    Open,
    /// `/api/status`: without a pass, whether the channel is online and nothing else.
    Status,
    /// A way out; `play`: the start of watching (master playlist, WHEP offer, chat socket), which the
    /// admission hook is asked about.
    Out { play: bool },
}

/// Paths that are not ways out: the page shells (they show the password prompt), routes with their
/// own authentication (admin, integrations, publishing, federation's signed requests), the viewer's
/// unlock routes, and the server's channel list and API document.
const OPEN_PREFIXES: &[&str] = &[
    "/api/admin/",
    "/api/integrations/",
    "/api/viewer/",
    "/api/cluster/",
    "/api/auth/provider/",
    "/federation/",
    "/.well-known/",
    "/assets/",
    "/admin",
    "/embed/",
    "/whip",
    "/img/platformlogos/",
];
const OPEN_PATHS: &[&str] = &[
    "/",
    "/index.html",
    "/logo",
    "/favicon.ico",
    "/serviceworker.js",
    "/robots.txt",
    "/channels",
    "/api/channels",
    "/api/openapi.json",
];

/// What `path` (the channel's own, below its prefix) is; `root`: the default channel's router, which
/// also dispatches `/c/{slug}/...` to the other channels (each with its own gate).
pub fn way(method: &Method, path: &str, root: bool) -> Way {
    // A CORS preflight carries no credentials and is answered with CORS headers only (WHEP, CMCD).
    if method == Method::OPTIONS {
        return Way::Open;
    }
    if root && path.starts_with("/c/") {
        return Way::Open;
    }
    if OPEN_PATHS.contains(&path) || OPEN_PREFIXES.iter().any(|p| path.starts_with(p)) {
        return Way::Open;
    }
    if path == "/api/status" {
        return Way::Status;
    }
    let play = path == "/hls/stream.m3u8" || path == "/ws" || (path == "/whep" && method == Method::POST);
    Way::Out { play }
}

pub(super) fn query_param<'a>(query: &'a str, name: &str) -> Option<std::borrow::Cow<'a, str>> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| percent_encoding::percent_decode_str(v).decode_utf8_lossy())
    })
}

/// Every pass a request carries, in the order looked at: the channel's cookie, `?pass=` (marked true),
/// a Bearer pass. All of them, so an old cookie does not hide a good `?pass=`. Also the edge's check.
pub(super) fn carried<'a>(parts: &'a Parts, cookie_name: &str) -> impl Iterator<Item = (Cow<'a, str>, bool)> {
    [
        cookie(parts, cookie_name).map(|c| (Cow::Borrowed(c), false)),
        parts.uri.query().and_then(|q| query_param(q, "pass")).map(|q| (q, true)),
        bearer(parts).filter(|b| b.starts_with(super::pass::PREFIX)).map(|b| (Cow::Borrowed(b), false)),
    ]
    .into_iter()
    .flatten()
}

// pub(super): also the edge's check (`access::edge`).
pub(super) fn cookie<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts.headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|line| {
        line.split(';').find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == name).then_some(v)
        })
    })
}

// pub(super): also the edge's check (`access::edge`).
pub(super) fn bearer(parts: &Parts) -> Option<&str> {
    let v = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn has_basic(parts: &Parts) -> bool {
    parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.len() > 6 && v[..6].eq_ignore_ascii_case("basic "))
}

/// The query without `names` (what a page is redirected to once its invite or token is redeemed).
fn without(query: &str, names: &[&str]) -> String {
    query
        .split('&')
        .filter(|kv| !kv.is_empty() && !names.iter().any(|n| kv.split('=').next() == Some(n)))
        .collect::<Vec<_>>()
        .join("&")
}

// pub(super): also the edge's check (`access::edge`).
pub(super) fn is_page(parts: &Parts) -> bool {
    parts.method == Method::GET
        && parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"))
}

/// The 401 of a way out without a pass.
// pub(super): also the edge's check (`access::edge`).
pub(super) fn needs_pass() -> Response {
    ApiError::NeedsPass("this channel is private: unlock it on its page first (a viewing pass is needed)".into())
        .into_response()
}

/// The 401 of `/api/status` without a pass: the StatusResponse, and whether the channel is online.
fn status_without_pass(online: bool) -> Response {
    let body = serde_json::json!({
        "success": false,
        "message": "this channel is private: a viewing pass is needed for its details",
        "online": online,
    });
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

impl Access {
    /// The page the viewer is sent to: the same path without `?invite=`/`?jwt=`, when that path is
    /// one of this origin's (`http::urls::local_redirect`: `//evil.example/x` would send the browser,
    /// and its fresh pass, elsewhere); else the channel's page.
    fn redirect_without_secret(&self, parts: &Parts, cookie: HeaderValue) -> Response {
        let query = parts.uri.query().map(|q| without(q, &["invite", "jwt"])).unwrap_or_default();
        let path = crate::http::urls::local_redirect(&format!("{}{}", self.base, parts.uri.path()));
        let query = if crate::http::urls::is_local_path(&format!("/?{query}")) { query } else { String::new() };
        let location = if query.is_empty() { path } else { format!("{path}?{query}") };
        let mut resp = StatusCode::SEE_OTHER.into_response();
        if let Ok(v) = HeaderValue::from_str(&location) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
        resp.headers_mut().append(header::SET_COOKIE, cookie);
        resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        resp
    }

    async fn admit_request(&self, parts: &Parts, peer: Option<SocketAddr>) -> Result<Admitted, Response> {
        let s = self.settings.get();
        let vis = s.access.visibility;
        let way = way(&parts.method, parts.uri.path(), !self.is_channel());
        // The address is worked out only when something needs it (a redemption, the admin, the hook).
        let ip = || -> Option<IpAddr> { peer.map(|p| crate::http::client_ip(p, &parts.headers)) };
        let ua = parts.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok());
        let mut admitted = Admitted::default();
        // Who the viewer is matters beyond HLS (the chat socket, WHEP, chat sign-in, the hook); an HLS
        // request only needs to know the pass is good.
        // (and so does it when the hook is asked: its verdict is per viewer).
        let hook = &s.access.admission_hook;
        let wants_viewer = !parts.uri.path().starts_with("/hls/")
            || way == (Way::Out { play: true })
            || (hook.on_play && !hook.url.is_empty());

        // The pass the request carries, if it is valid.
        let mut has_pass = false;
        for (text, from_query) in carried(parts, self.cookie_name()) {
            if let Some(claims) = self.check_claims(&text) {
                has_pass = true;
                if wants_viewer {
                    admitted.pass = Some(self.viewer(&claims));
                }
                if from_query {
                    admitted.carry = Some(format!("pass={}", percent_encoding::utf8_percent_encode(&text, QUERY)));
                }
                break;
            }
        }
        // An invite link or a token on the way in: redeemed into a pass (and a cookie).
        if !has_pass && vis.needs_pass() {
            let query = parts.uri.query().unwrap_or_default();
            let issued = if let Some(invite) = query_param(query, "invite") {
                Some(self.redeem(&invite, ip(), ua).await)
            } else if let Some(jwt) = query_param(query, "jwt") {
                Some(self.exchange(&jwt, ip(), ua).await)
            } else if let Some(jwt) = bearer(parts).filter(|b| b.matches('.').count() == 2 && b.starts_with("eyJ")) {
                Some(self.exchange(jwt, ip(), ua).await)
            } else {
                None
            };
            match issued {
                Some(Ok(issued)) => {
                    if is_page(parts) {
                        return Err(self.redirect_without_secret(parts, issued.cookie));
                    }
                    admitted.cookie = Some(issued.cookie);
                    admitted.pass = Some(issued.viewer);
                    has_pass = true;
                }
                // A page still opens (it shows the prompt and the reason); a way out is refused.
                Some(Err(e)) if way != Way::Open || !is_page(parts) => return Err(e.into_response()),
                _ => {}
            }
        }
        // What a way out of a channel that is not public gives (to a pass holder, to the admin, to a
        // viewer the hook let in) must not be kept by a shared cache for others.
        let hooked = s.access.admission_hook.on_play && !s.access.admission_hook.url.is_empty();
        admitted.private = (vis.needs_pass() || hooked) && way != Way::Open;
        // The channel's admin (Basic credentials) may use every way out.
        if !has_pass && way != Way::Open && vis.needs_pass() && has_basic(parts) {
            match self.admin.is_admin(ip(), &parts.headers).await {
                Ok(true) => return Ok(admitted),
                Ok(false) => {}
                Err(e) => return Err(e.into_response()),
            }
        }
        match way {
            Way::Open => return Ok(admitted),
            Way::Status if vis.needs_pass() && !has_pass => {
                return Err(status_without_pass(self.online()));
            }
            Way::Out { .. } if vis.needs_pass() && !has_pass => {
                if is_page(parts) {
                    let mut resp = StatusCode::SEE_OTHER.into_response();
                    let page = if self.base.is_empty() { "/".to_string() } else { format!("{}/", self.base) };
                    if let Ok(v) = HeaderValue::from_str(&page) {
                        resp.headers_mut().insert(header::LOCATION, v);
                    }
                    return Err(resp);
                }
                return Err(needs_pass());
            }
            _ => {}
        }
        // The hook's say holds on every way out: the start of watching asks it (its answer cached for
        // `cacheSeconds`), every other way out (a variant playlist, a segment, a part, a replay...)
        // takes the last verdict for the same viewer (pass subject) and address, asking when there is
        // none (`Access::admit_way`).
        if let Way::Out { play } = way {
            let subject = admitted.pass.as_ref().map(|p: &ViewerPass| p.subject.as_str());
            let verdict =
                if play { self.admit_play(subject, ip(), ua).await } else { self.admit_way(subject, ip(), ua).await };
            verdict.map_err(IntoResponse::into_response)?;
        }
        Ok(admitted)
    }
}

/// Characters escaped in a pass carried in a query (a pass is base64url and dots: none in practice).
const QUERY: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The gate of a channel, for the router and its lanes.
pub struct ChannelGate(pub Arc<Access>, pub crate::http::gate::Rewrites);

impl ChannelGate {
    pub fn new(access: Arc<Access>) -> ChannelGate {
        ChannelGate(access, Default::default())
    }
}

impl Gate for ChannelGate {
    fn open(&self) -> bool {
        let s = self.0.settings.get();
        let a = &s.access;
        !a.visibility.needs_pass() && (a.admission_hook.url.is_empty() || !a.admission_hook.on_play)
    }

    fn admit<'a>(&'a self, parts: &'a Parts, peer: Option<SocketAddr>) -> GateFuture<'a> {
        Box::pin(self.0.admit_request(parts, peer))
    }

    fn rewrites(&self) -> Option<&crate::http::gate::Rewrites> {
        Some(&self.1)
    }

    fn guards(&self, method: &Method, path: &str) -> Guarded {
        match way(method, path, !self.0.is_channel()) {
            Way::Open => Guarded::No,
            Way::Status => Guarded::Pass,
            Way::Out { .. } => Guarded::PassAndHook,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ways_out_need_a_pass_and_the_rest_is_open() {
        let get = Method::GET;
        for open in ["/", "/admin/", "/api/admin/serverconfig", "/api/viewer/unlock", "/assets/x.js", "/whip", "/logo"]
        {
            assert_eq!(way(&get, open, false), Way::Open, "{open}");
        }
        assert_eq!(way(&get, "/c/music/hls/stream.m3u8", true), Way::Open, "a channel's own gate decides");
        assert_eq!(way(&get, "/c/music/hls/stream.m3u8", false), Way::Out { play: false });
        assert_eq!(way(&get, "/api/status", false), Way::Status);
        for out in
            ["/hls/0/stream.m3u8", "/hls/0/seg1.ts", "/thumbnail.jpg", "/api/chat", "/api/config", "/api/replays"]
        {
            assert_eq!(way(&get, out, false), Way::Out { play: false }, "{out}");
        }
        assert_eq!(way(&get, "/hls/stream.m3u8", false), Way::Out { play: true });
        assert_eq!(way(&get, "/ws", false), Way::Out { play: true });
        assert_eq!(way(&Method::POST, "/whep", false), Way::Out { play: true });
        for preflight in ["/whep", "/whep/abc", "/metrics/cmcd", "/api/config", "/hls/0/stream.m3u8"] {
            assert_eq!(way(&Method::OPTIONS, preflight, false), Way::Open, "a preflight of {preflight}");
        }
    }

    #[test]
    fn a_redeemed_secret_leaves_the_query() {
        assert_eq!(without("invite=abc&x=1", &["invite", "jwt"]), "x=1");
        assert_eq!(without("jwt=a.b.c", &["invite", "jwt"]), "");
        assert_eq!(query_param("a=1&pass=cp1.x%2Ey", "pass").unwrap(), "cp1.x.y");
    }
}
