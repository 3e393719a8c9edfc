//! Discovery documents: WebFinger (JRD), host-meta (XRD), NodeInfo 2.0 (with its well-known index),
//! x-nodeinfo2 and Mastodon's `/api/v1/instance`. All answer 405 while federation is off.
//!
//! WebFinger answers 404 without a server URL, 400 without a `resource` or without `acct:`/`@`, 501 for
//! another host, 404 for another user. The root's (the default channel's) also answers for every
//! other channel's actor (`@{name}@host`, its IRIs under `/c/{slug}`), through the lookup the
//! composition root gives it; a channel's own `/c/{slug}/.well-known/webfinger` answers for its actor.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{data, Federation, HttpError, AP_CONTENT_TYPE};
use crate::http::ApiError;

/// `?resource=`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct WebfingerQuery {
    /// `acct:user@host`.
    pub resource: Option<String>,
}

fn with_type(v: impl Serialize, ctype: &'static str) -> Response {
    let mut r = axum::Json(v).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// The media type of the WebFinger answer.
pub const JRD_CONTENT_TYPE: &str = "application/jrd+json";
/// The media type of the NodeInfo 2.0 document.
pub const NODEINFO_CONTENT_TYPE: &str =
    "application/json; profile=\"http://nodeinfo.diaspora.software/ns/schema/2.0#\"";

/// The WebFinger answer (JRD) for the stream's account.
#[derive(Debug, Serialize, ToSchema)]
pub struct Webfinger {
    /// `acct:user@host`.
    pub subject: String,
    pub aliases: Vec<String>,
    pub links: Vec<WebfingerLink>,
}

/// A link of the WebFinger answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebfingerLink {
    pub rel: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub href: String,
}

/// `acct:user@host` (or `acct:@user@host`): the user and the host.
fn account_of(resource: Option<&str>) -> Result<(&str, &str), HttpError> {
    let resource = resource.unwrap_or_default().trim();
    if resource.is_empty() {
        return Err(ApiError::bad("the resource parameter is required").into());
    }
    let Some(acct) = resource.strip_prefix("acct:") else {
        return Err(ApiError::bad("the resource must be acct:user@host").into());
    };
    let Some((user, host)) = acct.trim_start_matches('@').split_once('@') else {
        return Err(ApiError::bad("the resource must be acct:user@host").into());
    };
    if user.is_empty() || host.is_empty() {
        return Err(ApiError::bad("the resource must be acct:user@host").into());
    }
    Ok((user, host))
}

/// WebFinger. At the root it answers for every channel's actor: a user that is not this stack's
/// own is looked up among the other channels' (`Federation::other_actor`), whether or not this
/// stack's federation is on; otherwise the answers are the stack's own (405 while off, ...).
pub async fn webfinger(
    State(fed): State<Arc<Federation>>,
    Query(q): Query<WebfingerQuery>,
) -> Result<Response, HttpError> {
    let own = fed.active();
    let account = account_of(q.resource.as_deref());
    if let Ok((user, host)) = account {
        let theirs = match &own {
            Ok(local) if user.eq_ignore_ascii_case(&local.username) => None,
            _ => fed.other_actor(user),
        };
        if let Some(other) = theirs.filter(|o| host.eq_ignore_ascii_case(&o.host)) {
            return Ok(jrd(&other));
        }
    }
    let local = own?;
    let (user, host) = account?;
    if !host.eq_ignore_ascii_case(&local.host) {
        return Err(HttpError::NotImplemented(format!("{host} is not this server")));
    }
    if !user.eq_ignore_ascii_case(&local.username) {
        return Err(ApiError::NotFound(format!("no such user {user}")).into());
    }
    Ok(jrd(&local))
}

/// The WebFinger answer for an actor.
fn jrd(local: &super::Local) -> Response {
    let link = |rel, kind, href| WebfingerLink { rel, kind, href };
    with_type(
        Webfinger {
            subject: format!("acct:{}", local.account()),
            aliases: vec![local.actor.clone(), local.base.clone()],
            links: vec![
                link("self", AP_CONTENT_TYPE, local.actor.clone()),
                link("http://webfinger.net/rel/profile-page", "text/html", local.base.clone()),
                link("http://webfinger.net/rel/avatar", "image/png", format!("{}/logo/external", local.base)),
            ],
        },
        JRD_CONTENT_TYPE,
    )
}

pub async fn host_meta(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<XRD xmlns=\"http://docs.oasis-open.org/ns/xri/xrd-1.0\">\n  <Link rel=\"lrdd\" type=\"application/xrd+xml\" template=\"{}/.well-known/webfinger?resource={{uri}}\"/>\n</XRD>\n",
        super::actor::escape(&local.base)
    );
    Ok(([(header::CONTENT_TYPE, "application/xrd+xml; charset=utf-8")], xml).into_response())
}

/// `/.well-known/nodeinfo`: where the NodeInfo document is.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeInfoIndex {
    pub links: Vec<NodeInfoLink>,
}

/// A link of the NodeInfo index.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeInfoLink {
    pub rel: &'static str,
    pub href: String,
}

pub async fn nodeinfo_index(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    Ok(axum::Json(NodeInfoIndex {
        links: vec![NodeInfoLink {
            rel: "http://nodeinfo.diaspora.software/ns/schema/2.0",
            href: format!("{}/nodeinfo/2.0", local.base),
        }],
    })
    .into_response())
}

async fn post_count(fed: &Federation) -> Result<i64, HttpError> {
    Ok(fed.store.call(|c| data::outbox_count(c)).await.map_err(ApiError::from)?)
}

/// NodeInfo 2.0.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    pub version: &'static str,
    pub software: NodeInfoSoftware,
    pub protocols: Vec<&'static str>,
    pub services: NodeInfoServices,
    pub open_registrations: bool,
    pub usage: NodeInfoUsage,
    pub metadata: NodeInfoMetadata,
}

/// `software` of NodeInfo.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeInfoSoftware {
    pub name: &'static str,
    pub version: &'static str,
}

/// `services` of NodeInfo (none).
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeInfoServices {
    pub inbound: Vec<String>,
    pub outbound: Vec<String>,
}

/// `usage` of NodeInfo.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfoUsage {
    pub users: NodeInfoUsers,
    pub local_posts: i64,
}

/// `usage.users` of NodeInfo (one user: the streamer).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfoUsers {
    pub total: u32,
    pub active_month: u32,
    pub active_halfyear: u32,
}

/// `metadata` of NodeInfo.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfoMetadata {
    pub node_name: String,
    #[serde(rename = "chat_enabled")]
    pub chat_enabled: bool,
}

pub async fn nodeinfo(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    fed.active()?;
    let posts = post_count(&fed).await?;
    let s = fed.settings.get();
    Ok(with_type(
        NodeInfo {
            version: "2.0",
            software: NodeInfoSoftware { name: "castd", version: crate::VERSION },
            protocols: vec!["activitypub"],
            services: NodeInfoServices { inbound: Vec::new(), outbound: Vec::new() },
            open_registrations: false,
            usage: NodeInfoUsage {
                users: NodeInfoUsers { total: 1, active_month: 1, active_halfyear: 1 },
                local_posts: posts,
            },
            metadata: NodeInfoMetadata { node_name: s.instance.name.clone(), chat_enabled: !s.chat.chat_disabled },
        },
        NODEINFO_CONTENT_TYPE,
    ))
}

/// x-nodeinfo2 (NodeInfo2 1.0).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct XNodeInfo2 {
    pub version: &'static str,
    pub server: XNodeInfo2Server,
    pub protocols: Vec<&'static str>,
    pub open_registrations: bool,
    pub usage: XNodeInfo2Usage,
}

/// `server` of x-nodeinfo2.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct XNodeInfo2Server {
    pub base_url: String,
    pub name: String,
    pub software: &'static str,
    pub version: &'static str,
}

/// `usage` of x-nodeinfo2.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct XNodeInfo2Usage {
    pub users: XNodeInfo2Users,
    pub local_posts: i64,
    pub local_comments: i64,
}

/// `usage.users` of x-nodeinfo2.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct XNodeInfo2Users {
    pub total: u32,
    pub active_halfyear: u32,
    pub active_month: u32,
    pub active_week: u32,
}

pub async fn x_nodeinfo2(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let posts = post_count(&fed).await?;
    let s = fed.settings.get();
    Ok(axum::Json(XNodeInfo2 {
        version: "1.0",
        server: XNodeInfo2Server {
            base_url: local.base.clone(),
            name: s.instance.name.clone(),
            software: "castd",
            version: crate::VERSION,
        },
        protocols: vec!["activitypub"],
        open_registrations: false,
        usage: XNodeInfo2Usage {
            users: XNodeInfo2Users { total: 1, active_halfyear: 1, active_month: 1, active_week: 1 },
            local_posts: posts,
            local_comments: 0,
        },
    })
    .into_response())
}

/// `/api/v1/instance`: Mastodon's instance information (v1), with what castd can say.
#[derive(Debug, Serialize, ToSchema)]
pub struct Instance {
    /// `host[:port]`.
    pub uri: String,
    pub title: String,
    pub short_description: String,
    pub description: String,
    pub version: &'static str,
    pub stats: InstanceStats,
    pub thumbnail: String,
    pub languages: Vec<String>,
    pub registrations: bool,
    pub approval_required: bool,
    pub invites_enabled: bool,
    /// Always empty (no streaming API).
    pub urls: BTreeMap<String, String>,
    /// Always null.
    pub contact_account: Option<Value>,
}

/// `stats` of the instance information.
#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceStats {
    pub user_count: u32,
    pub status_count: i64,
    pub domain_count: u32,
}

pub async fn instance(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let posts = post_count(&fed).await?;
    let s = fed.settings.get();
    Ok(axum::Json(Instance {
        uri: local.host.clone(),
        title: s.instance.name.clone(),
        short_description: s.instance.summary.clone(),
        description: s.instance.summary.clone(),
        version: crate::VERSION,
        stats: InstanceStats { user_count: 1, status_count: posts, domain_count: 0 },
        thumbnail: format!("{}/logo/external", local.base),
        languages: Vec::new(),
        registrations: false,
        approval_required: false,
        invites_enabled: false,
        urls: BTreeMap::new(),
        contact_account: None,
    })
    .into_response())
}
