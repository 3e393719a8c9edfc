//! One webhook receiver's delivery task: takes events from its bounded queue in order, posts each
//! with a timeout, and retries failures with exponential back-off before giving up.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::mpsc;

use super::Counters;
use crate::events::Event;

/// How long one attempt may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Waits before the 2nd, 3rd and 4th attempt.
pub const RETRY_DELAYS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];

/// `sha256=<hex>` HMAC-SHA256 of `body` keyed with `secret`: the `X-Castd-Signature` header.
pub fn sign(secret: &str, body: &[u8]) -> String {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap_or_else(|_| unreachable!());
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

pub(super) struct Worker {
    pub id: i64,
    pub url: String,
    pub secret: String,
    pub client: reqwest::Client,
    pub counters: Arc<Counters>,
}

enum Outcome {
    Done,
    Retry(String),
    GiveUp(String),
}

impl Worker {
    pub async fn run<F, Fut>(self, mut rx: mpsc::Receiver<Arc<Event>>, touch: F)
    where
        F: Fn(i64) -> Fut,
        Fut: Future<Output = ()>,
    {
        while let Some(event) = rx.recv().await {
            let body = match serde_json::to_vec(&serde_json::json!({ "type": event.kind, "eventData": event.data })) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(webhook = self.id, "cannot serialize event: {e}");
                    continue;
                }
            };
            let mut attempt = 0;
            loop {
                let (outcome, answered) = self.attempt(&body).await;
                if answered {
                    touch(self.id).await;
                }
                match outcome {
                    Outcome::Done => {
                        self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Outcome::Retry(why) if attempt < RETRY_DELAYS.len() => {
                        tracing::debug!(
                            webhook = self.id,
                            attempt = attempt + 1,
                            "webhook delivery failed ({why}); retrying"
                        );
                        tokio::time::sleep(RETRY_DELAYS[attempt]).await;
                        attempt += 1;
                    }
                    Outcome::Retry(why) | Outcome::GiveUp(why) => {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(webhook = self.id, url = %self.url, event = event.kind.as_str(),
                            attempts = attempt + 1, "gave up delivering a webhook: {why}");
                        break;
                    }
                }
            }
        }
    }

    /// One POST; says what to do next and whether the receiver answered at all.
    async fn attempt(&self, body: &[u8]) -> (Outcome, bool) {
        let mut req = self.client.post(&self.url).header("content-type", "application/json").body(body.to_vec());
        if !self.secret.is_empty() {
            req = req.header("X-Castd-Signature", sign(&self.secret, body));
        }
        match req.send().await {
            Ok(resp) if resp.status().is_success() => (Outcome::Done, true),
            Ok(resp) if resp.status().is_server_error() || resp.status().as_u16() == 429 => {
                (Outcome::Retry(format!("receiver answered {}", resp.status())), true)
            }
            Ok(resp) => (Outcome::GiveUp(format!("receiver answered {}", resp.status())), true),
            Err(e) if e.is_timeout() => (Outcome::Retry(format!("no answer within {}s", TIMEOUT.as_secs())), false),
            Err(e) => (Outcome::Retry(e.to_string()), false),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn signature_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?"
        assert_eq!(
            super::sign("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
