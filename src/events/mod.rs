//! The in-process events bus.
//!
//! Producers (settings, ingest, chat, federation, ...) publish `Event`s; consumers (webhooks,
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

/// Every kind of event castd publishes. The first thirteen are Owncast's webhook event types (their
/// wire names are the webhook `type`s); the rest are internal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Internal: a setting changed (`data.key` names the settings field).
    #[serde(rename = "CONFIG_CHANGED")]
    ConfigChanged,
    /// Internal: the hardware or stream health message changed (`data.message`).
    #[serde(rename = "HEALTH_ALERT")]
    HealthAlert,
    /// Internal: a chat user changed their colour (`data` is the COLOR_CHANGE chat event).
    #[serde(rename = "COLOR_CHANGE")]
    ColorChange,
}

impl EventType {
    /// The event types a webhook may subscribe to, in the interface's order.
    pub const WEBHOOK_TYPES: [EventType; 13] = [
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
    ];

    /// The wire name (`"CHAT"`, `"VISIBILITY-UPDATE"`, ...).
    pub fn as_str(self) -> &'static str {
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
            EventType::ConfigChanged => "CONFIG_CHANGED",
            EventType::HealthAlert => "HEALTH_ALERT",
            EventType::ColorChange => "COLOR_CHANGE",
        }
    }

    /// Parse a wire name; only the webhook types are accepted when `webhook_only`.
    pub fn parse(name: &str, webhook_only: bool) -> Option<EventType> {
        let t: EventType = serde_json::from_value(serde_json::Value::String(name.to_string())).ok()?;
        (!webhook_only || Self::WEBHOOK_TYPES.contains(&t)).then_some(t)
    }
}

/// One event: its type, when it happened, and its payload in Owncast's `eventData` shape.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub timestamp: DateTime<Utc>,
    #[serde(rename = "eventData")]
    pub data: serde_json::Value,
}

impl Event {
    pub fn new(kind: EventType, data: serde_json::Value) -> Self {
        Self { kind, timestamp: Utc::now(), data }
    }
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
            bus.publish(Event::new(EventType::Chat, serde_json::json!({ "n": i })));
        }
        // the 6 oldest were dropped for this consumer; it resumes with the newest four
        let first = sub.recv().await.unwrap();
        assert_eq!(first.data["n"], 6);
    }

    #[test]
    fn webhook_type_names() {
        assert_eq!(EventType::parse("VISIBILITY-UPDATE", true), Some(EventType::VisibilityUpdate));
        assert_eq!(EventType::parse("CONFIG_CHANGED", true), None);
        assert_eq!(EventType::parse("CONFIG_CHANGED", false), Some(EventType::ConfigChanged));
        for t in EventType::WEBHOOK_TYPES {
            assert_eq!(EventType::parse(t.as_str(), true), Some(t));
        }
    }
}
