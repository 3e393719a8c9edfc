//! `Like` and `Announce` (a boost) of an object castd published: kept in the activity list, and shown
//! as a chat event and webhook when `showengagement` is on. Of anything else (another server's post,
//! an IRI under castd's prefix that castd never published) nothing is kept or shown.

use serde_json::Value;

use super::{id_of, Check, Context};
use crate::events::chat::FediverseEngagementEvent;
use crate::events::{ChatEvent, Event};
use crate::federation::client::RemoteActor;
use crate::federation::{data, FedError, Federation};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Like,
    Announce,
}

pub struct Engagement {
    pub kind: Kind,
    pub id: String,
    /// The object liked or boosted.
    pub object: String,
}

impl Engagement {
    pub fn parse(kind: Kind, v: &Value) -> Engagement {
        Engagement {
            kind,
            id: v.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
            object: v.get("object").and_then(id_of).unwrap_or_default().to_string(),
        }
    }

    /// Only of an object castd published (in its outbox: a post, an event, a reminder).
    pub async fn verify(&self, cx: &Context<'_>) -> Result<Check, FedError> {
        let prefix = format!("{}/federation/", cx.local.base);
        if !self.object.starts_with(&prefix) {
            return Ok(Check::Ignore(format!("engagement with {}, which is not this server's", self.object)));
        }
        let iri = self.object.clone();
        let ours = cx.fed.store.call(move |c| data::outbox_get(c, &iri)).await?.is_some();
        Ok(Check::when(ours, || format!("engagement with {}, which this server never published", self.object)))
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        let (label, shown) = match self.kind {
            Kind::Like => ("LIKE", Shown::Like),
            Kind::Announce => ("REPOST", Shown::Repost),
        };
        log_activity(cx.fed, &self.id, &cx.actor.iri, label).await?;
        publish(cx.fed, cx.actor, shown);
        Ok(())
    }
}

/// Keep an activity in the admin's activity list.
pub async fn log_activity(fed: &Federation, iri: &str, actor: &str, kind: &str) -> Result<(), FedError> {
    let (iri, actor, kind) = (iri.to_string(), actor.to_string(), kind.to_string());
    fed.store.call(move |c| data::add_activity(c, &iri, &actor, &kind)).await?;
    Ok(())
}

/// Which engagement is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Follow,
    Like,
    Repost,
}

/// Publish a fediverse engagement (chat event + webhook) when `showengagement` is on. Its link and
/// image are the actor's profile and avatar, http(s) only (anything else is left out).
pub fn publish(fed: &Federation, actor: &RemoteActor, shown: Shown) {
    if !fed.settings.get().federation.federation_show_engagement {
        return;
    }
    let name = if actor.name.is_empty() { actor.account() } else { actor.name.clone() };
    let action = match shown {
        Shown::Follow => "followed this stream",
        Shown::Like => "liked a post from this stream",
        Shown::Repost => "shared a post from this stream",
    };
    let ev = FediverseEngagementEvent {
        id: crate::password::random_token(16),
        timestamp: chrono::Utc::now(),
        body: format!("{} {action}", crate::federation::actor::escape(&name)),
        image: (!actor.image.is_empty()).then(|| actor.image.clone()),
        link: actor.url.clone(),
        title: actor.account(),
        name,
    }
    .with_safe_links();
    let event = match shown {
        Shown::Follow => ChatEvent::FediverseFollow(ev),
        Shown::Like => ChatEvent::FediverseLike(ev),
        Shown::Repost => ChatEvent::FediverseRepost(ev),
    };
    fed.bus.publish(Event::Chat(event));
}
