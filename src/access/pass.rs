//! The viewing pass: `cp1.<payload>.<signature>`, the payload base64url JSON ([`Claims`]), the
//! signature base64url HMAC-SHA256 of `cp1.<payload>` with the channel's signing key. Short enough
//! for a cookie and a query string; checked without a database read (the grant it names is looked up
//! in memory by the caller).

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The channel (its slug; `default` for the root).
    #[serde(rename = "c")]
    pub channel: String,
    /// The grant it was issued under: `p:<password id>`, `i:<invite id>`, `j:<issuer generation>`.
    #[serde(rename = "g")]
    pub grant: String,
    /// Who holds it (`password:3`, `invite:7`, `jwt:<sub>`).
    #[serde(rename = "s")]
    pub subject: String,
    /// The chat name it carries (a JWT's claim).
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Expiry, Unix seconds.
    #[serde(rename = "e")]
    pub expires_at: i64,
    /// Issued, Unix seconds.
    #[serde(rename = "t")]
    pub issued_at: i64,
}

/// Why a pass was not accepted (never shown in detail to the viewer).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    #[error("not a viewing pass")]
    Malformed,
    #[error("the signature does not match")]
    Signature,
    #[error("the pass is for another channel")]
    OtherChannel,
    #[error("the pass has expired")]
    Expired,
}

fn mac(key: &[u8], signed: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(signed);
    m
}

/// Sign `claims` with `key`.
pub fn sign(claims: &Claims, key: &[u8]) -> String {
    let json = serde_json::to_vec(claims).unwrap_or_default();
    let mut out = String::with_capacity(PREFIX.len() + json.len() * 4 / 3 + 48);
    out.push_str(PREFIX);
    URL_SAFE_NO_PAD.encode_string(&json, &mut out);
    let sig = mac(key, out.as_bytes()).finalize().into_bytes();
    out.push('.');
    URL_SAFE_NO_PAD.encode_string(sig, &mut out);
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
    mac(key, signed.as_bytes()).verify_slice(&sig).map_err(|_| PassError::Signature)?;
    let json = URL_SAFE_NO_PAD.decode(&signed[PREFIX.len()..]).map_err(|_| PassError::Malformed)?;
    let claims: Claims = serde_json::from_slice(&json).map_err(|_| PassError::Malformed)?;
    if claims.channel != channel {
        return Err(PassError::OtherChannel);
    }
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
        assert!(pass.starts_with(PREFIX) && pass.len() < 300, "{pass}");
        assert_eq!(verify(&pass, key, "music", 1_500), Ok(claims()));
        assert_eq!(verify(&pass, b"another key", "music", 1_500), Err(PassError::Signature));
        assert_eq!(verify(&pass, key, "talk", 1_500), Err(PassError::OtherChannel));
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
