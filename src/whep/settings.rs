//! The WHEP feature's setters (`config::WebRtcSettings`): `webrtc/enabled`, `webrtc/maxviewers`,
//! `webrtc/variant` (from the next stream) and `webrtc/requireauthentication`.

use std::sync::Arc;

use super::Whep;
use crate::config::validate;
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{Registry, ValueDoc};
use crate::store::settings::SettingsStore;
use ValueDoc::{Boolean, Json as JsonSchema};

/// The WHEP feature's setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Whep>] = &[
    Setter::new("webrtc/enabled", "WebRTC (WHEP) playback on", Boolean, |_, v, s| {
        set(&mut s.webrtc.webrtc_enabled, validate::boolean(v))
    }),
    Setter::new(
        "webrtc/maxviewers",
        "WebRTC viewers at once (beyond it viewers watch over HLS)",
        JsonSchema(r#"{"type":"integer","minimum":0,"maximum":100000}"#),
        |_, v, s| set(&mut s.webrtc.webrtc_max_viewers, validate::integer(v, 0, 100_000).map(|n| n as u32)),
    ),
    Setter::new(
        "webrtc/variant",
        "The variant sent over WebRTC (-1: the lowest encoded one); from the next stream",
        JsonSchema(r#"{"type":"integer","minimum":-1,"maximum":64}"#),
        |_, v, s| set(&mut s.webrtc.webrtc_variant, validate::integer(v, -1, 64).map(|n| n as i32)),
    ),
    Setter::new(
        "webrtc/requireauthentication",
        "WebRTC viewers must present a chat access token",
        Boolean,
        |_, v, s| set(&mut s.webrtc.webrtc_require_authentication, validate::boolean(v)),
    ),
];

impl SettingsHost for Whep {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// The WHEP feature's setter routes.
pub fn routes(reg: &mut Registry, whep: Arc<Whep>) {
    setters::register(reg, whep, SETTERS);
}

/// The WHEP feature's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebRtcConfigPart {
    /// WebRTC (WHEP) playback on.
    pub webrtc_enabled: bool,
    /// WebRTC viewers at once (beyond it `POST /whep` answers 503).
    pub webrtc_max_viewers: u32,
    /// The variant sent over WebRTC (-1: the lowest encoded one).
    pub webrtc_variant: i32,
    /// WebRTC viewers must present a chat access token.
    pub webrtc_require_authentication: bool,
}

/// The WHEP feature's part of the server configuration.
pub fn server_config(s: &crate::config::Settings) -> WebRtcConfigPart {
    let w = &s.webrtc;
    WebRtcConfigPart {
        webrtc_enabled: w.webrtc_enabled,
        webrtc_max_viewers: w.webrtc_max_viewers,
        webrtc_variant: w.webrtc_variant,
        webrtc_require_authentication: w.webrtc_require_authentication,
    }
}
