//! Warnings about what castd accepts, as Owncast does, instead of refusing: a weak admin password,
//! short stream keys, the directory listing on without a server URL (`Settings::security_warnings`).
//!
//! Admin status lists them as `warnings`; this task logs each one once at start and again whenever a
//! settings change (announced by the settings store) brings a warning that was not there before, and
//! reports the first one to the health hub (`HealthInput::Security`, shown in the admin health
//! message when nothing more urgent is).

use std::sync::Arc;

use super::Server;
use crate::events::Event;
use crate::health::HealthInput;
use crate::tasks::{Stage, Tasks};

/// Log the warnings not in `before`, report the first to the health hub; returns the current list.
fn evaluate(server: &Server, before: &[String]) -> Vec<String> {
    let now = server.settings.get().security_warnings();
    for w in now.iter().filter(|w| !before.contains(w)) {
        tracing::warn!("{w}");
    }
    server.health.submit(HealthInput::Security(now.first().cloned()));
    now
}

/// Evaluate at start, then after every settings change that changes the warnings (a setter's, or a
/// login's that updates the stored hash or the weak flag).
pub fn start(server: Arc<Server>, tasks: &Tasks) {
    let mut sub = server.bus.subscribe("security-warnings");
    let mut current = evaluate(&server, &[]);
    tasks.spawn_until_stopped(Stage::Background, "security warnings", async move {
        while let Some(ev) = sub.recv().await {
            if let Event::SettingsChanged(change) = &*ev {
                if change.before().security_warnings() != change.after().security_warnings() {
                    current = evaluate(&server, &current);
                }
            }
        }
    });
}
