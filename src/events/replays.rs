//! REPLAY_READY and CLIP_CREATED (castd webhook types): a finished replay and a new clip, each as
//! the replays API lists it (`/api/admin/replays`, `/api/clips`), which is also their webhook
//! `eventData`. Replays publishes them; webhooks deliver them and chat announces a viewer's clip.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// A replay (Owncast's fields, then castd's).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Replay {
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    pub start_time: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_progress: bool,
    /// `/replay/{id}`.
    pub manifest: String,
    pub duration_seconds: f64,
    pub total_bytes: i64,
    pub clip_count: i64,
    /// castd: `recording`, `finished` or `interrupted` (castd stopped while recording).
    #[schema(schema_with = replay_status_schema)]
    pub status: String,
    /// castd: the broadcast's stream title.
    pub stream_title: String,
    /// castd: listed at `/api/replays` and playable by anyone.
    pub public: bool,
    /// castd: never deleted by the disk budget.
    pub pinned: bool,
    /// castd: `/replay/{id}/download.mp4`.
    pub download: String,
}

/// `Replay::status`'s values (the replays' database writes them).
fn replay_status_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["recording", "finished", "interrupted"]))
        .description(Some("castd: `recording`, `finished` or `interrupted` (castd stopped while recording)."))
        .build()
}

/// A clip (Owncast's shape).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Clip {
    pub id: String,
    pub stream_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub clipped_by: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stream_title: String,
    pub relative_start_time: f64,
    pub relative_end_time: f64,
    pub duration_seconds: i64,
    /// `/clip/{id}`.
    pub manifest: String,
    /// `/clip-thumbnail/{id}.jpg`, once the thumbnail exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbnail: Option<String>,
    pub timestamp: DateTime<Utc>,
    /// castd: `/clip/{id}/download.mp4`.
    pub download: String,
}
