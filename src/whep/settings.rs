//! The WHEP feature's setters (`config::WebRtcSettings`): `webrtc/enabled`, `webrtc/maxviewers`,
//! `webrtc/variant` (from the next stream) and `webrtc/requireauthentication`.

use std::sync::Arc;

use super::Whep;
use crate::config::validate;
use crate::events::Bus;
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

    fn event_bus(&self) -> &Bus {
        &self.bus
    }
}

/// The WHEP feature's setter routes.
pub fn routes(reg: &mut Registry, whep: Arc<Whep>) {
    setters::register(reg, whep, SETTERS);
}
