//! The chat routes of the integrations API (`/api/integrations/chat...`, `/clients`, user details):
//! what bots do in chat, each behind its token scope (`tokens::authorize`).
//!
//! A bot speaks as a chat user of its own: the first time a token sends a message, a chat user with
//! the token's id, name and colour and `isBot` is created (it has no chat login of its own), so its
//! messages are stored and shown like anyone else's and can be hidden by moderators.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use chrono::Utc;
use rusqlite::params;
use serde::Deserialize;

use super::api::MessageVisibilityRequest;
use super::api::{ChatClient, UserDetails};
use super::messages::{self, ChatMessage};
use super::protocol::{self as p, User};
use super::Chat;
use super::{broadcast, sanitize, users};
use crate::events::ChatEvent;
use crate::http::{parse_json, ApiError, Auth, BodyDoc, Registry, StatusResponse, ValueDoc};
use crate::store::StoreError;
use crate::tokens::{authorize, AccessToken, CAN_SEND_MESSAGES, CAN_SEND_SYSTEM_MESSAGES, HAS_ADMIN_ACCESS};

const GROUP: &str = "integrations";

pub fn routes(reg: &mut Registry, chat: Arc<Chat>) {
    use Auth::Integration as I;
    let mut reg = reg.scope(chat);
    reg.schema::<BodyRequest>();
    let body = BodyDoc::Schema("BodyRequest");
    reg.post(
        "/api/integrations/chat/system",
        GROUP,
        I(CAN_SEND_SYSTEM_MESSAGES),
        "Send a system message",
        body,
        system,
    );
    reg.post(
        "/api/integrations/chat/system/client/{clientId}",
        GROUP,
        I(CAN_SEND_SYSTEM_MESSAGES),
        "Send a system message to one connection",
        body,
        system_to_client,
    )
    // A connection's id is a number (Owncast's too); anything else is refused with 400.
    .path_param("clientId", ValueDoc::Json(r#"{"type":"string","pattern":"^[0-9]{1,19}$"}"#))
    .error(404, "No such connection");
    reg.post("/api/integrations/chat/action", GROUP, I(CAN_SEND_SYSTEM_MESSAGES), "Send a chat action", body, action);
    reg.post("/api/integrations/chat/send", GROUP, I(CAN_SEND_MESSAGES), "Send a chat message as the bot", body, send);
    reg.post(
        "/api/integrations/chat/user",
        GROUP,
        I(CAN_SEND_MESSAGES),
        "Deprecated: use /api/integrations/chat/send",
        body,
        deprecated_user,
    );
    reg.post(
        "/api/integrations/chat/messagevisibility",
        GROUP,
        I(HAS_ADMIN_ACCESS),
        "Hide or show messages",
        BodyDoc::Schema("MessageVisibilityRequest"),
        visibility,
    )
    .error(404, "None of the messages exists");
    reg.get("/api/integrations/chat", GROUP, I(HAS_ADMIN_ACCESS), "Chat history", history)
        .returns_list::<ChatMessage>();
    reg.get("/api/integrations/clients", GROUP, I(HAS_ADMIN_ACCESS), "Connected chat clients", clients)
        .returns_list::<ChatClient>();
    reg.get(
        "/api/integrations/moderation/chat/user/{userId}",
        GROUP,
        I(HAS_ADMIN_ACCESS),
        "Details of a chat user",
        user_details,
    )
    .returns::<UserDetails>();
}

/// `{body}`: the payload of the send, action and system routes. A missing, empty or blank body is refused
/// (400 "invalid message"), so the document says it is required and has a non-space character.
#[derive(Deserialize, utoipa::ToSchema)]
pub struct BodyRequest {
    #[schema(value_type = String, required = true, pattern = r"\S")]
    pub body: Option<String>,
}

fn body_text(bytes: &[u8]) -> Result<String, ApiError> {
    let req: BodyRequest = parse_json(bytes)?;
    let body = req.body.map(|b| b.trim().to_string()).unwrap_or_default();
    if body.is_empty() {
        return Err(ApiError::bad("invalid message"));
    }
    if body.len() > crate::config::MAX_SOCKET_PAYLOAD_SIZE * 4 {
        return Err(ApiError::bad("the message is too long"));
    }
    Ok(body)
}

/// Store a message without a user (system message or action) and send it to the room.
pub(super) async fn store_and_broadcast(
    ctx: &Chat,
    event: ChatEvent,
    stored_type: &str,
    body: String,
) -> Result<(), ApiError> {
    let (id, timestamp) = match &event {
        ChatEvent::System(e) => (e.id.clone(), e.timestamp),
        ChatEvent::Action(e) => (e.id.clone(), e.timestamp),
        _ => (p::short_id(), Utc::now()),
    };
    let msg =
        ChatMessage { id, timestamp, kind: stored_type.to_string(), body, user: None, visible: true, hidden_at: None };
    ctx.store.call(move |c| messages::insert(c, &msg)).await?;
    broadcast(ctx, event);
    Ok(())
}

async fn system(
    State(ctx): State<Arc<Chat>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    authorize(&ctx.tokens, &headers, CAN_SEND_SYSTEM_MESSAGES).await?;
    let body = sanitize::render(&body_text(&bytes)?);
    let event = p::system(&body, &ctx.settings.get().instance.name);
    store_and_broadcast(&ctx, event, p::SYSTEM, body).await?;
    Ok(StatusResponse::ok("sent"))
}

async fn system_to_client(
    State(ctx): State<Arc<Chat>>,
    headers: HeaderMap,
    Path(client_id): Path<String>,
    bytes: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    authorize(&ctx.tokens, &headers, CAN_SEND_SYSTEM_MESSAGES).await?;
    let id: u64 = client_id.parse().map_err(|_| ApiError::bad("clientId must be a number"))?;
    let body = sanitize::render(&body_text(&bytes)?);
    let frame = p::frame(&p::system(&body, &ctx.settings.get().instance.name));
    if let Some(client) = ctx.hub.client(id) {
        client.send(frame);
    } else if let Some((node, client)) = ctx.remote_client(id) {
        // In a cluster, a client another node holds (as the admin's client list numbers it).
        ctx.to_nodes(super::relay::Outbound::Client { node, client, frame: frame.as_str().to_string() });
    } else {
        return Err(ApiError::NotFound(format!("no connected client {id}")));
    }
    Ok(StatusResponse::ok("sent"))
}

async fn action(
    State(ctx): State<Arc<Chat>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    authorize(&ctx.tokens, &headers, CAN_SEND_SYSTEM_MESSAGES).await?;
    let body = sanitize::render(&body_text(&bytes)?);
    let event = p::chat_action(&body);
    store_and_broadcast(&ctx, event, p::CHAT_ACTION, body).await?;
    Ok(StatusResponse::ok("sent"))
}

/// The chat user a token speaks as, created on first use.
async fn bot_user(ctx: &Chat, token: &AccessToken) -> Result<User, ApiError> {
    let (id, name, color) = (token.id.clone(), token.display_name.clone(), token.display_color);
    let user = ctx
        .store
        .call(move |c| {
            c.execute(
                "INSERT OR IGNORE INTO chat_users (id, token_hash, display_name, display_color, created_at, is_bot)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1)",
                params![id, format!("integration:{id}"), name, color, users::ts(Utc::now())],
            )?;
            // keep the bot's name in step with its token
            c.execute("UPDATE chat_users SET display_name = ?2 WHERE id = ?1", params![id, name])?;
            users::by_id(c, &id)?.ok_or_else(|| StoreError::Corrupt("bot user vanished".into()))
        })
        .await?;
    Ok(user)
}

async fn send(
    State(ctx): State<Arc<Chat>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    let token = authorize(&ctx.tokens, &headers, CAN_SEND_MESSAGES).await?;
    let raw = body_text(&bytes)?;
    let user = bot_user(&ctx, &token).await?;
    if !user.is_enabled() {
        return Err(ApiError::Forbidden("this bot has been removed from chat".into()));
    }
    let body = sanitize::render(&raw);
    if sanitize::is_empty(&body) {
        return Err(ApiError::bad("invalid message"));
    }
    let (id, timestamp) = (p::short_id(), Utc::now());
    let event = p::chat(&id, timestamp, &body, &user, true);
    let msg =
        ChatMessage { id, timestamp, kind: p::CHAT.into(), body, user: Some(user), visible: true, hidden_at: None };
    ctx.store.call(move |c| messages::insert(c, &msg)).await?;
    // Owncast sends no CHAT webhook for integration messages; the event goes to sockets only.
    ctx.hub.broadcast(p::frame(&event));
    Ok(StatusResponse::ok("sent"))
}

async fn deprecated_user(State(ctx): State<Arc<Chat>>, headers: HeaderMap) -> Result<Json<StatusResponse>, ApiError> {
    authorize(&ctx.tokens, &headers, CAN_SEND_MESSAGES).await?;
    Err(ApiError::bad("no longer supported. see /api/integrations/chat/send"))
}

async fn visibility(
    State(ctx): State<Arc<Chat>>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    authorize(&ctx.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    let req: MessageVisibilityRequest = parse_json(&bytes)?;
    super::api::visibility(&ctx, req).await
}

async fn history(State(ctx): State<Arc<Chat>>, headers: HeaderMap) -> Result<Json<Vec<ChatMessage>>, ApiError> {
    authorize(&ctx.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    Ok(Json(ctx.store.call(|c| messages::full_history(c)).await?))
}

async fn clients(State(ctx): State<Arc<Chat>>, headers: HeaderMap) -> Result<Json<Vec<ChatClient>>, ApiError> {
    authorize(&ctx.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    Ok(Json(super::api::chat_clients(&ctx, None)))
}

async fn user_details(
    State(ctx): State<Arc<Chat>>,
    headers: HeaderMap,
    Path(user_id): Path<String>,
) -> Result<Json<UserDetails>, ApiError> {
    authorize(&ctx.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    super::api::user_details_of(&ctx, user_id).await.map(Json)
}
