//! Chat's section of the settings (`config::ChatSettings`): its setters (`/api/admin/config/chat/*`)
//! and its part of the admin server configuration.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Chat;
use crate::config::validate::{self, ValidationError};
use crate::config::Settings;
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{Registry, ValueDoc};
use crate::store::settings::SettingsStore;

const NAME_LIST: &str = r#"{"type":"array","maxItems":1000,"items":{"type":"string"}}"#;
const SLUR_WORDS: &str = r#"{"type":"array","maxItems":1000,"items":{"type":"string","pattern":"^\\s*[^\\s\\x00-\\x1f\\x7f-\\x9f]{0,64}\\s*$"}}"#;

/// The slur filter's extra words: each one word (no spaces), at most 64 characters, kept lowercase.
fn slur_words(v: &Value) -> Result<Vec<String>, ValidationError> {
    let list = validate::string_list(v, 1000)?;
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for w in list {
        if w.chars().count() > 64 || w.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ValidationError(format!("'{w}' is not a single word of at most 64 characters")));
        }
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

use ValueDoc::{Boolean, Json as JsonSchema};

/// Chat's setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Chat>] = &[
    Setter::new("chat/disable", "Disable chat", Boolean, |_, v, s| {
        set(&mut s.chat.chat_disabled, validate::boolean(v))
    }),
    Setter::new("chat/joinmessagesenabled", "Show join and part messages", Boolean, |_, v, s| {
        set(&mut s.chat.chat_join_messages_enabled, validate::boolean(v))
    }),
    Setter::new("chat/establishedusermode", "Only established users may chat", Boolean, |_, v, s| {
        set(&mut s.chat.chat_established_user_mode, validate::boolean(v))
    }),
    Setter::new("chat/spamprotectionenabled", "Chat flood protection", Boolean, |_, v, s| {
        set(&mut s.chat.chat_spam_protection_enabled, validate::boolean(v))
    }),
    Setter::new("chat/slurfilterenabled", "Chat slur filter", Boolean, |_, v, s| {
        set(&mut s.chat.chat_slur_filter_enabled, validate::boolean(v))
    }),
    Setter::new(
        "chat/slurfilterwords",
        "Words the chat slur filter masks besides its built-in list (castd)",
        JsonSchema(SLUR_WORDS),
        |_, v, s| set(&mut s.chat.chat_slur_filter_words, slur_words(v)),
    ),
    Setter::new("chat/requireauthentication", "Require authentication to chat", Boolean, |_, v, s| {
        set(&mut s.chat.chat_require_authentication, validate::boolean(v))
    }),
    Setter::new("chat/forbiddenusernames", "Forbidden chat names", JsonSchema(NAME_LIST), |_, v, s| {
        set(&mut s.chat.forbidden_usernames, validate::string_list(v, 1000))
    }),
    Setter::new("chat/suggestedusernames", "Suggested chat names", JsonSchema(NAME_LIST), |_, v, s| {
        set(&mut s.chat.suggested_usernames, validate::string_list(v, 1000))
    }),
];

impl SettingsHost for Chat {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// Chat's setter routes.
pub fn routes(reg: &mut Registry, chat: Arc<Chat>) {
    setters::register(reg, chat, SETTERS);
}

/// Chat's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatConfig {
    pub chat_disabled: bool,
    pub chat_join_messages_enabled: bool,
    pub chat_established_user_mode: bool,
    pub chat_spam_protection_enabled: bool,
    pub chat_slur_filter_enabled: bool,
    pub chat_slur_filter_words: Vec<String>,
    pub chat_require_authentication: bool,
    pub forbidden_usernames: Vec<String>,
    pub suggested_usernames: Vec<String>,
}

/// Chat's part of the admin server configuration.
pub fn server_config(s: &Settings) -> ChatConfig {
    let c = &s.chat;
    ChatConfig {
        chat_disabled: c.chat_disabled,
        chat_join_messages_enabled: c.chat_join_messages_enabled,
        chat_established_user_mode: c.chat_established_user_mode,
        chat_spam_protection_enabled: c.chat_spam_protection_enabled,
        chat_slur_filter_enabled: c.chat_slur_filter_enabled,
        chat_slur_filter_words: c.chat_slur_filter_words.clone(),
        chat_require_authentication: c.chat_require_authentication,
        forbidden_usernames: c.forbidden_usernames.clone(),
        suggested_usernames: c.suggested_usernames.clone(),
    }
}
