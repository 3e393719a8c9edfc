//! Discovery documents: WebFinger (JRD), host-meta (XRD), NodeInfo 2.0 (with its well-known index),
//! x-nodeinfo2 and Mastodon's `/api/v1/instance`. All answer 405 while federation is off.
//!
//! WebFinger answers 404 without a server URL, 400 without a `resource` or without `acct:`/`@`, 501 for
//! another host, 404 for another user.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{data, Federation, HttpError, AP_CONTENT_TYPE};
use crate::http::ApiError;

/// `?resource=`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct WebfingerQuery {
    /// `acct:user@host`.
    pub resource: Option<String>,
}

fn with_type(v: serde_json::Value, ctype: &'static str) -> Response {
    let mut r = axum::Json(v).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

pub async fn webfinger(
    State(fed): State<Arc<Federation>>,
    Query(q): Query<WebfingerQuery>,
) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let resource = q.resource.unwrap_or_default();
    let resource = resource.trim();
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
    if !host.eq_ignore_ascii_case(&local.host) {
        return Err(HttpError::NotImplemented(format!("{host} is not this server")));
    }
    if !user.eq_ignore_ascii_case(&local.username) {
        return Err(ApiError::NotFound(format!("no such user {user}")).into());
    }
    Ok(with_type(
        json!({
            "subject": format!("acct:{}", local.account()),
            "aliases": [local.actor, local.base],
            "links": [
                { "rel": "self", "type": AP_CONTENT_TYPE, "href": local.actor },
                { "rel": "http://webfinger.net/rel/profile-page", "type": "text/html", "href": local.base },
                { "rel": "http://webfinger.net/rel/avatar", "type": "image/png", "href": format!("{}/logo/external", local.base) },
            ],
        }),
        "application/jrd+json",
    ))
}

pub async fn host_meta(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<XRD xmlns=\"http://docs.oasis-open.org/ns/xri/xrd-1.0\">\n  <Link rel=\"lrdd\" type=\"application/xrd+xml\" template=\"{}/.well-known/webfinger?resource={{uri}}\"/>\n</XRD>\n",
        super::actor::escape(&local.base)
    );
    Ok(([(header::CONTENT_TYPE, "application/xrd+xml; charset=utf-8")], xml).into_response())
}

pub async fn nodeinfo_index(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    Ok(axum::Json(json!({
        "links": [{
            "rel": "http://nodeinfo.diaspora.software/ns/schema/2.0",
            "href": format!("{}/nodeinfo/2.0", local.base),
        }]
    }))
    .into_response())
}

async fn post_count(fed: &Federation) -> Result<i64, HttpError> {
    Ok(fed.store.call(|c| data::outbox_count(c)).await.map_err(ApiError::from)?)
}

pub async fn nodeinfo(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    fed.active()?;
    let posts = post_count(&fed).await?;
    let s = fed.settings.get();
    Ok(with_type(
        json!({
            "version": "2.0",
            "software": { "name": "castd", "version": crate::VERSION },
            "protocols": ["activitypub"],
            "services": { "inbound": [], "outbound": [] },
            "openRegistrations": false,
            "usage": {
                "users": { "total": 1, "activeMonth": 1, "activeHalfyear": 1 },
                "localPosts": posts,
            },
            "metadata": { "nodeName": s.name, "chat_enabled": !s.chat_disabled },
        }),
        "application/json; profile=\"http://nodeinfo.diaspora.software/ns/schema/2.0#\"",
    ))
}

pub async fn x_nodeinfo2(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let posts = post_count(&fed).await?;
    let s = fed.settings.get();
    Ok(axum::Json(json!({
        "version": "1.0",
        "server": { "baseUrl": local.base, "name": s.name, "software": "castd", "version": crate::VERSION },
        "protocols": ["activitypub"],
        "openRegistrations": false,
        "usage": {
            "users": { "total": 1, "activeHalfyear": 1, "activeMonth": 1, "activeWeek": 1 },
            "localPosts": posts,
            "localComments": 0,
        },
    }))
    .into_response())
}

pub async fn instance(State(fed): State<Arc<Federation>>) -> Result<Response, HttpError> {
    let local = fed.active()?;
    let posts = post_count(&fed).await?;
    let s = fed.settings.get();
    Ok(axum::Json(json!({
        "uri": local.host,
        "title": s.name,
        "short_description": s.summary,
        "description": s.summary,
        "version": crate::VERSION,
        "stats": { "user_count": 1, "status_count": posts, "domain_count": 0 },
        "thumbnail": format!("{}/logo/external", local.base),
        "languages": [],
        "registrations": false,
        "approval_required": false,
        "invites_enabled": false,
        "urls": {},
        "contact_account": null,
    }))
    .into_response())
}
