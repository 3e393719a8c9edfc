//! Viewer JWTs from the operator's own site (a channel's "token" visibility): the signature check and
//! the claims a token must carry, verified by hand on the crates castd already has.
//!
//! - HS256 with the channel's shared `secret` (HMAC-SHA256, compared in constant time).
//! - RS256 (RSASSA-PKCS1-v1_5 with SHA-256, keys of 2048 to 4096 bits) and ES256 (ECDSA P-256, the JWS
//!   signature being the raw `r || s`, 64 bytes) with the keys of the channel's `jwksUrl`.
//!
//! No algorithm confusion: `none` and every other algorithm is refused; HS256 is checked only against
//! the shared secret, never against a JWKS key; RS256/ES256 only against a JWKS key whose `kty` (and
//! `alg`, `crv`, `use` where given) fit the token's `alg`.
//!
//! Claims: `exp` required and in the future, `nbf` and `iat` not in the future (60 s leeway each way),
//! `iss` equal to the configured issuer and `aud` (a string or an array) holding the configured
//! audience where those are set, `sub` required. The member's chat name comes from the claim the
//! settings name (`nameClaim`, default `name`), cleaned (trimmed, control characters removed) and
//! dropped when longer than [`MAX_NAME_CHARS`].
//!
//! The JWKS is fetched with a plain client (no proxy, no redirects, 5 s, http(s) only, bounded body
//! and key count): like a webhook URL, the JWKS URL is set by the channel's admin, so it is not the
//! guarded outbound client's (it may well be on the operator's own network). Each URL's keys are kept
//! for [`JWKS_FRESH`]; a token naming a key the cache lacks refetches at once, at most every
//! [`JWKS_REFETCH`] per URL. A failed fetch keeps serving the keys last fetched.
//!
//! Errors ([`JwtError`]) say what was wrong in words fit for the viewer; no key material, no body of
//! the issuer's answer (the fetch failure's detail is [`JwtError::log_detail`], for the log).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::JwtSettings;

/// The longest token taken, bytes.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The largest JWKS document taken, bytes.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// The most keys of a JWKS looked at.
pub const MAX_JWKS_KEYS: usize = 32;
/// Clock skew allowed on `exp`, `nbf` and `iat`, seconds.
pub const LEEWAY_SECS: i64 = 60;
/// The longest member name taken from the claims, characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest subject taken, bytes.
pub const MAX_SUBJECT_BYTES: usize = 256;
/// How long a fetched JWKS is used before it is fetched again.
pub const JWKS_FRESH: Duration = Duration::from_secs(600);
/// The shortest time between two fetches of one JWKS URL (an unknown `kid` refetches at once otherwise).
pub const JWKS_REFETCH: Duration = Duration::from_secs(30);
/// The JWKS fetch's time limit.
pub const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// The most JWKS URLs cached (one per channel in practice).
const MAX_CACHED_URLS: usize = 1024;

/// A verified token's member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The token's `sub`.
    pub subject: String,
    /// The member's display name from the name claim, when it has a usable one.
    pub name: Option<String>,
    /// The token's `exp`, Unix seconds.
    pub expires_at: i64,
}

/// Why a token was not accepted. The text is safe to show a viewer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("this channel accepts no tokens")]
    NotConfigured,
    #[error("the token is too long")]
    TooLong,
    #[error("the token is malformed")]
    Malformed,
    #[error("the token's algorithm is not accepted")]
    Algorithm,
    #[error("the token's signature is not valid")]
    BadSignature,
    #[error("the token was signed with a key the issuer does not list")]
    UnknownKey,
    #[error("the token has no expiry")]
    NoExpiry,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token's issuer is not accepted")]
    Issuer,
    #[error("the token's audience is not accepted")]
    Audience,
    #[error("the token has no usable subject")]
    Subject,
    /// The issuer's keys could not be fetched (`detail` is for the log).
    #[error("the token issuer's keys are unavailable")]
    KeysUnavailable { detail: String },
}

impl JwtError {
    /// What the log may say beyond the viewer's message (a JWKS fetch failure's cause).
    pub fn log_detail(&self) -> Option<&str> {
        match self {
            JwtError::KeysUnavailable { detail } => Some(detail),
            _ => None,
        }
    }
}

/// A public key of a JWKS, parsed.
#[derive(Debug, Clone)]
enum PublicKey {
    Rsa(rsa::RsaPublicKey),
    Es256(p256::ecdsa::VerifyingKey),
}

#[derive(Debug, Clone)]
struct Jwk {
    kid: Option<String>,
    key: PublicKey,
}

/// One JWKS URL's keys.
#[derive(Default)]
struct JwksEntry {
    keys: Option<Arc<Vec<Jwk>>>,
    /// When `keys` were fetched.
    fetched: Option<Instant>,
    /// The last fetch tried, successful or not.
    tried: Option<Instant>,
}

/// Checks viewer JWTs; holds the JWKS cache. One per daemon (shared by every channel) or per channel.
pub struct JwtVerifier {
    /// None built: nothing is fetched (the guard is never left out).
    client: Result<reqwest::Client, String>,
    /// Where the JWKS URL may lead (a channel's: through the guard, `outbound::Reach`).
    reach: crate::outbound::Reach,
    cache: parking_lot::Mutex<HashMap<String, Arc<tokio::sync::Mutex<JwksEntry>>>>,
    fresh: Duration,
    refetch: Duration,
}

impl Default for JwtVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl JwtVerifier {
    pub fn new() -> JwtVerifier {
        Self::with_timing(JWKS_FRESH, JWKS_REFETCH)
    }

    /// A verifier whose JWKS cache keeps keys for `fresh` and refetches at most every `refetch`.
    pub fn with_timing(fresh: Duration, refetch: Duration) -> JwtVerifier {
        Self::reaching(crate::outbound::Reach::Anywhere, fresh, refetch)
    }

    /// A verifier whose JWKS URLs go only where `reach` lets them (a channel's: a refused address
    /// gives no keys, so tokens signed with them are refused).
    pub fn reaching(reach: crate::outbound::Reach, fresh: Duration, refetch: Duration) -> JwtVerifier {
        let builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(JWKS_TIMEOUT)
            .user_agent(concat!("castd/", env!("CARGO_PKG_VERSION")));
        let client = reach.client(builder).map_err(|e| e.to_string());
        JwtVerifier { client, reach, cache: parking_lot::Mutex::new(HashMap::new()), fresh, refetch }
    }

    /// A verifier with the default cache timing whose JWKS URLs go only where `reach` lets them.
    pub fn for_reach(reach: crate::outbound::Reach) -> JwtVerifier {
        Self::reaching(reach, JWKS_FRESH, JWKS_REFETCH)
    }

    /// Verify `token` against the channel's issuer settings at Unix time `now`.
    pub async fn verify(&self, cfg: &JwtSettings, token: &str, now: i64) -> Result<Member, JwtError> {
        if !cfg.configured() {
            return Err(JwtError::NotConfigured);
        }
        let token = token.trim();
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::TooLong);
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [header_b64, payload_b64, sig_b64] = parts[..] else {
            return Err(JwtError::Malformed);
        };
        let header: Value = serde_json::from_slice(&b64(header_b64)?).map_err(|_| JwtError::Malformed)?;
        let header = header.as_object().ok_or(JwtError::Malformed)?;
        // Extensions that must be understood: castd understands none.
        if header.contains_key("crit") {
            return Err(JwtError::Malformed);
        }
        let alg = header.get("alg").and_then(Value::as_str).ok_or(JwtError::Malformed)?;
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(k)) => Some(k.as_str()),
            Some(_) => return Err(JwtError::Malformed),
        };
        let signature = b64(sig_b64)?;
        let signed = &token[..header_b64.len() + 1 + payload_b64.len()];
        match alg {
            "HS256" if !cfg.secret.is_empty() => verify_hs256(&cfg.secret, signed.as_bytes(), &signature)?,
            "RS256" | "ES256" if !cfg.jwks_url.is_empty() => {
                self.verify_jwks(&cfg.jwks_url, alg, kid, signed.as_bytes(), &signature).await?
            }
            _ => return Err(JwtError::Algorithm),
        }
        let claims: Value = serde_json::from_slice(&b64(payload_b64)?).map_err(|_| JwtError::Malformed)?;
        check_claims(cfg, &claims, now)
    }

    async fn verify_jwks(
        &self,
        url: &str,
        alg: &str,
        kid: Option<&str>,
        signed: &[u8],
        signature: &[u8],
    ) -> Result<(), JwtError> {
        let entry = {
            let mut cache = self.cache.lock();
            if !cache.contains_key(url) && cache.len() >= MAX_CACHED_URLS {
                // Rare (a thousand channels changing issuers): start over rather than track ages.
                cache.clear();
            }
            cache.entry(url.to_string()).or_default().clone()
        };
        // One fetch per URL at a time: the others wait for its keys.
        let mut entry = entry.lock().await;
        let now = Instant::now();
        let stale = entry.fetched.is_none_or(|t| now.duration_since(t) >= self.fresh);
        let may_fetch = entry.tried.is_none_or(|t| now.duration_since(t) >= self.refetch);
        let mut fetch_error = None;
        if stale && may_fetch {
            fetch_error = self.refresh(url, &mut entry).await.err();
        }
        let listed =
            |keys: &Option<Arc<Vec<Jwk>>>| keys.as_deref().is_some_and(|k| !candidates(k, alg, kid).is_empty());
        if !listed(&entry.keys) && kid.is_some() && fetch_error.is_none() && !(stale && may_fetch) {
            // A key the cache lacks: the issuer may have rotated its keys.
            if entry.tried.is_none_or(|t| Instant::now().duration_since(t) >= self.refetch) {
                fetch_error = self.refresh(url, &mut entry).await.err();
            }
        }
        let keys = entry.keys.clone();
        drop(entry);
        let found = keys.as_deref().map(|k| candidates(k, alg, kid)).unwrap_or_default();
        if found.is_empty() {
            return Err(match (&keys, fetch_error) {
                (None, Some(e)) => e,
                (None, None) => JwtError::KeysUnavailable { detail: "no keys fetched yet".into() },
                _ => JwtError::UnknownKey,
            });
        }
        if found.iter().any(|k| verify_with(&k.key, signed, signature)) {
            Ok(())
        } else {
            Err(JwtError::BadSignature)
        }
    }

    async fn refresh(&self, url: &str, entry: &mut JwksEntry) -> Result<(), JwtError> {
        entry.tried = Some(Instant::now());
        let unavailable = |detail: String| JwtError::KeysUnavailable { detail };
        let keys = self.fetch(url).await.map_err(unavailable)?;
        entry.keys = Some(Arc::new(keys));
        entry.fetched = Some(Instant::now());
        Ok(())
    }

    /// Fetch and parse the JWKS at `url` (the error is for the log).
    async fn fetch(&self, url: &str) -> Result<Vec<Jwk>, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("the JWKS URL is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("the JWKS URL is not http(s)".into());
        }
        // Judged at each fetch (literal addresses bypass the resolver; the server admin's switch may change).
        if let Err(e) = self.reach.check_url(&parsed) {
            tracing::warn!("the JWKS URL's address is not allowed: {e}");
            return Err(format!("the JWKS URL's address is not allowed: {e}"));
        }
        let client = self.client.as_ref().map_err(|e| format!("the JWKS client: {e}"))?;
        let mut resp = client.get(parsed).send().await.map_err(|e| format!("fetching the JWKS: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the JWKS URL answered {}", resp.status()));
        }
        if resp.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
            return Err("the JWKS is too large".into());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("reading the JWKS: {e}"))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err("the JWKS is too large".into());
            }
            body.extend_from_slice(&chunk);
        }
        parse_jwks(&body)
    }
}

/// Base64url without padding (a trailing `=` is tolerated).
fn b64(part: &str) -> Result<Vec<u8>, JwtError> {
    URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).map_err(|_| JwtError::Malformed)
}

fn verify_hs256(secret: &str, signed: &[u8], signature: &[u8]) -> Result<(), JwtError> {
    // HMAC takes keys of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).map_err(|_| JwtError::BadSignature)?;
    mac.update(signed);
    mac.verify_slice(signature).map_err(|_| JwtError::BadSignature)
}

fn verify_with(key: &PublicKey, signed: &[u8], signature: &[u8]) -> bool {
    match key {
        PublicKey::Rsa(pk) => {
            let digest = Sha256::digest(signed);
            pk.verify(rsa::Pkcs1v15Sign::new::<Sha256>(), &digest, signature).is_ok()
        }
        PublicKey::Es256(vk) => {
            use p256::ecdsa::signature::Verifier;
            let Ok(sig) = p256::ecdsa::Signature::from_slice(signature) else { return false };
            signature.len() == 64 && vk.verify(signed, &sig).is_ok()
        }
    }
}

/// The keys of `keys` that may check a token of `alg` naming `kid` (all of the right type without one).
fn candidates<'a>(keys: &'a [Jwk], alg: &str, kid: Option<&str>) -> Vec<&'a Jwk> {
    keys.iter()
        .filter(|k| matches!((&k.key, alg), (PublicKey::Rsa(_), "RS256") | (PublicKey::Es256(_), "ES256")))
        .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
        .collect()
}

/// The usable keys of a JWKS document: RSA keys for RS256 and P-256 keys for ES256 (a key whose `alg`
/// or `use` says otherwise is left out), at most [`MAX_JWKS_KEYS`] looked at.
fn parse_jwks(body: &[u8]) -> Result<Vec<Jwk>, String> {
    let doc: Value = serde_json::from_slice(body).map_err(|_| "the JWKS is not JSON".to_string())?;
    let keys = doc.get("keys").and_then(Value::as_array).ok_or("the JWKS has no \"keys\" array")?;
    Ok(keys.iter().take(MAX_JWKS_KEYS).filter_map(parse_jwk).collect())
}

fn parse_jwk(jwk: &Value) -> Option<Jwk> {
    let field = |name: &str| jwk.get(name).and_then(Value::as_str);
    let bytes = |name: &str| field(name).and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok());
    if field("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let kid = field("kid").map(str::to_string);
    let alg = field("alg");
    let key = match field("kty")? {
        "RSA" if alg.is_none_or(|a| a == "RS256") => {
            let n = rsa::BigUint::from_bytes_be(&bytes("n")?);
            let e = rsa::BigUint::from_bytes_be(&bytes("e")?);
            if n.bits() < 2048 {
                return None;
            }
            PublicKey::Rsa(rsa::RsaPublicKey::new(n, e).ok()?)
        }
        "EC" if alg.is_none_or(|a| a == "ES256") && field("crv") == Some("P-256") => {
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != 32 || y.len() != 32 {
                return None;
            }
            let point = p256::EncodedPoint::from_affine_coordinates(
                p256::FieldBytes::from_slice(&x),
                p256::FieldBytes::from_slice(&y),
                false,
            );
            PublicKey::Es256(p256::ecdsa::VerifyingKey::from_encoded_point(&point).ok()?)
        }
        _ => return None,
    };
    Some(Jwk { kid, key })
}

/// A numeric date claim (JSON number; fractions are cut).
fn date(claims: &Value, name: &str) -> Result<Option<i64>, JwtError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).map(Some).ok_or(JwtError::Malformed),
    }
}

fn check_claims(cfg: &JwtSettings, claims: &Value, now: i64) -> Result<Member, JwtError> {
    if !claims.is_object() {
        return Err(JwtError::Malformed);
    }
    let exp = date(claims, "exp")?.ok_or(JwtError::NoExpiry)?;
    if now >= exp.saturating_add(LEEWAY_SECS) {
        return Err(JwtError::Expired);
    }
    for name in ["nbf", "iat"] {
        if date(claims, name)?.is_some_and(|t| t > now.saturating_add(LEEWAY_SECS)) {
            return Err(JwtError::NotYetValid);
        }
    }
    if !cfg.issuer.is_empty() && claims.get("iss").and_then(Value::as_str) != Some(cfg.issuer.as_str()) {
        return Err(JwtError::Issuer);
    }
    if !cfg.audience.is_empty() {
        let ok = match claims.get("aud") {
            Some(Value::String(a)) => *a == cfg.audience,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(cfg.audience.as_str())),
            _ => false,
        };
        if !ok {
            return Err(JwtError::Audience);
        }
    }
    let subject = claims.get("sub").and_then(Value::as_str).unwrap_or_default();
    if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES || subject.chars().any(char::is_control) {
        return Err(JwtError::Subject);
    }
    let name_claim = if cfg.name_claim.trim().is_empty() { "name" } else { cfg.name_claim.trim() };
    let name = claims.get(name_claim).and_then(Value::as_str).and_then(clean_name);
    Ok(Member { subject: subject.to_string(), name, expires_at: exp })
}

/// A display name from a claim: control characters removed, trimmed; none when empty or too long.
fn clean_name(raw: &str) -> Option<String> {
    let cleaned: String = raw.chars().filter(|c| !c.is_control()).collect();
    let cleaned = cleaned.trim();
    (!cleaned.is_empty() && cleaned.chars().count() <= MAX_NAME_CHARS).then(|| cleaned.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const NOW: i64 = 1_700_000_000;

    fn enc(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    fn claims() -> Value {
        json!({"sub": "member-7", "name": "  Ada\u{7} Lovelace ", "exp": NOW + 600, "iat": NOW, "iss": "https://shop.example", "aud": ["castd", "other"]})
    }

    fn hs256(secret: &str, header: &Value, claims: &Value) -> String {
        let signed = format!("{}.{}", enc(header), enc(claims));
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    fn hs_cfg() -> JwtSettings {
        JwtSettings {
            secret: "a shared secret".into(),
            issuer: "https://shop.example".into(),
            audience: "castd".into(),
            ..Default::default()
        }
    }

    fn hs_header() -> Value {
        json!({"alg": "HS256", "typ": "JWT"})
    }

    async fn check(cfg: &JwtSettings, token: &str) -> Result<Member, JwtError> {
        JwtVerifier::new().verify(cfg, token, NOW).await
    }

    #[tokio::test]
    async fn hs256_good_token_names_the_member() {
        let m = check(&hs_cfg(), &hs256("a shared secret", &hs_header(), &claims())).await.unwrap();
        assert_eq!(m, Member { subject: "member-7".into(), name: Some("Ada Lovelace".into()), expires_at: NOW + 600 });
    }

    #[tokio::test]
    async fn hs256_refusals() {
        let cfg = hs_cfg();
        let good = hs256("a shared secret", &hs_header(), &claims());
        // Another secret; a changed payload under the old signature.
        assert_eq!(check(&cfg, &hs256("another secret", &hs_header(), &claims())).await, Err(JwtError::BadSignature));
        let mut c = claims();
        c["sub"] = json!("admin");
        let forged = format!("{}.{}.{}", enc(&hs_header()), enc(&c), good.rsplit('.').next().unwrap());
        assert_eq!(check(&cfg, &forged).await, Err(JwtError::BadSignature));
        // Expired beyond the leeway, and within it.
        let mut c = claims();
        c["exp"] = json!(NOW - 61);
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::Expired));
        c["exp"] = json!(NOW - 30);
        assert!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await.is_ok());
        // No expiry; not yet valid; issued in the future.
        let mut c = claims();
        c.as_object_mut().unwrap().remove("exp");
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::NoExpiry));
        let mut c = claims();
        c["nbf"] = json!(NOW + 120);
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::NotYetValid));
        let mut c = claims();
        c["iat"] = json!(NOW + 120);
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::NotYetValid));
        // Wrong issuer, wrong audience (string and array), no subject.
        let mut c = claims();
        c["iss"] = json!("https://evil.example");
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::Issuer));
        let mut c = claims();
        c["aud"] = json!("other");
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::Audience));
        c["aud"] = json!(["a", "b"]);
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::Audience));
        c["aud"] = json!("castd");
        assert!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await.is_ok());
        let mut c = claims();
        c.as_object_mut().unwrap().remove("sub");
        assert_eq!(check(&cfg, &hs256("a shared secret", &hs_header(), &c)).await, Err(JwtError::Subject));
        // Garbage, too long, no issuer configured.
        assert_eq!(check(&cfg, "a.b").await, Err(JwtError::Malformed));
        assert_eq!(check(&cfg, "!!.!!.!!").await, Err(JwtError::Malformed));
        assert_eq!(check(&cfg, &"a".repeat(MAX_TOKEN_BYTES + 1)).await, Err(JwtError::TooLong));
        assert_eq!(check(&JwtSettings::default(), &good).await, Err(JwtError::NotConfigured));
        let crit = json!({"alg": "HS256", "crit": ["exp"]});
        assert_eq!(check(&cfg, &hs256("a shared secret", &crit, &claims())).await, Err(JwtError::Malformed));
    }

    #[tokio::test]
    async fn alg_none_and_other_algorithms_are_refused() {
        let cfg = hs_cfg();
        let unsigned = format!("{}.{}.", enc(&json!({"alg": "none"})), enc(&claims()));
        assert_eq!(check(&cfg, &unsigned).await, Err(JwtError::Algorithm));
        let none_upper = format!("{}.{}.", enc(&json!({"alg": "None"})), enc(&claims()));
        assert_eq!(check(&cfg, &none_upper).await, Err(JwtError::Algorithm));
        let hs384 = hs256("a shared secret", &json!({"alg": "HS384"}), &claims());
        assert_eq!(check(&cfg, &hs384).await, Err(JwtError::Algorithm));
        // RS256 with only a shared secret configured: never checked with the secret.
        let rs = hs256("a shared secret", &json!({"alg": "RS256"}), &claims());
        assert_eq!(check(&cfg, &rs).await, Err(JwtError::Algorithm));
    }

    #[test]
    fn names_are_cleaned_or_dropped() {
        assert_eq!(clean_name(" \tBob\u{0} \n"), Some("Bob".into()));
        assert_eq!(clean_name("\u{1b}"), None);
        assert_eq!(clean_name(&"x".repeat(64)), Some("x".repeat(64)));
        assert_eq!(clean_name(&"x".repeat(65)), None);
    }

    #[test]
    fn the_name_claim_is_configurable() {
        let cfg = JwtSettings { secret: "s".into(), name_claim: "nick".into(), ..Default::default() };
        let c = json!({"sub": "u", "exp": NOW + 10, "name": "Ignored", "nick": "Nicky"});
        assert_eq!(check_claims(&cfg, &c, NOW).unwrap().name.as_deref(), Some("Nicky"));
        let c = json!({"sub": "u", "exp": NOW + 10, "nick": 5});
        assert_eq!(check_claims(&cfg, &c, NOW).unwrap().name, None);
    }

    // --- JWKS: RS256 and ES256 with test-made keys, the JWKS served on loopback ---

    struct Issuer {
        url: String,
        jwks: Arc<parking_lot::Mutex<Value>>,
        fetches: Arc<AtomicUsize>,
    }

    async fn issuer(jwks: Value) -> Issuer {
        let jwks = Arc::new(parking_lot::Mutex::new(jwks));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (j, f) = (jwks.clone(), fetches.clone());
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let (j, f) = (j.clone(), f.clone());
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    axum::Json(j.lock().clone())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Issuer { url: format!("http://{addr}/jwks.json"), jwks, fetches }
    }

    fn rsa_key() -> (rsa::RsaPrivateKey, Value) {
        use rsa::traits::PublicKeyParts;
        let key = rsa::RsaPrivateKey::new(&mut rand::rngs::OsRng, 2048).unwrap();
        let public = key.to_public_key();
        let jwk = json!({
            "kty": "RSA", "alg": "RS256", "use": "sig", "kid": "rsa-1",
            "n": URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
            "e": URL_SAFE_NO_PAD.encode(public.e().to_bytes_be()),
        });
        (key, jwk)
    }

    fn ec_key(kid: &str) -> (p256::ecdsa::SigningKey, Value) {
        let key = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
        let point = key.verifying_key().to_encoded_point(false);
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()),
            "y": URL_SAFE_NO_PAD.encode(point.y().unwrap()),
        });
        (key, jwk)
    }

    fn rs256(key: &rsa::RsaPrivateKey, kid: &str, claims: &Value) -> String {
        let signed = format!("{}.{}", enc(&json!({"alg": "RS256", "kid": kid})), enc(claims));
        let digest = Sha256::digest(signed.as_bytes());
        let sig = key.sign(rsa::Pkcs1v15Sign::new::<Sha256>(), &digest).unwrap();
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    fn es256(key: &p256::ecdsa::SigningKey, kid: &str, claims: &Value) -> String {
        use p256::ecdsa::signature::Signer;
        let signed = format!("{}.{}", enc(&json!({"alg": "ES256", "kid": kid})), enc(claims));
        let sig: p256::ecdsa::Signature = key.sign(signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()))
    }

    fn jwks_cfg(url: &str) -> JwtSettings {
        JwtSettings {
            jwks_url: url.into(),
            issuer: "https://shop.example".into(),
            audience: "castd".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn rs256_and_es256_from_a_jwks() {
        let (rsa_key, rsa_jwk) = rsa_key();
        let (ec_key, ec_jwk) = ec_key("ec-1");
        let issuer = issuer(json!({"keys": [rsa_jwk, ec_jwk]})).await;
        let cfg = jwks_cfg(&issuer.url);
        let v = JwtVerifier::new();

        let m = v.verify(&cfg, &rs256(&rsa_key, "rsa-1", &claims()), NOW).await.unwrap();
        assert_eq!(m.subject, "member-7");
        let m = v.verify(&cfg, &es256(&ec_key, "ec-1", &claims()), NOW).await.unwrap();
        assert_eq!(m.name.as_deref(), Some("Ada Lovelace"));
        // Cached: one fetch for both.
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);

        // A key the issuer does not list, and a signature by another key under a listed kid.
        let (other_ec, _) = self::ec_key("ec-1");
        assert_eq!(v.verify(&cfg, &es256(&other_ec, "ec-1", &claims()), NOW).await, Err(JwtError::BadSignature));
        let (other_rsa, _) = self::rsa_key();
        assert_eq!(v.verify(&cfg, &rs256(&other_rsa, "rsa-1", &claims()), NOW).await, Err(JwtError::BadSignature));
        assert_eq!(v.verify(&cfg, &es256(&ec_key, "nope", &claims()), NOW).await, Err(JwtError::UnknownKey));
        // A kid of the wrong type (an ES256 token naming the RSA key).
        assert_eq!(v.verify(&cfg, &es256(&ec_key, "rsa-1", &claims()), NOW).await, Err(JwtError::UnknownKey));
        // Claims are checked after the signature.
        let mut c = claims();
        c["iss"] = json!("https://evil.example");
        assert_eq!(v.verify(&cfg, &rs256(&rsa_key, "rsa-1", &c), NOW).await, Err(JwtError::Issuer));
    }

    #[tokio::test]
    async fn no_alg_confusion_between_the_secret_and_jwks_keys() {
        let (rsa_key, rsa_jwk) = rsa_key();
        let issuer = issuer(json!({"keys": [rsa_jwk.clone()]})).await;
        // HS256 signed with the public RSA key's JWK text as the HMAC secret, against a JWKS-only channel.
        let cfg = jwks_cfg(&issuer.url);
        let public_text = serde_json::to_string(&rsa_jwk).unwrap();
        let hs = hs256(&public_text, &json!({"alg": "HS256", "kid": "rsa-1"}), &claims());
        assert_eq!(check(&cfg, &hs).await, Err(JwtError::Algorithm));
        // A JWK whose alg says otherwise is not used for RS256.
        *issuer.jwks.lock() = json!({"keys": [{"kty": "RSA", "alg": "RS512", "kid": "rsa-1",
            "n": rsa_jwk["n"], "e": rsa_jwk["e"]}]});
        let v = JwtVerifier::new();
        assert_eq!(v.verify(&cfg, &rs256(&rsa_key, "rsa-1", &claims()), NOW).await, Err(JwtError::UnknownKey));
        // An encryption key is not a signing key.
        *issuer.jwks.lock() = json!({"keys": [{"kty": "RSA", "use": "enc", "kid": "rsa-1",
            "n": rsa_jwk["n"], "e": rsa_jwk["e"]}]});
        let v = JwtVerifier::new();
        assert_eq!(v.verify(&cfg, &rs256(&rsa_key, "rsa-1", &claims()), NOW).await, Err(JwtError::UnknownKey));
    }

    #[tokio::test]
    async fn an_unknown_kid_refetches_at_most_every_refetch_interval() {
        let (old, old_jwk) = ec_key("old");
        let (new, new_jwk) = ec_key("new");
        let issuer = issuer(json!({"keys": [old_jwk.clone()]})).await;
        let cfg = jwks_cfg(&issuer.url);
        let v = JwtVerifier::with_timing(JWKS_FRESH, Duration::from_millis(300));
        v.verify(&cfg, &es256(&old, "old", &claims()), NOW).await.unwrap();
        *issuer.jwks.lock() = json!({"keys": [old_jwk, new_jwk]});
        // Within the refetch interval: not fetched again.
        assert_eq!(v.verify(&cfg, &es256(&new, "new", &claims()), NOW).await, Err(JwtError::UnknownKey));
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(350)).await;
        // After it: the rotated key is fetched at once.
        v.verify(&cfg, &es256(&new, "new", &claims()), NOW).await.unwrap();
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
        // A known kid does not fetch.
        v.verify(&cfg, &es256(&old, "old", &claims()), NOW).await.unwrap();
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_unreachable_or_bad_jwks_is_unavailable_not_a_secret_leak() {
        let (key, _) = ec_key("k");
        let cfg = jwks_cfg("http://127.0.0.1:9/jwks.json");
        let err = check(&cfg, &es256(&key, "k", &claims())).await.unwrap_err();
        assert!(matches!(err, JwtError::KeysUnavailable { .. }), "{err:?}");
        assert_eq!(err.to_string(), "the token issuer's keys are unavailable");
        assert!(err.log_detail().is_some());
        let cfg = jwks_cfg("file:///etc/passwd");
        assert!(matches!(check(&cfg, &es256(&key, "k", &claims())).await, Err(JwtError::KeysUnavailable { .. })));
        let issuer = issuer(json!({"keys": "nope"})).await;
        let cfg = jwks_cfg(&issuer.url);
        assert!(matches!(check(&cfg, &es256(&key, "k", &claims())).await, Err(JwtError::KeysUnavailable { .. })));
    }
}
