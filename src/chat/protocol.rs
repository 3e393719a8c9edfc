//! The chat wire protocol: Owncast's event type names, and the events the server sends (built once per
//! event and shared by all recipients as one `Utf8Bytes` frame). The broadcast events' types live in
//! `events::chat`, as they are also bus events; the per-client ones (CONNECTED_USER_INFO, errors) here.
//!
//! Every server event carries `id` (a short random id), `timestamp` (RFC 3339) and `type`. A frame
//! may hold several events separated by `\n`, as Owncast's hub does.
//!
//! What a client sends is read once into a [`ClientCommand`] (CHAT, NAME_CHANGE, COLOR_CHANGE, or an
//! unknown type), which `ws` dispatches on.

use axum::extract::ws::Utf8Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::MAX_SOCKET_PAYLOAD_SIZE;
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

/// An event as a client sends it (the JSON shape), before it is read into a [`ClientCommand`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inbound {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    new_name: Option<String>,
    #[serde(default)]
    new_color: Option<i64>,
}

/// What a chat client asks for, read once from its event (`parse` for a socket's frame, `from_fields`
/// for an event an edge relayed). A field the command needs but the event lacks is read as Owncast's
/// hub reads it: an empty body or name (which the handlers ignore, after the checks that answer the
/// sender), no colour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCommand {
    /// CHAT: a message.
    Chat { body: String },
    /// NAME_CHANGE: the user's new display name.
    NameChange { new_name: String },
    /// COLOR_CHANGE: the user's new colour (checked against the palette by the handler).
    ColorChange { color: Option<i64> },
    /// Any other type: ignored (not rate-limited, not answered).
    Unknown(String),
}

/// Why a client's frame is not a command.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Longer than `MAX_SOCKET_PAYLOAD_SIZE` (the sender is told [`MSG_TOO_BIG`]).
    #[error("the event is {0} bytes, more than the {max} a client may send", max = MAX_SOCKET_PAYLOAD_SIZE)]
    TooBig(usize),
    /// Not an event (not JSON, no `type`, a field of the wrong type): ignored.
    #[error("unreadable chat event: {0}")]
    Unreadable(#[from] serde_json::Error),
}

impl ClientCommand {
    /// Read one text frame a client sent.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        if text.len() > MAX_SOCKET_PAYLOAD_SIZE {
            return Err(ParseError::TooBig(text.len()));
        }
        let ev: Inbound = serde_json::from_str(text)?;
        Ok(Self::from_fields(ev.kind, ev.body, ev.new_name, ev.new_color))
    }

    /// The command of an event's fields (as an edge relays them, see `relay::Inbound`).
    pub fn from_fields(kind: String, body: Option<String>, new_name: Option<String>, new_color: Option<i64>) -> Self {
        match kind.as_str() {
            CHAT => Self::Chat { body: body.unwrap_or_default() },
            NAME_CHANGE => Self::NameChange { new_name: new_name.unwrap_or_default() },
            COLOR_CHANGE => Self::ColorChange { color: new_color },
            _ => Self::Unknown(kind),
        }
    }

    /// The event's fields again, the inverse of [`ClientCommand::from_fields`] (an edge relays them).
    pub fn into_fields(self) -> (String, Option<String>, Option<String>, Option<i64>) {
        match self {
            Self::Chat { body } => (CHAT.into(), Some(body), None, None),
            Self::NameChange { new_name } => (NAME_CHANGE.into(), None, Some(new_name), None),
            Self::ColorChange { color } => (COLOR_CHANGE.into(), None, None, color),
            Self::Unknown(kind) => (kind, None, None, None),
        }
    }

    /// The event type it was sent as.
    pub fn kind(&self) -> &str {
        match self {
            Self::Chat { .. } => CHAT,
            Self::NameChange { .. } => NAME_CHANGE,
            Self::ColorChange { .. } => COLOR_CHANGE,
            Self::Unknown(kind) => kind,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ClientCommand {
        match ClientCommand::parse(text) {
            Ok(c) => c,
            Err(e) => panic!("{text} did not parse: {e}"),
        }
    }

    #[test]
    fn every_command_is_read() {
        assert_eq!(parse(r#"{"type":"CHAT","body":"hi"}"#), ClientCommand::Chat { body: "hi".into() });
        assert_eq!(
            parse(r#"{"type":"NAME_CHANGE","newName":"alice"}"#),
            ClientCommand::NameChange { new_name: "alice".into() }
        );
        assert_eq!(parse(r#"{"type":"COLOR_CHANGE","newColor":3}"#), ClientCommand::ColorChange { color: Some(3) });
        // Fields of another command are ignored.
        assert_eq!(parse(r#"{"type":"CHAT","body":"x","newName":"y"}"#), ClientCommand::Chat { body: "x".into() });
        for c in [
            ClientCommand::Chat { body: String::new() },
            ClientCommand::NameChange { new_name: String::new() },
            ClientCommand::ColorChange { color: None },
        ] {
            assert_eq!(parse(&format!(r#"{{"type":"{}"}}"#, c.kind())), c, "the kind round-trips");
        }
    }

    #[test]
    fn an_unknown_type_is_unknown() {
        assert_eq!(parse(r#"{"type":"PING","body":"x"}"#), ClientCommand::Unknown("PING".into()));
        // Types are case-sensitive, as in Owncast.
        assert_eq!(parse(r#"{"type":"chat","body":"x"}"#), ClientCommand::Unknown("chat".into()));
        // The outbound-only types are not commands either.
        assert_eq!(parse(r#"{"type":"SYSTEM","body":"x"}"#), ClientCommand::Unknown(SYSTEM.into()));
        assert_eq!(ClientCommand::Unknown("PING".into()).kind(), "PING");
    }

    #[test]
    fn a_missing_field_reads_as_empty() {
        assert_eq!(parse(r#"{"type":"CHAT"}"#), ClientCommand::Chat { body: String::new() });
        assert_eq!(parse(r#"{"type":"CHAT","body":null}"#), ClientCommand::Chat { body: String::new() });
        assert_eq!(parse(r#"{"type":"NAME_CHANGE"}"#), ClientCommand::NameChange { new_name: String::new() });
        assert_eq!(parse(r#"{"type":"COLOR_CHANGE"}"#), ClientCommand::ColorChange { color: None });
    }

    #[test]
    fn an_unreadable_event_is_an_error() {
        for text in [
            "",
            "not json",
            "{}",
            r#"{"body":"no type"}"#,
            r#"{"type":7}"#,
            r#"{"type":"CHAT","body":5}"#,
            r#"{"type":"COLOR_CHANGE","newColor":"red"}"#,
            "[1,2]",
        ] {
            assert!(matches!(ClientCommand::parse(text), Err(ParseError::Unreadable(_))), "{text:?}");
        }
    }

    #[test]
    fn a_huge_body_is_too_big() {
        let frame = |n: usize| format!(r#"{{"type":"CHAT","body":"{}"}}"#, "a".repeat(n));
        let overhead = frame(0).len();
        let at_limit = frame(MAX_SOCKET_PAYLOAD_SIZE - overhead);
        assert_eq!(at_limit.len(), MAX_SOCKET_PAYLOAD_SIZE);
        assert!(
            matches!(ClientCommand::parse(&at_limit), Ok(ClientCommand::Chat { .. })),
            "the limit itself is allowed"
        );
        let over = frame(MAX_SOCKET_PAYLOAD_SIZE - overhead + 1);
        assert!(matches!(ClientCommand::parse(&over), Err(ParseError::TooBig(n)) if n == MAX_SOCKET_PAYLOAD_SIZE + 1));
        // Too big wins over unreadable: the sender is told, whatever it sent.
        let junk = "x".repeat(10 * MAX_SOCKET_PAYLOAD_SIZE);
        assert!(matches!(ClientCommand::parse(&junk), Err(ParseError::TooBig(_))));
        // An unknown type is measured too.
        let unknown = format!(r#"{{"type":"PING","body":"{}"}}"#, "a".repeat(MAX_SOCKET_PAYLOAD_SIZE));
        assert!(matches!(ClientCommand::parse(&unknown), Err(ParseError::TooBig(_))));
    }

    #[test]
    fn into_fields_inverts_from_fields() {
        for c in [
            ClientCommand::Chat { body: "hi".into() },
            ClientCommand::NameChange { new_name: "n".into() },
            ClientCommand::ColorChange { color: Some(2) },
            ClientCommand::ColorChange { color: None },
            ClientCommand::Unknown("PING".into()),
        ] {
            let (kind, body, name, color) = c.clone().into_fields();
            assert_eq!(ClientCommand::from_fields(kind, body, name, color), c);
        }
    }

    #[test]
    fn relayed_fields_read_as_the_same_commands() {
        let c = ClientCommand::from_fields(CHAT.into(), Some("hi".into()), Some("n".into()), Some(1));
        assert_eq!(c, ClientCommand::Chat { body: "hi".into() });
        let c = ClientCommand::from_fields(NAME_CHANGE.into(), None, Some("n".into()), None);
        assert_eq!(c, ClientCommand::NameChange { new_name: "n".into() });
        let c = ClientCommand::from_fields(COLOR_CHANGE.into(), None, None, Some(2));
        assert_eq!(c, ClientCommand::ColorChange { color: Some(2) });
        assert_eq!(ClientCommand::from_fields("ROOM".into(), None, None, None), ClientCommand::Unknown("ROOM".into()));
    }
}
