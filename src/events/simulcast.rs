//! SIMULCAST_STATE_CHANGED (a castd webhook type): a simulcast target's status after it changed
//! state, which is also what `GET /api/admin/simulcast/status` lists for each target. Simulcast
//! publishes it; webhooks deliver it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// A target's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetState {
    Off,
    Connecting,
    Live,
    Retrying,
    Failed,
}

/// A target's status.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetStatus {
    pub id: String,
    pub name: String,
    pub state: TargetState,
    /// When the target entered this state.
    pub since: DateTime<Utc>,
    /// Bytes sent to the remote over this target's life (every connection).
    pub bytes_sent: u64,
    /// The send rate over the last couple of seconds while live (0 otherwise).
    pub bitrate_kbps: u32,
    /// The last error, in the remote's own words where it gave any.
    pub last_error: Option<String>,
    /// Connections tried again after a failure.
    pub reconnects: u64,
}
