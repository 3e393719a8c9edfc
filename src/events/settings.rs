//! SETTINGS_CHANGED (wire name `CONFIG_CHANGED`): what the settings store announces after every update
//! that changed something, and the only way a feature learns that a setting changed.
//!
//! The event says which sections of `config::Settings` changed (typed, never a setter's path) and
//! carries the settings before and after, so a consumer that cares about one field compares that
//! field (`changed(|s| &s.storage.s3)`) instead of matching names. Only `store::settings` makes one
//! ([`SettingsChange::between`]): a setter announces nothing itself.

use std::sync::Arc;

use serde::Serialize;

use crate::config::{Section, Sections, Settings};

/// One update of the settings: the sections that changed, and the settings before and after it.
#[derive(Debug, Clone, Serialize)]
pub struct SettingsChange {
    sections: Sections,
    #[serde(skip)]
    before: Arc<Settings>,
    #[serde(skip)]
    after: Arc<Settings>,
}

impl SettingsChange {
    /// The change from `before` to `after`; `None` when no section differs.
    pub fn between(before: Arc<Settings>, after: Arc<Settings>) -> Option<SettingsChange> {
        let sections = before.changed_sections(&after);
        (!sections.is_empty()).then_some(SettingsChange { sections, before, after })
    }

    /// The sections that changed (never empty).
    pub fn sections(&self) -> Sections {
        self.sections
    }

    /// Whether `section` changed.
    pub fn touches(&self, section: Section) -> bool {
        self.sections.contains(section)
    }

    /// The settings before the update.
    pub fn before(&self) -> &Settings {
        &self.before
    }

    /// The settings after the update (what `SettingsStore::get` returned once it was saved).
    pub fn after(&self) -> &Settings {
        &self.after
    }

    /// Whether the part of the settings `part` reads differs between before and after.
    pub fn changed<T: PartialEq + ?Sized>(&self, part: impl Fn(&Settings) -> &T) -> bool {
        part(&self.before) != part(&self.after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_its_sections_and_compares_fields() {
        let before = Arc::new(Settings::default());
        assert!(SettingsChange::between(before.clone(), before.clone()).is_none());
        let mut next = Settings::default();
        next.server.video_serving_endpoint = "https://cdn.example".into();
        let change = SettingsChange::between(before, Arc::new(next)).unwrap();
        assert!(change.touches(Section::Server));
        assert!(!change.touches(Section::Storage));
        assert!(change.changed(|s| &s.server.video_serving_endpoint));
        assert!(!change.changed(|s| &s.server.server_url));
        assert!(!change.changed(|s| &s.storage.s3));
        assert_eq!(change.after().server.video_serving_endpoint, "https://cdn.example");
        assert_eq!(serde_json::to_value(&change).unwrap(), serde_json::json!({ "sections": ["server"] }));
    }
}
