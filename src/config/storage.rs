//! The object storage section of the settings. The `storage` feature owns its setter and its part of
//! the admin configuration (`storage::settings`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the admin API shows instead of a stored secret. Sending it back to a setter keeps the secret.
pub const MASKED: &str = "********";

/// Object storage (S3-compatible) settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct S3Info {
    pub enabled: bool,
    pub endpoint: String,
    pub access_key: String,
    pub secret: String,
    pub bucket: String,
    pub region: String,
    pub acl: String,
    pub path_prefix: String,
    pub force_path_style: bool,
}

/// The storage settings. Field names are the persisted keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageSettings {
    pub s3: S3Info,
}
