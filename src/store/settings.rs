//! The settings table: the only code that reads or writes it.
//!
//! Each field of a section of `config::Settings` (the sections are flattened) is one row (`key` = the
//! field's camelCase name, `value` = its JSON). Loading overlays the stored rows on the defaults, so a field added in a later version
//! takes its default, and a row that no longer parses is reported and replaced by the default instead
//! of stopping the server. `SettingsStore` keeps the current settings in memory for cheap reads and
//! writes only the rows that changed.
//!
//! It is also the one announcer of settings changes: after every update that changed something it
//! publishes `Event::SettingsChanged` on the bus it was opened with (which sections changed, the
//! settings before and after; see `events::settings`), in the order the updates were applied. Setters
//! announce nothing themselves, and nothing names a setting by a string to learn that it changed.

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Map, Value};

use super::{Migrations, Store, StoreError};
use crate::config::Settings;
use crate::events::{Bus, Event, SettingsChange};

const MIGRATIONS: Migrations = &["CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );"];

/// In-memory settings backed by the settings table.
#[derive(Clone)]
pub struct SettingsStore {
    store: Store,
    current: Arc<RwLock<Arc<Settings>>>,
    /// Serializes read-modify-write updates so concurrent setters never lose each other's change.
    write_lock: Arc<tokio::sync::Mutex<()>>,
    /// Where changes are announced.
    bus: Bus,
}

fn to_map(s: &Settings) -> Result<Map<String, Value>, StoreError> {
    match serde_json::to_value(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(StoreError::Corrupt("settings did not serialize to an object".into())),
        Err(e) => Err(StoreError::Corrupt(e.to_string())),
    }
}

impl SettingsStore {
    /// Create the table if needed and load the settings; changes will be announced on `bus`.
    pub fn open(store: Store, bus: Bus) -> Result<Self, StoreError> {
        store.migrate("settings", MIGRATIONS)?;
        let rows: Vec<(String, String)> = store.with(|c| {
            let mut stmt = c.prepare("SELECT key, value FROM settings")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })?;
        let defaults = to_map(&Settings::default())?;
        let mut merged = defaults.clone();
        for (key, raw) in rows {
            let Some(default) = defaults.get(&key) else {
                tracing::debug!(key, "ignoring a stored setting this version does not know");
                continue;
            };
            let Ok(value) = serde_json::from_str::<Value>(&raw) else {
                tracing::warn!(key, "stored setting is not valid JSON; using the default");
                continue;
            };
            // Check the row on its own, so one bad row cannot spoil the others.
            let mut probe = defaults.clone();
            probe.insert(key.clone(), value.clone());
            if serde_json::from_value::<Settings>(Value::Object(probe)).is_err() {
                tracing::warn!(key, default = %default, "stored setting has the wrong shape; using the default");
                continue;
            }
            merged.insert(key, value);
        }
        let settings: Settings =
            serde_json::from_value(Value::Object(merged)).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Self {
            store,
            current: Arc::new(RwLock::new(Arc::new(settings))),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            bus,
        })
    }

    /// Whether the settings table has a row for `key` (the field's camelCase name): a value someone
    /// set, rather than the default (start-up code that fills in a value only where none was set).
    pub fn is_stored(&self, key: &str) -> Result<bool, StoreError> {
        let key = key.to_string();
        self.store.with(move |c| {
            let n: i64 = c.query_row("SELECT COUNT(*) FROM settings WHERE key = ?1", [&key], |r| r.get(0))?;
            Ok(n > 0)
        })
    }

    /// The current settings (a cheap snapshot).
    pub fn get(&self) -> Arc<Settings> {
        self.current.read().clone()
    }

    /// Apply `f` to a copy of the settings, persist the fields that changed, then publish the copy and
    /// announce the change (`Event::SettingsChanged`; nothing when no section changed). Nothing
    /// changes in memory, and nothing is announced, unless the database write succeeded.
    pub async fn update<E, T>(&self, f: impl FnOnce(&mut Settings) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let _guard = self.write_lock.lock().await;
        let before = self.get();
        let mut next = (*before).clone();
        let out = f(&mut next)?;
        let changed = changed_rows(&before, &next)?;
        if !changed.is_empty() {
            self.store
                .call(move |c| {
                    let tx = c.transaction()?;
                    {
                        let mut stmt = tx.prepare(
                            "INSERT INTO settings (key, value) VALUES (?1, ?2)
                             ON CONFLICT(key) DO UPDATE SET value = excluded.value,
                               updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
                        )?;
                        for (k, v) in &changed {
                            stmt.execute(rusqlite::params![k, v])?;
                        }
                    }
                    tx.commit()?;
                    Ok(())
                })
                .await?;
        }
        self.replace(before, next);
        Ok(out)
    }

    /// Like `update` (the change is announced the same way), for start-up code that runs before the
    /// async runtime serves requests.
    pub fn update_blocking(&self, f: impl FnOnce(&mut Settings)) -> Result<(), StoreError> {
        let before = self.get();
        let mut next = (*before).clone();
        f(&mut next);
        let changed = changed_rows(&before, &next)?;
        self.store.with(|c| {
            let tx = c.transaction()?;
            for (k, v) in &changed {
                tx.execute(
                    "INSERT INTO settings (key, value) VALUES (?1, ?2)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value,
                       updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
                    rusqlite::params![k, v],
                )?;
            }
            tx.commit()?;
            Ok(())
        })?;
        self.replace(before, next);
        Ok(())
    }

    /// Make `next` the current settings and announce what changed from `before`. Called with the
    /// update serialized (the write lock, or start-up), so announcements come in the updates' order.
    fn replace(&self, before: Arc<Settings>, next: Settings) {
        let next = Arc::new(next);
        *self.current.write() = next.clone();
        if let Some(change) = SettingsChange::between(before, next) {
            self.bus.publish(Event::SettingsChanged(change));
        }
    }
}

/// The (key, JSON) rows that differ between two settings values.
fn changed_rows(before: &Settings, after: &Settings) -> Result<Vec<(String, String)>, StoreError> {
    let (a, b) = (to_map(before)?, to_map(after)?);
    b.into_iter()
        .filter(|(k, v)| a.get(k) != Some(v))
        .map(|(k, v)| serde_json::to_string(&v).map(|s| (k, s)).map_err(|e| StoreError::Corrupt(e.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Section;

    #[tokio::test]
    async fn settings_round_trip_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let s = SettingsStore::open(Store::open(&path).unwrap(), Bus::default()).unwrap();
            assert_eq!(s.get().video.latency_level, 2);
            s.update::<StoreError, _>(|c| {
                c.instance.name = "Renamed".into();
                c.video.latency_level = 4;
                Ok(())
            })
            .await
            .unwrap();
        }
        let s = SettingsStore::open(Store::open(&path).unwrap(), Bus::default()).unwrap();
        assert_eq!(s.get().instance.name, "Renamed");
        assert_eq!(s.get().video.latency_level, 4);
        assert_eq!(s.get().instance.tags, Settings::default().instance.tags);
    }

    #[test]
    fn a_bad_row_falls_back_to_its_default_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path).unwrap();
        store.migrate("settings", MIGRATIONS).unwrap();
        store
            .with(|c| {
                c.execute("INSERT INTO settings (key, value) VALUES ('latencyLevel', '\"x\"')", [])?;
                c.execute("INSERT INTO settings (key, value) VALUES ('name', '\"Kept\"')", [])?;
                c.execute("INSERT INTO settings (key, value) VALUES ('nsfw', 'not json')", [])?;
                Ok(())
            })
            .unwrap();
        let s = SettingsStore::open(store, Bus::default()).unwrap();
        assert_eq!(s.get().video.latency_level, 2);
        assert_eq!(s.get().instance.name, "Kept");
        assert!(!s.get().instance.nsfw);
    }

    /// The rows of the settings table, by key.
    fn rows(store: &Store) -> std::collections::BTreeMap<String, String> {
        store
            .with(|c| {
                let mut stmt = c.prepare("SELECT key, value FROM settings")?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .unwrap()
    }

    #[tokio::test]
    async fn a_section_field_is_one_row_under_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let s = SettingsStore::open(store.clone(), Bus::default()).unwrap();
        s.update::<StoreError, _>(|c| {
            c.chat.chat_disabled = true;
            c.storage.s3.bucket = "b".into();
            Ok(())
        })
        .await
        .unwrap();
        let rows = rows(&store);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows["chatDisabled"], "true");
        assert!(rows["s3"].contains(r#""bucket":"b""#), "{rows:?}");
    }

    #[test]
    fn rows_of_an_existing_table_load_into_their_sections() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        store.migrate("settings", MIGRATIONS).unwrap();
        store
            .with(|c| {
                for (k, v) in [
                    ("chatDisabled", "true"),
                    ("federationUsername", "\"bob\""),
                    ("browserNotifications", r#"{"enabled":true,"goLiveMessage":"hi"}"#),
                    ("scheduleFirstReminderMinutes", "30"),
                    ("webServerPort", "9000"),
                    // Wrong shapes: each takes its default, alone.
                    ("discordNotifications", r#"{"enabled":"yes"}"#),
                    ("s3", "\"x\""),
                    ("forbiddenUsernames", "[1]"),
                    ("rtmpServerPort", "70000"),
                    // A key no section has.
                    ("retiredSetting", "1"),
                ] {
                    c.execute("INSERT INTO settings (key, value) VALUES (?1, ?2)", [k, v])?;
                }
                Ok(())
            })
            .unwrap();
        let s = SettingsStore::open(store, Bus::default()).unwrap().get();
        let d = Settings::default();
        assert!(s.chat.chat_disabled);
        assert_eq!(s.chat.forbidden_usernames, d.chat.forbidden_usernames);
        assert_eq!(s.federation.federation_username, "bob");
        assert!(s.notifications.browser_notifications.enabled);
        assert_eq!(s.notifications.discord_notifications, d.notifications.discord_notifications);
        assert_eq!(s.storage, d.storage);
        assert_eq!(s.schedule.schedule_first_reminder_minutes, 30);
        assert_eq!(s.server.web_server_port, 9000);
        assert_eq!(s.server.rtmp_server_port, d.server.rtmp_server_port);
        assert_eq!(s.instance, d.instance);
        assert_eq!(s.video, d.video);
    }

    /// The settings changes the store announced so far.
    fn announced(sub: &mut crate::events::Subscription) -> Vec<SettingsChange> {
        let mut out = Vec::new();
        while let Some(e) = sub.try_recv() {
            match &*e {
                Event::SettingsChanged(c) => out.push(c.clone()),
                other => panic!("unexpected {other:?}"),
            }
        }
        out
    }

    fn sections(c: &SettingsChange) -> Vec<Section> {
        c.sections().iter().collect()
    }

    #[tokio::test]
    async fn an_update_announces_the_sections_it_changed_and_nothing_when_it_changed_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::default();
        let mut sub = bus.subscribe("test");
        let s = SettingsStore::open(Store::open(&dir.path().join("s.db")).unwrap(), bus).unwrap();
        // Two sections in one update: one announcement naming both, with the values before and after.
        s.update::<StoreError, _>(|c| {
            c.storage.s3.bucket = "b".into();
            c.server.video_serving_endpoint = "https://cdn.example".into();
            Ok(())
        })
        .await
        .unwrap();
        let got = announced(&mut sub);
        assert_eq!(got.len(), 1);
        assert_eq!(sections(&got[0]), [Section::Server, Section::Storage]);
        assert!(got[0].changed(|c| &c.storage.s3) && got[0].changed(|c| &c.server.video_serving_endpoint));
        assert!(!got[0].changed(|c| &c.server.server_url));
        assert_eq!(got[0].before().storage.s3.bucket, "");
        assert_eq!(got[0].after().storage.s3.bucket, "b");
        assert_eq!(*s.get(), *got[0].after());
        // The same values again, an update that leaves everything as it was, a failed update: silence.
        s.update::<StoreError, _>(|c| {
            c.storage.s3.bucket = "b".into();
            Ok(())
        })
        .await
        .unwrap();
        s.update::<StoreError, _>(|_| Ok(())).await.unwrap();
        let failed = s
            .update::<StoreError, ()>(|c| {
                c.chat.chat_disabled = true;
                Err(StoreError::Corrupt("refused".into()))
            })
            .await;
        assert!(failed.is_err());
        assert!(!s.get().chat.chat_disabled);
        assert!(announced(&mut sub).is_empty());
        // One section: only it.
        s.update::<StoreError, _>(|c| {
            c.instance.stream_title = "Live".into();
            Ok(())
        })
        .await
        .unwrap();
        let got = announced(&mut sub);
        assert_eq!(got.len(), 1);
        assert_eq!(sections(&got[0]), [Section::Instance]);
        // update_blocking announces the same way.
        s.update_blocking(|c| c.replay.replay_retention_days = 3).unwrap();
        s.update_blocking(|c| c.replay.replay_retention_days = 3).unwrap();
        let got = announced(&mut sub);
        assert_eq!(got.len(), 1);
        assert_eq!(sections(&got[0]), [Section::Replay]);
        assert!(got[0].changed(|c| &c.replay.replay_retention_days));
    }
}
