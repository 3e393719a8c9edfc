//! Fediverse chat sign-in: a chat user names their account, castd sends it a one-time code by direct
//! message, and the user types the code back; a valid code marks the chat user authenticated
//! (`UserTokens::sign_in` with provider `fediverse` and identity `user@host`).
//!
//! Codes live in memory only, at most `MAX_CODES`, each valid for `code_ttl` and used once; a user
//! asking again replaces their previous code.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;
use rand::Rng;

use super::actor::{escape, post_note, Audience};
use super::{FedError, Federation, Local};
use crate::http::SignIn;

/// Most outstanding codes.
pub const MAX_CODES: usize = 10_000;

struct Pending {
    user_id: String,
    account: String,
    expires: Instant,
}

/// Outstanding codes by code.
#[derive(Default)]
pub struct Codes {
    pending: Mutex<HashMap<String, Pending>>,
}

/// Why a code was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    Invalid,
    Expired,
}

impl Codes {
    fn insert(&self, code: String, p: Pending) {
        let mut map = self.pending.lock();
        let now = Instant::now();
        map.retain(|_, v| v.expires > now && v.user_id != p.user_id);
        if map.len() >= MAX_CODES {
            // drop the one closest to expiry
            if let Some(k) = map.iter().min_by_key(|(_, v)| v.expires).map(|(k, _)| k.clone()) {
                map.remove(&k);
            }
        }
        map.insert(code, p);
    }

    /// Take the code: the user and account it was issued for.
    fn take(&self, code: &str, user_id: Option<&str>) -> Result<(String, String), VerifyError> {
        let mut map = self.pending.lock();
        match map.get(code) {
            None => Err(VerifyError::Invalid),
            Some(p) if user_id.is_some_and(|u| u != p.user_id) => Err(VerifyError::Invalid),
            Some(p) if p.expires <= Instant::now() => {
                map.remove(code);
                Err(VerifyError::Expired)
            }
            Some(_) => map.remove(code).map(|p| (p.user_id, p.account)).ok_or(VerifyError::Invalid),
        }
    }
}

/// Send a code to `account` for chat user `user_id`.
pub async fn request(fed: &Federation, local: &Local, user_id: &str, account: &str) -> Result<String, FedError> {
    let actor_iri = fed.client.webfinger(account).await?;
    let kp = fed.keys.get().await?;
    let actor = fed.client.fetch_actor(&actor_iri, Some((&kp, &local.key_id))).await?;
    let code = format!("{:06}", rand::thread_rng().gen_range(0..1_000_000));
    let s = fed.settings.get();
    let content = format!(
        "<p><span class=\"h-card\"><a href=\"{}\" class=\"u-url mention\">@{}</a></span> Your one-time code to sign in to the chat of {}: <strong>{code}</strong></p>",
        escape(&actor.url),
        escape(&actor.username),
        escape(&s.instance.name)
    );
    let who = actor.account();
    fed.codes.insert(
        code,
        Pending { user_id: user_id.to_string(), account: who.clone(), expires: Instant::now() + fed.config.code_ttl },
    );
    post_note(fed, local, content, &[], Audience::Direct(actor)).await?;
    Ok(who)
}

/// Check `code` (for `user_id` when the request names one) and sign the user in; returns the account.
pub async fn verify(fed: &Federation, code: &str, user_id: Option<&str>) -> Result<String, VerifyError> {
    let (user, account) = fed.codes.take(code.trim(), user_id)?;
    let signed = fed
        .users
        .sign_in(&user, SignIn { provider: "fediverse".into(), identity: account.clone(), display_name: None })
        .await;
    signed.map(|_| account).ok_or(VerifyError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn codes_are_single_use_and_expire() {
        let c = Codes::default();
        let p = |u: &str, secs: u64| Pending {
            user_id: u.into(),
            account: "a@b".into(),
            expires: Instant::now() + Duration::from_secs(secs),
        };
        c.insert("111111".into(), p("u1", 60));
        assert_eq!(c.take("111111", Some("u2")), Err(VerifyError::Invalid));
        assert_eq!(c.take("111111", Some("u1")), Ok(("u1".into(), "a@b".into())));
        assert_eq!(c.take("111111", Some("u1")), Err(VerifyError::Invalid));
        c.insert("222222".into(), p("u1", 0));
        assert_eq!(c.take("222222", None), Err(VerifyError::Expired));
        // a new code replaces the user's previous one
        c.insert("333333".into(), p("u3", 60));
        c.insert("444444".into(), p("u3", 60));
        assert_eq!(c.take("333333", None), Err(VerifyError::Invalid));
        assert!(c.take("444444", None).is_ok());
    }
}
