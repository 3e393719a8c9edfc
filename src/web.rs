//! The web UI: the Vite build in `web/dist`, embedded into the binary and served at the viewer,
//! admin and embed paths, with its assets and the social platform icons (`/img/platformlogos/`). `make` builds `web/dist` before cargo; when it is missing (a bare
//! `cargo build`), the pages answer with a short note saying how to build them.
//!
//! Each page carries the page policy of `http::headers` (script only from castd's own files): the admin
//! pages may not be framed; the viewer page and the embeds may be, by any site, as Owncast's are.
//!
//! Channels: every channel's router serves these pages (`/c/{slug}/`, `/c/{slug}/admin/`, ...), built by
//! [`routes`] with the channel's base path (`/c/{slug}`; empty for the default channel). A channel's pages
//! carry it as `<meta name="castd-base" content="/c/{slug}">` right after `<head>` (the web app prefixes
//! every request with it: `web/src/lib/base.ts`); the default channel's pages are the build's files as they
//! are. The assets (`/assets/...`) stay at the root for every channel. The directory page `/channels`
//! (`channels.html`, reading `GET /api/channels`) is the default channel's alone.
//!
//! Every file is answered through `http::files` (strong `ETag` from the embedded SHA-256,
//! `Last-Modified`, 304, Range, HEAD). The build writes brotli and gzip copies next to each text file
//! (`web/vite.config.ts`); the copy the browser's `Accept-Encoding` allows is sent as it is, with
//! `Content-Encoding` and `Vary: Accept-Encoding`, so nothing is compressed per request.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use rust_embed::{EmbeddedFile, RustEmbed};

use crate::http::files::{accepts_encoding, respond, FileBody};
use crate::http::headers::{Framing, Page};
use crate::http::{Auth, Registry, ResponseDoc};

#[derive(RustEmbed)]
#[folder = "web/dist"]
#[allow_missing = true]
struct Dist;

const GROUP: &str = "web";
/// The `Link` header of the viewer page (the paths of the indieauth feature's routes), under `base`.
fn indieauth_links(base: &str) -> String {
    format!(
        r#"<{base}/.well-known/oauth-authorization-server>; rel="indieauth-metadata", <{base}/api/auth/provider/indieauth>; rel="authorization_endpoint", <{base}/api/auth/indieauth/callback>; rel="redirect_uri""#
    )
}

/// What the pages of one channel need: its base path (`""` or `/c/{slug}`).
#[derive(Clone)]
struct Web {
    base: Arc<str>,
}

/// The web UI's routes for the channel whose pages are under `base`: `""` for the default channel (the
/// root), `/c/{slug}` for another (its router sees `/`, `/admin/`, ... with the prefix taken off; the
/// pages and redirects carry the prefix). The directory page `/channels` only for the default channel.
pub fn routes(reg: &mut Registry, base: &str) {
    let mut reg = reg.scope(Web { base: Arc::from(base.trim_end_matches('/')) });
    reg.get("/", GROUP, Auth::Public, "Viewer page", |State(w): State<Web>, h: HeaderMap| async move {
        // Framable by anyone, as Owncast's viewer page is (sites embed the whole page).
        let mut resp = page(&w, h, "index.html", Framing::Anyone).await;
        // IndieAuth discovery: this server's URL is the streamer's identity (its authorization
        // endpoint), and its own sign-in callback is the redirect URI it uses as a client.
        if let Ok(links) = axum::http::HeaderValue::from_str(&indieauth_links(&w.base)) {
            resp.headers_mut().insert(header::LINK, links);
        }
        resp
    })
    .answers(HTML);
    // 301 as Owncast answers (axum's `Redirect::permanent` is a 308).
    reg.get("/admin", GROUP, Auth::Public, "Redirect (301) to /admin/", |State(w): State<Web>| async move {
        (StatusCode::MOVED_PERMANENTLY, [(LOCATION, format!("{}/admin/", w.base))])
    })
    .answers(ResponseDoc::Redirect(301, "To /admin/"));
    reg.get("/admin/", GROUP, Auth::Admin, "Admin dashboard", |State(w): State<Web>, h: HeaderMap| async move {
        page(&w, h, "admin.html", Framing::Nobody).await
    })
    .answers(HTML);
    reg.get(
        "/admin/{*page}",
        GROUP,
        Auth::Admin,
        "Admin dashboard pages",
        |State(w): State<Web>, _: Path<String>, h: HeaderMap| async move {
            page(&w, h, "admin.html", Framing::Nobody).await
        },
    )
    .answers(HTML);
    let to_readonly = ResponseDoc::Redirect(307, "To /embed/chat/readonly");
    reg.get(
        "/embed/chat",
        GROUP,
        Auth::Public,
        "Redirect to the read-only chat embed",
        |State(w): State<Web>| async move { Redirect::temporary(&format!("{}/embed/chat/readonly", w.base)) },
    )
    .answers(to_readonly);
    reg.get(
        "/embed/chat/",
        GROUP,
        Auth::Public,
        "Redirect to the read-only chat embed",
        |State(w): State<Web>| async move { Redirect::temporary(&format!("{}/embed/chat/readonly", w.base)) },
    )
    .answers(to_readonly);
    reg.get(
        "/embed/chat/readonly",
        GROUP,
        Auth::Public,
        "Read-only chat embed",
        |State(w): State<Web>, h: HeaderMap| async move { page(&w, h, "embed-chat-readonly.html", Framing::Anyone).await },
    )
    .answers(HTML);
    reg.get(
        "/embed/chat/readwrite",
        GROUP,
        Auth::Public,
        "Read-write chat embed",
        |State(w): State<Web>, h: HeaderMap| async move { page(&w, h, "embed-chat-readwrite.html", Framing::Anyone).await },
    )
    .answers(HTML);
    reg.get("/embed/video", GROUP, Auth::Public, "Video embed", |State(w): State<Web>, h: HeaderMap| async move {
        page(&w, h, "embed-video.html", Framing::Anyone).await
    })
    .answers(HTML);
    if base.is_empty() {
        reg.get(
            "/channels",
            GROUP,
            Auth::Public,
            "Directory of the channels",
            |State(w): State<Web>, h: HeaderMap| async move { page(&w, h, "channels.html", Framing::Anyone).await },
        )
        .answers(HTML);
    }
    reg.get("/serviceworker.js", GROUP, Auth::Public, "Push notification service worker", |h: HeaderMap| async move {
        asset_response(&h, "serviceworker.js", "no-cache")
    })
    .answers(ResponseDoc::Content("text/javascript"));
    // Scripts, styles, fonts and images of the build: each file's own media type.
    reg.get("/assets/{*file}", GROUP, Auth::Public, "Web UI assets", |Path(file): Path<String>, h: HeaderMap| async move {
        asset_response(&h, &format!("assets/{file}"), IMMUTABLE)
    })
    .answers(ResponseDoc::Content("*/*"));
    reg.get(
        "/img/platformlogos/{file}",
        GROUP,
        Auth::Public,
        "A social platform icon (SVG)",
        |Path(file): Path<String>, h: HeaderMap| async move {
            // Only the icons themselves: a plain `<key>.svg` name (a decoded `%2F` cannot reach further).
            if !file.ends_with(".svg") || file.contains(['/', '\\']) || file.starts_with('.') {
                return crate::http::ApiError::NotFound(format!("no such icon: {file}")).into_response();
            }
            asset_response(&h, &format!("img/platformlogos/{file}"), "public, max-age=86400")
        },
    )
    .answers(ResponseDoc::Content("image/svg+xml"));
}

/// The pages' answer.
const HTML: ResponseDoc = ResponseDoc::Content("text/html");

/// `Cache-Control` of the hashed asset names Vite writes (a new build has new names).
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// A page of the web UI under the page policy (`http::headers`), framable as `framing` says; a channel's
/// carries its base path (see the module doc).
async fn page(web: &Web, headers: HeaderMap, name: &'static str, framing: Framing) -> Response {
    if Dist::get(name).is_none() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "castd was built without its web UI: run `make build` (it builds web/dist before cargo).\n",
        )
            .into_response();
    }
    let mut resp = if web.base.is_empty() {
        asset_response(&headers, name, "no-cache")
    } else {
        channel_page(&headers, name, &web.base)
    };
    Page::new(framing).apply(&mut resp);
    resp
}

/// The `<meta>` that tells the web app its channel's base path.
fn base_meta(base: &str) -> String {
    let escaped = base.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;");
    format!(r#"<meta name="castd-base" content="{escaped}">"#)
}

/// `html` with the base `<meta>` right after `<head>` (at the very start when there is no `<head>`).
fn with_base(html: &str, base: &str) -> String {
    let meta = base_meta(base);
    match html.find("<head>") {
        Some(at) => {
            let end = at + "<head>".len();
            format!("{}{meta}{}", &html[..end], &html[end..])
        }
        None => format!("{meta}{html}"),
    }
}

/// A page of a channel other than the default: the embedded file with the base `<meta>`, sent as it is
/// (a page is a kilobyte; the precompressed copies are the file's without the meta).
fn channel_page(req: &HeaderMap, name: &str, base: &str) -> Response {
    let Some(file) = Dist::get(name) else {
        return crate::http::ApiError::NotFound(format!("no such file: {name}")).into_response();
    };
    let modified = modified(&file);
    let hash: String = file.metadata.sha256_hash()[..12].iter().map(|b| format!("{b:02x}")).collect();
    // The validator names the channel too: each channel's page is its own representation.
    let etag = format!("\"{hash}-{}\"", base.trim_start_matches('/').replace('/', "."));
    let html = with_base(&String::from_utf8_lossy(&file.data), base);
    let body = FileBody::new(Bytes::from(html), etag, modified, mime_for(name), "no-cache");
    respond(req, &body)
}

/// The embedded file `path` (or its precompressed copy the request accepts) as a `FileBody` answer.
fn asset_response(req: &HeaderMap, path: &str, cache: &'static str) -> Response {
    // rust-embed only knows the files it embedded, so `..` cannot escape the folder.
    let Some(file) = Dist::get(path) else {
        return crate::http::ApiError::NotFound(format!("no such file: {path}")).into_response();
    };
    let accept = req.get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok());
    let mut chosen = None;
    for (coding, ext) in [("br", "br"), ("gzip", "gz")] {
        if accepts_encoding(accept, coding) {
            if let Some(copy) = Dist::get(&format!("{path}.{ext}")) {
                chosen = Some((coding, copy));
                break;
            }
        }
    }
    let compressible = chosen.is_some() || Dist::get(&format!("{path}.gz")).is_some();
    let content_type = mime_for(path);
    let modified = modified(&file);
    let body = match chosen {
        Some((coding, copy)) => file_body(copy, Some(coding), content_type, cache, modified).negotiated(Some(coding)),
        None if compressible => file_body(file, None, content_type, cache, modified).negotiated(None),
        None => file_body(file, None, content_type, cache, modified),
    };
    respond(req, &body)
}

fn file_body(
    file: EmbeddedFile,
    coding: Option<&str>,
    content_type: &'static str,
    cache: &'static str,
    modified: SystemTime,
) -> FileBody {
    // A strong validator per representation: the hash of the bytes sent, marked with the coding.
    let hash: String = file.metadata.sha256_hash()[..12].iter().map(|b| format!("{b:02x}")).collect();
    let etag = match coding {
        Some(c) => format!("\"{hash}-{c}\""),
        None => format!("\"{hash}\""),
    };
    let bytes = match file.data {
        std::borrow::Cow::Borrowed(b) => Bytes::from_static(b),
        std::borrow::Cow::Owned(v) => Bytes::from(v),
    };
    FileBody::new(bytes, etag, modified, content_type, cache)
}

/// When the embedded file was built (rust-embed records it; the process start otherwise).
fn modified(file: &EmbeddedFile) -> SystemTime {
    match file.metadata.last_modified() {
        Some(secs) => UNIX_EPOCH + Duration::from_secs(secs),
        None => *STARTED,
    }
}

static STARTED: std::sync::LazyLock<SystemTime> = std::sync::LazyLock::new(SystemTime::now);

/// Content types of what the web build contains.
fn mime_for(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json" | "map") => "application/json",
        Some("webmanifest") => "application/manifest+json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        Some("woff") => "font/woff",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Whether this binary carries the web UI.
/// The text of an embedded page (`clip.html`), for features that fill in its `<head>` (the clip page's
/// OpenGraph tags); `None` when the UI was not built in.
pub fn page_text(name: &str) -> Option<String> {
    Dist::get(name).map(|f| String::from_utf8_lossy(&f.data).into_owned())
}

pub fn embedded() -> bool {
    Dist::get("index.html").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_meta_goes_right_after_head() {
        let html = "<!doctype html><html><head><meta charset=\"utf-8\"></head><body></body></html>";
        assert_eq!(
            with_base(html, "/c/music"),
            "<!doctype html><html><head><meta name=\"castd-base\" content=\"/c/music\"><meta charset=\"utf-8\"></head><body></body></html>"
        );
        assert!(with_base("<p>x</p>", "/c/a").starts_with("<meta name=\"castd-base\" content=\"/c/a\">"));
        assert_eq!(base_meta("/c/\"><script>"), r#"<meta name="castd-base" content="/c/&quot;&gt;&lt;script&gt;">"#);
    }

    #[test]
    fn indieauth_links_are_under_the_base() {
        assert!(indieauth_links("").starts_with("</.well-known/oauth-authorization-server>"));
        assert!(indieauth_links("/c/a").contains("</c/a/api/auth/indieauth/callback>; rel=\"redirect_uri\""));
    }
}
