//! `Accept` of castd's follow of a federated server (sets `followedAt`), and `Reject` (logged).

use serde_json::Value;

use super::{id_of, Check, Context};
use crate::federation::{data, FedError};

pub struct Accept {
    /// The accepted Follow's actor, when the Accept embeds it.
    pub follower: Option<String>,
}

impl Accept {
    pub fn parse(v: &Value) -> Accept {
        Accept { follower: v.get("object").and_then(|o| o.get("actor")).and_then(id_of).map(str::to_string) }
    }

    /// Only of a follow by castd's actor.
    pub fn verify(&self, cx: &Context<'_>) -> Check {
        match &self.follower {
            Some(f) if *f != cx.local.actor => Check::Ignore(format!("an Accept of {f}'s follow")),
            _ => Check::Act,
        }
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        let a = cx.actor.iri.clone();
        if cx.fed.store.call(move |c| data::server_followed(c, &a)).await? {
            tracing::info!(server = %cx.actor.iri, "a federated server accepted our follow");
        }
        Ok(())
    }
}

pub struct Reject;

impl Reject {
    pub fn receive(self, cx: &Context<'_>) {
        tracing::info!(actor = %cx.actor.iri, "a follow was rejected");
    }
}
