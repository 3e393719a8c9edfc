//! Federation's section of the settings (`config::FederationSettings`): its setters
//! (`/api/admin/config/federation/*`) and its part of the server configuration.

use std::sync::Arc;

use serde::Serialize;
use utoipa::ToSchema;

use super::Federation;
use crate::config::validate::{self, ValidationError};
use crate::config::Settings;
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{Registry, ValueDoc};
use crate::store::settings::SettingsStore;

const TEXT_500: &str = r#"{"type":"string","maxLength":500}"#;
const DOMAINS: &str = r#"{"type":"array","maxItems":1000,"items":{"type":"string","pattern":"^\\s*([A-Za-z0-9-]*\\.[A-Za-z0-9.-]*)?\\s*$"}}"#;

fn needs_server_url(s: &Settings, what: &str) -> Result<(), ValidationError> {
    if s.server.server_url.is_empty() {
        return Err(ValidationError(format!("set the server URL (serverurl) before enabling {what}")));
    }
    Ok(())
}

use ValueDoc::{Boolean, Json as JsonSchema};

/// Federation's setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Federation>] = &[
    Setter::new("federation/enable", "Enable federation (400 until serverurl is set)", Boolean, |_, v, s| {
        let on = validate::boolean(v)?;
        if on {
            needs_server_url(s, "federation")?;
        }
        set(&mut s.federation.federation_enabled, Ok(on))
    }),
    Setter::new("federation/private", "Approve followers by hand", Boolean, |_, v, s| {
        set(&mut s.federation.federation_private, validate::boolean(v))
    }),
    Setter::new(
        "federation/username",
        "Fediverse user name",
        JsonSchema(r#"{"type":"string","pattern":"^[A-Za-z0-9_]{1,30}$"}"#),
        |fed, v, s| {
            let name = validate::federation_username(v)?;
            // One host, one WebFinger: every channel's actor has a name of its own.
            if (fed.names.username_taken)(&name) {
                return Err(ValidationError(format!(
                    "the fediverse user name {name} is another channel's actor: choose another"
                )));
            }
            set(&mut s.federation.federation_username, Ok(name))
        },
    ),
    Setter::new("federation/livemessage", "Fediverse go-live message", JsonSchema(TEXT_500), |_, v, s| {
        set(&mut s.federation.federation_go_live_message, validate::string(v, 500))
    }),
    Setter::new("federation/showengagement", "Show fediverse engagement in chat", Boolean, |_, v, s| {
        set(&mut s.federation.federation_show_engagement, validate::boolean(v))
    }),
    Setter::new("federation/enablequotes", "Allow quote posts", Boolean, |_, v, s| {
        set(&mut s.federation.federation_enable_quotes, validate::boolean(v))
    }),
    Setter::new("federation/hidefollowers", "Hide the followers tab", Boolean, |_, v, s| {
        set(&mut s.federation.federation_hide_followers, validate::boolean(v))
    }),
    Setter::new("federation/blockdomains", "Blocked fediverse domains", JsonSchema(DOMAINS), |_, v, s| {
        // Stored normalised (lower case, no trailing dot), as the checked hosts are.
        let domains = validate::domains(v).map(|list| {
            let mut out: Vec<String> = Vec::with_capacity(list.len());
            for d in list.iter().map(|d| super::blocklist::normalise_domain(d)).filter(|d| !d.is_empty()) {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
            out
        });
        set(&mut s.federation.federation_blocked_domains, domains)
    }),
];

impl SettingsHost for Federation {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// Federation's setter routes.
pub fn routes(reg: &mut Registry, fed: Arc<Federation>) {
    setters::register(reg, fed, SETTERS);
}

/// `federation` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = FederationSettings)]
#[serde(rename_all = "camelCase")]
pub struct FederationView {
    pub enabled: bool,
    pub is_private: bool,
    pub username: String,
    pub go_live_message: String,
    pub show_engagement: bool,
    pub enable_quotes: bool,
    pub hide_followers_tab: bool,
    pub blocked_domains: Vec<String>,
}

/// Federation's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct FederationConfigPart {
    pub federation: FederationView,
}

/// Federation's part of the server configuration.
pub fn server_config(s: &Settings) -> FederationConfigPart {
    let f = &s.federation;
    FederationConfigPart {
        federation: FederationView {
            enabled: f.federation_enabled,
            is_private: f.federation_private,
            username: f.federation_username.clone(),
            go_live_message: f.federation_go_live_message.clone(),
            show_engagement: f.federation_show_engagement,
            enable_quotes: f.federation_enable_quotes,
            hide_followers_tab: f.federation_hide_followers,
            blocked_domains: f.federation_blocked_domains.clone(),
        },
    }
}
