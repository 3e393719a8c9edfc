//! Outbound requests: the URL policy (https, or http on a loopback host with the development switch),
//! signed GETs of remote actors and keys, signed POSTs of activities, and a small cache of remote
//! actors' keys.
//!
//! The key cache holds at most `KEY_CACHE_MAX` keys for `KEY_CACHE_TTL`; when full it is emptied
//! (refetching is cheap, growth is not).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;
use rsa::RsaPublicKey;
use serde_json::Value;

use super::keys::KeyPair;
use super::{signatures, FedError, FederationConfig, AP_CONTENT_TYPE};

/// Largest remote document read.
pub const MAX_DOCUMENT: usize = 1024 * 1024;
/// Time limit of a fetch.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const KEY_CACHE_TTL: Duration = Duration::from_secs(3600);
const KEY_CACHE_MAX: usize = 10_000;
const ACCEPT: &str =
    "application/activity+json, application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\"";

/// What castd keeps of a remote actor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteActor {
    pub iri: String,
    pub inbox: String,
    /// The shared inbox, or the inbox when there is none.
    pub shared_inbox: String,
    pub name: String,
    pub username: String,
    pub image: String,
    /// The profile page.
    pub url: String,
}

impl RemoteActor {
    /// Read an actor document.
    pub fn from_json(v: &Value) -> Option<RemoteActor> {
        let iri = v.get("id")?.as_str()?.to_string();
        let inbox = v.get("inbox")?.as_str()?.to_string();
        let shared = v
            .pointer("/endpoints/sharedInbox")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| inbox.clone());
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let image = match v.get("icon") {
            Some(Value::Object(o)) => o.get("url").and_then(Value::as_str).unwrap_or_default().to_string(),
            Some(Value::Array(a)) => {
                a.first().and_then(|i| i.get("url")).and_then(Value::as_str).unwrap_or_default().to_string()
            }
            _ => String::new(),
        };
        let url = match v.get("url") {
            Some(Value::String(s)) => s.clone(),
            _ => iri.clone(),
        };
        let username = text("preferredUsername");
        let name = if text("name").is_empty() { username.clone() } else { text("name") };
        Some(RemoteActor { iri, inbox, shared_inbox: shared, name, username, image, url })
    }

    /// `user@host` of the actor.
    pub fn account(&self) -> String {
        let host = url::Url::parse(&self.iri).map(|u| signatures::authority(&u)).unwrap_or_default();
        format!("{}@{host}", self.username)
    }
}

/// A remote public key and what it belongs to.
#[derive(Clone)]
pub struct RemoteKey {
    pub key: RsaPublicKey,
    pub owner: String,
    /// The owner's actor document when the key was fetched from it.
    pub actor: Option<RemoteActor>,
}

/// The outbound HTTP client.
pub struct Client {
    http: reqwest::Client,
    allow_http_loopback: bool,
    keys: Mutex<HashMap<String, (RemoteKey, Instant)>>,
}

/// Whether `host` is a loopback address or `localhost`.
pub fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        url::Host::Domain(d) => {
            d.eq_ignore_ascii_case("localhost") || d.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
    }
}

impl Client {
    pub fn new(config: &FederationConfig) -> Result<Self, FedError> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(32)
            .user_agent(concat!("castd/", env!("CARGO_PKG_VERSION"), " (ActivityPub)"))
            .build()
            .map_err(|e| FedError::Remote(format!("HTTP client: {e}")))?;
        Ok(Self { http, allow_http_loopback: config.allow_http_loopback, keys: Mutex::new(HashMap::new()) })
    }

    /// Parse `s` and check it may be contacted: https, or http on a loopback host with the switch.
    pub fn check_url(&self, s: &str) -> Result<url::Url, FedError> {
        let u = url::Url::parse(s).map_err(|e| FedError::Policy(format!("'{s}' is not a URL: {e}")))?;
        let host = u.host().ok_or_else(|| FedError::Policy(format!("'{s}' has no host")))?;
        match u.scheme() {
            "https" => Ok(u),
            "http" if self.allow_http_loopback && is_loopback_host(&host) => Ok(u),
            "http" if is_loopback_host(&host) => Err(FedError::Policy(format!(
                "'{s}' is plain http; it is allowed for loopback hosts only with --federation-allow-http-loopback"
            ))),
            _ => Err(FedError::Policy(format!("'{s}' must be an https URL"))),
        }
    }

    /// Whether `s` is a URL the policy allows.
    pub fn allowed(&self, s: &str) -> bool {
        self.check_url(s).is_ok()
    }

    async fn read_limited(resp: reqwest::Response) -> Result<Vec<u8>, FedError> {
        if resp.content_length().is_some_and(|n| n as usize > MAX_DOCUMENT) {
            return Err(FedError::Remote("the remote document is too large".into()));
        }
        let mut resp = resp;
        let mut out = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| FedError::Remote(e.to_string()))? {
            if out.len() + chunk.len() > MAX_DOCUMENT {
                return Err(FedError::Remote("the remote document is too large".into()));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// GET a JSON document (signed when `signer` is given), following no redirects.
    pub async fn get_json(
        &self,
        url: &str,
        accept: &str,
        signer: Option<(&KeyPair, &str)>,
    ) -> Result<(u16, Value), FedError> {
        let u = self.check_url(url)?;
        let mut req = self.http.get(u.clone()).header("accept", accept);
        if let Some((kp, key_id)) = signer {
            for (k, v) in signatures::sign(&kp.private, key_id, "GET", &u, None, chrono::Utc::now()) {
                req = req.header(k, v);
            }
        }
        let resp = req.send().await.map_err(|e| FedError::Remote(format!("GET {url}: {e}")))?;
        let status = resp.status().as_u16();
        let bytes = Self::read_limited(resp).await?;
        if !(200..300).contains(&status) {
            return Ok((status, Value::Null));
        }
        let v = serde_json::from_slice(&bytes).map_err(|e| FedError::Remote(format!("GET {url}: not JSON: {e}")))?;
        Ok((status, v))
    }

    /// GET an ActivityPub document; non-2xx is an error.
    pub async fn fetch_ap(&self, url: &str, signer: Option<(&KeyPair, &str)>) -> Result<Value, FedError> {
        match self.get_json(url, ACCEPT, signer).await? {
            (200..=299, v) => Ok(v),
            (status, _) => Err(FedError::Remote(format!("GET {url}: HTTP {status}"))),
        }
    }

    /// Fetch a remote actor.
    pub async fn fetch_actor(&self, iri: &str, signer: Option<(&KeyPair, &str)>) -> Result<RemoteActor, FedError> {
        let v = self.fetch_ap(iri, signer).await?;
        RemoteActor::from_json(&v).ok_or_else(|| FedError::Remote(format!("{iri} is not an actor")))
    }

    /// The public key `key_id` names: from the cache, or fetched (signed when `signer` is given).
    pub async fn key(
        &self,
        key_id: &str,
        refresh: bool,
        signer: Option<(&KeyPair, &str)>,
    ) -> Result<RemoteKey, FedError> {
        if !refresh {
            if let Some((k, at)) = self.keys.lock().get(key_id) {
                if at.elapsed() < KEY_CACHE_TTL {
                    return Ok(k.clone());
                }
            }
        }
        let doc_url = key_id.split('#').next().unwrap_or(key_id);
        let doc = self.fetch_ap(doc_url, signer).await?;
        let key = parse_key(&doc, key_id).ok_or_else(|| FedError::Remote(format!("no public key {key_id}")))?;
        let mut cache = self.keys.lock();
        if cache.len() >= KEY_CACHE_MAX {
            cache.clear();
        }
        cache.insert(key_id.to_string(), (key.clone(), Instant::now()));
        Ok(key)
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
            .http
            .post(u.clone())
            .timeout(timeout)
            .header("content-type", AP_CONTENT_TYPE)
            .header("accept", ACCEPT)
            .body(body.to_vec());
        for (k, v) in signatures::sign(&kp.private, key_id, "POST", &u, Some(body), chrono::Utc::now()) {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|e| FedError::Remote(format!("POST {inbox}: {e}")))?;
        Ok(resp.status().as_u16())
    }

    /// A plain GET of a JSON API document (Owncast's `/api/config`, `/api/status`, WebFinger).
    pub async fn get_plain_json(&self, url: &str) -> Result<Value, FedError> {
        match self.get_json(url, "application/json, application/jrd+json", None).await? {
            (200..=299, v) => Ok(v),
            (status, _) => Err(FedError::Remote(format!("GET {url}: HTTP {status}"))),
        }
    }

    /// Resolve `user@host` (or `@user@host`) through WebFinger to the actor IRI.
    pub async fn webfinger(&self, account: &str) -> Result<String, FedError> {
        let account = account.trim().trim_start_matches('@');
        let (user, host) = account
            .split_once('@')
            .filter(|(u, h)| !u.is_empty() && !h.is_empty() && !h.contains(['/', '?', '#', '@']))
            .ok_or_else(|| FedError::Policy(format!("'{account}' is not an account of the form user@host")))?;
        let host_url = url::Url::parse(&format!("http://{host}/"))
            .map_err(|_| FedError::Policy(format!("'{host}' is not a host name")))?;
        let scheme = match host_url.host() {
            Some(h) if self.allow_http_loopback && is_loopback_host(&h) => "http",
            _ => "https",
        };
        let q: String = url::form_urlencoded::byte_serialize(format!("acct:{user}@{host}").as_bytes()).collect();
        let jrd = self.get_plain_json(&format!("{scheme}://{host}/.well-known/webfinger?resource={q}")).await?;
        jrd.get("links")
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
            .map(str::to_string)
            .ok_or_else(|| FedError::Remote(format!("{account} has no ActivityPub actor")))
    }
}

/// Find `key_id` in an actor document (`publicKey`, object or array) or a key document.
fn parse_key(doc: &Value, key_id: &str) -> Option<RemoteKey> {
    let candidates: Vec<&Value> = match doc.get("publicKey") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(o @ Value::Object(_)) => vec![o],
        _ if doc.get("publicKeyPem").is_some() => vec![doc],
        _ => Vec::new(),
    };
    let entry = candidates
        .iter()
        .find(|k| k.get("id").and_then(Value::as_str) == Some(key_id))
        .or_else(|| candidates.first())?;
    let pem = entry.get("publicKeyPem")?.as_str()?;
    let key =
        RsaPublicKey::from_public_key_pem(pem.trim()).or_else(|_| RsaPublicKey::from_pkcs1_pem(pem.trim())).ok()?;
    let owner =
        entry.get("owner").and_then(Value::as_str).or_else(|| doc.get("id").and_then(Value::as_str))?.to_string();
    let actor = RemoteActor::from_json(doc).filter(|a| a.iri == owner);
    Some(RemoteKey { key, owner, actor })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(dev.allowed("http://127.0.0.1:8080/inbox"));
        assert!(dev.allowed("http://localhost:8080/inbox"));
        assert!(dev.allowed("http://[::1]:8080/inbox"));
        assert!(!dev.allowed("http://192.168.1.2/inbox"));
        assert!(!dev.allowed("http://example.com/inbox"));
        assert!(!dev.allowed("ftp://127.0.0.1/inbox"));
        assert!(!dev.allowed("not a url"));
    }
}
