//! The channels' routes: the server admin's list and changes, the public list, and the dispatcher that
//! hands `/c/{slug}/...` to the channel's own router.
//!
//! Who may call what: `GET /api/admin/channels` and `POST /api/admin/channels/{create,update,delete}`
//! take the server admin's credentials only (they are registered on the default channel's registry,
//! whose admin check knows no channel password); `GET /api/channels` is public and lists public
//! channels only; `/c/{slug}/...` is whatever the channel's own route says (its admin routes take that
//! channel's admin password or the server admin's).
//!
//! The channels' fast lane ([`ChannelLane`], at `/c/`): a viewer's `GET`/`HEAD` of a channel's HLS
//! (`/c/{slug}/hls/...`) goes straight to the channel's own lane behind its gate, as the default
//! channel's `/hls/` does, without the root router, its middleware, the dispatcher and the channel's
//! router (`http::lanes`); the same answer, at the default channel's speed.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, OriginalUri, Path, Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tower::ServiceExt;
use utoipa::ToSchema;

use super::{db, ChannelHost, ChannelRow, Channels, Visibility};
use crate::http::{parse_json, ApiError, Auth, BodyDoc, Registry, StatusResponse};
use crate::media::{ChannelId, SlugError};

const GROUP: &str = "channels";

/// A channel as the server admin's list shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminChannel {
    pub slug: String,
    pub name: String,
    pub visibility: Visibility,
    pub online: bool,
    pub stream_title: String,
    pub viewer_count: u64,
    /// The channel's viewer page.
    pub url: String,
    /// The default channel (today's castd, at `/`).
    pub default: bool,
    /// When the server admin made it (absent for the default channel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

/// A channel as the public list shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicChannel {
    pub slug: String,
    pub name: String,
    /// `public`, or `password`/`token` (a viewing pass is needed: no title, thumbnail or viewer count).
    pub visibility: Visibility,
    pub online: bool,
    /// Empty for a channel that needs a viewing pass (its title is for its viewers).
    pub stream_title: String,
    pub viewer_count: u64,
    /// The channel's viewer page.
    pub url: String,
    /// Its current thumbnail (while live; empty for a channel that needs a viewing pass).
    pub thumbnail: String,
}

/// `POST /api/admin/channels/create`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateChannel {
    /// `[a-z0-9-]{1,32}`, not `default` (taken by the default channel: 409).
    #[schema(pattern = "^[a-z0-9-]{1,32}$")]
    pub slug: String,
    /// 1 to 100 characters; control characters are removed, spaces around it trimmed.
    #[schema(pattern = r"[^\s\x00-\x1f\x7f-\x9f]", max_length = 100)]
    pub name: String,
    /// The channel admin's password (Basic `admin` on `/c/{slug}/api/admin/*`): 1 to 72 bytes (bcrypt's limit).
    #[schema(min_length = 1, max_length = 72)]
    pub admin_password: String,
    #[serde(default)]
    pub visibility: Option<Visibility>,
}

/// `POST /api/admin/channels/update`: the fields given change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateChannel {
    #[schema(pattern = "^[a-z0-9-]{1,32}$")]
    pub slug: String,
    #[serde(default)]
    #[schema(pattern = r"[^\s\x00-\x1f\x7f-\x9f]", max_length = 100)]
    pub name: Option<String>,
    #[serde(default)]
    pub visibility: Option<Visibility>,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 72)]
    pub admin_password: Option<String>,
}

/// `POST /api/admin/channels/delete`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteChannel {
    #[schema(pattern = "^[a-z0-9-]{1,32}$")]
    pub slug: String,
    /// Also remove the channel's files (replays, clips, uploads); without it they are moved aside to
    /// `channels/.deleted/{slug}-{unix time}/` in the data folder (a new channel with the slug starts
    /// empty).
    #[serde(default)]
    pub purge: bool,
}

/// The state of the server admin's channel routes: the registry, and the composition root's host that
/// opens, purges and retires a channel's stack.
#[derive(Clone)]
pub struct ChannelAdmin {
    pub channels: Arc<Channels>,
    pub host: Arc<dyn ChannelHost>,
}

pub fn routes(reg: &mut Registry, channels: Arc<Channels>, host: Arc<dyn ChannelHost>) {
    // A channel viewer's playlist and segment requests skip the router (see the module doc).
    reg.lane("/c/", Arc::new(ChannelLane(channels.clone())));
    reg.schema::<AdminChannel>();
    reg.schema::<PublicChannel>();
    reg.schema::<CreateChannel>();
    reg.schema::<UpdateChannel>();
    reg.schema::<DeleteChannel>();
    let mut reg = reg.scope(ChannelAdmin { channels, host });
    reg.get("/api/channels", GROUP, Auth::Public, "The public channels, live first", public_list)
        .returns_list::<PublicChannel>();
    reg.get("/api/admin/channels", GROUP, Auth::Admin, "Every channel (server admin)", admin_list)
        .returns_list::<AdminChannel>();
    reg.post(
        "/api/admin/channels/create",
        GROUP,
        Auth::Admin,
        "Create a channel (server admin)",
        BodyDoc::Schema("CreateChannel"),
        create,
    )
    .returns::<StatusResponse>()
    .error(409, "The slug is taken");
    reg.post(
        "/api/admin/channels/update",
        GROUP,
        Auth::Admin,
        "Rename a channel, change its visibility or its admin password (server admin)",
        BodyDoc::Schema("UpdateChannel"),
        update,
    )
    .returns::<StatusResponse>()
    .error(404, "No such channel");
    reg.post(
        "/api/admin/channels/delete",
        GROUP,
        Auth::Admin,
        "Delete an offline channel (server admin); its files only with purge",
        BodyDoc::Schema("DeleteChannel"),
        delete,
    )
    .returns::<StatusResponse>()
    .error(404, "No such channel")
    .error(409, "The channel is live");
}

/// The channel paths the channels' lane takes: a slug, then one of these.
const LANE_PATHS: &[&str] = &["/hls/"];

/// The channels' fast lane (see the module doc): registered at `/c/`, it takes `/c/{slug}/hls/...`.
pub struct ChannelLane(pub Arc<Channels>);

/// `(slug, the channel's own path)` of `/c/{slug}/...`.
fn split_channel_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/c/")?;
    let slash = rest.find('/')?;
    Some((&rest[..slash], &rest[slash..]))
}

impl crate::http::lanes::Lane for ChannelLane {
    fn takes(&self, path: &str) -> bool {
        split_channel_path(path).is_some_and(|(_, own)| LANE_PATHS.iter().any(|p| own.starts_with(p)))
    }

    fn serve(&self, req: Request, peer: SocketAddr) -> crate::http::lanes::LaneFuture {
        let (mut parts, body) = req.into_parts();
        let original = parts.uri.clone();
        let Some((slug, own)) = split_channel_path(original.path()) else {
            return Box::pin(async { ApiError::NotFound("no such channel".into()).into_response() });
        };
        let lane = ChannelId::new(slug).ok().and_then(|id| self.0.get(&id)).and_then(|ch| ch.lane(own));
        let Some(lane) = lane else {
            return Box::pin(async { ApiError::NotFound("no such channel".into()).into_response() });
        };
        let path = match original.query() {
            Some(q) => format!("{own}?{q}"),
            None => own.to_string(),
        };
        match path.parse::<Uri>() {
            Ok(uri) => parts.uri = uri,
            Err(_) => return Box::pin(async { ApiError::bad("a path castd cannot read").into_response() }),
        }
        parts.extensions.insert(OriginalUri(original));
        lane.serve(Request::from_parts(parts, body), peer)
    }
}

/// The dispatcher of `/c/{slug}` and `/c/{slug}/...` (not an OpenAPI route: each channel's own document
/// is at `/c/{slug}/api/openapi.json`).
pub fn dispatcher(channels: Arc<Channels>) -> axum::Router {
    axum::Router::new()
        .route("/c/{slug}", axum::routing::any(to_slash))
        .route("/c/{slug}/", axum::routing::any(dispatch_root))
        .route("/c/{slug}/{*rest}", axum::routing::any(dispatch))
        .with_state(channels)
}

async fn to_slash(Path(slug): Path<String>) -> Response {
    match ChannelId::new(&slug) {
        Ok(id) => (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, format!("/c/{id}/"))]).into_response(),
        Err(_) => ApiError::NotFound("no such channel".into()).into_response(),
    }
}

async fn dispatch_root(State(channels): State<Arc<Channels>>, Path(slug): Path<String>, req: Request) -> Response {
    forward(&channels, &slug, "", req).await
}

async fn dispatch(
    State(channels): State<Arc<Channels>>,
    Path((slug, rest)): Path<(String, String)>,
    req: Request,
) -> Response {
    forward(&channels, &slug, &rest, req).await
}

/// Hand `req` to channel `slug`'s router at `/<rest>` (the query kept; the original URI in the
/// request's `OriginalUri`).
async fn forward(channels: &Channels, slug: &str, rest: &str, req: Request) -> Response {
    let Some(channel) = ChannelId::new(slug).ok().and_then(|id| channels.get(&id)) else {
        return ApiError::NotFound("no such channel".into()).into_response();
    };
    let (mut parts, body) = req.into_parts();
    let original = parts.extensions.remove::<OriginalUri>().unwrap_or_else(|| OriginalUri(parts.uri.clone()));
    let path = match parts.uri.query() {
        Some(q) => format!("/{rest}?{q}"),
        None => format!("/{rest}"),
    };
    match path.parse::<Uri>() {
        Ok(uri) => parts.uri = uri,
        Err(_) => return ApiError::bad("a path castd cannot read").into_response(),
    }
    parts.extensions = connection_extensions(&mut parts.extensions);
    // The path as the client wrote it (`/c/{slug}/...`) stays known to the channel's routes: an
    // inbox checks the HTTP signature over it.
    parts.extensions.insert(original);
    let req = Request::from_parts(parts, body);
    let mut resp = match channel.router().oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    under_prefix(slug, &mut resp);
    resp
}

/// A redirect to a root-relative path (`/admin/`, a WHIP session's `/whip/{id}`) points under channel
/// `slug`'s prefix: the channel's routes answer as if they were at the root. A `Location` already under
/// the prefix (the web pages' own redirects know their base) stays.
fn under_prefix(slug: &str, resp: &mut Response) {
    let Some(location) = resp.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()) else {
        return;
    };
    let prefix = format!("/c/{slug}");
    if !location.starts_with('/')
        || location.starts_with("//")
        || location == prefix
        || location.starts_with(&format!("{prefix}/"))
    {
        return;
    }
    if let Ok(v) = header::HeaderValue::from_str(&format!("{prefix}{location}")) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
}

/// What the connection put in a request's extensions (the peer's address, a websocket upgrade), and
/// nothing the root router added: axum appends a router's path parameters to those already there, so
/// the dispatcher's `{slug}` and `{*rest}` would reach the channel's handlers before their own (a
/// channel route extracting one `Path` would see three and answer 500).
fn connection_extensions(from: &mut axum::http::Extensions) -> axum::http::Extensions {
    let mut kept = axum::http::Extensions::new();
    if let Some(peer) = from.remove::<ConnectInfo<SocketAddr>>() {
        kept.insert(peer);
    }
    if let Some(upgrade) = from.remove::<hyper::upgrade::OnUpgrade>() {
        kept.insert(upgrade);
    }
    kept
}

fn url_of(slug: &ChannelId) -> String {
    format!("{}/", slug.base_path())
}

/// A channel as the public list shows it: nothing of an unlisted one; of a password or token channel
/// its name and whether it is live (its title and thumbnail need a viewing pass).
fn listed(slug: &ChannelId, c: &dyn super::Channel) -> Option<PublicChannel> {
    let s = c.status();
    let visibility = s.visibility;
    if visibility == Visibility::Unlisted {
        return None;
    }
    let private = visibility.needs_pass();
    let prefix = slug.base_path();
    Some(PublicChannel {
        url: url_of(slug),
        thumbnail: if private { String::new() } else { format!("{prefix}/thumbnail.jpg") },
        slug: slug.to_string(),
        name: s.name,
        visibility,
        online: s.online,
        stream_title: if private { String::new() } else { s.stream_title },
        viewer_count: if private { 0 } else { s.viewer_count },
    })
}

async fn public_list(State(admin): State<ChannelAdmin>) -> Json<Vec<PublicChannel>> {
    let mut out = Vec::new();
    for (id, c) in admin.channels.every() {
        out.extend(listed(&id, c.as_ref()));
    }
    // Live first; then by name.
    out.sort_by(|a, b| b.online.cmp(&a.online).then_with(|| a.name.to_lowercase().cmp(&b.name.to_lowercase())));
    Json(out)
}

async fn admin_list(State(admin): State<ChannelAdmin>) -> Json<Vec<AdminChannel>> {
    let channels = &admin.channels;
    let mut out = Vec::new();
    if let Some(d) = channels.channel(&ChannelId::default_channel()) {
        let s = d.status();
        out.push(AdminChannel {
            slug: ChannelId::DEFAULT.into(),
            name: s.name,
            visibility: d.settings().get().access.visibility,
            online: s.online,
            stream_title: s.stream_title,
            viewer_count: s.viewer_count,
            url: "/".into(),
            default: true,
            created_at: None,
        });
    }
    for (row, c) in channels.all() {
        let s = c.status();
        out.push(AdminChannel {
            url: url_of(&row.slug),
            slug: row.slug.to_string(),
            name: s.name,
            visibility: c.settings().get().access.visibility,
            online: s.online,
            stream_title: s.stream_title,
            viewer_count: s.viewer_count,
            default: false,
            created_at: Some(row.created_at.to_rfc3339()),
        });
    }
    Json(out)
}

/// A slug the server admin may give a new channel.
fn new_slug(slug: &str) -> Result<ChannelId, ApiError> {
    match ChannelId::made(slug) {
        Ok(id) => Ok(id),
        Err(SlugError::Default) => {
            Err(ApiError::Conflict("'default' is the default channel's slug; choose another".into()))
        }
        Err(SlugError::Bad(e)) => Err(ApiError::bad(e.to_string())),
    }
}

/// A channel name: its control characters removed and the spaces around it trimmed, then 1 to 100
/// characters.
fn name_of(name: &str) -> Result<String, ApiError> {
    let name: String = name.chars().filter(|c| !c.is_control()).collect();
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::bad("the channel name must be 1 to 100 characters (besides control characters)"));
    }
    Ok(name.to_string())
}

/// The bcrypt hash of a channel admin password (on the hash's own pool).
async fn hash_password(pw: &str) -> Result<String, ApiError> {
    if pw.is_empty() {
        return Err(ApiError::bad("adminPassword must not be empty"));
    }
    crate::password::hash_pooled(pw)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?
        .map_err(|e| ApiError::bad(e.to_string()))
}

async fn create(State(admin): State<ChannelAdmin>, body: Bytes) -> Result<Json<StatusResponse>, ApiError> {
    let (channels, host) = (&admin.channels, &admin.host);
    let req: CreateChannel = parse_json(&body)?;
    let slug = new_slug(&req.slug)?;
    let name = name_of(&req.name)?;
    let hash = hash_password(&req.admin_password).await?;
    let row = ChannelRow {
        slug: slug.clone(),
        name: name.clone(),
        visibility: req.visibility.unwrap_or(Visibility::Public),
        created_at: chrono::Utc::now(),
    };
    let r = row.clone();
    if !channels.store.call(move |c| db::insert(c, &r)).await? {
        return Err(ApiError::Conflict(format!("a channel '{slug}' exists already")));
    }
    // A new channel starts from nothing: a folder its slug still has (a channel deleted by an older
    // castd, which kept it in place) is moved aside, never opened as the new channel's.
    match host.retire(&slug) {
        Ok(Some(aside)) => tracing::warn!(
            channel = %slug,
            "the slug's old data folder was moved aside to {} (a new channel starts empty)",
            aside.display()
        ),
        Ok(None) => {}
        Err(e) => {
            let s = slug.clone();
            let _ = channels.store.call(move |c| db::delete(c, &s)).await;
            return Err(ApiError::Internal(format!("cannot move channel {slug}'s old folder aside: {e}")));
        }
    }
    let visibility = row.visibility;
    let opened = host.open(&row).and_then(|ch| {
        ch.set_name(name)?;
        ch.set_admin_password(hash)?;
        ch.settings()
            .update_blocking(|s| s.access.visibility = visibility)
            .map_err(|e| super::ChannelsError::Open(e.to_string()))?;
        Ok(ch)
    });
    match opened {
        Ok(ch) => {
            channels.insert(row, ch);
            tracing::info!(channel = %slug, "the server admin created a channel");
            Ok(StatusResponse::ok(format!("channel {slug} created: /c/{slug}/")))
        }
        Err(e) => {
            let s = slug.clone();
            let _ = channels.store.call(move |c| db::delete(c, &s)).await;
            Err(ApiError::Internal(format!("cannot open channel {slug}: {e}")))
        }
    }
}

async fn update(State(admin): State<ChannelAdmin>, body: Bytes) -> Result<Json<StatusResponse>, ApiError> {
    let channels = &admin.channels;
    let req: UpdateChannel = parse_json(&body)?;
    let slug = ChannelId::new(&req.slug).map_err(|e| ApiError::bad(e.to_string()))?;
    let (mut row, ch) = channels.entry(&slug).ok_or_else(|| ApiError::NotFound(format!("no channel '{slug}'")))?;
    let hash = match req.admin_password.as_deref() {
        Some(pw) => Some(hash_password(pw).await?),
        None => None,
    };
    if let Some(name) = &req.name {
        row.name = name_of(name)?;
    }
    if let Some(v) = req.visibility {
        row.visibility = v;
    }
    let r = row.clone();
    if !channels.store.call(move |c| db::update(c, &r)).await? {
        return Err(ApiError::NotFound(format!("no channel '{slug}'")));
    }
    if req.name.is_some() {
        ch.set_name(row.name.clone()).map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    if let Some(h) = hash {
        ch.set_admin_password(h).map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    if let Some(v) = req.visibility {
        ch.settings().update_blocking(|s| s.access.visibility = v).map_err(|e| ApiError::Internal(e.to_string()))?;
    }
    channels.set_row(row);
    Ok(StatusResponse::ok(format!("channel {slug} updated")))
}

async fn delete(State(admin): State<ChannelAdmin>, body: Bytes) -> Result<Json<StatusResponse>, ApiError> {
    let (channels, host) = (&admin.channels, &admin.host);
    let req: DeleteChannel = parse_json(&body)?;
    let slug = match ChannelId::made(&req.slug) {
        Ok(slug) => slug,
        Err(SlugError::Default) => return Err(ApiError::Conflict("the default channel cannot be deleted".into())),
        Err(SlugError::Bad(e)) => return Err(ApiError::bad(e.to_string())),
    };
    let ch = channels.get(&slug).ok_or_else(|| ApiError::NotFound(format!("no channel '{slug}'")))?;
    if ch.is_live() {
        return Err(ApiError::Conflict(format!("channel {slug} is live: disconnect its broadcaster first")));
    }
    channels.remove(&slug);
    ch.close().await;
    let s = slug.clone();
    channels.store.call(move |c| db::delete(c, &s)).await?;
    // Either way the slug's folder is gone: a channel made with the slug later starts from nothing.
    let aside = if req.purge {
        host.purge(&slug).map_err(|e| ApiError::Internal(e.to_string()))?;
        None
    } else {
        host.retire(&slug).map_err(|e| ApiError::Internal(e.to_string()))?
    };
    tracing::info!(channel = %slug, purge = req.purge, "the server admin deleted a channel");
    Ok(StatusResponse::ok(match aside {
        None if req.purge => format!("channel {slug} deleted with its files"),
        None => format!("channel {slug} deleted (it had no files)"),
        Some(dir) => {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            format!(
                "channel {slug} deleted; its files were moved to channels/.deleted/{name} in the data folder \
                 (the server admin may restore or remove them; a new channel '{slug}' starts empty)"
            )
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::lanes::Lane;

    /// The channels' lane takes a channel's HLS and nothing else under `/c/` (the rest is the
    /// dispatcher's: pages, the API, the chat socket).
    #[test]
    fn the_channels_lane_takes_a_channels_hls_only() {
        assert_eq!(split_channel_path("/c/music/hls/0/stream.m3u8"), Some(("music", "/hls/0/stream.m3u8")));
        assert_eq!(split_channel_path("/c/music"), None);
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("c.db")).unwrap();
        let lane = ChannelLane(Channels::open(store).unwrap());
        assert!(lane.takes("/c/music/hls/0/stream.m3u8"));
        assert!(lane.takes("/c/music/hls/stream.m3u8"));
        for path in ["/c/music/", "/c/music/api/status", "/c/music/ws", "/c/music/hlsx", "/c/music", "/c/"] {
            assert!(!lane.takes(path), "{path}");
        }
    }
}
