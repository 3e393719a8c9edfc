//! The S3 client: SigV4-signed requests (`rusty-s3` signs presigned URLs, the reqwest client already in
//! the tree sends them over rustls), one object at a time with a per-request timeout, plus batch delete
//! and listing. Knows nothing of HLS; the uploader (`sync`) decides what goes where.
//!
//! Errors carry the store's own words (the `<Code>` and `<Message>` of its XML error body) so the
//! admin sees "SignatureDoesNotMatch: ..." rather than "403". Credentials never appear in an error,
//! a log line or a `Debug` output (the presigned URL's query is dropped from every message).

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use rusty_s3::actions::{ListObjectsV2, ObjectIdentifier};
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};

use crate::config::S3Info;

/// How long a presigned URL is valid (it is used at once).
const SIGN_FOR: Duration = Duration::from_secs(300);
/// Longest one request may take (connect, send, answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most keys one DeleteObjects request names (S3's limit).
const DELETE_BATCH: usize = 1000;

/// Errors of the S3 client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("storage settings: {0}")]
    Settings(String),
    #[error("{op}: cannot reach the storage: {message}")]
    Transport { op: &'static str, message: String },
    #[error("{op}: the storage answered {status}: {message}")]
    Status { op: &'static str, status: u16, message: String },
    #[error("{op}: unexpected answer: {message}")]
    Answer { op: &'static str, message: String },
}

impl ClientError {
    /// A retry may help (transport failures, 5xx, throttling); a 4xx other than 408/429 will not.
    pub fn retryable(&self) -> bool {
        match self {
            ClientError::Transport { .. } => true,
            ClientError::Status { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            _ => false,
        }
    }
}

/// A signed-request S3 client for one bucket.
pub struct S3Client {
    bucket: Bucket,
    credentials: Credentials,
    http: reqwest::Client,
    acl: Option<String>,
}

impl fmt::Debug for S3Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Client").field("bucket", &self.bucket.base_url().as_str()).finish_non_exhaustive()
    }
}

/// What one PUT carries besides its body.
pub struct PutMeta<'a> {
    pub content_type: &'a str,
    pub cache_control: &'a str,
}

impl S3Client {
    /// A client for the settings (`forcePathStyle` picks path-style URLs; an IP-address endpoint is
    /// always path style, as virtual hosts need a name).
    pub fn new(s: &S3Info, http: reqwest::Client) -> Result<Self, ClientError> {
        let endpoint: url::Url =
            s.endpoint.trim().parse().map_err(|e| ClientError::Settings(format!("endpoint: {e}")))?;
        let ip_host = matches!(endpoint.host(), Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)));
        let style = if s.force_path_style || ip_host { UrlStyle::Path } else { UrlStyle::VirtualHost };
        let region = if s.region.trim().is_empty() { "us-east-1".to_string() } else { s.region.trim().to_string() };
        let bucket = Bucket::new(endpoint, style, s.bucket.trim().to_string(), region)
            .map_err(|e| ClientError::Settings(format!("bucket: {e}")))?;
        let acl = Some(s.acl.trim().to_string()).filter(|a| !a.is_empty());
        Ok(Self { bucket, credentials: Credentials::new(s.access_key.trim(), s.secret.trim()), http, acl })
    }

    /// The public URL of `key` (no signature): where players and CDNs fetch it.
    pub fn object_url(&self, key: &str) -> String {
        self.bucket.object_url(key).to_string()
    }

    /// PUT `key` with its content type, cache policy and the configured ACL.
    pub async fn put(&self, key: &str, body: Bytes, meta: &PutMeta<'_>) -> Result<(), ClientError> {
        let mut action = self.bucket.put_object(Some(&self.credentials), key);
        action.headers_mut().insert("content-type", meta.content_type.to_string());
        action.headers_mut().insert("cache-control", meta.cache_control.to_string());
        if let Some(acl) = &self.acl {
            action.headers_mut().insert("x-amz-acl", acl.clone());
        }
        let url = action.sign(SIGN_FOR);
        let mut req = self
            .http
            .put(url)
            .header("content-type", meta.content_type)
            .header("cache-control", meta.cache_control)
            .body(body);
        if let Some(acl) = &self.acl {
            req = req.header("x-amz-acl", acl);
        }
        self.send("PUT", req).await.map(drop)
    }

    /// GET `key`'s body.
    pub async fn get(&self, key: &str) -> Result<Bytes, ClientError> {
        let url = self.bucket.get_object(Some(&self.credentials), key).sign(SIGN_FOR);
        self.send("GET", self.http.get(url)).await
    }

    /// DELETE one object.
    pub async fn delete(&self, key: &str) -> Result<(), ClientError> {
        let url = self.bucket.delete_object(Some(&self.credentials), key).sign(SIGN_FOR);
        self.send("DELETE", self.http.delete(url)).await.map(drop)
    }

    /// Delete `keys` with DeleteObjects (up to 1000 a request); returns how many the store deleted.
    pub async fn delete_batch(&self, keys: &[String]) -> Result<usize, ClientError> {
        let mut deleted = 0;
        for chunk in keys.chunks(DELETE_BATCH) {
            let ids: Vec<ObjectIdentifier> = chunk.iter().map(|k| ObjectIdentifier::new(k.clone())).collect();
            let mut action = self.bucket.delete_objects(Some(&self.credentials), ids.iter());
            action.set_quiet(true);
            let url = action.sign(SIGN_FOR);
            let (body, md5) = action.body_with_md5();
            let req = self.http.post(url).header("content-md5", md5).body(body);
            let answer = self.send("DeleteObjects", req).await?;
            let text = String::from_utf8_lossy(&answer);
            // Quiet mode lists only the keys that could not be deleted.
            let failed = text.matches("<Error>").count();
            deleted += chunk.len().saturating_sub(failed);
        }
        Ok(deleted)
    }

    /// Every key under `prefix` (follows continuation tokens).
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, ClientError> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
            action.with_prefix(prefix.to_string());
            if let Some(t) = &token {
                action.with_continuation_token(t.clone());
            }
            let url = action.sign(SIGN_FOR);
            let body = self.send("ListObjectsV2", self.http.get(url)).await?;
            let text = String::from_utf8_lossy(&body);
            let parsed = ListObjectsV2::parse_response(&text)
                .map_err(|e| ClientError::Answer { op: "ListObjectsV2", message: e.to_string() })?;
            keys.extend(parsed.contents.into_iter().map(|c| c.key));
            match parsed.next_continuation_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(keys),
            }
        }
    }

    async fn send(&self, op: &'static str, req: reqwest::RequestBuilder) -> Result<Bytes, ClientError> {
        let res = req
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| ClientError::Transport { op, message: transport_message(e) })?;
        let status = res.status();
        let body = res.bytes().await.map_err(|e| ClientError::Transport { op, message: transport_message(e) })?;
        if status.is_success() {
            return Ok(body);
        }
        Err(ClientError::Status { op, status: status.as_u16(), message: error_message(&body) })
    }
}

/// A reqwest error without its URL (the presigned query would name the access key).
fn transport_message(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// The `Code: Message` of an S3 XML error body, or a short excerpt of whatever came back.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&close)? + start;
        Some(text[start..end].trim().to_string())
    };
    match (tag("Code"), tag("Message")) {
        (Some(c), Some(m)) if !m.is_empty() => format!("{c}: {m}"),
        (Some(c), _) => c,
        _ if text.trim().is_empty() => "no details".to_string(),
        _ => text.chars().take(200).collect(),
    }
}
