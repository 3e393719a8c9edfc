//! The chat section of the settings. The `chat` feature owns its setters and its part of the admin
//! configuration (`chat::settings`).

use serde::{Deserialize, Serialize};

/// Largest chat message, in bytes, that a client may send (Owncast: 2048).
pub const MAX_SOCKET_PAYLOAD_SIZE: usize = 2048;

/// The chat settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChatSettings {
    pub chat_disabled: bool,
    pub chat_join_messages_enabled: bool,
    pub chat_established_user_mode: bool,
    pub chat_spam_protection_enabled: bool,
    pub chat_slur_filter_enabled: bool,
    /// Words the slur filter masks in addition to its built-in list.
    pub chat_slur_filter_words: Vec<String>,
    pub chat_require_authentication: bool,
    pub forbidden_usernames: Vec<String>,
    pub suggested_usernames: Vec<String>,
}

impl Default for ChatSettings {
    fn default() -> Self {
        Self {
            chat_disabled: false,
            chat_join_messages_enabled: true,
            chat_established_user_mode: false,
            chat_spam_protection_enabled: true,
            chat_slur_filter_enabled: false,
            chat_slur_filter_words: Vec::new(),
            chat_require_authentication: false,
            forbidden_usernames: vec!["owncast".into(), "operator".into(), "admin".into(), "system".into()],
            suggested_usernames: Vec::new(),
        }
    }
}
