//! Public (internal-group) read routes that the web page uses: configuration, status, directory
//! data, social platforms, variant names, and the owner's logo, favicon, custom JavaScript and
//! robots.txt.
//!
//! Channels are tenants: on a channel other than the default, `/customjavascript` is always empty
//! (custom JavaScript is the server admin's alone) and what the channel admin wrote is served
//! confined in `/api/config` ([`public_config`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::Server;
use crate::config::{ExternalAction, Settings, SocialHandle};
use crate::http::setters::SettingsHost as _;
use crate::http::{ApiError, Auth, Registry, ResponseDoc};
use crate::markdown;
use crate::schedule::model::ScheduledStatus;
use crate::VERSION;

const GROUP: &str = "public";

/// The built-in logo, served until the owner uploads one.
const DEFAULT_LOGO: &[u8] = include_bytes!("../../packaging/logo.svg");

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    let mut reg = reg.scope(server);
    reg.get("/api/config", GROUP, Auth::Public, "Public configuration for the web page", config)
        .returns::<PublicConfig>();
    reg.get("/api/status", GROUP, Auth::Public, "Public stream status", status).returns::<PublicStatus>();
    reg.get("/api/yp", GROUP, Auth::Public, "Directory (YP) data; 404 unless the directory is enabled", yp)
        .returns::<DirectoryInfo>()
        .error(404, "The directory is not enabled");
    reg.get("/api/socialplatforms", GROUP, Auth::Public, "Known social platforms and their icons", social_platforms)
        .returns::<SocialPlatforms>();
    reg.get("/api/video/variants", GROUP, Auth::Public, "Names and indexes of the quality variants", variants)
        .returns_list::<VariantName>();
    // The logo and favicon are the owner's upload (PNG, JPEG, GIF, WebP, ICO or SVG) or the built-in SVG.
    reg.get("/logo", GROUP, Auth::Public, "The logo image", logo).answers(ResponseDoc::Content("image/*"));
    reg.get("/logo/external", GROUP, Auth::Public, "The logo for other sites", logo)
        .answers(ResponseDoc::Content("image/*"));
    reg.get("/favicon.ico", GROUP, Auth::Public, "The favicon", favicon).answers(ResponseDoc::Content("image/*"));
    // On a channel other than the default: always empty (custom JavaScript is the server admin's).
    reg.get("/customjavascript", GROUP, Auth::Public, "The owner's custom JavaScript", custom_javascript)
        .answers(ResponseDoc::Content("text/javascript"));
    reg.get("/robots.txt", GROUP, Auth::Public, "robots.txt", robots).answers(ResponseDoc::Content("text/plain"));
}

/// `user@host` for the fediverse account, when a server URL gives the host (with the port when the URL
/// names a non-default one, as WebFinger and the actor use it).
pub fn federation_account(s: &Settings) -> String {
    let host = url::Url::parse(&s.server.server_url).ok().and_then(|u| {
        u.host_str().map(|h| match u.port() {
            Some(p) => format!("{h}:{p}"),
            None => h.to_string(),
        })
    });
    match host {
        Some(h) => format!("{}@{h}", s.federation.federation_username),
        None => s.federation.federation_username.clone(),
    }
}

/// `GET /api/config`: the interface spec's fields plus Owncast's.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicConfig {
    pub name: String,
    pub summary: String,
    pub stream_title: String,
    /// The offline message, rendered from Markdown to HTML.
    pub offline_message: String,
    /// Always `/logo`.
    pub logo: &'static str,
    pub version: &'static str,
    pub tags: Vec<String>,
    pub nsfw: bool,
    pub custom_styles: String,
    /// The extra page content, rendered from Markdown to HTML.
    pub extra_page_content: String,
    pub socket_host_override: String,
    pub appearance_variables: BTreeMap<String, String>,
    pub social_handles: Vec<SocialHandle>,
    pub external_actions: Vec<ExternalAction>,
    pub notifications: PublicNotifications,
    pub federation: PublicFederation,
    pub max_socket_payload_size: usize,
    pub hide_viewer_count: bool,
    pub chat_disabled: bool,
    pub chat_require_authentication: bool,
    pub chat_spam_protection_disabled: bool,
    /// `off`, `on` or `muted`.
    pub autoplay: String,
    pub authentication: PublicAuthentication,
    pub schedule: PublicSchedule,
    /// Clip creation (Owncast's `clips`: `{enabled, maxDurationSeconds, permissions}`).
    pub clips: crate::replays::settings::ClipsConfig,
}

/// `schedule` of `/api/config`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicSchedule {
    pub enabled: bool,
    pub show_countdown: bool,
    pub chat_open_minutes_before: u32,
}

/// `notifications` of `/api/config`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PublicNotifications {
    pub browser: PublicBrowserNotifications,
}

/// `notifications.browser` of `/api/config`: whether browser push is on and the VAPID public key.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicBrowserNotifications {
    pub enabled: bool,
    pub public_key: String,
}

/// `federation` of `/api/config`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicFederation {
    pub enabled: bool,
    /// `user@host` (just the user while no server URL is set).
    pub account: String,
    pub follower_count: u64,
    pub hide_followers_tab: bool,
}

/// `authentication` of `/api/config`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicAuthentication {
    pub indie_auth_enabled: bool,
}

/// Public configuration: the interface spec's fields plus Owncast's. On a channel other than the
/// default what its admin (a tenant) wrote is served confined (`markdown`): the HTML sanitised, the
/// CSS loading nothing from elsewhere.
pub fn public_config(server: &Server) -> PublicConfig {
    let config = owners_config(server);
    if server.is_channel() {
        confined(config, &server.channel.base_path())
    } else {
        config
    }
}

/// A channel's public configuration with what its admin wrote confined (see `markdown`): the offline
/// message, extra page content and external actions' HTML sanitised (they were rendered from the
/// stored text, inline HTML kept), custom CSS and appearance variables confined, and an external
/// action's or social handle's URL or icon that reaches the admin API dropped.
fn confined(mut c: PublicConfig, base: &str) -> PublicConfig {
    c.offline_message = markdown::sanitize_html(&c.offline_message);
    c.extra_page_content = markdown::sanitize_html(&c.extra_page_content);
    c.custom_styles = markdown::confine_css(&c.custom_styles, base);
    for v in c.appearance_variables.values_mut() {
        *v = markdown::confine_css(v, base);
    }
    let drop_admin = |u: &mut String| {
        if markdown::reaches_admin_api(u) {
            u.clear();
        }
    };
    for a in &mut c.external_actions {
        if !a.html.is_empty() {
            a.html = markdown::sanitize_html(&a.html);
        }
        drop_admin(&mut a.url);
        drop_admin(&mut a.icon);
    }
    for h in &mut c.social_handles {
        drop_admin(&mut h.url);
        drop_admin(&mut h.icon);
    }
    c
}

/// The public configuration as the owner set it.
fn owners_config(server: &Server) -> PublicConfig {
    let s = server.settings.get();
    PublicConfig {
        name: s.instance.name.clone(),
        summary: s.instance.summary.clone(),
        stream_title: s.instance.stream_title.clone(),
        // Owncast's offline message is the rendered HTML without the renderer's final newline.
        offline_message: markdown::to_html(&s.instance.offline_message).trim_end_matches('\n').to_string(),
        logo: "/logo",
        version: VERSION,
        tags: s.instance.tags.clone(),
        nsfw: s.instance.nsfw,
        custom_styles: s.instance.custom_styles.clone(),
        extra_page_content: markdown::to_html(&s.instance.extra_page_content),
        socket_host_override: s.server.socket_host_override.clone(),
        appearance_variables: s.instance.appearance_variables.clone(),
        social_handles: s.instance.social_handles.clone(),
        external_actions: s.instance.external_actions.clone(),
        notifications: PublicNotifications {
            browser: PublicBrowserNotifications {
                enabled: s.notifications.browser_notifications.enabled,
                public_key: server.vapid_public_key.clone(),
            },
        },
        federation: PublicFederation {
            enabled: s.federation.federation_enabled,
            account: federation_account(&s),
            follower_count: server.follower_count.load(std::sync::atomic::Ordering::Relaxed),
            hide_followers_tab: s.federation.federation_hide_followers,
        },
        max_socket_payload_size: crate::config::MAX_SOCKET_PAYLOAD_SIZE,
        hide_viewer_count: s.instance.hide_viewer_count,
        chat_disabled: s.chat.chat_disabled,
        chat_require_authentication: s.chat.chat_require_authentication,
        chat_spam_protection_disabled: !s.chat.chat_spam_protection_enabled,
        autoplay: s.instance.autoplay.clone(),
        authentication: PublicAuthentication { indie_auth_enabled: !s.server.server_url.is_empty() },
        schedule: PublicSchedule {
            enabled: s.schedule.schedule_enabled,
            show_countdown: s.schedule.schedule_show_countdown,
            chat_open_minutes_before: s.schedule.schedule_chat_open_minutes,
        },
        clips: crate::replays::settings::public_clips(&s),
    }
}

async fn config(State(server): State<Arc<Server>>) -> Response {
    no_cache(Json(public_config(&server)).into_response())
}

/// `GET /api/status`: the viewer counts are left out when the owner hides them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicStatus {
    pub online: bool,
    pub server_time: DateTime<Utc>,
    pub last_connect_time: Option<DateTime<Utc>>,
    pub last_disconnect_time: Option<DateTime<Utc>>,
    pub version_number: &'static str,
    pub stream_title: String,
    pub name: String,
    pub description: String,
    /// Always `/logo`.
    pub logo: &'static str,
    pub tags: Vec<String>,
    pub social: Vec<SocialHandle>,
    pub nsfw: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub viewer_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub session_max_viewer_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub overall_max_viewer_count: Option<u64>,
    /// The current or next scheduled stream; absent while the schedule is off or nothing is coming.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub scheduled_event: Option<ScheduledStatus>,
    /// The live broadcast's id (a replay's id), only while live and clipping is on (Owncast).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub stream_id: Option<String>,
}

/// Public status; the viewer counts are left out when the owner hides them.
pub fn public_status(server: &Server) -> PublicStatus {
    let s = server.settings.get();
    let st = server.stream.borrow().clone();
    let (current, session_max, overall_max) = server.viewers.everywhere();
    let shown = |n: u64| (!s.instance.hide_viewer_count).then_some(n);
    let now = Utc::now();
    PublicStatus {
        online: st.online,
        server_time: now,
        last_connect_time: st.last_connect_time,
        last_disconnect_time: st.last_disconnect_time,
        version_number: VERSION,
        stream_title: s.instance.stream_title.clone(),
        name: s.instance.name.clone(),
        description: s.instance.summary.clone(),
        logo: "/logo",
        tags: s.instance.tags.clone(),
        social: s.instance.social_handles.clone(),
        nsfw: s.instance.nsfw,
        viewer_count: shown(current),
        session_max_viewer_count: shown(session_max),
        overall_max_viewer_count: shown(overall_max),
        scheduled_event: server.schedule.status(st.online, now),
        stream_id: crate::replays::settings::status_stream_id(&s, st.stream_id.as_ref().filter(|_| st.online)),
    }
}

async fn status(State(server): State<Arc<Server>>) -> Response {
    no_cache(Json(public_status(&server)).into_response())
}

/// `GET /api/yp`: what the directory shows about this server.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryInfo {
    pub name: String,
    pub description: String,
    pub stream_title: String,
    /// Always `/logo`.
    pub logo: &'static str,
    pub nsfw: bool,
    pub tags: Vec<String>,
    pub online: bool,
    /// 0 while the owner hides the viewer count.
    pub viewer_count: u64,
    pub overall_max_viewer_count: u64,
    pub session_max_viewer_count: u64,
    pub last_connect_time: Option<DateTime<Utc>>,
    pub social: Vec<SocialHandle>,
}

async fn yp(State(server): State<Arc<Server>>) -> Result<Json<DirectoryInfo>, ApiError> {
    let s = server.settings.get();
    if !s.directory.directory_enabled {
        return Err(ApiError::NotFound("the directory is not enabled".into()));
    }
    let st = server.stream.borrow().clone();
    let (current, session_max, overall_max) = server.viewers.everywhere();
    Ok(Json(DirectoryInfo {
        name: s.instance.name.clone(),
        description: s.instance.summary.clone(),
        stream_title: s.instance.stream_title.clone(),
        logo: "/logo",
        nsfw: s.instance.nsfw,
        tags: s.instance.tags.clone(),
        online: st.online,
        viewer_count: if s.instance.hide_viewer_count { 0 } else { current },
        overall_max_viewer_count: overall_max,
        session_max_viewer_count: session_max,
        last_connect_time: st.last_connect_time,
        social: s.instance.social_handles.clone(),
    }))
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

/// A social platform of `GET /api/socialplatforms` (keyed by its id there).
#[derive(Debug, Serialize, ToSchema)]
pub struct SocialPlatform {
    pub name: &'static str,
    /// `/img/platformlogos/<id>.svg`.
    pub icon: String,
}

/// `GET /api/socialplatforms`: the platforms by id.
#[derive(Debug, Serialize, ToSchema)]
#[serde(transparent)]
pub struct SocialPlatforms(BTreeMap<&'static str, SocialPlatform>);

async fn social_platforms() -> Json<SocialPlatforms> {
    Json(SocialPlatforms(
        SOCIAL_PLATFORMS
            .iter()
            .map(|(key, name)| (*key, SocialPlatform { name, icon: format!("/img/platformlogos/{key}.svg") }))
            .collect(),
    ))
}

/// One quality variant of `GET /api/video/variants`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VariantName {
    pub index: usize,
    /// The variant's name, or a label made from its size or bitrate.
    pub name: String,
}

/// While live, the running broadcast's ladder (its variants are what the master playlist lists);
/// offline, the settings' (what the next broadcast will run).
async fn variants(State(server): State<Arc<Server>>) -> Json<Vec<VariantName>> {
    let s = server.settings.get();
    let running = server.media.running(&server.channel);
    let ladder = running.as_ref().map_or(&s.video.video_quality_variants, |p| &p.variants);
    Json(
        ladder
            .iter()
            .enumerate()
            .map(|(index, v)| {
                let name = if v.name.is_empty() { variant_label(v) } else { v.name.clone() };
                VariantName { index, name }
            })
            .collect(),
    )
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
    let name = server.settings.get().instance.logo.clone();
    match read_upload(&server, &name).await {
        Some(bytes) => file_response(bytes, 60),
        None => file_response(DEFAULT_LOGO.to_vec(), 60),
    }
}

async fn favicon(State(server): State<Arc<Server>>) -> Response {
    let s = server.settings.get();
    let name = if s.instance.favicon.is_empty() { s.instance.logo.clone() } else { s.instance.favicon.clone() };
    match read_upload(&server, &name).await {
        Some(bytes) => file_response(bytes, 60),
        None => file_response(DEFAULT_LOGO.to_vec(), 60),
    }
}

/// The server admin's custom JavaScript: only the default channel's (its admin is the server admin).
/// A channel's page runs none (whatever its settings hold, from an import or an older castd): script
/// in castd's origin acts with every credential a visitor's browser holds there (the server admin's
/// cached Basic credentials, other channels' pass cookies and chat tokens).
async fn custom_javascript(State(server): State<Arc<Server>>) -> Response {
    let js = if server.is_channel() { String::new() } else { server.settings.get().instance.custom_javascript.clone() };
    let mut resp = js.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    no_cache(resp)
}

/// Owncast's robots.txt, byte for byte: its lines joined with `\n` (no newline at the end), with
/// `Disallow: /` added when search indexing is disabled.
async fn robots(State(server): State<Arc<Server>>) -> Response {
    let body = if server.settings.get().instance.disable_search_indexing {
        "User-agent: *\nDisallow: /admin\nDisallow: /api\nDisallow: /"
    } else {
        "User-agent: *\nDisallow: /admin\nDisallow: /api"
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
