//! Clips: a window of a replay in media seconds, played without re-encoding.
//!
//! Creation follows Owncast's `AddClip` exactly (checks in its order, its messages and status codes):
//! replay features off → 404; clips disabled → 200 `success:false`; a body that does not decode → 200
//! "unable to create clip"; unknown stream → 400 (also, for viewers and bots, a replay they may not
//! watch: clips are public, so only the live broadcast and public replays may be clipped — castd's
//! replays can be private, Owncast's are admin-only and clipped while live); no recorded media → 400; the window (start ≥ 0, end
//! after start, start before the end of the media; the end clamped to the media, an over-long window
//! keeps its newest `max` seconds); the permission level (403; moderators always pass, `established`
//! means an account at least an hour old); then 6 clips a minute per IP with a burst of 3 (429).
//! `POST /api/integrations/clips` (castd, `HAS_ADMIN_ACCESS`) and `POST /api/admin/clips/create` (castd, the
//! admin's player) take the same body without the permission level and the rate limit; only the admin's
//! form may clip a replay that is not public. A thumbnail is made in the background (ffmpeg, one frame 480
//! px wide, from the clip's first segment of the best variant).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::db::{self, ClipRow};
use super::serve::{not_found, playlist_response, read_id, safe_name, segment_uri, serve_file};
use super::{playlist, Replays};
use crate::events::chat::User;
use crate::http::auth::TokenQuery;
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, Registry, StatusResponse, ValueDoc};
use crate::tokens::{authorize, Tokens, HAS_ADMIN_ACCESS};

const GROUP: &str = "clips";
/// Sustained clips per minute per IP (Owncast).
pub const CLIPS_PER_MINUTE: f64 = 6.0;
/// Clips back to back per IP (Owncast).
pub const CLIP_BURST: f64 = 3.0;
/// An idle limiter is dropped after this long (Owncast).
const LIMITER_TTL: Duration = Duration::from_secs(30 * 60);
/// `established`: the account is at least this old (Owncast's `MinClipperAccountAge`).
pub const MIN_ACCOUNT_AGE: chrono::TimeDelta = chrono::TimeDelta::hours(1);
/// Owncast's chat token cookie.
const CHAT_TOKEN_COOKIE: &str = "owncast_chat_token";

/// Per-IP token buckets.
#[derive(Default)]
pub struct RateLimits {
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl RateLimits {
    /// Whether `ip` may create a clip now (and count it).
    pub fn allow(&mut self, ip: IpAddr, now: Instant) -> bool {
        self.buckets.retain(|_, (_, seen)| now.duration_since(*seen) <= LIMITER_TTL);
        let (tokens, last) = self.buckets.entry(ip).or_insert((CLIP_BURST, now));
        let refill = now.duration_since(*last).as_secs_f64() * CLIPS_PER_MINUTE / 60.0;
        *tokens = (*tokens + refill).min(CLIP_BURST);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

pub use crate::events::replays::Clip;

/// The body of `POST /api/clip` (Owncast's `AddClipJSONBody`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AddClip {
    pub stream_id: String,
    pub clip_title: String,
    pub relative_start_time_seconds: f32,
    pub relative_end_time_seconds: f32,
}

/// `{success, message, id, durationSeconds}`: a clip was created.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClipCreated {
    pub success: bool,
    pub message: String,
    pub id: String,
    pub duration_seconds: i64,
}

/// The window as Owncast resolves it (see the module doc).
pub fn resolve_window(start: f32, end: f32, media_end: f64, max: f32) -> Result<(f32, f32), &'static str> {
    if start < 0.0 {
        return Err("start time must not be negative");
    }
    if end <= start {
        return Err("end time must be after start time");
    }
    if f64::from(start) >= media_end {
        return Err("start time is after the known end of the stream");
    }
    let end = (f64::from(end).min(media_end)) as f32;
    let start = if end - start > max { end - max } else { start };
    Ok((start, end))
}

/// Why `user` may not clip under `permissions` (Owncast's `clipPermissionDenialReason`), `None` if it may.
pub fn denial(user: Option<&User>, permissions: &str, now: DateTime<Utc>) -> Option<&'static str> {
    let Some(user) = user else { return Some("clip creation requires joining chat first") };
    if !user.is_enabled() {
        return Some("clip creation is not available");
    }
    if user.is_moderator {
        return None;
    }
    match permissions {
        "moderators" => Some("clip creation is limited to moderators"),
        "authenticated" if !user.authenticated => Some("clip creation is limited to authenticated viewers"),
        "authenticated" => None,
        _ if now - user.created_at < MIN_ACCOUNT_AGE => Some("your account is too new to create clips"),
        _ => None,
    }
}

impl Replays {
    /// A clip's JSON without its thumbnail; `manifest` and `download` are absolute paths under this
    /// channel's base path (the default channel's: `/clip/{id}`).
    pub fn clip_bare_json(&self, c: ClipRow) -> Clip {
        let base = &self.base_path;
        Clip {
            manifest: format!("{base}/clip/{}", c.id),
            download: format!("{base}/clip/{}/download.mp4", c.id),
            thumbnail: None,
            duration_seconds: (c.end - c.start).round() as i64,
            id: c.id,
            stream_id: c.stream_id,
            clipped_by: c.clipped_by,
            title: c.title,
            stream_title: c.stream_title,
            relative_start_time: c.start,
            relative_end_time: c.end,
            timestamp: c.timestamp,
        }
    }
}

impl Replays {
    fn clip_json(&self, c: ClipRow) -> Clip {
        let has_thumb = self.thumbnail_path(&c.stream_id, &c.id).exists();
        let mut clip = self.clip_bare_json(c);
        if has_thumb {
            clip.thumbnail = Some(format!("{}/clip-thumbnail/{}.jpg", self.base_path, clip.id));
        }
        clip
    }
}

/// The routes' state: the feature and the integration tokens.
#[derive(Clone)]
pub struct ClipsCtx {
    pub r: Arc<Replays>,
    pub tokens: Tokens,
}

pub fn routes(reg: &mut Registry, r: Arc<Replays>, tokens: Tokens) {
    let mut reg = reg.scope(ClipsCtx { r, tokens });
    reg.schema::<Clip>();
    reg.schema::<AddClip>();
    reg.schema::<ClipCreated>();
    reg.post(
        "/api/clip",
        GROUP,
        Auth::User,
        "Create a clip (Owncast's rules: window, permissions, 6/min per IP); the chat user from the \
         owncast_chat_token cookie or ?accessToken=",
        BodyDoc::Schema("AddClip"),
        add_clip,
    )
    .query("accessToken", false, ValueDoc::String)
    .optional_body()
    .returns::<ClipCreated>()
    .error(
        400,
        "unknown stream (or a replay that is neither live nor public), no recorded media, or a window outside it \
         (Owncast's messages)",
    )
    .error(403, "the chat user's permission level is too low")
    .error(429, "more than 6 clips a minute from one address")
    .error(404, "replay features are off (Owncast answers 404)");
    reg.post(
        "/api/integrations/clips",
        GROUP,
        Auth::Integration(HAS_ADMIN_ACCESS),
        "castd: create a clip as a bot (same body; no permission level, no rate limit; only of the live \
         broadcast or a public replay)",
        BodyDoc::Schema("AddClip"),
        add_clip_integration,
    )
    .optional_body()
    .returns::<ClipCreated>()
    .error(
        400,
        "a body that does not decode, an unknown stream (or a replay that is neither live nor public), no recorded \
         media, or a window outside it",
    )
    .error(403, "clip creation is disabled")
    .error(404, "replay features are off (Owncast answers 404)");
    reg.post(
        "/api/admin/clips/create",
        GROUP,
        Auth::Admin,
        "castd: the admin cuts a clip (same body; no permission level, no rate limit; clippedBy is the server name)",
        BodyDoc::Schema("AddClip"),
        add_clip_admin,
    )
    .optional_body()
    .returns::<ClipCreated>()
    .error(400, "a body that does not decode, an unknown stream, no recorded media, or a window outside it")
    .error(403, "clip creation is disabled")
    .error(404, "replay features are off (Owncast answers 404)");
    reg.get("/api/clips", GROUP, Auth::Public, "Every clip, newest first", list)
        .returns_list::<Clip>()
        .error(404, "replay features are off (Owncast answers 404)");
    reg.get("/api/clips/{clip_id}", GROUP, Auth::Public, "One clip", details)
        .path_param("clip_id", ValueDoc::String)
        .returns::<Clip>()
        .error(404, "no such clip");
    reg.get(
        "/api/clips/{clip_id}/chat",
        GROUP,
        Auth::Public,
        "castd: the chat of a clip's window, each message's offset from the clip's start (clips are public)",
        chat,
    )
    .path_param("clip_id", ValueDoc::String)
    .returns::<super::api::ReplayChat>()
    .error(404, "no such clip");
    reg.get("/api/admin/clips", GROUP, Auth::Admin, "Every clip, newest first", list)
        .returns_list::<Clip>()
        .error(404, "replay features are off (Owncast answers 404)");
    reg.post("/api/admin/clips/delete", GROUP, Auth::Admin, "Delete a clip", BodyDoc::Schema("IdBody"), delete)
        .error(404, "clip not found");
    reg.get("/clip/{clip_id}", GROUP, Auth::Public, "A clip's master playlist", master)
        .path_param("clip_id", ValueDoc::String)
        .error(404, "no such clip");
    reg.get("/clip/{clip_id}/{variant}", GROUP, Auth::Public, "A clip's media playlist (VOD)", media)
        .path_param("clip_id", ValueDoc::String)
        .path_param("variant", ValueDoc::String)
        .error(404, "no such clip");
    reg.get("/clip/{clip_id}/{variant}/{file}", GROUP, Auth::Public, "A segment of a clip", file)
        .path_param("clip_id", ValueDoc::String)
        .path_param("variant", ValueDoc::String)
        .path_param("file", ValueDoc::String)
        .error(404, "no such file");
    reg.get("/clip-thumbnail/{file}", GROUP, Auth::Public, "A clip's thumbnail (`{clipId}.jpg`)", thumbnail)
        .path_param("file", ValueDoc::String)
        .error(404, "no such thumbnail");
    reg.get("/clips/{clip_id}", GROUP, Auth::Public, "A clip's page (OpenGraph for link previews)", page)
        .path_param("clip_id", ValueDoc::String)
        .error(404, "no such clip");
}

/// Who asked for a clip.
enum Clipper {
    /// A viewer: the chat user (if any) and the client address.
    Viewer(Option<User>, Option<IpAddr>),
    /// A bot (integration token): its display name.
    Bot(String),
    /// The admin (the server's name): may clip any replay.
    Admin(String),
}

/// Whether a viewer or a bot may clip `replay`: a public replay, or the broadcast that is live now
/// (`live` is the stream id while online; Owncast's clip button clips the live stream, whose id
/// `/api/status` shows). A finished replay the admin has not made public is not clippable by them.
pub fn clippable(replay: &db::ReplayRow, live: Option<&str>) -> bool {
    replay.public || (replay.status == db::RECORDING && live == Some(replay.id.as_str()))
}

fn chat_token(headers: &HeaderMap, query: &TokenQuery) -> Option<String> {
    if let Some(t) = query.access_token.as_ref().filter(|t| !t.is_empty()) {
        return Some(t.clone());
    }
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == CHAT_TOKEN_COOKIE && !v.is_empty()).then(|| v.to_string())
    })
}

/// 200 `{success:false, message}` (Owncast's simple response with the default status).
fn simple(message: &str) -> Response {
    Json(StatusResponse { success: false, message: message.into() }).into_response()
}

fn status(code: StatusCode, message: &str) -> Response {
    (code, Json(StatusResponse { success: false, message: message.into() })).into_response()
}

async fn add_clip(
    State(ctx): State<ClipsCtx>,
    ClientIp(ip): ClientIp,
    Query(q): Query<TokenQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let user = match chat_token(&headers, &q) {
        Some(token) => ctx.r.users.user(&token).await,
        None => None,
    };
    create(&ctx.r, Clipper::Viewer(user, ip), &body, Answers::Owncast).await
}

async fn add_clip_integration(
    State(ctx): State<ClipsCtx>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let token = authorize(&ctx.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    create(&ctx.r, Clipper::Bot(token.display_name), &body, Answers::Castd).await
}

async fn add_clip_admin(State(ctx): State<ClipsCtx>, body: Bytes) -> Result<Response, ApiError> {
    let name = ctx.r.settings.get().instance.name.clone();
    create(&ctx.r, Clipper::Admin(name), &body, Answers::Castd).await
}

/// How a creation route answers a disabled feature and a body that does not decode: Owncast's
/// `POST /api/clip` with 200 `success:false` (its fixed answers), castd's own routes (bots, the admin)
/// with 403 and 400, as every other castd route does.
#[derive(Clone, Copy, PartialEq)]
enum Answers {
    Owncast,
    Castd,
}

async fn create(r: &Arc<Replays>, who: Clipper, body: &[u8], answers: Answers) -> Result<Response, ApiError> {
    if !r.enabled() {
        return Ok(not_found());
    }
    let settings = r.settings.get();
    let s = &settings.replay;
    if !s.clips_enabled {
        if answers == Answers::Castd {
            return Ok(status(StatusCode::FORBIDDEN, "clip creation is disabled"));
        }
        return Ok(simple("clip creation is disabled"));
    }
    let Ok(req) = serde_json::from_slice::<AddClip>(body) else {
        if answers == Answers::Castd {
            return Err(ApiError::bad(
                "unable to create clip: the body must be {streamId, relativeStartTimeSeconds, relativeEndTimeSeconds, clipTitle}",
            ));
        }
        return Ok(simple("unable to create clip"));
    };
    let sid = req.stream_id.clone();
    let found = if safe_name(&sid) { r.store.call(move |c| db::replay(c, &sid)).await? } else { None };
    let Some(replay) = found else { return Err(ApiError::bad("stream not found")) };
    // Clips are public: a viewer or a bot may clip only what anyone may watch (see `clippable`). A
    // replay that is not is answered as unknown, so its existence is not revealed either.
    let live = r.stream.borrow().stream_id.clone();
    if !matches!(who, Clipper::Admin(_)) && !clippable(&replay, live.as_deref()) {
        return Err(ApiError::bad("stream not found"));
    }
    let sid = replay.id.clone();
    let media_end = r.store.call(move |c| db::media_end(c, &sid)).await?;
    if media_end <= 0.0 {
        return Err(ApiError::bad("stream has no recorded video to clip yet"));
    }
    let (start, end) = resolve_window(
        req.relative_start_time_seconds,
        req.relative_end_time_seconds,
        media_end,
        s.max_clip_duration_seconds as f32,
    )
    .map_err(ApiError::bad)?;
    let (clipped_by, viewer) = match &who {
        Clipper::Viewer(user, ip) => {
            if let Some(why) = denial(user.as_ref(), &s.clip_permissions, Utc::now()) {
                return Ok(status(StatusCode::FORBIDDEN, why));
            }
            let ip = ip.unwrap_or(IpAddr::from([0, 0, 0, 0]));
            if !r.limits.lock().allow(ip, Instant::now()) {
                return Ok(status(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many clips created, please wait before creating another",
                ));
            }
            (user.as_ref().map(|u| u.display_name.clone()).unwrap_or_default(), true)
        }
        Clipper::Bot(name) | Clipper::Admin(name) => (name.clone(), false),
    };
    let row = ClipRow {
        id: crate::password::random_token(10),
        stream_id: replay.id.clone(),
        clipped_by,
        title: req.clip_title.trim().chars().take(200).collect(),
        stream_title: replay.stream_title.clone(),
        start: f64::from(start),
        end: f64::from(end),
        timestamp: Utc::now(),
    };
    let insert = row.clone();
    r.store.call(move |c| db::insert_clip(c, &insert)).await?;
    let duration = (row.end - row.start).round() as i64;
    tracing::info!(clip = %row.id, replay = %row.stream_id, start, end, "clip created");
    r.clip_created(&row, viewer);
    spawn_thumbnail(r, row.clone());
    Ok(Json(ClipCreated { success: true, message: "clip created".into(), id: row.id, duration_seconds: duration })
        .into_response())
}

/// Make the clip's thumbnail in the background.
fn spawn_thumbnail(r: &Arc<Replays>, clip: ClipRow) {
    let r2 = r.clone();
    r.tasks.spawn(crate::tasks::Stage::Background, "clip thumbnail", async move {
        if let Err(e) = make_thumbnail(&r2, &clip).await {
            tracing::warn!(clip = %clip.id, "no clip thumbnail: {e}");
        }
    });
}

async fn make_thumbnail(r: &Arc<Replays>, clip: &ClipRow) -> Result<(), String> {
    let sid = clip.stream_id.clone();
    let (replay, variants) =
        r.store.call(move |c| Ok((db::replay(c, &sid)?, db::variants(c, &sid)?))).await.map_err(|e| e.to_string())?;
    let replay = replay.ok_or("the replay is gone")?;
    let v = playlist::best_variant(&replay.master, &variants).ok_or("no variant")?;
    let sid = clip.stream_id.clone();
    let segs = r.store.call(move |c| db::segments(c, &sid, v)).await.map_err(|e| e.to_string())?;
    let first = playlist::window(&segs, clip.start, clip.end).into_iter().next().ok_or("no segment")?;
    let out = r.thumbnail_path(&clip.stream_id, &clip.id);
    if let Some(dir) = out.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(|e| e.to_string())?;
    }
    // The segment from the bucket when the replay lives there, else the local file.
    let input = match &replay.remote_base {
        Some(base) => format!("{base}{v}/{}", first.file),
        None => r.variant_dir(&clip.stream_id, v as usize).join(&first.file).to_string_lossy().into_owned(),
    };
    let seek = (clip.start - first.media_offset).max(0.0);
    // One ffmpeg child for thumbnails at a time, however many clips are made at once.
    let _one_at_a_time = r.thumbnails.acquire().await.map_err(|e| e.to_string())?;
    let tmp = out.with_extension("tmp.jpg");
    let mut cmd = tokio::process::Command::new("ffmpeg");
    cmd.args(["-hide_banner", "-loglevel", "error", "-y"]);
    if let Some(init) = &first.init {
        // fMP4: the init segment and the media segment, concatenated.
        let init_path = r.variant_dir(&clip.stream_id, v as usize).join(init);
        let joined = out.with_extension("tmp.mp4");
        let mut bytes = tokio::fs::read(&init_path).await.map_err(|e| e.to_string())?;
        bytes.extend(tokio::fs::read(&input).await.map_err(|e| e.to_string())?);
        tokio::fs::write(&joined, bytes).await.map_err(|e| e.to_string())?;
        cmd.arg("-i").arg(&joined);
    } else {
        cmd.arg("-i").arg(&input);
    }
    cmd.args(["-ss", &format!("{seek:.3}"), "-frames:v", "1", "-vf", "scale=480:-2", "-f", "image2"]).arg(&tmp);
    cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let status = tokio::time::timeout(Duration::from_secs(30), cmd.status())
        .await
        .map_err(|_| "ffmpeg timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = tokio::fs::remove_file(out.with_extension("tmp.mp4")).await;
    if !status.success() {
        return Err(format!("ffmpeg exited with {status}"));
    }
    tokio::fs::rename(&tmp, &out).await.map_err(|e| e.to_string())
}

async fn list(State(ctx): State<ClipsCtx>) -> Result<Response, ApiError> {
    if !ctx.r.enabled() {
        return Ok(not_found());
    }
    let rows = ctx.r.store.call(|c| db::clips(c)).await?;
    Ok(Json(rows.into_iter().map(|c| ctx.r.clip_json(c)).collect::<Vec<_>>()).into_response())
}

async fn find(r: &Replays, id: &str) -> Result<Option<ClipRow>, ApiError> {
    if !r.enabled() || !safe_name(id) {
        return Ok(None);
    }
    let id = id.to_string();
    Ok(r.store.call(move |c| db::clip(c, &id)).await?)
}

async fn details(State(ctx): State<ClipsCtx>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let Some(c) = find(&ctx.r, &id).await? else { return Ok(not_found()) };
    Ok(Json(ctx.r.clip_json(c)).into_response())
}

/// The chat of the clip's window (`CHAT_PAGE` at most), placed on the clip's own media time: its
/// playlist starts at the first segment of the window, which may begin before the window does.
async fn chat(State(ctx): State<ClipsCtx>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let Some(c) = find(&ctx.r, &id).await? else { return Ok(not_found()) };
    let sid = c.stream_id.clone();
    let (replay, segs) =
        ctx.r.store.call(move |conn| Ok((db::replay(conn, &sid)?, db::segments(conn, &sid, 0)?))).await?;
    let Some(replay) = replay else { return Ok(not_found()) };
    let zero = playlist::window(&segs, c.start, c.end).first().map_or(c.start, |s| s.media_offset);
    let limit = super::api::CHAT_PAGE;
    let mut messages = super::api::chat_window(&ctx.r, &replay, c.start, Some(c.end), limit + 1).await?;
    let truncated = messages.len() > limit as usize;
    messages.truncate(limit as usize);
    for m in &mut messages {
        m.offset = ((m.offset - zero) * 1000.0).round().max(0.0) / 1000.0;
    }
    Ok(Json(super::api::ReplayChat { messages, truncated }).into_response())
}

async fn delete(State(ctx): State<ClipsCtx>, body: Bytes) -> Result<Response, ApiError> {
    if !ctx.r.enabled() {
        return Ok(not_found());
    }
    let id = read_id(&body)?;
    let Some(c) = find(&ctx.r, &id).await? else { return Err(ApiError::NotFound("clip not found".into())) };
    let cid = id.clone();
    ctx.r.store.call(move |conn| db::delete_clip(conn, &cid)).await?;
    let _ = tokio::fs::remove_file(ctx.r.thumbnail_path(&c.stream_id, &c.id)).await;
    Ok(StatusResponse::ok("clip deleted").into_response())
}

async fn master(State(ctx): State<ClipsCtx>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let Some(c) = find(&ctx.r, &id).await? else { return Ok(not_found()) };
    let sid = c.stream_id.clone();
    let (replay, variants) =
        ctx.r.store.call(move |conn| Ok((db::replay(conn, &sid)?, db::variants(conn, &sid)?))).await?;
    let Some(replay) = replay else { return Ok(not_found()) };
    let base = &ctx.r.base_path;
    let body = playlist::master(&replay.master, &variants, |v| format!("{base}/clip/{id}/{v}"));
    Ok(playlist_response(body, true))
}

async fn media(State(ctx): State<ClipsCtx>, Path((id, variant)): Path<(String, String)>) -> Result<Response, ApiError> {
    let Some(c) = find(&ctx.r, &id).await? else { return Ok(not_found()) };
    let Ok(v) = variant.parse::<i64>() else { return Ok(not_found()) };
    let sid = c.stream_id.clone();
    let (replay, segs) =
        ctx.r.store.call(move |conn| Ok((db::replay(conn, &sid)?, db::segments(conn, &sid, v)?))).await?;
    let Some(replay) = replay else { return Ok(not_found()) };
    let segs = playlist::window(&segs, c.start, c.end);
    if segs.is_empty() {
        return Ok(not_found());
    }
    let local = format!("{}/clip/{id}/{v}/", ctx.r.base_path);
    let body = playlist::media(&segs, true, |f| segment_uri(&ctx.r, &replay, &local, v, f));
    Ok(playlist_response(body, true))
}

async fn file(
    State(ctx): State<ClipsCtx>,
    Path((id, variant, file)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(c) = find(&ctx.r, &id).await? else { return Ok(not_found()) };
    let Ok(v) = variant.parse::<i64>() else { return Ok(not_found()) };
    let (sid, f) = (c.stream_id.clone(), file.clone());
    let segs = ctx.r.store.call(move |conn| db::segments(conn, &sid, v)).await?;
    let listed =
        playlist::window(&segs, c.start, c.end).iter().any(|s| s.file == f || s.init.as_deref() == Some(f.as_str()));
    if !listed {
        return Ok(not_found());
    }
    Ok(serve_file(&ctx.r, &c.stream_id, v, &file, true, &headers).await)
}

async fn thumbnail(State(ctx): State<ClipsCtx>, Path(file): Path<String>) -> Result<Response, ApiError> {
    let Some(id) = file.strip_suffix(".jpg") else { return Ok(not_found()) };
    let Some(c) = find(&ctx.r, id).await? else { return Ok(not_found()) };
    let Ok(bytes) = tokio::fs::read(ctx.r.thumbnail_path(&c.stream_id, &c.id)).await else { return Ok(not_found()) };
    let mut resp = bytes.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("image/jpeg"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=604800"));
    Ok(resp)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// The clip page: the web UI's `clip.html` (player, title, download) with OpenGraph tags for link
/// previews (title falls back to "Clip", the image to `/logo/external`), for browsers and bots alike.
async fn page(State(ctx): State<ClipsCtx>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let Some(c) = find(&ctx.r, &id).await? else { return Ok(not_found()) };
    let clip = ctx.r.clip_json(c);
    let title = if clip.title.is_empty() { "Clip".to_string() } else { clip.title.clone() };
    let image = clip.thumbnail.clone().unwrap_or_else(|| "/logo/external".into());
    let name = ctx.r.settings.get().instance.name.clone();
    let og = format!(
        r#"<meta property="og:title" content="{t}"><meta property="og:type" content="video.other">
<meta property="og:image" content="{img}"><meta property="og:site_name" content="{site}">
<meta property="og:description" content="{desc}"><meta name="twitter:card" content="summary_large_image">
"#,
        t = escape(&title),
        img = escape(&image),
        site = escape(&name),
        desc = escape(&format!("{} · {} s", clip.stream_title, clip.duration_seconds)),
    );
    // The web UI's clip page (hls.js player) with the tags; a plain page when castd has no web UI.
    let html = match crate::web::page_text("clip.html") {
        Some(page) => page.replacen("</head>", &format!("{og}</head>"), 1),
        None => format!(
            r#"<!doctype html><html><head><meta charset="utf-8"><title>{t}</title>{og}</head>
<body><h1>{t}</h1><video controls src="{m}"></video><p><a href="{dl}">Download MP4</a></p></body></html>"#,
            t = escape(&title),
            m = escape(&clip.manifest),
            dl = escape(&clip.download),
        ),
    };
    Ok(Html(html).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owncast_window_rules() {
        assert_eq!(resolve_window(-1.0, 5.0, 60.0, 120.0), Err("start time must not be negative"));
        assert_eq!(resolve_window(5.0, 5.0, 60.0, 120.0), Err("end time must be after start time"));
        assert_eq!(resolve_window(60.0, 70.0, 60.0, 120.0), Err("start time is after the known end of the stream"));
        assert_eq!(resolve_window(10.0, 90.0, 60.0, 120.0), Ok((10.0, 60.0)));
        assert_eq!(resolve_window(0.0, 50.0, 60.0, 20.0), Ok((30.0, 50.0)));
    }

    #[test]
    fn rate_limit_is_a_burst_of_three_then_six_a_minute() {
        let mut l = RateLimits::default();
        let ip = IpAddr::from([127, 0, 0, 1]);
        let t = Instant::now();
        assert!((0..3).all(|_| l.allow(ip, t)));
        assert!(!l.allow(ip, t));
        assert!(!l.allow(ip, t + Duration::from_secs(9)));
        assert!(l.allow(ip, t + Duration::from_secs(10)));
        assert!(l.allow(IpAddr::from([10, 0, 0, 1]), t));
    }

    #[test]
    fn permission_levels() {
        let now = Utc::now();
        let mut u = User {
            id: "u".into(),
            display_name: "n".into(),
            display_color: 0,
            created_at: now,
            previous_names: vec![],
            name_changed_at: None,
            scopes: vec![],
            is_bot: false,
            authenticated: false,
            is_moderator: false,
            disabled_at: None,
            auth_provider: None,
        };
        assert_eq!(denial(None, "established", now), Some("clip creation requires joining chat first"));
        assert_eq!(denial(Some(&u), "established", now), Some("your account is too new to create clips"));
        assert_eq!(denial(Some(&u), "authenticated", now), Some("clip creation is limited to authenticated viewers"));
        assert_eq!(denial(Some(&u), "moderators", now), Some("clip creation is limited to moderators"));
        u.created_at = now - chrono::TimeDelta::hours(2);
        assert_eq!(denial(Some(&u), "established", now), None);
        u.is_moderator = true;
        u.created_at = now;
        assert_eq!(denial(Some(&u), "moderators", now), None);
        u.disabled_at = Some(now);
        assert_eq!(denial(Some(&u), "moderators", now), Some("clip creation is not available"));
    }

    #[test]
    fn only_the_live_broadcast_and_public_replays_are_clippable() {
        let row = |status: &str, public: bool| db::ReplayRow {
            id: "s1".into(),
            title: String::new(),
            stream_title: String::new(),
            start_time: Utc::now(),
            end_time: None,
            status: status.into(),
            public,
            pinned: false,
            master: String::new(),
            remote_base: None,
            duration: 10.0,
            bytes: 1,
            clip_count: 0,
        };
        assert!(clippable(&row(db::RECORDING, false), Some("s1")), "the live broadcast");
        assert!(!clippable(&row(db::RECORDING, false), Some("s2")), "not live any more");
        assert!(!clippable(&row(db::RECORDING, false), None));
        assert!(!clippable(&row(db::FINISHED, false), Some("s1")), "a private finished replay");
        assert!(!clippable(&row(db::INTERRUPTED, false), None));
        assert!(clippable(&row(db::FINISHED, true), None), "a public replay");
    }
}
