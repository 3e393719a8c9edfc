//! The chat wire protocol: Owncast's event type names, the user object, and the JSON of every event
//! the server sends (built once per event and shared by all recipients as one `Utf8Bytes` frame).
//!
//! Every server event carries `id` (a short random id), `timestamp` (RFC 3339) and `type`. A frame
//! may hold several events separated by `\n`, as Owncast's hub does.

use axum::extract::ws::Utf8Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const CHAT: &str = "CHAT";
pub const NAME_CHANGE: &str = "NAME_CHANGE";
pub const COLOR_CHANGE: &str = "COLOR_CHANGE";
pub const USER_JOINED: &str = "USER_JOINED";
pub const USER_PARTED: &str = "USER_PARTED";
pub const SYSTEM: &str = "SYSTEM";
pub const CHAT_ACTION: &str = "CHAT_ACTION";
pub const CONNECTED_USER_INFO: &str = "CONNECTED_USER_INFO";
pub const VISIBILITY_UPDATE: &str = "VISIBILITY-UPDATE";
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

/// A chat user as the API and the websocket show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    pub display_name: String,
    pub display_color: i64,
    pub created_at: DateTime<Utc>,
    pub previous_names: Vec<String>,
    pub name_changed_at: Option<DateTime<Utc>>,
    pub scopes: Vec<String>,
    pub is_bot: bool,
    pub authenticated: bool,
    pub is_moderator: bool,
    pub disabled_at: Option<DateTime<Utc>>,
}

impl User {
    pub fn is_enabled(&self) -> bool {
        self.disabled_at.is_none()
    }
}

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
pub fn frame(event: &Value) -> Utf8Bytes {
    Utf8Bytes::from(event.to_string())
}

fn base(kind: &str) -> Value {
    json!({ "id": short_id(), "timestamp": Utc::now(), "type": kind })
}

fn with(mut v: Value, extra: Value) -> Value {
    if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
        m.extend(e);
    }
    v
}

/// `{id,timestamp,type:"CHAT",body,user,visible}` for a stored message.
pub fn chat(id: &str, timestamp: DateTime<Utc>, body: &str, user: &User, visible: bool) -> Value {
    json!({ "id": id, "timestamp": timestamp, "type": CHAT, "body": body, "user": user, "visible": visible })
}

pub fn connected_user_info(user: &User) -> Value {
    with(base(CONNECTED_USER_INFO), json!({ "user": user }))
}

pub fn user_event(kind: &str, user: &User) -> Value {
    with(base(kind), json!({ "user": user }))
}

pub fn name_change(user: &User, old_name: &str) -> Value {
    with(base(NAME_CHANGE), json!({ "user": user, "oldName": old_name }))
}

pub fn system(body: &str, server_name: &str) -> Value {
    with(base(SYSTEM), json!({ "body": body, "user": { "displayName": server_name } }))
}

pub fn chat_action(body: &str) -> Value {
    with(base(CHAT_ACTION), json!({ "body": body }))
}

pub fn visibility(ids: &[String], visible: bool) -> Value {
    with(base(VISIBILITY_UPDATE), json!({ "ids": ids, "visible": visible }))
}

/// An error event (`ERROR_NEEDS_REGISTRATION`, ...), with the user when there is one.
pub fn error(kind: &str, user: Option<&User>) -> Value {
    match user {
        Some(u) => with(base(kind), json!({ "user": u })),
        None => base(kind),
    }
}
