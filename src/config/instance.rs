//! The instance section of the settings: what the viewer page and the directory show about this
//! server (name, summary, tags, logo, page content, appearance, social handles, external actions,
//! autoplay). The server feature (`api`) owns its setters and its part of the admin configuration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A link to the streamer's account on another platform.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct SocialHandle {
    #[schema(required)]
    pub platform: String,
    #[schema(required)]
    pub url: String,
    /// Omitted when empty, as Owncast does (tools compare the list they set with the list they read).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub icon: String,
}

/// A button on the viewer page that opens a URL or shows HTML.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ExternalAction {
    #[schema(required)]
    pub url: String,
    #[schema(required)]
    pub html: String,
    #[schema(required)]
    pub title: String,
    #[schema(required)]
    pub description: String,
    #[schema(required)]
    pub icon: String,
    #[schema(required)]
    pub color: String,
    #[schema(required)]
    pub open_externally: bool,
}

/// The instance details. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceSettings {
    pub name: String,
    pub summary: String,
    pub stream_title: String,
    pub welcome_message: String,
    pub offline_message: String,
    pub extra_page_content: String,
    pub tags: Vec<String>,
    pub nsfw: bool,
    /// File name of the uploaded logo inside the data dir; empty = built-in logo.
    pub logo: String,
    /// File name of the uploaded favicon inside the data dir; empty = none.
    pub favicon: String,
    pub custom_styles: String,
    pub custom_javascript: String,
    pub appearance_variables: BTreeMap<String, String>,
    pub social_handles: Vec<SocialHandle>,
    pub external_actions: Vec<ExternalAction>,
    /// `off`, `on` or `muted`.
    pub autoplay: String,
    pub hide_viewer_count: bool,
    pub disable_search_indexing: bool,
}

impl Default for InstanceSettings {
    fn default() -> Self {
        Self {
            name: "castd".into(),
            summary: "A live stream served by castd, a self-hosted streaming server with chat.".into(),
            stream_title: String::new(),
            welcome_message: String::new(),
            offline_message: String::new(),
            extra_page_content: String::new(),
            tags: vec!["owncast".into(), "streaming".into()],
            nsfw: false,
            logo: String::new(),
            favicon: String::new(),
            custom_styles: String::new(),
            custom_javascript: String::new(),
            appearance_variables: BTreeMap::new(),
            social_handles: Vec::new(),
            external_actions: Vec::new(),
            autoplay: "off".into(),
            hide_viewer_count: false,
            disable_search_indexing: false,
        }
    }
}
