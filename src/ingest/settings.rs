//! The ingest section of the settings (`config::IngestSettings`): its setters (`srtserverport`,
//! restart to apply like the RTMP port; `srt/passphrase`, used from the next SRT handshake) and its
//! part (`srtServerPort`, `srtPassphrase`) of the server configuration.
//!
//! The SRT passphrase is a secret: the server configuration shows `********` when one is set (as the
//! object-storage secret), and the setter keeps the saved passphrase when it is sent `********` back.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Ingest;
use crate::config::validate::{self, ValidationError};
use crate::config::{Settings, MASKED};
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{Registry, ValueDoc};
use crate::store::settings::SettingsStore;

/// A port, or 0 for no SRT.
const PORT_OR_OFF: &str = r#"{"type":"integer","minimum":0,"maximum":65535}"#;
/// SRT's passphrase rule (10-79 characters; printable ASCII, so that it fits an `srt://` URL), or empty;
/// or `********`, the saved one as the server configuration shows it.
const SRT_PASSPHRASE: &str = r#"{"type":"string","pattern":"^([\\x20-\\x7e]{10,79}|\\*{8})?$"}"#;

/// An SRT passphrase: empty (no encryption) or 10 to 79 printable ASCII characters.
pub fn srt_passphrase(v: &Value) -> Result<String, ValidationError> {
    let p = validate::string(v, 79)?;
    if !p.is_empty() && (p.len() < 10 || !p.bytes().all(|b| (0x20..0x7f).contains(&b))) {
        return Err(ValidationError(
            "an SRT passphrase is 10 to 79 printable ASCII characters (or empty for none)".into(),
        ));
    }
    Ok(p)
}

/// The ingest feature's setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Ingest>] = &[
    Setter::restart("srtserverport", "SRT port (0: no SRT)", ValueDoc::Json(PORT_OR_OFF), |_, v, s| {
        set(&mut s.ingest.srt_server_port, validate::integer(v, 0, 65535).map(|n| n as u16))
    }),
    Setter::new(
        "srt/passphrase",
        "SRT encryption passphrase (10-79 characters; empty: none)",
        ValueDoc::Json(SRT_PASSPHRASE),
        |_, v, s| {
            if v.as_str() == Some(MASKED) {
                return Ok(()); // what the server configuration showed: the saved passphrase stays
            }
            set(&mut s.ingest.srt_passphrase, srt_passphrase(v))
        },
    ),
];

impl SettingsHost for Ingest {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// The ingest feature's setter routes.
pub fn routes(reg: &mut Registry, ingest: Arc<Ingest>) {
    setters::register(reg, ingest, SETTERS);
}

/// The ingest feature's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestConfigPart {
    /// The SRT ingest port (0: SRT is off); SRT listens on the RTMP address.
    pub srt_server_port: u16,
    /// The SRT encryption passphrase, masked: `********` when one is set, empty when SRT is unencrypted
    /// (publishers put the passphrase in their `srt://` URL).
    pub srt_passphrase: String,
}

/// The ingest feature's part of the server configuration (the passphrase masked).
pub fn server_config(s: &Settings) -> IngestConfigPart {
    let srt_passphrase = if s.ingest.srt_passphrase.is_empty() { String::new() } else { MASKED.to_string() };
    IngestConfigPart { srt_server_port: s.ingest.srt_server_port, srt_passphrase }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn passphrase_rule() {
        assert_eq!(srt_passphrase(&json!("")).ok(), Some(String::new()));
        assert!(srt_passphrase(&json!("0123456789")).is_ok());
        assert!(srt_passphrase(&json!("x".repeat(79))).is_ok());
        assert!(srt_passphrase(&json!("short")).is_err());
        assert!(srt_passphrase(&json!("x".repeat(80))).is_err());
        assert!(srt_passphrase(&json!("tab\tinside-it")).is_err());
        assert!(srt_passphrase(&json!("ünïcödé-passphrase")).is_err());
        assert!(srt_passphrase(&json!(1234567890)).is_err());
    }
}
