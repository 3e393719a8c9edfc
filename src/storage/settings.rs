//! The object storage section of the settings (`config::StorageSettings`): its setter
//! (`/api/admin/config/s3`) and its part (`s3`, the secret masked) of the admin server configuration.

use std::sync::Arc;

use serde::Serialize;
use utoipa::ToSchema;

use super::Storage;
use crate::config::validate::{self, url_re};
use crate::config::{S3Info, Settings, MASKED};
use crate::http::setters::{self, set, Setter};
use crate::http::{Registry, ValueDoc};

const S3: &str = concat!(
    r#"{"type":"object","properties":{"enabled":{"type":"boolean"},"endpoint":{"type":"string"},
  "accessKey":{"type":"string"},"secret":{"type":"string"},"bucket":{"type":"string"},"region":{"type":"string"},
  "acl":{"type":"string"},"pathPrefix":{"type":"string"},"forcePathStyle":{"type":"boolean"}},
  "anyOf":[{"properties":{"enabled":{"const":false}}},
    {"required":["endpoint","bucket","accessKey","secret"],"properties":{"endpoint":{"pattern":"^"#,
    url_re!(),
    r#"$"},
      "bucket":{"pattern":"\\S"},"accessKey":{"minLength":1},"secret":{"minLength":1}}}]}"#
);

/// The storage setter, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Storage>] =
    &[Setter::new("s3", "Object storage settings", ValueDoc::Json(S3), |_, v, s| {
        let mut next = validate::s3(v)?;
        if next.secret == MASKED {
            next.secret = s.storage.s3.secret.clone();
        }
        set(&mut s.storage.s3, Ok(next))
    })];

/// The storage setter route.
pub fn routes(reg: &mut Registry, storage: Arc<Storage>) {
    setters::register(reg, storage, SETTERS);
}

/// Storage's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageConfigPart {
    /// The storage settings, the secret masked.
    pub s3: S3Info,
}

/// Storage's part of the admin server configuration: the settings with the secret masked.
pub fn server_config(s: &Settings) -> StorageConfigPart {
    let s3 = &s.storage.s3;
    let secret = if s3.secret.is_empty() { "" } else { MASKED };
    StorageConfigPart { s3: S3Info { secret: secret.to_string(), ..s3.clone() } }
}
