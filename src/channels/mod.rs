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

/// A running channel, as the composition root made it.
pub trait Channel: Send + Sync {
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

/// An open channel: its row and its stack.
type OpenChannel = (ChannelRow, Arc<dyn Channel>);

/// The channels feature's state: the table, and every open channel.
pub struct Channels {
    store: Store,
    host: Arc<dyn ChannelHost>,
    open: RwLock<BTreeMap<ChannelId, OpenChannel>>,
    /// The default channel, for the lists.
    default: RwLock<Option<Arc<dyn Channel>>>,
}

/// The channel table (public for `castd import-owncast --channel`, which adds a row offline).
pub const MIGRATIONS: crate::store::Migrations = &["CREATE TABLE channels (
        slug TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        visibility TEXT NOT NULL DEFAULT 'public',
        created_at TEXT NOT NULL
    );"];

impl Channels {
    /// The feature on the default channel's `store`; `host` builds the channels' stacks.
    pub fn open(store: Store, host: Arc<dyn ChannelHost>) -> Result<Arc<Channels>, ChannelsError> {
        store.migrate("channels", MIGRATIONS)?;
        Ok(Arc::new(Channels { store, host, open: RwLock::default(), default: RwLock::default() }))
    }

    /// The default channel (for the lists).
    pub fn set_default(&self, channel: Arc<dyn Channel>) {
        *self.default.write() = Some(channel);
    }

    /// Open every channel of the table (at start).
    pub fn open_all(&self) -> Result<usize, ChannelsError> {
        let rows = self.store.with(db::all)?;
        for row in rows {
            match self.host.open(&row) {
                Ok(ch) => {
                    self.open.write().insert(row.slug.clone(), (row, ch));
                }
                Err(e) => tracing::error!(channel = %row.slug, "cannot open the channel: {e}"),
            }
        }
        Ok(self.open.read().len())
    }

    /// An open channel.
    pub fn get(&self, slug: &ChannelId) -> Option<Arc<dyn Channel>> {
        self.open.read().get(slug).map(|(_, c)| c.clone())
    }

    /// Every open channel with its row, in slug order.
    pub fn all(&self) -> Vec<(ChannelRow, Arc<dyn Channel>)> {
        self.open.read().values().map(|(r, c)| (r.clone(), c.clone())).collect()
    }

    /// Every channel's stream keys, the default channel's first.
    pub fn keys(&self) -> Vec<(ChannelId, Vec<String>)> {
        let mut out = Vec::new();
        if let Some(d) = self.default.read().as_ref() {
            out.push((ChannelId::default_channel(), d.stream_keys()));
        }
        out.extend(self.all().into_iter().map(|(row, c)| (row.slug, c.stream_keys())));
        out
    }

    /// Whether `key` is a stream key of a channel other than `except`.
    pub fn key_taken(&self, key: &str, except: &ChannelId) -> bool {
        self.keys().iter().any(|(ch, keys)| ch != except && keys.iter().any(|k| k == key))
    }
}
