//! The in-process events bus and the typed events it carries.
//!
//! `EventType` is the one list of event names (Owncast's webhook types plus castd's internal ones);
//! `Event` carries a typed payload for each (`chat` holds the chat events' types, which are also the
//! chat wire format; `schedule`, `simulcast`, `replays` and `transcode` the payloads of those features' webhooks;
//! `settings` the settings store's change announcement), and `Event::data_json` is the `eventData`
//! webhooks deliver.
//!
//! Producers (the settings store, ingest, chat, federation, ...) publish `Event`s; consumers (webhooks,
//! notifications, metrics, the chat hub) subscribe. The bus is a bounded tokio broadcast channel of
//! `BUS_CAPACITY` events. Policy for slow consumers: publishing never waits; a subscriber that falls more
//! than `BUS_CAPACITY` events behind loses the oldest ones and is told how many it missed
//! (`Subscription::recv` logs that and carries on), so one stuck consumer can neither block chat nor
//! grow memory.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

/// How many events the bus holds for its slowest subscriber.
pub const BUS_CAPACITY: usize = 4096;

pub mod chat;
pub mod replays;
pub mod schedule;
pub mod settings;
pub mod simulcast;
pub mod transcode;

pub use chat::ChatEvent;
pub use replays::{Clip, Replay};
pub use schedule::{ScheduleActivity, ScheduleNotice};
pub use settings::SettingsChange;
pub use simulcast::TargetStatus;
pub use transcode::{DegradedVariant, TranscodeDegraded};

/// Every kind of event castd publishes. `WEBHOOK_TYPES` lists Owncast's webhook event types (their
/// wire names are the webhook `type`s), SCHEDULED_EVENTS, the two Fediverse engagement types and castd's
/// SIMULCAST_STATE_CHANGED among them; the rest are internal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum EventType {
    #[serde(rename = "CHAT")]
    Chat,
    #[serde(rename = "USER_JOINED")]
    UserJoined,
    #[serde(rename = "USER_PARTED")]
    UserParted,
    #[serde(rename = "NAME_CHANGE")]
    NameChange,
    #[serde(rename = "FEDIVERSE_ENGAGEMENT_FOLLOW")]
    FediverseEngagementFollow,
    #[serde(rename = "VISIBILITY-UPDATE")]
    VisibilityUpdate,
    #[serde(rename = "PING")]
    Ping,
    #[serde(rename = "PONG")]
    Pong,
    #[serde(rename = "STREAM_STARTED")]
    StreamStarted,
    #[serde(rename = "STREAM_STOPPED")]
    StreamStopped,
    #[serde(rename = "STREAM_TITLE_UPDATED")]
    StreamTitleUpdated,
    #[serde(rename = "SYSTEM")]
    System,
    #[serde(rename = "CHAT_ACTION")]
    ChatAction,
    /// Internal: the settings changed (`data.sections` lists the sections of the settings that did).
    #[serde(rename = "CONFIG_CHANGED")]
    SettingsChanged,
    /// Internal: the hardware or stream health message changed (`data.message`).
    #[serde(rename = "HEALTH_ALERT")]
    HealthAlert,
    /// Internal: a chat user changed their colour (`data` is the COLOR_CHANGE chat event).
    #[serde(rename = "COLOR_CHANGE")]
    ColorChange,
    /// A fediverse account liked a post of this server (chat event and webhook).
    #[serde(rename = "FEDIVERSE_ENGAGEMENT_LIKE")]
    FediverseEngagementLike,
    /// A fediverse account boosted (announced) a post of this server (chat event and webhook).
    #[serde(rename = "FEDIVERSE_ENGAGEMENT_REPOST")]
    FediverseEngagementRepost,
    /// A scheduled stream's warning, start, end or reminder (Owncast's newest webhook type;
    /// `data.action` says which).
    #[serde(rename = "SCHEDULED_EVENTS")]
    ScheduledEvents,
    /// Internal: a scheduled stream's reminder text (browser push and Discord).
    #[serde(rename = "SCHEDULE_REMINDER")]
    ScheduleReminder,
    /// Internal: an ActivityPub activity for a scheduled stream (federation sends it).
    #[serde(rename = "SCHEDULE_FEDERATION")]
    ScheduleFederation,
    /// Internal: a scheduled stream never started and its chat closes (chat says so).
    #[serde(rename = "SCHEDULE_CHAT_CLOSING")]
    ScheduleChatClosing,
    /// castd addition: a simulcast target changed state (`off`, `connecting`, `live`, `retrying`, `failed`).
    #[serde(rename = "SIMULCAST_STATE_CHANGED")]
    SimulcastStateChanged,
    /// castd: a broadcast's replay is finished and playable (`data` is the replay).
    #[serde(rename = "REPLAY_READY")]
    ReplayReady,
    /// castd: a clip was created (`data` is the clip; chat announces a viewer's clip).
    #[serde(rename = "CLIP_CREATED")]
    ClipCreated,
    /// castd: the transcoder stepped its x264 rungs to faster presets because the box could not keep
    /// up (or back towards the configured ones: `data.degraded` false).
    #[serde(rename = "TRANSCODE_DEGRADED")]
    TranscodeDegraded,
}

impl EventType {
    /// The event types a webhook may subscribe to, in the interface's order.
    pub const WEBHOOK_TYPES: [EventType; 20] = [
        EventType::Chat,
        EventType::UserJoined,
        EventType::UserParted,
        EventType::NameChange,
        EventType::FediverseEngagementFollow,
        EventType::VisibilityUpdate,
        EventType::Ping,
        EventType::Pong,
        EventType::StreamStarted,
        EventType::StreamStopped,
        EventType::StreamTitleUpdated,
        EventType::System,
        EventType::ChatAction,
        EventType::FediverseEngagementLike,
        EventType::FediverseEngagementRepost,
        EventType::ScheduledEvents,
        EventType::SimulcastStateChanged,
        EventType::ReplayReady,
        EventType::ClipCreated,
        EventType::TranscodeDegraded,
    ];

    /// The wire name (`"CHAT"`, `"VISIBILITY-UPDATE"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::Chat => "CHAT",
            EventType::UserJoined => "USER_JOINED",
            EventType::UserParted => "USER_PARTED",
            EventType::NameChange => "NAME_CHANGE",
            EventType::FediverseEngagementFollow => "FEDIVERSE_ENGAGEMENT_FOLLOW",
            EventType::VisibilityUpdate => "VISIBILITY-UPDATE",
            EventType::Ping => "PING",
            EventType::Pong => "PONG",
            EventType::StreamStarted => "STREAM_STARTED",
            EventType::StreamStopped => "STREAM_STOPPED",
            EventType::StreamTitleUpdated => "STREAM_TITLE_UPDATED",
            EventType::System => "SYSTEM",
            EventType::ChatAction => "CHAT_ACTION",
            EventType::SettingsChanged => "CONFIG_CHANGED",
            EventType::HealthAlert => "HEALTH_ALERT",
            EventType::ColorChange => "COLOR_CHANGE",
            EventType::FediverseEngagementLike => "FEDIVERSE_ENGAGEMENT_LIKE",
            EventType::FediverseEngagementRepost => "FEDIVERSE_ENGAGEMENT_REPOST",
            EventType::ScheduledEvents => "SCHEDULED_EVENTS",
            EventType::ScheduleReminder => "SCHEDULE_REMINDER",
            EventType::ScheduleFederation => "SCHEDULE_FEDERATION",
            EventType::ScheduleChatClosing => "SCHEDULE_CHAT_CLOSING",
            EventType::SimulcastStateChanged => "SIMULCAST_STATE_CHANGED",
            EventType::ReplayReady => "REPLAY_READY",
            EventType::ClipCreated => "CLIP_CREATED",
            EventType::TranscodeDegraded => "TRANSCODE_DEGRADED",
        }
    }

    /// Parse a wire name; only the webhook types are accepted when `webhook_only`.
    pub fn parse(name: &str, webhook_only: bool) -> Option<EventType> {
        let t: EventType = serde_json::from_value(serde_json::Value::String(name.to_string())).ok()?;
        (!webhook_only || Self::WEBHOOK_TYPES.contains(&t)).then_some(t)
    }
}

/// One event on the bus, with its typed payload. `data_json` gives Owncast's `eventData` (what webhooks
/// send); chat events as `ChatEvent::webhook_data` gives them (Owncast's keys per type).
#[derive(Debug, Clone)]
pub enum Event {
    /// A chat event (CHAT, USER_JOINED, NAME_CHANGE, VISIBILITY-UPDATE, ...).
    Chat(ChatEvent),
    StreamStarted(StreamEvent),
    StreamStopped(StreamEvent),
    StreamTitleUpdated(StreamEvent),
    /// The settings changed: published by the settings store after every update that changed
    /// something (which sections, and the settings before and after); never by a setter.
    SettingsChanged(SettingsChange),
    /// The health message changed.
    HealthAlert(HealthAlert),
    /// A scheduled stream's webhook payload `{status, serverURL, event, action, timestamp}`.
    ScheduledEvent(ScheduleNotice),
    /// A scheduled stream's reminder (browser push and Discord send it).
    ScheduleReminder {
        event_id: String,
        text: String,
    },
    /// An ActivityPub activity about a scheduled stream, for the followers.
    ScheduleFederation(ScheduleActivity),
    /// A scheduled stream that opened chat never started: chat sends `body` as a SYSTEM message.
    ScheduleChatClosing {
        event_id: String,
        body: String,
    },
    /// A simulcast target's status after a state change `{id, name, state, since, bytesSent, ...}`.
    SimulcastStateChanged(TargetStatus),
    /// castd: a replay is finished (as `/api/admin/replays` lists it).
    ReplayReady(Replay),
    /// castd: a clip was created (as `/api/clips` lists it); `announce` with the chat line
    /// "NAME clipped TITLE" when a viewer made it and announcing is on.
    ClipCreated {
        clip: Clip,
        announce: Option<String>,
    },
    /// castd: the transcoder's ladder changed presets for capacity (see `transcode`).
    TranscodeDegraded(TranscodeDegraded),
}

impl Event {
    pub fn kind(&self) -> EventType {
        match self {
            Event::Chat(c) => c.kind(),
            Event::StreamStarted(_) => EventType::StreamStarted,
            Event::StreamStopped(_) => EventType::StreamStopped,
            Event::StreamTitleUpdated(_) => EventType::StreamTitleUpdated,
            Event::SettingsChanged(_) => EventType::SettingsChanged,
            Event::HealthAlert(_) => EventType::HealthAlert,
            Event::ScheduledEvent(_) => EventType::ScheduledEvents,
            Event::ScheduleReminder { .. } => EventType::ScheduleReminder,
            Event::ScheduleFederation(_) => EventType::ScheduleFederation,
            Event::ScheduleChatClosing { .. } => EventType::ScheduleChatClosing,
            Event::SimulcastStateChanged(_) => EventType::SimulcastStateChanged,
            Event::ReplayReady(_) => EventType::ReplayReady,
            Event::ClipCreated { .. } => EventType::ClipCreated,
            Event::TranscodeDegraded(_) => EventType::TranscodeDegraded,
        }
    }

    /// Owncast's `eventData` for this event.
    pub fn data_json(&self) -> serde_json::Value {
        let v = match self {
            Event::Chat(c) => Ok(c.webhook_data()),
            Event::StreamStarted(s) | Event::StreamStopped(s) | Event::StreamTitleUpdated(s) => serde_json::to_value(s),
            Event::SettingsChanged(change) => serde_json::to_value(change),
            Event::HealthAlert(h) => serde_json::to_value(h),
            Event::ScheduledEvent(notice) => serde_json::to_value(notice),
            Event::ScheduleReminder { event_id, text } => Ok(serde_json::json!({ "id": event_id, "text": text })),
            Event::ScheduleFederation(a) => serde_json::to_value(a),
            Event::ScheduleChatClosing { event_id, body } => Ok(serde_json::json!({ "id": event_id, "body": body })),
            Event::SimulcastStateChanged(status) => serde_json::to_value(status),
            Event::ReplayReady(replay) => serde_json::to_value(replay),
            Event::ClipCreated { clip, .. } => serde_json::to_value(clip),
            Event::TranscodeDegraded(d) => serde_json::to_value(d),
        };
        v.unwrap_or(serde_json::Value::Null)
    }
}

/// Owncast's payload of STREAM_STARTED / STREAM_STOPPED / STREAM_TITLE_UPDATED:
/// `{id, name, summary, streamTitle, status, timestamp}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StreamEvent {
    pub id: String,
    pub name: String,
    pub summary: String,
    pub stream_title: String,
    pub status: StreamEventStatus,
    pub timestamp: DateTime<Utc>,
}

/// The `status` of a stream event.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StreamEventStatus {
    pub online: bool,
    pub viewer_count: u64,
    pub session_max_viewer_count: u64,
    pub overall_max_viewer_count: u64,
    pub last_connect_time: Option<DateTime<Utc>>,
    pub last_disconnect_time: Option<DateTime<Utc>>,
    pub version_number: String,
    pub stream_title: String,
}

/// What raised or cleared a health message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HealthSource {
    /// CPU, memory or disk above its threshold (or back under it).
    Hardware,
    /// The transcoder left an encoder for another (a fault) or could not put the whole ladder on it.
    Encoder,
    /// Playback and encoder-speed evaluation of the metrics window.
    Playback,
    /// A security warning about the configuration (weak admin password, short stream keys).
    Security,
    /// Object storage uploads failing or falling behind (or recovered).
    Storage,
    /// A simulcast target failing for `simulcast::FAIL_AFTER` (or recovered).
    Simulcast,
    /// The server over capacity for the channel's publisher (refused, or served as passthrough), or
    /// the channel live with its ladder again.
    Capacity,
    /// The transcoder stepped its x264 rungs to faster presets to keep up (or back).
    Ladder,
}

/// HEALTH_ALERT: the health after the change, and what changed it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HealthAlert {
    pub message: String,
    pub healthy: bool,
    pub health_percentage: u32,
    pub representation: u32,
    pub source: HealthSource,
}

/// The bus; cheap to clone.
#[derive(Clone)]
pub struct Bus {
    tx: broadcast::Sender<Arc<Event>>,
}

impl Default for Bus {
    fn default() -> Self {
        Self::new(BUS_CAPACITY)
    }
}

impl Bus {
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity);
        Self { tx }
    }

    /// Publish an event; never blocks. Having no subscribers is fine.
    pub fn publish(&self, event: Event) {
        tracing::trace!(kind = event.kind().as_str(), "event");
        let _ = self.tx.send(Arc::new(event));
    }

    /// Subscribe to every event published from now on.
    pub fn subscribe(&self, name: &'static str) -> Subscription {
        Subscription { name, rx: self.tx.subscribe() }
    }
}

/// A consumer's end of the bus.
pub struct Subscription {
    name: &'static str,
    rx: broadcast::Receiver<Arc<Event>>,
}

impl Subscription {
    /// The next event if one is waiting (lost events are skipped as in `recv`).
    pub fn try_recv(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.rx.try_recv() {
                Ok(e) => return Some(e),
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    }

    /// The next event, or `None` once the bus is gone. Events lost because this consumer lagged are
    /// logged and skipped.
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.rx.recv().await {
                Ok(e) => return Some(e),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(consumer = self.name, missed = n, "event consumer fell behind; skipped events");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slow_consumer_skips_oldest_and_continues() {
        let bus = Bus::new(4);
        let mut sub = bus.subscribe("test");
        for i in 0..10 {
            bus.publish(Event::ScheduleReminder { event_id: i.to_string(), text: String::new() });
        }
        // the 6 oldest were dropped for this consumer; it resumes with the newest four
        let first = sub.recv().await.unwrap();
        assert_eq!(first.data_json()["id"], "6");
    }

    fn keys(v: &serde_json::Value) -> Vec<&str> {
        v.as_object().expect("an object").keys().map(String::as_str).collect()
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// SCHEDULED_EVENTS' eventData: exactly `{status, serverURL, event, action, timestamp}`, and
    /// `message` for a reminder (the JSON castd sent when the payload was built as a `Value`).
    #[test]
    fn scheduled_events_data_is_the_owncast_payload() {
        let event = schedule::ScheduledEvent {
            id: "e1".into(),
            series_id: None,
            name: "Show".into(),
            description: "d".into(),
            reminder_message: String::new(),
            start_time: at("2030-01-01T12:00:00Z"),
            duration_minutes: 30,
            timezone: "Europe/Paris".into(),
            status: "scheduled".into(),
        };
        let mut notice = ScheduleNotice {
            status: schedule::ScheduleStreamStatus {
                online: false,
                stream_title: "Title".into(),
                last_connect_time: None,
                last_disconnect_time: Some(at("2029-12-31T10:00:00Z")),
            },
            server_url: "https://castd.example".into(),
            event: event.clone(),
            action: schedule::ScheduleAction::TenMinuteWarning,
            timestamp: at("2030-01-01T11:50:00Z"),
            message: None,
        };
        let data = Event::ScheduledEvent(notice.clone()).data_json();
        assert_eq!(
            data,
            serde_json::json!({
                "status": {
                    "online": false,
                    "streamTitle": "Title",
                    "lastConnectTime": null,
                    "lastDisconnectTime": "2029-12-31T10:00:00Z",
                },
                "serverURL": "https://castd.example",
                "event": {
                    "id": "e1",
                    "name": "Show",
                    "description": "d",
                    "startTime": "2030-01-01T12:00:00Z",
                    "durationMinutes": 30,
                    "timezone": "Europe/Paris",
                    "status": "scheduled",
                },
                "action": "10-minute-warning",
                "timestamp": "2030-01-01T11:50:00Z",
            })
        );
        assert_eq!(keys(&data), ["action", "event", "serverURL", "status", "timestamp"]);
        for (action, name) in [
            (schedule::ScheduleAction::Reminder, "reminder"),
            (schedule::ScheduleAction::Started, "started"),
            (schedule::ScheduleAction::Ended, "ended"),
        ] {
            notice.action = action;
            assert_eq!(Event::ScheduledEvent(notice.clone()).data_json()["action"], name);
        }
        notice.message = Some("Soon!".into());
        notice.event.series_id = Some("s1".into());
        notice.event.reminder_message = "r".into();
        let data = Event::ScheduledEvent(notice).data_json();
        assert_eq!(keys(&data), ["action", "event", "message", "serverURL", "status", "timestamp"]);
        assert_eq!(data["message"], "Soon!");
        assert_eq!(data["event"]["seriesId"], "s1");
        assert_eq!(data["event"]["reminderMessage"], "r");
    }

    /// SIMULCAST_STATE_CHANGED's eventData: the target's status as the status route lists it.
    #[test]
    fn simulcast_state_changed_data_is_the_target_status() {
        let status = TargetStatus {
            id: "t1".into(),
            name: "YouTube".into(),
            state: simulcast::TargetState::Retrying,
            since: at("2030-01-01T12:00:00Z"),
            bytes_sent: 1234,
            bitrate_kbps: 0,
            last_error: None,
            reconnects: 2,
        };
        assert_eq!(
            Event::SimulcastStateChanged(status.clone()).data_json(),
            serde_json::json!({
                "id": "t1",
                "name": "YouTube",
                "state": "retrying",
                "since": "2030-01-01T12:00:00Z",
                "bytesSent": 1234,
                "bitrateKbps": 0,
                "lastError": null,
                "reconnects": 2,
            })
        );
        let failed =
            TargetStatus { state: simulcast::TargetState::Failed, last_error: Some("refused".into()), ..status };
        let data = Event::SimulcastStateChanged(failed).data_json();
        assert_eq!((data["state"].as_str(), data["lastError"].as_str()), (Some("failed"), Some("refused")));
    }

    /// REPLAY_READY's eventData: the replay as `/api/admin/replays` lists it (empty title, no end and
    /// not in progress left out).
    #[test]
    fn replay_ready_data_is_the_listed_replay() {
        let replay = Replay {
            id: "r1".into(),
            title: "Title".into(),
            start_time: at("2030-01-01T12:00:00Z"),
            end_time: Some(at("2030-01-01T13:00:00Z")),
            in_progress: false,
            manifest: "/replay/r1".into(),
            duration_seconds: 3600.5,
            total_bytes: 99,
            clip_count: 1,
            status: "finished".into(),
            stream_title: "Title".into(),
            public: true,
            pinned: false,
            download: "/replay/r1/download.mp4".into(),
        };
        assert_eq!(
            Event::ReplayReady(replay.clone()).data_json(),
            serde_json::json!({
                "id": "r1",
                "title": "Title",
                "startTime": "2030-01-01T12:00:00Z",
                "endTime": "2030-01-01T13:00:00Z",
                "manifest": "/replay/r1",
                "durationSeconds": 3600.5,
                "totalBytes": 99,
                "clipCount": 1,
                "status": "finished",
                "streamTitle": "Title",
                "public": true,
                "pinned": false,
                "download": "/replay/r1/download.mp4",
            })
        );
        let recording = Replay { title: String::new(), end_time: None, in_progress: true, ..replay };
        let data = Event::ReplayReady(recording).data_json();
        assert!(data.get("title").is_none() && data.get("endTime").is_none());
        assert_eq!(data["inProgress"], true);
    }

    /// CLIP_CREATED's eventData: the clip as `/api/clips` lists it (empty texts and a missing
    /// thumbnail left out); the chat line is not part of it.
    #[test]
    fn clip_created_data_is_the_listed_clip() {
        let clip = Clip {
            id: "c1".into(),
            stream_id: "r1".into(),
            clipped_by: "viewer".into(),
            title: "Wow".into(),
            stream_title: "Title".into(),
            relative_start_time: 1.5,
            relative_end_time: 11.5,
            duration_seconds: 10,
            manifest: "/clip/c1".into(),
            thumbnail: Some("/clip-thumbnail/c1.jpg".into()),
            timestamp: at("2030-01-01T12:30:00Z"),
            download: "/clip/c1/download.mp4".into(),
        };
        let event = Event::ClipCreated { clip: clip.clone(), announce: Some("viewer clipped Wow".into()) };
        assert_eq!(
            event.data_json(),
            serde_json::json!({
                "id": "c1",
                "streamId": "r1",
                "clippedBy": "viewer",
                "title": "Wow",
                "streamTitle": "Title",
                "relativeStartTime": 1.5,
                "relativeEndTime": 11.5,
                "durationSeconds": 10,
                "manifest": "/clip/c1",
                "thumbnail": "/clip-thumbnail/c1.jpg",
                "timestamp": "2030-01-01T12:30:00Z",
                "download": "/clip/c1/download.mp4",
            })
        );
        let bare = Clip {
            clipped_by: String::new(),
            title: String::new(),
            stream_title: String::new(),
            thumbnail: None,
            ..clip
        };
        assert_eq!(
            keys(&Event::ClipCreated { clip: bare, announce: None }.data_json()),
            [
                "download",
                "durationSeconds",
                "id",
                "manifest",
                "relativeEndTime",
                "relativeStartTime",
                "streamId",
                "timestamp"
            ]
        );
    }

    /// TRANSCODE_DEGRADED's eventData: the stream, the step, each variant's preset now and as
    /// configured with what it can sustain, the ladder's speed and headroom, and why.
    #[test]
    fn transcode_degraded_data_names_the_presets() {
        let d = TranscodeDegraded {
            stream_id: "s1".into(),
            degraded: true,
            fits: true,
            step: 2,
            variants: vec![DegradedVariant {
                variant: 0,
                name: "720p".into(),
                preset: Some("veryfast".into()),
                configured_preset: Some("fast".into()),
                speed: 1.4,
            }],
            speed: 0.71,
            headroom: -0.4,
            reason: "behind".into(),
            message: "m".into(),
            timestamp: at("2030-01-01T12:00:00Z"),
        };
        let event = Event::TranscodeDegraded(d);
        assert_eq!(event.kind().as_str(), "TRANSCODE_DEGRADED");
        assert!(EventType::WEBHOOK_TYPES.contains(&event.kind()));
        let data = event.data_json();
        assert_eq!(
            keys(&data),
            ["degraded", "fits", "headroom", "message", "reason", "speed", "step", "streamId", "timestamp", "variants"]
        );
        assert_eq!(
            data["variants"][0],
            serde_json::json!({"variant": 0, "name": "720p", "preset": "veryfast", "configuredPreset": "fast", "speed": 1.4})
        );
    }

    /// CONFIG_CHANGED (internal, never a webhook): the sections that changed.
    #[test]
    fn settings_changed_data_lists_the_sections() {
        let before = Arc::new(crate::config::Settings::default());
        let mut after = (*before).clone();
        after.instance.stream_title = "x".into();
        let change = SettingsChange::between(before, Arc::new(after)).unwrap();
        let event = Event::SettingsChanged(change);
        assert_eq!(event.kind().as_str(), "CONFIG_CHANGED");
        assert!(!EventType::WEBHOOK_TYPES.contains(&event.kind()));
        assert_eq!(event.data_json(), serde_json::json!({ "sections": ["instance"] }));
    }

    #[test]
    fn webhook_type_names() {
        assert_eq!(EventType::parse("VISIBILITY-UPDATE", true), Some(EventType::VisibilityUpdate));
        assert_eq!(EventType::parse("CONFIG_CHANGED", true), None);
        assert_eq!(EventType::parse("CONFIG_CHANGED", false), Some(EventType::SettingsChanged));
        for t in EventType::WEBHOOK_TYPES {
            assert_eq!(EventType::parse(t.as_str(), true), Some(t));
        }
    }
}
