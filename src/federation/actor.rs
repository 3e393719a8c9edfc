//! The local actor and what it publishes: the actor document, the outbox (paged public posts), the
//! followers collection (paged; counts only when followers are hidden), single objects under
//! `/federation/<id>`, and building and sending Notes (the go-live post, admin posts, direct
//! messages).
//!
//! Content negotiation (Owncast's `RequireActivityPubOrRedirect`): a GET whose `Accept` names no
//! ActivityPub/JSON type is redirected to the web page.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{json, Value};

use super::client::RemoteActor;
use super::{data, delivery, FedError, Federation, Local, AP_CONTENT_TYPE, AS_CONTEXT, PUBLIC};

/// Items per page of the outbox and followers collections.
pub const PAGE_SIZE: i64 = 20;

/// Whether the request asks for an ActivityPub (JSON) document.
pub fn wants_activitypub(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("activity+json") || v.contains("ld+json") || v.contains("application/json"))
}

/// An ActivityPub JSON answer.
pub fn ap_json(v: Value) -> Response {
    let mut resp = axum::Json(v).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(AP_CONTENT_TYPE));
    resp
}

/// The redirect browsers get instead of a document.
pub fn to_web_page() -> Response {
    Redirect::temporary("/").into_response()
}

/// Minimal HTML escaping for text put into a Note.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn hashtags(local: &Local, tags: &[String]) -> Vec<Value> {
    tags.iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            let t = t.trim().trim_start_matches('#');
            json!({ "type": "Hashtag", "href": format!("{}/tags/{}", local.base, escape(t)), "name": format!("#{t}") })
        })
        .collect()
}

/// The actor document.
pub async fn actor_document(fed: &Federation, local: &Local) -> Result<Value, FedError> {
    let s = fed.settings.get();
    let kp = fed.keys.get().await?;
    let logo = format!("{}/logo/external", local.base);
    let mut attachment = vec![json!({
        "type": "PropertyValue",
        "name": "Stream",
        "value": format!("<a href=\"{0}\" rel=\"me nofollow noopener noreferrer\" target=\"_blank\">{0}</a>", escape(&local.base)),
    })];
    for h in &s.social_handles {
        attachment.push(json!({
            "type": "PropertyValue",
            "name": escape(&h.platform),
            "value": format!("<a href=\"{0}\" rel=\"me nofollow noopener noreferrer\" target=\"_blank\">{0}</a>", escape(&h.url)),
        }));
    }
    Ok(json!({
        "@context": [AS_CONTEXT, "https://w3id.org/security/v1", {
            "manuallyApprovesFollowers": "as:manuallyApprovesFollowers",
            "toot": "http://joinmastodon.org/ns#",
            "discoverable": "toot:discoverable",
            "PropertyValue": "schema:PropertyValue",
            "schema": "http://schema.org#",
            "value": "schema:value",
            "Hashtag": "as:Hashtag"
        }],
        "id": local.actor,
        "type": "Service",
        "preferredUsername": local.username,
        "name": s.name,
        "summary": crate::markdown::to_html(&s.summary),
        "url": local.base,
        "inbox": local.inbox,
        "outbox": local.outbox,
        "followers": local.followers,
        "following": format!("{}/following", local.actor),
        "endpoints": { "sharedInbox": local.inbox },
        "manuallyApprovesFollowers": s.federation_private,
        "discoverable": true,
        "icon": { "type": "Image", "mediaType": "image/png", "url": logo },
        "image": { "type": "Image", "mediaType": "image/png", "url": logo },
        "tag": hashtags(local, &s.tags),
        "attachment": attachment,
        "publicKey": { "id": local.key_id, "owner": local.actor, "publicKeyPem": kp.public_pem },
    }))
}

/// A paged collection: the collection itself without `page`, page `n` (1-based) with it.
pub fn collection(id: &str, total: i64, page: Option<i64>, items: Vec<Value>) -> Value {
    match page {
        None => json!({
            "@context": AS_CONTEXT,
            "id": id,
            "type": "OrderedCollection",
            "totalItems": total,
            "first": format!("{id}?page=1"),
        }),
        Some(n) => {
            let mut v = json!({
                "@context": AS_CONTEXT,
                "id": format!("{id}?page={n}"),
                "type": "OrderedCollectionPage",
                "partOf": id,
                "totalItems": total,
                "orderedItems": items,
            });
            if n * PAGE_SIZE < total {
                v["next"] = json!(format!("{id}?page={}", n + 1));
            }
            if n > 1 {
                v["prev"] = json!(format!("{id}?page={}", n - 1));
            }
            v
        }
    }
}

/// Who a Note is for.
pub enum Audience {
    /// Public, with the followers in `cc` (stored in the outbox).
    Public,
    /// Followers only (private mode; stored, not listed publicly).
    Followers,
    /// One account, mentioned (not stored).
    Direct(RemoteActor),
}

/// Build a `Create` of a `Note` with `content` (HTML) and send it to its audience through the
/// delivery queue; returns the Create activity.
pub async fn post_note(
    fed: &Federation,
    local: &Local,
    content: String,
    tags: &[String],
    audience: Audience,
) -> Result<Value, FedError> {
    let published = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let note_iri = local.new_iri();
    let mut tag = hashtags(local, tags);
    let (to, cc) = match &audience {
        Audience::Public => (json!([PUBLIC]), json!([local.followers])),
        Audience::Followers => (json!([local.followers]), json!([])),
        Audience::Direct(a) => {
            tag.push(json!({ "type": "Mention", "href": a.iri, "name": format!("@{}", a.account()) }));
            (json!([a.iri]), json!([]))
        }
    };
    let note = json!({
        "id": note_iri,
        "type": "Note",
        "attributedTo": local.actor,
        "content": content,
        "published": published,
        "url": local.base,
        "to": to,
        "cc": cc,
        "tag": tag,
    });
    let create = json!({
        "@context": AS_CONTEXT,
        "id": format!("{note_iri}/activity"),
        "type": "Create",
        "actor": local.actor,
        "published": published,
        "to": to,
        "cc": cc,
        "object": note,
    });
    let inboxes = match &audience {
        Audience::Direct(a) => vec![a.inbox.clone()],
        _ => {
            let public = matches!(audience, Audience::Public);
            let (n, c) = (note.clone(), create.clone());
            let (ni, ci) = (note_iri.clone(), format!("{note_iri}/activity"));
            fed.store
                .call(move |db| {
                    data::outbox_insert(db, &ni, "Note", &n, public)?;
                    data::outbox_insert(db, &ci, "Create", &c, public)?;
                    data::follower_inboxes(db)
                })
                .await?
        }
    };
    let n = delivery::enqueue(fed, inboxes, &create).await?;
    tracing::info!(deliveries = n, "queued a fediverse post");
    Ok(create)
}

/// The go-live post: the go-live message, the stream title, the link and the tags; public, or
/// followers-only in private mode.
pub async fn send_go_live(fed: &Federation) -> Result<Value, FedError> {
    let local = fed.local().ok_or_else(|| FedError::Policy("the server URL is not set".into()))?;
    let s = fed.settings.get();
    let mut html = format!("<p>{}</p>", escape(&s.federation_go_live_message));
    if !s.stream_title.is_empty() {
        html.push_str(&format!("<p>{}</p>", escape(&s.stream_title)));
    }
    html.push_str(&format!("<p><a href=\"{0}\">{0}</a></p>", escape(&local.base)));
    let tags: Vec<String> = s.tags.iter().map(|t| t.trim().trim_start_matches('#').to_string()).collect();
    let line: Vec<String> = tags
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| format!("<a class=\"hashtag\" href=\"{}/tags/{1}\">#{1}</a>", escape(&local.base), escape(t)))
        .collect();
    if !line.is_empty() {
        html.push_str(&format!("<p>{}</p>", line.join(" ")));
    }
    let audience = if s.federation_private { Audience::Followers } else { Audience::Public };
    post_note(fed, &local, html, &tags, audience).await
}

/// 404 as an ActivityPub route answers it.
pub fn not_found() -> Response {
    (StatusCode::NOT_FOUND, axum::Json(json!({"success": false, "message": "not found"}))).into_response()
}
