//! The web UI: the Vite build in `web/dist`, embedded into the binary and served at the viewer,
//! admin and embed paths, with its assets and the social platform icons (`/img/platformlogos/`). `make` builds `web/dist` before cargo; when it is missing (a bare
//! `cargo build`), the pages answer with a short note saying how to build them.

use axum::extract::Path;
use axum::http::header::LOCATION;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use rust_embed::RustEmbed;

use crate::http::{Auth, Registry};

#[derive(RustEmbed)]
#[folder = "web/dist"]
#[allow_missing = true]
struct Dist;

const GROUP: &str = "web";

pub fn routes(reg: &mut Registry) {
    let mut reg = reg.scope(());
    reg.get("/", GROUP, Auth::Public, "Viewer page", || page("index.html"));
    // 301 as Owncast answers (axum's `Redirect::permanent` is a 308).
    reg.get("/admin", GROUP, Auth::Public, "Redirect (301) to /admin/", || async {
        (StatusCode::MOVED_PERMANENTLY, [(LOCATION, "/admin/")])
    });
    reg.get("/admin/", GROUP, Auth::Admin, "Admin dashboard", || page("admin.html"));
    reg.get("/admin/{*page}", GROUP, Auth::Admin, "Admin dashboard pages", |_: Path<String>| page("admin.html"));
    reg.get("/embed/chat", GROUP, Auth::Public, "Redirect to the read-only chat embed", || async {
        Redirect::temporary("/embed/chat/readonly")
    });
    reg.get("/embed/chat/", GROUP, Auth::Public, "Redirect to the read-only chat embed", || async {
        Redirect::temporary("/embed/chat/readonly")
    });
    reg.get("/embed/chat/readonly", GROUP, Auth::Public, "Read-only chat embed", || page("embed-chat-readonly.html"));
    reg.get("/embed/chat/readwrite", GROUP, Auth::Public, "Read-write chat embed", || {
        page("embed-chat-readwrite.html")
    });
    reg.get("/embed/video", GROUP, Auth::Public, "Video embed", || page("embed-video.html"));
    reg.get("/serviceworker.js", GROUP, Auth::Public, "Push notification service worker", || {
        asset_response("serviceworker.js", "no-cache")
    });
    reg.get("/assets/{*file}", GROUP, Auth::Public, "Web UI assets", |Path(file): Path<String>| async move {
        asset_response(&format!("assets/{file}"), "public, max-age=31536000, immutable").await
    });
    reg.get(
        "/img/platformlogos/{file}",
        GROUP,
        Auth::Public,
        "A social platform icon (SVG)",
        |Path(file): Path<String>| async move {
            // Only the icons themselves: a plain `<key>.svg` name (a decoded `%2F` cannot reach further).
            if !file.ends_with(".svg") || file.contains(['/', '\\']) || file.starts_with('.') {
                return crate::http::ApiError::NotFound(format!("no such icon: {file}")).into_response();
            }
            asset_response(&format!("img/platformlogos/{file}"), "public, max-age=86400").await
        },
    );
}

async fn page(name: &'static str) -> Response {
    match Dist::get(name) {
        Some(file) => {
            let mut resp = file.data.into_owned().into_response();
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            resp
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "castd was built without its web UI: run `make build` (it builds web/dist before cargo).\n",
        )
            .into_response(),
    }
}

async fn asset_response(path: &str, cache: &'static str) -> Response {
    // rust-embed only knows the files it embedded, so `..` cannot escape the folder.
    match Dist::get(path) {
        Some(file) => {
            let mime = file.metadata.mimetype().to_string();
            let mut resp = file.data.into_owned().into_response();
            let h = resp.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&mime) {
                h.insert(header::CONTENT_TYPE, v);
            }
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
            resp
        }
        None => crate::http::ApiError::NotFound(format!("no such file: {path}")).into_response(),
    }
}

/// Whether this binary carries the web UI.
pub fn embedded() -> bool {
    Dist::get("index.html").is_some()
}
