//! The inbox: establish who signed an inbound activity and that it is new, then hand it to its type
//! (`activities`).
//!
//! Checks, in order, nothing fetched until the request itself passes:
//! 1. federation on (405), the username (404), a JSON object no larger than `MAX_ACTIVITY_BYTES` (400,
//!    413) that names its actor (400);
//! 2. a `Signature` header (401); the actor IRI and the key id are URLs castd may contact (https, or
//!    http on loopback with the development switch; never `javascript:` or another scheme) (401);
//!    the key id's origin is the actor's (403); neither is on a blocked domain (403);
//! 3. the request: the signature covers `(request-target)` (the path as the sender wrote it, with a
//!    channel's `/c/{slug}` prefix), `host`, `date` and `digest`; the `Host` is this server's; the date is in its window; the digest matches the body (401);
//! 4. the signer: the actor's own document, fetched from the actor IRI (or cached), lists that exact
//!    key id, and the signature verifies with that key (401; a cached key that fails is fetched once
//!    more, at most once a minute per actor, in case it was rotated). A fetch that is not cached
//!    takes a token of the sending address's rate (429) and a place among `MAX_FETCHES` at once (503);
//!    the client's caches and the guarded client's per-host limits bound the rest (see `client`);
//! 5. the replay store: an activity already received (by actor and activity id, or by signature when
//!    it has no id) is answered 202 and dropped; kept persistently, as long as its signature could be
//!    replayed (`data::record_sight`);
//! 6. the activity's own `verify` (see `activities`); only then does anything change. The answer is
//!    202.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{OriginalUri, Path, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::activities::{id_of, Activity, Check, Context};
use super::{data, signatures, FedError, Federation, HttpError, Local};
use crate::http::{ApiError, ClientIp};

/// Largest activity accepted.
pub const MAX_ACTIVITY_BYTES: usize = 256 * 1024;
/// Fetches of remote actors and keys for the inbox in flight at once; beyond it, 503.
pub const MAX_FETCHES: usize = 32;

fn unauthorized(why: impl std::fmt::Display) -> HttpError {
    tracing::info!("refused an inbox request: {why}");
    HttpError::Api(ApiError::UnauthorizedToken)
}

fn forbidden(why: String) -> HttpError {
    tracing::info!("refused an inbox request: {why}");
    HttpError::Api(ApiError::Forbidden(why))
}

fn origin(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    u.origin().is_tuple().then(|| u.origin().ascii_serialization())
}

/// Whether the request's `Host` is this server's (case, a trailing dot and a default port aside).
fn host_is_ours(local: &Local, headers: &HeaderMap, uri: &Uri) -> bool {
    let given = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| uri.authority().map(|a| a.to_string()));
    let Some(given) = given else { return false };
    let scheme = url::Url::parse(&local.base).map(|u| u.scheme().to_string()).unwrap_or_else(|_| "https".into());
    let normal = |h: &str| {
        url::Url::parse(&format!("{scheme}://{h}/")).ok().and_then(|u| {
            let host = u.host_str()?.trim_end_matches('.').to_ascii_lowercase();
            Some(match u.port() {
                Some(p) => format!("{host}:{p}"),
                None => host,
            })
        })
    };
    normal(&given).is_some_and(|g| Some(g) == normal(&local.host))
}

/// The replay store's key of an activity: its actor and id (an actor can only ever shadow its own
/// ids), or its signature when it has no id.
fn replay_key(actor: &str, activity: &Value, signature: &[u8]) -> String {
    let mut h = Sha256::new();
    match activity.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
        Some(id) => {
            h.update(b"id\n");
            h.update(actor.as_bytes());
            h.update(b"\n");
            h.update(id.as_bytes());
        }
        None => {
            h.update(b"signature\n");
            h.update(signature);
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `POST /federation/user/{username}/inbox`. The signature's `(request-target)` is the path the
/// sender signed: the request's original one (`OriginalUri`), which for a channel's inbox is under
/// `/c/{slug}` although the channel's router sees it without the prefix.
#[allow(clippy::too_many_arguments)]
pub async fn post_inbox(
    State(fed): State<Arc<Federation>>,
    Path(username): Path<String>,
    ClientIp(ip): ClientIp,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    // 1. The request.
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
    let actor_iri = activity.get("actor").and_then(id_of).unwrap_or_default().to_string();
    if actor_iri.is_empty() {
        return Err(ApiError::bad("the activity names no actor").into());
    }

    // 2. Who may have signed.
    let sig_header = headers
        .get("signature")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| unauthorized(signatures::SigError::Missing))?;
    let params = signatures::parse(sig_header).map_err(unauthorized)?;
    fed.client.check_url(&actor_iri).map_err(|e| unauthorized(format!("actor: {e}")))?;
    fed.client.check_url(&params.key_id).map_err(|e| unauthorized(format!("key id: {e}")))?;
    if origin(&params.key_id).is_none() || origin(&params.key_id) != origin(&actor_iri) {
        return Err(forbidden(format!("the key {} is not on the server of the actor {actor_iri}", params.key_id)));
    }
    let blocked = fed.settings.get().federation.federation_blocked_domains.clone();
    if super::blocklist::is_blocked(&blocked, &params.key_id) || super::blocklist::is_blocked(&blocked, &actor_iri) {
        return Err(forbidden(format!("{actor_iri} is on a blocked domain")));
    }

    // 3. What needs no key.
    let get_header = |name: &str| -> Option<String> {
        let vals: Vec<&str> = headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect();
        (!vals.is_empty()).then(|| vals.join(", "))
    };
    if !host_is_ours(&local, &headers, &uri) {
        return Err(unauthorized("the request was not made to this server's host"));
    }
    let signed_at = signatures::check(&params, &get_header, Some(&body), chrono::Utc::now()).map_err(unauthorized)?;

    // 4. The signer.
    let kind = activity.get("type").and_then(Value::as_str).unwrap_or_default();
    let object = activity.get("object").and_then(id_of).unwrap_or_default();
    let deleting_itself = kind == "Delete" && object == actor_iri;
    let kp = fed.keys.get().await?;
    let signer = Some((kp.as_ref(), local.key_id.as_str()));
    let path_and_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let verify =
        |key: &rsa::RsaPublicKey| signatures::verify_key(&params, method.as_str(), path_and_query, &get_header, key);
    let found = {
        let _place = fetch_place(&fed, &actor_iri, ip)?;
        fed.client.signer(&actor_iri, &params.key_id, false, signer).await
    };
    let actor = match found {
        Ok((actor, key)) => match verify(&key) {
            Ok(()) => actor,
            Err(signatures::SigError::Invalid) => {
                // maybe the key was rotated: fetch the actor once more (at most once a minute)
                let fresh = {
                    let _place = fetch_place(&fed, "", ip)?;
                    fed.client.signer(&actor_iri, &params.key_id, true, signer).await
                };
                let (actor, key) = fresh.map_err(|e| unauthorized(format!("{e} (after a bad signature)")))?;
                verify(&key).map_err(unauthorized)?;
                actor
            }
            Err(e) => return Err(unauthorized(e)),
        },
        // A deleted actor's key is gone too; its Delete is honoured since the actor really is.
        Err(FedError::Gone(_)) if deleting_itself => return deleted_actor(&fed, &actor_iri).await,
        Err(FedError::Busy(m)) => {
            tracing::info!("an inbox request waits for a busy remote host: {m}");
            return Err(ApiError::Unavailable("the sender's server is busy for now; try again later".into()).into());
        }
        Err(e) => return Err(unauthorized(format!("cannot verify the key {}: {e}", params.key_id))),
    };

    // 5. New?
    let seen = replay_key(&actor.iri, &activity, &params.signature);
    let (key, at, expired) = (
        seen.clone(),
        signed_at.timestamp_millis(),
        (chrono::Utc::now() - signatures::DATE_WINDOW - chrono::TimeDelta::minutes(1)).timestamp_millis(),
    );
    match fed.store.call(move |c| data::record_sight(c, &key, at, expired, data::MAX_SEEN)).await? {
        data::Sight::First => {}
        data::Sight::Seen => {
            tracing::info!(actor = %actor.iri, kind, "dropped an activity received before (a replay or a retry)");
            return Ok(accepted("already received"));
        }
        data::Sight::TooOld => return Err(unauthorized("signed too long ago for the replay store to tell")),
    }

    // 6. Its type.
    let cx = Context { fed: &fed, local: &local, actor: &actor };
    let typed = Activity::parse(&activity);
    let result = match typed.verify(&cx).await {
        Ok(Check::Act) => typed.receive(&cx).await,
        Ok(Check::Ignore(why)) => {
            tracing::info!(actor = %actor.iri, "ignored an activity: {why}");
            Ok(())
        }
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        // The sender's retry must be acted on.
        if let Err(e) = fed.store.call(move |c| data::forget_sight(c, &seen)).await {
            tracing::warn!("cannot update the federation replay store: {e}");
        }
        return Err(e.into());
    }
    fed.recount().await;
    Ok(accepted("accepted"))
}

fn accepted(message: &str) -> Response {
    (StatusCode::ACCEPTED, crate::http::StatusResponse::ok(message)).into_response()
}

/// A place to fetch for the inbox: a token of the address's rate when `actor_iri` is not cached (or
/// always, for `""`), and one of `MAX_FETCHES`.
fn fetch_place(
    fed: &Federation,
    actor_iri: &str,
    ip: Option<std::net::IpAddr>,
) -> Result<tokio::sync::OwnedSemaphorePermit, HttpError> {
    if actor_iri.is_empty() || !fed.client.is_cached(actor_iri) {
        if let Some(ip) = ip {
            fed.limits.inbox_fetch.take(ip).map_err(|l| {
                tracing::info!(%ip, "inbox requests that need a fetch come too fast from one address");
                HttpError::Api(ApiError::TooManyRequests(l))
            })?;
        }
    }
    fed.limits
        .inbox_fetches
        .clone()
        .try_acquire_owned()
        .map_err(|_| HttpError::Api(ApiError::Unavailable("too many inbox requests at once; try again later".into())))
}

/// The Delete of an actor whose document is gone (404/410): it stops following.
async fn deleted_actor(fed: &Federation, actor_iri: &str) -> Result<Response, HttpError> {
    let iri = actor_iri.to_string();
    let removed = fed.store.call(move |c| data::remove_follower(c, &iri)).await?;
    tracing::info!(actor = actor_iri, removed, "a deleted actor stopped following");
    fed.recount().await;
    Ok(accepted("accepted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_of_other_schemes_never_match() {
        assert_eq!(origin("javascript:alert(1)"), None);
        assert_eq!(origin("data:text/plain,x"), None);
        assert_eq!(origin("https://a.example/u#k"), origin("https://a.example/other"));
        assert_ne!(origin("https://a.example/u"), origin("https://a.example:8443/u"));
    }

    #[test]
    fn the_host_must_be_this_servers() {
        let local = Local::new("https://Live.Example/", "streamer").unwrap();
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, v.parse().unwrap());
            m
        };
        let uri: Uri = "/federation/user/streamer/inbox".parse().unwrap();
        for ok in ["live.example", "LIVE.example", "live.example.", "live.example:443"] {
            assert!(host_is_ours(&local, &h(ok), &uri), "{ok}");
        }
        for bad in ["other.example", "live.example:8443", "live.example.evil"] {
            assert!(!host_is_ours(&local, &h(bad), &uri), "{bad}");
        }
        assert!(!host_is_ours(&local, &HeaderMap::new(), &uri));
    }
}
