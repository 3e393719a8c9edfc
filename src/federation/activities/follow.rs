//! `Follow` of castd's actor: recorded (approved at once, or waiting for the admin in private mode),
//! answered with an `Accept` (or a `Reject` when castd keeps as many followers as it may), shown in
//! chat once approved. A blocked follower's follow is ignored.

use serde_json::{json, Value};

use super::{engagement, id_of, Check, Context};
use crate::federation::{data, delivery, FedError, Federation, Local, AS_CONTEXT};

pub struct Follow {
    /// The Follow's IRI (what the Accept names).
    pub id: String,
    /// Whom it follows.
    pub object: String,
}

impl Follow {
    pub fn parse(v: &Value) -> Follow {
        Follow {
            id: v.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
            object: v.get("object").and_then(id_of).unwrap_or_default().to_string(),
        }
    }

    /// Only a follow of castd's actor.
    pub fn verify(&self, cx: &Context<'_>) -> Check {
        Check::when(self.object == cx.local.actor, || format!("a Follow of {}, not of this actor", self.object))
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        let (fed, local, actor) = (cx.fed, cx.local, cx.actor);
        let approved = !fed.settings.get().federation.federation_private;
        let (a, f) = (actor.clone(), self.id.clone());
        let before = match fed.store.call(move |c| data::upsert_follower(c, &a, &f, approved)).await? {
            data::Followed::New => None,
            data::Followed::Again { was_approved } => Some(was_approved),
            data::Followed::Blocked => {
                tracing::info!(actor = %actor.iri, "a blocked follower tried to follow again; ignored");
                return Ok(());
            }
            data::Followed::Full => {
                tracing::warn!(
                    actor = %actor.iri,
                    max = data::MAX_FOLLOWERS,
                    "a follow was rejected: this server has as many followers as it keeps"
                );
                return answer_follow(fed, local, &actor.iri, &actor.inbox, &self.id, false).await;
            }
        };
        let now_approved = approved || before == Some(true);
        engagement::log_activity(fed, &self.id, &actor.iri, "FOLLOW").await?;
        if now_approved {
            answer_follow(fed, local, &actor.iri, &actor.inbox, &self.id, true).await?;
            if before != Some(true) {
                engagement::publish(fed, actor, engagement::Shown::Follow);
            }
        } else {
            tracing::info!(actor = %actor.iri, "a follow waits for the admin's approval (private mode)");
        }
        Ok(())
    }
}

/// An `Accept` (or `Reject`) of a follow, to the follower's inbox.
pub async fn answer_follow(
    fed: &Federation,
    local: &Local,
    follower: &str,
    inbox: &str,
    follow_iri: &str,
    accept: bool,
) -> Result<(), FedError> {
    let activity = json!({
        "@context": AS_CONTEXT,
        "id": local.new_iri(),
        "type": if accept { "Accept" } else { "Reject" },
        "actor": local.actor,
        "object": { "id": follow_iri, "type": "Follow", "actor": follower, "object": local.actor },
    });
    delivery::enqueue(fed, vec![inbox.to_string()], &activity).await?;
    Ok(())
}
