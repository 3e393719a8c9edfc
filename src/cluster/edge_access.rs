//! Viewing passes at the edge (`access::edge`): the origin serves what an edge needs to check them
//! (`GET /api/cluster/access`: every open channel's visibility, signing key and valid grants; cluster
//! secret required), each edge takes it every [`EVERY`] into its `EdgeAccess` (passes whose grant is
//! gone end there, their chat sockets too), and the front (`proxy`) asks it before it proxies, serves
//! from its cache or holds a chat socket. While the origin does not answer the last snapshot stands,
//! for at most `access::edge::STALE_AFTER`.
//!
//! Where the admission hook is asked on play, an edge's own chat socket (`/ws`, or a channel's
//! `/c/{slug}/ws`) asks the origin first: `GET /api/cluster/access/play?channel=&subject=&ip=&ua=` runs the origin's
//! `Access::admit_play` and answers 200, or the hook's refusal (403, 503).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::Cluster;
use crate::access::edge::Snapshot;
use crate::http::ApiError;
use crate::tasks::{Stage, Tasks};

/// How often an edge takes the origin's access snapshot (a revoked pass is refused at the edge within this).
pub const EVERY: Duration = Duration::from_secs(3);
const TIMEOUT: Duration = Duration::from_secs(5);
/// The youngest snapshot an edge takes another one over (`refresh`).
const REFRESH_AT_MOST: Duration = Duration::from_secs(1);

fn origin_only(cluster: &Cluster, headers: &HeaderMap) -> Result<(), ApiError> {
    cluster.check_secret(headers)?;
    if cluster.is_edge() {
        return Err(ApiError::NotFound("this node is an edge".into()));
    }
    Ok(())
}

fn open_channels(cluster: &Cluster) -> Vec<Arc<crate::access::Access>> {
    cluster.directory.as_ref().map(|d| d()).unwrap_or_default()
}

/// The origin's answer to `GET /api/cluster/access`.
pub async fn serve(State(cluster): State<Arc<Cluster>>, headers: HeaderMap) -> Result<Json<Snapshot>, ApiError> {
    origin_only(&cluster, &headers)?;
    Ok(Json(Snapshot::of(&open_channels(&cluster))))
}

#[derive(Debug, Deserialize)]
pub struct PlayQuery {
    channel: String,
    subject: Option<String>,
    ip: Option<IpAddr>,
    ua: Option<String>,
}

/// The origin's answer to `GET /api/cluster/access/play`: whether the admission hook lets the viewer play.
pub async fn play(
    State(cluster): State<Arc<Cluster>>,
    headers: HeaderMap,
    Query(q): Query<PlayQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    origin_only(&cluster, &headers)?;
    let access = open_channels(&cluster)
        .into_iter()
        .find(|a| a.channel.as_str() == q.channel)
        .ok_or_else(|| ApiError::NotFound("no such channel".into()))?;
    access.admit_play(q.subject.as_deref(), q.ip, q.ua.as_deref()).await?;
    Ok(Json(serde_json::json!({ "success": true })))
}

/// An edge's question to the origin before it holds a chat socket on a channel whose admission hook is
/// asked on play: `Ok` to go on, or the origin's answer to give the viewer.
pub async fn ask_play(
    cluster: &Cluster,
    channel: &str,
    subject: Option<&str>,
    ip: Option<IpAddr>,
    ua: Option<&str>,
) -> Result<(), Response> {
    let unavailable = |why: String| {
        tracing::warn!("cluster: asking the origin about a play: {why}");
        ApiError::Unavailable("admission is not available at the moment; try again soon".into()).into_response()
    };
    let origin = cluster.config.origin.as_ref().ok_or_else(|| unavailable("no origin".into()))?;
    let url = origin.join("/api/cluster/access/play").map_err(|e| unavailable(e.to_string()))?;
    let ip = ip.map(|i| i.to_string());
    let mut query: Vec<(&str, &str)> = vec![("channel", channel)];
    query.extend(subject.map(|s| ("subject", s)));
    query.extend(ip.as_deref().map(|i| ("ip", i)));
    query.extend(ua.map(|u| ("ua", u)));
    let resp = cluster
        .http
        .get(url)
        .query(&query)
        .header(super::SECRET_HEADER, &cluster.config.secret)
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    if resp.status().is_success() {
        return Ok(());
    }
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let body = resp.json::<serde_json::Value>().await.unwrap_or_default();
    Err((status, Json(body)).into_response())
}

async fn fetch(cluster: &Cluster) -> Result<Snapshot, String> {
    cluster.config.ask_origin::<Snapshot>(&cluster.http, "/api/cluster/access", &[], TIMEOUT).await
}

/// Take a snapshot taken after this call began (an edge's chat socket with a pass issued since the last
/// one): one at a time, at most one per [`REFRESH_AT_MOST`], so a caller may wait up to that long.
pub async fn refresh(cluster: &Cluster) {
    let asked = Instant::now();
    let _one = cluster.access_refresh.lock().await;
    // Another caller's snapshot came meanwhile.
    if cluster.access.age().is_some_and(|a| a < asked.elapsed()) {
        return;
    }
    if let Some(left) = cluster.access.age().and_then(|a| REFRESH_AT_MOST.checked_sub(a)) {
        tokio::time::sleep(left).await;
    }
    match fetch(cluster).await {
        Ok(snapshot) => cluster.access.apply(&snapshot),
        Err(e) => tracing::debug!("cluster: could not get the origin's viewer access: {e}"),
    }
}

/// The edge's task: take the origin's access snapshot every `EVERY`.
pub fn start(cluster: Arc<Cluster>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "cluster: the origin's viewer access", async move {
        let mut failing = false;
        loop {
            match fetch(&cluster).await {
                Ok(snapshot) => {
                    if failing {
                        tracing::info!("cluster: the origin's viewer access is back");
                    }
                    failing = false;
                    cluster.access.apply(&snapshot);
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!("cluster: could not get the origin's viewer access (the last stands a while): {e}");
                }
                Err(_) => {}
            }
            tokio::time::sleep(EVERY).await;
        }
    });
}
