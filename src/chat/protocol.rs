//! The chat wire protocol: Owncast's event type names, and the events the server sends (built once per
//! event and shared by all recipients as one `Utf8Bytes` frame). The broadcast events' types live in
//! `events::chat`, as they are also bus events; the per-client ones (CONNECTED_USER_INFO, errors) here.
//!
//! Every server event carries `id` (a short random id), `timestamp` (RFC 3339) and `type`. A frame
//! may hold several events separated by `\n`, as Owncast's hub does.

use axum::extract::ws::Utf8Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::events::EventType;

pub const CHAT: &str = EventType::Chat.as_str();
pub const NAME_CHANGE: &str = EventType::NameChange.as_str();
pub const COLOR_CHANGE: &str = EventType::ColorChange.as_str();
pub const SYSTEM: &str = EventType::System.as_str();
pub const CHAT_ACTION: &str = EventType::ChatAction.as_str();
pub const CONNECTED_USER_INFO: &str = "CONNECTED_USER_INFO";
pub const ERROR_NEEDS_REGISTRATION: &str = "ERROR_NEEDS_REGISTRATION";
pub const ERROR_USER_DISABLED: &str = "ERROR_USER_DISABLED";
pub const ERROR_MAX_CONNECTIONS_EXCEEDED: &str = "ERROR_MAX_CONNECTIONS_EXCEEDED";
pub const CHAT_DISABLED: &str = "CHAT_DISABLED";

/// The scope that makes a chat user a moderator.
pub const MODERATOR_SCOPE: &str = "MODERATOR";

/// Owncast's texts for the CHAT_ACTION replies.
pub const MSG_TOO_BIG: &str = "Sorry, that message exceeded the maximum size and can't be delivered.";
pub const MSG_FLOODING: &str = "You are temporarily blocked from sending chat messages due to perceived flooding.";
pub const MSG_ESTABLISHED_ONLY: &str = "This chat is currently only available to established users. Try again later.";
/// castd's text when a message is ignored because chat is closed (offline for more than 5 minutes,
/// and no scheduled stream opened it).
pub const MSG_CHAT_CLOSED: &str =
    "Chat is closed while the stream is offline, so your message was not sent. It opens again when the stream starts.";
/// castd's text when "require authentication" refuses an anonymous user's message.
pub const MSG_AUTHENTICATION_REQUIRED: &str =
    "Only authenticated users can send messages in this chat. You can still read along.";

pub use crate::events::chat::User;
use crate::events::chat::{
    ActionEvent, MessageEvent, NameChangeEvent, SystemEvent, SystemUser, UserEvent, VisibilityEvent,
};
use crate::events::ChatEvent;

/// An event a client sends. Unknown types are ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inbound {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub new_name: Option<String>,
    #[serde(default)]
    pub new_color: Option<i64>,
}

/// A short random event/message id (Owncast uses shortids).
pub fn short_id() -> String {
    crate::password::random_token(10)
}

/// Serialize an event into a frame.
pub fn frame(event: &impl Serialize) -> Utf8Bytes {
    Utf8Bytes::from(serde_json::to_string(event).unwrap_or_default())
}

/// A stored message as a CHAT event.
pub fn chat(id: &str, timestamp: DateTime<Utc>, body: &str, user: &User, visible: bool) -> ChatEvent {
    ChatEvent::Message(MessageEvent {
        id: id.to_string(),
        timestamp,
        body: body.to_string(),
        user: user.clone(),
        visible,
        raw_body: None,
        client_id: None,
    })
}

/// `{id,timestamp,type:"CONNECTED_USER_INFO",user}` (to the connecting client only).
pub fn connected_user_info(user: &User) -> Value {
    json!({ "id": short_id(), "timestamp": Utc::now(), "type": CONNECTED_USER_INFO, "user": user })
}

fn user_event(user: &User) -> UserEvent {
    UserEvent { id: short_id(), timestamp: Utc::now(), user: user.clone(), client_id: None }
}

pub fn user_joined(user: &User) -> ChatEvent {
    ChatEvent::UserJoined(user_event(user))
}

pub fn user_parted(user: &User) -> ChatEvent {
    ChatEvent::UserParted(user_event(user))
}

pub fn color_change(user: &User) -> ChatEvent {
    ChatEvent::ColorChange(user_event(user))
}

/// NAME_CHANGE of `user` (already renamed) from `old_name`; `client_id` is the connection that asked.
pub fn name_change(user: &User, old_name: &str, client_id: Option<u64>) -> ChatEvent {
    ChatEvent::NameChange(NameChangeEvent {
        id: short_id(),
        timestamp: Utc::now(),
        user: user.clone(),
        old_name: old_name.to_string(),
        new_name: user.display_name.clone(),
        client_id,
    })
}

pub fn system(body: &str, server_name: &str) -> ChatEvent {
    ChatEvent::System(SystemEvent {
        id: short_id(),
        timestamp: Utc::now(),
        body: body.to_string(),
        user: SystemUser { display_name: server_name.to_string() },
    })
}

pub fn chat_action(body: &str) -> ChatEvent {
    ChatEvent::Action(ActionEvent { id: short_id(), timestamp: Utc::now(), body: body.to_string() })
}

pub fn visibility(ids: &[String], visible: bool) -> ChatEvent {
    ChatEvent::VisibilityUpdate(VisibilityEvent { id: short_id(), timestamp: Utc::now(), ids: ids.to_vec(), visible })
}

/// An error event (`ERROR_NEEDS_REGISTRATION`, ...), with the user when there is one.
pub fn error(kind: &str, user: Option<&User>) -> Value {
    let mut v = json!({ "id": short_id(), "timestamp": Utc::now(), "type": kind });
    if let Some(u) = user {
        v["user"] = json!(u);
    }
    v
}
