//! The IndieAuth client for chat sign-in: a chat user enters their website, castd discovers its
//! authorization endpoint and sends the browser there with PKCE (S256) and a random `state`; the
//! callback redeems the code at that endpoint, checks that the `me` it returns is on the same host
//! (and port) as the URL the user entered and — when it is not that URL itself — that `me`, discovered
//! afresh, names the very authorization endpoint (and issuer) that vouched for it (IndieAuth §5.3,
//! authorization server confirmation: on a host with many users, one user's endpoint may not vouch
//! for another's page), and marks the chat user authenticated through `UserTokens::sign_in` (provider
//! `indieauth`, identity `me`, display name from the profile).
//!
//! Pending flows live in memory, keyed by `state`, for at most [`FLOW_TTL`]; a state is used once
//! (taken out on the callback whatever the outcome), and at most [`MAX_FLOWS`] run at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use url::Url;

use super::discovery::{self, Fetcher};
use super::{Profile, Refused};

/// How long a user has to come back from their authorization endpoint.
pub const FLOW_TTL: Duration = Duration::from_secs(10 * 60);
/// Most sign-ins in progress at once.
pub const MAX_FLOWS: usize = 10_000;
/// Longest website URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// The callback path (the `redirect_uri` this server sends).
pub const CALLBACK_PATH: &str = "/api/auth/indieauth/callback";

/// One sign-in in progress.
#[derive(Debug, Clone)]
struct Flow {
    user_id: String,
    verifier: String,
    entered: Url,
    endpoint: Url,
    issuer: Option<String>,
    client_id: String,
    redirect_uri: String,
    created: Instant,
}

/// A finished sign-in: the chat user, and who the endpoint says they are.
#[derive(Debug, Clone)]
pub struct Verified {
    pub user_id: String,
    pub me: String,
    pub profile: Option<Profile>,
}

/// The pending flows.
#[derive(Default)]
pub struct Flows {
    flows: Mutex<HashMap<String, Flow>>,
}

/// The PKCE S256 challenge of a verifier (base64url of its SHA-256, no padding).
pub fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The URL a user typed, made absolute: `example.com` means `https://example.com/`.
pub fn normalize_profile_url(entered: &str) -> Result<Url, Refused> {
    let entered = entered.trim();
    if entered.is_empty() {
        return Err(Refused::new("invalid_request", "enter the URL of your website"));
    }
    if entered.len() > MAX_URL_LEN {
        return Err(Refused::new("invalid_request", "the URL is too long"));
    }
    let with_scheme = if entered.contains("://") { entered.to_string() } else { format!("https://{entered}") };
    let url = Url::parse(&with_scheme)
        .map_err(|e| Refused::new("invalid_request", format!("{entered} is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(Refused::new("invalid_request", format!("{entered} is not an http or https URL")));
    }
    Ok(url)
}

/// Whether two URLs are on the same host and port (scheme defaults applied).
pub fn same_site(a: &Url, b: &Url) -> bool {
    let host = |u: &Url| u.host_str().map(|h| h.trim_end_matches('.').to_ascii_lowercase());
    host(a).is_some() && host(a) == host(b) && a.port_or_known_default() == b.port_or_known_default()
}

impl Flows {
    /// Discover the user's endpoint and open a flow; returns the URL to send the browser to.
    pub async fn start(
        &self,
        fetcher: &Fetcher,
        server_url: &str,
        user_id: &str,
        auth_host: &str,
        ttl: Duration,
    ) -> Result<String, Refused> {
        let base = Url::parse(server_url.trim_end_matches('/')).map_err(|_| {
            Refused::new("invalid_request", "IndieAuth sign-in needs this server's URL (serverurl) to be set")
        })?;
        let client_id = format!("{}/", base.as_str().trim_end_matches('/'));
        let redirect_uri = format!("{}{CALLBACK_PATH}", base.as_str().trim_end_matches('/'));
        let entered = normalize_profile_url(auth_host)?;
        let endpoints = discovery::discover(fetcher, &entered).await?;
        let state = crate::password::random_token(32);
        let verifier = crate::password::random_token(64);
        let mut redirect = endpoints.authorization.clone();
        redirect
            .query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("me", entered.as_str());
        let flow = Flow {
            user_id: user_id.to_string(),
            verifier,
            entered,
            endpoint: endpoints.authorization,
            issuer: endpoints.issuer,
            client_id,
            redirect_uri,
            created: Instant::now(),
        };
        let mut flows = self.flows.lock();
        flows.retain(|_, f| f.created.elapsed() < ttl);
        if flows.len() >= MAX_FLOWS {
            return Err(Refused::new("temporarily_unavailable", "too many sign-ins in progress; try again later"));
        }
        flows.insert(state, flow);
        Ok(redirect.to_string())
    }

    /// Drop flows older than `ttl`.
    pub fn prune(&self, ttl: Duration) {
        self.flows.lock().retain(|_, f| f.created.elapsed() < ttl);
    }

    /// The callback: take the flow of `state`, redeem `code` at its endpoint and check the answer.
    pub async fn finish(&self, fetcher: &Fetcher, callback: &Callback, ttl: Duration) -> Result<Verified, Refused> {
        let state = callback.state.as_deref().unwrap_or_default();
        let flow = self.flows.lock().remove(state).filter(|f| f.created.elapsed() < ttl);
        let Some(flow) = flow else {
            return Err(Refused::new("invalid_state", "unknown or expired sign-in (state); start the sign-in again"));
        };
        if let Some(error) = callback.error.as_deref().filter(|e| !e.is_empty()) {
            let description = callback.error_description.clone().unwrap_or_default();
            let error = if error == "access_denied" { "access_denied" } else { "authorization_failed" };
            return Err(Refused::new(
                error,
                if description.is_empty() { "the sign-in was not approved".to_string() } else { description },
            ));
        }
        if let (Some(expected), Some(got)) = (flow.issuer.as_deref(), callback.iss.as_deref()) {
            if expected != got {
                return Err(Refused::new("invalid_issuer", format!("the answer came from {got}, not {expected}")));
            }
        }
        let code = callback.code.as_deref().unwrap_or_default();
        if code.is_empty() {
            return Err(Refused::new("invalid_request", "the callback carries no code"));
        }
        let answer = fetcher
            .post_form(
                flow.endpoint.clone(),
                &[
                    ("grant_type", "authorization_code"),
                    ("code", code),
                    ("client_id", &flow.client_id),
                    ("redirect_uri", &flow.redirect_uri),
                    ("code_verifier", &flow.verifier),
                ],
            )
            .await?;
        let doc: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        if !(200..300).contains(&answer.status) || doc.get("error").is_some() {
            let error = doc.get("error").and_then(|v| v.as_str()).unwrap_or("invalid_grant");
            let description = doc
                .get("error_description")
                .or_else(|| doc.get("errorDescription"))
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| format!("the authorization endpoint answered HTTP {}", answer.status));
            return Err(Refused::new(
                "invalid_grant",
                format!("{} refused the code: {error}: {description}", flow.endpoint.host_str().unwrap_or_default()),
            ));
        }
        let me = doc.get("me").and_then(|v| v.as_str()).unwrap_or_default();
        let me_url = Url::parse(me)
            .map_err(|_| Refused::new("invalid_grant", "the authorization endpoint returned no valid `me` URL"))?;
        if !same_site(&me_url, &flow.entered) {
            return Err(Refused::new(
                "invalid_me",
                format!("the authorization endpoint vouched for {me_url}, which is not on {}", flow.entered),
            ));
        }
        if me_url != flow.entered {
            confirm_authorization_server(fetcher, &me_url, &flow).await?;
        }
        let profile = doc.get("profile").and_then(|p| serde_json::from_value::<Profile>(p.clone()).ok());
        Ok(Verified { user_id: flow.user_id, me: me_url.to_string(), profile })
    }
}

/// IndieAuth §5.3: a returned `me` other than the URL the user entered must itself declare the
/// authorization endpoint (and issuer) the code was redeemed at.
async fn confirm_authorization_server(fetcher: &Fetcher, me: &Url, flow: &Flow) -> Result<(), Refused> {
    let declared = discovery::discover(fetcher, me).await.map_err(|e| {
        Refused::new(
            "invalid_me",
            format!(
                "the authorization endpoint vouched for {me}, whose endpoint cannot be confirmed: {}",
                e.description
            ),
        )
    })?;
    let same_issuer = match (&flow.issuer, &declared.issuer) {
        (Some(used), Some(named)) => used == named,
        (None, None) => true,
        _ => false,
    };
    if declared.authorization != flow.endpoint || !same_issuer {
        return Err(Refused::new(
            "invalid_me",
            format!(
                "the authorization endpoint {} vouched for {me}, which names another authorization endpoint ({})",
                flow.endpoint, declared.authorization
            ),
        ));
    }
    Ok(())
}

/// The callback's query.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Callback {
    /// The authorization code.
    pub code: Option<String>,
    /// The state this server sent.
    pub state: Option<String>,
    /// The issuer (authorization server) identifier, when the server sends one.
    pub iss: Option<String>,
    /// An OAuth error (`access_denied` when the sign-in was refused).
    pub error: Option<String>,
    pub error_description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn profile_urls() {
        assert_eq!(normalize_profile_url("example.com").unwrap().as_str(), "https://example.com/");
        assert_eq!(normalize_profile_url(" http://a.example:8080 ").unwrap().as_str(), "http://a.example:8080/");
        assert!(normalize_profile_url("").is_err());
        assert!(normalize_profile_url("ftp://x.example").is_err());
        assert!(normalize_profile_url("http://").is_err());
    }

    #[test]
    fn sites() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(same_site(&u("https://A.example/"), &u("https://a.example/me")));
        assert!(same_site(&u("https://a.example:443/"), &u("https://a.example/")));
        assert!(!same_site(&u("https://a.example/"), &u("https://b.example/")));
        assert!(!same_site(&u("http://127.0.0.1:1/"), &u("http://127.0.0.1:2/")));
        assert!(!same_site(&u("http://localhost:1/"), &u("http://127.0.0.1:1/")));
    }
}
