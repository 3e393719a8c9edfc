//! The security headers of every answer castd serves, and the client address behind trusted proxies.
//!
//! Every answer (the router's through `conventions`, the fast lanes' through `lanes`) carries
//! `X-Content-Type-Options: nosniff` and `Referrer-Policy: strict-origin-when-cross-origin`: a browser
//! never guesses a type castd did not name (an upload served as an image cannot become a page), and
//! paths and query strings (access tokens, IndieAuth state) never leave castd in a `Referer`, while the
//! origin still does, as CDNs and object storage with hotlink rules expect (the browsers' default,
//! made explicit).
//!
//! Content-Security-Policy, decided per answer (`secure`), the first rule that applies:
//! 1. A handler that set its own policy keeps it: the web UI's pages (`Page::apply`, from `web`) and the
//!    server-rendered pages that declare their inline scripts by hash.
//! 2. Owner uploads served from castd's origin (`/logo`, `/favicon.ico`, `/public/*`, `/img/emoji/*`)
//!    get [`SANDBOX`], whatever their type: an uploaded SVG or HTML file opened in a tab runs no
//!    script and has no access to castd's origin (its cookies, storage, the admin's cached
//!    credentials).
//! 3. Any other HTML gets the page policy with framing denied (`Page::default()`): a page nobody
//!    declared is never frameable and runs only castd's own script files.
//! 4. Any other document type that can carry script (SVG, XML, XHTML) gets [`SANDBOX`].
//!
//! The page policy ([`PAGE_POLICY`]): script only from castd's own files (`'self'`: the built UI and
//! the server admin's custom JavaScript, served as the default channel's `/customjavascript`; a
//! channel's is always empty) and the inline scripts a page lists by
//! SHA-256 hash, never `'unsafe-inline'` or `eval` for script; workers from castd or `blob:` (hls.js
//! runs its transmuxer in a `blob:` worker); styles from castd, from `https:` (a custom CSS
//! `@import` of a web font, the server admin's only: a channel's CSS loads nothing from elsewhere) and
//! inline (custom CSS and appearance variables, Markdown with inline HTML, as Owncast allows them, a
//! channel's sanitised; styles run no script); images, media, fonts,
//! fetches and websockets from anywhere over http(s)/ws(s) (remote avatars, the object storage or CDN
//! that serves the segments, a chat websocket host override); media also from `blob:` (MSE); frames
//! (external actions) over http(s); no plugins (`object-src 'none'`); `<base>` and form targets only
//! castd (a page whose form ends at another site names it: `Page::form_target`). Framing: the admin
//! pages and the IndieAuth approval page deny it (`frame-ancestors 'none'` and `X-Frame-Options:
//! DENY`, against clickjacking the admin's buttons); the embeds and the viewer page may be framed by
//! anyone, as Owncast's are (the embeds exist for it).
//!
//! The client address (`client_ip_with`, behind `http::client_ip`): the right-most `X-Forwarded-For`
//! entry that is not one of the trusted proxies, i.e. the address the outermost trusted proxy saw;
//! see [`TrustedProxies`].

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};

use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use base64::Engine;
use sha2::{Digest, Sha256};

/// `Referrer-Policy` of every answer.
pub const REFERRER_POLICY: &str = "strict-origin-when-cross-origin";

/// The page policy with `$tail` (a `frame-ancestors` or nothing) at its end.
macro_rules! page_policy {
    ($tail:literal) => {
        concat!(
            "default-src 'self'; script-src 'self'; worker-src 'self' blob:; ",
            "style-src 'self' 'unsafe-inline' https:; img-src 'self' https: http: data: blob:; ",
            "media-src 'self' https: http: blob:; font-src 'self' https: data:; ",
            "connect-src 'self' https: http: wss: ws:; frame-src 'self' https: http:; ",
            "object-src 'none'; base-uri 'self'; form-action 'self'",
            $tail
        )
    };
}

/// The policy of castd's pages, without `frame-ancestors` (see the module doc).
pub const PAGE_POLICY: &str = page_policy!("");

/// [`PAGE_POLICY`] for a page nobody may frame.
const PAGE_POLICY_NOT_FRAMED: &str = page_policy!("; frame-ancestors 'none'");

/// The policy of owner uploads and other script-capable documents nobody declared: a sandbox (no
/// script, an opaque origin, no forms, popups or navigation of the top page); the file's own images,
/// media and inline styles still render.
pub const SANDBOX: &str =
    "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'";

/// Who may show a page in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Framing {
    /// Nobody (`frame-ancestors 'none'`, `X-Frame-Options: DENY`): the admin, the approval page and
    /// every page that does not say otherwise.
    #[default]
    Nobody,
    /// Any site (the embeds, the viewer page).
    Anyone,
}

/// The Content-Security-Policy of one page: the page policy, its framing, and the inline scripts it
/// runs, each allowed by the SHA-256 hash of its exact text.
#[derive(Debug, Clone, Default)]
pub struct Page {
    framing: Framing,
    script_hashes: Vec<String>,
    form_targets: Vec<String>,
}

impl Page {
    pub fn new(framing: Framing) -> Self {
        Self { framing, script_hashes: Vec::new(), form_targets: Vec::new() }
    }

    /// Let the page's forms end up at `url`'s origin besides castd: `form-action` also covers the
    /// redirects after a form is sent (the IndieAuth approval form ends at the client). An http(s)
    /// URL only; anything else adds nothing.
    pub fn form_target(mut self, url: &url::Url) -> Self {
        if matches!(url.scheme(), "http" | "https") && url.host().is_some() {
            self.form_targets.push(url.origin().ascii_serialization());
        }
        self
    }

    /// Allow the inline `<script>` whose text (between the tags) is exactly `text`.
    pub fn inline_script(mut self, text: &str) -> Self {
        self.script_hashes.push(hash_source(text));
        self
    }

    /// The header value.
    pub fn policy(&self) -> String {
        self.value().to_str().unwrap_or_default().to_string()
    }

    fn value(&self) -> HeaderValue {
        let denied = self.framing == Framing::Nobody;
        if self.script_hashes.is_empty() && self.form_targets.is_empty() {
            // The web UI's pages: no work per request.
            return HeaderValue::from_static(if denied { PAGE_POLICY_NOT_FRAMED } else { PAGE_POLICY });
        }
        let mut p = String::from(PAGE_POLICY);
        if !self.script_hashes.is_empty() {
            let scripts = format!("script-src 'self' {}", self.script_hashes.join(" "));
            p = p.replacen("script-src 'self'", &scripts, 1);
        }
        if !self.form_targets.is_empty() {
            let forms = format!("form-action 'self' {}", self.form_targets.join(" "));
            p = p.replacen("form-action 'self'", &forms, 1);
        }
        if denied {
            p.push_str("; frame-ancestors 'none'");
        }
        // Hash sources and serialized origins are header-safe; the fallback never applies.
        HeaderValue::from_str(&p).unwrap_or(HeaderValue::from_static(PAGE_POLICY_NOT_FRAMED))
    }

    /// Set the policy (and `X-Frame-Options: DENY` when nobody may frame the page) on `resp`.
    pub fn apply(&self, resp: &mut Response) {
        let h = resp.headers_mut();
        h.insert(header::CONTENT_SECURITY_POLICY, self.value());
        if self.framing == Framing::Nobody {
            h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        }
    }
}

/// `'sha256-<base64>'` of a script's text, the CSP hash source that allows it inline.
pub fn hash_source(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

/// What a request's path says about its answer's policy, found before the request is handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A file the owner uploaded (logo, favicon, public files, emoji).
    Upload,
    Other,
}

impl PathKind {
    pub fn of(path: &str) -> Self {
        let upload = matches!(path, "/logo" | "/logo/external" | "/favicon.ico")
            || path.starts_with("/public/")
            || path.starts_with("/img/emoji/");
        if upload {
            PathKind::Upload
        } else {
            PathKind::Other
        }
    }
}

/// Add the security headers to an answer (see the module doc for the rules).
pub fn secure(kind: PathKind, resp: &mut Response) {
    let h = resp.headers_mut();
    h.entry(header::X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
    h.entry(header::REFERRER_POLICY).or_insert(HeaderValue::from_static(REFERRER_POLICY));
    if h.contains_key(header::CONTENT_SECURITY_POLICY) {
        return;
    }
    if kind == PathKind::Upload {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(SANDBOX));
        return;
    }
    let ctype = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = ctype.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("text/html") {
        Page::default().apply(resp);
    } else if scriptable(essence) {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(SANDBOX));
    }
}

/// The headers every answer carries, for answers that bypass the router (the fast lanes).
pub fn basic(h: &mut HeaderMap) {
    h.entry(header::X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
    h.entry(header::REFERRER_POLICY).or_insert(HeaderValue::from_static(REFERRER_POLICY));
}

/// Document types besides HTML in which a browser runs script.
fn scriptable(essence: &str) -> bool {
    let is = |t: &str| essence.eq_ignore_ascii_case(t);
    is("application/xml") || is("text/xml") || is("text/xsl") || {
        // image/svg+xml, application/xhtml+xml and every other XML document type.
        let n = essence.len();
        n > 4 && essence.is_char_boundary(n - 4) && essence[n - 4..].eq_ignore_ascii_case("+xml")
    }
}

/// How far castd believes `X-Forwarded-For` (`--trusted-proxies`).
///
/// The client address is the entry the outermost trusted proxy wrote: proxies *append* the address
/// they saw (nginx `$proxy_add_x_forwarded_for`, Caddy, Traefik, HAProxy `option forwardfor`), so
/// everything left of that entry came from the client and is never read. `X-Real-IP` and `Forwarded`
/// are not read: a proxy that does not set them passes a client's own copy through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrustedProxies {
    /// The default: one proxy when the connection comes from this machine (loopback), none otherwise.
    /// A reverse proxy on the same box works without configuration; a client connecting from
    /// anywhere else cannot name its address.
    #[default]
    Loopback,
    /// Exactly this many proxies stand in front of castd, whatever their addresses (0: never read
    /// `X-Forwarded-For`). They must be the only way in: a client that reaches castd directly with
    /// this set chooses its address.
    Hops(u8),
}

/// Most proxy hops `--trusted-proxies` takes.
pub const MAX_TRUSTED_HOPS: u8 = 16;

/// The process's setting: `u8::MAX` is `Loopback`, anything else a number of hops. One web server
/// per process; `main` sets it once from the command line before serving.
static TRUSTED: AtomicU8 = AtomicU8::new(u8::MAX);

/// Set how far `X-Forwarded-For` is believed from now on (`--trusted-proxies`).
pub fn set_trusted_proxies(t: TrustedProxies) {
    let v = match t {
        TrustedProxies::Loopback => u8::MAX,
        TrustedProxies::Hops(n) => n.min(MAX_TRUSTED_HOPS),
    };
    TRUSTED.store(v, Ordering::Relaxed);
}

/// The current setting.
pub fn trusted_proxies() -> TrustedProxies {
    match TRUSTED.load(Ordering::Relaxed) {
        u8::MAX => TrustedProxies::Loopback,
        n => TrustedProxies::Hops(n),
    }
}

/// The `X-Castd-Edge` value this process's cluster edges send (a cluster origin only; `cluster` sets it).
static EDGE_MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The header an edge of a cluster marks the requests it forwards with (see `hls::FROM_EDGE_HEADER`).
pub const EDGE_MARK_HEADER: &str = "x-castd-edge";

/// On a cluster origin: the mark its edges send. A request that carries it came through an edge, which
/// wrote the client's address as the one `X-Forwarded-For` entry: one more trusted hop, wherever the
/// edge is (a client cannot send the mark: it is derived from the cluster secret).
pub fn set_edge_mark(mark: &str) {
    let _ = EDGE_MARK.set(mark.to_string());
}

/// Whether `headers` carry this origin's edge mark (compared in constant time).
fn from_edge(headers: &HeaderMap) -> bool {
    let (Some(mark), Some(given)) = (EDGE_MARK.get(), headers.get(EDGE_MARK_HEADER)) else {
        return false;
    };
    crate::password::same_secret(given.as_bytes(), mark.as_bytes())
}

/// The client address of a request from `peer` with `headers`, believing `trusted` proxies: the
/// `hops`-th `X-Forwarded-For` entry from the right (all header lines, in order, as one list), or the
/// left-most when there are fewer; the peer when no proxy is trusted, no entry is there, or the
/// entry a trusted proxy wrote is not an address. IPv4-mapped IPv6 addresses are given as IPv4.
pub fn client_ip_with(peer: SocketAddr, headers: &HeaderMap, trusted: TrustedProxies) -> IpAddr {
    let direct = peer.ip().to_canonical();
    let hops = match trusted {
        TrustedProxies::Loopback if direct.is_loopback() => 1,
        TrustedProxies::Loopback => 0,
        TrustedProxies::Hops(n) => usize::from(n),
    } + usize::from(from_edge(headers));
    if hops == 0 {
        return direct;
    }
    let mut entries = headers
        .get_all("x-forwarded-for")
        .iter()
        .rev()
        .flat_map(|v| v.to_str().unwrap_or_default().rsplit(','))
        .map(str::trim)
        .filter(|e| !e.is_empty());
    let mut chosen = None;
    for _ in 0..hops {
        match entries.next() {
            Some(e) => chosen = Some(e),
            None => break,
        }
    }
    chosen.and_then(parse_entry).map_or(direct, |ip| ip.to_canonical())
}

/// An `X-Forwarded-For` entry: an address, possibly with a port (`203.0.113.9:41234`,
/// `[2001:db8::1]:443`) or in brackets.
fn parse_entry(e: &str) -> Option<IpAddr> {
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = e.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    e.strip_prefix('[').and_then(|x| x.strip_suffix(']')).and_then(|x| x.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    const LOCAL: &str = "127.0.0.1:5000";
    const REMOTE: &str = "198.51.100.7:5000";

    fn ip(peer: &str, h: &HeaderMap, t: TrustedProxies) -> String {
        client_ip_with(peer.parse().unwrap(), h, t).to_string()
    }

    #[test]
    fn the_default_believes_one_local_proxy_and_reads_its_entry() {
        let t = TrustedProxies::Loopback;
        // An appending proxy on this machine: the client's own entry is left of the proxy's.
        let h = xff(&["6.6.6.6, 203.0.113.9"]);
        assert_eq!(ip(LOCAL, &h, t), "203.0.113.9");
        assert_eq!(ip(LOCAL, &xff(&["6.6.6.6", "203.0.113.9"]), t), "203.0.113.9", "two header lines are one list");
        assert_eq!(ip(LOCAL, &xff(&["203.0.113.9"]), t), "203.0.113.9");
        // Anyone else cannot name an address.
        assert_eq!(ip(REMOTE, &h, t), "198.51.100.7");
        assert_eq!(ip(LOCAL, &HeaderMap::new(), t), "127.0.0.1");
        assert_eq!(ip("[::ffff:127.0.0.1]:1", &HeaderMap::new(), t), "127.0.0.1");
        assert_eq!(ip("[::1]:1", &xff(&["2001:db8::5"]), t), "2001:db8::5");
    }

    #[test]
    fn a_number_of_hops_counts_from_the_right_whatever_the_peer() {
        let h = xff(&["6.6.6.6, 203.0.113.9, 10.0.0.2"]);
        assert_eq!(ip(REMOTE, &h, TrustedProxies::Hops(0)), "198.51.100.7");
        assert_eq!(ip(LOCAL, &h, TrustedProxies::Hops(0)), "127.0.0.1", "0: never read");
        assert_eq!(ip(REMOTE, &h, TrustedProxies::Hops(1)), "10.0.0.2");
        assert_eq!(ip(REMOTE, &h, TrustedProxies::Hops(2)), "203.0.113.9");
        // Fewer entries than hops: the left-most (every entry was written by a trusted proxy).
        assert_eq!(ip(REMOTE, &xff(&["203.0.113.9"]), TrustedProxies::Hops(2)), "203.0.113.9");
        assert_eq!(ip(REMOTE, &HeaderMap::new(), TrustedProxies::Hops(2)), "198.51.100.7");
    }

    #[test]
    fn entries_with_ports_and_brackets_parse_and_garbage_falls_back_to_the_peer() {
        let t = TrustedProxies::Loopback;
        assert_eq!(ip(LOCAL, &xff(&["203.0.113.9:41234"]), t), "203.0.113.9");
        assert_eq!(ip(LOCAL, &xff(&["[2001:db8::1]:443"]), t), "2001:db8::1");
        assert_eq!(ip(LOCAL, &xff(&["[2001:db8::1]"]), t), "2001:db8::1");
        assert_eq!(ip(LOCAL, &xff(&["::ffff:203.0.113.9"]), t), "203.0.113.9");
        assert_eq!(ip(LOCAL, &xff(&["203.0.113.9, unknown"]), t), "127.0.0.1");
        assert_eq!(ip(LOCAL, &xff(&["203.0.113.9,  ,"]), t), "203.0.113.9", "empty entries are skipped");
    }

    #[test]
    fn the_default_is_one_proxy_on_loopback() {
        // The process-wide setting `http::client_ip` reads; `main` sets it from --trusted-proxies.
        assert_eq!(trusted_proxies(), TrustedProxies::Loopback);
    }

    fn answer(ctype: &str) -> Response {
        ([(header::CONTENT_TYPE, ctype.to_string())], "x").into_response()
    }

    #[test]
    fn policies_by_path_and_type() {
        let csp =
            |r: &Response| r.headers().get(header::CONTENT_SECURITY_POLICY).map(|v| v.to_str().unwrap().to_string());
        // Uploads: the sandbox whatever the type.
        for ctype in ["image/svg+xml", "text/html", "image/png"] {
            let mut r = answer(ctype);
            secure(PathKind::of("/public/x"), &mut r);
            assert_eq!(csp(&r).as_deref(), Some(SANDBOX), "{ctype}");
            assert_eq!(r.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        for path in ["/logo", "/logo/external", "/favicon.ico", "/img/emoji/a.svg", "/public/a/b.html"] {
            assert_eq!(PathKind::of(path), PathKind::Upload, "{path}");
        }
        for path in ["/", "/logos", "/publicx", "/api/emoji", "/img/platformlogos/x.svg"] {
            assert_eq!(PathKind::of(path), PathKind::Other, "{path}");
        }
        // Undeclared HTML: the page policy, not frameable.
        let mut r = answer("text/html; charset=utf-8");
        secure(PathKind::Other, &mut r);
        let p = csp(&r).unwrap();
        assert!(
            p.starts_with("default-src 'self'; script-src 'self';") && p.ends_with("frame-ancestors 'none'"),
            "{p}"
        );
        assert_eq!(r.headers()[header::X_FRAME_OPTIONS], "DENY");
        // Other scriptable documents: the sandbox; JSON, media and scripts: no policy.
        for ctype in ["image/svg+xml", "Image/SVG+XML; charset=utf-8", "application/xhtml+xml", "text/xml"] {
            let mut r = answer(ctype);
            secure(PathKind::Other, &mut r);
            assert_eq!(csp(&r).as_deref(), Some(SANDBOX), "{ctype}");
        }
        let mut r = answer("TEXT/HTML");
        secure(PathKind::Other, &mut r);
        assert!(csp(&r).unwrap().ends_with("frame-ancestors 'none'"));
        for ctype in ["application/json", "video/mp2t", "text/javascript", "application/activity+json", "image/png"] {
            let mut r = answer(ctype);
            secure(PathKind::Other, &mut r);
            assert_eq!(csp(&r), None, "{ctype}");
            assert_eq!(r.headers()[header::REFERRER_POLICY], REFERRER_POLICY);
        }
        // A policy the handler set is kept.
        let mut r = answer("text/html");
        Page::new(Framing::Anyone).apply(&mut r);
        secure(PathKind::Other, &mut r);
        assert!(!csp(&r).unwrap().contains("frame-ancestors"));
        assert!(!r.headers().contains_key(header::X_FRAME_OPTIONS));
    }

    #[test]
    fn inline_scripts_are_allowed_by_their_hash() {
        let p = Page::new(Framing::Nobody).inline_script("alert(1)").policy();
        // echo -n 'alert(1)' | openssl dgst -sha256 -binary | base64
        assert!(p.contains("script-src 'self' 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI=';"), "{p}");
        let script = |p: &str| p.split(';').find(|d| d.trim().starts_with("script-src")).unwrap().to_string();
        for p in [p.as_str(), PAGE_POLICY, SANDBOX] {
            assert!(!p.contains("unsafe-eval"), "{p}");
        }
        assert_eq!(script(PAGE_POLICY).trim(), "script-src 'self'");
    }

    #[test]
    fn form_targets_add_an_origin_and_nothing_else() {
        let to = |u: &str| Page::default().form_target(&url::Url::parse(u).unwrap()).policy();
        assert!(to("https://app.example:8443/cb?x=1").contains("form-action 'self' https://app.example:8443;"));
        for other in ["javascript:alert(1)", "data:text/html,x", "com.example.app:/cb"] {
            assert!(to(other).contains("form-action 'self';"), "{other}");
        }
    }

    #[test]
    fn an_edges_mark_is_one_more_trusted_hop_and_a_forged_one_is_none() {
        set_edge_mark("the-mark");
        let peer: SocketAddr = "198.51.100.7:4000".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        assert_eq!(
            client_ip_with(peer, &h, TrustedProxies::Loopback),
            peer.ip(),
            "no mark: a remote peer is the client"
        );
        h.insert(EDGE_MARK_HEADER, HeaderValue::from_static("forged"));
        assert_eq!(client_ip_with(peer, &h, TrustedProxies::Loopback), peer.ip(), "a forged mark counts for nothing");
        h.insert(EDGE_MARK_HEADER, HeaderValue::from_static("the-mark"));
        assert_eq!(client_ip_with(peer, &h, TrustedProxies::Loopback), "203.0.113.9".parse::<IpAddr>().unwrap());
        // An edge behind the origin's own nginx: nginx appended the edge's address.
        h.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9, 198.51.100.7"));
        let local: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(client_ip_with(local, &h, TrustedProxies::Loopback), "203.0.113.9".parse::<IpAddr>().unwrap());
    }
}
