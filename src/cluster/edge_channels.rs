//! An edge follows the origin's channels: the origin answers `GET /api/cluster/channels` (cluster
//! secret required) with every open channel's room (`room_of`: its slug and creation time) and the
//! settings its chat applies on an edge ([`EdgeConfig`], as `edge_config` does for the default
//! channel); each edge asks every [`EVERY`] and
//! - opens a chat of its own for each room it has not got (`OpenRoom`: an in-memory store, the room's
//!   `EdgeLink`), with the room's settings applied before it holds its first socket;
//! - applies what changed to the settings of the rooms it has;
//! - closes the rooms the origin no longer lists (a deleted channel, or one whose slug is now a newer
//!   channel's): their sockets get a close frame, their tasks stop, and `/c/{slug}/ws` is refused
//!   (404) until the origin lists the slug again.
//!
//! While the origin does not answer, the last list stands (nothing is closed on a failed ask).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::edge_config::EdgeConfig;
use super::{bus, slug_of, Cluster, Linked};
use crate::chat::relay::{Link, Role, Room};
use crate::http::ApiError;
use crate::media::ChannelId;
use crate::tasks::{Stage, Tasks};

/// How often an edge asks the origin for its channels (a created channel's chat works on the edges
/// within about this).
pub const EVERY: Duration = Duration::from_secs(2);
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a closed room's tasks get to end.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

/// One open channel of the origin, as an edge follows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeChannel {
    /// Its room (`room_of`).
    pub room: String,
    /// What its chat applies on an edge.
    pub config: EdgeConfig,
}

/// The origin's answer to `GET /api/cluster/channels`: every open channel but the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelList {
    pub channels: Vec<EdgeChannel>,
}

/// The origin's answer to `GET /api/cluster/channels`.
pub async fn serve(State(cluster): State<Arc<Cluster>>, headers: HeaderMap) -> Result<Json<ChannelList>, ApiError> {
    cluster.check_secret(&headers)?;
    if cluster.is_edge() {
        return Err(ApiError::NotFound("this node is an edge".into()));
    }
    let channels = cluster
        .rooms()
        .into_iter()
        .map(|(room, chat)| EdgeChannel { room: room.to_string(), config: EdgeConfig::of(&chat.settings.get()) })
        .collect();
    Ok(Json(ChannelList { channels }))
}

async fn fetch(cluster: &Cluster) -> Result<ChannelList, String> {
    cluster.config.ask_origin(&cluster.http, "/api/cluster/channels", &[], TIMEOUT).await
}

/// Open, update and close this edge's rooms after the origin's list.
async fn follow(cluster: &Cluster, list: ChannelList) {
    let (Some(edge), Some(open_room)) = (cluster.edge.clone(), cluster.open_room.clone()) else { return };
    let listed: HashSet<&str> = list.channels.iter().map(|c| c.room.as_str()).collect();
    let gone: Vec<(Room, Linked)> = {
        let mut rooms = cluster.rooms.write();
        let gone: Vec<Room> = rooms.keys().filter(|r| !listed.contains(&***r)).cloned().collect();
        gone.into_iter().filter_map(|r| rooms.remove(&r).map(|l| (r, l))).collect()
    };
    for (room, linked) in gone {
        tracing::info!(%room, "cluster: the origin no longer has this channel; its chat on this edge closes");
        close(linked).await;
    }
    for ch in list.channels {
        let existing = cluster.chat_of(&ch.room);
        if let Some(chat) = existing {
            if let Err(e) = ch.config.apply(&chat.settings).await {
                tracing::warn!(room = %ch.room, "cluster: applying a channel's chat settings: {e}");
            }
            continue;
        }
        let Ok(slug) = ChannelId::new(slug_of(&ch.room)) else {
            tracing::warn!(room = %ch.room, "cluster: the origin listed a room that names no channel");
            continue;
        };
        let (chat, tasks) = match open_room(&slug) {
            Ok(opened) => opened,
            Err(e) => {
                tracing::warn!(channel = %slug, "cluster: cannot open the channel's chat on this edge: {e}");
                continue;
            }
        };
        // Its settings before its first socket (chat disabled, flood protection, ...).
        if let Err(e) = ch.config.apply(&chat.settings).await {
            tracing::warn!(channel = %slug, "cluster: applying the channel's chat settings: {e}");
        }
        let room = Room::from(ch.room.as_str());
        let link = bus::EdgeRoom::new(edge.clone(), room.clone());
        chat.set_link(Link { node: cluster.config.node.clone(), role: Role::Edge(Arc::new(link)) });
        crate::chat::start(&chat);
        tracing::info!(%room, "cluster: the channel's chat is open on this edge");
        cluster.rooms.write().insert(room, Linked { chat, tasks: Some(tasks) });
    }
}

/// Close a room this edge held: every socket gets a close frame, then its tasks stop.
async fn close(linked: Linked) {
    linked.chat.close_all();
    if let Some(tasks) = linked.tasks {
        tasks.close(CLOSE_LIMIT).await;
    }
}

/// The edge's task: follow the origin's channels every `EVERY`.
pub fn start(cluster: Arc<Cluster>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "cluster: the origin's channels", async move {
        let mut failing = false;
        loop {
            match fetch(&cluster).await {
                Ok(list) => {
                    if failing {
                        tracing::info!("cluster: the origin's channel list is back");
                    }
                    failing = false;
                    follow(&cluster, list).await;
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!("cluster: could not get the origin's channels (the last list stands): {e}");
                }
                Err(_) => {}
            }
            tokio::time::sleep(EVERY).await;
        }
    });
}
