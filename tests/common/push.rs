//! Browser push helpers for tests: a subscription with its own key pair, so a test can decrypt what castd sends.
#![allow(dead_code)]

use serde_json::{json, Value};

/// A browser push subscription made of a fresh P-256 key pair and auth secret.
pub fn push_subscription(endpoint: &str) -> (Value, web_push_native::p256::SecretKey, [u8; 16]) {
    use base64::Engine;
    use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;
    let secret = web_push_native::p256::SecretKey::random(&mut rand::thread_rng());
    let public = secret.public_key().to_encoded_point(false);
    let auth: [u8; 16] = rand::random();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let sub = json!({
        "endpoint": endpoint,
        "expirationTime": null,
        "keys": { "p256dh": b64.encode(public.as_bytes()), "auth": b64.encode(auth) }
    });
    (sub, secret, auth)
}
