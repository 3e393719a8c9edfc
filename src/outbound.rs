//! The one guarded HTTP client for every fetch castd makes on behalf of someone who is not the admin:
//! ActivityPub (actors, keys, deliveries, remote follow, Fediverse sign-in), browser push endpoints and
//! IndieAuth discovery. The URLs admins set (webhooks, the admission hook, the JWKS URL, Discord,
//! simulcast targets) go by their [`Reach`]: the server admin's own (the default channel's) anywhere,
//! as Owncast allows; a channel admin's (a tenant's) only to public addresses, unless the server
//! admin's switch ([`PrivateTargets`], the `allowPrivateTargets` setting) lets them reach loopback
//! and private ranges too ([`Reach::client`], [`Reach::check_url`], [`Reach::resolve`]). Link-local
//! (cloud metadata at 169.254.169.254), unspecified, multicast and reserved ranges stay refused.
//!
//! What [`Outbound`] guarantees for every request it sends:
//! - **Only `http`/`https` on public addresses.** Literal addresses are checked before sending; host
//!   names resolve through a guarded resolver that hands the connection only public addresses, so a
//!   name cannot be re-pointed at an internal address between a check and the connection (DNS
//!   rebinding). Refused: loopback (unless the instance's development switch allows it: the tests run
//!   their peers on 127.0.0.1), private (RFC 1918), shared (CGNAT), link-local, unique-local,
//!   unspecified, multicast, broadcast, documentation and reserved ranges, and IPv6 forms that embed
//!   such an IPv4 address (mapped, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`). No proxy from the
//!   environment is used (a proxy would resolve names for us). Redirects are followed only by
//!   [`Outbound::get`], each one re-checked.
//! - **Bounded**: a timeout per request, and at most the instance's `max_body` bytes of any answer
//!   (beyond that the answer is an error, or cut with [`Fetched::truncated`] set, by the instance's
//!   setting).
//! - **Per remote host**: at most `per_host_concurrency` requests in flight (a further one waits up to
//!   the timeout for a place) and a token bucket of `per_host_burst` requests refilled every
//!   `per_host_every`; beyond it the request is refused at once ([`OutboundError::HostBusy`]) and
//!   nothing is sent.
//! - **Generic errors back**: [`OutboundError::public_message`] is what a caller may hand to whoever
//!   asked (the same sentence whatever went wrong, so the answer reveals nothing of the network castd
//!   sits on); the `Display` text carries the detail for the log.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use reqwest::header::{HeaderMap, ACCEPT, LOCATION};
use reqwest::Method;
use tokio::sync::Semaphore;
use url::Url;

/// Redirects [`Outbound::get`] follows at most, each re-checked.
pub const MAX_REDIRECTS: usize = 5;
/// Remote hosts whose limits are tracked at most (idle ones are forgotten first).
const MAX_HOSTS: usize = 4096;

/// What an [`Outbound`] allows; every field has a documented default ([`OutboundConfig::new`]).
#[derive(Debug, Clone)]
pub struct OutboundConfig {
    /// Who is fetching, for the `User-Agent` (`castd/<version> (<purpose>)`) and the logs.
    pub purpose: &'static str,
    /// Development switch: loopback addresses may be fetched (tests run peers on 127.0.0.1). Every
    /// other non-public range stays refused.
    pub allow_loopback: bool,
    /// Time limit of one request, connection included (default 10 s).
    pub timeout: Duration,
    /// Most bytes read of an answer (default 1 MiB).
    pub max_body: usize,
    /// Cut an answer at `max_body` (true) or refuse it (false, the default).
    pub truncate: bool,
    /// Requests in flight to one host at most (default 4).
    pub per_host_concurrency: usize,
    /// Requests to one host in a burst (default 30) ...
    pub per_host_burst: u32,
    /// ... and one more allowed every this long (default 100 ms: 10 a second sustained).
    pub per_host_every: Duration,
    /// The server admin's switch, read at every request: while it is on, loopback and private
    /// addresses may be fetched too ([`private_allowed`]). None: only `allow_loopback` (the default).
    pub private: Option<PrivateTargets>,
}

impl OutboundConfig {
    pub fn new(purpose: &'static str, allow_loopback: bool) -> OutboundConfig {
        OutboundConfig {
            purpose,
            allow_loopback,
            timeout: Duration::from_secs(10),
            max_body: 1024 * 1024,
            truncate: false,
            per_host_concurrency: 4,
            per_host_burst: 30,
            per_host_every: Duration::from_millis(100),
            private: None,
        }
    }
}

/// Why an outbound request did not give an answer. `Display` is the detail for the log; tell the
/// requester only [`OutboundError::public_message`].
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// The URL is not one castd fetches (scheme, or a non-public address).
    #[error("refused to fetch {0}")]
    NotAllowed(String),
    /// The remote host already has as many requests as castd sends it.
    #[error("too many requests to {0} at the moment")]
    HostBusy(String),
    /// The answer was larger than the limit.
    #[error("the answer from {0} is too large")]
    TooLarge(String),
    /// Resolving, connecting, sending or reading failed.
    #[error("fetching {0} failed: {1}")]
    Failed(String, String),
}

impl OutboundError {
    /// The one sentence a requester is told, whatever went wrong.
    pub fn public_message(&self) -> &'static str {
        match self {
            OutboundError::HostBusy(_) => "the remote server is busy; try again later",
            _ => "the remote server could not be reached or gave no usable answer",
        }
    }
}

/// A fetched answer: final URL, status, headers and at most `max_body` bytes of body.
#[derive(Debug)]
pub struct Fetched {
    pub url: Url,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// The body was cut at `max_body` (only with `truncate`).
    pub truncated: bool,
}

impl Fetched {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Whether an address may be fetched: public addresses only, loopback when `allow_loopback`.
pub fn address_allowed(ip: IpAddr, allow_loopback: bool) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4_allowed(v4, allow_loopback),
        IpAddr::V6(v6) => v6_allowed(v6, allow_loopback),
    }
}

fn v4_allowed(ip: Ipv4Addr, allow_loopback: bool) -> bool {
    let o = ip.octets();
    if ip.is_loopback() {
        return allow_loopback;
    }
    !(ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10, shared address space
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24, IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15, benchmarking
        || o[0] >= 240)
}

fn v6_allowed(ip: Ipv6Addr, allow_loopback: bool) -> bool {
    if ip.is_loopback() {
        return allow_loopback;
    }
    let s = ip.segments();
    // IPv4 embedded by NAT64 (64:ff9b::/96) or 6to4 (2002::/16): judge the IPv4 address.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return v4_allowed(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8), false);
    }
    if s[0] == 0x2002 {
        return v4_allowed(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8), false);
    }
    !(ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // fc00::/7, unique local
        || (s[0] & 0xffc0) == 0xfe80 // fe80::/10, link local
        || (s[0] & 0xffc0) == 0xfec0 // fec0::/10, site local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || s[0..6] == [0, 0, 0, 0, 0, 0]) // ::/96, IPv4-compatible (deprecated)
}

/// The key of a host's limits: its name, lower case, without a trailing dot.
pub fn host_key(url: &Url) -> String {
    url.host_str().unwrap_or_default().trim_end_matches('.').to_ascii_lowercase()
}

/// Whether an address may be fetched while the server admin allows private targets: what
/// [`address_allowed`] allows with loopback, and the private ranges (RFC 1918 `10/8`, `172.16/12`,
/// `192.168/16`, shared `100.64/10`, unique-local `fc00::/7`, and their IPv4-mapped forms). Link-local,
/// unspecified, multicast, broadcast, documentation and reserved addresses stay refused.
pub fn private_allowed(ip: IpAddr) -> bool {
    if address_allowed(ip, true) {
        return true;
    }
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}

/// The server admin's switch that lets channels' URLs reach loopback and private addresses
/// (`allowPrivateTargets`), read each time an address is judged, so a change applies to the next
/// request without rebuilding any client. Cheap to clone.
#[derive(Clone)]
pub struct PrivateTargets(Arc<dyn Fn() -> bool + Send + Sync>);

impl PrivateTargets {
    /// The switch as `read` says now (e.g. the server settings' `allowPrivateTargets`).
    pub fn new(read: impl Fn() -> bool + Send + Sync + 'static) -> PrivateTargets {
        PrivateTargets(Arc::new(read))
    }

    /// A switch that stays as given.
    pub fn fixed(on: bool) -> PrivateTargets {
        PrivateTargets::new(move || on)
    }

    /// Whether private targets are allowed now.
    pub fn allowed(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for PrivateTargets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PrivateTargets").field(&self.allowed()).finish()
    }
}

/// How addresses are judged: the fixed development switch, and the server admin's when given.
#[derive(Clone, Debug)]
struct Rule {
    allow_loopback: bool,
    private: Option<PrivateTargets>,
}

impl Rule {
    fn allows(&self, ip: IpAddr) -> bool {
        if self.private.as_ref().is_some_and(PrivateTargets::allowed) {
            return private_allowed(ip);
        }
        address_allowed(ip, self.allow_loopback)
    }

    fn loopback(&self) -> bool {
        self.allow_loopback || self.private.as_ref().is_some_and(PrivateTargets::allowed)
    }
}

/// Whether `url` may be fetched under `rule`: http(s), a host, and an allowed literal address (names
/// are judged when they resolve). `userinfo`: whether credentials in the URL are taken.
fn url_allowed(url: &Url, rule: &Rule, userinfo: bool) -> Result<(), OutboundError> {
    let refused = || OutboundError::NotAllowed(url.to_string());
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused());
    }
    if !userinfo && (!url.username().is_empty() || url.password().is_some()) {
        return Err(refused());
    }
    match url.host() {
        None => Err(refused()),
        Some(url::Host::Ipv4(ip)) if !rule.allows(IpAddr::V4(ip)) => Err(refused()),
        Some(url::Host::Ipv6(ip)) if !rule.allows(IpAddr::V6(ip)) => Err(refused()),
        Some(url::Host::Domain(d)) if d.trim_end_matches('.').eq_ignore_ascii_case("localhost") => {
            if rule.loopback() {
                Ok(())
            } else {
                Err(refused())
            }
        }
        Some(_) => Ok(()),
    }
}

/// The addresses of `host:port` that `rule` allows (a literal address is judged as it is); an error
/// when there are none.
async fn resolve_allowed(
    host: &str,
    port: u16,
    rule: &Rule,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, OutboundError> {
    let shown = format!("{host}:{port}");
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return if rule.allows(ip) {
            Ok(vec![SocketAddr::new(ip, port)])
        } else {
            Err(OutboundError::NotAllowed(shown))
        };
    }
    if bare.trim_end_matches('.').eq_ignore_ascii_case("localhost") && !rule.loopback() {
        return Err(OutboundError::NotAllowed(shown));
    }
    let found: Vec<SocketAddr> = tokio::time::timeout(timeout, tokio::net::lookup_host((bare, port)))
        .await
        .map_err(|_| OutboundError::Failed(shown.clone(), "name lookup timed out".into()))?
        .map_err(|e| OutboundError::Failed(shown.clone(), format!("name lookup: {e}")))?
        .collect();
    let allowed: Vec<SocketAddr> = found.into_iter().filter(|a| rule.allows(a.ip())).collect();
    if allowed.is_empty() {
        return Err(OutboundError::NotAllowed(shown));
    }
    Ok(allowed)
}

/// Where the URLs an admin set may lead: the server admin's anywhere, a channel admin's through the
/// guard (see the module doc). Cheap to clone.
#[derive(Clone, Debug)]
pub enum Reach {
    /// The server admin's own URLs (the default channel's): anywhere, as Owncast allows.
    Anywhere,
    /// A channel admin's URLs: public addresses only, loopback and private ones too while the server
    /// admin's switch is on. Only http(s), no proxy, no redirect followed.
    Guarded(PrivateTargets),
}

impl Reach {
    /// The reach of a channel's URLs: the default channel's admin is the server admin.
    pub fn for_channel(is_default: bool, private: &PrivateTargets) -> Reach {
        if is_default {
            Reach::Anywhere
        } else {
            Reach::Guarded(private.clone())
        }
    }

    pub fn is_guarded(&self) -> bool {
        matches!(self, Reach::Guarded(_))
    }

    fn rule(&self) -> Option<Rule> {
        match self {
            Reach::Anywhere => None,
            Reach::Guarded(p) => Some(Rule { allow_loopback: false, private: Some(p.clone()) }),
        }
    }

    /// The client `builder` makes, guarded for a channel: no proxy (one would resolve names for us),
    /// no redirect followed, and names resolved through the guarded resolver (the addresses handed to
    /// the connection are the checked ones: no DNS rebinding). Literal addresses bypass a resolver:
    /// check every URL with [`Reach::check_url`] before sending it.
    pub fn client(&self, builder: reqwest::ClientBuilder) -> reqwest::Result<reqwest::Client> {
        match self.rule() {
            None => builder.build(),
            Some(rule) => builder
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .dns_resolver(Arc::new(GuardedResolver { rule }))
                .build(),
        }
    }

    /// Whether `url` may be sent to now: http(s) always; for a channel, a literal address or
    /// `localhost` that the guard allows (names are judged again when they resolve).
    pub fn check_url(&self, url: &Url) -> Result<(), OutboundError> {
        match self.rule() {
            None if matches!(url.scheme(), "http" | "https") => Ok(()),
            None => Err(OutboundError::NotAllowed(url.to_string())),
            Some(rule) => url_allowed(url, &rule, true),
        }
    }

    /// The check of a URL when an admin saves it: for a channel, a literal address or `localhost`
    /// the guard refuses now is refused with a sentence that says why (names are judged when they are
    /// fetched). `what` names the URL ("the webhook URL"). An empty URL passes (nothing is fetched).
    pub fn check_saved(&self, what: &str, url: &str) -> Result<(), String> {
        if url.trim().is_empty() || !self.is_guarded() {
            return Ok(());
        }
        let Ok(parsed) = Url::parse(url.trim()) else { return Ok(()) };
        // The setters check the shape of a URL themselves; only the address is judged here.
        if !matches!(parsed.scheme(), "http" | "https" | "rtmp" | "rtmps" | "srt") {
            return Ok(());
        }
        let host = parsed.host_str().unwrap_or_default().to_string();
        let probe = Url::parse(&format!("http://{host}/")).map_err(|_| format!("{what} has no valid host"))?;
        self.check_url(&probe).map_err(|_| {
            format!(
                "{what} is refused: a channel's URLs may only reach public addresses, not {host} (loopback, \
                 private, link-local and reserved addresses are refused; the server admin's \
                 allowprivatetargets setting decides on loopback and private ones)"
            )
        })
    }

    /// [`Reach::check_url`] of a URL given as text.
    pub fn check_str(&self, url: &str) -> Result<Url, OutboundError> {
        let parsed = Url::parse(url.trim()).map_err(|_| OutboundError::NotAllowed(url.to_string()))?;
        self.check_url(&parsed)?;
        Ok(parsed)
    }

    /// [`Reach::check_url`], and for a channel that a host name resolves to at least one allowed
    /// address (for a clear refusal when the URL is saved; the resolver enforces it again on connect).
    pub async fn check_resolved(&self, url: &Url) -> Result<(), OutboundError> {
        self.check_url(url)?;
        let (Some(rule), Some(url::Host::Domain(name))) = (self.rule(), url.host()) else {
            return Ok(());
        };
        let port = url.port_or_known_default().unwrap_or(443);
        resolve_allowed(name, port, &rule, Duration::from_secs(10)).await.map(|_| ())
    }

    /// The addresses to connect to for `host:port` outside HTTP (simulcast's RTMP and SRT): every
    /// address the name has for the server admin's; for a channel only the allowed ones (an error when
    /// there are none), so the connection goes to a checked address.
    pub async fn resolve(&self, host: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, OutboundError> {
        match self.rule() {
            Some(rule) => resolve_allowed(host, port, &rule, timeout).await,
            None => {
                let shown = format!("{host}:{port}");
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                let found: Vec<SocketAddr> = tokio::time::timeout(timeout, tokio::net::lookup_host((bare, port)))
                    .await
                    .map_err(|_| OutboundError::Failed(shown.clone(), "name lookup timed out".into()))?
                    .map_err(|e| OutboundError::Failed(shown.clone(), format!("name lookup: {e}")))?
                    .collect();
                if found.is_empty() {
                    return Err(OutboundError::Failed(shown, "the name has no address".into()));
                }
                Ok(found)
            }
        }
    }
}

/// A name resolver that only ever hands reqwest allowed addresses.
struct GuardedResolver {
    rule: Rule,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rule = self.rule.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found.into_iter().filter(|a| rule.allows(a.ip())).collect();
            if allowed.is_empty() {
                let e: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves only to private or local addresses").into();
                return Err(e);
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

struct HostLimits {
    in_flight: Arc<Semaphore>,
    tokens: f64,
    at: Instant,
}

struct Inner {
    client: reqwest::Client,
    config: OutboundConfig,
    hosts: Mutex<HashMap<String, HostLimits>>,
}

/// The guarded client (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct Outbound {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound").field("config", &self.inner.config).finish()
    }
}

impl Outbound {
    pub fn new(config: OutboundConfig) -> Result<Outbound, OutboundError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver {
                rule: Rule { allow_loopback: config.allow_loopback, private: config.private.clone() },
            }))
            .pool_max_idle_per_host(config.per_host_concurrency.max(1))
            .user_agent(format!("castd/{} ({})", env!("CARGO_PKG_VERSION"), config.purpose))
            .build()
            .map_err(|e| OutboundError::Failed("(client)".into(), e.to_string()))?;
        Ok(Outbound { inner: Arc::new(Inner { client, config, hosts: Mutex::new(HashMap::new()) }) })
    }

    pub fn config(&self) -> &OutboundConfig {
        &self.inner.config
    }

    /// Whether `url` is one this client may fetch: http(s), a host, and a literal address that is
    /// allowed. Names are judged when they resolve (here by [`Outbound::check_resolved`], and again
    /// at connection time by the resolver).
    pub fn check_url(&self, url: &Url) -> Result<(), OutboundError> {
        url_allowed(url, &self.rule(), false)
    }

    fn rule(&self) -> Rule {
        Rule { allow_loopback: self.inner.config.allow_loopback, private: self.inner.config.private.clone() }
    }

    /// [`Outbound::check_url`], and for a host name, that it resolves to at least one allowed address
    /// (for a clear refusal before anything is stored; the resolver enforces it again on connect).
    pub async fn check_resolved(&self, url: &Url) -> Result<(), OutboundError> {
        self.check_url(url)?;
        let Some(url::Host::Domain(name)) = url.host() else {
            return Ok(());
        };
        let port = url.port_or_known_default().unwrap_or(443);
        resolve_allowed(name, port, &self.rule(), self.inner.config.timeout).await.map(|_| ()).map_err(|e| match e {
            OutboundError::NotAllowed(_) => OutboundError::NotAllowed(url.to_string()),
            other => other,
        })
    }

    /// A request to fill in (headers, body) and hand to [`Outbound::send`].
    pub fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        self.inner.client.request(method, url)
    }

    /// Take the host's rate token and an in-flight place.
    async fn admit(&self, url: &Url) -> Result<tokio::sync::OwnedSemaphorePermit, OutboundError> {
        let key = host_key(url);
        let cfg = &self.inner.config;
        let now = Instant::now();
        let sem = {
            let mut hosts = self.inner.hosts.lock();
            if hosts.len() >= MAX_HOSTS && !hosts.contains_key(&key) {
                let burst = f64::from(cfg.per_host_burst);
                let per_sec = 1.0 / cfg.per_host_every.as_secs_f64().max(1e-3);
                hosts.retain(|_, h| {
                    let idle = h.in_flight.available_permits() == cfg.per_host_concurrency.max(1);
                    !(idle && h.tokens + now.duration_since(h.at).as_secs_f64() * per_sec >= burst)
                });
                if hosts.len() >= MAX_HOSTS {
                    return Err(OutboundError::HostBusy(key));
                }
            }
            let h = hosts.entry(key.clone()).or_insert_with(|| HostLimits {
                in_flight: Arc::new(Semaphore::new(cfg.per_host_concurrency.max(1))),
                tokens: f64::from(cfg.per_host_burst.max(1)),
                at: now,
            });
            let per_sec = 1.0 / cfg.per_host_every.as_secs_f64().max(1e-3);
            let tokens =
                (h.tokens + now.duration_since(h.at).as_secs_f64() * per_sec).min(f64::from(cfg.per_host_burst.max(1)));
            h.at = now;
            if tokens < 1.0 {
                h.tokens = tokens;
                return Err(OutboundError::HostBusy(key));
            }
            h.tokens = tokens - 1.0;
            h.in_flight.clone()
        };
        match tokio::time::timeout(cfg.timeout, sem.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(OutboundError::HostBusy(key)),
        }
    }

    /// Send a request built with [`Outbound::request`] (no redirect followed) and read its answer.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<Fetched, OutboundError> {
        let req = req.build().map_err(|e| OutboundError::Failed("(request)".into(), e.to_string()))?;
        let url = req.url().clone();
        self.check_url(&url)?;
        let _permit = self.admit(&url).await?;
        let resp = self
            .inner
            .client
            .execute(req)
            .await
            .map_err(|e| OutboundError::Failed(url.to_string(), error_chain(&e)))?;
        self.read(url, resp).await
    }

    /// GET `url` with `Accept: accept`, following at most `redirects` redirects (each re-checked).
    pub async fn get(&self, url: Url, accept: &str, redirects: usize) -> Result<Fetched, OutboundError> {
        let mut url = url;
        for _ in 0..=redirects.min(MAX_REDIRECTS) {
            let fetched = self.send(self.request(Method::GET, url.clone()).header(ACCEPT, accept)).await?;
            if (300..400).contains(&fetched.status) && fetched.headers.contains_key(LOCATION) {
                let next = fetched
                    .headers
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| OutboundError::Failed(url.to_string(), "a redirect to nowhere".into()))?;
                url = next;
                continue;
            }
            return Ok(fetched);
        }
        Err(OutboundError::Failed(url.to_string(), format!("more than {redirects} redirects")))
    }

    async fn read(&self, url: Url, mut resp: reqwest::Response) -> Result<Fetched, OutboundError> {
        let max = self.inner.config.max_body;
        let truncate = self.inner.config.truncate;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        if !truncate && resp.content_length().is_some_and(|n| n > max as u64) {
            return Err(OutboundError::TooLarge(url.to_string()));
        }
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) =
            resp.chunk().await.map_err(|e| OutboundError::Failed(url.to_string(), error_chain(&e)))?
        {
            if body.len() + chunk.len() > max {
                if !truncate {
                    return Err(OutboundError::TooLarge(url.to_string()));
                }
                body.extend_from_slice(&chunk[..max - body.len()]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched { url, status, headers, body, truncated })
    }
}

/// A reqwest error with its causes (the resolver's refusal is a cause).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_public_addresses_are_allowed() {
        for bad in [
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::1",
            "2001:db8::1",
            "::10.0.0.1",
        ] {
            assert!(!address_allowed(ip(bad), false), "{bad} must be refused");
            assert!(
                !address_allowed(ip(bad), true) || bad.contains("127"),
                "{bad} must be refused even in development"
            );
        }
        assert!(!address_allowed(ip("127.0.0.1"), false));
        assert!(!address_allowed(ip("::1"), false));
        assert!(address_allowed(ip("127.0.0.1"), true));
        assert!(address_allowed(ip("::1"), true));
        assert!(!address_allowed(ip("64:ff9b::7f00:1"), true), "NAT64 of loopback is never allowed");
        for good in ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "64:ff9b::5db8:d822", "::ffff:1.1.1.1"] {
            assert!(address_allowed(ip(good), false), "{good} is public");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_before_anything_is_sent() {
        let strict = Outbound::new(OutboundConfig::new("test", false)).unwrap();
        let dev = Outbound::new(OutboundConfig::new("test", true)).unwrap();
        for bad in [
            "ftp://example.com/",
            "javascript:alert(1)",
            "file:///etc/passwd",
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://[::1]/",
            "http://localhost./",
            "http://169.254.169.254/latest/meta-data/",
            "http://user:pw@example.com/",
        ] {
            let u = Url::parse(bad).unwrap();
            assert!(strict.check_url(&u).is_err(), "{bad}");
        }
        assert!(dev.check_url(&Url::parse("http://127.0.0.1:9/").unwrap()).is_ok());
        assert!(dev.check_url(&Url::parse("http://10.1.1.1/").unwrap()).is_err());
        assert!(strict.check_url(&Url::parse("https://example.com/").unwrap()).is_ok());
        // localhost resolves to loopback: refused after resolution too.
        assert!(strict.check_resolved(&Url::parse("http://localhost:9/").unwrap()).await.is_err());
        let err = strict.get(Url::parse("http://127.0.0.1:9/").unwrap(), "*/*", 0).await.unwrap_err();
        assert!(matches!(err, OutboundError::NotAllowed(_)));
        assert_eq!(err.public_message(), "the remote server could not be reached or gave no usable answer");
    }

    #[test]
    fn the_server_admins_switch_opens_loopback_and_private_ranges_only() {
        for ok in
            ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fd12::1", "::ffff:10.0.0.1"]
        {
            assert!(private_allowed(ip(ok)), "{ok} is private");
            assert!(!address_allowed(ip(ok), false), "{ok} is not public");
        }
        for bad in
            ["169.254.169.254", "fe80::1", "0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "240.0.0.1", "192.0.2.1"]
        {
            assert!(!private_allowed(ip(bad)), "{bad} stays refused");
        }
        assert!(private_allowed(ip("1.1.1.1")));
    }

    #[tokio::test]
    async fn a_channels_reach_follows_the_switch_at_each_check() {
        let on = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let o = on.clone();
        let reach = Reach::Guarded(PrivateTargets::new(move || o.load(std::sync::atomic::Ordering::SeqCst)));
        let local = Url::parse("http://127.0.0.1:9/hook").unwrap();
        let private = Url::parse("http://user:pw@10.0.0.1/hook").unwrap();
        let metadata = Url::parse("http://169.254.169.254/latest").unwrap();
        assert!(reach.check_url(&local).is_err() && reach.check_url(&private).is_err());
        assert!(reach.check_url(&Url::parse("http://localhost./").unwrap()).is_err());
        assert!(reach.check_url(&Url::parse("ftp://example.com/").unwrap()).is_err());
        assert!(reach.check_url(&Url::parse("https://example.com/").unwrap()).is_ok());
        assert!(matches!(
            reach.resolve("127.0.0.1", 1935, Duration::from_secs(1)).await,
            Err(OutboundError::NotAllowed(_))
        ));
        assert!(matches!(
            reach.resolve("localhost", 1935, Duration::from_secs(1)).await,
            Err(OutboundError::NotAllowed(_))
        ));
        assert!(reach.check_saved("the webhook URL", "rtmp://10.0.0.1/live").is_err());
        assert!(reach.check_saved("the webhook URL", "").is_ok());
        on.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(reach.check_url(&local).is_ok() && reach.check_url(&private).is_ok());
        assert!(reach.check_url(&metadata).is_err(), "link-local stays refused");
        assert_eq!(
            reach.resolve("127.0.0.1", 1935, Duration::from_secs(1)).await.unwrap(),
            vec!["127.0.0.1:1935".parse::<SocketAddr>().unwrap()]
        );
        assert!(reach.check_saved("the webhook URL", "rtmp://10.0.0.1/live").is_ok());
        // The server admin's own URLs go anywhere.
        assert!(Reach::Anywhere.check_url(&metadata).is_ok());
        assert!(Reach::Anywhere.check_saved("x", "http://10.0.0.1/").is_ok());
    }

    #[tokio::test]
    async fn a_guarded_client_connects_only_where_the_switch_allows() {
        let (addr, count) = server(b"ok".to_vec(), Duration::ZERO).await;
        let on = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let o = on.clone();
        let reach = Reach::Guarded(PrivateTargets::new(move || o.load(std::sync::atomic::Ordering::SeqCst)));
        let client = reach.client(reqwest::Client::builder()).unwrap();
        // A name that resolves to loopback is refused by the resolver itself (a literal by `check_url`).
        let named = format!("http://localhost:{}/", addr.port());
        assert!(client.get(&named).send().await.is_err());
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 0);
        on.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(client.get(&named).send().await.is_ok());
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// A loopback server that answers every request with `body` after `delay`, counting requests.
    async fn server(body: Vec<u8>, delay: Duration) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = count.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let body = body.clone();
                let c = c.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    let head =
                        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(&body).await;
                });
            }
        });
        (addr, count)
    }

    #[tokio::test]
    async fn bodies_are_bounded() {
        let (addr, _) = server(vec![b'x'; 5000], Duration::ZERO).await;
        let url = Url::parse(&format!("http://{addr}/")).unwrap();
        let refuse = Outbound::new(OutboundConfig { max_body: 1000, ..OutboundConfig::new("test", true) }).unwrap();
        assert!(matches!(refuse.get(url.clone(), "*/*", 0).await, Err(OutboundError::TooLarge(_))));
        let cut = Outbound::new(OutboundConfig { max_body: 1000, truncate: true, ..OutboundConfig::new("test", true) })
            .unwrap();
        let f = cut.get(url, "*/*", 0).await.unwrap();
        assert_eq!((f.body.len(), f.truncated, f.status), (1000, true, 200));
    }

    #[tokio::test]
    async fn a_host_gets_its_burst_then_is_refused_without_a_request() {
        let (addr, count) = server(b"ok".to_vec(), Duration::ZERO).await;
        let url = Url::parse(&format!("http://{addr}/")).unwrap();
        let o = Outbound::new(OutboundConfig {
            per_host_burst: 3,
            per_host_every: Duration::from_secs(60),
            ..OutboundConfig::new("test", true)
        })
        .unwrap();
        for _ in 0..3 {
            assert!(o.get(url.clone(), "*/*", 0).await.is_ok());
        }
        assert!(matches!(o.get(url, "*/*", 0).await, Err(OutboundError::HostBusy(_))));
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn in_flight_requests_per_host_are_capped() {
        let (addr, _) = server(b"ok".to_vec(), Duration::from_millis(300)).await;
        let url = Url::parse(&format!("http://{addr}/")).unwrap();
        let o = Outbound::new(OutboundConfig { per_host_concurrency: 2, ..OutboundConfig::new("test", true) }).unwrap();
        let started = Instant::now();
        let all: Vec<_> = (0..4).map(|_| o.get(url.clone(), "*/*", 0)).collect();
        let results = futures_util::future::join_all(all).await;
        assert!(results.iter().all(Result::is_ok));
        assert!(started.elapsed() >= Duration::from_millis(550), "two waves of two: {:?}", started.elapsed());
    }
}
