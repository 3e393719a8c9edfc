//! Moderation: hiding and showing messages, enabling and disabling users, moderators, IP bans and
//! deleting users. Each change is stored, then announced to the room (VISIBILITY-UPDATE, ...) and on
//! the bus.
//!
//! Disabling a user hides all their messages, sends ERROR_USER_DISABLED to each of their
//! connections and closes them `KICK_DELAY` later, announces "**name** has been removed from chat.",
//! and bans the addresses of those connections (never loopback, so a local proxy is not banned).
//!
//! IP bans by the admin take any IPv4 or IPv6 address, loopback included (as Owncast does); addresses
//! are kept in canonical form (`normalize_ip`: IPv4-mapped IPv6 as IPv4, IPv6 compressed) and checked
//! the same way, so `::FFFF:203.0.113.9`, `203.0.113.9` and `0:0:0:0:0:0:0:1`/`::1` each name one ban.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::protocol::{self as p, User};
use super::relay::Outbound;
use super::users::{parse_ts, ts};
use super::Chat;
use super::{broadcast, messages, users};
use crate::store::StoreError;
use crate::tasks::Stage;

/// How long a disabled user's sockets stay open after ERROR_USER_DISABLED.
pub const KICK_DELAY: Duration = Duration::from_secs(2);

/// Errors of moderation actions.
#[derive(Debug, thiserror::Error)]
pub enum ModerationError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("user not found")]
    UserNotFound,
    #[error("{0}")]
    Invalid(String),
}

/// An IP ban as the admin API lists it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpBan {
    pub ip_address: String,
    pub notes: String,
    pub created_at: DateTime<Utc>,
}

/// The canonical form of an address: IPv4-mapped IPv6 becomes IPv4.
pub fn normalize_ip(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

pub fn load_bans(conn: &mut Connection) -> Result<Vec<IpAddr>, StoreError> {
    let mut stmt = conn.prepare("SELECT ip FROM chat_ip_bans")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let ips: Vec<String> = rows.collect::<Result<_, _>>()?;
    Ok(ips.iter().filter_map(|s| s.parse().ok()).map(normalize_ip).collect())
}

pub async fn list_bans(ctx: &Chat) -> Result<Vec<IpBan>, ModerationError> {
    Ok(ctx
        .store
        .call(|c| {
            let mut stmt = c.prepare("SELECT ip, notes, created_at FROM chat_ip_bans ORDER BY created_at")?;
            let rows = stmt.query_map([], |r| {
                Ok(IpBan { ip_address: r.get(0)?, notes: r.get(1)?, created_at: parse_ts(&r.get::<_, String>(2)?)? })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await?)
}

/// Ban an address (any, loopback included) and drop its current chat connections.
pub async fn ban_ip(ctx: &Chat, ip: IpAddr, notes: &str) -> Result<(), ModerationError> {
    let ip = normalize_ip(ip);
    let notes = notes.to_string();
    ctx.store
        .call(move |c| {
            c.execute(
                "INSERT INTO chat_ip_bans (ip, notes, created_at) VALUES (?1, ?2, ?3) ON CONFLICT(ip) DO NOTHING",
                params![ip.to_string(), notes, ts(Utc::now())],
            )?;
            Ok(())
        })
        .await?;
    ctx.set_banned(ip, true);
    for c in ctx.hub.from_ip(ip) {
        c.close();
    }
    ctx.to_nodes(Outbound::Banned { ip });
    Ok(())
}

/// Lift a ban; false when the address was not banned.
pub async fn unban_ip(ctx: &Chat, ip: IpAddr) -> Result<bool, ModerationError> {
    let ip = normalize_ip(ip);
    let n = ctx.store.call(move |c| Ok(c.execute("DELETE FROM chat_ip_bans WHERE ip = ?1", [ip.to_string()])?)).await?;
    ctx.set_banned(ip, false);
    Ok(n > 0)
}

/// Hide or show messages; returns how many exist. Announces VISIBILITY-UPDATE.
pub async fn set_visibility(ctx: &Chat, ids: Vec<String>, visible: bool) -> Result<usize, ModerationError> {
    let found = ctx.store.call(move |c| messages::set_visibility(c, &ids, visible)).await?;
    if !found.is_empty() {
        broadcast(ctx, p::visibility(&found, visible));
    }
    Ok(found.len())
}

/// Enable or disable a user (see the module docs for what disabling does).
pub async fn set_user_enabled(ctx: &Arc<Chat>, user_id: &str, enabled: bool) -> Result<User, ModerationError> {
    let id = user_id.to_string();
    let (user, hidden) = ctx
        .store
        .call(move |c| {
            let Some(user) = users::set_enabled(c, &id, enabled)? else { return Ok(None) };
            let hidden = if enabled { Vec::new() } else { messages::hide_all_of_user(c, &id)? };
            Ok(Some((user, hidden)))
        })
        .await?
        .ok_or(ModerationError::UserNotFound)?;
    ctx.hub.update_user(&user);
    if enabled {
        return Ok(user);
    }
    if !hidden.is_empty() {
        broadcast(ctx, p::visibility(&hidden, false));
    }
    let clients = ctx.hub.of_user(&user.id);
    let error = p::frame(&p::error(p::ERROR_USER_DISABLED, Some(&user)));
    let delay_ms = u64::try_from(KICK_DELAY.as_millis()).unwrap_or(u64::MAX);
    ctx.to_nodes(Outbound::Kick { user_id: user.id.clone(), frame: Some(error.to_string()), delay_ms });
    for c in &clients {
        c.send(error.clone());
        if !c.ip.is_loopback() {
            if let Err(e) = ban_ip(ctx, c.ip, &format!("disabled user {}", user.display_name)).await {
                tracing::warn!(error = %e, "could not ban the address of a disabled user");
            }
        }
    }
    if !clients.is_empty() {
        ctx.tasks.spawn_until_stopped(Stage::Connections, "chat: kick", async move {
            tokio::time::sleep(KICK_DELAY).await;
            for c in clients {
                c.close();
            }
        });
    }
    let name = ammonia::clean_text(&user.display_name);
    let action = p::chat_action(&format!("<strong>{name}</strong> has been removed from chat."));
    broadcast(ctx, action);
    Ok(user)
}

/// Grant or take the MODERATOR scope; connected clients of the user get a fresh CONNECTED_USER_INFO.
pub async fn set_moderator(ctx: &Chat, user_id: &str, moderator: bool) -> Result<User, ModerationError> {
    let id = user_id.to_string();
    let user = ctx.store.call(move |c| users::set_moderator(c, &id, moderator)).await?;
    let user = user.ok_or(ModerationError::UserNotFound)?;
    ctx.hub.update_user_local(&user);
    ctx.to_nodes(Outbound::User { user: user.clone(), info: true });
    let info = p::frame(&p::connected_user_info(&user));
    for c in ctx.hub.of_user(&user.id) {
        c.send(info.clone());
    }
    Ok(user)
}

/// Delete a user and their messages; their sockets are closed and the messages vanish from the room.
pub async fn delete_user(ctx: &Chat, user_id: &str) -> Result<(), ModerationError> {
    let id = user_id.to_string();
    let ids = ctx
        .store
        .call(move |c| {
            let exists: Option<String> =
                c.query_row("SELECT id FROM chat_users WHERE id = ?1", [&id], |r| r.get(0)).optional()?;
            if exists.is_none() {
                return Ok(None);
            }
            let ids = messages::ids_of_user(c, &id)?;
            users::delete(c, &id)?;
            Ok(Some(ids))
        })
        .await?
        .ok_or(ModerationError::UserNotFound)?;
    if !ids.is_empty() {
        broadcast(ctx, p::visibility(&ids, false));
    }
    for c in ctx.hub.of_user(user_id) {
        c.close();
    }
    ctx.to_nodes(Outbound::Kick { user_id: user_id.to_string(), frame: None, delay_ms: 0 });
    Ok(())
}
