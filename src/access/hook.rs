//! The admission hook: the operator's URL asked before a viewer plays or a publisher goes live (for
//! ticketing and paywalls).
//!
//! castd POSTs `{channel, action: "play"|"publish", subject, address, userAgent, time}` as JSON,
//! signed like a webhook: `X-Castd-Signature: sha256=<hex HMAC-SHA256 of the body with the hook's
//! secret>` (no header without a secret). A 2xx answer allows; any other status denies, with the
//! reason the answer gives (its JSON `message` or `reason`, else its text; cleaned, at most
//! [`MAX_REASON_CHARS`] characters; else "Admission denied"), which the viewer is shown. No answer
//! within [`TIMEOUT`] (or a network error) is `Unreachable`: the caller decides (play on a private
//! channel fails closed, a publisher with a valid key is let in).
//!
//! Answers are cached per (channel, URL, action, subject, address) for the hook's `cacheSeconds`, in a
//! bounded map ([`MAX_CACHED`] entries, the oldest evicted first); `Unreachable` is never cached.
//! The last verdict for each is also kept for [`RECENT_VERDICT`] (whatever `cacheSeconds` says), for
//! the ways out after the start of watching ([`AdmissionHook::ask_recent`]): a viewer refused at the
//! master playlist is refused on its variant playlists and segments too, without a question a segment.
//!
//! Only a 4xx answer's reason reaches the viewer: any other refusal (a 5xx, a 3xx) is shown as
//! [`DEFAULT_REASON`], since its body may be an internal service's (a stack trace, a token).
//!
//! The client is a plain one (no proxy, no redirects): like a webhook's, the URL is the channel
//! admin's and may be on the operator's own network.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::HookSettings;

/// How long the hook has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// The most answers kept.
pub const MAX_CACHED: usize = 10_000;
/// The longest reason shown, characters.
pub const MAX_REASON_CHARS: usize = 200;
/// The longest answer body read for a reason, bytes.
const MAX_ANSWER_BYTES: usize = 16 * 1024;
/// How long the last verdict for a viewer holds for its ways out after the start of watching.
pub const RECENT_VERDICT: Duration = Duration::from_secs(60);
/// The longest time an answer is kept, whatever the settings say.
const MAX_CACHE_SECONDS: u32 = 3600;
/// The reason of a denial that gives none.
pub const DEFAULT_REASON: &str = "Admission denied";

/// What the viewer or publisher wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Play,
    Publish,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Play => "play",
            Action::Publish => "publish",
        }
    }
}

/// One question to the hook.
#[derive(Debug, Clone)]
pub struct AdmissionRequest {
    /// The channel's slug (`default` for the root channel).
    pub channel: String,
    pub action: Action,
    /// The viewer's pass subject, or for a publish the stream key's comment (never the key itself).
    pub subject: Option<String>,
    pub address: Option<IpAddr>,
    pub user_agent: Option<String>,
}

/// The hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Denied, with the reason to show the viewer.
    Deny(String),
    /// No answer (network error or timeout), with what went wrong for the log.
    Unreachable(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    channel: String,
    url: String,
    action: Action,
    subject: Option<String>,
    address: Option<IpAddr>,
}

impl CacheKey {
    /// What a verdict is kept under: the channel, the hook's URL, the action, who and from where.
    fn of(cfg: &HookSettings, req: &AdmissionRequest) -> CacheKey {
        CacheKey {
            channel: req.channel.clone(),
            url: cfg.url.clone(),
            action: req.action,
            subject: req.subject.clone(),
            address: req.address,
        }
    }
}

#[derive(Default)]
struct Cache {
    answers: HashMap<CacheKey, (Verdict, Instant)>,
    /// Insertion order, to evict the oldest (an entry replaced since is skipped by its stamp).
    order: VecDeque<(CacheKey, Instant)>,
}

impl Cache {
    fn get(&mut self, key: &CacheKey, ttl: Duration) -> Option<Verdict> {
        let (verdict, at) = self.answers.get(key)?;
        if at.elapsed() < ttl {
            return Some(verdict.clone());
        }
        self.answers.remove(key);
        None
    }

    fn put(&mut self, key: CacheKey, verdict: Verdict) {
        let now = Instant::now();
        let replacing = self.answers.contains_key(&key);
        while (!replacing && self.answers.len() >= MAX_CACHED) || self.order.len() >= 2 * MAX_CACHED {
            let Some((old, at)) = self.order.pop_front() else { break };
            if self.answers.get(&old).is_some_and(|(_, t)| *t == at) {
                self.answers.remove(&old);
            }
        }
        self.order.push_back((key.clone(), now));
        self.answers.insert(key, (verdict, now));
    }
}

/// The admission hook client with its answer cache. One per daemon or per channel.
pub struct AdmissionHook {
    client: Result<reqwest::Client, String>,
    /// Where the hook's URL may lead (a channel's: through the guard, `outbound::Reach`).
    reach: crate::outbound::Reach,
    cache: parking_lot::Mutex<Cache>,
    /// The last verdict per key, for [`AdmissionHook::ask_recent`].
    recent: parking_lot::Mutex<Cache>,
}

impl Default for AdmissionHook {
    fn default() -> Self {
        Self::new()
    }
}

/// A reason fit to show: control characters removed, trimmed, at most [`MAX_REASON_CHARS`].
fn clean_reason(raw: &str) -> Option<String> {
    let cleaned: String = raw.chars().filter(|c| !c.is_control()).collect();
    let cleaned: String = cleaned.trim().chars().take(MAX_REASON_CHARS).collect();
    let cleaned = cleaned.trim_end();
    (!cleaned.is_empty()).then(|| cleaned.to_string())
}

/// The reason a denying answer gives.
fn reason_of(body: &[u8]) -> String {
    if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) {
        for field in ["message", "reason"] {
            if let Some(r) = map.get(field).and_then(Value::as_str).and_then(clean_reason) {
                return r;
            }
        }
        return DEFAULT_REASON.to_string();
    }
    clean_reason(&String::from_utf8_lossy(body)).unwrap_or_else(|| DEFAULT_REASON.to_string())
}

impl AdmissionHook {
    /// The server admin's hook (its URL may point anywhere).
    pub fn new() -> Self {
        Self::reaching(crate::outbound::Reach::Anywhere)
    }

    /// A hook whose URL goes only where `reach` lets it: a refused address is an unreachable hook
    /// (nothing sent; a viewer is refused, a publisher with a valid key let in, as for a hook down).
    pub fn reaching(reach: crate::outbound::Reach) -> Self {
        let builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .user_agent(concat!("castd/", env!("CARGO_PKG_VERSION")));
        // A client that cannot be built sends nothing (the hook is unreachable): the guard is never left out.
        let client = reach.client(builder).map_err(|e| e.to_string());
        AdmissionHook {
            reach,
            client,
            cache: parking_lot::Mutex::new(Cache::default()),
            recent: parking_lot::Mutex::new(Cache::default()),
        }
    }

    /// Ask the hook of `cfg` about `req` (a cached answer when there is one). The caller checks that
    /// the hook is on for the action; an empty URL allows.
    pub async fn ask(&self, cfg: &HookSettings, req: &AdmissionRequest) -> Verdict {
        if cfg.url.trim().is_empty() {
            return Verdict::Allow;
        }
        let ttl = Duration::from_secs(cfg.cache_seconds.min(MAX_CACHE_SECONDS).into());
        let key = CacheKey::of(cfg, req);
        if !ttl.is_zero() {
            if let Some(v) = self.cache.lock().get(&key, ttl) {
                return v;
            }
        }
        let verdict = self.post(cfg, req).await;
        if !matches!(verdict, Verdict::Unreachable(_)) {
            self.recent.lock().put(key.clone(), verdict.clone());
            if !ttl.is_zero() {
                self.cache.lock().put(key, verdict.clone());
            }
        }
        verdict
    }

    /// The verdict for a way out after the start of watching: the last one for the same key when it is
    /// at most [`RECENT_VERDICT`] old, else asked ([`AdmissionHook::ask`]).
    pub async fn ask_recent(&self, cfg: &HookSettings, req: &AdmissionRequest) -> Verdict {
        if cfg.url.trim().is_empty() {
            return Verdict::Allow;
        }
        let key = CacheKey::of(cfg, req);
        if let Some(v) = self.recent.lock().get(&key, RECENT_VERDICT) {
            return v;
        }
        self.ask(cfg, req).await
    }

    async fn post(&self, cfg: &HookSettings, req: &AdmissionRequest) -> Verdict {
        let url = match url::Url::parse(cfg.url.trim()) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            _ => return Verdict::Unreachable("the admission hook URL is not an http(s) URL".into()),
        };
        // Judged at each call (literal addresses bypass the resolver; the server admin's switch may change).
        if let Err(e) = self.reach.check_url(&url) {
            tracing::warn!(channel = %req.channel, "the admission hook's address is not allowed: {e}");
            return Verdict::Unreachable(format!("the admission hook's address is not allowed: {e}"));
        }
        let body = json!({
            "channel": req.channel,
            "action": req.action.as_str(),
            "subject": req.subject,
            "address": req.address.map(|a| a.to_string()),
            "userAgent": req.user_agent,
            "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        });
        let body = body.to_string().into_bytes();
        let client = match &self.client {
            Ok(c) => c,
            Err(e) => return Verdict::Unreachable(format!("the admission hook's client: {e}")),
        };
        let mut request = client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json");
        if !cfg.secret.is_empty() {
            request = request.header("X-Castd-Signature", crate::password::request_signature(&cfg.secret, &body));
        }
        let mut resp = match request.body(body).send().await {
            Ok(r) => r,
            Err(e) => return Verdict::Unreachable(format!("the admission hook did not answer: {e}")),
        };
        if resp.status().is_success() {
            return Verdict::Allow;
        }
        // An internal answer's body is not the viewer's to read.
        if !resp.status().is_client_error() {
            return Verdict::Deny(DEFAULT_REASON.to_string());
        }
        let mut answer = Vec::new();
        // The reason is read within the same time limit; a body cut short gives what came.
        while let Ok(Some(chunk)) = resp.chunk().await {
            let room = MAX_ANSWER_BYTES - answer.len();
            answer.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if answer.len() >= MAX_ANSWER_BYTES {
                break;
            }
        }
        Verdict::Deny(reason_of(&answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, StatusCode};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// The last request: its signature header and body.
    type Last = Option<(Option<String>, Vec<u8>)>;

    #[derive(Clone, Default)]
    struct Seen {
        calls: Arc<AtomicUsize>,
        last: Arc<parking_lot::Mutex<Last>>,
    }

    /// A receiver: subject "ok" is allowed, "json" denied with a JSON reason, "text" with a text one,
    /// "empty" with nothing, "slow" answers after 5 s.
    async fn receiver() -> (String, Seen) {
        let seen = Seen::default();
        let s = seen.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let s = s.clone();
                async move {
                    s.calls.fetch_add(1, Ordering::SeqCst);
                    let sig = headers.get("x-castd-signature").and_then(|v| v.to_str().ok()).map(str::to_string);
                    *s.last.lock() = Some((sig, body.to_vec()));
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    match v["subject"].as_str() {
                        Some("ok") => (StatusCode::NO_CONTENT, String::new()),
                        Some("json") => {
                            (StatusCode::FORBIDDEN, r#"{"message":"  No ticket\u0007 for this show "}"#.into())
                        }
                        Some("reason") => (StatusCode::PAYMENT_REQUIRED, r#"{"reason":"Pay first"}"#.into()),
                        Some("text") => (StatusCode::FORBIDDEN, format!("Sold out{}", "!".repeat(400))),
                        Some("internal") => {
                            (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL-ONLY token=s3cr3t at db.internal:5432".into())
                        }
                        Some("slow") => {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            (StatusCode::OK, String::new())
                        }
                        _ => (StatusCode::FORBIDDEN, String::new()),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/hook"), seen)
    }

    fn cfg(url: &str) -> HookSettings {
        HookSettings {
            url: url.into(),
            secret: "hook secret".into(),
            on_play: true,
            on_publish: true,
            cache_seconds: 30,
        }
    }

    fn req(subject: &str) -> AdmissionRequest {
        AdmissionRequest {
            channel: "church".into(),
            action: Action::Play,
            subject: Some(subject.into()),
            address: Some("192.0.2.7".parse().unwrap()),
            user_agent: Some("VLC/3.0".into()),
        }
    }

    #[tokio::test]
    async fn a_5xx_body_is_never_the_reason_shown() {
        let (url, _seen) = receiver().await;
        let v = AdmissionHook::new().ask(&cfg(&url), &req("internal")).await;
        assert_eq!(v, Verdict::Deny(DEFAULT_REASON.to_string()));
        // A 4xx answer's reason is still shown.
        let v = AdmissionHook::new().ask(&cfg(&url), &req("reason")).await;
        assert_eq!(v, Verdict::Deny("Pay first".to_string()));
    }

    #[tokio::test]
    async fn the_recent_verdict_holds_for_the_ways_out_even_without_a_cache() {
        let (url, seen) = receiver().await;
        let hook = AdmissionHook::new();
        let mut c = cfg(&url);
        c.cache_seconds = 0;
        assert!(matches!(hook.ask(&c, &req("json")).await, Verdict::Deny(_)));
        assert!(matches!(hook.ask_recent(&c, &req("json")).await, Verdict::Deny(_)));
        assert_eq!(seen.calls.load(Ordering::SeqCst), 1);
        // None yet for another viewer: asked.
        assert_eq!(hook.ask_recent(&c, &req("ok")).await, Verdict::Allow);
        assert_eq!(seen.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn allows_on_2xx_with_a_signed_body() {
        let (url, seen) = receiver().await;
        let hook = AdmissionHook::new();
        assert_eq!(hook.ask(&cfg(&url), &req("ok")).await, Verdict::Allow);
        let (sig, body) = seen.last.lock().clone().unwrap();
        assert_eq!(sig.as_deref(), Some(crate::password::request_signature("hook secret", &body).as_str()));
        assert!(sig.unwrap().starts_with("sha256="));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["channel"], "church");
        assert_eq!(v["action"], "play");
        assert_eq!(v["subject"], "ok");
        assert_eq!(v["address"], "192.0.2.7");
        assert_eq!(v["userAgent"], "VLC/3.0");
        assert!(chrono::DateTime::parse_from_rfc3339(v["time"].as_str().unwrap()).is_ok());
        // Without a secret: no signature header.
        let mut c = cfg(&url);
        c.secret.clear();
        c.cache_seconds = 0;
        assert_eq!(hook.ask(&c, &req("ok")).await, Verdict::Allow);
        assert_eq!(seen.last.lock().clone().unwrap().0, None);
    }

    #[tokio::test]
    async fn denies_with_the_answers_reason() {
        let (url, _) = receiver().await;
        let hook = AdmissionHook::new();
        let c = cfg(&url);
        assert_eq!(hook.ask(&c, &req("json")).await, Verdict::Deny("No ticket for this show".into()));
        assert_eq!(hook.ask(&c, &req("reason")).await, Verdict::Deny("Pay first".into()));
        let Verdict::Deny(text) = hook.ask(&c, &req("text")).await else { panic!("not denied") };
        assert!(text.starts_with("Sold out!"));
        assert_eq!(text.chars().count(), MAX_REASON_CHARS);
        assert_eq!(hook.ask(&c, &req("empty")).await, Verdict::Deny(DEFAULT_REASON.into()));
    }

    #[tokio::test]
    async fn unreachable_on_network_errors_and_timeouts_and_never_cached() {
        let (url, seen) = receiver().await;
        let hook = AdmissionHook::new();
        let started = Instant::now();
        assert!(matches!(hook.ask(&cfg(&url), &req("slow")).await, Verdict::Unreachable(_)));
        assert!(started.elapsed() < Duration::from_millis(4500));
        assert!(matches!(hook.ask(&cfg("http://127.0.0.1:9/hook"), &req("ok")).await, Verdict::Unreachable(_)));
        assert!(matches!(hook.ask(&cfg("ftp://example.com/"), &req("ok")).await, Verdict::Unreachable(_)));
        assert!(matches!(hook.ask(&cfg(&url), &req("slow")).await, Verdict::Unreachable(_)));
        assert_eq!(seen.calls.load(Ordering::SeqCst), 2, "an unreachable answer is asked again");
    }

    #[tokio::test]
    async fn answers_are_cached_per_action_subject_and_address() {
        let (url, seen) = receiver().await;
        let hook = AdmissionHook::new();
        let c = cfg(&url);
        assert_eq!(hook.ask(&c, &req("ok")).await, Verdict::Allow);
        assert_eq!(hook.ask(&c, &req("ok")).await, Verdict::Allow);
        assert_eq!(hook.ask(&c, &req("json")).await, hook.ask(&c, &req("json")).await);
        assert_eq!(seen.calls.load(Ordering::SeqCst), 2);
        let mut other = req("ok");
        other.address = Some("192.0.2.8".parse().unwrap());
        hook.ask(&c, &other).await;
        other.action = Action::Publish;
        hook.ask(&c, &other).await;
        assert_eq!(seen.calls.load(Ordering::SeqCst), 4);
        // cacheSeconds 0: asked every time.
        let mut c0 = c.clone();
        c0.cache_seconds = 0;
        hook.ask(&c0, &req("ok")).await;
        hook.ask(&c0, &req("ok")).await;
        assert_eq!(seen.calls.load(Ordering::SeqCst), 6);
    }

    #[test]
    fn the_cache_is_bounded_and_evicts_the_oldest() {
        let mut cache = Cache::default();
        let key = |i: usize| CacheKey {
            channel: "c".into(),
            url: "u".into(),
            action: Action::Play,
            subject: Some(i.to_string()),
            address: None,
        };
        for i in 0..MAX_CACHED + 5 {
            cache.put(key(i), Verdict::Allow);
        }
        assert_eq!(cache.answers.len(), MAX_CACHED);
        let ttl = Duration::from_secs(60);
        assert_eq!(cache.get(&key(0), ttl), None);
        assert_eq!(cache.get(&key(4), ttl), None);
        assert_eq!(cache.get(&key(5), ttl), Some(Verdict::Allow));
        assert_eq!(cache.get(&key(MAX_CACHED + 4), ttl), Some(Verdict::Allow));
        // Replacing an entry many times does not grow the order queue without bound.
        for _ in 0..3 * MAX_CACHED {
            cache.put(key(7), Verdict::Allow);
        }
        assert!(cache.order.len() <= 2 * MAX_CACHED);
    }

    #[test]
    fn signature_is_the_webhooks_scheme() {
        // RFC 4231 test case 2.
        assert_eq!(
            crate::password::request_signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
