//! castd as the streamer's IndieAuth server: the streamer signs in to IndieAuth clients with this
//! server's URL as their identity (`me`).
//!
//! The authorization request (`GET /api/auth/provider/indieauth`, admin auth) is validated first —
//! `redirect_uri` must be on the `client_id`'s host and port, or listed by the client as a
//! `redirect_uri` link on its `client_id` page, so castd never redirects anywhere else — and then shown
//! to the admin as an approval page. Approving issues a code that is single-use (taken out on the
//! first redemption attempt, right or wrong), lives at most [`MAX_CODE_TTL`] (shorter with
//! `CASTD_INDIEAUTH_CODE_SECS`, for tests) and is bound to the client_id, redirect_uri and PKCE S256
//! challenge. Redeeming it (`POST`, form or JSON) answers `me` (the server URL) and the profile
//! (server name, URL and logo).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use url::Url;

use super::client::{challenge, same_site};
use super::discovery::{self, Fetcher};
use super::Refused;

/// Longest life of an authorization code (IndieAuth recommends at most 10 minutes).
pub const MAX_CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// How long an authorization request waits for the admin's decision.
pub const REQUEST_TTL: Duration = Duration::from_secs(10 * 60);
/// Most pending requests plus codes kept.
pub const MAX_PENDING: usize = 1000;
/// Longest parameter accepted.
const MAX_PARAM: usize = 2048;

/// An authorization request as the client sent it (all optional, so a missing one gets a clear
/// message instead of an extractor rejection).
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct AuthRequest {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub me: Option<String>,
    pub scope: Option<String>,
}

/// A validated request waiting for the admin.
#[derive(Debug, Clone)]
pub struct Pending {
    pub client_id: String,
    pub redirect_uri: Url,
    pub state: String,
    pub code_challenge: String,
    created: Instant,
}

/// An issued code.
#[derive(Debug, Clone)]
struct Grant {
    client_id: String,
    redirect_uri: String,
    code_challenge: String,
    created: Instant,
}

/// A code redemption, from a form or JSON (`code_verifier` or `codeVerifier`).
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct Redeem {
    pub grant_type: Option<String>,
    pub code: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_verifier: Option<String>,
    #[serde(rename = "codeVerifier")]
    pub code_verifier_camel: Option<String>,
}

/// Pending requests and issued codes.
#[derive(Default)]
pub struct Provider {
    pending: Mutex<HashMap<String, Pending>>,
    codes: Mutex<HashMap<String, Grant>>,
}

fn required<'a>(v: &'a Option<String>, name: &str) -> Result<&'a str, Refused> {
    match v.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() && s.len() <= MAX_PARAM => Ok(s),
        Some(s) if s.len() > MAX_PARAM => Err(Refused::new("invalid_request", format!("{name} is too long"))),
        _ => Err(Refused::new("invalid_request", format!("{name} is required"))),
    }
}

impl Provider {
    /// Validate an authorization request (see the module doc) and keep it for the admin; returns
    /// the request id the approval form carries.
    pub async fn request(&self, fetcher: &Fetcher, req: &AuthRequest) -> Result<(String, Pending), Refused> {
        let client_id = required(&req.client_id, "client_id")?;
        let redirect = required(&req.redirect_uri, "redirect_uri")?;
        let state = required(&req.state, "state")?;
        let code_challenge = required(&req.code_challenge, "code_challenge")?;
        if let Some(rt) = req.response_type.as_deref().filter(|r| !r.is_empty()) {
            if rt != "code" && rt != "id" {
                return Err(Refused::new("unsupported_response_type", format!("response_type {rt} is not supported")));
            }
        }
        let method = req.code_challenge_method.as_deref().unwrap_or("S256");
        if method != "S256" {
            return Err(Refused::new("invalid_request", "only the S256 code_challenge_method is supported"));
        }
        let client_url = Url::parse(client_id)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| Refused::new("invalid_request", "client_id must be an http or https URL"))?;
        let redirect_uri = Url::parse(redirect)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| Refused::new("invalid_request", "redirect_uri must be an http or https URL"))?;
        if !(same_site(&client_url, &redirect_uri) && client_url.scheme() == redirect_uri.scheme()) {
            // Not on the client's own host: it must publish this redirect URI on its client_id page.
            let page = fetcher.get(client_url.clone(), "text/html").await.map_err(|e| {
                Refused::new(
                    "invalid_request",
                    format!("redirect_uri is not on the client's host, and its client_id page cannot be read: {e}"),
                )
            })?;
            let links = discovery::page_links(&page);
            let published = links
                .iter()
                .filter(|l| l.rels.iter().any(|r| r == "redirect_uri"))
                .filter_map(|l| page.url.join(&l.href).ok())
                .any(|u| u == redirect_uri);
            if !published {
                return Err(Refused::new(
                    "invalid_request",
                    format!("redirect_uri {redirect_uri} is neither on the host of {client_url} nor published by it"),
                ));
            }
        }
        let pending = Pending {
            client_id: client_id.to_string(),
            redirect_uri,
            state: state.to_string(),
            code_challenge: code_challenge.to_string(),
            created: Instant::now(),
        };
        let id = crate::password::random_token(32);
        let mut map = self.pending.lock();
        map.retain(|_, p| p.created.elapsed() < REQUEST_TTL);
        if map.len() >= MAX_PENDING {
            return Err(Refused::new("temporarily_unavailable", "too many sign-in requests are waiting"));
        }
        map.insert(id.clone(), pending.clone());
        Ok((id, pending))
    }

    /// The admin's decision on request `id`: the URL to send the browser back to (with a code, or
    /// with `error=access_denied`).
    pub fn decide(&self, id: &str, approve: bool, issuer: &str, code_ttl: Duration) -> Result<Url, Refused> {
        let pending = self.pending.lock().remove(id).filter(|p| p.created.elapsed() < REQUEST_TTL);
        let Some(p) = pending else {
            return Err(Refused::new(
                "invalid_request",
                "unknown or expired sign-in request; start again from the app",
            ));
        };
        let mut back = p.redirect_uri.clone();
        if approve {
            let code = crate::password::random_token(40);
            let mut codes = self.codes.lock();
            codes.retain(|_, g| g.created.elapsed() < code_ttl);
            if codes.len() >= MAX_PENDING {
                return Err(Refused::new("temporarily_unavailable", "too many codes are waiting to be redeemed"));
            }
            codes.insert(
                code.clone(),
                Grant {
                    client_id: p.client_id,
                    redirect_uri: p.redirect_uri.to_string(),
                    code_challenge: p.code_challenge,
                    created: Instant::now(),
                },
            );
            back.query_pairs_mut().append_pair("code", &code).append_pair("state", &p.state).append_pair("iss", issuer);
        } else {
            back.query_pairs_mut()
                .append_pair("error", "access_denied")
                .append_pair("error_description", "the streamer did not approve the sign-in")
                .append_pair("state", &p.state)
                .append_pair("iss", issuer);
        }
        Ok(back)
    }

    /// Redeem a code (single use: it is gone after this call whatever the outcome).
    pub fn redeem(&self, r: &Redeem, code_ttl: Duration) -> Result<(), Refused> {
        let code = required(&r.code, "code")?;
        let grant = self.codes.lock().remove(code);
        let Some(grant) = grant else {
            return Err(Refused::new("invalid_grant", "unknown or already used code"));
        };
        if grant.created.elapsed() >= code_ttl {
            return Err(Refused::new("invalid_grant", "the code has expired"));
        }
        if let Some(gt) = r.grant_type.as_deref().filter(|g| !g.is_empty()) {
            if gt != "authorization_code" {
                return Err(Refused::new("unsupported_grant_type", format!("grant_type {gt} is not supported")));
            }
        }
        if required(&r.client_id, "client_id")? != grant.client_id {
            return Err(Refused::new("invalid_grant", "the code was issued to another client_id"));
        }
        if required(&r.redirect_uri, "redirect_uri")? != grant.redirect_uri {
            return Err(Refused::new("invalid_grant", "the code was issued for another redirect_uri"));
        }
        let verifier = match (&r.code_verifier, &r.code_verifier_camel) {
            (Some(v), _) if !v.is_empty() => v.as_str(),
            (_, Some(v)) if !v.is_empty() => v.as_str(),
            _ => return Err(Refused::new("invalid_request", "code_verifier is required")),
        };
        if challenge(verifier) != grant.code_challenge {
            return Err(Refused::new("invalid_grant", "the code_verifier does not match the code_challenge"));
        }
        Ok(())
    }

    /// Drop expired requests and codes.
    pub fn prune(&self, code_ttl: Duration) {
        self.pending.lock().retain(|_, p| p.created.elapsed() < REQUEST_TTL);
        self.codes.lock().retain(|_, g| g.created.elapsed() < code_ttl);
    }
}

/// HTML-escape text for the approval page.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// The admin's approval page for request `id`.
pub fn approval_page(id: &str, p: &Pending, me: &str, server_name: &str) -> String {
    let (id, client, redirect, me, name) =
        (escape(id), escape(&p.client_id), escape(p.redirect_uri.as_str()), escape(me), escape(server_name));
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in with {name}</title>
<style>body{{font-family:system-ui,sans-serif;background:#16161d;color:#eee;max-width:36rem;margin:4rem auto;padding:0 1rem}}
code{{background:#2a2a35;padding:.1rem .3rem;border-radius:3px;word-break:break-all}}button{{font-size:1rem;padding:.5rem 1.2rem;margin-right:.6rem;border-radius:6px;border:0;cursor:pointer}}
.approve{{background:#7c5cff;color:#fff}}.deny{{background:#444;color:#eee}}</style></head>
<body><main id="indieauth-approval">
<h1>Sign in with your stream's identity</h1>
<p>The app <code id="client-id">{client}</code> asks to sign you in as <code id="me">{me}</code>.</p>
<p>After you decide, your browser returns to <code id="redirect-uri">{redirect}</code>.</p>
<form method="post" action="/api/auth/provider/indieauth/approve">
<input type="hidden" name="request" value="{id}">
<button class="approve" type="submit" name="decision" value="approve">Approve</button>
<button class="deny" type="submit" name="decision" value="deny">Deny</button>
</form></main></body></html>
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(client: &str, redirect: &str) -> AuthRequest {
        AuthRequest {
            response_type: Some("code".into()),
            client_id: Some(client.into()),
            redirect_uri: Some(redirect.into()),
            state: Some("st".into()),
            code_challenge: Some(challenge("verifier-verifier-verifier-verifier-verifier")),
            code_challenge_method: Some("S256".into()),
            ..Default::default()
        }
    }

    fn redeem(code: &str, verifier: &str) -> Redeem {
        Redeem {
            code: Some(code.into()),
            client_id: Some("https://app.example/".into()),
            redirect_uri: Some("https://app.example/cb".into()),
            code_verifier: Some(verifier.into()),
            ..Default::default()
        }
    }

    fn code_of(u: &Url) -> String {
        u.query_pairs().find(|(k, _)| k == "code").map(|(_, v)| v.into_owned()).unwrap()
    }

    #[tokio::test]
    async fn codes_are_bound_single_use_and_expire() {
        let f = Fetcher::new(false).unwrap();
        let p = Provider::default();
        let ttl = Duration::from_secs(600);
        let (id, _) = p.request(&f, &req("https://app.example/", "https://app.example/cb")).await.unwrap();
        let back = p.decide(&id, true, "https://me.example/", ttl).unwrap();
        assert!(back.as_str().starts_with("https://app.example/cb?code="));
        assert!(back.query_pairs().any(|(k, v)| k == "state" && v == "st"));
        // The request is gone once decided.
        assert!(p.decide(&id, true, "x", ttl).is_err());
        let code = code_of(&back);
        assert_eq!(p.redeem(&redeem(&code, "wrong"), ttl).unwrap_err().error, "invalid_grant");
        // Burned by the failed attempt.
        let right = "verifier-verifier-verifier-verifier-verifier";
        assert_eq!(p.redeem(&redeem(&code, right), ttl).unwrap_err().description, "unknown or already used code");

        let (id, _) = p.request(&f, &req("https://app.example/", "https://app.example/cb")).await.unwrap();
        let code = code_of(&p.decide(&id, true, "x", ttl).unwrap());
        let mut other = redeem(&code, right);
        other.redirect_uri = Some("https://app.example/other".into());
        assert!(p.redeem(&other, ttl).is_err());

        let (id, _) = p.request(&f, &req("https://app.example/", "https://app.example/cb")).await.unwrap();
        let code = code_of(&p.decide(&id, true, "x", ttl).unwrap());
        assert!(p.redeem(&redeem(&code, right), ttl).is_ok());
        assert!(p.redeem(&redeem(&code, right), ttl).is_err());

        let (id, _) = p.request(&f, &req("https://app.example/", "https://app.example/cb")).await.unwrap();
        let code = code_of(&p.decide(&id, true, "x", ttl).unwrap());
        assert_eq!(p.redeem(&redeem(&code, right), Duration::ZERO).unwrap_err().description, "the code has expired");
    }

    #[tokio::test]
    async fn requests_are_validated() {
        let f = Fetcher::new(false).unwrap();
        let p = Provider::default();
        let mut r = req("https://app.example/", "https://app.example/cb");
        r.code_challenge_method = Some("plain".into());
        assert!(p.request(&f, &r).await.is_err());
        let mut r = req("https://app.example/", "https://app.example/cb");
        r.state = None;
        assert_eq!(p.request(&f, &r).await.unwrap_err().description, "state is required");
        // Another host, whose client_id page is on a private address: refused without a fetch.
        let r = req("http://10.1.2.3/", "https://evil.example/cb");
        assert!(p.request(&f, &r).await.is_err());
        let r = req("javascript:alert(1)", "https://app.example/cb");
        assert!(p.request(&f, &r).await.is_err());
        assert!(p.decide("nope", true, "x", MAX_CODE_TTL).is_err());
    }

    #[test]
    fn page_escapes() {
        let p = Pending {
            client_id: "https://a.example/\"><script>".into(),
            redirect_uri: Url::parse("https://a.example/cb").unwrap(),
            state: "s".into(),
            code_challenge: "c".into(),
            created: Instant::now(),
        };
        let html = approval_page("id1", &p, "https://me.example/", "<b>");
        assert!(!html.contains("<script>"));
        assert!(html.contains("&lt;b&gt;"));
        assert!(html.contains(r#"name="request" value="id1""#));
    }
}
