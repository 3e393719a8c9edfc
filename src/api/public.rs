//! Public (internal-group) read routes that the web page uses: configuration, status, directory
//! data, social platforms, variant names, and the owner's logo, favicon, custom JavaScript and
//! robots.txt.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use serde_json::{json, Value};

use super::Server;
use crate::config::Settings;
use crate::http::{ApiError, Auth, Registry};
use crate::markdown;
use crate::VERSION;

const GROUP: &str = "public";

/// The built-in logo, served until the owner uploads one.
const DEFAULT_LOGO: &[u8] = include_bytes!("../../packaging/logo.svg");

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    let mut reg = reg.scope(server);
    reg.get("/api/config", GROUP, Auth::Public, "Public configuration for the web page", config);
    reg.get("/api/status", GROUP, Auth::Public, "Public stream status", status);
    reg.get("/api/yp", GROUP, Auth::Public, "Directory (YP) data; 404 unless the directory is enabled", yp)
        .error(404, "The directory is not enabled");
    reg.get("/api/socialplatforms", GROUP, Auth::Public, "Known social platforms and their icons", social_platforms);
    reg.get("/api/video/variants", GROUP, Auth::Public, "Names and indexes of the quality variants", variants);
    reg.get("/logo", GROUP, Auth::Public, "The logo image", logo);
    reg.get("/logo/external", GROUP, Auth::Public, "The logo for other sites", logo);
    reg.get("/favicon.ico", GROUP, Auth::Public, "The favicon", favicon);
    reg.get("/customjavascript", GROUP, Auth::Public, "The owner's custom JavaScript", custom_javascript);
    reg.get("/robots.txt", GROUP, Auth::Public, "robots.txt", robots);
}

/// `user@host` for the fediverse account, when a server URL gives the host (with the port when the URL
/// names a non-default one, as WebFinger and the actor use it).
pub fn federation_account(s: &Settings) -> String {
    let host = url::Url::parse(&s.server_url).ok().and_then(|u| {
        u.host_str().map(|h| match u.port() {
            Some(p) => format!("{h}:{p}"),
            None => h.to_string(),
        })
    });
    match host {
        Some(h) => format!("{}@{h}", s.federation_username),
        None => s.federation_username.clone(),
    }
}

/// Public configuration: the interface spec's fields plus Owncast's.
pub fn config_json(server: &Server) -> Value {
    let s = server.settings.get();
    json!({
        "name": s.name,
        "summary": s.summary,
        "streamTitle": s.stream_title,
        "offlineMessage": markdown::to_html(&s.offline_message),
        "logo": "/logo",
        "version": VERSION,
        "tags": s.tags,
        "nsfw": s.nsfw,
        "customStyles": s.custom_styles,
        "extraPageContent": markdown::to_html(&s.extra_page_content),
        "socketHostOverride": s.socket_host_override,
        "appearanceVariables": s.appearance_variables,
        "socialHandles": s.social_handles,
        "externalActions": s.external_actions,
        "notifications": {
            "browser": {
                "enabled": s.browser_notifications.enabled,
                "publicKey": server.vapid_public_key.clone(),
            }
        },
        "federation": {
            "enabled": s.federation_enabled,
            "account": federation_account(&s),
            "followerCount": server.follower_count.load(std::sync::atomic::Ordering::Relaxed),
            "hideFollowersTab": s.federation_hide_followers,
        },
        "maxSocketPayloadSize": crate::config::MAX_SOCKET_PAYLOAD_SIZE,
        "hideViewerCount": s.hide_viewer_count,
        "chatDisabled": s.chat_disabled,
        "chatRequireAuthentication": s.chat_require_authentication,
        "chatSpamProtectionDisabled": !s.chat_spam_protection_enabled,
        "autoplay": s.autoplay,
        "authentication": { "indieAuthEnabled": !s.server_url.is_empty() },
    })
}

async fn config(State(server): State<Arc<Server>>) -> Response {
    no_cache(Json(config_json(&server)).into_response())
}

/// Public status; the viewer counts are left out when the owner hides them.
pub fn status_json(server: &Server) -> Value {
    let s = server.settings.get();
    let st = server.stream.borrow().clone();
    let (current, session_max, overall_max) = server.viewers.get();
    let mut v = json!({
        "online": st.online,
        "serverTime": Utc::now(),
        "lastConnectTime": st.last_connect_time,
        "lastDisconnectTime": st.last_disconnect_time,
        "versionNumber": VERSION,
        "streamTitle": s.stream_title,
        "name": s.name,
        "description": s.summary,
        "logo": "/logo",
        "tags": s.tags,
        "social": s.social_handles,
        "nsfw": s.nsfw,
    });
    if !s.hide_viewer_count {
        v["viewerCount"] = json!(current);
        v["sessionMaxViewerCount"] = json!(session_max);
        v["overallMaxViewerCount"] = json!(overall_max);
    }
    v
}

async fn status(State(server): State<Arc<Server>>) -> Response {
    no_cache(Json(status_json(&server)).into_response())
}

async fn yp(State(server): State<Arc<Server>>) -> Result<Json<Value>, ApiError> {
    let s = server.settings.get();
    if !s.directory_enabled {
        return Err(ApiError::NotFound("the directory is not enabled".into()));
    }
    let st = server.stream.borrow().clone();
    let (current, session_max, overall_max) = server.viewers.get();
    Ok(Json(json!({
        "name": s.name,
        "description": s.summary,
        "streamTitle": s.stream_title,
        "logo": "/logo",
        "nsfw": s.nsfw,
        "tags": s.tags,
        "online": st.online,
        "viewerCount": if s.hide_viewer_count { 0 } else { current },
        "overallMaxViewerCount": overall_max,
        "sessionMaxViewerCount": session_max,
        "lastConnectTime": st.last_connect_time,
        "social": s.social_handles,
    })))
}

/// Platforms the admin can pick for social handles (Owncast's list, icons served by the web UI).
const SOCIAL_PLATFORMS: &[(&str, &str)] = &[
    ("bandcamp", "Bandcamp"),
    ("discord", "Discord"),
    ("facebook", "Facebook"),
    ("github", "GitHub"),
    ("gitlab", "GitLab"),
    ("instagram", "Instagram"),
    ("keyoxide", "Keyoxide"),
    ("kofi", "Ko-Fi"),
    ("linkedin", "LinkedIn"),
    ("mastodon", "Mastodon"),
    ("patreon", "Patreon"),
    ("paypal", "Paypal"),
    ("snapchat", "Snapchat"),
    ("soundcloud", "Soundcloud"),
    ("spotify", "Spotify"),
    ("tiktok", "TikTok"),
    ("twitch", "Twitch"),
    ("twitter", "Twitter"),
    ("youtube", "YouTube"),
    ("matrix", "Matrix"),
    ("bluesky", "Bluesky"),
    ("donate", "Donations"),
    ("follow", "Follow"),
    ("rss", "RSS"),
];

async fn social_platforms() -> Json<Value> {
    let map: serde_json::Map<String, Value> = SOCIAL_PLATFORMS
        .iter()
        .map(|(key, name)| {
            ((*key).to_string(), json!({ "name": name, "icon": format!("/img/platformlogos/{key}.svg") }))
        })
        .collect();
    Json(Value::Object(map))
}

async fn variants(State(server): State<Arc<Server>>) -> Json<Value> {
    let s = server.settings.get();
    let list: Vec<Value> = s
        .video_quality_variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let name = if v.name.is_empty() { variant_label(v) } else { v.name.clone() };
            json!({ "index": i, "name": name })
        })
        .collect();
    Json(Value::Array(list))
}

/// A readable label for an unnamed variant (`720p`, `1200 kbps`).
pub fn variant_label(v: &crate::config::StreamOutputVariant) -> String {
    match (v.scaled_height, v.video_passthrough) {
        (_, true) => "Source".into(),
        (0, _) => format!("{} kbps", v.video_bitrate),
        (h, _) => format!("{h}p"),
    }
}

/// Content type of an image from its first bytes.
pub fn image_type(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    let trimmed = bytes.iter().skip_while(|b| b.is_ascii_whitespace()).take(256).copied().collect::<Vec<u8>>();
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(("image/png", "png"))
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(("image/jpeg", "jpg"))
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(("image/gif", "gif"))
    } else if bytes.len() > 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(("image/webp", "webp"))
    } else if bytes.starts_with(&[0, 0, 1, 0]) {
        Some(("image/x-icon", "ico"))
    } else if trimmed.starts_with(b"<svg") || trimmed.starts_with(b"<?xml") {
        Some(("image/svg+xml", "svg"))
    } else {
        None
    }
}

fn file_response(bytes: Vec<u8>, max_age: u32) -> Response {
    let ctype = image_type(&bytes).map_or("application/octet-stream", |(t, _)| t);
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={max_age}")) {
        h.insert(header::CACHE_CONTROL, v);
    }
    resp
}

/// Read an owner-uploaded file from the data dir; `name` comes from settings, not from the request.
async fn read_upload(server: &Server, name: &str) -> Option<Vec<u8>> {
    if name.is_empty() || name.contains('/') || name.contains("..") {
        return None;
    }
    tokio::fs::read(server.data_dir.join(name)).await.ok()
}

async fn logo(State(server): State<Arc<Server>>) -> Response {
    let name = server.settings.get().logo.clone();
    match read_upload(&server, &name).await {
        Some(bytes) => file_response(bytes, 60),
        None => file_response(DEFAULT_LOGO.to_vec(), 60),
    }
}

async fn favicon(State(server): State<Arc<Server>>) -> Response {
    let s = server.settings.get();
    let name = if s.favicon.is_empty() { s.logo.clone() } else { s.favicon.clone() };
    match read_upload(&server, &name).await {
        Some(bytes) => file_response(bytes, 60),
        None => file_response(DEFAULT_LOGO.to_vec(), 60),
    }
}

async fn custom_javascript(State(server): State<Arc<Server>>) -> Response {
    let js = server.settings.get().custom_javascript.clone();
    let mut resp = js.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    no_cache(resp)
}

async fn robots(State(server): State<Arc<Server>>) -> Response {
    let body = if server.settings.get().disable_search_indexing {
        "User-agent: *\nDisallow: /\n"
    } else {
        "User-agent: *\nDisallow: /admin\nDisallow: /api\n"
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// Mark a response as not cacheable (status and configuration change at any time).
pub fn no_cache(mut resp: Response) -> Response {
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-store, must-revalidate"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_image_types() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\nrest").map(|t| t.1), Some("png"));
        assert_eq!(image_type(&[0xFF, 0xD8, 0xFF, 0xE0]).map(|t| t.1), Some("jpg"));
        assert_eq!(image_type(b"  <svg xmlns=''/>").map(|t| t.1), Some("svg"));
        assert_eq!(image_type(b"hello"), None);
    }

    #[test]
    fn labels() {
        let mut v = crate::config::StreamOutputVariant::default();
        assert_eq!(variant_label(&v), "1200 kbps");
        v.scaled_height = 720;
        assert_eq!(variant_label(&v), "720p");
    }
}
