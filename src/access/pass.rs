//! The viewing pass: `cp1.<payload>.<signature>`, the payload base64url JSON (the grant, the expiry, the
//! issue time, and the subject and chat name where the grant does not say them), the signature the
//! first 128 bits of the HMAC-SHA256 of `cp1.<payload>` with the channel's signing key, base64url.
//! Short (about 70 characters for a password's pass), because a player without cookies carries it in
//! every URI of every playlist; checked without a database read (the grant it names is looked up in
//! memory by the caller). The channel is bound twice: every channel has its own key, and the MAC covers
//! the channel's slug (not written in the pass).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Every pass starts with this.
pub const PREFIX: &str = "cp1.";
/// Longest pass read (a JWT name claim is at most 64 characters; a pass is well under this).
pub const MAX_PASS_BYTES: usize = 1024;

/// What a pass says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The channel (its slug; `default` for the root): the one whose key signed it.
    pub channel: String,
    /// The grant it was issued under: `p:<password id>`, `i:<invite id>`, `j:<issuer generation>`,
    /// `a:<admin credential generation>`.
    pub grant: String,
    /// Who holds it (`password:3`, `invite:7`, `jwt:<sub>`, `admin`).
    pub subject: String,
    /// The chat name it carries (a JWT's claim).
    pub name: Option<String>,
    /// Expiry, Unix seconds.
    pub expires_at: i64,
    /// Issued, Unix seconds.
    pub issued_at: i64,
}

/// The payload as signed: what the grant does not already say.
#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    g: std::borrow::Cow<'a, str>,
    e: i64,
    t: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n: Option<std::borrow::Cow<'a, str>>,
}

/// The subject a grant stands for, when the grant says it (a password's, an invite's, the admin's).
fn subject_of(grant: &str) -> Option<String> {
    if let Some(id) = grant.strip_prefix("p:") {
        return Some(format!("password:{id}"));
    }
    if let Some(id) = grant.strip_prefix("i:") {
        return Some(format!("invite:{id}"));
    }
    (grant == "a" || grant.starts_with("a:")).then(|| "admin".to_string())
}

/// Bytes of the HMAC kept in a pass (128 bits).
const TAG_BYTES: usize = 16;

/// Why a pass was not accepted (never shown in detail to the viewer).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    #[error("not a viewing pass")]
    Malformed,
    #[error("the signature does not match")]
    Signature,
    #[error("the pass has expired")]
    Expired,
}

/// The MAC of a pass: over what it says and, not written in it, the channel it is for.
fn mac(key: &[u8], signed: &[u8], channel: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(signed);
    m.update(b"@");
    m.update(channel.as_bytes());
    m
}

/// Sign `claims` with `key` (the key is the channel's: `claims.channel` is not written).
pub fn sign(claims: &Claims, key: &[u8]) -> String {
    let implied = subject_of(&claims.grant).is_some_and(|s| s == claims.subject);
    let wire = Wire {
        g: claims.grant.as_str().into(),
        e: claims.expires_at,
        t: claims.issued_at,
        s: (!implied).then(|| claims.subject.as_str().into()),
        n: claims.name.as_deref().map(Into::into),
    };
    let json = serde_json::to_vec(&wire).unwrap_or_default();
    let mut out = String::with_capacity(PREFIX.len() + json.len() * 4 / 3 + 48);
    out.push_str(PREFIX);
    URL_SAFE_NO_PAD.encode_string(&json, &mut out);
    let sig = mac(key, out.as_bytes(), &claims.channel).finalize().into_bytes();
    out.push('.');
    URL_SAFE_NO_PAD.encode_string(&sig[..TAG_BYTES], &mut out);
    out
}

/// Check `pass` against `key` and `channel` at `now` (Unix seconds); its claims when it holds.
pub fn verify(pass: &str, key: &[u8], channel: &str, now: i64) -> Result<Claims, PassError> {
    if pass.len() > MAX_PASS_BYTES || !pass.starts_with(PREFIX) {
        return Err(PassError::Malformed);
    }
    let (signed, sig) = pass.rsplit_once('.').ok_or(PassError::Malformed)?;
    if signed.len() <= PREFIX.len() {
        return Err(PassError::Malformed);
    }
    let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| PassError::Malformed)?;
    if sig.len() != TAG_BYTES {
        return Err(PassError::Malformed);
    }
    mac(key, signed.as_bytes(), channel).verify_truncated_left(&sig).map_err(|_| PassError::Signature)?;
    let json = URL_SAFE_NO_PAD.decode(&signed[PREFIX.len()..]).map_err(|_| PassError::Malformed)?;
    let wire: Wire<'_> = serde_json::from_slice(&json).map_err(|_| PassError::Malformed)?;
    let subject = match wire.s {
        Some(s) => s.into_owned(),
        None => subject_of(&wire.g).ok_or(PassError::Malformed)?,
    };
    let claims = Claims {
        channel: channel.to_string(),
        grant: wire.g.into_owned(),
        subject,
        name: wire.n.map(|n| n.into_owned()),
        expires_at: wire.e,
        issued_at: wire.t,
    };
    if claims.expires_at <= now {
        return Err(PassError::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            channel: "music".into(),
            grant: "p:1".into(),
            subject: "password:1".into(),
            name: Some("Ann".into()),
            expires_at: 2_000,
            issued_at: 1_000,
        }
    }

    #[test]
    fn a_signed_pass_verifies_and_nothing_else_does() {
        let key = b"0123456789abcdef0123456789abcdef";
        let pass = sign(&claims(), key);
        assert!(pass.starts_with(PREFIX) && pass.len() < 90, "{} characters: {pass}", pass.len());
        assert_eq!(verify(&pass, key, "music", 1_500), Ok(claims()));
        // Another channel's key (every channel has its own), or another channel with the same key.
        assert_eq!(verify(&pass, b"another key", "music", 1_500), Err(PassError::Signature));
        assert_eq!(verify(&pass, key, "talk", 1_500), Err(PassError::Signature));
        // A member's pass says its subject; a password's does not need to.
        let member = Claims { grant: "j:abc".into(), subject: "jwt:m-1".into(), ..claims() };
        assert_eq!(verify(&sign(&member, key), key, "music", 1_500), Ok(member));
        assert_eq!(verify(&pass, key, "music", 2_000), Err(PassError::Expired));
        // A payload changed under the same signature.
        let (head, sig) = pass.rsplit_once('.').unwrap();
        let mut other = claims();
        other.expires_at = 9_999;
        let forged = format!("{}.{sig}", sign(&other, key).rsplit_once('.').unwrap().0);
        assert_ne!(forged.rsplit_once('.').unwrap().0, head);
        assert_eq!(verify(&forged, key, "music", 1_500), Err(PassError::Signature));
        for bad in ["", "cp1.", "cp1..", "cp1.x.y", "eyJhbGciOi.x.y", &"cp1.a".repeat(400)] {
            assert!(verify(bad, key, "music", 1_500).is_err(), "{bad}");
        }
    }
}
