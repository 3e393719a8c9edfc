//! The server: what one castd has once, whatever its channels (the root database and the server's
//! settings, the control bus, the media plane, the hardware, ingest's listeners, object storage, the
//! directory, the WebRTC stack, the cluster, the admin log, the tasks), and the one registry of
//! channels (`channels::Channels`, the default channel included), made before any channel's stack.
//!
//! What the server-wide features ask of "every channel" is answered from the registry: the stream
//! keys and a channel's telemetry, fediverse names (`links`), and here the server's capacity (each
//! channel's planned ladder, [`Capacity`]), the root's WebFinger and merged Prometheus exposition
//! ([`root_links`]) and each channel's viewer access for a cluster's edges ([`access_directory`]).
//! Each stack is given its links at construction: nothing is filled in after a stack is built.

use std::sync::Arc;

use crate::channels::Channels;
use crate::cluster::Cluster;
use crate::events::Bus;
use crate::hardware::Hardware;
use crate::ingest::Ingest;
use crate::logs::LogRing;
use crate::media::capacity::{budget_in_force, ladder_cost, CapacityPolicy, Limits};
use crate::media::{ChannelId, MediaPlane};
use crate::storage::Storage;
use crate::store::settings::{ServerSettingsStore, SettingsStore};
use crate::store::Store;
use crate::tasks::Tasks;
use crate::yp::Directory;

use super::channel::stack_of;
use super::links::{other_actors, Every, Links};

/// The server-wide pieces (see the module doc).
pub struct Server {
    /// The root database (the server's settings, the channel table, the default channel's data).
    pub store: Store,
    /// The root's settings (the server's and the default channel's keys, as stored).
    pub settings: SettingsStore,
    /// The server's settings, read from the root's.
    pub server_settings: ServerSettingsStore,
    pub bus: Bus,
    /// The media plane (every channel's publisher slot, broadcasts, retention).
    pub media: Arc<MediaPlane>,
    pub hardware: Arc<Hardware>,
    pub ingest: Arc<Ingest>,
    pub directory: Arc<Directory>,
    pub logs: LogRing,
    pub storage: Arc<Storage>,
    /// The WebRTC stack (WHIP and every channel's WHEP); none when WebRTC is off.
    pub webrtc: Option<Arc<crate::webrtc::WebRtc>>,
    /// The cluster (origin or edge), when `--redis-url` was given.
    pub cluster: Option<Arc<Cluster>>,
    /// Every channel, the default included.
    pub channels: Arc<Channels>,
    /// Every long-running task.
    pub tasks: Tasks,
}

/// The root's links (the default channel's stack serves the root): a channel's, and the server-wide
/// answers its routes give for every channel (WebFinger, the merged metrics).
pub fn root_links(every: &Every, id: &ChannelId) -> Links {
    let mut links = Links::of(every, id);
    links.names.other_actors = Some(other_actors(every.clone(), id.clone()));
    links.other_channels = Some(other_expositions(every.clone(), id.clone()));
    links
}

/// Every channel's own Prometheus exposition but the root's, in slug order.
fn other_expositions(every: Every, root: ChannelId) -> crate::metrics::OtherChannels {
    Arc::new(move || {
        let all = every.all();
        let stacks = all.iter().filter(|(id, _)| *id != root).filter_map(|(_, ch)| stack_of(ch.as_ref()));
        stacks
            .filter_map(|stack| match stack.metrics.channel_exposition() {
                Ok(text) => Some(text),
                Err(e) => {
                    tracing::warn!(channel = %stack.id, "encoding the channel's metrics: {e}");
                    None
                }
            })
            .collect()
    })
}

/// Every open channel's viewer access, for a cluster origin's edges.
pub fn access_directory(every: Every) -> crate::access::edge::Directory {
    Arc::new(move || every.all().iter().filter_map(|(_, ch)| stack_of(ch.as_ref())).map(|s| s.access.clone()).collect())
}

/// The server's capacity policy: the limits from the server's settings, each channel's planned
/// ladder from its own.
pub struct Capacity {
    pub server: ServerSettingsStore,
    pub every: Every,
}

impl CapacityPolicy for Capacity {
    fn limits(&self) -> Limits {
        let s = self.server.get();
        Limits { max_live: s.max_live_channels, budget: budget_in_force(s.transcode_budget), over: s.over_capacity }
    }

    fn planned_cost(&self, id: &ChannelId) -> u64 {
        self.every.channel(id).map_or(0, |ch| ladder_cost(&ch.settings().get().video.video_quality_variants))
    }
}
