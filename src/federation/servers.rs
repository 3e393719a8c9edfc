//! Federated servers: other Owncast-compatible servers this one follows. Adding one by URL reads its
//! `/api/config` (name, summary, tags, fediverse account), resolves the account through WebFinger,
//! and sends a signed Follow to its actor; its Accept sets `followedAt`; its go-live posts (Create)
//! mark it online, and its `/api/status` then gives the stream title. Owncast sends nothing when a
//! stream ends, so [`watch`] polls the `/api/status` of the servers shown online: one that says it is
//! no longer online, or has not answered `MISSES_OFFLINE` polls in a row, is shown offline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::client::RemoteActor;
use super::{data, delivery, FedError, Federation, Local, AS_CONTEXT};
use crate::tasks::Stage;

/// Follow the server at `url`; returns its id.
pub async fn add(fed: &Federation, local: &Local, url: &str) -> Result<i64, FedError> {
    let base = url.trim().trim_end_matches('/').to_string();
    fed.client.check_url(&base)?;
    let config = fed.client.get_plain_json(&format!("{base}/api/config")).await?;
    let account = config.pointer("/federation/account").and_then(Value::as_str).unwrap_or_default();
    let enabled = config.pointer("/federation/enabled").and_then(Value::as_bool).unwrap_or(false);
    if !enabled || !account.contains('@') {
        return Err(FedError::Remote(format!("{base} does not have federation enabled")));
    }
    let actor_iri = fed.client.webfinger(account).await?;
    let kp = fed.keys.get().await?;
    let actor = fed.client.fetch_actor(&actor_iri, Some((&kp, &local.key_id))).await?;
    if actor.iri == local.actor {
        return Err(FedError::Policy("a server cannot follow itself".into()));
    }
    let text = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let tags: Vec<String> = config
        .get("tags")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let follow_iri = local.new_iri();
    let (name, summary) = (text("name"), text("summary"));
    let (b, a, f) = (base.clone(), actor.clone(), follow_iri.clone());
    let id = fed.store.call(move |c| data::add_server(c, &b, &a.iri, &a.inbox, &f, &name, &summary, &tags)).await?;
    let follow = json!({
        "@context": AS_CONTEXT,
        "id": follow_iri,
        "type": "Follow",
        "actor": local.actor,
        "object": actor.iri,
    });
    delivery::enqueue(fed, vec![actor.inbox.clone()], &follow).await?;
    tracing::info!(server = %base, actor = %actor.iri, "following a federated server");
    Ok(id)
}

/// Stop following server `id` (an Undo of the Follow) and forget it; false if there is none.
pub async fn remove(fed: &Federation, local: &Local, id: i64) -> Result<bool, FedError> {
    let Some(server) = fed.store.call(move |c| data::remove_server(c, id)).await? else {
        return Ok(false);
    };
    let undo = json!({
        "@context": AS_CONTEXT,
        "id": local.new_iri(),
        "type": "Undo",
        "actor": local.actor,
        "object": { "id": server.follow_iri, "type": "Follow", "actor": local.actor, "object": server.actor_iri },
    });
    delivery::enqueue(fed, vec![server.inbox], &undo).await?;
    Ok(true)
}

/// A Create from `actor`: if it is a federated server, it went live.
pub async fn went_live(fed: &Arc<Federation>, actor: &RemoteActor) -> Result<(), FedError> {
    let a = actor.iri.clone();
    let Some(server) = fed.store.call(move |c| data::server_by(c, None, Some(&a))).await? else {
        return Ok(());
    };
    let a = actor.iri.clone();
    fed.store.call(move |c| data::server_status(c, &a, true, None)).await?;
    tracing::info!(server = %server.url, "a federated server went live");
    // The title comes from the server's status, fetched off the inbox request so the sender's
    // delivery never waits on it. A server that just posted is live even when its status does not
    // answer.
    let (fed, a) = (fed.clone(), actor.iri.clone());
    fed.tasks.clone().spawn_until_stopped(Stage::Delivery, "federation: server status", async move {
        let Some((online, title)) = status(&fed, &server.url).await else { return };
        if let Err(e) = fed.store.call(move |c| data::server_status(c, &a, online, title.as_deref())).await {
            tracing::warn!("cannot record a federated server's status: {e}");
        }
    });
    Ok(())
}

/// Longest wait for a federated server's `/api/status`.
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the server at `base` is live, and its stream title; `None` when it does not answer.
async fn status(fed: &Federation, base: &str) -> Option<(bool, Option<String>)> {
    let url = fed.client.check_url(&format!("{base}/api/status")).ok()?;
    let v = tokio::time::timeout(STATUS_TIMEOUT, fed.client.get_plain_json(url.as_str())).await.ok()?.ok()?;
    let online = v.get("online").and_then(Value::as_bool)?;
    let title = v.get("streamTitle").and_then(Value::as_str).map(str::to_string);
    Some((online, title))
}

/// Polls in a row a server shown online may not answer before it is shown offline (one network
/// blip does not end a stream).
const MISSES_OFFLINE: u32 = 3;

/// What to record of a server shown online with `title`, given its answer to a poll (`None`: no
/// answer) and the polls in a row it has not answered (updated): `None` when nothing changed.
fn verdict(answer: Option<(bool, Option<String>)>, missed: &mut u32, title: &str) -> Option<(bool, Option<String>)> {
    let Some((live, new_title)) = answer else {
        *missed += 1;
        return (*missed >= MISSES_OFFLINE).then_some((false, None));
    };
    *missed = 0;
    if live && new_title.as_deref().is_none_or(|t| t == title) {
        return None;
    }
    Some((live, new_title))
}

/// Every `config.status_poll`, ask each server shown online whether it still is (see the module doc).
/// Runs until its stage stops.
pub async fn watch(fed: Arc<Federation>) {
    let mut tick = tokio::time::interval(fed.config.status_poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Polls in a row each server shown online has not answered.
    let mut misses: HashMap<i64, u32> = HashMap::new();
    loop {
        tick.tick().await;
        if !fed.enabled() {
            continue;
        }
        let servers = match fed.store.call(|c| data::servers(c)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot read the federated servers: {e}");
                continue;
            }
        };
        let online: Vec<data::Server> = servers.into_iter().filter(|s| s.is_online).collect();
        misses.retain(|id, _| online.iter().any(|s| s.id == *id));
        let answers = futures_util::future::join_all(online.iter().map(|s| status(&fed, &s.url))).await;
        for (s, answer) in online.into_iter().zip(answers) {
            let missed = misses.entry(s.id).or_default();
            let Some((live, title)) = verdict(answer, missed, &s.stream_title) else { continue };
            if !live {
                tracing::info!(server = %s.url, "a federated server is no longer live (or stopped answering)");
            }
            let a = s.actor_iri.clone();
            if let Err(e) = fed.store.call(move |c| data::server_status(c, &a, live, title.as_deref())).await {
                tracing::warn!("cannot record a federated server's status: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_shown_offline_when_it_says_so_or_stops_answering_for_a_while() {
        let mut missed = 0;
        assert_eq!(verdict(Some((true, Some("Show".into()))), &mut missed, "Show"), None, "nothing new");
        assert_eq!(
            verdict(Some((true, Some("New title".into()))), &mut missed, "Show"),
            Some((true, Some("New title".into())))
        );
        assert_eq!(verdict(Some((false, None)), &mut missed, "Show"), Some((false, None)), "offline at once");
        for _ in 1..MISSES_OFFLINE {
            assert_eq!(verdict(None, &mut missed, "Show"), None, "a blip does not end a stream");
        }
        assert_eq!(verdict(Some((true, None)), &mut missed, "Show"), None);
        assert_eq!(missed, 0, "an answer resets the count");
        for _ in 1..MISSES_OFFLINE {
            assert_eq!(verdict(None, &mut missed, "Show"), None);
        }
        assert_eq!(verdict(None, &mut missed, "Show"), Some((false, None)), "{MISSES_OFFLINE} misses in a row");
    }
}
