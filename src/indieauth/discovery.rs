//! Fetching other people's pages safely, and finding IndieAuth endpoints on them.
//!
//! [`Fetcher`] is the only way this feature talks to the outside. It is castd's one guarded client
//! (`crate::outbound`): every URL it is given (and every redirect it follows, at most
//! [`MAX_REDIRECTS`]) must be `http`/`https` on a public address, checked again after name resolution;
//! loopback is refused too unless the development switch `CASTD_INDIEAUTH_ALLOW_LOOPBACK` is on (the
//! tests run two daemons on 127.0.0.1). Each request has a timeout, a body is read to at most
//! [`MAX_BODY`] bytes, and each remote host gets a limited number of requests.
//!
//! Discovery (IndieAuth §4.1): the profile page's HTTP `Link` headers, then its HTML `<link>`
//! elements; `indieauth-metadata` (a JSON document naming `authorization_endpoint` and `issuer`) is
//! preferred over a bare `authorization_endpoint`. Relative links resolve against the final URL.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::header::{ACCEPT, LINK};
use reqwest::Method;
use url::Url;

use crate::outbound::{Outbound, OutboundConfig, OutboundError};

use super::Refused;

/// Redirects followed on one fetch, each re-checked.
pub const MAX_REDIRECTS: usize = crate::outbound::MAX_REDIRECTS;
/// Most bytes read of a fetched page or answer (the `<head>` is what matters).
pub const MAX_BODY: usize = 512 * 1024;
/// Time limit of one request (connect + answer).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

pub use crate::outbound::{address_allowed, Fetched};

/// The guarded HTTP client (see the module doc): castd's one guarded client ([`Outbound`]), its
/// answers cut at [`MAX_BODY`], its refusals put in IndieAuth's terms.
#[derive(Clone)]
pub struct Fetcher {
    outbound: Outbound,
}

impl Fetcher {
    pub fn new(allow_loopback: bool) -> Result<Self, OutboundError> {
        let config = OutboundConfig {
            timeout: FETCH_TIMEOUT,
            max_body: MAX_BODY,
            truncate: true,
            ..OutboundConfig::new("IndieAuth", allow_loopback)
        };
        Ok(Self { outbound: Outbound::new(config)? })
    }

    /// Refuse a URL that is not http(s) or names a disallowed address (names are resolved and
    /// checked here for a clear message; the resolver enforces it again at connect time). The URL is
    /// the one the user entered (or its endpoints), so the message may name it.
    pub async fn check_url(&self, url: &Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused::new("invalid_request", format!("{url} is not an http or https URL")));
        }
        let Some(host) = url.host() else {
            return Err(Refused::new("invalid_request", format!("{url} has no host")));
        };
        let private = |what: &str| {
            Refused::new("forbidden_address", format!("{what} is a private or local address; castd will not fetch it"))
        };
        let allow_loopback = self.outbound.config().allow_loopback;
        match host {
            url::Host::Ipv4(ip) if !address_allowed(IpAddr::V4(ip), allow_loopback) => Err(private(&ip.to_string())),
            url::Host::Ipv6(ip) if !address_allowed(IpAddr::V6(ip), allow_loopback) => Err(private(&ip.to_string())),
            url::Host::Domain(name) => {
                let port = url.port_or_known_default().unwrap_or(80);
                let found: Vec<SocketAddr> = tokio::time::timeout(FETCH_TIMEOUT, tokio::net::lookup_host((name, port)))
                    .await
                    .map_err(|_| Refused::new("discovery_failed", format!("looking up {name} timed out")))?
                    .map_err(|e| Refused::new("discovery_failed", format!("cannot resolve {name}: {e}")))?
                    .collect();
                if found.iter().any(|a| address_allowed(a.ip(), allow_loopback)) {
                    Ok(())
                } else {
                    Err(private(&format!("{name} ({})", found.first().map(|a| a.ip().to_string()).unwrap_or_default())))
                }
            }
            _ => Ok(()),
        }
    }

    /// GET `url` (following at most `MAX_REDIRECTS` checked redirects).
    pub async fn get(&self, url: Url, accept: &str) -> Result<Fetched, Refused> {
        self.check_url(&url).await?;
        let shown = url.clone();
        self.outbound.get(url, accept, MAX_REDIRECTS).await.map_err(|e| fetch_failed("discovery_failed", &shown, &e))
    }

    /// POST a form to `url` (no redirects followed) and read the answer.
    pub async fn post_form(&self, url: Url, form: &[(&str, &str)]) -> Result<Fetched, Refused> {
        self.check_url(&url).await?;
        let req = self.outbound.request(Method::POST, url.clone()).header(ACCEPT, "application/json").form(form);
        self.outbound.send(req).await.map_err(|e| fetch_failed("server_error", &url, &e))
    }
}

/// A failed fetch of a URL the user gave: the detail goes to the log, the user learns which URL failed.
fn fetch_failed(code: &'static str, url: &Url, e: &OutboundError) -> Refused {
    tracing::debug!("IndieAuth: {e}");
    match e {
        OutboundError::NotAllowed(_) => {
            Refused::new("forbidden_address", format!("{url} is a private or local address; castd will not fetch it"))
        }
        other => Refused::new(code, format!("cannot fetch {url}: {}", other.public_message())),
    }
}

/// One link: its target (unresolved) and its space-separated `rel` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub href: String,
    pub rels: Vec<String>,
}

/// Parse HTTP `Link` header values (RFC 8288): `<uri>; rel="a b", <uri2>; rel=c`.
pub fn parse_link_header(value: &str) -> Vec<Link> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find('<') {
        let Some(end) = rest[start..].find('>') else { break };
        let href = rest[start + 1..start + end].trim().to_string();
        rest = &rest[start + end + 1..];
        // The parameters run to the next comma outside quotes.
        let mut in_quotes = false;
        let mut stop = rest.len();
        for (i, ch) in rest.char_indices() {
            match ch {
                '"' => in_quotes = !in_quotes,
                ',' if !in_quotes => {
                    stop = i;
                    break;
                }
                _ => {}
            }
        }
        let params = &rest[..stop];
        rest = &rest[stop..];
        let mut rels = Vec::new();
        for param in params.split(';') {
            let Some((k, v)) = param.split_once('=') else { continue };
            if k.trim().eq_ignore_ascii_case("rel") {
                rels.extend(v.trim().trim_matches('"').split_ascii_whitespace().map(str::to_ascii_lowercase));
            }
        }
        out.push(Link { href, rels });
    }
    out
}

/// The `<link>` elements of an HTML document (a tolerant scan, not a full parser: quoted and
/// unquoted attributes, any case, entities `&amp;` in `href`).
pub fn parse_html_links(html: &str) -> Vec<Link> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(found) = lower[pos..].find("<link") {
        let start = pos + found + 5;
        let Some(len) = lower[start..].find('>') else { break };
        let tag = &html[start..start + len];
        pos = start + len;
        let attrs = parse_attributes(tag);
        let get = |name: &str| attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        if let (Some(rel), Some(href)) = (get("rel"), get("href")) {
            let rels = rel.split_ascii_whitespace().map(str::to_ascii_lowercase).collect();
            out.push(Link { href: href.replace("&amp;", "&"), rels });
        }
    }
    out
}

fn parse_attributes(tag: &str) -> Vec<(String, String)> {
    let bytes = tag.as_bytes();
    let mut attrs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        let name_start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'=' && bytes[i] != b'/' {
            i += 1;
        }
        let name = tag[name_start..i].to_ascii_lowercase();
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
                let quote = bytes[i];
                let v_start = i + 1;
                let v_end = tag[v_start..].bytes().position(|b| b == quote).map_or(tag.len(), |p| v_start + p);
                value = tag[v_start..v_end].to_string();
                i = v_end + 1;
            } else {
                let v_start = i;
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = tag[v_start..i].to_string();
            }
        }
        if !name.is_empty() {
            attrs.push((name, value));
        }
        if i == name_start {
            i += 1;
        }
    }
    attrs
}

/// Every link of a fetched page: `Link` headers first, then the HTML's `<link>` elements.
pub fn page_links(page: &Fetched) -> Vec<Link> {
    let mut links: Vec<Link> =
        page.headers.get_all(LINK).iter().filter_map(|v| v.to_str().ok()).flat_map(parse_link_header).collect();
    let is_html = page
        .headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|t| t.to_ascii_lowercase().contains("html"));
    if is_html {
        links.extend(parse_html_links(&String::from_utf8_lossy(&page.body)));
    }
    links
}

/// The first link with `rel`, resolved against `base`.
pub fn find_rel(links: &[Link], rel: &str, base: &Url) -> Option<Url> {
    links.iter().filter(|l| l.rels.iter().any(|r| r == rel)).find_map(|l| base.join(&l.href).ok())
}

/// What discovery found on a profile page.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub authorization: Url,
    /// The metadata's `issuer`, when the server published metadata.
    pub issuer: Option<String>,
}

/// Find the authorization endpoint of `profile` (see the module doc).
pub async fn discover(fetcher: &Fetcher, profile: &Url) -> Result<Endpoints, Refused> {
    let page = fetcher.get(profile.clone(), "text/html, application/xhtml+xml;q=0.9, */*;q=0.1").await?;
    if !(200..300).contains(&page.status) {
        return Err(Refused::new("discovery_failed", format!("{} answered HTTP {}", page.url, page.status)));
    }
    let links = page_links(&page);
    if let Some(meta_url) = find_rel(&links, "indieauth-metadata", &page.url) {
        let meta = fetcher.get(meta_url.clone(), "application/json").await?;
        let doc: serde_json::Value = serde_json::from_slice(&meta.body).map_err(|e| {
            Refused::new("discovery_failed", format!("the IndieAuth metadata at {meta_url} is not JSON: {e}"))
        })?;
        let endpoint =
            doc.get("authorization_endpoint").and_then(|v| v.as_str()).and_then(|s| meta.url.join(s).ok()).ok_or_else(
                || {
                    Refused::new(
                        "discovery_failed",
                        format!("the IndieAuth metadata at {meta_url} names no authorization_endpoint"),
                    )
                },
            )?;
        fetcher.check_url(&endpoint).await?;
        let issuer = doc.get("issuer").and_then(|v| v.as_str()).map(str::to_string);
        return Ok(Endpoints { authorization: endpoint, issuer });
    }
    let endpoint = find_rel(&links, "authorization_endpoint", &page.url).ok_or_else(|| {
        Refused::new(
            "discovery_failed",
            format!("{} publishes no IndieAuth authorization endpoint (no indieauth-metadata or authorization_endpoint link)", page.url),
        )
    })?;
    fetcher.check_url(&endpoint).await?;
    Ok(Endpoints { authorization: endpoint, issuer: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let no = |s: &str| assert!(!address_allowed(s.parse().unwrap(), false), "{s} should be refused");
        let yes = |s: &str| assert!(address_allowed(s.parse().unwrap(), false), "{s} should be allowed");
        for a in ["10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "127.0.0.1", "0.0.0.0", "100.64.0.1"] {
            no(a);
        }
        for a in ["::1", "fd00::1", "fe80::1", "::", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "ff02::1"] {
            no(a);
        }
        for a in ["93.184.216.34", "2606:2800:220:1::1", "::ffff:93.184.216.34", "172.32.0.1"] {
            yes(a);
        }
        assert!(address_allowed("127.0.0.1".parse().unwrap(), true));
        assert!(address_allowed("::1".parse().unwrap(), true));
        assert!(!address_allowed("10.0.0.1".parse().unwrap(), true));
    }

    #[test]
    fn link_headers() {
        let links = parse_link_header(
            r#"</auth>; rel="authorization_endpoint", <https://x.example/meta?a=1,2>; rel="indieauth-metadata other""#,
        );
        assert_eq!(links.len(), 2);
        assert_eq!(links[0], Link { href: "/auth".into(), rels: vec!["authorization_endpoint".into()] });
        assert_eq!(links[1].href, "https://x.example/meta?a=1,2");
        assert_eq!(links[1].rels, vec!["indieauth-metadata", "other"]);
        assert_eq!(parse_link_header("<a>; rel=Me").first().map(|l| l.rels.clone()), Some(vec!["me".to_string()]));
        assert!(parse_link_header("garbage").is_empty());
    }

    #[test]
    fn html_links() {
        let html = r#"<html><head><LINK REL="stylesheet" href=/s.css>
            <link href='https://a.example/auth?x=1&amp;y=2' rel="authorization_endpoint">
            <link rel=redirect_uri href=/cb/>
            <link rel="icon">"#;
        let links = parse_html_links(html);
        assert_eq!(links.len(), 3);
        assert_eq!(links[1].href, "https://a.example/auth?x=1&y=2");
        assert_eq!(links[2], Link { href: "/cb/".into(), rels: vec!["redirect_uri".into()] });
        let base = Url::parse("https://me.example/page").unwrap();
        assert_eq!(find_rel(&links, "redirect_uri", &base).unwrap().as_str(), "https://me.example/cb/");
        assert!(parse_html_links("<link rel=\"x\" href=\"unterminated").is_empty());
    }
}
