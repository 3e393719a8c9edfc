//! Scheduled streams on the Fediverse (Owncast's `scheduled_event.go`): what the schedule publishes on
//! the bus (`Event::ScheduleFederation`) becomes an ActivityPub `Event` (FEP-8a8e / Mobilizon's
//! shape) sent to the followers: `Create` when it is announced, `Update` when it changes or is
//! cancelled, `Delete` with a `Tombstone` when it is deleted, and each reminder as a `Create{Note}`
//! in reply to the Event.
//!
//! IRIs: the Event is `<server>/federation/event/<id>`; its activities are `…/activity/create`,
//! `…/activity/update/<version>` and `…/activity/delete`; reminder `n` is the Note `…/reminder/<n>`
//! (its Create `…/reminder/<n>/activity`). The Event (or its Tombstone) and the reminders are kept
//! in the outbox table and served at those IRIs.
//!
//! Delivery goes through the persistent queue with Owncast's keys: the ordering key
//! `scheduled-event:<id>` (one event's activities reach each inbox in the order sent: no Update
//! before its Create, no reminder before the Event) and the coalesce keys
//! `scheduled-event:<id>:create`, `:state` (an Update or Delete not delivered yet is replaced by the
//! next one: followers get only the newest state) and `:reminder:<n>`.
//!
//! The schedule marks an activity as sent when it publishes it and this module queues it as soon as
//! it arrives, so the only window in which one can be lost is a daemon that stops between the two
//! (or a federation consumer that lags `BUS_CAPACITY` events behind); from the queue on it survives
//! restarts.

use chrono::{Duration, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::actor::escape;
use super::delivery::{self, Keys};
use super::{data, FedError, Federation, Local, AS_CONTEXT, PUBLIC};
use crate::events::schedule::FederatedEvent;
use crate::events::ScheduleActivity;

/// The FEP-8a8e (events) context.
pub const EVENT_CONTEXT: &str = "https://w3id.org/fep/8a8e";
/// schema.org, for the Event's extra terms.
pub const SCHEMA_CONTEXT: &str = "https://schema.org";

/// The Event's IRI.
pub fn event_iri(local: &Local, id: &str) -> String {
    format!("{}/federation/event/{id}", local.base)
}

fn context() -> Value {
    json!([AS_CONTEXT, EVENT_CONTEXT, SCHEMA_CONTEXT])
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `to` and `cc`: public with the followers in `cc`, or followers only in private mode.
fn audience(fed: &Federation, local: &Local) -> (Value, Value, bool) {
    let s = fed.settings.get();
    // A channel that is not public announces its schedule to its followers only (as its go-live post).
    if s.federation.federation_private || !s.access.visibility.is_public() {
        (json!([local.followers]), json!([]), false)
    } else {
        (json!([PUBLIC]), json!([local.followers]), true)
    }
}

/// The description as HTML paragraphs.
fn content(description: &str) -> String {
    description
        .split("\n\n")
        .filter(|p| !p.trim().is_empty())
        .map(|p| format!("<p>{}</p>", escape(p.trim()).replace('\n', "<br>")))
        .collect()
}

/// The ActivityPub `Event` of a scheduled stream; `published` is when it was first announced.
pub fn event_object(fed: &Federation, local: &Local, e: &FederatedEvent, published: &str) -> Value {
    let s = fed.settings.get();
    let (to, cc, _) = audience(fed, local);
    let end = e.start_time + Duration::minutes(e.duration_minutes);
    let stamp = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    json!({
        "@context": context(),
        "id": event_iri(local, &e.id),
        "type": "Event",
        "name": e.name,
        "content": content(&e.description),
        "startTime": stamp(e.start_time),
        "endTime": stamp(end),
        "duration": format!("PT{}M", e.duration_minutes),
        "timezone": e.timezone,
        "attributedTo": local.actor,
        "organizers": [local.actor],
        "url": format!("{}/schedule/{}", local.base, e.id),
        "published": published,
        "updated": now(),
        "to": to,
        "cc": cc,
        "displayEndTime": true,
        "eventStatus": if e.cancelled { "EventCancelled" } else { "EventScheduled" },
        "joinMode": "none",
        "location": {"type": "VirtualLocation", "name": s.instance.name, "url": local.base},
        "attachment": [{
            "type": "Document",
            "mediaType": "image/png",
            "name": "Banner",
            "url": format!("{}/logo/external", local.base),
        }],
    })
}

fn keys(id: &str, coalesce: &str) -> Keys {
    Keys { ordering: format!("scheduled-event:{id}"), coalesce: format!("scheduled-event:{id}:{coalesce}") }
}

/// Send what the schedule published to the followers (through the delivery queue); returns the
/// activity.
pub async fn send(fed: &Federation, activity: &ScheduleActivity) -> Result<Value, FedError> {
    let local = fed.local().ok_or_else(|| FedError::Policy("the server URL is not set".into()))?;
    {
        let s = fed.settings.get();
        if !s.access.visibility.is_public() && s.access.private_federation_posts == crate::config::PrivatePosts::None {
            tracing::info!(event = activity.event_id(), "no scheduled-stream post: the channel is not public");
            return Ok(Value::Null);
        }
    }
    let (to, cc, public) = audience(fed, &local);
    let iri = event_iri(&local, activity.event_id());
    let envelope = |id: String, kind: &str, object: Value| {
        json!({
            "@context": context(),
            "id": id,
            "type": kind,
            "actor": local.actor,
            "published": now(),
            "to": to,
            "cc": cc,
            "object": object,
        })
    };
    let (activity_json, key) = match activity {
        ScheduleActivity::Create { event } => {
            let object = event_object(fed, &local, event, &now());
            let create = envelope(format!("{iri}/activity/create"), "Create", object.clone());
            let (i, c, ci) = (iri.clone(), create.clone(), format!("{iri}/activity/create"));
            fed.store
                .call(move |db| {
                    data::outbox_insert(db, &i, "Event", &object, public)?;
                    data::outbox_insert(db, &ci, "Create", &c, public)
                })
                .await?;
            (create, keys(&event.id, "create"))
        }
        ScheduleActivity::Update { event, version } => {
            let i = iri.clone();
            let stored = fed.store.call(move |db| data::outbox_get(db, &i)).await?;
            let published = stored.and_then(|(v, _)| v["published"].as_str().map(str::to_string)).unwrap_or_else(now);
            let object = event_object(fed, &local, event, &published);
            let update = envelope(format!("{iri}/activity/update/{version}"), "Update", object.clone());
            let i = iri.clone();
            fed.store.call(move |db| data::outbox_insert(db, &i, "Event", &object, public)).await?;
            (update, keys(&event.id, "state"))
        }
        ScheduleActivity::Delete { id } => {
            let tombstone = json!({"id": iri, "type": "Tombstone", "formerType": "Event", "deleted": now()});
            let delete = envelope(format!("{iri}/activity/delete"), "Delete", tombstone.clone());
            let (i, ci) = (iri.clone(), format!("{iri}/activity/create"));
            fed.store
                .call(move |db| {
                    data::outbox_remove(db, &ci)?;
                    data::outbox_insert(db, &i, "Tombstone", &tombstone, public)
                })
                .await?;
            (delete, keys(id, "state"))
        }
        ScheduleActivity::Reminder { id, slot, text } => {
            let note_iri = format!("{iri}/reminder/{slot}");
            let published = now();
            let note = json!({
                "id": note_iri,
                "type": "Note",
                "attributedTo": local.actor,
                "inReplyTo": iri,
                "content": content(text),
                "published": published,
                "url": format!("{}/schedule/{id}", local.base),
                "to": to,
                "cc": cc,
            });
            let create = envelope(format!("{note_iri}/activity"), "Create", note.clone());
            let (n, c, ni, ci) = (note.clone(), create.clone(), note_iri.clone(), format!("{note_iri}/activity"));
            fed.store
                .call(move |db| {
                    data::outbox_insert(db, &ni, "Note", &n, public)?;
                    data::outbox_insert(db, &ci, "Create", &c, public)
                })
                .await?;
            (create, keys(id, &format!("reminder:{slot}")))
        }
    };
    let inboxes = fed.store.call(|c| data::follower_inboxes(c)).await?;
    let n = delivery::enqueue_keyed(fed, inboxes, &activity_json, Some(key)).await?;
    tracing::info!(
        deliveries = n,
        kind = activity_json["type"].as_str().unwrap_or_default(),
        event = activity.event_id(),
        "queued a scheduled stream's activity"
    );
    Ok(activity_json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_become_escaped_paragraphs() {
        assert_eq!(content("One <b>\nline\n\nTwo"), "<p>One &lt;b&gt;<br>line</p><p>Two</p>");
        assert_eq!(content("  "), "");
    }
}
