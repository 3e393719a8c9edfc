//! The origin's routes for its edges: `GET /api/cluster/chat/lookup?accessToken=&ip=[&room=]` (who
//! holds a chat access token in the default channel's chat, or in a channel's room, for an edge's
//! `/ws` and `/c/{slug}/ws` check; see `chat::relay::Lookup`; a room the origin has not got, such as
//! a deleted channel's, is 404), `GET /api/cluster/settings` (`edge_config`),
//! `GET /api/cluster/channels` (`edge_channels`), `GET /api/cluster/access` and
//! `GET /api/cluster/access/play` (`edge_access`). They need the cluster secret in
//! `X-Castd-Cluster-Secret`; without it, or with a wrong one, 403.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;

use super::Cluster;
use crate::chat::relay::{self, Lookup};
use crate::http::{ApiError, Auth, Registry};

const GROUP: &str = "Cluster";

#[derive(Debug, Deserialize)]
pub struct LookupQuery {
    #[serde(rename = "accessToken")]
    access_token: String,
    ip: IpAddr,
    /// The room (`cluster::room_of`); the default channel's chat without it.
    room: Option<String>,
}

/// The origin's cluster routes (registered only when it runs with `--redis-url`).
pub fn routes(reg: &mut Registry, cluster: Arc<Cluster>) {
    let mut reg = reg.scope(cluster);
    reg.get(
        "/api/cluster/chat/lookup",
        GROUP,
        Auth::Public,
        "An edge's chat token check (needs the cluster secret)",
        lookup,
    )
    .error(403, "No cluster secret, or a wrong one")
    .error(404, "No such room (a deleted channel's, or an older channel's of its slug)");
    reg.get(
        "/api/cluster/settings",
        GROUP,
        Auth::Public,
        "The settings an edge applies itself (needs the cluster secret)",
        super::edge_config::serve,
    )
    .error(403, "No cluster secret, or a wrong one");
    reg.get(
        "/api/cluster/channels",
        GROUP,
        Auth::Public,
        "Every open channel's chat room and the settings an edge applies to it (needs the cluster secret)",
        super::edge_channels::serve,
    )
    .error(403, "No cluster secret, or a wrong one");
    reg.get(
        "/api/cluster/access",
        GROUP,
        Auth::Public,
        "What an edge needs to check viewing passes (needs the cluster secret)",
        super::edge_access::serve,
    )
    .error(403, "No cluster secret, or a wrong one");
    reg.get(
        "/api/cluster/access/play",
        GROUP,
        Auth::Public,
        "Whether the admission hook lets a viewer of an edge play (needs the cluster secret)",
        super::edge_access::play,
    )
    .error(403, "No cluster secret, or a wrong one, or the admission hook's refusal")
    .error(404, "No such channel");
}

async fn lookup(
    State(cluster): State<Arc<Cluster>>,
    headers: HeaderMap,
    Query(q): Query<LookupQuery>,
) -> Result<Json<Lookup>, ApiError> {
    cluster.check_secret(&headers)?;
    if cluster.is_edge() {
        return Err(ApiError::NotFound("this node is an edge".into()));
    }
    let ip = crate::chat::moderation::normalize_ip(q.ip);
    let room = q.room.as_deref().unwrap_or(relay::DEFAULT_ROOM);
    let chat = cluster.chat_of(room).ok_or_else(|| ApiError::NotFound("no such room".into()))?;
    Ok(Json(relay::lookup(&chat, q.access_token, ip).await?))
}
