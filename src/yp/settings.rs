//! The directory's section of the settings (`config::DirectorySettings`): its setters
//! (`directoryenabled`, `directoryurl`) and its part (`yp`) of the server configuration.

use std::sync::Arc;

use serde::Serialize;
use utoipa::ToSchema;

use super::Directory;
use crate::config::validate::{self, URL_OR_EMPTY_SCHEMA};
use crate::config::Settings;
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{Registry, ValueDoc};
use crate::store::settings::SettingsStore;

/// The directory's setters, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Directory>] = &[
    Setter::new(
        "directoryurl",
        "Directory (YP) service URL (castd; empty = Owncast's directory)",
        ValueDoc::Json(URL_OR_EMPTY_SCHEMA),
        |_, v, s| set(&mut s.directory.directory_url, validate::url(v, true)),
    ),
    // Accepted without a server URL, as Owncast does; the admin health message warns until it is set.
    Setter::new(
        "directoryenabled",
        "List in the directory (listed once serverurl is set)",
        ValueDoc::Boolean,
        |_, v, s| set(&mut s.directory.directory_enabled, validate::boolean(v)),
    ),
];

impl SettingsHost for Directory {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// The directory's setter routes.
pub fn routes(reg: &mut Registry, dir: Arc<Directory>) {
    setters::register(reg, dir, SETTERS);
}

/// `yp` of the server configuration: the directory registration.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DirectorySettings)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryView {
    pub enabled: bool,
    /// The server URL.
    pub instance_url: String,
    pub directory_url: String,
}

/// The directory's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct DirectoryConfigPart {
    pub yp: DirectoryView,
}

/// The directory's part of the server configuration.
pub fn server_config(s: &Settings) -> DirectoryConfigPart {
    DirectoryConfigPart {
        yp: DirectoryView {
            enabled: s.directory.directory_enabled,
            instance_url: s.server.server_url.clone(),
            directory_url: s.directory.directory_url().to_string(),
        },
    }
}
