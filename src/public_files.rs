//! The public files directory: `GET /public/<path>` serves the files the owner puts in
//! `<data-dir>/public` (created at start), including files added while castd runs, as Owncast does.
//!
//! Safety: the request path is taken apart into plain names; an empty name, `.`/`..`, a hidden name
//! (starting with `.`), a backslash or a NUL is a 404. The resolved file must still lie inside the
//! (canonical) public directory after following symlinks, so a link cannot reach out of it, and it
//! must be a regular file. Anything missing is a JSON 404.
//!
//! The content type: on the default channel (the server admin's files) it is guessed from the
//! extension, as Owncast does. On any other channel (a tenant's files) it comes from a fixed
//! allow-list of inert types ([`tenant_content_type`]: images, audio, video, fonts, plain text, PDF),
//! anything else `application/octet-stream` served as an attachment: never HTML, XML or script, so with
//! `nosniff` no browser runs a channel's file as a page, a script or a worker in castd's origin. An
//! SVG is served as an image, and every file carries the upload sandbox (`http::headers`).
//!
//! State: [`PublicFiles`] (the directory).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::http::{ApiError, Auth, Registry, ResponseDoc};

/// The public files feature's state.
pub struct PublicFiles {
    dir: PathBuf,
    /// A channel's (a tenant's) files: types from the allow-list only.
    tenant: bool,
}

impl PublicFiles {
    /// Create `dir` if needed.
    pub fn open(dir: PathBuf) -> Result<Arc<Self>, std::io::Error> {
        Self::open_for(dir, false)
    }

    /// Create `dir` if needed; `tenant`: the files are a channel's (not the default channel's), served
    /// with a type from the allow-list only (see the module doc).
    pub fn open_for(dir: PathBuf, tenant: bool) -> Result<Arc<Self>, std::io::Error> {
        std::fs::create_dir_all(&dir)?;
        Ok(Arc::new(Self { dir, tenant }))
    }

    /// The file `rel` names inside the directory, if it is a safe name of an existing regular file.
    pub async fn resolve(&self, rel: &str) -> Option<PathBuf> {
        let mut path = self.dir.clone();
        for part in rel.split('/') {
            if !safe_name(part) {
                return None;
            }
            path.push(part);
        }
        let root = tokio::fs::canonicalize(&self.dir).await.ok()?;
        let real = tokio::fs::canonicalize(&path).await.ok()?;
        if !real.starts_with(&root) || !tokio::fs::metadata(&real).await.ok()?.is_file() {
            return None;
        }
        Some(real)
    }
}

/// A plain, visible file or directory name.
fn safe_name(part: &str) -> bool {
    !part.is_empty() && !part.starts_with('.') && !part.contains(['\\', '\0'])
}

/// The content type of a file from its extension.
fn content_type(path: &Path) -> String {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    match mime.type_() {
        mime_guess::mime::TEXT if mime.get_param("charset").is_none() => format!("{mime}; charset=utf-8"),
        _ => mime.to_string(),
    }
}

/// The content type of a channel's file: from a fixed allow-list of types no browser runs as a page
/// or script, by extension; `None` for anything else (served as `application/octet-stream`, an
/// attachment).
fn tenant_content_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "ico" => "image/x-icon",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" => "audio/ogg",
        "wav" => "audio/wav",
        "m4a" => "audio/mp4",
        "mp4" | "m4v" => "video/mp4",
        "webm" => "video/webm",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "txt" | "md" => "text/plain; charset=utf-8",
        "vtt" => "text/vtt; charset=utf-8",
        "pdf" => "application/pdf",
        _ => return None,
    })
}

const GROUP: &str = "public";

pub fn routes(reg: &mut Registry, files: Arc<PublicFiles>) {
    let mut reg = reg.scope(files);
    reg.get("/public/{*path}", GROUP, Auth::Public, "A file from the data dir's public folder", serve)
        // The owner's files: each one's own media type.
        .answers(ResponseDoc::Content("*/*"));
}

async fn serve(State(files): State<Arc<PublicFiles>>, UrlPath(rel): UrlPath<String>) -> Response {
    let not_found = || ApiError::NotFound(format!("no such file: /public/{rel}")).into_response();
    let Some(path) = files.resolve(&rel).await else { return not_found() };
    let Ok(bytes) = tokio::fs::read(&path).await else { return not_found() };
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    if !files.tenant {
        if let Ok(v) = HeaderValue::from_str(&content_type(&path)) {
            h.insert(header::CONTENT_TYPE, v);
        }
    } else if let Some(t) = tenant_content_type(&path) {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(t));
    } else {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_plain_names_inside_the_folder_resolve() {
        let tmp = tempfile::tempdir().unwrap();
        let files = PublicFiles::open(tmp.path().join("public")).unwrap();
        std::fs::create_dir_all(tmp.path().join("public/sub")).unwrap();
        std::fs::write(tmp.path().join("public/sub/a.txt"), "a").unwrap();
        std::fs::write(tmp.path().join("public/.secret"), "s").unwrap();
        std::fs::write(tmp.path().join("outside.txt"), "o").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside.txt"), tmp.path().join("public/link.txt")).unwrap();
        assert!(files.resolve("sub/a.txt").await.is_some());
        for bad in ["../outside.txt", "sub/../sub/a.txt", ".secret", "sub//a.txt", "link.txt", "sub", "missing"] {
            assert!(files.resolve(bad).await.is_none(), "{bad}");
        }
    }

    #[test]
    fn a_tenants_files_are_never_pages_or_scripts() {
        for (name, want) in [
            ("a.png", Some("image/png")),
            ("a.SVG", Some("image/svg+xml")),
            ("a.txt", Some("text/plain; charset=utf-8")),
        ] {
            assert_eq!(tenant_content_type(Path::new(name)), want, "{name}");
        }
        for name in ["a.html", "a.htm", "a.js", "a.mjs", "a.xml", "a.xhtml", "a.css", "a.json", "a.wasm", "a", "a.svgz"]
        {
            assert_eq!(tenant_content_type(Path::new(name)), None, "{name}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(Path::new("a.txt")), "text/plain; charset=utf-8");
        assert_eq!(content_type(Path::new("a.png")), "image/png");
        assert_eq!(content_type(Path::new("a.unknownext")), "application/octet-stream");
    }
}
