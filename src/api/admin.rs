//! Admin read routes: server status (with the security warnings) and the whole server configuration
//! (secrets masked, the admin password as its bcrypt hash, as Owncast shows it), and the update
//! routes, which say that castd is updated by the package manager.

use std::sync::Arc;

use axum::extract::State;
use std::collections::BTreeMap;

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::Server;
use crate::config::{
    BrowserNotification, DiscordNotification, ExternalAction, S3Info, SocialHandle, StreamKey, StreamOutputVariant,
};
use crate::health::Health;
use crate::http::{ApiError, Auth, Registry, StatusResponse};
use crate::stream::{Broadcaster, VariantProgress};
use crate::VERSION;

const GROUP: &str = "admin";

/// What the admin API shows instead of a stored secret. Sending it back to a setter keeps the secret.
pub const MASKED: &str = "********";

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    let mut reg = reg.scope(server);
    reg.get("/api/admin/status", GROUP, Auth::Admin, "Server and broadcaster status", status).returns::<AdminStatus>();
    reg.get("/api/admin/serverconfig", GROUP, Auth::Admin, "The whole server configuration", get_server_config)
        .returns::<ServerConfig>();
    reg.get(
        "/api/admin/update/options",
        GROUP,
        Auth::Admin,
        "How castd is updated (the package manager)",
        update_options,
    )
    .returns::<UpdateOptions>();
    reg.get(
        "/api/admin/update/start",
        GROUP,
        Auth::Admin,
        "Refused: castd is updated by the package manager",
        update_start,
    )
    // Never answered (see `error`); documented so the operation has a success shape.
    .returns::<StatusResponse>()
    .error(400, "Always: castd is updated by the package manager (Owncast's answer when it cannot update)");
}

/// Why the admin page cannot update castd itself.
pub const UPDATES_BY_PACKAGE_MANAGER: &str =
    "castd is updated by the system's package manager (apt): run `apt update && apt upgrade` on the server";

/// `GET /api/admin/update/options`: castd is updated by the package manager.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateOptions {
    pub supports_update: bool,
    pub can_restart: bool,
    pub package_manager: &'static str,
    pub message: &'static str,
}

async fn update_options() -> Json<UpdateOptions> {
    Json(UpdateOptions {
        supports_update: false,
        can_restart: false,
        package_manager: "apt",
        message: UPDATES_BY_PACKAGE_MANAGER,
    })
}

async fn update_start() -> ApiError {
    ApiError::bad(UPDATES_BY_PACKAGE_MANAGER)
}

/// `GET /api/admin/status` (and `/api/integrations/status`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminStatus {
    pub online: bool,
    pub broadcaster: Option<Broadcaster>,
    /// What is being served, while online.
    pub current_broadcast: Option<CurrentBroadcast>,
    pub health: Health,
    pub stream_title: String,
    pub version_number: &'static str,
    pub viewer_count: u64,
    pub overall_peak_viewer_count: u64,
    pub session_peak_viewer_count: u64,
    /// Weak secrets the owner should change.
    pub warnings: Vec<String>,
}

/// `currentBroadcast` of the admin status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentBroadcast {
    pub output_settings: Vec<StreamOutputVariant>,
    pub latency_level: LatencyLevel,
    /// The first variant's encoder.
    pub video_codec: String,
    /// The encoder of each variant.
    pub encoders: Vec<String>,
    pub worker_pid: Option<u32>,
    pub transcode: Vec<VariantProgress>,
}

/// A latency level and what it means.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatencyLevel {
    pub level: u32,
    pub seconds_per_segment: u32,
    pub segment_count: u32,
}

/// Admin status: broadcaster, current broadcast settings, health and viewer peaks.
pub fn admin_status(server: &Server) -> AdminStatus {
    let s = server.settings.get();
    let st = server.stream.borrow().clone();
    let (current, session_max, overall_max) = server.viewers.get();
    let (seconds, count) = s.latency();
    let current_broadcast = st.online.then(|| CurrentBroadcast {
        output_settings: s.video_quality_variants.clone(),
        latency_level: LatencyLevel { level: s.latency_level, seconds_per_segment: seconds, segment_count: count },
        video_codec: st.encoders.first().cloned().unwrap_or_default(),
        encoders: st.encoders.clone(),
        worker_pid: st.worker_pid,
        transcode: st.transcode.clone(),
    });
    AdminStatus {
        online: st.online,
        broadcaster: st.broadcaster,
        current_broadcast,
        health: server.health.get(),
        stream_title: s.stream_title.clone(),
        version_number: VERSION,
        viewer_count: current,
        overall_peak_viewer_count: overall_max,
        session_peak_viewer_count: session_max,
        warnings: s.security_warnings(),
    }
}

async fn status(State(server): State<Arc<Server>>) -> Json<AdminStatus> {
    Json(admin_status(&server))
}

fn mask(secret: &str) -> &'static str {
    if secret.is_empty() {
        ""
    } else {
        MASKED
    }
}

/// `GET /api/admin/serverconfig`: Owncast's shape, with the interface spec's extra fields.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    pub instance_details: InstanceDetails,
    /// The bcrypt hash, which tools check with `bcrypt.compare` (Owncast shows the same). A database
    /// from an earlier castd holds an argon2 hash until the next login or password change.
    pub admin_password: String,
    pub stream_keys: Vec<StreamKey>,
    /// A `--streamkey` is in force for this run.
    pub stream_key_overridden: bool,
    pub ffmpeg_path: String,
    pub web_server_port: u16,
    #[serde(rename = "webServerIP")]
    pub web_server_ip: String,
    pub rtmp_server_port: u16,
    pub rtmp_server_address: String,
    /// The SRT ingest port (0: SRT is off); SRT listens on the RTMP address.
    pub srt_server_port: u16,
    /// The SRT encryption passphrase (empty: unencrypted); publishers put it in their `srt://` URL.
    pub srt_passphrase: String,
    #[serde(rename = "serverURL")]
    pub server_url: String,
    pub socket_host_override: String,
    pub video_serving_endpoint: String,
    /// The storage settings, the secret masked.
    pub s3: S3Info,
    pub video_settings: VideoSettings,
    pub video_codec: String,
    /// The encoders that can be used on this server.
    pub supported_codecs: Vec<String>,
    pub yp: DirectorySettings,
    pub chat_disabled: bool,
    pub chat_join_messages_enabled: bool,
    pub chat_established_user_mode: bool,
    pub chat_spam_protection_enabled: bool,
    pub chat_slur_filter_enabled: bool,
    pub chat_slur_filter_words: Vec<String>,
    pub chat_require_authentication: bool,
    pub forbidden_usernames: Vec<String>,
    pub suggested_usernames: Vec<String>,
    pub hide_viewer_count: bool,
    pub disable_search_indexing: bool,
    pub external_actions: Vec<ExternalAction>,
    pub federation: FederationSettings,
    pub notifications: NotificationSettings,
    pub schedule: ScheduleSettings,
}

/// `instanceDetails` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceDetails {
    pub name: String,
    pub summary: String,
    pub welcome_message: String,
    pub offline_message: String,
    /// Always `/logo`.
    pub logo: &'static str,
    pub tags: Vec<String>,
    pub version: &'static str,
    pub nsfw: bool,
    pub extra_page_content: String,
    pub stream_title: String,
    pub social_handles: Vec<SocialHandle>,
    pub custom_styles: String,
    pub custom_javascript: String,
    pub appearance_variables: BTreeMap<String, String>,
    /// `off`, `on` or `muted`.
    pub autoplay: String,
}

/// `videoSettings` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoSettings {
    pub video_quality_variants: Vec<StreamOutputVariant>,
    pub latency_level: u32,
}

/// `yp` of the server configuration: the directory registration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectorySettings {
    pub enabled: bool,
    /// The server URL.
    pub instance_url: String,
    pub directory_url: String,
}

/// `federation` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FederationSettings {
    pub enabled: bool,
    pub is_private: bool,
    pub username: String,
    pub go_live_message: String,
    pub show_engagement: bool,
    pub enable_quotes: bool,
    pub hide_followers_tab: bool,
    pub blocked_domains: Vec<String>,
}

/// `notifications` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationSettings {
    pub browser: BrowserNotification,
    pub discord: DiscordNotification,
}

/// `schedule` of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleSettings {
    pub enabled: bool,
    pub show_countdown: bool,
    pub chat_open_minutes_before: u32,
    pub reminder_message: String,
    pub first_reminder_minutes: u32,
    pub second_reminder_minutes: u32,
}

/// The admin server configuration in Owncast's shape, with the interface spec's extra fields.
pub fn server_config(server: &Server) -> ServerConfig {
    let s = server.settings.get();
    ServerConfig {
        instance_details: InstanceDetails {
            name: s.name.clone(),
            summary: s.summary.clone(),
            welcome_message: s.welcome_message.clone(),
            offline_message: s.offline_message.clone(),
            logo: "/logo",
            tags: s.tags.clone(),
            version: VERSION,
            nsfw: s.nsfw,
            extra_page_content: s.extra_page_content.clone(),
            stream_title: s.stream_title.clone(),
            social_handles: s.social_handles.clone(),
            custom_styles: s.custom_styles.clone(),
            custom_javascript: s.custom_javascript.clone(),
            appearance_variables: s.appearance_variables.clone(),
            autoplay: s.autoplay.clone(),
        },
        admin_password: s.admin_password_hash.clone(),
        stream_keys: s.stream_keys.clone(),
        stream_key_overridden: server.stream_key_overridden,
        ffmpeg_path: s.ffmpeg_path.clone(),
        web_server_port: s.web_server_port,
        web_server_ip: s.web_server_ip.clone(),
        rtmp_server_port: s.rtmp_server_port,
        rtmp_server_address: s.rtmp_server_bind_address.clone(),
        srt_server_port: s.srt_server_port,
        srt_passphrase: s.srt_passphrase.clone(),
        server_url: s.server_url.clone(),
        socket_host_override: s.socket_host_override.clone(),
        video_serving_endpoint: s.video_serving_endpoint.clone(),
        s3: S3Info { secret: mask(&s.s3.secret).to_string(), ..s.s3.clone() },
        video_settings: VideoSettings {
            video_quality_variants: s.video_quality_variants.clone(),
            latency_level: s.latency_level,
        },
        video_codec: s.video_codec.clone(),
        supported_codecs: server.available_codecs(),
        yp: DirectorySettings {
            enabled: s.directory_enabled,
            instance_url: s.server_url.clone(),
            directory_url: s.directory_url().to_string(),
        },
        chat_disabled: s.chat_disabled,
        chat_join_messages_enabled: s.chat_join_messages_enabled,
        chat_established_user_mode: s.chat_established_user_mode,
        chat_spam_protection_enabled: s.chat_spam_protection_enabled,
        chat_slur_filter_enabled: s.chat_slur_filter_enabled,
        chat_slur_filter_words: s.chat_slur_filter_words.clone(),
        chat_require_authentication: s.chat_require_authentication,
        forbidden_usernames: s.forbidden_usernames.clone(),
        suggested_usernames: s.suggested_usernames.clone(),
        hide_viewer_count: s.hide_viewer_count,
        disable_search_indexing: s.disable_search_indexing,
        external_actions: s.external_actions.clone(),
        federation: FederationSettings {
            enabled: s.federation_enabled,
            is_private: s.federation_private,
            username: s.federation_username.clone(),
            go_live_message: s.federation_go_live_message.clone(),
            show_engagement: s.federation_show_engagement,
            enable_quotes: s.federation_enable_quotes,
            hide_followers_tab: s.federation_hide_followers,
            blocked_domains: s.federation_blocked_domains.clone(),
        },
        notifications: NotificationSettings {
            browser: s.browser_notifications.clone(),
            discord: s.discord_notifications.clone(),
        },
        schedule: ScheduleSettings {
            enabled: s.schedule_enabled,
            show_countdown: s.schedule_show_countdown,
            chat_open_minutes_before: s.schedule_chat_open_minutes,
            reminder_message: s.schedule_reminder_message.clone(),
            first_reminder_minutes: s.schedule_first_reminder_minutes,
            second_reminder_minutes: s.schedule_second_reminder_minutes,
        },
    }
}

async fn get_server_config(State(server): State<Arc<Server>>) -> Json<ServerConfig> {
    Json(server_config(&server))
}
