//! Channels: many streamers on one castd, each with Owncast's whole API under `/c/{slug}`.
//!
//! The default channel is today's castd: its routes, files, settings and database stay where they are.
//! Every other channel is a complete castd of its own (its database `<data-dir>/channels/<slug>/castd.db`,
//! its settings, stream keys, chat, replays, schedule, webhooks, tokens, federation actor, video
//! ladder), built by the composition root (`daemon`) through [`ChannelHost`] and served by this module
//! under `/c/{slug}/...`: the request goes to the channel's own router with the prefix taken off, so an
//! Owncast tool given `https://box/c/{slug}/api` works unchanged. What stays server-wide: ports, the
//! server URL, TLS and proxies, object storage, the encoder choice, the server admin password, the
//! directory (YP), the cluster.
//!
//! - `db`: the channel table (slug, name, visibility, creation time) in the default channel's database.
//! - `api`: the server admin's routes (`/api/admin/channels[/create|/update|/delete]`), the public
//!   list (`GET /api/channels`) and the dispatcher of `/c/{slug}/...`.
//!
//! Who may do what: the server admin (the admin password, Basic `admin`) manages every channel and
//! may use every channel's admin API; a channel's admin password works on that channel's
//! `/c/{slug}/api/admin/*` only (the channel's `AdminAuth`, given the server's as a fallback, decides).
//!
//! A channel is a tenant, and a slug may change hands: a deleted channel's folder is removed (`purge`)
//! or moved aside to `<data-dir>/channels/.deleted/{slug}-{unix time}/` (kept for the server admin),
//! and a created channel whose slug still has a folder (left by an older castd) moves that aside too
//! before it opens. So a channel made with a slug starts from nothing: none of the old channel's
//! stream keys, signing key, viewer passwords, tokens, webhooks, chat users or federation keys.

pub mod api;
pub mod db;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use parking_lot::RwLock;
use serde::Serialize;
use utoipa::ToSchema;

use crate::media::ChannelId;
use crate::store::Store;

pub use db::{ChannelRow, Visibility};

/// Errors of the channels feature.
#[derive(Debug, thiserror::Error)]
pub enum ChannelsError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Open(String),
}

/// What the list of channels says of a channel right now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelStatus {
    /// The channel's display name (its `name` setting).
    pub name: String,
    pub online: bool,
    pub stream_title: String,
    pub viewer_count: u64,
    /// Who may watch it (its `visibility` setting, the access feature's).
    pub visibility: crate::config::Visibility,
}

/// A running channel, as the composition root made it (the default channel's too). `Any`: the
/// composition root reads its own stack back from the registry (`daemon::channel::stack_of`).
pub trait Channel: std::any::Any + Send + Sync {
    /// Every route of the channel, at the paths a castd has at its root (`/api/status`, `/hls/...`, `/`).
    fn router(&self) -> Router;
    /// Its fast lane for `path` (a path at its root, `/hls/...`), if one takes it (`http::lanes`).
    fn lane(&self, path: &str) -> Option<Arc<dyn crate::http::lanes::Lane>>;
    /// Its state for the channel lists.
    fn status(&self) -> ChannelStatus;
    /// Its stream keys (unique across the server: `daemon` checks them against every channel's).
    fn stream_keys(&self) -> Vec<String>;
    /// Set the channel admin's password (stored as a bcrypt hash in the channel's settings).
    fn set_admin_password(&self, hash: String) -> Result<(), ChannelsError>;
    /// Rename the channel (its `name` setting).
    fn set_name(&self, name: String) -> Result<(), ChannelsError>;
    /// Whether a broadcast is live on it.
    fn is_live(&self) -> bool;
    /// Its settings (the composition root keeps each channel's server URL the server's under its
    /// prefix, and checks names that must be unique across the server, such as its actor's).
    fn settings(&self) -> crate::store::settings::SettingsStore;
    /// Its telemetry (its publisher's measured bitrate goes there).
    fn telemetry(&self) -> Arc<crate::telemetry::Telemetry>;
    /// Stop its tasks and close its database (the channel is deleted).
    fn close(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>;
}

/// The composition root's side: it builds a channel's stack from its row.
pub trait ChannelHost: Send + Sync {
    /// Open (or create) channel `row`'s stack and start its tasks.
    fn open(&self, row: &ChannelRow) -> Result<Arc<dyn Channel>, ChannelsError>;
    /// Remove channel `slug`'s files (its data folder), after `close`.
    fn purge(&self, slug: &ChannelId) -> Result<(), ChannelsError>;
    /// Move channel `slug`'s data folder aside (after `close`, or before a new channel of that slug
    /// opens), under `channels/.deleted/`, for the server admin to restore or remove: the slug's
    /// folder is then free, and a channel made with it starts from nothing. Where it went, if there
    /// was a folder.
    fn retire(&self, slug: &ChannelId) -> Result<Option<std::path::PathBuf>, ChannelsError>;
}

/// An open channel: its row (none for the default channel, which is not in the table) and its stack.
struct Entry {
    row: Option<ChannelRow>,
    channel: Arc<dyn Channel>,
}

/// The one registry of channels: the table, and every open channel, the default included. The
/// composition root makes it before any channel's stack, so that what the server-wide features ask of
/// "every channel" (stream keys, capacity, fediverse names, metrics, edge access) is answered here, and
/// hands it to each stack as it builds it; channels are opened through a [`ChannelHost`].
pub struct Channels {
    store: Store,
    open: RwLock<BTreeMap<ChannelId, Entry>>,
}

/// The channel table (public for `castd import-owncast --channel`, which adds a row offline).
pub const MIGRATIONS: crate::store::Migrations = &["CREATE TABLE channels (
        slug TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        visibility TEXT NOT NULL DEFAULT 'public',
        created_at TEXT NOT NULL
    );"];

impl Channels {
    /// The registry on the server's `store` (the channel table lives there), empty.
    pub fn open(store: Store) -> Result<Arc<Channels>, ChannelsError> {
        store.migrate("channels", MIGRATIONS)?;
        Ok(Arc::new(Channels { store, open: RwLock::default() }))
    }

    /// The default channel's stack, once built (it has no row: its routes are the root's).
    pub fn add_default(&self, channel: Arc<dyn Channel>) {
        self.open.write().insert(ChannelId::default_channel(), Entry { row: None, channel });
    }

    /// Open every channel of the table through `host` (at start).
    pub fn open_all(&self, host: &dyn ChannelHost) -> Result<usize, ChannelsError> {
        let rows = self.store.with(db::all)?;
        let mut n = 0;
        for row in rows {
            match host.open(&row) {
                Ok(channel) => {
                    self.open.write().insert(row.slug.clone(), Entry { row: Some(row), channel });
                    n += 1;
                }
                Err(e) => tracing::error!(channel = %row.slug, "cannot open the channel: {e}"),
            }
        }
        Ok(n)
    }

    /// A channel the server admin made (served under `/c/{slug}`), open.
    pub fn get(&self, slug: &ChannelId) -> Option<Arc<dyn Channel>> {
        self.open.read().get(slug).filter(|e| e.row.is_some()).map(|e| e.channel.clone())
    }

    /// Any open channel, the default included.
    pub fn channel(&self, id: &ChannelId) -> Option<Arc<dyn Channel>> {
        self.open.read().get(id).map(|e| e.channel.clone())
    }

    /// Every channel the server admin made, open, with its row, in slug order.
    pub fn all(&self) -> Vec<(ChannelRow, Arc<dyn Channel>)> {
        self.open.read().values().filter_map(|e| Some((e.row.clone()?, e.channel.clone()))).collect()
    }

    /// Every open channel, the default first, then the others in slug order.
    pub fn every(&self) -> Vec<(ChannelId, Arc<dyn Channel>)> {
        let open = self.open.read();
        let default = ChannelId::default_channel();
        let first = open.get(&default).map(|e| (default.clone(), e.channel.clone()));
        first
            .into_iter()
            .chain(open.iter().filter(|(id, _)| **id != default).map(|(id, e)| (id.clone(), e.channel.clone())))
            .collect()
    }

    /// Every channel's stream keys, the default channel's first.
    pub fn keys(&self) -> Vec<(ChannelId, Vec<String>)> {
        self.every().into_iter().map(|(id, c)| (id, c.stream_keys())).collect()
    }

    /// Whether `key` is a stream key of a channel other than `except`.
    pub fn key_taken(&self, key: &str, except: &ChannelId) -> bool {
        self.keys().iter().any(|(ch, keys)| ch != except && keys.iter().any(|k| k == key))
    }

    /// Channel `slug`'s row and stack (a made channel).
    fn entry(&self, slug: &ChannelId) -> Option<(ChannelRow, Arc<dyn Channel>)> {
        self.open.read().get(slug).and_then(|e| Some((e.row.clone()?, e.channel.clone())))
    }

    /// Channel `row`'s stack is open (created by the server admin).
    fn insert(&self, row: ChannelRow, channel: Arc<dyn Channel>) {
        self.open.write().insert(row.slug.clone(), Entry { row: Some(row), channel });
    }

    /// Channel `slug`'s row changed (a made channel's only).
    fn set_row(&self, row: ChannelRow) {
        if let Some(entry) = self.open.write().get_mut(&row.slug).filter(|e| e.row.is_some()) {
            entry.row = Some(row);
        }
    }

    /// Channel `slug` leaves the registry (it is being deleted); the default channel never does.
    fn remove(&self, slug: &ChannelId) -> Option<Arc<dyn Channel>> {
        let mut open = self.open.write();
        if open.get(slug).is_some_and(|e| e.row.is_some()) {
            open.remove(slug).map(|e| e.channel)
        } else {
            None
        }
    }
}
