//! A cluster edge's chat of a channel (`cluster::OpenRoom`): the edge follows the origin's channels
//! (`cluster::edge_channels`) and holds each one's chat sockets in a chat of its own, made here like the
//! edge's default chat: an in-memory database (an edge keeps none; users, bans and history are the
//! origin's, asked over the cluster), settings the origin's edge config overwrites, the channel's path
//! prefix, and a scope of the daemon's tasks that closes with the room.

use std::path::PathBuf;
use std::sync::Arc;

use crate::chat::{Chat, ChatDeps};
use crate::cluster::OpenRoom;
use crate::events::Bus;
use crate::media::ChannelId;
use crate::store::settings::SettingsStore;
use crate::store::Store;
use crate::stream::StreamWriter;
use crate::tasks::Tasks;
use crate::tokens::Tokens;

/// How an edge makes a channel's chat; `data_dir` is the edge's (its rooms share the default chat's
/// emoji folder: a channel's emoji are served by the origin).
pub fn open_room(data_dir: PathBuf, tasks: Tasks) -> OpenRoom {
    Arc::new(move |slug: &ChannelId| {
        let store = Store::open_in_memory().map_err(|e| e.to_string())?;
        let bus = Bus::default();
        let settings = SettingsStore::open(store.clone(), bus.clone()).map_err(|e| e.to_string())?;
        let tokens = Tokens::open(store.clone()).map_err(|e| e.to_string())?;
        // An edge takes no broadcast: the room's stream stays offline.
        let (_, stream) = StreamWriter::new();
        let tasks = tasks.scope();
        let chat = Chat::open(ChatDeps {
            store,
            settings,
            bus,
            stream,
            tokens,
            telemetry: Arc::default(),
            emoji_dir: data_dir.join("emoji"),
            base_path: format!("/c/{slug}"),
            scheduled_chat_open: Arc::new(|_| false),
            tasks: tasks.clone(),
        })
        .map_err(|e| e.to_string())?;
        Ok((chat, tasks))
    })
}
