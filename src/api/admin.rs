//! Admin read routes: server status (with the security warnings) and the whole server configuration
//! (secrets masked, the admin password as its bcrypt hash, as Owncast shows it), and the update
//! routes, which say that castd is updated by the package manager.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::Server;
use crate::http::{ApiError, Auth, Registry};
use crate::VERSION;

const GROUP: &str = "admin";

/// What the admin API shows instead of a stored secret. Sending it back to a setter keeps the secret.
pub const MASKED: &str = "********";

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    let mut reg = reg.scope(server);
    reg.get("/api/admin/status", GROUP, Auth::Admin, "Server and broadcaster status", status);
    reg.get("/api/admin/serverconfig", GROUP, Auth::Admin, "The whole server configuration", server_config);
    reg.get(
        "/api/admin/update/options",
        GROUP,
        Auth::Admin,
        "How castd is updated (the package manager)",
        update_options,
    );
    reg.get(
        "/api/admin/update/start",
        GROUP,
        Auth::Admin,
        "Refused: castd is updated by the package manager",
        update_start,
    )
    .error(400, "Always: castd is updated by the package manager (Owncast's answer when it cannot update)");
}

/// Why the admin page cannot update castd itself.
pub const UPDATES_BY_PACKAGE_MANAGER: &str =
    "castd is updated by the system's package manager (apt): run `apt update && apt upgrade` on the server";

async fn update_options() -> Json<Value> {
    Json(json!({
        "supportsUpdate": false,
        "canRestart": false,
        "packageManager": "apt",
        "message": UPDATES_BY_PACKAGE_MANAGER,
    }))
}

async fn update_start() -> ApiError {
    ApiError::bad(UPDATES_BY_PACKAGE_MANAGER)
}

/// Admin status: broadcaster, current broadcast settings, health and viewer peaks.
pub fn status_json(server: &Server) -> Value {
    let s = server.settings.get();
    let st = server.stream.borrow().clone();
    let (current, session_max, overall_max) = server.viewers.get();
    let (seconds, count) = s.latency();
    let current_broadcast = st.online.then(|| {
        json!({
            "outputSettings": s.video_quality_variants,
            "latencyLevel": { "level": s.latency_level, "secondsPerSegment": seconds, "segmentCount": count },
            "videoCodec": st.encoders.first().cloned().unwrap_or_default(),
            "encoders": st.encoders,
            "workerPid": st.worker_pid,
            "transcode": st.transcode,
        })
    });
    json!({
        "online": st.online,
        "broadcaster": st.broadcaster,
        "currentBroadcast": current_broadcast,
        "health": server.health.get(),
        "streamTitle": s.stream_title,
        "versionNumber": VERSION,
        "viewerCount": current,
        "overallPeakViewerCount": overall_max,
        "sessionPeakViewerCount": session_max,
        "warnings": s.security_warnings(),
    })
}

async fn status(State(server): State<Arc<Server>>) -> Json<Value> {
    Json(status_json(&server))
}

fn mask(secret: &str) -> &'static str {
    if secret.is_empty() {
        ""
    } else {
        MASKED
    }
}

/// The admin server configuration in Owncast's shape, with the interface spec's extra fields.
pub fn server_config_json(server: &Server) -> Value {
    let s = server.settings.get();
    let mut s3 = serde_json::to_value(&s.s3).unwrap_or_default();
    s3["secret"] = json!(mask(&s.s3.secret));
    json!({
        "instanceDetails": {
            "name": s.name,
            "summary": s.summary,
            "welcomeMessage": s.welcome_message,
            "offlineMessage": s.offline_message,
            "logo": "/logo",
            "tags": s.tags,
            "version": VERSION,
            "nsfw": s.nsfw,
            "extraPageContent": s.extra_page_content,
            "streamTitle": s.stream_title,
            "socialHandles": s.social_handles,
            "customStyles": s.custom_styles,
            "customJavascript": s.custom_javascript,
            "appearanceVariables": s.appearance_variables,
            "autoplay": s.autoplay,
        },
        // The bcrypt hash, which tools check with `bcrypt.compare` (Owncast shows the same). A database
        // from an earlier castd holds an argon2 hash until the next login or password change.
        "adminPassword": s.admin_password_hash,
        "streamKeys": s.stream_keys,
        "streamKeyOverridden": server.stream_key_overridden,
        "ffmpegPath": s.ffmpeg_path,
        "webServerPort": s.web_server_port,
        "webServerIP": s.web_server_ip,
        "rtmpServerPort": s.rtmp_server_port,
        "rtmpServerAddress": s.rtmp_server_bind_address,
        "serverURL": s.server_url,
        "socketHostOverride": s.socket_host_override,
        "videoServingEndpoint": s.video_serving_endpoint,
        "s3": s3,
        "videoSettings": {
            "videoQualityVariants": s.video_quality_variants,
            "latencyLevel": s.latency_level,
        },
        "videoCodec": s.video_codec,
        "supportedCodecs": server.available_codecs(),
        "yp": { "enabled": s.directory_enabled, "instanceUrl": s.server_url, "directoryUrl": s.directory_url() },
        "chatDisabled": s.chat_disabled,
        "chatJoinMessagesEnabled": s.chat_join_messages_enabled,
        "chatEstablishedUserMode": s.chat_established_user_mode,
        "chatSpamProtectionEnabled": s.chat_spam_protection_enabled,
        "chatSlurFilterEnabled": s.chat_slur_filter_enabled,
        "chatSlurFilterWords": s.chat_slur_filter_words,
        "chatRequireAuthentication": s.chat_require_authentication,
        "forbiddenUsernames": s.forbidden_usernames,
        "suggestedUsernames": s.suggested_usernames,
        "hideViewerCount": s.hide_viewer_count,
        "disableSearchIndexing": s.disable_search_indexing,
        "externalActions": s.external_actions,
        "federation": {
            "enabled": s.federation_enabled,
            "isPrivate": s.federation_private,
            "username": s.federation_username,
            "goLiveMessage": s.federation_go_live_message,
            "showEngagement": s.federation_show_engagement,
            "enableQuotes": s.federation_enable_quotes,
            "hideFollowersTab": s.federation_hide_followers,
            "blockedDomains": s.federation_blocked_domains,
        },
        "notifications": {
            "browser": s.browser_notifications,
            "discord": s.discord_notifications,
        },
        "schedule": {
            "enabled": s.schedule_enabled,
            "reminderMessage": s.schedule_reminder_message,
        },
    })
}

async fn server_config(State(server): State<Arc<Server>>) -> Json<Value> {
    Json(server_config_json(&server))
}
