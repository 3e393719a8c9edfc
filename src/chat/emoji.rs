//! Custom emoji: upload (base64 JSON), delete, list, and serving under `/img/emoji/`.
//!
//! Files live in `<data-dir>/emoji/`. A name is reduced to its last path component and to the
//! characters `[A-Za-z0-9_-]`, so no name can point outside that directory; the extension comes from
//! the detected image type (PNG, GIF, JPEG or WebP — SVG is refused because it can carry script), and
//! uploads are limited to `MAX_EMOJI_BYTES`.

use std::path::{Path, PathBuf};

use axum::extract::{Path as UrlPath, State};

use super::Chat;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Serialize;

/// Largest emoji image accepted.
pub const MAX_EMOJI_BYTES: usize = 512 * 1024;
/// URL prefix of emoji images.
pub const URL_PREFIX: &str = "/img/emoji/";

/// Errors of emoji handling.
#[derive(Debug, thiserror::Error)]
pub enum EmojiError {
    #[error("emoji name must contain letters, digits, '-' or '_'")]
    BadName,
    #[error("emoji data is not valid base64")]
    BadBase64,
    #[error("emoji must be a PNG, GIF, JPEG or WebP image")]
    BadType,
    #[error("emoji image is too large (at most {} KB)", MAX_EMOJI_BYTES / 1024)]
    TooLarge,
    #[error("emoji not found")]
    NotFound,
    #[error("emoji storage: {0}")]
    Io(#[from] std::io::Error),
}

/// One emoji as `GET /api/emoji` lists it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Emoji {
    pub name: String,
    pub url: String,
}

pub fn dir(ctx: &Chat) -> PathBuf {
    ctx.emoji_dir.clone()
}

/// The safe stem of a requested name: last path component, extension dropped, only `[A-Za-z0-9_-]`.
pub fn sanitize_name(name: &str) -> Result<String, EmojiError> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let stem = match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric()) => stem,
        _ => base,
    };
    let clean: String = stem.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').take(64).collect();
    if clean.is_empty() {
        return Err(EmojiError::BadName);
    }
    Ok(clean)
}

/// The extension of a supported image, by its magic bytes.
pub fn image_ext(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("png")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("gif")
    } else if data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("jpg")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("webp")
    } else {
        None
    }
}

fn content_type(ext: &str) -> &'static str {
    match ext {
        "png" => "image/png",
        "gif" => "image/gif",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        _ => "application/octet-stream",
    }
}

/// Decode base64, accepting a `data:image/...;base64,` prefix.
pub fn decode(data: &str) -> Result<Vec<u8>, EmojiError> {
    let data = match data.split_once(";base64,") {
        Some((prefix, rest)) if prefix.starts_with("data:") => rest,
        _ => data,
    };
    if data.len() > MAX_EMOJI_BYTES / 3 * 4 + 8 {
        return Err(EmojiError::TooLarge);
    }
    let compact: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(compact).map_err(|_| EmojiError::BadBase64)
}

fn files_with_stem(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    rd.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_stem().and_then(|s| s.to_str()) == Some(stem))
        .collect()
}

/// Store an emoji; returns its file name.
pub async fn upload(ctx: &Chat, name: &str, data: &str) -> Result<String, EmojiError> {
    let stem = sanitize_name(name)?;
    let bytes = decode(data)?;
    if bytes.len() > MAX_EMOJI_BYTES {
        return Err(EmojiError::TooLarge);
    }
    let ext = image_ext(&bytes).ok_or(EmojiError::BadType)?;
    let dir = dir(ctx);
    let file = format!("{stem}.{ext}");
    let f2 = file.clone();
    tokio::task::spawn_blocking(move || -> Result<(), EmojiError> {
        std::fs::create_dir_all(&dir)?;
        for old in files_with_stem(&dir, &stem) {
            std::fs::remove_file(old)?;
        }
        let tmp = dir.join(format!(".{f2}.tmp"));
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, dir.join(&f2))?;
        Ok(())
    })
    .await
    .map_err(|e| EmojiError::Io(std::io::Error::other(e.to_string())))??;
    Ok(file)
}

/// Delete an emoji given its name, file name or URL.
pub async fn delete(ctx: &Chat, name: &str) -> Result<(), EmojiError> {
    let stem = sanitize_name(name)?;
    let files = files_with_stem(&dir(ctx), &stem);
    if files.is_empty() {
        return Err(EmojiError::NotFound);
    }
    for f in files {
        tokio::fs::remove_file(f).await?;
    }
    Ok(())
}

/// Every custom emoji, by name.
pub async fn list(ctx: &Chat) -> Vec<Emoji> {
    let dir = dir(ctx);
    let prefix = format!("{}{URL_PREFIX}", ctx.base_path);
    let mut v: Vec<Emoji> = tokio::task::spawn_blocking(move || {
        let Ok(rd) = std::fs::read_dir(&dir) else { return Vec::new() };
        rd.filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|f| !f.starts_with('.'))
            .filter_map(|f| {
                let (stem, _) = f.rsplit_once('.')?;
                Some(Emoji { name: stem.to_string(), url: format!("{prefix}{f}") })
            })
            .collect()
    })
    .await
    .unwrap_or_default();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// `GET /img/emoji/{file}`.
pub async fn serve(State(ctx): State<std::sync::Arc<Chat>>, UrlPath(file): UrlPath<String>) -> Response {
    let not_found = || crate::http::ApiError::NotFound("emoji not found".into()).into_response();
    let Some((stem, ext)) = file.rsplit_once('.') else { return not_found() };
    if sanitize_name(stem).ok().as_deref() != Some(stem) || !ext.chars().all(|c| c.is_ascii_alphanumeric()) {
        return not_found();
    }
    match tokio::fs::read(dir(&ctx).join(&file)).await {
        Ok(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, content_type(ext)), (header::CACHE_CONTROL, "public, max-age=3600")],
            bytes,
        )
            .into_response(),
        Err(_) => not_found(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape() {
        assert_eq!(sanitize_name("party").unwrap(), "party");
        assert_eq!(sanitize_name("party.png").unwrap(), "party");
        assert_eq!(sanitize_name("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(sanitize_name("/img/emoji/blob-cat.gif").unwrap(), "blob-cat");
        assert_eq!(sanitize_name("a b<c>").unwrap(), "abc");
        assert!(sanitize_name("..").is_err());
        assert!(sanitize_name("").is_err());
    }

    #[test]
    fn types() {
        assert_eq!(image_ext(b"\x89PNG\r\n\x1a\nrest"), Some("png"));
        assert_eq!(image_ext(b"GIF89a..."), Some("gif"));
        assert_eq!(image_ext(b"<svg onload=alert(1)>"), None);
        assert_eq!(decode("data:image/png;base64,aGk=").unwrap(), b"hi");
        assert!(decode("!!!").is_err());
    }
}
