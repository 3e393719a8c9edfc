//! The admin log view: a bounded in-memory ring of recent log events, the `tracing` layer that
//! fills it, and its routes `GET /api/admin/logs` and `GET /api/admin/logs/warnings`.
//!
//! `main.rs` creates the [`LogRing`], installs [`LogRing::layer`] beside the stderr formatter (so the
//! ring sees exactly the events the log level lets through) and hands the ring to the composition
//! root. Two rings of [`CAPACITY`] entries are kept, oldest dropped: every event, and warnings and
//! errors only, so a burst of info lines never pushes the last warning out of the warnings view.
//! Entries are Owncast's `{"message","level","time"}` with level one of `trace`, `debug`, `info`,
//! `warning`, `error`, oldest first.
//!
//! Bottom layer: imports no feature (only `http` for the route registry).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

use crate::http::{Auth, Registry};

/// Entries kept in each ring.
pub const CAPACITY: usize = 1000;
/// Longest message kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// One log event as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LogEntry {
    pub message: String,
    /// `trace`, `debug`, `info`, `warning` or `error`.
    pub level: &'static str,
    pub time: DateTime<Utc>,
}

#[derive(Default)]
struct Rings {
    all: VecDeque<LogEntry>,
    warnings: VecDeque<LogEntry>,
}

/// The shared rings; cheap to clone.
#[derive(Clone)]
pub struct LogRing {
    rings: Arc<Mutex<Rings>>,
    capacity: usize,
}

impl Default for LogRing {
    fn default() -> Self {
        Self::new(CAPACITY)
    }
}

fn push_bounded(ring: &mut VecDeque<LogEntry>, entry: LogEntry, capacity: usize) {
    while ring.len() >= capacity.max(1) {
        ring.pop_front();
    }
    ring.push_back(entry);
}

impl LogRing {
    pub fn new(capacity: usize) -> Self {
        Self { rings: Arc::default(), capacity }
    }

    /// Record an entry (warnings and errors go to both rings).
    pub fn push(&self, entry: LogEntry) {
        let mut rings = self.rings.lock();
        if matches!(entry.level, "warning" | "error") {
            push_bounded(&mut rings.warnings, entry.clone(), self.capacity);
        }
        push_bounded(&mut rings.all, entry, self.capacity);
    }

    /// Every kept entry, oldest first.
    pub fn all(&self) -> Vec<LogEntry> {
        self.rings.lock().all.iter().cloned().collect()
    }

    /// The kept warnings and errors, oldest first.
    pub fn warnings(&self) -> Vec<LogEntry> {
        self.rings.lock().warnings.iter().cloned().collect()
    }

    /// The `tracing` layer that records into this ring.
    pub fn layer(&self) -> RingLayer {
        RingLayer { ring: self.clone() }
    }
}

/// Owncast's name of a level.
pub fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warning",
        Level::ERROR => "error",
    }
}

/// The `tracing_subscriber` layer of a [`LogRing`].
pub struct RingLayer {
    ring: LogRing,
}

/// Collects an event's message and its other fields as ` key=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
    s
}

impl<S: Subscriber> Layer<S> for RingLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        let mut message = text.message;
        message.push_str(&text.fields);
        self.ring.push(LogEntry {
            message: cut(message.trim().to_string(), MAX_MESSAGE_BYTES),
            level: level_name(event.metadata().level()),
            time: Utc::now(),
        });
    }
}

const GROUP: &str = "admin";

pub fn routes(reg: &mut Registry, ring: LogRing) {
    let mut reg = reg.scope(ring);
    reg.schema::<LogEntry>();
    reg.get("/api/admin/logs", GROUP, Auth::Admin, "Recent log entries, oldest first", all).returns_list::<LogEntry>();
    reg.get("/api/admin/logs/warnings", GROUP, Auth::Admin, "Recent warnings and errors, oldest first", warnings)
        .returns_list::<LogEntry>();
}

async fn all(State(ring): State<LogRing>) -> Json<Vec<LogEntry>> {
    Json(ring.all())
}

async fn warnings(State(ring): State<LogRing>) -> Json<Vec<LogEntry>> {
    Json(ring.warnings())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn the_layer_keeps_a_bounded_ring_and_the_warnings_apart() {
        let ring = LogRing::new(3);
        let subscriber = tracing_subscriber::registry().with(ring.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(code = 7, "first {}", "warning");
            for i in 0..5 {
                tracing::info!(i, "line");
            }
            tracing::error!("broke");
        });
        let all = ring.all();
        assert_eq!(all.len(), 3, "oldest entries are dropped");
        assert_eq!(all[0].message, "line i=3");
        assert_eq!(all[2].level, "error");
        let warnings = ring.warnings();
        assert_eq!(warnings.iter().map(|w| w.level).collect::<Vec<_>>(), ["warning", "error"]);
        assert_eq!(warnings[0].message, "first warning code=7");
        assert!(warnings[0].time <= warnings[1].time);
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let s = cut("é".repeat(10), 5);
        assert_eq!(s, "éé");
    }
}
