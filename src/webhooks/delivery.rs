//! One webhook receiver's delivery task: takes events from its bounded queue in order, posts each
//! with a timeout, and retries failures with exponential back-off before giving up. A URL its reach
//! refuses (a channel's webhook at a loopback or private address) is given up at once, nothing sent.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::telemetry::Telemetry;

/// How long one attempt may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Waits before the 2nd, 3rd and 4th attempt.
pub const RETRY_DELAYS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];

pub(super) struct Worker {
    pub id: i64,
    pub url: String,
    pub secret: String,
    pub client: reqwest::Client,
    /// Where the URL may lead: checked before every attempt (literal addresses bypass the resolver).
    pub reach: crate::outbound::Reach,
    pub telemetry: Arc<Telemetry>,
}

enum Outcome {
    Done,
    Retry(String),
    GiveUp(String),
}

impl Worker {
    /// Deliver the queue in order until it closes. When `give_up` fires, stop at once and return the
    /// deliveries not made (the current one first) for the outbox.
    pub async fn run<F, Fut>(
        self,
        mut rx: mpsc::Receiver<Arc<[u8]>>,
        give_up: CancellationToken,
        touch: F,
    ) -> Vec<super::Pending>
    where
        F: Fn(i64) -> Fut,
        Fut: Future<Output = ()>,
    {
        while let Some(body) = rx.recv().await {
            let delivered = tokio::select! {
                biased;
                _ = give_up.cancelled() => false,
                _ = self.deliver(&body, &touch) => true,
            };
            if !delivered {
                let mut left = vec![(self.id, body)];
                rx.close();
                while let Some(b) = rx.recv().await {
                    left.push((self.id, b));
                }
                return left;
            }
        }
        Vec::new()
    }

    /// One delivery with its retries.
    async fn deliver<F, Fut>(&self, body: &[u8], touch: &F)
    where
        F: Fn(i64) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut attempt = 0;
        loop {
            let (outcome, answered) = self.attempt(body).await;
            if answered {
                touch(self.id).await;
            }
            match outcome {
                Outcome::Done => {
                    self.telemetry.webhook_delivery(true);
                    return;
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
                    self.telemetry.webhook_delivery(false);
                    tracing::warn!(webhook = self.id, url = %self.url, attempts = attempt + 1,
                        "gave up delivering a webhook: {why}");
                    return;
                }
            }
        }
    }

    /// One POST; says what to do next and whether the receiver answered at all.
    async fn attempt(&self, body: &[u8]) -> (Outcome, bool) {
        // Judged at each attempt: the server admin's switch may have changed since the URL was saved.
        let url = match self.reach.check_str(&self.url) {
            Ok(u) => u,
            Err(e) => return (Outcome::GiveUp(format!("{e} (the receiver's address is not allowed)")), false),
        };
        let mut req = self.client.post(url).header("content-type", "application/json").body(body.to_vec());
        if !self.secret.is_empty() {
            req = req.header("X-Castd-Signature", crate::password::request_signature(&self.secret, body));
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
