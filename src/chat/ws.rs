//! One websocket connection at `/ws?accessToken=`: the pre-upgrade checks, the connection task
//! (queue → socket with write coalescing, socket → inbound events, keepalive) and the handling of
//! client events (CHAT, NAME_CHANGE, COLOR_CHANGE) with the size limit, the per-client rate limit,
//! established-user mode, "require authentication" and the slur filter.
//!
//! Require authentication (`chat/requireauthentication`): while it is on, a user who is not
//! `authenticated` may read the chat but not send: their CHAT is answered with a CHAT_ACTION saying
//! so (to that client only, as the other refusals are) and is neither stored nor broadcast.
//!
//! Rate limit: a token bucket per connection of `BURST` events refilled at `REFILL_PER_SEC`, which
//! normal typing never hits. A client that empties it is blocked for `FLOOD_TIMEOUT` (told once with
//! Owncast's CHAT_ACTION text; its events are dropped meanwhile). Only that client is affected.
//!
//! Keepalive: a websocket ping every 54 s; a connection that sends nothing (not even a pong) for 60 s
//! is closed; a write that takes longer than 10 s closes the connection.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::filter::WordFilter;
use super::hub::{Client, Out};
use super::messages::ChatMessage;
use super::protocol::{self as p, Inbound, User};
use super::Chat;
use super::{action_to, broadcast, sanitize, users};
use crate::config::MAX_SOCKET_PAYLOAD_SIZE;
use crate::events::{ChatEvent, Event};
use crate::http::ApiError;

/// Events a client may send in a burst.
pub const BURST: f64 = 5.0;
/// Sustained events per second (one every 0.66 s).
pub const REFILL_PER_SEC: f64 = 1.5;
/// How long a flooder is muted.
pub const FLOOD_TIMEOUT: Duration = Duration::from_secs(10);
/// Delay of the welcome message after connecting (Owncast: about 7 s).
pub const WELCOME_DELAY: Duration = Duration::from_secs(7);
/// Delay of USER_PARTED after a user's last connection closes.
pub const PART_DELAY: Duration = Duration::from_secs(10);
/// Users younger than this may not chat in established-user mode.
pub const ESTABLISHED_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(15);

const PING_EVERY: Duration = Duration::from_secs(54);
const READ_DEADLINE: Duration = Duration::from_secs(60);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most events coalesced into one frame.
const MAX_BATCH: usize = 64;

#[derive(Debug, Deserialize)]
pub struct WsQuery {
    #[serde(rename = "accessToken")]
    access_token: Option<String>,
}

enum Lookup {
    NoToken,
    Unknown,
    Disabled(User),
    Ok(User),
}

/// `GET /ws`: check, upgrade, run the connection.
pub async fn handler(
    State(ctx): State<Arc<Chat>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<WsQuery>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    if ctx.settings.get().chat_disabled {
        return (StatusCode::SERVICE_UNAVAILABLE, p::CHAT_DISABLED).into_response();
    }
    // Canonical form (IPv4-mapped IPv6 as IPv4), as bans are kept, so a ban finds the open sockets.
    let ip = crate::http::client_ip(peer, &headers);
    if ctx.is_banned(ip) {
        return ApiError::Forbidden("forbidden".into()).into_response();
    }
    if ctx.hub.len() >= ctx.max_connections() {
        return (StatusCode::SERVICE_UNAVAILABLE, p::ERROR_MAX_CONNECTIONS_EXCEEDED).into_response();
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => return ApiError::bad(format!("a websocket upgrade is required: {e}")).into_response(),
    };
    let lookup = match q.access_token.filter(|t| !t.is_empty()) {
        None => Lookup::NoToken,
        Some(token) => match ctx.store.call(move |c| users::by_token(c, &token)).await {
            Ok(Some(u)) if u.is_enabled() => Lookup::Ok(u),
            Ok(Some(u)) => Lookup::Disabled(u),
            Ok(None) => Lookup::Unknown,
            Err(e) => return ApiError::from(e).into_response(),
        },
    };
    let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    ws.max_message_size(2 * MAX_SOCKET_PAYLOAD_SIZE)
        .max_frame_size(2 * MAX_SOCKET_PAYLOAD_SIZE)
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .on_upgrade(move |socket| run(ctx, socket, lookup, ip, ua))
}

/// Send one event and close (registration and disabled errors).
async fn refuse(mut socket: WebSocket, event: Option<serde_json::Value>) {
    if let Some(ev) = event {
        let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.send(Message::Text(p::frame(&ev)))).await;
    }
    let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.send(Message::Close(None))).await;
}

async fn run(ctx: Arc<Chat>, socket: WebSocket, lookup: Lookup, ip: IpAddr, ua: String) {
    let user = match lookup {
        Lookup::NoToken => return refuse(socket, None).await,
        Lookup::Unknown => return refuse(socket, Some(p::error(p::ERROR_NEEDS_REGISTRATION, None))).await,
        Lookup::Disabled(u) => return refuse(socket, Some(p::error(p::ERROR_USER_DISABLED, Some(&u)))).await,
        Lookup::Ok(u) => u,
    };
    let (client, mut queues, fresh) = ctx.hub.add(user.clone(), ip, ua);
    ctx.telemetry.set_chat_clients(ctx.hub.len() as u64);
    client.send(p::frame(&p::connected_user_info(&user)));
    let settings = ctx.settings.get();
    if fresh && settings.chat_join_messages_enabled && ctx.stream.borrow().online {
        broadcast(&ctx, p::user_joined(&user));
    }
    if !settings.welcome_message.trim().is_empty() {
        let (ctx2, id) = (ctx.clone(), client.id);
        tokio::spawn(async move {
            tokio::time::sleep(WELCOME_DELAY).await;
            if let Some(c) = ctx2.hub.client(id) {
                let s = ctx2.settings.get();
                c.send(p::frame(&p::system(&sanitize::render(&s.welcome_message), &s.name)));
            }
        });
    }
    drop(settings);

    let (mut sink, mut stream) = socket.split();
    // Reading runs in its own task, so the writer below never polls the socket's read side after each
    // frame it sends (with one message going to thousands of sockets, that re-poll was a measurable
    // share of the fan-out). The reader ends on close, error, or no frame for `READ_DEADLINE`.
    let mut reader = {
        let (ctx, client) = (ctx.clone(), client.clone());
        tokio::spawn(async move {
            let mut limiter = RateLimiter::new(Instant::now());
            loop {
                match tokio::time::timeout(READ_DEADLINE, stream.next()).await {
                    Ok(Some(Ok(Message::Text(text)))) => {
                        // Boxed: the handler's state is large and only needed while a frame is
                        // handled, so an idle connection's task stays small.
                        Box::pin(handle_inbound(&ctx, &client, &mut limiter, text.as_str())).await;
                    }
                    Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) | Err(_) => break,
                    Ok(Some(Ok(_))) => {}
                }
            }
        })
    };
    let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
    // One waiter registration for the connection's life, not one per loop turn.
    let killed = client.kill.notified();
    tokio::pin!(killed);
    let mut reader_done = false;
    loop {
        tokio::select! {
            biased;
            _ = &mut killed => break,
            _ = &mut reader => {
                reader_done = true;
                break;
            }
            out = queues.direct.recv() => {
                let Some(out) = out else { break };
                let (frame, close) = coalesce(out, &mut queues.direct);
                if let Some(frame) = frame {
                    if !send_bounded(&mut sink, Message::Text(frame)).await {
                        break;
                    }
                }
                if close {
                    send_bounded(&mut sink, Message::Close(None)).await;
                    break;
                }
            }
            room = queues.room.recv() => {
                let first = match room {
                    Ok(frame) => frame,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        ctx.hub.lagged(&client);
                        break;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                let (frame, lagged) = coalesce_room(first, &mut queues.room);
                if !send_bounded(&mut sink, Message::Text(frame)).await {
                    break;
                }
                if lagged {
                    ctx.hub.lagged(&client);
                    break;
                }
            }
            _ = ping.tick() => {
                if !send_bounded(&mut sink, Message::Ping(Default::default())).await {
                    break;
                }
            }
        }
    }
    if ctx.hub.remove(&client) {
        schedule_part(&ctx, &client);
    }
    ctx.telemetry.set_chat_clients(ctx.hub.len() as u64);
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    // A message being handled (stored, then broadcast) is let finish; a peer that never answers the
    // close is not waited for.
    if !reader_done && tokio::time::timeout(Duration::from_secs(1), &mut reader).await.is_err() {
        reader.abort();
    }
}

/// Send `msg` within `WRITE_TIMEOUT`; false when it failed or timed out. Nearly every send completes
/// on its first poll (the socket buffer has room), so the timer is armed only for one that does not:
/// a timer per frame per client is measurable when one message goes to 10,000 sockets.
async fn send_bounded<S>(sink: &mut S, msg: Message) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    let mut send = std::pin::pin!(sink.send(msg));
    if let std::task::Poll::Ready(result) = futures_util::poll!(send.as_mut()) {
        return result.is_ok();
    }
    matches!(tokio::time::timeout(WRITE_TIMEOUT, send).await, Ok(Ok(())))
}

/// `first` and whatever else the room has queued for this client (up to `MAX_BATCH`) as one frame;
/// the flag says the client lagged behind the ring meanwhile.
fn coalesce_room(first: Utf8Bytes, rx: &mut broadcast::Receiver<Utf8Bytes>) -> (Utf8Bytes, bool) {
    let mut more: Vec<Utf8Bytes> = Vec::new();
    let mut lagged = false;
    while more.len() + 1 < MAX_BATCH {
        match rx.try_recv() {
            Ok(f) => more.push(f),
            Err(broadcast::error::TryRecvError::Lagged(_)) => {
                lagged = true;
                break;
            }
            Err(_) => break,
        }
    }
    (join_frames(first, &more), lagged)
}

fn join_frames(first: Utf8Bytes, more: &[Utf8Bytes]) -> Utf8Bytes {
    if more.is_empty() {
        return first;
    }
    let len = first.len() + more.iter().map(|f| f.len() + 1).sum::<usize>();
    let mut joined = String::with_capacity(len);
    joined.push_str(first.as_str());
    for f in more {
        joined.push('\n');
        joined.push_str(f.as_str());
    }
    Utf8Bytes::from(joined)
}

/// Take `first` and whatever else is queued (up to `MAX_BATCH`) as one frame; the flag says a close
/// was requested.
fn coalesce(first: Out, rx: &mut tokio::sync::mpsc::Receiver<Out>) -> (Option<Utf8Bytes>, bool) {
    let first = match first {
        Out::Frame(f) => f,
        Out::Close => return (None, true),
    };
    let mut more: Vec<Utf8Bytes> = Vec::new();
    let mut close = false;
    while more.len() + 1 < MAX_BATCH {
        match rx.try_recv() {
            Ok(Out::Frame(f)) => more.push(f),
            Ok(Out::Close) => {
                close = true;
                break;
            }
            Err(_) => break,
        }
    }
    (Some(join_frames(first, &more)), close)
}

fn schedule_part(ctx: &Arc<Chat>, client: &Arc<Client>) {
    let (ctx2, client2) = (ctx.clone(), client.clone());
    let timer = tokio::spawn(async move {
        tokio::time::sleep(PART_DELAY).await;
        if !ctx2.hub.finish_part(&client2.user_id) {
            return;
        }
        let user = client2.user.read().clone();
        let event = p::user_parted(&user);
        if ctx2.settings.get().chat_join_messages_enabled {
            broadcast(&ctx2, event);
        } else {
            ctx2.bus.publish(Event::Chat(event));
        }
    });
    ctx.hub.set_part_timer(&client.user_id, timer);
}

enum Verdict {
    Allowed,
    JustBlocked,
    Blocked,
}

/// Per-connection token bucket (see the module docs).
struct RateLimiter {
    tokens: f64,
    last: Instant,
    blocked_until: Option<Instant>,
}

impl RateLimiter {
    fn new(now: Instant) -> Self {
        Self { tokens: BURST, last: now, blocked_until: None }
    }

    fn check(&mut self, now: Instant) -> Verdict {
        if let Some(until) = self.blocked_until {
            if now < until {
                return Verdict::Blocked;
            }
            self.blocked_until = None;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * REFILL_PER_SEC).min(BURST);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Verdict::Allowed
        } else {
            self.blocked_until = Some(now + FLOOD_TIMEOUT);
            Verdict::JustBlocked
        }
    }
}

async fn handle_inbound(ctx: &Arc<Chat>, client: &Arc<Client>, limiter: &mut RateLimiter, text: &str) {
    if text.len() > MAX_SOCKET_PAYLOAD_SIZE {
        action_to(client, p::MSG_TOO_BIG);
        return;
    }
    let Ok(ev) = serde_json::from_str::<Inbound>(text) else {
        tracing::debug!(client = client.id, "ignoring an unreadable chat event");
        return;
    };
    if !matches!(ev.kind.as_str(), p::CHAT | p::NAME_CHANGE | p::COLOR_CHANGE) {
        return;
    }
    if !client.user.read().is_enabled() {
        return;
    }
    if ctx.settings.get().chat_spam_protection_enabled {
        match limiter.check(Instant::now()) {
            Verdict::Allowed => {}
            Verdict::JustBlocked => {
                tracing::info!(client = client.id, "chat client flooding; muted for 10 s");
                action_to(client, p::MSG_FLOODING);
                return;
            }
            Verdict::Blocked => return,
        }
    }
    match ev.kind.as_str() {
        p::CHAT => chat(ctx, client, ev.body.unwrap_or_default()).await,
        p::NAME_CHANGE => name_change(ctx, client, ev.new_name.unwrap_or_default()).await,
        _ => color_change(ctx, client, ev.new_color).await,
    }
}

async fn chat(ctx: &Arc<Chat>, client: &Arc<Client>, body: String) {
    let user = client.user.read().clone();
    let settings = ctx.settings.get();
    if settings.chat_require_authentication && !user.authenticated {
        action_to(client, p::MSG_AUTHENTICATION_REQUIRED);
        return;
    }
    if settings.chat_established_user_mode && !user.is_moderator && Utc::now() - user.created_at < ESTABLISHED_AFTER {
        action_to(client, p::MSG_ESTABLISHED_ONLY);
        return;
    }
    let mut raw = body;
    let mut body = sanitize::render(&raw);
    if sanitize::is_empty(&body) {
        return;
    }
    if settings.chat_slur_filter_enabled {
        let filter = WordFilter::new(&settings.chat_slur_filter_words);
        body = filter.mask_html(&body);
        raw = filter.mask_text(&raw);
    }
    drop(settings);
    let (id, timestamp) = (p::short_id(), Utc::now());
    let event = p::chat(&id, timestamp, &body, &user, true);
    let msg =
        ChatMessage { id, timestamp, kind: p::CHAT.into(), body, user: Some(user), visible: true, hidden_at: None };
    if let Err(e) = ctx.store.call(move |c| super::messages::insert(c, &msg)).await {
        tracing::error!(error = %e, "could not store a chat message; it is still delivered");
    }
    client.message_count.fetch_add(1, Ordering::Relaxed);
    ctx.hub.broadcast(p::frame(&event));
    // Owncast's CHAT webhook payload also carries the unrendered text and the connection id.
    let mut data = event;
    if let ChatEvent::Message(m) = &mut data {
        m.raw_body = Some(raw);
        m.client_id = Some(client.id);
    }
    ctx.bus.publish(Event::Chat(data));
}

async fn name_change(ctx: &Arc<Chat>, client: &Arc<Client>, new_name: String) {
    let proposed = users::clean_name(&new_name);
    let current = client.user.read().clone();
    if proposed.is_empty() || proposed == current.display_name {
        return;
    }
    let reject = |why: String| {
        action_to(client, &why);
        client.send(p::frame(&p::connected_user_info(&current)));
    };
    let shown = ammonia::clean_text(&proposed);
    if users::is_forbidden(&proposed, &ctx.settings.get().forbidden_usernames) {
        return reject(format!("You cannot change your name to <strong>{shown}</strong>, it is reserved."));
    }
    let (id, name) = (current.id.clone(), proposed.clone());
    let result = ctx
        .store
        .call(move |c| {
            if users::name_taken_by_authenticated(c, &name, &id)? {
                return Ok(None);
            }
            users::rename(c, &id, &name)
        })
        .await;
    match result {
        Ok(Some(user)) => {
            ctx.hub.update_user(&user);
            broadcast(ctx, p::name_change(&user, &current.display_name));
        }
        Ok(None) => reject(format!("The name <strong>{shown}</strong> has been already registered.")),
        Err(e) => tracing::error!(error = %e, "could not rename a chat user"),
    }
}

async fn color_change(ctx: &Arc<Chat>, client: &Arc<Client>, color: Option<i64>) {
    let Some(color) = color.filter(|c| (0..=users::MAX_USER_COLOR).contains(c)) else { return };
    let id = client.user_id.clone();
    match ctx.store.call(move |c| users::set_color(c, &id, color)).await {
        Ok(Some(user)) => {
            ctx.hub.update_user(&user);
            broadcast(ctx, p::color_change(&user));
        }
        Ok(None) => {}
        Err(e) => tracing::error!(error = %e, "could not change a chat user's colour"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_allows_typing_and_mutes_flooders() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(t0);
        for i in 0..5 {
            assert!(matches!(rl.check(t0), Verdict::Allowed), "burst message {i}");
        }
        assert!(matches!(rl.check(t0), Verdict::JustBlocked));
        assert!(matches!(rl.check(t0 + Duration::from_secs(5)), Verdict::Blocked));
        assert!(matches!(rl.check(t0 + Duration::from_secs(11)), Verdict::Allowed));
        // one message a second is sustainable
        let mut rl = RateLimiter::new(t0);
        for i in 0..100u64 {
            assert!(matches!(rl.check(t0 + Duration::from_secs(i)), Verdict::Allowed));
        }
    }
}
