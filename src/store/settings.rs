//! The settings table: the only code that reads or writes it.
//!
//! Each field of a section of `config::Settings` (the sections are flattened) is one row (`key` = the
//! field's camelCase name, `value` = its JSON). Loading overlays the stored rows on the defaults, so a field added in a later version
//! takes its default, and a row that no longer parses is reported and replaced by the default instead
//! of stopping the server. `SettingsStore` keeps the current settings in memory for cheap reads and
//! writes only the rows that changed.
//!
//! A channel's database holds the channel's keys only ([`SettingsStore::open_channel`]): the server's
//! (`config::ServerSettings::keys`) are never written there, copies an older castd wrote are removed
//! when it opens, and what the channel's settings hold of them in memory is the server's value, laid
//! over by [`SettingsStore::follow_server`]. [`ServerSettingsStore`] is the server's settings as
//! their own type, read from the root database's store.
//!
//! It is also the one announcer of settings changes: after every update that changed something it
//! publishes `Event::SettingsChanged` on the bus it was opened with (which sections changed, the
//! settings before and after; see `events::settings`), in the order the updates were applied. Setters
//! announce nothing themselves, and nothing names a setting by a string to learn that it changed.

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Map, Value};

use super::{Migrations, Store, StoreError};
use crate::config::{ServerSettings, Settings};
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
    /// A channel's store: the server's keys are never persisted (see the module doc).
    channel: bool,
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
            channel: false,
        })
    }

    /// A channel's settings: its own keys from its database (copies of the server's keys there are
    /// removed), with `server`'s values laid over them in memory (see the module doc).
    pub fn open_channel(store: Store, bus: Bus, server: &ServerSettings) -> Result<Self, StoreError> {
        store.migrate("settings", MIGRATIONS)?;
        let keys: Vec<String> = ServerSettings::keys().to_vec();
        let removed = store.with(move |c| {
            let tx = c.transaction()?;
            let mut n = 0;
            for k in &keys {
                n += tx.execute("DELETE FROM settings WHERE key = ?1", [k])?;
            }
            tx.commit()?;
            Ok(n)
        })?;
        if removed > 0 {
            tracing::info!(removed, "the channel's database held copies of server-wide settings; they are removed");
        }
        let mut me = Self::open(store, bus)?;
        me.channel = true;
        let mut s = (*me.get()).clone();
        server.lay_over(&mut s);
        *me.current.write() = Arc::new(s);
        Ok(me)
    }

    /// A channel's store: lay `server` (the server's values, as this channel sees them) over its
    /// settings in memory, announcing what changed; nothing is written.
    pub async fn follow_server(&self, server: &ServerSettings) -> Result<(), StoreError> {
        self.update::<StoreError, _>(|s| {
            server.lay_over(s);
            Ok(())
        })
        .await
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
        let changed = self.own_rows(changed_rows(&before, &next)?);
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
        let changed = self.own_rows(changed_rows(&before, &next)?);
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

    /// The rows this store persists: on a channel's, not the server's keys.
    fn own_rows(&self, rows: Vec<(String, String)>) -> Vec<(String, String)> {
        if !self.channel {
            return rows;
        }
        rows.into_iter().filter(|(k, _)| !ServerSettings::is_server_key(k)).collect()
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

/// The server's settings (`config::ServerSettings`), read from the root database's store: what
/// server-wide features read, rather than a channel's settings. Cheap to read: the value is made
/// again only after the root's settings changed.
#[derive(Clone)]
pub struct ServerSettingsStore {
    root: SettingsStore,
    cached: Arc<RwLock<(Arc<Settings>, Arc<ServerSettings>)>>,
}

impl ServerSettingsStore {
    /// The server's settings in `root` (the root database's settings store).
    pub fn new(root: SettingsStore) -> Self {
        let now = root.get();
        let server = Arc::new(ServerSettings::of(&now));
        ServerSettingsStore { root, cached: Arc::new(RwLock::new((now, server))) }
    }

    /// The current server settings.
    pub fn get(&self) -> Arc<ServerSettings> {
        let now = self.root.get();
        {
            let c = self.cached.read();
            if Arc::ptr_eq(&c.0, &now) {
                return c.1.clone();
            }
        }
        let server = Arc::new(ServerSettings::of(&now));
        *self.cached.write() = (now, server.clone());
        server
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

    /// A channel's database holds its own keys only: copies of the server's are removed at open, the
    /// server's values are what it reads, and neither its updates nor the server's being laid over
    /// write a server key.
    #[tokio::test]
    async fn a_channels_store_holds_its_own_keys_and_reads_the_servers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ch.db");
        {
            // An older castd wrote the defaults of server keys into the channel's database.
            let s = SettingsStore::open(Store::open(&path).unwrap(), Bus::default()).unwrap();
            s.update_blocking(|c| {
                c.server.rtmp_server_port = 1936;
                c.ingest.srt_server_port = 8891;
                c.instance.name = "Church".into();
            })
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert!(rows(&store).contains_key("rtmpServerPort"));
        let mut root = Settings::default();
        root.server.rtmp_server_port = 21935;
        root.ingest.srt_server_port = 9000;
        root.video.video_codec = "libx264".into();
        let server = ServerSettings::of(&root);
        let bus = Bus::default();
        let mut sub = bus.subscribe("test");
        let s = SettingsStore::open_channel(store.clone(), bus, &server).unwrap();
        let got = s.get();
        assert_eq!((got.server.rtmp_server_port, got.ingest.srt_server_port), (21935, 9000));
        assert_eq!(got.video.video_codec, "libx264");
        assert_eq!(got.instance.name, "Church");
        let server_rows =
            |store: &Store| rows(store).into_keys().filter(|k| ServerSettings::is_server_key(k)).collect::<Vec<_>>();
        assert_eq!(server_rows(&store), Vec::<String>::new(), "the copies are removed");

        s.update::<StoreError, _>(|c| {
            c.chat.chat_disabled = true;
            c.server.rtmp_server_port = 1;
            Ok(())
        })
        .await
        .unwrap();
        let mut next = root.clone();
        next.server.rtmp_server_port = 31935;
        s.follow_server(&ServerSettings::of(&next)).await.unwrap();
        assert_eq!(s.get().server.rtmp_server_port, 31935);
        assert!(announced(&mut sub).iter().any(|c| c.changed(|c| &c.server.rtmp_server_port)));
        assert_eq!(server_rows(&store), Vec::<String>::new(), "nothing of the server's is written");
        assert_eq!(rows(&store).get("chatDisabled").map(String::as_str), Some("true"));

        let root_store =
            SettingsStore::open(Store::open(&dir.path().join("root.db")).unwrap(), Bus::default()).unwrap();
        let view = ServerSettingsStore::new(root_store.clone());
        assert_eq!(view.get().rtmp_server_port, 1935);
        root_store.update_blocking(|c| c.server.rtmp_server_port = 21935).unwrap();
        assert_eq!(view.get().rtmp_server_port, 21935, "the view follows the root's store");
        assert!(rows(&Store::open(&dir.path().join("root.db")).unwrap()).contains_key("rtmpServerPort"));
    }
}
