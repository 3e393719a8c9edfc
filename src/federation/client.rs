//! Outbound requests and what castd knows of remote actors.
//!
//! Every request goes through the guarded client ([`crate::outbound::Outbound`]): public addresses
//! only after resolution (loopback too with `--federation-allow-http-loopback`), bounded answers,
//! per-host concurrency and rate limits, no redirects. Two instances: `fetch` for what castd reads
//! (actors, keys, WebFinger, a federated server's config and status; a remote host gets 20 at once,
//! then 5 a second, and 4 in flight), `deliver` for the signed POSTs of the delivery queue (its own
//! per-host limits, so deliveries never starve the inbox's fetches).
//!
//! The URL policy on top ([`Client::check_url`]): an ActivityPub IRI castd contacts is `https://`, or,
//! with the development switch, `http://` on a loopback host. Nothing else (`javascript:`, `data:`,
//! no host, user info) is ever fetched or stored as an IRI.
//!
//! Remote actors ([`Client::signer`]): which key signed, asked of the actor itself. The actor's own
//! document, fetched from the actor IRI, must carry that IRI as its `id` and list the exact key id in
//! its `publicKey` (object or array); a key listed without its PEM is read from the key id's document,
//! whose `owner` (when given) must be the actor. The inbox has checked before that the key id and the
//! actor share an origin. Actor documents are cached for `ACTOR_TTL` (at most `CACHE_MAX`); a cached
//! actor is fetched again at most once per `REFETCH_INTERVAL` (a key id it does not list, or a
//! signature that does not verify: a rotated key); a failed fetch is remembered for `FAILURE_TTL`,
//! during which nothing is fetched for that actor. So a flood of unknown keys costs at most one fetch
//! per actor per interval, within the per-host limits.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use reqwest::Method;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;
use rsa::RsaPublicKey;
use serde_json::Value;

use super::keys::KeyPair;
use super::{signatures, FedError, FederationConfig, AP_CONTENT_TYPE};
use crate::events::chat::http_link;
use crate::outbound::{Fetched, Outbound, OutboundConfig};

/// Largest remote document read.
pub const MAX_DOCUMENT: usize = 1024 * 1024;
/// Time limit of a fetch.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a fetched actor (and its keys) is used without asking again.
const ACTOR_TTL: Duration = Duration::from_secs(3600);
/// A cached actor is fetched again at most this often.
const REFETCH_INTERVAL: Duration = Duration::from_secs(60);
/// How long a failed actor fetch is remembered (nothing is fetched for it meanwhile).
const FAILURE_TTL: Duration = Duration::from_secs(60);
/// Most actors (and most remembered failures) kept.
const CACHE_MAX: usize = 10_000;
/// Longest text kept of a remote actor's name or user name.
const MAX_NAME: usize = 200;
/// Longest URL kept from a remote document.
const MAX_URL: usize = 2048;
const ACCEPT: &str =
    "application/activity+json, application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\"";

/// What castd keeps of a remote actor. Every URL in it is http(s) (see [`RemoteActor::from_json`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteActor {
    pub iri: String,
    pub inbox: String,
    /// The shared inbox, or the inbox when there is none.
    pub shared_inbox: String,
    pub name: String,
    pub username: String,
    /// The avatar; empty when there is none (or it was not an http(s) URL).
    pub image: String,
    /// The profile page; empty when it was not an http(s) URL.
    pub url: String,
}

/// An http(s) URL of reasonable length from a remote document, normalised.
fn remote_url(s: &str) -> Option<String> {
    if s.len() > MAX_URL {
        return None;
    }
    http_link(s)
}

/// The first http(s) URL of a value that is a URL, a `Link`/`Image` object (`href` or `url`), or an
/// array of those.
fn first_url(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => remote_url(s),
        Value::Object(o) => o.get("href").or_else(|| o.get("url")).and_then(first_url),
        Value::Array(a) => a.iter().take(16).find_map(first_url),
        _ => None,
    }
}

fn short(s: &str) -> String {
    s.chars().take(MAX_NAME).collect()
}

impl RemoteActor {
    /// Read an actor document. `None` unless its `id` and `inbox` are http(s) URLs; the profile URL
    /// and the avatar are kept only when they are http(s) URLs (anything else is dropped, never
    /// stored or shown).
    pub fn from_json(v: &Value) -> Option<RemoteActor> {
        let iri = v.get("id")?.as_str()?;
        remote_url(iri)?;
        let inbox = remote_url(v.get("inbox")?.as_str()?)?;
        let shared = v.pointer("/endpoints/sharedInbox").and_then(Value::as_str).and_then(remote_url);
        let text = |k: &str| short(v.get(k).and_then(Value::as_str).unwrap_or_default());
        let image = v.get("icon").and_then(first_url).unwrap_or_default();
        let url = match v.get("url") {
            None | Some(Value::Null) => remote_url(iri).unwrap_or_default(),
            Some(u) => first_url(u).unwrap_or_default(),
        };
        let username = text("preferredUsername");
        let name = if text("name").is_empty() { username.clone() } else { text("name") };
        Some(RemoteActor {
            iri: iri.to_string(),
            shared_inbox: shared.unwrap_or_else(|| inbox.clone()),
            inbox,
            name,
            username,
            image,
            url,
        })
    }

    /// `user@host` of the actor.
    pub fn account(&self) -> String {
        let host = url::Url::parse(&self.iri).map(|u| signatures::authority(&u)).unwrap_or_default();
        format!("{}@{host}", self.username)
    }
}

/// A key the actor document lists: its id, and its public key when the document carries the PEM.
#[derive(Clone)]
struct ListedKey {
    id: String,
    key: Option<RsaPublicKey>,
}

struct Cached {
    actor: RemoteActor,
    keys: Vec<ListedKey>,
    at: Instant,
}

/// A failed fetch, remembered: until when, and whether the actor is gone (404/410).
#[derive(Clone, Copy)]
struct Failure {
    until: Instant,
    gone: bool,
}

/// The outbound HTTP client (see the module doc).
pub struct Client {
    fetch: Outbound,
    deliver: Outbound,
    allow_http_loopback: bool,
    actors: Mutex<HashMap<String, Cached>>,
    failures: Mutex<HashMap<String, Failure>>,
}

/// Whether `host` is a loopback address or `localhost`.
pub fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.');
            d.eq_ignore_ascii_case("localhost") || d.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
    }
}

impl Client {
    pub fn new(config: &FederationConfig) -> Result<Self, FedError> {
        let allow = config.allow_http_loopback;
        // Fetches are mostly caused by strangers (an inbox request from an actor not cached): a
        // remote host gets 20 at once, then 5 a second.
        let fetch = Outbound::new(OutboundConfig {
            timeout: FETCH_TIMEOUT,
            max_body: MAX_DOCUMENT,
            per_host_burst: 20,
            per_host_every: Duration::from_millis(200),
            ..OutboundConfig::new("ActivityPub", allow)
        })?;
        let deliver = Outbound::new(OutboundConfig {
            timeout: config.delivery_timeout.max(Duration::from_millis(100)),
            // An inbox's answer is not read beyond a little.
            max_body: 64 * 1024,
            truncate: true,
            per_host_concurrency: config.per_host.max(1),
            per_host_burst: 200,
            per_host_every: Duration::from_millis(10),
            ..OutboundConfig::new("ActivityPub delivery", allow)
        })?;
        Ok(Self {
            fetch,
            deliver,
            allow_http_loopback: allow,
            actors: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
        })
    }

    /// Parse `s` and check it may be contacted: https, or http on a loopback host with the switch,
    /// and nothing the guarded client refuses (user info, a literal non-public address).
    pub fn check_url(&self, s: &str) -> Result<url::Url, FedError> {
        let u = url::Url::parse(s).map_err(|e| FedError::Policy(format!("'{s}' is not a URL: {e}")))?;
        let host = u.host().ok_or_else(|| FedError::Policy(format!("'{s}' has no host")))?;
        match u.scheme() {
            "https" => {}
            "http" if self.allow_http_loopback && is_loopback_host(&host) => {}
            "http" if is_loopback_host(&host) => {
                return Err(FedError::Policy(format!(
                    "'{s}' is plain http; it is allowed for loopback hosts only with --federation-allow-http-loopback"
                )))
            }
            _ => return Err(FedError::Policy(format!("'{s}' must be an https URL"))),
        }
        self.fetch.check_url(&u)?;
        Ok(u)
    }

    /// Whether `s` is a URL the policy allows.
    pub fn allowed(&self, s: &str) -> bool {
        self.check_url(s).is_ok()
    }

    /// GET `url` (signed when `signer` is given), following no redirects.
    async fn get(&self, url: &str, accept: &str, signer: Option<(&KeyPair, &str)>) -> Result<Fetched, FedError> {
        let u = self.check_url(url)?;
        let mut req = self.fetch.request(Method::GET, u.clone()).header("accept", accept);
        if let Some((kp, key_id)) = signer {
            for (k, v) in signatures::sign(&kp.private, key_id, "GET", &u, None, chrono::Utc::now()) {
                req = req.header(k, v);
            }
        }
        Ok(self.fetch.send(req).await?)
    }

    /// GET a JSON document: the status, and the document when the status is 2xx (`Null` otherwise).
    pub async fn get_json(
        &self,
        url: &str,
        accept: &str,
        signer: Option<(&KeyPair, &str)>,
    ) -> Result<(u16, Value), FedError> {
        let f = self.get(url, accept, signer).await?;
        if !f.is_success() {
            return Ok((f.status, Value::Null));
        }
        let v = serde_json::from_slice(&f.body).map_err(|e| FedError::Remote(format!("GET {url}: not JSON: {e}")))?;
        Ok((f.status, v))
    }

    /// GET an ActivityPub document; non-2xx is an error (`Gone` for 404 and 410).
    pub async fn fetch_ap(&self, url: &str, signer: Option<(&KeyPair, &str)>) -> Result<Value, FedError> {
        match self.get_json(url, ACCEPT, signer).await? {
            (200..=299, v) => Ok(v),
            (404 | 410, _) => Err(FedError::Gone(url.to_string())),
            (status, _) => Err(FedError::Remote(format!("GET {url}: HTTP {status}"))),
        }
    }

    /// `actor` when castd may deliver to its inbox (the URL policy); a shared inbox the policy refuses
    /// is replaced by the inbox.
    pub fn deliverable(&self, mut actor: RemoteActor) -> Result<RemoteActor, FedError> {
        self.check_url(&actor.inbox)?;
        if !self.allowed(&actor.shared_inbox) {
            actor.shared_inbox = actor.inbox.clone();
        }
        Ok(actor)
    }

    /// Whether the actor `iri` is cached (so identifying it costs no fetch).
    pub fn is_cached(&self, iri: &str) -> bool {
        self.actors.lock().get(iri).is_some_and(|c| c.at.elapsed() < ACTOR_TTL)
    }

    fn remember_failure(&self, iri: &str, gone: bool) {
        let now = Instant::now();
        let mut failures = self.failures.lock();
        if failures.len() >= CACHE_MAX {
            failures.retain(|_, f| f.until > now);
            if failures.len() >= CACHE_MAX {
                failures.clear();
            }
        }
        failures.insert(iri.to_string(), Failure { until: now + FAILURE_TTL, gone });
    }

    /// The error of a fetch for `iri` that failed less than `FAILURE_TTL` ago.
    fn recent_failure(&self, iri: &str) -> Option<FedError> {
        let now = Instant::now();
        let f = self.failures.lock().get(iri).copied().filter(|f| f.until > now)?;
        Some(if f.gone {
            FedError::Gone(iri.to_string())
        } else {
            FedError::Remote(format!("fetching {iri} failed a moment ago"))
        })
    }

    /// Fetch the actor `iri` (its document must have that `id`) and cache it with the keys it lists.
    async fn fetch_and_cache(&self, iri: &str, signer: Option<(&KeyPair, &str)>) -> Result<(), FedError> {
        if let Some(e) = self.recent_failure(iri) {
            return Err(e);
        }
        let result = async {
            let doc = self.fetch_ap(iri, signer).await?;
            if doc.get("id").and_then(Value::as_str) != Some(iri) {
                return Err(FedError::Remote(format!("the document at {iri} is not that actor")));
            }
            let actor = RemoteActor::from_json(&doc)
                .ok_or_else(|| FedError::Remote(format!("{iri} is not an actor")))
                .and_then(|a| self.deliverable(a))?;
            Ok((actor, listed_keys(&doc)))
        }
        .await;
        match result {
            Ok((actor, keys)) => {
                let mut actors = self.actors.lock();
                if actors.len() >= CACHE_MAX && !actors.contains_key(iri) {
                    actors.retain(|_, c| c.at.elapsed() < ACTOR_TTL);
                    if actors.len() >= CACHE_MAX {
                        actors.clear();
                    }
                }
                actors.insert(iri.to_string(), Cached { actor, keys, at: Instant::now() });
                self.failures.lock().remove(iri);
                Ok(())
            }
            Err(e) => {
                self.remember_failure(iri, matches!(e, FedError::Gone(_)));
                Err(e)
            }
        }
    }

    /// A remote actor, from the cache or fetched (its document must carry `iri` as its `id`).
    pub async fn fetch_actor(&self, iri: &str, signer: Option<(&KeyPair, &str)>) -> Result<RemoteActor, FedError> {
        if let Some(c) = self.actors.lock().get(iri).filter(|c| c.at.elapsed() < ACTOR_TTL) {
            return Ok(c.actor.clone());
        }
        self.fetch_and_cache(iri, signer).await?;
        self.actors
            .lock()
            .get(iri)
            .map(|c| c.actor.clone())
            .ok_or_else(|| FedError::Remote(format!("{iri} is not an actor")))
    }

    /// The actor `actor_iri` and the public key `key_id` its own document lists (see the module doc).
    /// `refresh`: the cached key did not verify; the actor is fetched again, at most once per
    /// `REFETCH_INTERVAL`. The caller has checked that `key_id` and `actor_iri` share an origin.
    pub async fn signer(
        &self,
        actor_iri: &str,
        key_id: &str,
        refresh: bool,
        signer: Option<(&KeyPair, &str)>,
    ) -> Result<(RemoteActor, RsaPublicKey), FedError> {
        let not_listed = || FedError::Policy(format!("the actor {actor_iri} does not list the key {key_id}"));
        let cached = {
            let actors = self.actors.lock();
            actors.get(actor_iri).filter(|c| c.at.elapsed() < ACTOR_TTL).map(|c| {
                (c.actor.clone(), c.keys.iter().find(|k| k.id == key_id).cloned(), c.at.elapsed() < REFETCH_INTERVAL)
            })
        };
        let listed = match cached {
            Some((actor, Some(ListedKey { key: Some(key), .. }), _)) if !refresh => return Ok((actor, key)),
            Some((_, None, true)) => return Err(not_listed()),
            Some((_, Some(_), true)) if refresh => {
                return Err(FedError::Policy(format!("the key {key_id} of {actor_iri} was fetched a moment ago")))
            }
            Some((_, Some(listed), _)) if listed.key.is_none() && !refresh => listed,
            _ => {
                self.fetch_and_cache(actor_iri, signer).await?;
                let actors = self.actors.lock();
                let c = actors.get(actor_iri).ok_or_else(not_listed)?;
                match c.keys.iter().find(|k| k.id == key_id) {
                    Some(ListedKey { key: Some(key), .. }) => return Ok((c.actor.clone(), key.clone())),
                    Some(listed) => listed.clone(),
                    None => return Err(not_listed()),
                }
            }
        };
        // Listed without its PEM: the key id's own document (same origin as the actor).
        if let Some(e) = self.recent_failure(actor_iri) {
            return Err(e);
        }
        let doc = self.fetch_ap(&listed.id, signer).await.inspect_err(|_| self.remember_failure(actor_iri, false))?;
        let key = key_document(&doc, key_id, actor_iri).ok_or_else(not_listed)?;
        let mut actors = self.actors.lock();
        let c = actors.get_mut(actor_iri).ok_or_else(not_listed)?;
        if let Some(k) = c.keys.iter_mut().find(|k| k.id == key_id) {
            k.key = Some(key.clone());
        }
        Ok((c.actor.clone(), key))
    }

    /// POST a signed activity; returns the HTTP status.
    pub async fn post_signed(
        &self,
        inbox: &str,
        body: &[u8],
        kp: &KeyPair,
        key_id: &str,
        timeout: Duration,
    ) -> Result<u16, FedError> {
        let u = self.check_url(inbox)?;
        let mut req = self
            .deliver
            .request(Method::POST, u.clone())
            .timeout(timeout)
            .header("content-type", AP_CONTENT_TYPE)
            .header("accept", ACCEPT)
            .body(body.to_vec());
        for (k, v) in signatures::sign(&kp.private, key_id, "POST", &u, Some(body), chrono::Utc::now()) {
            req = req.header(k, v);
        }
        Ok(self.deliver.send(req).await?.status)
    }

    /// A plain GET of a JSON API document (Owncast's `/api/config`, `/api/status`).
    pub async fn get_plain_json(&self, url: &str) -> Result<Value, FedError> {
        match self.get_json(url, "application/json, application/jrd+json", None).await? {
            (200..=299, v) => Ok(v),
            (status, _) => Err(FedError::Remote(format!("GET {url}: HTTP {status}"))),
        }
    }

    /// The WebFinger document of `user@host` (or `@user@host`): the account as `user@host`, and the
    /// JRD. A non-2xx answer is `FedError::Public` (castd's words with the status only).
    pub async fn webfinger_jrd(&self, account: &str) -> Result<(String, Value), FedError> {
        let (user, host) = split_account(account)?;
        let host_url = url::Url::parse(&format!("http://{host}/"))
            .map_err(|_| FedError::Public(format!("'{host}' is not a host name")))?;
        let scheme = match host_url.host() {
            Some(h) if self.allow_http_loopback && is_loopback_host(&h) => "http",
            _ => "https",
        };
        let account = format!("{user}@{host}");
        let q: String = url::form_urlencoded::byte_serialize(format!("acct:{account}").as_bytes()).collect();
        let url = format!("{scheme}://{host}/.well-known/webfinger?resource={q}");
        match self.get_json(&url, "application/jrd+json, application/json", None).await? {
            (200..=299, jrd) => Ok((account, jrd)),
            (status, _) => Err(FedError::Public(format!("{account} was not found (its server answered {status})"))),
        }
    }

    /// Resolve `user@host` (or `@user@host`) through WebFinger to the actor IRI (an allowed URL).
    pub async fn webfinger(&self, account: &str) -> Result<String, FedError> {
        let (account, jrd) = self.webfinger_jrd(account).await?;
        let href = jrd
            .get("links")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|l| {
                l.get("rel").and_then(Value::as_str) == Some("self")
                    && l.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.contains("activity+json") || t.contains("ld+json"))
            })
            .and_then(|l| l.get("href").and_then(Value::as_str))
            .ok_or_else(|| FedError::Public(format!("{account} has no ActivityPub actor")))?;
        self.check_url(href)?;
        Ok(href.to_string())
    }
}

/// `user` and `host` of `user@host` or `@user@host`.
pub fn split_account(account: &str) -> Result<(&str, &str), FedError> {
    let account = account.trim().trim_start_matches('@');
    account
        .split_once('@')
        .filter(|(u, h)| {
            !u.is_empty() && !h.is_empty() && !h.contains(['/', '?', '#', '@', '\\']) && !u.contains(['/', '?', '#'])
        })
        .ok_or_else(|| FedError::Public(format!("'{account}' is not an account of the form user@host")))
}

fn parse_pem(pem: &str) -> Option<RsaPublicKey> {
    RsaPublicKey::from_public_key_pem(pem.trim()).or_else(|_| RsaPublicKey::from_pkcs1_pem(pem.trim())).ok()
}

/// The keys an actor document lists in `publicKey` (an object or an array of them; at most 16).
fn listed_keys(doc: &Value) -> Vec<ListedKey> {
    let entries: Vec<&Value> = match doc.get("publicKey") {
        Some(Value::Array(a)) => a.iter().take(16).collect(),
        Some(o @ Value::Object(_)) => vec![o],
        Some(s @ Value::String(_)) => vec![s],
        _ => Vec::new(),
    };
    entries
        .into_iter()
        .filter_map(|e| match e {
            Value::String(id) => Some(ListedKey { id: id.clone(), key: None }),
            Value::Object(o) => {
                let id = o.get("id")?.as_str()?.to_string();
                let key = o.get("publicKeyPem").and_then(Value::as_str).and_then(parse_pem);
                Some(ListedKey { id, key })
            }
            _ => None,
        })
        .collect()
}

/// The public key `key_id` from its own document (the key itself, or a document listing it), when
/// the key names no other owner than `actor`.
fn key_document(doc: &Value, key_id: &str, actor: &str) -> Option<RsaPublicKey> {
    let entry = if doc.get("id").and_then(Value::as_str) == Some(key_id) && doc.get("publicKeyPem").is_some() {
        doc
    } else {
        match doc.get("publicKey") {
            Some(Value::Array(a)) => a.iter().find(|k| k.get("id").and_then(Value::as_str) == Some(key_id))?,
            Some(o @ Value::Object(_)) if o.get("id").and_then(Value::as_str) == Some(key_id) => o,
            _ => return None,
        }
    };
    if entry.get("owner").and_then(Value::as_str).is_some_and(|o| o != actor) {
        return None;
    }
    parse_pem(entry.get("publicKeyPem")?.as_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn client(allow: bool) -> Client {
        Client::new(&FederationConfig { allow_http_loopback: allow, ..FederationConfig::from_env(false) }).unwrap()
    }

    #[test]
    fn url_policy() {
        let strict = client(false);
        let dev = client(true);
        assert!(strict.allowed("https://mastodon.example/inbox"));
        assert!(!strict.allowed("http://mastodon.example/inbox"));
        assert!(!strict.allowed("http://127.0.0.1:8080/inbox"));
        assert!(!strict.allowed("https://127.0.0.1:8080/inbox"), "loopback only with the switch");
        assert!(!strict.allowed("https://10.1.2.3/inbox"), "never a private address");
        assert!(!strict.allowed("https://user:pw@mastodon.example/inbox"));
        assert!(dev.allowed("http://127.0.0.1:8080/inbox"));
        assert!(dev.allowed("http://localhost:8080/inbox"));
        assert!(dev.allowed("http://[::1]:8080/inbox"));
        assert!(!dev.allowed("http://192.168.1.2/inbox"));
        assert!(!dev.allowed("https://192.168.1.2/inbox"));
        assert!(!dev.allowed("http://example.com/inbox"));
        assert!(!dev.allowed("ftp://127.0.0.1/inbox"));
        assert!(!dev.allowed("javascript:alert(1)"));
        assert!(!dev.allowed("not a url"));
    }

    #[test]
    fn only_http_urls_are_kept_from_an_actor_document() {
        let doc = json!({"id": "https://a.example/u/x", "inbox": "https://a.example/u/x/inbox",
            "preferredUsername": "x", "url": "javascript:alert(1)",
            "icon": {"type": "Image", "url": "javascript:alert(2)"},
            "endpoints": {"sharedInbox": "data:text/html,hi"}});
        let a = RemoteActor::from_json(&doc).unwrap();
        assert_eq!((a.url.as_str(), a.image.as_str()), ("", ""));
        assert_eq!(a.shared_inbox, a.inbox);
        let doc = json!({"id": "https://a.example/u/x", "inbox": "https://a.example/u/x/inbox",
            "url": [{"type": "Link", "href": "https://a.example/@x"}], "icon": [{"url": "https://a.example/i.png"}]});
        let a = RemoteActor::from_json(&doc).unwrap();
        assert_eq!((a.url.as_str(), a.image.as_str()), ("https://a.example/@x", "https://a.example/i.png"));
        let no_url = json!({"id": "https://a.example/u/x", "inbox": "https://a.example/u/x/inbox"});
        assert_eq!(RemoteActor::from_json(&no_url).unwrap().url, "https://a.example/u/x");
        for bad in [
            json!({"id": "javascript:alert(1)", "inbox": "https://a.example/inbox"}),
            json!({"id": "https://a.example/u/x", "inbox": "javascript:alert(1)"}),
            json!({"id": "https://a.example/u/x"}),
        ] {
            assert!(RemoteActor::from_json(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn keys_are_found_only_under_their_own_id_and_owner() {
        let k = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 1024).unwrap();
        use rsa::pkcs8::EncodePublicKey;
        let pem = RsaPublicKey::from(&k).to_public_key_pem(rsa::pkcs8::LineEnding::LF).unwrap();
        let actor = "https://a.example/u/x";
        let doc = json!({"id": actor, "publicKey": [{"id": "https://a.example/u/x#k1", "publicKeyPem": pem},
            {"id": "https://a.example/u/x#k2"}]});
        let keys = listed_keys(&doc);
        assert_eq!(keys.len(), 2);
        assert!(keys[0].key.is_some() && keys[1].key.is_none());
        let key_doc = json!({"id": "https://a.example/u/x#k2", "owner": actor, "publicKeyPem": pem});
        assert!(key_document(&key_doc, "https://a.example/u/x#k2", actor).is_some());
        assert!(key_document(&key_doc, "https://a.example/u/x#k3", actor).is_none(), "another id");
        assert!(key_document(&key_doc, "https://a.example/u/x#k2", "https://a.example/u/y").is_none(), "owner");
    }

    #[test]
    fn accounts_are_user_at_host() {
        assert_eq!(split_account("@a@b.example").unwrap(), ("a", "b.example"));
        for bad in ["a", "@b", "a@", "a@b/c", "a@b@c", "a@b\\c"] {
            assert!(split_account(bad).is_err(), "{bad}");
        }
    }
}
