//! Stream health as admin status and hardware stats show it, aggregated from typed inputs.
//!
//! Eight inputs report into the one `HealthHub`: the channel's capacity notice (its last publisher
//! refused, or its broadcast served as passthrough, because the server was over capacity; forwarded
//! by the transcoder from the media plane), hardware (a CPU,
//! memory or disk alert raised or cleared), the transcoder (an encoder notice: a fallback after a
//! fault, or a ladder that could not go entirely on the chosen encoder; cleared when the stream
//! stops), the transcoder's ladder notice (x264 rungs stepped to faster presets because the box could
//! not keep up; cleared when back at the configured presets or when the stream stops), metrics (the playback evaluation of each window: percentage, representation, healthy,
//! and its own message) and the server's configuration checks (the first security warning, such as
//! a weak admin password), object storage (uploads failing or behind), simulcast (a forward target
//! failed). The hub is the only writer of
//! `Health`: it combines the inputs — the capacity notice first (the channel is not live, or not
//! transcoded), the encoder notice next, then the ladder notice, then the storage notice (viewers are
//! affected at once), then the newest hardware alert, then the playback message, then the simulcast notice (viewers here are not affected), then the security warning — publishes the result on a `watch` channel, and puts HEALTH_ALERT on the bus
//! when the message changes.

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;

use crate::events::{Bus, Event, HealthAlert, HealthSource};

/// Stream health as admin status and hardware stats report it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub healthy: bool,
    pub health_percentage: u32,
    pub representation: u32,
    pub message: String,
}

impl Default for Health {
    fn default() -> Self {
        Self { healthy: true, health_percentage: 100, representation: 0, message: String::new() }
    }
}

/// One report into the hub.
#[derive(Debug, Clone, PartialEq)]
pub enum HealthInput {
    /// The playback evaluation of a metrics window (`Health::default()` while offline).
    Playback(Health),
    /// A hardware alert for `metric` (`cpu`, `memory`, `disk`) raised (`Some`) or cleared (`None`).
    Hardware { metric: &'static str, alert: Option<String> },
    /// The transcoder's notice (`None` clears it; the stream stopping clears it too).
    Encoder(Option<String>),
    /// The first security warning of the configuration (`None` when there is none); shown only
    /// when no other input has a message.
    Security(Option<String>),
    /// Object storage's notice (uploads failing or behind; `None` once they keep up again).
    Storage(Option<String>),
    /// Simulcast's notice (a forward target failed; `None` once none has).
    Simulcast(Option<String>),
    /// The capacity notice: the channel's last publisher was refused, or its broadcast is served as
    /// passthrough, because the server was over capacity (`None` once it goes live with its ladder).
    Capacity(Option<String>),
    /// The ladder notice: the transcoder stepped its x264 rungs to faster presets because the box could
    /// not keep up, or the ladder does not fit even at the fastest (`None` once back at the configured
    /// presets, or when the stream stops).
    Ladder(Option<String>),
}

#[derive(Default)]
struct Inputs {
    playback: Health,
    /// Raised hardware alerts, oldest first.
    hardware: Vec<(&'static str, String)>,
    encoder: Option<String>,
    security: Option<String>,
    storage: Option<String>,
    simulcast: Option<String>,
    capacity: Option<String>,
    ladder: Option<String>,
}

impl Inputs {
    fn combine(&self) -> Health {
        let playback = Some(self.playback.message.clone()).filter(|m| !m.trim().is_empty());
        let message = self
            .capacity
            .clone()
            .or_else(|| self.encoder.clone())
            .or_else(|| self.ladder.clone())
            .or_else(|| self.storage.clone())
            .or_else(|| self.hardware.last().map(|(_, m)| m.clone()))
            .or(playback)
            .or_else(|| self.simulcast.clone())
            .or_else(|| self.security.clone())
            .unwrap_or_default();
        Health { message, ..self.playback.clone() }
    }
}

/// The health aggregator (see the module doc); cheap to share as `Arc<HealthHub>`.
pub struct HealthHub {
    inputs: Mutex<Inputs>,
    tx: watch::Sender<Health>,
    bus: Bus,
}

impl HealthHub {
    pub fn new(bus: Bus) -> Arc<Self> {
        Arc::new(Self { inputs: Mutex::default(), tx: watch::channel(Health::default()).0, bus })
    }

    /// Take a report; returns the combined health after it.
    pub fn submit(&self, input: HealthInput) -> Health {
        let mut inputs = self.inputs.lock();
        let source = match input {
            HealthInput::Playback(h) => {
                inputs.playback = h;
                HealthSource::Playback
            }
            HealthInput::Hardware { metric, alert } => {
                inputs.hardware.retain(|(m, _)| *m != metric);
                if let Some(a) = alert.filter(|a| !a.trim().is_empty()) {
                    inputs.hardware.push((metric, a));
                }
                HealthSource::Hardware
            }
            HealthInput::Encoder(notice) => {
                inputs.encoder = notice.filter(|n| !n.trim().is_empty());
                HealthSource::Encoder
            }
            HealthInput::Storage(notice) => {
                inputs.storage = notice.filter(|n| !n.trim().is_empty());
                HealthSource::Storage
            }
            HealthInput::Simulcast(notice) => {
                inputs.simulcast = notice.filter(|n| !n.trim().is_empty());
                HealthSource::Simulcast
            }
            HealthInput::Capacity(notice) => {
                inputs.capacity = notice.filter(|n| !n.trim().is_empty());
                HealthSource::Capacity
            }
            HealthInput::Ladder(notice) => {
                inputs.ladder = notice.filter(|n| !n.trim().is_empty());
                HealthSource::Ladder
            }
            HealthInput::Security(warning) => {
                inputs.security = warning.filter(|w| !w.trim().is_empty());
                HealthSource::Security
            }
        };
        let next = inputs.combine();
        let previous = self.tx.send_replace(next.clone());
        drop(inputs);
        if previous.message != next.message {
            self.bus.publish(Event::HealthAlert(HealthAlert {
                message: next.message.clone(),
                healthy: next.healthy,
                health_percentage: next.health_percentage,
                representation: next.representation,
                source,
            }));
        }
        next
    }

    /// The current health.
    pub fn get(&self) -> Health {
        self.tx.borrow().clone()
    }

    pub fn watch(&self) -> watch::Receiver<Health> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inputs_combine_by_precedence_and_alert_on_change() {
        let bus = Bus::default();
        let mut sub = bus.subscribe("test");
        let hub = HealthHub::new(bus);
        let playback = Health { healthy: false, health_percentage: 50, representation: 20, message: "errors".into() };
        assert_eq!(hub.submit(HealthInput::Playback(playback.clone())).message, "errors");
        let cpu = HealthInput::Hardware { metric: "cpu", alert: Some("cpu high".into()) };
        assert_eq!(hub.submit(cpu).message, "cpu high");
        assert_eq!(hub.submit(HealthInput::Encoder(Some("fell back".into()))).message, "fell back");
        // the playback figures stay those of the last window
        let h = hub.get();
        assert_eq!((h.healthy, h.health_percentage, h.representation), (false, 50, 20));
        hub.submit(HealthInput::Encoder(None));
        assert_eq!(hub.get().message, "cpu high");
        hub.submit(HealthInput::Hardware { metric: "cpu", alert: None });
        assert_eq!(hub.get().message, "errors");
        let mut sources = Vec::new();
        while let Ok(Some(e)) = tokio::time::timeout(std::time::Duration::from_millis(50), sub.recv()).await {
            if let Event::HealthAlert(a) = &*e {
                sources.push((a.source, a.message.clone()));
            }
        }
        use HealthSource::*;
        let expected = [
            (Playback, "errors"),
            (Hardware, "cpu high"),
            (Encoder, "fell back"),
            (Encoder, "cpu high"),
            (Hardware, "errors"),
        ];
        assert_eq!(sources, expected.map(|(s, m)| (s, m.to_string())));
    }

    #[test]
    fn a_security_warning_shows_only_without_other_messages() {
        let hub = HealthHub::new(Bus::default());
        assert_eq!(hub.submit(HealthInput::Security(Some("weak password".into()))).message, "weak password");
        let playback = Health { message: "errors".into(), ..Health::default() };
        assert_eq!(hub.submit(HealthInput::Playback(playback)).message, "errors");
        assert_eq!(hub.submit(HealthInput::Playback(Health::default())).message, "weak password");
        hub.submit(HealthInput::Hardware { metric: "disk", alert: Some("disk full".into()) });
        assert_eq!(hub.get().message, "disk full");
        hub.submit(HealthInput::Hardware { metric: "disk", alert: None });
        assert_eq!(hub.submit(HealthInput::Security(None)).message, "");
        assert!(hub.get().healthy, "a warning does not make the stream unhealthy");
    }

    #[test]
    fn a_storage_notice_comes_after_the_encoder_and_before_hardware() {
        let hub = HealthHub::new(Bus::default());
        hub.submit(HealthInput::Hardware { metric: "disk", alert: Some("disk full".into()) });
        assert_eq!(hub.submit(HealthInput::Storage(Some("storage failing".into()))).message, "storage failing");
        assert_eq!(hub.submit(HealthInput::Encoder(Some("fell back".into()))).message, "fell back");
        hub.submit(HealthInput::Encoder(None));
        assert_eq!(hub.submit(HealthInput::Storage(None)).message, "disk full");
    }

    #[test]
    fn the_capacity_notice_comes_first() {
        let hub = HealthHub::new(Bus::default());
        hub.submit(HealthInput::Encoder(Some("fell back".into())));
        assert_eq!(hub.submit(HealthInput::Capacity(Some("over capacity".into()))).message, "over capacity");
        assert_eq!(hub.submit(HealthInput::Capacity(None)).message, "fell back");
    }

    #[test]
    fn the_ladder_notice_comes_after_the_encoder_and_before_storage() {
        let hub = HealthHub::new(Bus::default());
        hub.submit(HealthInput::Storage(Some("storage failing".into())));
        assert_eq!(hub.submit(HealthInput::Ladder(Some("stepped down".into()))).message, "stepped down");
        assert_eq!(hub.submit(HealthInput::Encoder(Some("fell back".into()))).message, "fell back");
        hub.submit(HealthInput::Encoder(None));
        assert_eq!(hub.submit(HealthInput::Ladder(None)).message, "storage failing");
    }

    #[test]
    fn an_unchanged_message_raises_no_alert() {
        let bus = Bus::default();
        let mut sub = bus.subscribe("test");
        let hub = HealthHub::new(bus);
        hub.submit(HealthInput::Playback(Health::default()));
        hub.submit(HealthInput::Hardware { metric: "disk", alert: None });
        assert!(sub.try_recv().is_none());
    }
}
