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

/// USER_JOINED, USER_PARTED, COLOR_CHANGE, CONNECTED_USER_INFO: `{id,timestamp,type,user}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UserEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub user: User,
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
/// shape: `title` is the account name, `link` its profile, `image` its avatar). Federation publishes
/// it; chat sends it to the room.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FediverseEngagementEvent {
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub body: String,
    pub image: Option<String>,
    pub link: String,
    pub title: String,
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
        };
        let safe = ChatEvent::FediverseLike(ev).with_safe_links();
        let ChatEvent::FediverseLike(safe) = safe else { panic!("the same kind") };
        assert_eq!((safe.link.as_str(), safe.image), ("", None));
    }
}
