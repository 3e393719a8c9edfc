//! `Update` of the signer's own actor: the follower's profile (name, avatar, profile page, inboxes;
//! http(s) URLs only, inboxes castd may deliver to) is refreshed. Updates of anything else are
//! ignored.

use serde_json::Value;

use super::{id_of, Check, Context};
use crate::federation::client::RemoteActor;
use crate::federation::{data, FedError};

pub struct Update {
    pub object: Value,
}

impl Update {
    pub fn parse(v: &Value) -> Update {
        Update { object: v.get("object").cloned().unwrap_or(Value::Null) }
    }

    /// Only of the signer's own actor.
    pub fn verify(&self, cx: &Context<'_>) -> Check {
        let id = id_of(&self.object).unwrap_or_default();
        Check::when(id == cx.actor.iri, || format!("an Update of {id}, not of its actor"))
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        let Some(updated) = RemoteActor::from_json(&self.object).filter(|a| a.iri == cx.actor.iri) else {
            return Ok(());
        };
        // An inbox castd may not deliver to keeps the one it had.
        let updated = match cx.fed.client.deliverable(updated.clone()) {
            Ok(a) => a,
            Err(_) => {
                RemoteActor { inbox: cx.actor.inbox.clone(), shared_inbox: cx.actor.shared_inbox.clone(), ..updated }
            }
        };
        cx.fed.store.call(move |c| data::update_profile(c, &updated)).await?;
        Ok(())
    }
}
