//! Federation's routes: the discovery documents, the actor and its collections, the inbox, the
//! public follower list, federated servers, remote follow and Fediverse sign-in, and the admin
//! follower, activity, server and post routes.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::activities::{engagement, follow};
use super::actor::{self, ap_json, wants_activitypub, PAGE_SIZE};
use super::data::{self, FollowerState};
use super::{discovery, inbox, servers, signin, FedError, Federation, HttpError, AP_CONTENT_TYPE};
use crate::http::auth::TokenQuery;
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, JsonBody, Registry, ResponseDoc, StatusResponse, ValueDoc};

const GROUP: &str = "federation";

/// `{actorIRI, approved}`: approve (true) or deny (false) a follower.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct ApproveFollower {
    #[serde(rename = "actorIRI")]
    pub actor_iri: String,
    pub approved: bool,
}

/// `{actorIRI}`: the follower to remove.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct RemoveFollower {
    #[serde(rename = "actorIRI")]
    pub actor_iri: String,
}

/// `{url}`: the server to follow.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct AddFederatedServer {
    /// The server's base URL.
    #[schema(format = "uri")]
    pub url: String,
}

/// `{account}`: a Fediverse account, `user@host` or `@user@host`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct FediverseAccount {
    pub account: String,
}

/// `{code}`: the one-time code the account received.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct FediverseCode {
    pub code: String,
}

/// A paged list of followers: `{total, results}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct FollowerPage {
    pub total: i64,
    pub results: Vec<data::Follower>,
}

/// `{total, results}`: a page of federation activity.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ActivityPage {
    pub total: i64,
    pub results: Vec<data::Activity>,
}

/// Where a browser is sent by the ActivityPub routes (its `Accept` names no JSON type).
const TO_WEB_PAGE: &str = "A browser (no JSON type in Accept) is redirected to the web page";

/// `{servers}`: the federated server list.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct FederatedServers {
    pub servers: Vec<data::Server>,
}

pub fn routes(reg: &mut Registry, fed: Arc<Federation>) {
    super::settings::routes(reg, fed.clone());
    let mut reg = reg.scope(fed);
    for_schemas(&mut reg);
    let p = Auth::Public;
    // Every route that needs federation answers 405 while it is disabled, and 404 (no such user or
    // object, or no server URL yet) — see `Federation::active`.
    const OFF: &str = "Federation is not enabled";
    const NO_URL: &str = "The server URL is not set (or no such user or object)";
    reg.get("/.well-known/webfinger", GROUP, p, "WebFinger (?resource=acct:user@host)", discovery::webfinger)
        .query("resource", false, ValueDoc::String)
        .returns_as::<discovery::Webfinger>(discovery::JRD_CONTENT_TYPE)
        .error(400, "No resource, or not acct:user@host")
        .error(404, NO_URL)
        .error(405, OFF)
        .error(501, "The resource names another host");
    reg.get("/.well-known/host-meta", GROUP, p, "host-meta (XRD)", discovery::host_meta)
        .answers(ResponseDoc::Content("application/xrd+xml"))
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get("/.well-known/nodeinfo", GROUP, p, "NodeInfo index", discovery::nodeinfo_index)
        .returns::<discovery::NodeInfoIndex>()
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get("/.well-known/x-nodeinfo2", GROUP, p, "x-nodeinfo2", discovery::x_nodeinfo2)
        .returns::<discovery::XNodeInfo2>()
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get("/nodeinfo/2.0", GROUP, p, "NodeInfo 2.0", discovery::nodeinfo)
        .returns_as::<discovery::NodeInfo>(discovery::NODEINFO_CONTENT_TYPE)
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get("/api/v1/instance", GROUP, p, "Mastodon-style instance information", discovery::instance)
        .returns::<discovery::Instance>()
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get(
        "/federation/user/{username}",
        GROUP,
        p,
        "The ActivityPub actor (a browser, whose Accept names no JSON type, is redirected to /)",
        get_actor,
    )
    .returns_as::<actor::ActorDocument>(AP_CONTENT_TYPE)
    .redirects(307, TO_WEB_PAGE)
    .error(405, OFF);
    reg.post(
        "/federation/user/{username}/inbox",
        GROUP,
        p,
        "The actor's inbox (HTTP-signed activities; 202)",
        BodyDoc::Json(r#"{"type":"object","description":"An ActivityStreams activity"}"#),
        inbox::post_inbox,
    )
    .error(202, "Accepted (the answer to every activity taken)")
    .error(400, "Not an activity (JSON object with an actor)")
    .error(401, "No valid HTTP signature (or not by a key the actor lists)")
    .error(403, "The key is not on the actor's server, or the sender is blocked")
    .error(405, OFF)
    .error(429, "Too many requests that need a fetch from this address")
    .error(503, "Too many fetches at once, or the sender's server is busy");
    reg.get("/federation/user/{username}/outbox", GROUP, p, "The actor's outbox (?page=)", get_outbox)
        .query("page", false, ValueDoc::Json(PAGE))
        .returns_as::<actor::Collection>(AP_CONTENT_TYPE)
        .redirects(307, TO_WEB_PAGE)
        .error(405, OFF);
    reg.get("/federation/user/{username}/followers", GROUP, p, "The actor's followers (?page=)", get_followers)
        .query("page", false, ValueDoc::Json(PAGE))
        .returns_as::<actor::Collection>(AP_CONTENT_TYPE)
        .redirects(307, TO_WEB_PAGE)
        .error(405, OFF);
    // Never a success (the registry still lists a bodiless 200): 404 for every user.
    reg.get("/federation/user/{username}/following", GROUP, p, "Not served (404)", get_following).error(405, OFF);
    // The bare prefixes, which Owncast serves with the same handler as everything under them: 405
    // while federation is off (as every federation route), otherwise nothing there (404).
    reg.get("/federation/", GROUP, p, "Nothing (404; 405 while federation is off)", get_nothing)
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get("/federation/user/", GROUP, p, "Nothing (404; 405 while federation is off)", get_nothing)
        .error(404, NO_URL)
        .error(405, OFF);
    reg.get("/federation/{id}", GROUP, p, "One ActivityPub object", get_object)
        .returns_as::<actor::StoredObject>(AP_CONTENT_TYPE)
        .redirects(307, TO_WEB_PAGE)
        .error(405, OFF);
    reg.get("/federation/event/{id}", GROUP, p, "A scheduled stream's ActivityPub Event (410: deleted)", get_event)
        .returns_as::<actor::StoredObject>(AP_CONTENT_TYPE)
        .redirects(307, TO_WEB_PAGE)
        .error(405, OFF)
        .error(410, "The event was deleted (its Tombstone)");
    reg.get(
        "/federation/event/{id}/reminder/{n}",
        GROUP,
        p,
        "A scheduled stream's reminder Note (in reply to its Event)",
        get_event_reminder,
    )
    .returns_as::<actor::StoredObject>(AP_CONTENT_TYPE)
    .redirects(307, TO_WEB_PAGE)
    .error(405, OFF);
    reg.get(
        "/api/followers",
        GROUP,
        p,
        "Fediverse followers (offset, limit); only the total while hidefollowers is on",
        public_followers,
    )
    .returns::<FollowerPage>();
    reg.get("/api/federation/servers", GROUP, p, "Federated servers", list_servers).returns::<FederatedServers>();
    reg.post(
        "/api/remotefollow",
        GROUP,
        p,
        "The URL that follows this server from a Fediverse account",
        BodyDoc::Schema("FediverseAccount"),
        remote_follow,
    )
    .returns::<RemoteFollow>()
    .error(400, "Not an account, or its server gave no http(s) follow page (one message, whatever went wrong)")
    .error(403, "Following from that server is not allowed (a blocked domain)")
    .error(404, NO_URL)
    .error(405, OFF)
    .error(429, "Too many lookups from this address");
    reg.post(
        "/api/auth/fediverse",
        GROUP,
        Auth::User,
        "Send a one-time sign-in code to a Fediverse account",
        BodyDoc::Schema("FediverseAccount"),
        fediverse_request,
    )
    .error(400, "Not an account, or it could not be reached")
    .error(401, "No valid ?accessToken=")
    .error(403, "Sign-in from that server is not allowed (a blocked domain)")
    .error(404, NO_URL)
    .error(405, OFF)
    .error(429, "Too many codes asked for from this address");
    reg.post(
        "/api/auth/fediverse/verify",
        GROUP,
        Auth::User,
        "Verify the Fediverse sign-in code sent for this chat user (403 when wrong, expired or burnt)",
        BodyDoc::Schema("FediverseCode"),
        fediverse_verify,
    )
    .error(401, "No valid ?accessToken= (the code's own user's is needed)")
    .error(403, "The code is wrong, has expired, or was burnt after three wrong tries")
    .error(404, NO_URL)
    .error(405, OFF)
    .error(429, "Too many wrong codes from this address");
    let a = Auth::Admin;
    reg.get("/api/admin/followers", GROUP, a, "Approved followers (offset, limit)", |s, q| {
        followers(s, q, FollowerState::Approved)
    })
    .returns::<FollowerPage>();
    reg.get("/api/admin/followers/pending", GROUP, a, "Followers waiting for approval (offset, limit)", |s, q| {
        followers(s, q, FollowerState::Pending)
    })
    .returns::<FollowerPage>();
    reg.get("/api/admin/followers/blocked", GROUP, a, "Denied followers (offset, limit)", |s, q| {
        followers(s, q, FollowerState::Blocked)
    })
    .returns::<FollowerPage>();
    reg.post(
        "/api/admin/followers/approve",
        GROUP,
        a,
        "Approve or deny a follower",
        BodyDoc::Schema("ApproveFollower"),
        approve_follower,
    )
    .error(404, "No follower with that actorIRI");
    reg.post(
        "/api/admin/followers/remove",
        GROUP,
        a,
        "Remove a follower",
        BodyDoc::Schema("RemoveFollower"),
        remove_follower,
    )
    .error(404, "No follower with that actorIRI");
    reg.get("/api/admin/federation/actions", GROUP, a, "Federation activity (offset, limit)", actions)
        .returns::<ActivityPage>();
    reg.get("/api/admin/federation/servers", GROUP, a, "Federated servers", list_servers).returns::<FederatedServers>();
    reg.post(
        "/api/admin/federation/servers",
        GROUP,
        a,
        "Follow another server (add a federated server)",
        BodyDoc::Schema("AddFederatedServer"),
        add_server,
    )
    .returns::<ServerAdded>()
    .error(404, NO_URL)
    .error(405, OFF);
    reg.route(
        Method::DELETE,
        "/api/admin/federation/servers/{id}",
        GROUP,
        a,
        "Stop following a federated server (400 until the server URL is set)",
        BodyDoc::None,
        delete_server,
    );
    reg.post(
        "/api/admin/federation/send",
        GROUP,
        a,
        "Post a note to the followers",
        BodyDoc::Value(ValueDoc::String),
        send_post,
    )
    .error(404, NO_URL)
    .error(405, OFF);
}

/// `?page=` of the actor's collections: a page number, or `true` (or empty) for the first page.
const PAGE: &str =
    r#"{"anyOf":[{"type":"integer","minimum":1,"maximum":1000000},{"type":"string","enum":["true",""]}]}"#;

fn for_schemas(reg: &mut crate::http::Scope<'_, Arc<Federation>>) {
    reg.schema::<ApproveFollower>();
    reg.schema::<RemoveFollower>();
    reg.schema::<AddFederatedServer>();
    reg.schema::<FediverseAccount>();
    reg.schema::<FediverseCode>();
    reg.schema::<data::Follower>();
    reg.schema::<FollowerPage>();
    reg.schema::<data::Server>();
    reg.schema::<FederatedServers>();
    reg.schema::<data::Activity>();
}

fn parse_i64(q: &HashMap<String, String>, key: &str, default: i64, max: i64) -> Result<i64, ApiError> {
    match q.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => Ok(default),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n.min(max)),
            _ => Err(ApiError::bad(format!("{key} must be a non-negative integer"))),
        },
    }
}

fn check_user(fed: &Federation, username: &str) -> Result<super::Local, HttpError> {
    let local = fed.active()?;
    if username != local.username {
        return Err(ApiError::NotFound(format!("no such user {username}")).into());
    }
    Ok(local)
}

async fn get_actor(
    State(fed): State<Arc<Federation>>,
    Path(username): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let local = check_user(&fed, &username)?;
    if !wants_activitypub(&headers) {
        return Ok(actor::to_web_page());
    }
    Ok(ap_json(actor::actor_document(&fed, &local).await?))
}

fn page_of(q: &HashMap<String, String>) -> Result<Option<i64>, ApiError> {
    match q.get("page").map(|s| s.trim()) {
        None => Ok(None),
        Some("true") | Some("") => Ok(Some(1)),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::bad("page must be a positive integer")),
        },
    }
}

async fn get_outbox(
    State(fed): State<Arc<Federation>>,
    Path(username): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let local = check_user(&fed, &username)?;
    if !wants_activitypub(&headers) {
        return Ok(actor::to_web_page());
    }
    let page = page_of(&q)?;
    let offset = (page.unwrap_or(1) - 1) * PAGE_SIZE;
    let (total, items) = fed
        .store
        .call(move |c| {
            let total = data::outbox_count(c)?;
            let items = if page.is_some() { data::outbox_page(c, offset, PAGE_SIZE)? } else { Vec::new() };
            Ok((total, items))
        })
        .await
        .map_err(ApiError::from)?;
    Ok(ap_json(actor::collection(&local.outbox, total, page, items)))
}

async fn get_followers(
    State(fed): State<Arc<Federation>>,
    Path(username): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let local = check_user(&fed, &username)?;
    if !wants_activitypub(&headers) {
        return Ok(actor::to_web_page());
    }
    let page = page_of(&q)?;
    let hidden = fed.settings.get().federation.federation_hide_followers;
    let offset = (page.unwrap_or(1) - 1) * PAGE_SIZE;
    let (total, items) = fed
        .store
        .call(move |c| {
            let (total, _) = data::followers(c, FollowerState::Approved, 0, 0)?;
            let items = if page.is_some() && !hidden { data::follower_iris(c, offset, PAGE_SIZE)? } else { Vec::new() };
            Ok((total, items))
        })
        .await
        .map_err(ApiError::from)?;
    Ok(ap_json(actor::collection(&local.followers, total, page, items.into_iter().map(Value::String).collect())))
}

async fn get_following(
    State(fed): State<Arc<Federation>>,
    Path(username): Path<String>,
) -> Result<Response, HttpError> {
    check_user(&fed, &username)?;
    Ok(actor::not_found())
}

/// `/federation/` and `/federation/user/`: 405 while federation is disabled, else 404.
async fn get_nothing(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    if !fed.settings.get().federation.federation_enabled {
        return Err(HttpError::Disabled);
    }
    Ok(actor::not_found())
}

async fn get_object(
    State(fed): State<Arc<Federation>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    serve_object(&fed, &headers, &id).await
}

/// `/federation/event/{id}`: the Event, or 410 with its Tombstone once deleted; a browser goes to the
/// event's page.
async fn get_event(
    State(fed): State<Arc<Federation>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let local = fed.active()?;
    if !wants_activitypub(&headers) {
        let page = format!("/schedule/{}", url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>());
        return Ok(axum::response::Redirect::temporary(&page).into_response());
    }
    let iri = super::scheduled::event_iri(&local, &id);
    let found = fed.store.call(move |c| data::outbox_get(c, &iri)).await.map_err(ApiError::from)?;
    match found {
        Some((v, true)) if v["type"] == "Tombstone" => {
            let mut resp = ap_json(actor::StoredObject(v));
            *resp.status_mut() = axum::http::StatusCode::GONE;
            Ok(resp)
        }
        Some((v, true)) => Ok(ap_json(actor::StoredObject(v))),
        _ => Ok(actor::not_found()),
    }
}

async fn get_event_reminder(
    State(fed): State<Arc<Federation>>,
    Path((id, n)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    serve_object(&fed, &headers, &format!("event/{id}/reminder/{n}")).await
}

/// A public object of the outbox at `/federation/<path>`.
async fn serve_object(fed: &Federation, headers: &HeaderMap, path: &str) -> Result<Response, HttpError> {
    let local = fed.active()?;
    if !wants_activitypub(headers) {
        return Ok(actor::to_web_page());
    }
    let iri = format!("{}/federation/{path}", local.base);
    let found = fed.store.call(move |c| data::outbox_get(c, &iri)).await.map_err(ApiError::from)?;
    match found {
        Some((mut v, true)) => {
            if let Some(o) = v.as_object_mut() {
                o.entry("@context").or_insert(json!(super::AS_CONTEXT));
            }
            Ok(ap_json(actor::StoredObject(v)))
        }
        _ => Ok(actor::not_found()),
    }
}

async fn followers(
    State(fed): State<Arc<Federation>>,
    Query(q): Query<HashMap<String, String>>,
    state: FollowerState,
) -> Result<Json<FollowerPage>, ApiError> {
    let offset = parse_i64(&q, "offset", 0, i64::MAX / 2)?;
    let limit = parse_i64(&q, "limit", 50, 1000)?;
    let (total, results) = fed.store.call(move |c| data::followers(c, state, offset, limit)).await?;
    Ok(Json(FollowerPage { total, results }))
}

/// `/api/followers`: while `hidefollowers` is on, only the total (as the ActivityPub collection); the
/// admin's list is `/api/admin/followers`.
async fn public_followers(
    State(fed): State<Arc<Federation>>,
    q: Query<HashMap<String, String>>,
) -> Result<Json<FollowerPage>, ApiError> {
    if fed.settings.get().federation.federation_hide_followers {
        let (total, _) = fed.store.call(|c| data::followers(c, FollowerState::Approved, 0, 0)).await?;
        return Ok(Json(FollowerPage { total, results: Vec::new() }));
    }
    followers(State(fed), q, FollowerState::Approved).await
}

async fn approve_follower(
    State(fed): State<Arc<Federation>>,
    JsonBody(req): JsonBody<ApproveFollower>,
) -> Result<Json<StatusResponse>, HttpError> {
    let iri = req.actor_iri.trim().to_string();
    let i = iri.clone();
    let Some((follow_iri, inbox, was_approved)) =
        fed.store.call(move |c| data::follower_follow(c, &i)).await.map_err(ApiError::from)?
    else {
        return Err(ApiError::NotFound(format!("no follower {iri}")).into());
    };
    let local = fed.local();
    if req.approved {
        let i = iri.clone();
        fed.store.call(move |c| data::approve(c, &i)).await.map_err(ApiError::from)?;
        if let Some(local) = &local {
            follow::answer_follow(&fed, local, &iri, &inbox, &follow_iri, true).await?;
        }
        if !was_approved {
            let actor = super::client::RemoteActor { iri: iri.clone(), url: iri.clone(), ..Default::default() };
            let a = iri.clone();
            let row = fed
                .store
                .call(move |c| data::followers(c, FollowerState::Approved, 0, i64::MAX))
                .await
                .ok()
                .and_then(|(_, rows)| rows.into_iter().find(|f| f.link == a));
            let actor = match row {
                Some(f) => super::client::RemoteActor {
                    name: f.name,
                    username: f.username.split('@').next().unwrap_or_default().to_string(),
                    image: f.image,
                    ..actor
                },
                None => actor,
            };
            engagement::publish(&fed, &actor, engagement::Shown::Follow);
        }
        fed.recount().await;
        Ok(StatusResponse::ok("follower approved"))
    } else {
        let i = iri.clone();
        fed.store.call(move |c| data::block(c, &i)).await.map_err(ApiError::from)?;
        if let Some(local) = &local {
            follow::answer_follow(&fed, local, &iri, &inbox, &follow_iri, false).await?;
        }
        fed.recount().await;
        Ok(StatusResponse::ok("follower denied"))
    }
}

async fn remove_follower(
    State(fed): State<Arc<Federation>>,
    JsonBody(req): JsonBody<RemoveFollower>,
) -> Result<Json<StatusResponse>, ApiError> {
    let iri = req.actor_iri.trim().to_string();
    let i = iri.clone();
    if !fed.store.call(move |c| data::remove_follower(c, &i)).await? {
        return Err(ApiError::NotFound(format!("no follower {iri}")));
    }
    fed.recount().await;
    Ok(StatusResponse::ok("follower removed"))
}

async fn actions(
    State(fed): State<Arc<Federation>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<ActivityPage>, ApiError> {
    let offset = parse_i64(&q, "offset", 0, i64::MAX / 2)?;
    let limit = parse_i64(&q, "limit", 50, 1000)?;
    let (total, results) = fed.store.call(move |c| data::activities(c, offset, limit)).await?;
    Ok(Json(ActivityPage { total, results }))
}

async fn list_servers(State(fed): State<Arc<Federation>>) -> Result<Json<FederatedServers>, ApiError> {
    let servers = fed.store.call(|c| data::servers(c)).await?;
    Ok(Json(FederatedServers { servers }))
}

/// The answer to adding a federated server: a `StatusResponse` with the new entry's id.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ServerAdded {
    pub success: bool,
    pub message: String,
    pub id: i64,
}

/// Where to send the browser to follow this server from a Fediverse account.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteFollow {
    pub redirect_url: String,
}

async fn add_server(
    State(fed): State<Arc<Federation>>,
    JsonBody(req): JsonBody<AddFederatedServer>,
) -> Result<Json<ServerAdded>, HttpError> {
    let local = fed.active()?;
    if req.url.trim().is_empty() {
        return Err(ApiError::bad("url is required").into());
    }
    let id = servers::add(&fed, &local, &req.url).await?;
    Ok(Json(ServerAdded { success: true, message: "following the server".into(), id }))
}

async fn delete_server(
    State(fed): State<Arc<Federation>>,
    Path(id): Path<String>,
) -> Result<Json<StatusResponse>, HttpError> {
    let id: i64 = id.trim().parse().map_err(|_| ApiError::bad("the id must be an integer"))?;
    let local = fed.local().ok_or_else(|| ApiError::bad("the server URL is not set"))?;
    if !servers::remove(&fed, &local, id).await? {
        return Err(ApiError::NotFound(format!("no federated server {id}")).into());
    }
    Ok(StatusResponse::ok("stopped following the server"))
}

#[derive(serde::Deserialize)]
struct SendBody {
    value: Option<String>,
}

async fn send_post(
    State(fed): State<Arc<Federation>>,
    JsonBody(req): JsonBody<SendBody>,
) -> Result<Json<StatusResponse>, HttpError> {
    let local = fed.active()?;
    let text = req.value.unwrap_or_default();
    let text = text.trim();
    if text.is_empty() {
        return Err(ApiError::bad("the post is empty").into());
    }
    if text.len() > 5000 {
        return Err(ApiError::bad("the post is longer than 5000 characters").into());
    }
    let html = crate::markdown::to_html(text);
    let s = fed.settings.get();
    let audience = if s.federation.federation_private { actor::Audience::Followers } else { actor::Audience::Public };
    actor::post_note(&fed, &local, html, &[], audience).await?;
    Ok(StatusResponse::ok("sent"))
}

/// The one sentence `POST /api/remotefollow` answers with, whatever went wrong.
const NO_FOLLOW_PAGE: &str = "could not find a follow page for that account; check it, or follow from your own server";

/// The follow page a WebFinger answer offers (`http://ostatus.org/schema/1.0/subscribe`), with this
/// actor filled in (normalised, as a browser will read it); `None` unless it is an http(s) URL.
fn follow_page(jrd: &Value, actor: &str) -> Option<String> {
    let template = jrd
        .get("links")
        .and_then(Value::as_array)?
        .iter()
        .find(|l| l.get("rel").and_then(Value::as_str) == Some("http://ostatus.org/schema/1.0/subscribe"))?
        .get("template")?
        .as_str()?;
    let actor: String = url::form_urlencoded::byte_serialize(actor.as_bytes()).collect();
    crate::events::chat::http_link(&template.replace("{uri}", &actor))
}

/// `POST /api/remotefollow`: anyone may ask, so the account's server must be one castd may contact
/// (public addresses only: `client`), the lookups per address are limited, blocked domains are
/// refused, and any failure is one generic sentence (the detail goes to the log).
async fn remote_follow(
    State(fed): State<Arc<Federation>>,
    ClientIp(ip): ClientIp,
    JsonBody(req): JsonBody<FediverseAccount>,
) -> Result<Json<RemoteFollow>, HttpError> {
    let local = fed.active()?;
    let account = req.account.trim().trim_start_matches('@').to_string();
    let Ok((_, host)) = super::client::split_account(&account) else {
        return Err(ApiError::bad("the account must be of the form user@host").into());
    };
    let blocked = fed.settings.get().federation.federation_blocked_domains.clone();
    if super::blocklist::is_blocked_host(&blocked, host) {
        return Err(ApiError::Forbidden("following from that server is not allowed".into()).into());
    }
    if let Some(ip) = ip {
        fed.limits.remote_follow.take(ip).map_err(ApiError::from)?;
    }
    let page = match fed.client.webfinger_jrd(&account).await {
        Ok((_, jrd)) => follow_page(&jrd, &local.actor),
        Err(e) => {
            tracing::info!(account, "remote follow: {e}");
            None
        }
    };
    match page {
        Some(redirect_url) => Ok(Json(RemoteFollow { redirect_url })),
        None => Err(ApiError::bad(NO_FOLLOW_PAGE).into()),
    }
}

/// A federation error for a requester who is not the admin: castd's own words, or one generic sentence
/// (the detail goes to the log).
fn public_error(e: FedError) -> HttpError {
    match e {
        FedError::Store(_) | FedError::Key(_) | FedError::Blocked(_) => HttpError::from(e),
        FedError::Busy(_) => HttpError::Api(ApiError::Unavailable(e.public_message())),
        e => {
            tracing::info!("a federation request failed: {e}");
            HttpError::Api(ApiError::bad(e.public_message()))
        }
    }
}

async fn fediverse_request(
    State(fed): State<Arc<Federation>>,
    ClientIp(ip): ClientIp,
    Query(q): Query<TokenQuery>,
    JsonBody(req): JsonBody<FediverseAccount>,
) -> Result<Json<StatusResponse>, HttpError> {
    let token = q.access_token.unwrap_or_default();
    let user = match token.is_empty() {
        true => None,
        false => fed.users.user_id(&token, ip).await,
    };
    let Some(user) = user else {
        return Err(ApiError::UnauthorizedToken.into());
    };
    let local = fed.active()?;
    if req.account.trim().is_empty() {
        return Err(ApiError::bad("account is required").into());
    }
    if let Some(ip) = ip {
        fed.limits.signin_requests.take(ip).map_err(ApiError::from)?;
    }
    match signin::request(&fed, &local, &user, &req.account).await {
        Ok(who) => Ok(StatusResponse::ok(format!("a code was sent to {who}"))),
        Err(e) => Err(public_error(e)),
    }
}

/// `POST /api/auth/fediverse/verify?accessToken=`: the code of that chat user only. Wrong codes count
/// against the address (backoff: 429) and against the code (burnt after three).
async fn fediverse_verify(
    State(fed): State<Arc<Federation>>,
    ClientIp(ip): ClientIp,
    Query(q): Query<TokenQuery>,
    JsonBody(req): JsonBody<FediverseCode>,
) -> Result<Response, HttpError> {
    fed.active()?;
    if let Some(ip) = ip {
        fed.limits.signin_codes.check(ip).map_err(ApiError::from)?;
    }
    let token = q.access_token.filter(|t| !t.is_empty()).ok_or(ApiError::UnauthorizedToken)?;
    let user = fed.users.user_id(&token, ip).await.ok_or(ApiError::UnauthorizedToken)?;
    match signin::verify(&fed, &req.code, &user).await {
        Ok(account) => {
            if let Some(ip) = ip {
                fed.limits.signin_codes.succeeded(ip);
            }
            Ok(StatusResponse::ok(format!("signed in as {account}")).into_response())
        }
        Err(e) => {
            if let Some(limited) = ip.and_then(|ip| fed.limits.signin_codes.failed(ip)) {
                tracing::info!(?ip, "wrong Fediverse sign-in codes: backing off for {:?}", limited.0);
            }
            let why = match e {
                signin::VerifyError::Expired => "the code has expired",
                signin::VerifyError::Wrong { burnt: true } => {
                    "the code is not valid, and after three wrong tries it no longer is: send a new one"
                }
                signin::VerifyError::Wrong { burnt: false } | signin::VerifyError::NoCode => "the code is not valid",
            };
            Err(ApiError::Forbidden(why.into()).into())
        }
    }
}
