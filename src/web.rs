//! The web UI: the Vite build in `web/dist`, embedded into the binary and served at the viewer,
//! admin and embed paths, with its assets and the social platform icons (`/img/platformlogos/`). `make` builds `web/dist` before cargo; when it is missing (a bare
//! `cargo build`), the pages answer with a short note saying how to build them.
//!
//! Each page carries the page policy of `http::headers` (script only from castd's own files): the admin
//! pages may not be framed; the viewer page and the embeds may be, by any site, as Owncast's are.
//!
//! Every file is answered through `http::files` (strong `ETag` from the embedded SHA-256,
//! `Last-Modified`, 304, Range, HEAD). The build writes brotli and gzip copies next to each text file
//! (`web/vite.config.ts`); the copy the browser's `Accept-Encoding` allows is sent as it is, with
//! `Content-Encoding` and `Vary: Accept-Encoding`, so nothing is compressed per request.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::Path;
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
/// The `Link` header of the viewer page (the paths of the indieauth feature's routes).
const INDIEAUTH_LINKS: &str = concat!(
    r#"</.well-known/oauth-authorization-server>; rel="indieauth-metadata", "#,
    r#"</api/auth/provider/indieauth>; rel="authorization_endpoint", "#,
    r#"</api/auth/indieauth/callback>; rel="redirect_uri""#
);

pub fn routes(reg: &mut Registry) {
    let mut reg = reg.scope(());
    reg.get("/", GROUP, Auth::Public, "Viewer page", |h: HeaderMap| async move {
        // Framable by anyone, as Owncast's viewer page is (sites embed the whole page).
        let mut resp = page(h, "index.html", Framing::Anyone).await;
        // IndieAuth discovery: this server's URL is the streamer's identity (its authorization
        // endpoint), and its own sign-in callback is the redirect URI it uses as a client.
        resp.headers_mut().insert(header::LINK, axum::http::HeaderValue::from_static(INDIEAUTH_LINKS));
        resp
    })
    .answers(HTML);
    // 301 as Owncast answers (axum's `Redirect::permanent` is a 308).
    reg.get("/admin", GROUP, Auth::Public, "Redirect (301) to /admin/", || async {
        (StatusCode::MOVED_PERMANENTLY, [(LOCATION, "/admin/")])
    })
    .answers(ResponseDoc::Redirect(301, "To /admin/"));
    reg.get("/admin/", GROUP, Auth::Admin, "Admin dashboard", |h: HeaderMap| page(h, "admin.html", Framing::Nobody))
        .answers(HTML);
    reg.get("/admin/{*page}", GROUP, Auth::Admin, "Admin dashboard pages", |_: Path<String>, h: HeaderMap| {
        page(h, "admin.html", Framing::Nobody)
    })
    .answers(HTML);
    let to_readonly = ResponseDoc::Redirect(307, "To /embed/chat/readonly");
    reg.get("/embed/chat", GROUP, Auth::Public, "Redirect to the read-only chat embed", || async {
        Redirect::temporary("/embed/chat/readonly")
    })
    .answers(to_readonly);
    reg.get("/embed/chat/", GROUP, Auth::Public, "Redirect to the read-only chat embed", || async {
        Redirect::temporary("/embed/chat/readonly")
    })
    .answers(to_readonly);
    reg.get("/embed/chat/readonly", GROUP, Auth::Public, "Read-only chat embed", |h: HeaderMap| {
        page(h, "embed-chat-readonly.html", Framing::Anyone)
    })
    .answers(HTML);
    reg.get("/embed/chat/readwrite", GROUP, Auth::Public, "Read-write chat embed", |h: HeaderMap| {
        page(h, "embed-chat-readwrite.html", Framing::Anyone)
    })
    .answers(HTML);
    reg.get("/embed/video", GROUP, Auth::Public, "Video embed", |h: HeaderMap| {
        page(h, "embed-video.html", Framing::Anyone)
    })
    .answers(HTML);
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

/// A page of the web UI under the page policy (`http::headers`), framable as `framing` says.
async fn page(headers: HeaderMap, name: &'static str, framing: Framing) -> Response {
    if Dist::get(name).is_none() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "castd was built without its web UI: run `make build` (it builds web/dist before cargo).\n",
        )
            .into_response();
    }
    let mut resp = asset_response(&headers, name, "no-cache");
    Page::new(framing).apply(&mut resp);
    resp
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
