//! `Undo` of the signer's own Follow (it stops following), Like or Announce (dropped from the activity
//! list). An Undo whose embedded activity names another actor changes nothing.

use serde_json::Value;

use super::{id_of, Check, Context};
use crate::federation::{data, FedError};

pub struct Undo {
    /// The undone activity's type, when the Undo embeds it.
    pub inner_type: String,
    pub inner_id: String,
    /// The undone activity's actor, when the Undo embeds it.
    pub inner_actor: Option<String>,
}

impl Undo {
    pub fn parse(v: &Value) -> Undo {
        let object = v.get("object").unwrap_or(&Value::Null);
        Undo {
            inner_type: object.get("type").and_then(Value::as_str).unwrap_or_default().to_string(),
            inner_id: id_of(object).unwrap_or_default().to_string(),
            inner_actor: object.get("actor").and_then(id_of).map(str::to_string),
        }
    }

    /// Only of the signer's own activity.
    pub fn verify(&self, cx: &Context<'_>) -> Check {
        match &self.inner_actor {
            Some(a) if *a != cx.actor.iri => Check::Ignore(format!("an Undo of {a}'s activity by {}", cx.actor.iri)),
            _ => Check::Act,
        }
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        let a = cx.actor.iri.clone();
        let (inner_type, inner_id) = (self.inner_type, self.inner_id);
        let unfollowed = cx
            .fed
            .store
            .call(move |c| {
                // An Undo that embeds no type undoes the follow when it names the follow.
                let is_follow = inner_type == "Follow"
                    || (inner_type.is_empty()
                        && data::follower_follow(c, &a)?.is_some_and(|(follow, _, _)| follow == inner_id));
                if is_follow {
                    data::remove_follower(c, &a)
                } else {
                    data::remove_activity(c, &inner_id, &a)?;
                    Ok(false)
                }
            })
            .await?;
        if unfollowed {
            tracing::info!(actor = %cx.actor.iri, "a fediverse follower unfollowed");
        }
        Ok(())
    }
}
