//! The origin's settings an edge applies itself. An edge keeps no database (its store is in memory,
//! see `main`), so what its own code reads from the settings comes from the origin: the chat section
//! (chat disabled, join messages, flood protection, ...) and the instance name and welcome message
//! its chat sends. The origin answers `GET /api/cluster/settings` (cluster secret required, like the
//! token check); each edge asks every `EVERY` and applies what changed to its in-memory settings.
//! While the origin does not answer, the last settings stand.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::Cluster;
use crate::config::chat::ChatSettings;
use crate::http::ApiError;
use crate::store::settings::SettingsStore;
use crate::store::StoreError;
use crate::tasks::{Stage, Tasks};

/// How often an edge asks the origin for its settings.
pub const EVERY: Duration = Duration::from_secs(2);
const TIMEOUT: Duration = Duration::from_secs(5);

/// What an edge takes from the origin's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgeConfig {
    pub chat: ChatSettings,
    pub name: String,
    pub welcome_message: String,
}

impl EdgeConfig {
    pub fn of(s: &crate::config::Settings) -> EdgeConfig {
        EdgeConfig {
            chat: s.chat.clone(),
            name: s.instance.name.clone(),
            welcome_message: s.instance.welcome_message.clone(),
        }
    }

    /// Apply to an edge's settings when they differ; true when something changed.
    pub async fn apply(self, settings: &SettingsStore) -> Result<bool, StoreError> {
        if EdgeConfig::of(&settings.get()) == self {
            return Ok(false);
        }
        settings
            .update(|s| {
                s.chat = self.chat;
                s.instance.name = self.name;
                s.instance.welcome_message = self.welcome_message;
                Ok::<_, StoreError>(())
            })
            .await?;
        Ok(true)
    }
}

/// The origin's answer to `GET /api/cluster/settings`.
pub async fn serve(State(cluster): State<Arc<Cluster>>, headers: HeaderMap) -> Result<Json<EdgeConfig>, ApiError> {
    cluster.check_secret(&headers)?;
    if cluster.is_edge() {
        return Err(ApiError::NotFound("this node is an edge".into()));
    }
    Ok(Json(EdgeConfig::of(&cluster.chat.settings.get())))
}

async fn fetch(cluster: &Cluster) -> Result<EdgeConfig, String> {
    cluster.config.ask_origin(&cluster.http, "/api/cluster/settings", &[], TIMEOUT).await
}

/// The edge's task: take the origin's settings every `EVERY`.
pub fn start(cluster: Arc<Cluster>, tasks: &Tasks) {
    tasks.spawn_until_stopped(Stage::Background, "cluster: the origin's settings", async move {
        let mut failing = false;
        loop {
            match fetch(&cluster).await {
                Ok(config) => {
                    failing = false;
                    match config.apply(&cluster.chat.settings).await {
                        Ok(true) => tracing::info!("cluster: applied the origin's chat settings"),
                        Ok(false) => {}
                        Err(e) => tracing::warn!("cluster: applying the origin's settings: {e}"),
                    }
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!("cluster: could not get the origin's settings (the last ones stand): {e}");
                }
                Err(_) => {}
            }
            tokio::time::sleep(EVERY).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[tokio::test]
    async fn an_edge_takes_the_origin_settings_into_its_memory_store() {
        let edge = SettingsStore::open(Store::open_in_memory().unwrap(), crate::events::Bus::default()).unwrap();
        let mut origin = (*edge.get()).clone();
        origin.chat.chat_spam_protection_enabled = false;
        origin.chat.chat_disabled = true;
        origin.instance.name = "the origin".into();
        origin.instance.welcome_message = "hello".into();
        origin.instance.summary = "not an edge's business".into();
        assert!(EdgeConfig::of(&origin).apply(&edge).await.unwrap(), "changed");
        let s = edge.get();
        assert!(!s.chat.chat_spam_protection_enabled && s.chat.chat_disabled);
        assert_eq!((s.instance.name.as_str(), s.instance.welcome_message.as_str()), ("the origin", "hello"));
        assert_ne!(s.instance.summary, "not an edge's business", "only what an edge applies is taken");
        assert!(!EdgeConfig::of(&origin).apply(&edge).await.unwrap(), "nothing new the second time");
    }
}
