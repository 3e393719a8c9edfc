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
            let saved = &s.storage.s3;
            if !same_account(&next, saved) {
                return Err(crate::config::validate::ValidationError(
                    "the secret is shown masked; enter it again for a new endpoint or access key (the saved \
                     secret is only used with the endpoint and access key it was saved with)"
                        .into(),
                ));
            }
            next.secret = saved.secret.clone();
        }
        set(&mut s.storage.s3, Ok(next))
    })];

/// Whether `next` names the account the saved secret belongs to: the same endpoint (case and a trailing
/// slash aside) and access key. A masked secret is kept only then, so the saved secret never signs
/// requests to another host.
pub fn same_account(next: &S3Info, saved: &S3Info) -> bool {
    let endpoint = |e: &str| e.trim().trim_end_matches('/').to_ascii_lowercase();
    endpoint(&next.endpoint) == endpoint(&saved.endpoint) && next.access_key.trim() == saved.access_key.trim()
}

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
