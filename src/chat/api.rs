//! The chat HTTP routes (registration, history, moderation, users, IP bans, clients, emoji) and the
//! `ChatUser` / `ChatModerator` extractors that enforce `?accessToken=` auth.
//!
//! Token auth failures answer 401 `Unauthorized` (a banned address too); unknown users and messages 404,
//! except `users/delete`, which answers 400 as Owncast does; malformed bodies 400.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::Json;
use chrono::{DateTime, Utc};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::emoji::{self, EmojiError};
use super::hub::ClientInfo;
use super::messages::{self, ChatMessage};
use super::moderation::{self, IpBan, ModerationError};
use super::protocol::User;
use super::users::{self, StatusFilter};
use super::Chat;
use crate::http::gate::ViewerPass;
use crate::http::{ApiError, Auth, BodyDoc, ClientIp, JsonBody, Registry, ResponseDoc, StatusResponse, ValueDoc};

const GROUP: &str = "chat";

/// Registrations (`POST /api/chat/register`) one client address (an IPv6 /64) may make at once: a
/// household's or an office's browsers opening the page together (each registers once and keeps its
/// token). Beyond it, one more every [`REGISTER_EVERY`]; further ones get 429 with `Retry-After`.
pub const REGISTER_BURST: u32 = 20;
/// After the burst, one registration per address this often (10 a minute).
pub const REGISTER_EVERY: std::time::Duration = std::time::Duration::from_secs(6);

/// `POST /api/chat/register`'s body: Owncast's `{displayName?}`, and nothing is refused. A JSON object whose
/// `displayName` is a string asks for that name; no body, any other JSON value or a body that is not JSON
/// registers a user with a picked name (Owncast ignores a body it cannot decode).
const REGISTER_BODY_SCHEMA: &str = r#"{"type":["object","array","string","number","boolean","null"],"description":"Optional. An object {\"displayName\": \"NAME\"} asks for that name; any other body (none, another JSON value, not JSON) is accepted and a name is picked, as Owncast does.","example":{"displayName":"alice"}}"#;

/// An IP address as the ban routes take it (IPv6 may also come in brackets).
/// Documented as IPv4 (a pattern: schema tools do not combine formats); IPv6 is taken as well.
const IP_SCHEMA: &str = r#"{"type":"string","pattern":"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"}"#;

pub fn routes(reg: &mut Registry, chat: Arc<Chat>) {
    use Auth::{Admin, Moderator, Public, User as U};
    super::settings::routes(reg, chat.clone());
    let mut reg = reg.scope(chat);
    reg.schema::<MessageVisibilityRequest>();
    reg.schema::<SetUserEnabledRequest>();
    reg.schema::<SetModeratorRequest>();
    reg.schema::<UserIdRequest>();
    reg.schema::<EmojiUploadRequest>();
    reg.schema::<EmojiDeleteRequest>();
    reg.get("/ws", GROUP, Public, "Chat websocket (`?accessToken=`)", super::ws::handler)
        .answers(ResponseDoc::Upgrade("Switching to the chat websocket (Owncast's chat protocol)"))
        .error(400, "Not a websocket handshake")
        .error(403, "The client's address is banned")
        .error(429, "This address already holds as many chat connections as one address may");
    // Owncast registers a user whatever the body holds (a body that does not decode is ignored), and so does
    // castd: the document says so (any value), so schema tools do not expect a refusal.
    let register = BodyDoc::Json(REGISTER_BODY_SCHEMA);
    reg.post("/api/chat/register", GROUP, Public, "Register a chat user", register, register_user)
        .optional_body()
        .returns::<RegisterResponse>()
        .error(403, "The client's address is banned")
        .error(429, "Too many registrations from this address: wait the Retry-After seconds");
    reg.get("/api/chat", GROUP, U, "Chat history", history).returns_list::<ChatMessage>();
    let vis = BodyDoc::Schema("MessageVisibilityRequest");
    reg.post("/api/chat/messagevisibility", GROUP, Moderator, "Hide or show messages", vis, mod_visibility)
        .error(404, "None of the messages exists");
    reg.post(
        "/api/chat/updatemessagevisibility",
        GROUP,
        Moderator,
        "Hide or show messages (legacy)",
        vis,
        mod_visibility,
    )
    .error(404, "None of the messages exists");
    let enabled = BodyDoc::Schema("SetUserEnabledRequest");
    reg.post("/api/chat/users/setenabled", GROUP, Moderator, "Enable or disable a user", enabled, mod_set_enabled)
        .error(404, "No such user");
    reg.get("/api/moderation/chat/user/{userId}", GROUP, Moderator, "Details of a chat user", user_details)
        .returns::<UserDetails>();
    reg.get("/api/emoji", GROUP, Public, "Custom emoji", list_emoji).returns_list::<emoji::Emoji>();
    reg.get("/img/emoji/{file}", GROUP, Public, "A custom emoji image", emoji::serve)
        .answers(ResponseDoc::Content("image/*"));

    reg.get("/api/admin/chat/messages", GROUP, Admin, "All chat messages, hidden ones included", admin_messages)
        .returns_list::<ChatMessage>();
    reg.post("/api/admin/chat/messagevisibility", GROUP, Admin, "Hide or show messages", vis, admin_visibility)
        .error(404, "None of the messages exists");
    reg.post(
        "/api/admin/chat/updatemessagevisibility",
        GROUP,
        Admin,
        "Hide or show messages (legacy)",
        vis,
        admin_visibility,
    )
    .error(404, "None of the messages exists");
    reg.post("/api/admin/chat/users/setenabled", GROUP, Admin, "Enable or disable a user", enabled, admin_set_enabled)
        .error(404, "No such user");
    reg.get("/api/admin/chat/users/disabled", GROUP, Admin, "Disabled users", disabled_users).returns_list::<User>();
    let setmod = BodyDoc::Schema("SetModeratorRequest");
    reg.post("/api/admin/chat/users/setmoderator", GROUP, Admin, "Grant or revoke moderator", setmod, set_moderator)
        .error(404, "No such user");
    reg.get("/api/admin/chat/users/moderators", GROUP, Admin, "Moderators", moderators).returns_list::<User>();
    reg.get("/api/admin/chat/users/ipbans", GROUP, Admin, "Banned IP addresses", ip_bans).returns_list::<IpBan>();
    let ip = BodyDoc::Value(ValueDoc::Json(IP_SCHEMA));
    reg.post("/api/admin/chat/users/ipbans/create", GROUP, Admin, "Ban an IP address", ip, ban_ip);
    reg.post("/api/admin/chat/users/ipbans/remove", GROUP, Admin, "Lift an IP ban", ip, unban_ip)
        .error(404, "The address is not banned");
    reg.get("/api/admin/chat/clients", GROUP, Admin, "Connected chat clients", clients).returns_list::<ChatClient>();
    reg.get("/api/admin/users", GROUP, Admin, "Chat users (offset, limit, search, status, sort)", list_users)
        .returns::<UserPage>();
    let uid = BodyDoc::Schema("UserIdRequest");
    reg.post("/api/admin/users/delete", GROUP, Admin, "Delete a chat user", uid, delete_user);
    let up = BodyDoc::Schema("EmojiUploadRequest");
    reg.post("/api/admin/emoji/upload", GROUP, Admin, "Upload a custom emoji", up, upload_emoji);
    let del = BodyDoc::Schema("EmojiDeleteRequest");
    reg.post("/api/admin/emoji/delete", GROUP, Admin, "Delete a custom emoji", del, delete_emoji)
        .error(404, "No such emoji");
}

impl From<ModerationError> for ApiError {
    fn from(e: ModerationError) -> Self {
        match e {
            ModerationError::Store(e) => e.into(),
            ModerationError::UserNotFound => ApiError::NotFound("user not found".into()),
            ModerationError::Invalid(m) => ApiError::BadRequest(m),
        }
    }
}

impl From<EmojiError> for ApiError {
    fn from(e: EmojiError) -> Self {
        match e {
            EmojiError::NotFound => ApiError::NotFound(e.to_string()),
            EmojiError::Io(e) => ApiError::Internal(e.to_string()),
            other => ApiError::BadRequest(other.to_string()),
        }
    }
}

/// An enabled chat user from `?accessToken=`, not connecting from a banned address.
pub struct ChatUser(pub User);

impl FromRequestParts<Arc<Chat>> for ChatUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, ctx: &Arc<Chat>) -> Result<Self, Self::Rejection> {
        let Ok(Query(q)) = Query::<crate::http::auth::TokenQuery>::from_request_parts(parts, ctx).await else {
            return Err(ApiError::UnauthorizedToken);
        };
        let token = q.access_token.filter(|t| !t.is_empty()).ok_or(ApiError::UnauthorizedToken)?;
        let Ok(ClientIp(ip)) = ClientIp::from_request_parts(parts, ctx).await;
        if ip.is_some_and(|ip| ctx.is_banned(ip)) {
            return Err(ApiError::UnauthorizedToken);
        }
        let user = ctx.store.call(move |c| users::by_token(c, &token)).await?;
        match user {
            Some(u) if u.is_enabled() => Ok(ChatUser(u)),
            _ => Err(ApiError::UnauthorizedToken),
        }
    }
}

/// A chat user with the MODERATOR scope.
pub struct ChatModerator(pub User);

impl FromRequestParts<Arc<Chat>> for ChatModerator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, ctx: &Arc<Chat>) -> Result<Self, Self::Rejection> {
        let ChatUser(u) = ChatUser::from_request_parts(parts, ctx).await?;
        if !u.is_moderator {
            return Err(ApiError::UnauthorizedToken);
        }
        Ok(ChatModerator(u))
    }
}

/// What a registration asks for (see `REGISTER_BODY_SCHEMA`).
#[derive(Debug, Default, PartialEq)]
pub struct RegisterRequest {
    pub display_name: Option<String>,
}

impl RegisterRequest {
    /// The request in `body`, read as Owncast reads it: only a JSON object's string `displayName` counts;
    /// anything else (no body, another JSON value, a `displayName` that is not a string, not JSON) asks for
    /// nothing and is not an error.
    pub fn tolerant(body: &[u8]) -> RegisterRequest {
        let display_name = match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(mut o)) => match o.remove("displayName") {
                Some(Value::String(name)) => Some(name),
                _ => None,
            },
            _ => None,
        };
        RegisterRequest { display_name }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageVisibilityRequest {
    #[schema(min_items = 1)]
    pub id_array: Vec<String>,
    pub visible: bool,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetUserEnabledRequest {
    /// Refused (400) when empty or blank.
    #[schema(pattern = r"\S")]
    pub user_id: String,
    pub enabled: bool,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetModeratorRequest {
    /// Refused (400) when empty or blank.
    #[schema(pattern = r"\S")]
    pub user_id: String,
    pub is_moderator: bool,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserIdRequest {
    /// Refused (400) when empty or blank.
    #[schema(pattern = r"\S")]
    pub user_id: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct EmojiUploadRequest {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    /// Base64 image data (a `data:` URL prefix is accepted).
    pub data: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct EmojiDeleteRequest {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
}

#[derive(Debug, Deserialize)]
struct ValueBody {
    value: String,
}

async fn register_user(
    State(ctx): State<Arc<Chat>>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    pass: Option<axum::Extension<ViewerPass>>,
    body: Bytes,
) -> Result<Json<RegisterResponse>, ApiError> {
    let pass = pass.map(|axum::Extension(p)| p);
    if ip.is_some_and(|ip| ctx.is_banned(ip)) {
        return Err(ApiError::Forbidden("forbidden".into()));
    }
    // Without connection info (never when served by the daemon) requests share one address.
    ctx.registrations.take(ip.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)))?;
    let req = RegisterRequest::tolerant(&body);
    let s = ctx.settings.get();
    let forwarded = headers.get("x-forwarded-user").and_then(|v| v.to_str().ok()).map(str::to_string);
    // A member's viewing pass (a JWT of the operator's site) names them.
    let member = pass
        .as_ref()
        .and_then(|p| p.name.as_deref())
        .map(users::clean_name)
        .filter(|n| !n.is_empty() && !users::is_forbidden(n, &s.chat.forbidden_usernames));
    let requested = member.or(forwarded).or(req.display_name).map(|n| users::clean_name(&n)).filter(|n| !n.is_empty());
    let name = match requested {
        Some(n) if users::is_forbidden(&n, &s.chat.forbidden_usernames) => {
            return Err(ApiError::bad(format!("the display name '{n}' is not allowed")));
        }
        Some(n) => n,
        None => {
            let suggested: Vec<&String> = s
                .chat
                .suggested_usernames
                .iter()
                .filter(|n| !users::is_forbidden(n, &s.chat.forbidden_usernames))
                .collect();
            match suggested.choose(&mut rand::thread_rng()) {
                Some(n) if s.chat.suggested_usernames.len() >= 10 => users::clean_name(n),
                _ => users::random_name(),
            }
        }
    };
    let color = users::random_color();
    let (user, token) = ctx.store.call(move |c| users::create(c, &name, color)).await?;
    let user = super::ws::signed_in_by_pass(&ctx, user, pass.as_ref()).await;
    Ok(Json(RegisterResponse {
        id: user.id,
        access_token: token,
        display_name: user.display_name,
        display_color: user.display_color,
    }))
}

/// A new chat user and the token it authenticates with.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterResponse {
    pub id: String,
    pub access_token: String,
    pub display_name: String,
    pub display_color: i64,
}

async fn history(State(ctx): State<Arc<Chat>>, ChatUser(user): ChatUser) -> Result<Json<Vec<ChatMessage>>, ApiError> {
    let full = user.is_moderator;
    let msgs =
        ctx.store.call(move |c| if full { messages::full_history(c) } else { messages::public_history(c) }).await?;
    Ok(Json(msgs))
}

async fn admin_messages(State(ctx): State<Arc<Chat>>) -> Result<Json<Vec<ChatMessage>>, ApiError> {
    Ok(Json(ctx.store.call(|c| messages::full_history(c)).await?))
}

pub(crate) async fn visibility(ctx: &Chat, req: MessageVisibilityRequest) -> Result<Json<StatusResponse>, ApiError> {
    if req.id_array.is_empty() {
        return Err(ApiError::bad("idArray must list at least one message id"));
    }
    let n = moderation::set_visibility(ctx, req.id_array, req.visible).await?;
    if n == 0 {
        return Err(ApiError::NotFound("no such messages".into()));
    }
    Ok(StatusResponse::ok(format!("changed visibility of {n} message(s)")))
}

async fn mod_visibility(
    State(ctx): State<Arc<Chat>>,
    _m: ChatModerator,
    JsonBody(req): JsonBody<MessageVisibilityRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    visibility(&ctx, req).await
}

async fn admin_visibility(
    State(ctx): State<Arc<Chat>>,
    JsonBody(req): JsonBody<MessageVisibilityRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    visibility(&ctx, req).await
}

async fn set_enabled(ctx: &Arc<Chat>, req: SetUserEnabledRequest) -> Result<Json<StatusResponse>, ApiError> {
    if req.user_id.trim().is_empty() {
        return Err(ApiError::bad("userId is required"));
    }
    let user = moderation::set_user_enabled(ctx, &req.user_id, req.enabled).await?;
    let what = if req.enabled { "enabled" } else { "disabled" };
    Ok(StatusResponse::ok(format!("{} {what}", user.display_name)))
}

async fn mod_set_enabled(
    State(ctx): State<Arc<Chat>>,
    ChatModerator(me): ChatModerator,
    JsonBody(req): JsonBody<SetUserEnabledRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    if req.user_id == me.id && !req.enabled {
        return Err(ApiError::bad("a moderator cannot disable themselves"));
    }
    set_enabled(&ctx, req).await
}

async fn admin_set_enabled(
    State(ctx): State<Arc<Chat>>,
    JsonBody(req): JsonBody<SetUserEnabledRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    set_enabled(&ctx, req).await
}

async fn disabled_users(State(ctx): State<Arc<Chat>>) -> Result<Json<Vec<User>>, ApiError> {
    Ok(Json(ctx.store.call(|c| users::disabled(c)).await?))
}

async fn moderators(State(ctx): State<Arc<Chat>>) -> Result<Json<Vec<User>>, ApiError> {
    Ok(Json(ctx.store.call(|c| users::moderators(c)).await?))
}

async fn set_moderator(
    State(ctx): State<Arc<Chat>>,
    JsonBody(req): JsonBody<SetModeratorRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    if req.user_id.trim().is_empty() {
        return Err(ApiError::bad("userId is required"));
    }
    let user = moderation::set_moderator(&ctx, &req.user_id, req.is_moderator).await?;
    let what = if req.is_moderator { "is now a moderator" } else { "is no longer a moderator" };
    Ok(StatusResponse::ok(format!("{} {what}", user.display_name)))
}

async fn ip_bans(State(ctx): State<Arc<Chat>>) -> Result<Json<Vec<IpBan>>, ApiError> {
    Ok(Json(moderation::list_bans(&ctx).await?))
}

/// Any IPv4 or IPv6 address (an IPv6 address may come in brackets).
fn parse_ip(v: &str) -> Result<IpAddr, ApiError> {
    let t = v.trim();
    let t = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(t);
    t.parse().map_err(|_| ApiError::bad(format!("'{v}' is not an IP address")))
}

async fn ban_ip(
    State(ctx): State<Arc<Chat>>,
    JsonBody(body): JsonBody<ValueBody>,
) -> Result<Json<StatusResponse>, ApiError> {
    let ip = moderation::normalize_ip(parse_ip(&body.value)?);
    moderation::ban_ip(&ctx, ip, "banned by the admin").await?;
    Ok(StatusResponse::ok(format!("{ip} is banned")))
}

async fn unban_ip(
    State(ctx): State<Arc<Chat>>,
    JsonBody(body): JsonBody<ValueBody>,
) -> Result<Json<StatusResponse>, ApiError> {
    let ip = moderation::normalize_ip(parse_ip(&body.value)?);
    if !moderation::unban_ip(&ctx, ip).await? {
        return Err(ApiError::NotFound(format!("{ip} is not banned")));
    }
    Ok(StatusResponse::ok(format!("{ip} is no longer banned")))
}

/// A connected chat client as the admin and integrations APIs list it (the hub's `ClientInfo`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatClient {
    pub id: u64,
    pub connected_at: DateTime<Utc>,
    pub user: User,
    /// Where the client connects from, when known.
    pub geo: Option<Value>,
    pub user_agent: String,
    pub message_count: u64,
    pub ip_address: String,
}

impl From<ClientInfo> for ChatClient {
    fn from(c: ClientInfo) -> Self {
        let ClientInfo { id, connected_at, user, geo, user_agent, message_count, ip_address } = c;
        Self { id, connected_at, user, geo, user_agent, message_count, ip_address }
    }
}

/// The connected clients (of one user, or all).
pub(crate) fn chat_clients(ctx: &Chat, user_id: Option<&str>) -> Vec<ChatClient> {
    let mut infos = ctx.hub.infos(user_id);
    // In a cluster, the origin also lists the other nodes' clients (their presence, see `relay`).
    infos.extend(ctx.remote_clients().into_iter().filter(|c| user_id.is_none_or(|u| u == c.user.id)));
    infos.into_iter().map(ChatClient::from).collect()
}

async fn clients(State(ctx): State<Arc<Chat>>) -> Json<Vec<ChatClient>> {
    Json(chat_clients(&ctx, None))
}

/// `{user, connectedClients, messages}`: a chat user's details for moderators and integrations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserDetails {
    pub user: User,
    pub connected_clients: Vec<UserClient>,
    pub messages: Vec<ChatMessage>,
}

/// One connection of the user in `UserDetails`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserClient {
    pub id: u64,
    pub message_count: u64,
    pub user_agent: String,
    pub connected_at: DateTime<Utc>,
    pub geo: Option<Value>,
}

/// `{total, results}`: a page of chat users.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UserPage {
    pub total: u64,
    pub results: Vec<User>,
}

async fn user_details(
    State(ctx): State<Arc<Chat>>,
    _m: ChatModerator,
    Path(user_id): Path<String>,
) -> Result<Json<UserDetails>, ApiError> {
    user_details_of(&ctx, user_id).await.map(Json)
}

/// `{user, connectedClients, messages}` for the moderator and integrations user-details routes.
pub(crate) async fn user_details_of(ctx: &Chat, user_id: String) -> Result<UserDetails, ApiError> {
    let id = user_id.clone();
    let (user, msgs) = ctx
        .store
        .call(move |c| {
            let Some(u) = users::by_id(c, &id)? else { return Ok(None) };
            Ok(Some((u, messages::by_user(c, &id)?)))
        })
        .await?
        .ok_or_else(|| ApiError::NotFound("user not found".into()))?;
    let connected_clients = ctx
        .hub
        .infos(Some(&user_id))
        .into_iter()
        .map(|c| UserClient {
            id: c.id,
            message_count: c.message_count,
            user_agent: c.user_agent,
            connected_at: c.connected_at,
            geo: c.geo,
        })
        .collect();
    Ok(UserDetails { user, connected_clients, messages: msgs })
}

fn parse_u64(q: &HashMap<String, String>, key: &str, default: u64) -> Result<u64, ApiError> {
    match q.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| ApiError::bad(format!("{key} must be a non-negative integer"))),
    }
}

async fn list_users(
    State(ctx): State<Arc<Chat>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<UserPage>, ApiError> {
    let offset = parse_u64(&q, "offset", 0)?;
    let limit = parse_u64(&q, "limit", 50)?.min(1000);
    let status = match q.get("status").map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("all") => StatusFilter::All,
        Some("active") => StatusFilter::Active,
        Some("bots") => StatusFilter::Bots,
        Some(other) => return Err(ApiError::bad(format!("status must be all, active or bots, not '{other}'"))),
    };
    let newest_first = match q.get("sort").map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("desc") => true,
        Some("asc") => false,
        Some(other) => return Err(ApiError::bad(format!("sort must be asc or desc, not '{other}'"))),
    };
    let search = q.get("search").cloned();
    let (total, results) =
        ctx.store.call(move |c| users::list(c, offset, limit, search.as_deref(), status, newest_first)).await?;
    Ok(Json(UserPage { total, results }))
}

async fn delete_user(
    State(ctx): State<Arc<Chat>>,
    JsonBody(req): JsonBody<UserIdRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    if req.user_id.trim().is_empty() {
        return Err(ApiError::bad("userId is required"));
    }
    match moderation::delete_user(&ctx, &req.user_id).await {
        Ok(()) => Ok(StatusResponse::ok("user deleted")),
        // Owncast answers an unknown user with 400.
        Err(ModerationError::UserNotFound) => Err(ApiError::bad(format!("user {} not found", req.user_id))),
        Err(e) => Err(e.into()),
    }
}

async fn list_emoji(State(ctx): State<Arc<Chat>>) -> Json<Vec<emoji::Emoji>> {
    Json(emoji::list(&ctx).await)
}

async fn upload_emoji(
    State(ctx): State<Arc<Chat>>,
    JsonBody(req): JsonBody<EmojiUploadRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    let file = emoji::upload(&ctx, &req.name, &req.data).await?;
    Ok(StatusResponse::ok(format!("Emoji \"{file}\" has been uploaded")))
}

async fn delete_emoji(
    State(ctx): State<Arc<Chat>>,
    JsonBody(req): JsonBody<EmojiDeleteRequest>,
) -> Result<Json<StatusResponse>, ApiError> {
    emoji::delete(&ctx, &req.name).await?;
    Ok(StatusResponse::ok("emoji deleted"))
}

#[cfg(test)]
mod tests {
    use super::RegisterRequest;

    #[test]
    fn registration_reads_a_name_only_from_an_object_and_refuses_nothing() {
        let named = |b: &[u8]| RegisterRequest::tolerant(b).display_name;
        assert_eq!(named(br#"{"displayName":"alice"}"#).as_deref(), Some("alice"));
        assert_eq!(named(br#"{"displayName":"bob","other":1}"#).as_deref(), Some("bob"));
        // What Owncast's decoder would not decode is ignored, never an error (a struct from an array, too).
        for body in [&b""[..], b"  ", b"{}", br#"["alice"]"#, br#"{"displayName":5}"#, b"null", b"not json", b"\xff"] {
            assert_eq!(named(body), None, "{:?}", String::from_utf8_lossy(body));
        }
    }
}
