//! The inbox: verify an inbound activity, then act on it.
//!
//! Checks, in order: federation on (405), the username (404), a JSON body (400), a `Signature`
//! header whose key id the URL policy allows (401), blocked domains of the key and the actor (403),
//! the key itself (fetched by key id and cached; an unknown key is 401), the signature with its digest
//! and date window (401; a cached key that fails is fetched once more in case it was rotated), and the
//! actor's origin matching the key owner's (403). Only then does anything change; the answer is 202.
//!
//! Types: Follow (auto-accepted, or pending in private mode), Undo (of Follow, Like, Announce), Like,
//! Announce (engagement: activity list, and a chat event and webhook when `showengagement` is on),
//! Update (a follower's profile), Create (a federated server's go-live post), Delete (an actor
//! deleted: it stops being a follower), Accept/Reject (of our follow of a federated server).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::client::{RemoteActor, RemoteKey};
use super::{data, delivery, signatures, FedError, Federation, HttpError, Local, AS_CONTEXT};
use crate::events::chat::FediverseEngagementEvent;
use crate::events::{ChatEvent, Event};
use crate::http::ApiError;

/// Largest activity accepted.
pub const MAX_ACTIVITY_BYTES: usize = 256 * 1024;

fn unauthorized(why: impl std::fmt::Display) -> HttpError {
    tracing::info!("refused an inbox request: {why}");
    HttpError::Api(ApiError::UnauthorizedToken)
}

fn forbidden(why: String) -> HttpError {
    tracing::info!("refused an inbox request: {why}");
    HttpError::Api(ApiError::Forbidden(why))
}

/// Whether `host` (no port) is one of `blocked` or under one.
pub fn is_blocked(blocked: &[String], url: &str) -> bool {
    let Some(host) = url::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase)) else {
        return false;
    };
    blocked.iter().any(|d| host == *d || host.ends_with(&format!(".{d}")))
}

fn origin(url: &str) -> Option<String> {
    url::Url::parse(url).ok().map(|u| u.origin().ascii_serialization())
}

/// The `id` of a value that is an IRI or an object with an `id`.
pub fn id_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("id").and_then(Value::as_str),
        _ => None,
    }
}

/// `POST /federation/user/{username}/inbox`.
pub async fn post_inbox(
    State(fed): State<Arc<Federation>>,
    Path(username): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    let local = fed.active()?;
    if username != local.username {
        return Err(ApiError::NotFound(format!("no such user {username}")).into());
    }
    if body.len() > MAX_ACTIVITY_BYTES {
        return Err(ApiError::TooLarge.into());
    }
    let activity: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad(format!("the activity is not JSON: {e}")))?;
    if !activity.is_object() {
        return Err(ApiError::bad("the activity is not an object").into());
    }
    let sig_header = headers
        .get("signature")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| unauthorized(signatures::SigError::Missing))?;
    let params = signatures::parse(sig_header).map_err(unauthorized)?;
    fed.client.check_url(&params.key_id).map_err(|e| unauthorized(format!("key id: {e}")))?;
    let blocked = fed.settings.get().federation.federation_blocked_domains.clone();
    let actor_iri = activity.get("actor").and_then(id_of).unwrap_or_default().to_string();
    if is_blocked(&blocked, &params.key_id) || is_blocked(&blocked, &actor_iri) {
        return Err(forbidden(format!("{actor_iri} is on a blocked domain")));
    }
    let kp = fed.keys.get().await?;
    let signer = Some((kp.as_ref(), local.key_id.as_str()));
    let path_and_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let get_header = |name: &str| -> Option<String> {
        let vals: Vec<&str> = headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect();
        (!vals.is_empty()).then(|| vals.join(", "))
    };
    let now = chrono::Utc::now();
    let verify = |k: &RemoteKey| {
        signatures::verify(&params, method.as_str(), path_and_query, &get_header, Some(&body), &k.key, now)
    };
    let key = match fed.client.key(&params.key_id, false, signer).await {
        Ok(k) => k,
        Err(e) => {
            // A deleted actor's key is gone too; its Delete is honoured only if the actor really is.
            if activity.get("type").and_then(Value::as_str) == Some("Delete") && !actor_iri.is_empty() {
                return deleted_actor(&fed, &local, &actor_iri, &activity).await;
            }
            return Err(unauthorized(format!("unknown key {}: {e}", params.key_id)));
        }
    };
    let key = match verify(&key) {
        Ok(()) => key,
        Err(e @ (signatures::SigError::Invalid | signatures::SigError::MissingHeader(_))) => {
            // maybe the key was rotated: fetch it once more
            let fresh = fed.client.key(&params.key_id, true, signer).await.map_err(|_| unauthorized(&e))?;
            verify(&fresh).map_err(unauthorized)?;
            fresh
        }
        Err(e) => return Err(unauthorized(e)),
    };
    if actor_iri.is_empty() || origin(&actor_iri) != origin(&key.owner) {
        return Err(forbidden(format!("the actor {actor_iri} is not the key's owner {}", key.owner)));
    }
    let actor = match key.actor.clone().filter(|a| a.iri == actor_iri) {
        Some(a) => a,
        None => fed.client.fetch_actor(&actor_iri, signer).await.map_err(|e| unauthorized(e.to_string()))?,
    };
    handle(&fed, &local, &actor, &activity).await?;
    fed.recount().await;
    Ok((StatusCode::ACCEPTED, crate::http::StatusResponse::ok("accepted")).into_response())
}

async fn deleted_actor(
    fed: &Federation,
    local: &Local,
    actor_iri: &str,
    activity: &Value,
) -> Result<Response, HttpError> {
    let object = activity.get("object").and_then(id_of).unwrap_or_default();
    if object != actor_iri || !fed.client.allowed(actor_iri) {
        return Err(unauthorized("unverifiable Delete"));
    }
    let gone = match fed.client.get_json(actor_iri, "application/activity+json", None).await {
        Ok((status, _)) => status == 404 || status == 410,
        Err(_) => false,
    };
    if !gone {
        return Err(unauthorized("a Delete of an actor that still exists, with an unknown key"));
    }
    let iri = actor_iri.to_string();
    let removed = fed.store.call(move |c| data::remove_follower(c, &iri)).await?;
    tracing::info!(actor = actor_iri, removed, local = %local.actor, "a deleted actor stopped following");
    fed.recount().await;
    Ok((StatusCode::ACCEPTED, crate::http::StatusResponse::ok("accepted")).into_response())
}

/// Act on a verified activity from `actor`.
pub async fn handle(
    fed: &Arc<Federation>,
    local: &Local,
    actor: &RemoteActor,
    activity: &Value,
) -> Result<(), FedError> {
    let kind = activity.get("type").and_then(Value::as_str).unwrap_or_default();
    let iri = activity.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    let object = activity.get("object").cloned().unwrap_or(Value::Null);
    match kind {
        "Follow" => {
            if id_of(&object) != Some(local.actor.as_str()) {
                return Ok(());
            }
            follow(fed, local, actor, &iri, activity).await
        }
        "Undo" => {
            let inner = object.get("type").and_then(Value::as_str).unwrap_or_default();
            let inner_id = id_of(&object).unwrap_or_default().to_string();
            let a = actor.iri.clone();
            match inner {
                "Follow" => {
                    fed.store.call(move |c| data::remove_follower(c, &a)).await?;
                    tracing::info!(actor = %actor.iri, "a fediverse follower unfollowed");
                }
                _ => {
                    fed.store.call(move |c| data::remove_activity(c, &inner_id, &a)).await?;
                }
            }
            Ok(())
        }
        "Like" | "Announce" => {
            let (label, ev) = if kind == "Like" { ("LIKE", "liked") } else { ("REPOST", "shared") };
            log_activity(fed, &iri, &actor.iri, label).await?;
            engagement(fed, actor, kind, &format!("{ev} a post from this stream"));
            Ok(())
        }
        "Update" => {
            if let Some(updated) = RemoteActor::from_json(&object).filter(|a| a.iri == actor.iri) {
                fed.store.call(move |c| data::update_profile(c, &updated)).await?;
            }
            Ok(())
        }
        "Create" => super::servers::went_live(fed, actor).await,
        "Delete" => {
            if id_of(&object) == Some(actor.iri.as_str()) {
                let a = actor.iri.clone();
                fed.store.call(move |c| data::remove_follower(c, &a)).await?;
            }
            Ok(())
        }
        "Accept" => {
            let a = actor.iri.clone();
            if fed.store.call(move |c| data::server_followed(c, &a)).await? {
                tracing::info!(server = %actor.iri, "a federated server accepted our follow");
            }
            Ok(())
        }
        "Reject" => {
            tracing::info!(actor = %actor.iri, "a follow was rejected");
            Ok(())
        }
        other => {
            tracing::debug!(kind = other, "ignored an activity type");
            Ok(())
        }
    }
}

async fn log_activity(fed: &Federation, iri: &str, actor: &str, kind: &str) -> Result<(), FedError> {
    let (iri, actor, kind) = (iri.to_string(), actor.to_string(), kind.to_string());
    fed.store.call(move |c| data::add_activity(c, &iri, &actor, &kind)).await?;
    Ok(())
}

/// Publish a fediverse engagement (chat event + webhook) when `showengagement` is on.
pub fn engagement(fed: &Federation, actor: &RemoteActor, kind: &str, action: &str) {
    if !fed.settings.get().federation.federation_show_engagement {
        return;
    }
    let name = if actor.name.is_empty() { actor.account() } else { actor.name.clone() };
    let ev = FediverseEngagementEvent {
        id: crate::password::random_token(16),
        timestamp: chrono::Utc::now(),
        body: format!("{} {action}", super::actor::escape(&name)),
        image: (!actor.image.is_empty()).then(|| actor.image.clone()),
        link: actor.url.clone(),
        title: actor.account(),
    };
    let event = match kind {
        "Follow" => ChatEvent::FediverseFollow(ev),
        "Like" => ChatEvent::FediverseLike(ev),
        _ => ChatEvent::FediverseRepost(ev),
    };
    fed.bus.publish(Event::Chat(event));
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

async fn follow(
    fed: &Federation,
    local: &Local,
    actor: &RemoteActor,
    iri: &str,
    _activity: &Value,
) -> Result<(), FedError> {
    let approved = !fed.settings.get().federation.federation_private;
    let (a, f) = (actor.clone(), iri.to_string());
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
            return answer_follow(fed, local, &actor.iri, &actor.inbox, iri, false).await;
        }
    };
    let now_approved = approved || before == Some(true);
    log_activity(fed, iri, &actor.iri, "FOLLOW").await?;
    if now_approved {
        answer_follow(fed, local, &actor.iri, &actor.inbox, iri, true).await?;
        if before != Some(true) {
            engagement(fed, actor, "Follow", "followed this stream");
        }
    } else {
        tracing::info!(actor = %actor.iri, "a follow waits for the admin's approval (private mode)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_domains_match_subdomains() {
        let b = vec!["bad.example".to_string()];
        assert!(is_blocked(&b, "https://bad.example/users/x"));
        assert!(is_blocked(&b, "https://a.bad.example/users/x"));
        assert!(!is_blocked(&b, "https://notbad.example/users/x"));
        assert!(!is_blocked(&b, "garbage"));
    }
}
