//! The local actor and what it publishes: the actor document, the outbox (paged public posts), the
//! followers collection (paged; counts only when followers are hidden), single objects under
//! `/federation/<id>`, and building and sending Notes (the go-live post, admin posts, direct
//! messages).
//!
//! Content negotiation (Owncast's `RequireActivityPubOrRedirect`): a GET whose `Accept` names no
//! ActivityPub/JSON type is redirected to the web page.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::client::RemoteActor;
use super::{data, delivery, FedError, Federation, Local, AP_CONTENT_TYPE, AS_CONTEXT, PUBLIC};
use crate::config::PrivatePosts;

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
pub fn ap_json(v: impl Serialize) -> Response {
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

/// A tag of the actor or of a Note: a `Hashtag`, or a `Mention` of an account.
#[derive(Debug, Serialize, ToSchema)]
pub struct Tag {
    /// `Hashtag` or `Mention`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub href: String,
    pub name: String,
}

fn hashtags(local: &Local, tags: &[String]) -> Vec<Tag> {
    tags.iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            let t = t.trim().trim_start_matches('#');
            Tag { kind: "Hashtag", href: format!("{}/tags/{}", local.base, escape(t)), name: format!("#{t}") }
        })
        .collect()
}

/// The ActivityPub actor of the stream (`GET /federation/user/{username}`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActorDocument {
    /// The JSON-LD context: ActivityStreams, the security vocabulary and the extension terms.
    #[serde(rename = "@context")]
    pub context: Value,
    pub id: String,
    /// Always `Service`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub preferred_username: String,
    pub name: String,
    /// The server summary as HTML.
    pub summary: String,
    pub url: String,
    pub inbox: String,
    pub outbox: String,
    pub followers: String,
    pub following: String,
    pub endpoints: ActorEndpoints,
    pub manually_approves_followers: bool,
    pub discoverable: bool,
    pub icon: ActorImage,
    pub image: ActorImage,
    pub tag: Vec<Tag>,
    pub attachment: Vec<PropertyValue>,
    pub public_key: ActorPublicKey,
}

/// `endpoints` of the actor.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActorEndpoints {
    pub shared_inbox: String,
}

/// An `Image` of the actor (its icon and header: the logo).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActorImage {
    /// Always `Image`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub media_type: &'static str,
    pub url: String,
}

/// A `PropertyValue` of the actor's profile fields (the stream and the social handles, as HTML links).
#[derive(Debug, Serialize, ToSchema)]
pub struct PropertyValue {
    /// Always `PropertyValue`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub value: String,
}

/// The actor's `publicKey` (for HTTP signatures).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActorPublicKey {
    pub id: String,
    pub owner: String,
    pub public_key_pem: String,
}

fn profile_link(name: String, href: &str) -> PropertyValue {
    PropertyValue {
        kind: "PropertyValue",
        name,
        value: format!(
            "<a href=\"{0}\" rel=\"me nofollow noopener noreferrer\" target=\"_blank\">{0}</a>",
            escape(href)
        ),
    }
}

/// The actor document.
pub async fn actor_document(fed: &Federation, local: &Local) -> Result<ActorDocument, FedError> {
    let s = fed.settings.get();
    let kp = fed.keys.get().await?;
    let logo = format!("{}/logo/external", local.base);
    let mut attachment = vec![profile_link("Stream".into(), &local.base)];
    for h in &s.instance.social_handles {
        attachment.push(profile_link(escape(&h.platform), &h.url));
    }
    let image = || ActorImage { kind: "Image", media_type: "image/png", url: logo.clone() };
    Ok(ActorDocument {
        context: json!([AS_CONTEXT, "https://w3id.org/security/v1", {
            "manuallyApprovesFollowers": "as:manuallyApprovesFollowers",
            "toot": "http://joinmastodon.org/ns#",
            "discoverable": "toot:discoverable",
            "PropertyValue": "schema:PropertyValue",
            "schema": "http://schema.org#",
            "value": "schema:value",
            "Hashtag": "as:Hashtag"
        }]),
        id: local.actor.clone(),
        kind: "Service",
        preferred_username: local.username.clone(),
        name: s.instance.name.clone(),
        summary: crate::markdown::to_html(&s.instance.summary),
        url: local.base.clone(),
        inbox: local.inbox.clone(),
        outbox: local.outbox.clone(),
        followers: local.followers.clone(),
        following: format!("{}/following", local.actor),
        endpoints: ActorEndpoints { shared_inbox: local.inbox.clone() },
        manually_approves_followers: s.federation.federation_private,
        discoverable: true,
        icon: image(),
        image: image(),
        tag: hashtags(local, &s.instance.tags),
        attachment,
        public_key: ActorPublicKey {
            id: local.key_id.clone(),
            owner: local.actor.clone(),
            public_key_pem: kp.public_pem.clone(),
        },
    })
}

/// An `OrderedCollection` (the outbox, the followers) or one `OrderedCollectionPage` of it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Collection {
    /// The ActivityStreams context.
    #[serde(rename = "@context")]
    pub context: &'static str,
    pub id: String,
    /// `OrderedCollection` or `OrderedCollectionPage`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub total_items: i64,
    /// The first page (the collection only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub first: Option<String>,
    /// The collection a page belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub part_of: Option<String>,
    /// The page's activities (the outbox) or actor IRIs (the followers).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub ordered_items: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub next: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub prev: Option<String>,
}

/// A paged collection: the collection itself without `page`, page `n` (1-based) with it.
pub fn collection(id: &str, total: i64, page: Option<i64>, items: Vec<Value>) -> Collection {
    match page {
        None => Collection {
            context: AS_CONTEXT,
            id: id.to_string(),
            kind: "OrderedCollection",
            total_items: total,
            first: Some(format!("{id}?page=1")),
            part_of: None,
            ordered_items: None,
            next: None,
            prev: None,
        },
        Some(n) => Collection {
            context: AS_CONTEXT,
            id: format!("{id}?page={n}"),
            kind: "OrderedCollectionPage",
            total_items: total,
            first: None,
            part_of: Some(id.to_string()),
            ordered_items: Some(items),
            next: (n * PAGE_SIZE < total).then(|| format!("{id}?page={}", n + 1)),
            prev: (n > 1).then(|| format!("{id}?page={}", n - 1)),
        },
    }
}

/// A stored ActivityPub object of the outbox (`GET /federation/{id}`): free-form JSON-LD.
#[derive(Debug, Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct StoredObject(pub Value);

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
            tag.push(Tag { kind: "Mention", href: a.iri.clone(), name: format!("@{}", a.account()) });
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
/// followers-only in private mode. A channel that is not public (unlisted, or behind a viewing pass)
/// posts to its followers only, or not at all (`privateFederationPosts`: `followers`, `none`): `None`
/// then; a channel behind a viewing pass leaves its stream title out (it is for its viewers).
pub async fn send_go_live(fed: &Federation) -> Result<Option<Value>, FedError> {
    let local = fed.local().ok_or_else(|| FedError::Policy("the server URL is not set".into()))?;
    let s = fed.settings.get();
    let visibility = s.access.visibility;
    let audience = match (visibility.is_public(), s.access.private_federation_posts) {
        (true, _) if s.federation.federation_private => Audience::Followers,
        (true, _) => Audience::Public,
        (false, PrivatePosts::Followers) => Audience::Followers,
        (false, PrivatePosts::None) => {
            tracing::info!(visibility = visibility.as_str(), "no go-live post: the channel is not public");
            return Ok(None);
        }
    };
    let mut html = format!("<p>{}</p>", escape(&s.federation.federation_go_live_message));
    if !s.instance.stream_title.is_empty() && !visibility.needs_pass() {
        html.push_str(&format!("<p>{}</p>", escape(&s.instance.stream_title)));
    }
    html.push_str(&format!("<p><a href=\"{0}\">{0}</a></p>", escape(&local.base)));
    let tags: Vec<String> = s.instance.tags.iter().map(|t| t.trim().trim_start_matches('#').to_string()).collect();
    let line: Vec<String> = tags
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| format!("<a class=\"hashtag\" href=\"{}/tags/{1}\">#{1}</a>", escape(&local.base), escape(t)))
        .collect();
    if !line.is_empty() {
        html.push_str(&format!("<p>{}</p>", line.join(" ")));
    }
    post_note(fed, &local, html, &tags, audience).await.map(Some)
}

/// 404 as an ActivityPub route answers it.
pub fn not_found() -> Response {
    let body = crate::http::StatusResponse { success: false, message: "not found".into() };
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}
