//! The daemon's start-up and shutdown errors.

/// Errors of start-up and shutdown.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("chat: {0}")]
    Chat(#[from] crate::chat::ChatError),
    #[error("notifications: {0}")]
    Notify(#[from] crate::notifications::NotifyError),
    #[error("metrics: {0}")]
    Metrics(#[from] crate::metrics::MetricsError),
    #[error("indieauth: {0}")]
    IndieAuth(#[from] crate::indieauth::IndieAuthError),
    #[error("federation: {0}")]
    Federation(#[from] crate::federation::FedError),
    #[error("directory: {0}")]
    Yp(#[from] crate::yp::YpError),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("replays: {0}")]
    Replays(#[from] crate::replays::ReplaysError),
    #[error("cluster: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error("access: {0}")]
    Access(#[from] crate::access::AccessError),
    #[error("channels: {0}")]
    Channels(#[from] crate::channels::ChannelsError),
}
