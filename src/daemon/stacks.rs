//! What the server-wide pieces need of every open channel's stack: its settings (the media plane's
//! capacity policy reads each channel's planned ladder, and the server's limits from the default
//! channel's settings) and its metrics (the root's Prometheus exposition merges every channel's).
//! The composition root adds a channel's stack when it opens it and removes it when it closes.
//! Also each channel's viewer access (a cluster origin publishes it to its edges: `cluster::edge_access`).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;

use crate::access::edge::Directory;
use crate::access::Access;
use crate::media::capacity::{budget_in_force, ladder_cost, CapacityPolicy, Limits};
use crate::media::ChannelId;
use crate::metrics::{Metrics, OtherChannels};
use crate::store::settings::SettingsStore;

/// One open channel's pieces.
struct Entry {
    settings: SettingsStore,
    metrics: Arc<Metrics>,
    access: Arc<Access>,
}

/// Every open channel's settings and metrics (the default channel's too).
pub struct Stacks {
    /// The server-wide settings (the default channel's).
    server: SettingsStore,
    open: RwLock<BTreeMap<ChannelId, Entry>>,
}

impl Stacks {
    pub fn new(server: SettingsStore) -> Arc<Stacks> {
        Arc::new(Stacks { server, open: RwLock::default() })
    }

    /// Channel `id`'s stack is open.
    pub fn add(&self, id: ChannelId, settings: SettingsStore, metrics: Arc<Metrics>, access: Arc<Access>) {
        self.open.write().insert(id, Entry { settings, metrics, access });
    }

    /// Channel `id`'s stack closed.
    pub fn remove(&self, id: &ChannelId) {
        self.open.write().remove(id);
    }

    /// Every channel's own Prometheus exposition but the default's, in slug order.
    pub fn other_expositions(&self) -> Vec<String> {
        let metrics: Vec<Arc<Metrics>> =
            self.open.read().iter().filter(|(id, _)| !id.is_default()).map(|(_, e)| e.metrics.clone()).collect();
        metrics
            .iter()
            .filter_map(|m| match m.channel_exposition() {
                Ok(text) => Some(text),
                Err(e) => {
                    tracing::warn!(channel = %m.channel, "encoding the channel's metrics: {e}");
                    None
                }
            })
            .collect()
    }

    /// Every open channel's viewer access, for a cluster origin's edges (weak, like `other_channels`).
    pub fn access_directory(self: &Arc<Self>) -> Directory {
        let stacks: Weak<Stacks> = Arc::downgrade(self);
        Arc::new(move || {
            stacks.upgrade().map(|s| s.open.read().values().map(|e| e.access.clone()).collect()).unwrap_or_default()
        })
    }

    /// The root's hook for the other channels' expositions (weak: the stacks hold the root's metrics).
    pub fn other_channels(self: &Arc<Self>) -> OtherChannels {
        let stacks: Weak<Stacks> = Arc::downgrade(self);
        Arc::new(move || stacks.upgrade().map(|s| s.other_expositions()).unwrap_or_default())
    }
}

impl CapacityPolicy for Stacks {
    fn limits(&self) -> Limits {
        let s = self.server.get();
        Limits {
            max_live: s.server.max_live_channels,
            budget: budget_in_force(s.server.transcode_budget),
            over: s.server.over_capacity,
        }
    }

    fn planned_cost(&self, id: &ChannelId) -> u64 {
        let settings = self.open.read().get(id).map(|e| e.settings.clone());
        settings.map_or(0, |s| ladder_cost(&s.get().video.video_quality_variants))
    }
}
