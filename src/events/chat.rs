//! The chat events: their typed payloads, which are both the chat wire format (what the `/ws` hub
//! sends) and the `eventData` of the chat webhooks. The chat feature builds them; webhooks and future
//! consumers (federation) read them without knowing the chat feature.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::EventType;

/// A chat user as the API and the websocket show it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, utoipa::ToSchema)]
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
    /// How the user signed in (`"indieauth"`, `"fediverse"`), when `authenticated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub auth_provider: Option<String>,
}

impl User {
    pub fn is_enabled(&self) -> bool {
        self.disabled_at.is_none()
    }
}

/// A stored message that viewers may see (visible, of an enabled user or the system), as the chat
/// feature hands it to other features (a replay's chat, through `http::UserTokens::chat_between`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLine {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    /// `CHAT`, `SYSTEM`, `CHAT_ACTION`, ...
    pub kind: String,
    pub body: String,
    pub user: Option<User>,
}

/// A chat message (CHAT): `{id,timestamp,type,body,user,visible}`; the bus copy also carries Owncast's
/// webhook extras `rawBody` and `clientId`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MessageEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub body: String,
    pub user: User,
    pub visible: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
}

/// USER_JOINED, USER_PARTED, COLOR_CHANGE, CONNECTED_USER_INFO: `{id,timestamp,type,user}` as the
/// room gets it; the bus copy of USER_JOINED and USER_PARTED also carries `clientId`, the chat
/// connection's id (what `/api/integrations/chat/system/client/{clientId}` takes), as Owncast's webhook
/// `eventData` does: a bot greets the user who joined through it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UserEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub user: User,
    #[serde(rename = "clientId", skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
}

/// NAME_CHANGE: `{id,timestamp,type,user,oldName,newName}`, plus `clientId` when a chat connection
/// asked for the change (Owncast's webhook `eventData` is the inbound event, with `newName` and
/// `clientId`; its broadcast carries `oldName`: castd sends all of them to both).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NameChangeEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub user: User,
    pub old_name: String,
    pub new_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<u64>,
}

/// VISIBILITY-UPDATE: `{id,timestamp,type,ids,visible}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VisibilityEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub ids: Vec<String>,
    pub visible: bool,
}

/// The `user` of a SYSTEM message: the server's name.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SystemUser {
    pub display_name: String,
}

/// SYSTEM: `{id,timestamp,type,body,user:{displayName}}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SystemEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub body: String,
    pub user: SystemUser,
}

/// CHAT_ACTION: `{id,timestamp,type,body}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ActionEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub body: String,
}

/// FEDIVERSE_ENGAGEMENT_FOLLOW / _LIKE / _REPOST: `{id,timestamp,type,body,image,link,title}` (Owncast's
/// chat shape: `title` is the account (`user@host`), `link` its profile, `image` its avatar). Federation
/// publishes it; chat sends it to the room. The webhook adds Owncast's follow fields `name` (the
/// account's display name) and `username` (the account), see [`ChatEvent::webhook_data`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FediverseEngagementEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub body: String,
    pub image: Option<String>,
    pub link: String,
    pub title: String,
    /// The account's display name (its account when it has none): webhook only.
    #[serde(skip)]
    pub name: String,
}

impl FediverseEngagementEvent {
    /// The event with only http(s) links: a `link` or `image` of another scheme (`javascript:`,
    /// `data:`, ...) comes from a remote document and must never reach a browser; it is dropped.
    pub fn with_safe_links(&self) -> FediverseEngagementEvent {
        FediverseEngagementEvent {
            image: self.image.as_deref().and_then(http_link),
            link: http_link(&self.link).unwrap_or_default(),
            ..self.clone()
        }
    }
}

/// `s` as an absolute `http`/`https` URL with a host (normalised), or `None` for anything else. Every
/// URL that comes from outside (a remote actor's profile, avatar, links) passes through this before it
/// is stored or shown.
pub fn http_link(s: &str) -> Option<String> {
    let u = url::Url::parse(s.trim()).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return None;
    }
    Some(u.to_string())
}

/// A chat event; serialises with its `type` as Owncast's clients expect.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type")]
pub enum ChatEvent {
    #[serde(rename = "CHAT")]
    Message(MessageEvent),
    #[serde(rename = "USER_JOINED")]
    UserJoined(UserEvent),
    #[serde(rename = "USER_PARTED")]
    UserParted(UserEvent),
    #[serde(rename = "NAME_CHANGE")]
    NameChange(NameChangeEvent),
    #[serde(rename = "COLOR_CHANGE")]
    ColorChange(UserEvent),
    #[serde(rename = "VISIBILITY-UPDATE")]
    VisibilityUpdate(VisibilityEvent),
    #[serde(rename = "SYSTEM")]
    System(SystemEvent),
    #[serde(rename = "CHAT_ACTION")]
    Action(ActionEvent),
    #[serde(rename = "FEDIVERSE_ENGAGEMENT_FOLLOW")]
    FediverseFollow(FediverseEngagementEvent),
    #[serde(rename = "FEDIVERSE_ENGAGEMENT_LIKE")]
    FediverseLike(FediverseEngagementEvent),
    #[serde(rename = "FEDIVERSE_ENGAGEMENT_REPOST")]
    FediverseRepost(FediverseEngagementEvent),
}

impl ChatEvent {
    /// A fediverse engagement, which federation publishes and chat only relays to the room.
    pub fn is_fediverse(&self) -> bool {
        matches!(self, ChatEvent::FediverseFollow(_) | ChatEvent::FediverseLike(_) | ChatEvent::FediverseRepost(_))
    }

    /// The event with every remote link checked ([`FediverseEngagementEvent::with_safe_links`]);
    /// other events are returned as they are.
    pub fn with_safe_links(&self) -> ChatEvent {
        match self {
            ChatEvent::FediverseFollow(e) => ChatEvent::FediverseFollow(e.with_safe_links()),
            ChatEvent::FediverseLike(e) => ChatEvent::FediverseLike(e.with_safe_links()),
            ChatEvent::FediverseRepost(e) => ChatEvent::FediverseRepost(e.with_safe_links()),
            other => other.clone(),
        }
    }

    /// The event with the chat connection that caused it (USER_JOINED, USER_PARTED, CHAT,
    /// NAME_CHANGE): the bus copy, whose webhook `eventData` carries `clientId`. Other events are
    /// returned as they are.
    pub fn with_client_id(mut self, client: u64) -> ChatEvent {
        match &mut self {
            ChatEvent::UserJoined(e) | ChatEvent::UserParted(e) => e.client_id = Some(client),
            ChatEvent::Message(e) => e.client_id = Some(client),
            ChatEvent::NameChange(e) => e.client_id = Some(client),
            _ => {}
        }
        self
    }

    /// Owncast's webhook `eventData` for this event (Owncast 0.2's keys, each checked by
    /// `tests/integrations.rs`' webhook key-set test and `tests/behaviours.rs`):
    /// - CHAT: `{id,timestamp,body,rawBody,user,clientId,visible}`, no `type` (Owncast sends its own
    ///   message struct, not the chat event);
    /// - USER_JOINED / USER_PARTED: the chat event `{id,timestamp,type,user,clientId}`;
    /// - NAME_CHANGE: `{id,timestamp,type,user,clientId,newName}` and castd's `oldName`;
    /// - VISIBILITY-UPDATE: Owncast serialises its Go struct as it is — `MessageIDs`, `Visible`, an
    ///   empty `body` and a null `user` beside `{id,timestamp,type}` — and newer Owncast names them `ids`
    ///   and `visible` (the chat event's names): both are sent;
    /// - FEDIVERSE_ENGAGEMENT_*: the chat event and Owncast's follow fields `name` and `username`;
    /// - SYSTEM, CHAT_ACTION (no Owncast webhook; castd sends them): the chat event.
    pub fn webhook_data(&self) -> serde_json::Value {
        let mut v = match self {
            ChatEvent::Message(m) => serde_json::to_value(m),
            other => serde_json::to_value(other),
        }
        .unwrap_or(serde_json::Value::Null);
        let Some(obj) = v.as_object_mut() else { return v };
        match self {
            ChatEvent::VisibilityUpdate(e) => {
                obj.insert("MessageIDs".into(), serde_json::json!(e.ids));
                obj.insert("Visible".into(), e.visible.into());
                obj.insert("body".into(), "".into());
                obj.insert("user".into(), serde_json::Value::Null);
            }
            ChatEvent::FediverseFollow(e) | ChatEvent::FediverseLike(e) | ChatEvent::FediverseRepost(e) => {
                obj.insert("name".into(), e.name.clone().into());
                obj.insert("username".into(), e.title.clone().into());
            }
            _ => {}
        }
        v
    }

    pub fn kind(&self) -> EventType {
        match self {
            ChatEvent::Message(_) => EventType::Chat,
            ChatEvent::UserJoined(_) => EventType::UserJoined,
            ChatEvent::UserParted(_) => EventType::UserParted,
            ChatEvent::NameChange(_) => EventType::NameChange,
            ChatEvent::ColorChange(_) => EventType::ColorChange,
            ChatEvent::VisibilityUpdate(_) => EventType::VisibilityUpdate,
            ChatEvent::System(_) => EventType::System,
            ChatEvent::Action(_) => EventType::ChatAction,
            ChatEvent::FediverseFollow(_) => EventType::FediverseEngagementFollow,
            ChatEvent::FediverseLike(_) => EventType::FediverseEngagementLike,
            ChatEvent::FediverseRepost(_) => EventType::FediverseEngagementRepost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_links_survive() {
        for (given, kept) in [
            ("https://a.example/@x", Some("https://a.example/@x")),
            (" http://a.example ", Some("http://a.example/")),
            ("javascript:alert(1)", None),
            ("JavaScript:alert(1)", None),
            ("data:text/html,<script>alert(1)</script>", None),
            ("vbscript:x", None),
            ("//a.example/x", None),
            ("/relative", None),
            ("https://", None),
            ("", None),
        ] {
            assert_eq!(http_link(given).as_deref(), kept, "{given}");
        }
        let ev = FediverseEngagementEvent {
            id: "1".into(),
            timestamp: Utc::now(),
            body: "x".into(),
            image: Some("javascript:alert(2)".into()),
            link: "javascript:alert(1)".into(),
            title: "t".into(),
            name: "n".into(),
        };
        let safe = ChatEvent::FediverseLike(ev).with_safe_links();
        let ChatEvent::FediverseLike(safe) = safe else { panic!("the same kind") };
        assert_eq!((safe.link.as_str(), safe.image), ("", None));
    }
}
