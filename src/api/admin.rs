//! Admin read routes: server status (with the security warnings) and the whole server configuration
//! (secrets masked, the admin password as its bcrypt hash, as Owncast shows it), and the update
//! routes, which say that castd is updated by the package manager.

use std::sync::Arc;

use axum::extract::State;
use std::collections::BTreeMap;

use axum::Json;
use serde::Serialize;
use utoipa::openapi::{RefOr, Schema};
use utoipa::ToSchema;

use super::Server;
use crate::config::{ExternalAction, SocialHandle, StreamKey, StreamOutputVariant};
use crate::health::Health;
use crate::http::setters::SettingsHost as _;
use crate::http::{ApiError, Auth, Registry, StatusResponse};
use crate::stream::{Broadcaster, VariantProgress};
use crate::VERSION;

const GROUP: &str = "admin";

/// What the admin API shows instead of a stored secret (the storage section's).
pub use crate::config::MASKED;

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
    reg.action(
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
    let (current, session_max, overall_max) = server.viewers.everywhere();
    // What is running: the live broadcast's profile, whatever the settings say now.
    let running = server.media.running(&server.channel);
    let current_broadcast = running.filter(|_| st.online).map(|p| CurrentBroadcast {
        output_settings: p.variants.clone(),
        latency_level: LatencyLevel {
            level: p.latency_level,
            seconds_per_segment: p.segment_seconds,
            segment_count: p.list_size,
        },
        video_codec: p.encoders.first().cloned().unwrap_or_default(),
        encoders: p.encoders.clone(),
        worker_pid: st.worker_pid,
        transcode: st.transcode.clone(),
    });
    AdminStatus {
        online: st.online,
        broadcaster: st.broadcaster,
        current_broadcast,
        health: server.health.get(),
        stream_title: s.instance.stream_title.clone(),
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

/// `GET /api/admin/serverconfig`: Owncast's shape, with the interface spec's extra fields. Assembled
/// from each feature's part (flattened, in this order); its OpenAPI schema is the parts' properties
/// as one object.
#[derive(Debug, Serialize)]
pub struct ServerConfig {
    #[serde(flatten)]
    pub instance: InstanceConfigPart,
    #[serde(flatten)]
    pub server: ServerConfigPart,
    #[serde(flatten)]
    pub ingest: crate::ingest::settings::IngestConfigPart,
    #[serde(flatten)]
    pub storage: crate::storage::settings::StorageConfigPart,
    #[serde(flatten)]
    pub video: super::video::VideoConfigPart,
    #[serde(flatten)]
    pub directory: crate::yp::settings::DirectoryConfigPart,
    #[serde(flatten)]
    pub chat: crate::chat::settings::ChatConfig,
    #[serde(flatten)]
    pub page: PageConfigPart,
    #[serde(flatten)]
    pub federation: crate::federation::settings::FederationConfigPart,
    #[serde(flatten)]
    pub notifications: crate::notifications::settings::NotificationsConfigPart,
    #[serde(flatten)]
    pub schedule: crate::schedule::settings::ScheduleConfigPart,
    #[serde(flatten)]
    pub webrtc: crate::whep::settings::WebRtcConfigPart,
    #[serde(flatten)]
    pub simulcast: crate::simulcast::settings::SimulcastConfigPart,
    #[serde(flatten)]
    pub replay: crate::replays::settings::ReplayConfigPart,
    #[serde(flatten)]
    pub access: crate::access::api::AccessConfigPart,
}

/// Calls `$m` with the type of every part of `ServerConfig`, in order.
macro_rules! server_config_parts {
    ($m:ident) => {
        $m!(
            InstanceConfigPart,
            ServerConfigPart,
            crate::ingest::settings::IngestConfigPart,
            crate::storage::settings::StorageConfigPart,
            super::video::VideoConfigPart,
            crate::yp::settings::DirectoryConfigPart,
            crate::chat::settings::ChatConfig,
            PageConfigPart,
            crate::federation::settings::FederationConfigPart,
            crate::notifications::settings::NotificationsConfigPart,
            crate::schedule::settings::ScheduleConfigPart,
            crate::whep::settings::WebRtcConfigPart,
            crate::simulcast::settings::SimulcastConfigPart,
            crate::replays::settings::ReplayConfigPart,
            crate::access::api::AccessConfigPart
        )
    };
}

impl utoipa::PartialSchema for ServerConfig {
    fn schema() -> RefOr<Schema> {
        macro_rules! merged {
            ($($t:ty),*) => {
                crate::http::openapi::merged_object(
                    "`GET /api/admin/serverconfig`: Owncast's shape, with the interface spec's extra fields.",
                    [$(<$t as utoipa::PartialSchema>::schema()),*],
                )
            };
        }
        server_config_parts!(merged)
    }
}

impl utoipa::ToSchema for ServerConfig {
    fn name() -> std::borrow::Cow<'static, str> {
        "ServerConfig".into()
    }

    fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
        macro_rules! nested {
            ($($t:ty),*) => {{
                $(<$t as utoipa::ToSchema>::schemas(out);)*
            }};
        }
        server_config_parts!(nested);
    }
}

/// The instance details' part of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceConfigPart {
    pub instance_details: InstanceDetails,
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

/// The server settings' part of the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfigPart {
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
    #[serde(rename = "serverURL")]
    pub server_url: String,
    pub socket_host_override: String,
    pub video_serving_endpoint: String,
    /// The server's capacity (`server/*`): on the root only (a channel's configuration leaves it out;
    /// the server admin sets it on the root API), so not required.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false, nullable = false)]
    pub capacity: Option<CapacityConfig>,
    /// `allowprivatetargets`: whether channels' URLs may reach loopback and private addresses. On the
    /// root only (the server admin's decision), so not required.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false, nullable = false)]
    pub allow_private_targets: Option<bool>,
}

/// The server's capacity in the server configuration (see `media::capacity`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityConfig {
    /// `server/maxlivechannels` (0: no limit).
    pub max_live_channels: u32,
    /// `server/overcapacity`: `refuse` or `passthrough`.
    pub over_capacity: crate::config::OverCapacity,
    /// `server/transcodebudget` as set (0: from the CPU cores).
    pub transcode_budget: u64,
    /// The budget in force: the setting, or the one worked out from the cores.
    pub transcode_budget_in_force: u64,
}

/// The viewer page switches of the instance settings, in the server configuration.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageConfigPart {
    pub hide_viewer_count: bool,
    pub disable_search_indexing: bool,
    pub external_actions: Vec<ExternalAction>,
}

/// The admin server configuration in Owncast's shape, with the interface spec's extra fields: every
/// feature's part of it.
pub fn server_config(server: &Server) -> ServerConfig {
    let s = server.settings.get();
    // The server's own sections are the server admin's, on the root's serverconfig only.
    let root = !server.is_channel();
    let (i, srv) = (&s.instance, &s.server);
    ServerConfig {
        instance: InstanceConfigPart {
            instance_details: InstanceDetails {
                name: i.name.clone(),
                summary: i.summary.clone(),
                welcome_message: i.welcome_message.clone(),
                offline_message: i.offline_message.clone(),
                logo: "/logo",
                tags: i.tags.clone(),
                version: VERSION,
                nsfw: i.nsfw,
                extra_page_content: i.extra_page_content.clone(),
                stream_title: i.stream_title.clone(),
                social_handles: i.social_handles.clone(),
                custom_styles: i.custom_styles.clone(),
                custom_javascript: i.custom_javascript.clone(),
                appearance_variables: i.appearance_variables.clone(),
                autoplay: i.autoplay.clone(),
            },
        },
        server: ServerConfigPart {
            admin_password: srv.admin_password_hash.clone(),
            stream_keys: srv.stream_keys.clone(),
            stream_key_overridden: server.stream_key_overridden,
            ffmpeg_path: srv.ffmpeg_path.clone(),
            web_server_port: srv.web_server_port,
            web_server_ip: srv.web_server_ip.clone(),
            rtmp_server_port: srv.rtmp_server_port,
            rtmp_server_address: srv.rtmp_server_bind_address.clone(),
            server_url: srv.server_url.clone(),
            socket_host_override: srv.socket_host_override.clone(),
            video_serving_endpoint: srv.video_serving_endpoint.clone(),
            capacity: root.then(|| CapacityConfig {
                max_live_channels: srv.max_live_channels,
                over_capacity: srv.over_capacity,
                transcode_budget: srv.transcode_budget,
                transcode_budget_in_force: crate::media::capacity::budget_in_force(srv.transcode_budget),
            }),
            allow_private_targets: root.then_some(srv.allow_private_targets),
        },
        ingest: crate::ingest::settings::server_config(&s),
        storage: if root {
            crate::storage::settings::server_config(&s)
        } else {
            // The server's bucket, as a channel's admin may see it: whether it is on, never its account.
            let s3 = crate::config::S3Info { enabled: s.storage.s3.enabled, ..Default::default() };
            crate::storage::settings::StorageConfigPart { s3 }
        },
        video: super::video::server_config(server, &s),
        directory: crate::yp::settings::server_config(&s),
        chat: crate::chat::settings::server_config(&s),
        page: PageConfigPart {
            hide_viewer_count: i.hide_viewer_count,
            disable_search_indexing: i.disable_search_indexing,
            external_actions: i.external_actions.clone(),
        },
        federation: crate::federation::settings::server_config(&s),
        notifications: crate::notifications::settings::server_config(&s),
        schedule: crate::schedule::settings::server_config(&s),
        webrtc: crate::whep::settings::server_config(&s),
        simulcast: crate::simulcast::settings::server_config(&s),
        replay: crate::replays::settings::server_config(&s),
        access: crate::access::api::server_config(&s),
    }
}

async fn get_server_config(State(server): State<Arc<Server>>) -> Json<ServerConfig> {
    Json(server_config(&server))
}
