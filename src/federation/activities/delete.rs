//! `Delete` of the signer's own actor: it stops being a follower. (The inbox honours the Delete of an
//! actor whose key can no longer be fetched only when the actor's document is gone: 404 or 410.)

use serde_json::Value;

use super::{id_of, Check, Context};
use crate::federation::{data, FedError};

pub struct Delete {
    pub object: String,
}

impl Delete {
    pub fn parse(v: &Value) -> Delete {
        Delete { object: v.get("object").and_then(id_of).unwrap_or_default().to_string() }
    }

    /// Only of the signer's own actor.
    pub fn verify(&self, cx: &Context<'_>) -> Check {
        Check::when(self.object == cx.actor.iri, || format!("a Delete of {}, not of its actor", self.object))
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        let a = cx.actor.iri.clone();
        cx.fed.store.call(move |c| data::remove_follower(c, &a)).await?;
        Ok(())
    }
}
