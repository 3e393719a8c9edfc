//! Object storage (S3-compatible): offloading every channel's live segments and playlists to a bucket,
//! and the admin "Test connection" route (`POST /api/admin/storage/test`).
//!
//! Owns: the S3 client built from the server admin's `s3` settings (`client`), the uploader
//! (`uploader`: the server-wide [`Storage`] — settings, bucket, HTTP client, a shared bounded upload
//! pool — and one [`ChannelStorage`] per channel stack, the default's and each channel's: one task per
//! variant plus one for the master playlist, batch deletes of segments that left the live window,
//! removal of the channel's leftovers at start-up and of a deleted channel's live objects), the
//! playlists castd serves with segment URIs on the bucket or the `videoServingEndpoint` CDN (each
//! channel's given to its `hls` as a `PlaylistOverride`), each channel's health notice (its health hub)
//! and the server's figures (the server's telemetry → the root's server-wide `castd_storage_*`,
//! every channel's objects counted).
//!
//! Storage settings are the server's: one bucket, one `pathPrefix`, one `videoServingEndpoint` for
//! every channel (a channel's API has no setter for them). Each channel has a folder of its own under
//! the prefix: the default channel's live stream is under `<pathPrefix>hls/` and its replays under
//! `<pathPrefix>replays/` (where they always were), channel `{slug}`'s under `<pathPrefix>c/{slug}/hls/`
//! and `<pathPrefix>c/{slug}/replays/` (`uploader::channel_folder`); a channel's clean-up and deletes
//! never reach another's folder.
//!
//! A slow or failing store never blocks the transcoder: each uploader follows its channel's feed on the
//! media plane (what the worker wrote), holds each new segment on disk until it is uploaded (up to
//! `uploader::MAX_QUEUED` per variant), and keeps only the newest playlist revision waiting per variant
//! (a `watch`, latest wins); castd keeps serving the local playlists (relative URIs, segments from
//! memory or disk) while a variant's bucket copy is behind or failing, and says so in the channel's
//! health message and in Prometheus. Local segments are deleted by the media plane's retention once
//! released. At shutdown every channel's uploader uploads its stream's last segments and final
//! playlists (`ChannelStorage::drain`, all of them at once within the one drain limit).
//!
//! Private channels, each on its own: while a channel's visibility needs a viewing pass (password,
//! token), its stream is served from castd only: no playlist of it names the bucket (public bucket URLs
//! carry no pass), no new segment or playlist of it is uploaded, and its segments already in the bucket
//! still leave it as retention retires them. The local live window is the media plane's either way.
//! Unlisted channels use the bucket as public ones do.
//!
//! Credentials: the secret is only ever used to sign; it is not logged, and error messages never
//! contain a presigned URL.

pub mod client;
pub mod playlist;
pub mod settings;
pub mod uploader;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use serde_json::Value;

use crate::config::S3Info;
use crate::http::{ApiError, Auth, BodyDoc, Registry, StatusResponse};

pub use uploader::{start, start_channel, ChannelDeps, ChannelStorage, Storage, StorageDeps};

/// Errors of the storage feature.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(transparent)]
    Client(#[from] client::ClientError),
    #[error("{0}")]
    Probe(String),
}

const GROUP: &str = "admin";

pub fn routes(reg: &mut Registry, state: Arc<Storage>) {
    settings::routes(reg, state.clone());
    let mut reg = reg.scope(state);
    reg.schema::<S3Info>();
    reg.route(
        axum::http::Method::POST,
        "/api/admin/storage/test",
        GROUP,
        Auth::Admin,
        "Test object storage: PUT, GET and DELETE a probe object with the given settings (S3Info, or \
         {value: S3Info}; fields left out, and a masked or empty secret, are the saved ones)",
        BodyDoc::Schema("S3Info"),
        test_connection,
    )
    .optional_body();
}

/// `MASKED` of the admin configuration: a secret made of `*` only is the saved one shown masked.
fn is_masked(secret: &str) -> bool {
    !secret.is_empty() && secret.chars().all(|c| c == '*')
}

/// The settings a test request names: the saved ones, overlaid with the fields the body gives (see the
/// route's summary).
fn settings_to_test(body: &[u8], saved: &S3Info) -> Result<S3Info, ApiError> {
    let mut merged = serde_json::to_value(saved).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut own_secret = false;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid JSON: {e}")))?;
        let v = match v {
            Value::Object(mut m) if m.contains_key("value") && m.len() == 1 => m.remove("value").unwrap_or_default(),
            other => other,
        };
        let Value::Object(fields) = v else {
            return Err(ApiError::bad("storage test: the body must be storage settings (S3Info) or empty"));
        };
        if let Value::Object(m) = &mut merged {
            for (k, v) in fields {
                let masked = k == "secret" && v.as_str().is_some_and(|s| s.is_empty() || is_masked(s));
                if k == "secret" && !masked {
                    own_secret = true;
                }
                if !masked {
                    m.insert(k, v);
                }
            }
        }
    }
    let s: S3Info = serde_json::from_value(merged).map_err(|e| ApiError::bad(format!("storage settings: {e}")))?;
    // The saved secret signs requests only to the endpoint, with the access key, it was saved with.
    if !own_secret && !settings::same_account(&s, saved) {
        return Err(ApiError::bad(
            "storage test: enter the secret for a new endpoint or access key (the saved one is only used with its own)",
        ));
    }
    if s.endpoint.trim().is_empty() || s.bucket.trim().is_empty() {
        return Err(ApiError::bad("storage test: an endpoint and a bucket are required"));
    }
    if s.access_key.trim().is_empty() || s.secret.is_empty() {
        return Err(ApiError::bad("storage test: accessKey and secret are required"));
    }
    Ok(s)
}

async fn test_connection(State(storage): State<Arc<Storage>>, body: Bytes) -> Result<Json<StatusResponse>, ApiError> {
    let saved = storage.settings().storage.s3.clone();
    let s = settings_to_test(&body, &saved)?;
    let client =
        client::S3Client::new(&s, storage.http()).map_err(|e| ApiError::bad(format!("storage test failed: {e}")))?;
    let started = Instant::now();
    let key =
        playlist::normalise_prefix(&s.path_prefix) + &format!("castd-probe-{}.txt", crate::password::random_token(12));
    match probe(&client, &key).await {
        Ok(()) => Ok(StatusResponse::ok(format!(
            "connected: PUT, GET and DELETE of {key} succeeded in {} ms",
            started.elapsed().as_millis()
        ))),
        Err(e) => {
            tracing::warn!("storage test failed: {e}");
            Err(ApiError::bad(format!("storage test failed: {e}")))
        }
    }
}

/// PUT, GET (same bytes back) and DELETE `key`.
async fn probe(client: &client::S3Client, key: &str) -> Result<(), StorageError> {
    let body = Bytes::from(format!("castd storage probe {}\n", chrono::Utc::now().to_rfc3339()));
    let meta = client::PutMeta { content_type: "text/plain", cache_control: "no-cache" };
    client.put(key, body.clone(), &meta).await?;
    let back = client.get(key).await?;
    if back != body {
        return Err(StorageError::Probe(format!(
            "GET returned {} bytes that differ from the {} bytes written",
            back.len(),
            body.len()
        )));
    }
    client.delete(key).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_settings_from_the_body_or_saved() {
        let saved = S3Info {
            enabled: true,
            endpoint: "http://127.0.0.1:9".into(),
            access_key: "k".into(),
            secret: "saved".into(),
            bucket: "b".into(),
            ..S3Info::default()
        };
        assert_eq!(settings_to_test(b"", &saved).unwrap(), saved);
        assert_eq!(settings_to_test(b"{}", &saved).unwrap(), saved);
        // The saved secret goes with its own endpoint and access key only.
        let body = br#"{"value":{"endpoint":"http://127.0.0.1:9/","accessKey":"k","secret":"********","bucket":"x"}}"#;
        let s = settings_to_test(body, &saved).unwrap();
        assert_eq!((s.bucket.as_str(), s.secret.as_str()), ("x", "saved"));
        let body = br#"{"value":{"endpoint":"http://h:1","accessKey":"a","secret":"********","bucket":"x"}}"#;
        assert!(settings_to_test(body, &saved).is_err(), "the saved secret is not used for another endpoint");
        let body = br#"{"value":{"endpoint":"http://h:1","accessKey":"a","secret":"new","bucket":"x"}}"#;
        assert_eq!(settings_to_test(body, &saved).unwrap().secret, "new");
        assert_eq!(settings_to_test(br#"{"bucket":"y"}"#, &saved).unwrap().bucket, "y");
        assert!(settings_to_test(br#"{"endpoint":""}"#, &saved).is_err());
        assert!(settings_to_test(br#"{"enabled":"yes"}"#, &saved).is_err());
        assert!(settings_to_test(b"null", &S3Info::default()).is_err());
        assert!(settings_to_test(b"{", &saved).is_err());
        assert!(settings_to_test(b"[1]", &saved).is_err());
    }
}
