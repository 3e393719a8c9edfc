//! Fediverse chat sign-in: a chat user names their account, castd sends it a one-time code by direct
//! message, and the same user types the code back; a valid code marks the chat user authenticated
//! (`UserTokens::sign_in` with provider `fediverse` and identity `user@host`).
//!
//! Codes: [`CODE_LEN`] characters of Crockford's base32 (50 random bits), sent as `XXXXX-XXXXX`;
//! typed back in any case, with or without the dash and spaces (`I`/`L` read as `1`, `O` as `0`).
//! Each code is bound to the chat user who asked for it (verifying needs that user's access token:
//! another user's token never reaches it), valid for `code_ttl`, used once, and burnt after
//! [`MAX_MISSES`] wrong tries. The routes add a per-address backoff on wrong codes and a per-address
//! rate on requests (`api`). Codes live in memory only, at most `MAX_CODES`; asking again replaces
//! the user's code.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;
use rand::Rng;

use super::actor::{escape, post_note, Audience};
use super::{FedError, Federation, Local};
use crate::http::SignIn;

/// Most outstanding codes.
pub const MAX_CODES: usize = 10_000;
/// Characters of a code (without the dash).
pub const CODE_LEN: usize = 10;
/// Wrong tries after which a code is burnt.
pub const MAX_MISSES: u32 = 3;
/// Crockford's base32 alphabet (no I, L, O, U).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

struct Pending {
    /// The code, normalised (no dash).
    code: String,
    account: String,
    expires: Instant,
    misses: u32,
}

/// Outstanding codes by chat user.
#[derive(Default)]
pub struct Codes {
    pending: Mutex<HashMap<String, Pending>>,
}

/// Why a code was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// This user has no code (never asked, used, burnt or replaced).
    NoCode,
    /// Not the code; `burnt` when that was the last try.
    Wrong {
        burnt: bool,
    },
    Expired,
}

/// A new random code, normalised (no dash).
fn new_code() -> String {
    let mut rng = rand::thread_rng();
    (0..CODE_LEN).map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())])).collect()
}

/// A code as shown in the message: `XXXXX-XXXXX`.
fn display(code: &str) -> String {
    let (a, b) = code.split_at(code.len() / 2);
    format!("{a}-{b}")
}

/// A typed code, normalised: no spaces or dashes, upper case, `I`/`L` as `1` and `O` as `0`.
pub fn normalise(input: &str) -> String {
    input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .take(64)
        .map(|c| match c.to_ascii_uppercase() {
            'I' | 'L' => '1',
            'O' => '0',
            c => c,
        })
        .collect()
}

impl Codes {
    fn insert(&self, user_id: &str, p: Pending) {
        let mut map = self.pending.lock();
        let now = Instant::now();
        if map.len() >= MAX_CODES && !map.contains_key(user_id) {
            map.retain(|_, v| v.expires > now);
            if map.len() >= MAX_CODES {
                // drop the one closest to expiry
                if let Some(k) = map.iter().min_by_key(|(_, v)| v.expires).map(|(k, _)| k.clone()) {
                    map.remove(&k);
                }
            }
        }
        map.insert(user_id.to_string(), p);
    }

    /// Check `code` against `user_id`'s code: the account it was issued for when right (the code is
    /// used up); a wrong code counts a miss and burns the code at [`MAX_MISSES`].
    fn take(&self, user_id: &str, code: &str) -> Result<String, VerifyError> {
        let mut map = self.pending.lock();
        let p = map.get_mut(user_id).ok_or(VerifyError::NoCode)?;
        if p.expires <= Instant::now() {
            map.remove(user_id);
            return Err(VerifyError::Expired);
        }
        if crate::password::same_secret(normalise(code).as_bytes(), p.code.as_bytes()) {
            return map.remove(user_id).map(|p| p.account).ok_or(VerifyError::NoCode);
        }
        p.misses += 1;
        let burnt = p.misses >= MAX_MISSES;
        if burnt {
            map.remove(user_id);
        }
        Err(VerifyError::Wrong { burnt })
    }
}

/// Send a code to `account` for chat user `user_id`; returns the account as `user@host`. The
/// account's host, its actor's and its inbox's must not be blocked domains.
pub async fn request(fed: &Federation, local: &Local, user_id: &str, account: &str) -> Result<String, FedError> {
    let blocked = fed.settings.get().federation.federation_blocked_domains.clone();
    let (_, host) = super::client::split_account(account)?;
    let refused = || FedError::Blocked("sign-in from that server is not allowed".into());
    if super::blocklist::is_blocked_host(&blocked, host) {
        return Err(refused());
    }
    let actor_iri = fed.client.webfinger(account).await?;
    let kp = fed.keys.get().await?;
    let actor = fed.client.fetch_actor(&actor_iri, Some((&kp, &local.key_id))).await?;
    if [&actor.iri, &actor.inbox].iter().any(|u| super::blocklist::is_blocked(&blocked, u)) {
        return Err(refused());
    }
    let code = new_code();
    let s = fed.settings.get();
    let content = format!(
        "<p><span class=\"h-card\"><a href=\"{}\" class=\"u-url mention\">@{}</a></span> Your one-time code to sign in to the chat of {}: <strong>{}</strong></p>",
        escape(if actor.url.is_empty() { &actor.iri } else { &actor.url }),
        escape(&actor.username),
        escape(&s.instance.name),
        display(&code),
    );
    let who = actor.account();
    fed.codes.insert(
        user_id,
        Pending { code, account: who.clone(), expires: Instant::now() + fed.config.code_ttl, misses: 0 },
    );
    post_note(fed, local, content, &[], Audience::Direct(actor)).await?;
    Ok(who)
}

/// Check `code` for chat user `user_id` and sign the user in; returns the account.
pub async fn verify(fed: &Federation, code: &str, user_id: &str) -> Result<String, VerifyError> {
    let account = fed.codes.take(user_id, code)?;
    let signed = fed
        .users
        .sign_in(user_id, SignIn { provider: "fediverse".into(), identity: account.clone(), display_name: None })
        .await;
    signed.map(|_| account).ok_or(VerifyError::NoCode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pending(code: &str, secs: u64) -> Pending {
        Pending {
            code: code.into(),
            account: "a@b".into(),
            expires: Instant::now() + Duration::from_secs(secs),
            misses: 0,
        }
    }

    #[test]
    fn codes_are_bound_single_use_burnt_and_expire() {
        let c = Codes::default();
        c.insert("u1", pending("ABCDE12345", 60));
        assert_eq!(c.take("u2", "ABCDE12345"), Err(VerifyError::NoCode), "another user's code is not theirs");
        assert_eq!(c.take("u1", "abcde-12345"), Ok("a@b".into()), "case, dash");
        assert_eq!(c.take("u1", "ABCDE12345"), Err(VerifyError::NoCode), "used once");

        c.insert("u1", pending("ABCDE12345", 60));
        assert_eq!(c.take("u1", "ABCDE12346"), Err(VerifyError::Wrong { burnt: false }));
        assert_eq!(c.take("u1", "ABCDE1234"), Err(VerifyError::Wrong { burnt: false }));
        assert_eq!(c.take("u1", ""), Err(VerifyError::Wrong { burnt: true }));
        assert_eq!(c.take("u1", "ABCDE12345"), Err(VerifyError::NoCode), "burnt after three misses");

        c.insert("u1", pending("ABCDE12345", 0));
        assert_eq!(c.take("u1", "ABCDE12345"), Err(VerifyError::Expired));
        // a new code replaces the user's previous one
        c.insert("u3", pending("1111111111", 60));
        c.insert("u3", pending("2222222222", 60));
        assert_eq!(c.take("u3", "2222222222"), Ok("a@b".into()));
    }

    #[test]
    fn codes_are_long_and_readable() {
        let a = new_code();
        assert_eq!(a.len(), CODE_LEN);
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)));
        assert_ne!(a, new_code());
        assert_eq!(display("ABCDE12345"), "ABCDE-12345");
        assert_eq!(normalise(" abcde - i2o45 "), "ABCDE12045");
        assert_eq!(normalise(&display(&a)), a);
    }
}
