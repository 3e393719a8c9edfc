//! One websocket connection at `/ws?accessToken=`: the pre-upgrade checks, the connection task
//! (socket → inbound events, draining the writer's queue when the socket was full, keepalive; the
//! room's frames are written by the hub's fan-out, see `hub` and `socket`) and the handling of client
//! events (CHAT, NAME_CHANGE, COLOR_CHANGE) with the size limit, the per-client rate limit,
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
//! Per address: a client address (an IPv6 /64) holds at most `SOCKETS_PER_ADDRESS` chat sockets at
//! once; the upgrade of one more is refused with 429 (a StatusResponse with `Retry-After`), before the
//! access token is looked up.
//!
//! Viewing passes: on a channel that needs one, the gate (`http::gate`) admits the upgrade only with a
//! pass and hands it over as a `ViewerPass`; the connection closes (close frame 1008, "your viewing
//! pass has ended") when the pass is revoked or expires. A pass that carries a member's name (a JWT
//! of the operator's site) signs the connection's user in as an authenticated user with that name
//! (provider `jwt`, identity the pass's subject), as registration does (`api`).
//!
//! Keepalive: a websocket ping every 54 s; a connection that sends nothing (not even a pong) for 60 s
//! is closed; a write that takes longer than 10 s closes the connection.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use super::filter::WordFilter;
use super::hops;
use super::hub::Client;
use super::messages::ChatMessage;
use super::protocol::{self as p, ClientCommand, ParseError, User};
use super::relay::{self, Inbound as RemoteEvent, Link, Outbound, Role};
use super::socket::{self, Offer, Socket, Upgrade, Writer};
use super::Chat;
use super::{action_to, broadcast, broadcast_from, sanitize, users};
use crate::config::MAX_SOCKET_PAYLOAD_SIZE;
use crate::events::{ChatEvent, Event};
use crate::http::gate::ViewerPass;
use crate::http::ApiError;
use crate::tasks::Stage;

/// Chat sockets one client address (an IPv6 /64) may hold at once: the tabs and devices of a household
/// or an office behind one NAT (each viewer page holds one socket).
pub const SOCKETS_PER_ADDRESS: usize = 20;
/// How long a client refused for its address's socket cap is asked to wait.
const SOCKET_CAP_RETRY: Duration = Duration::from_secs(10);

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
/// How long a closing connection may take to write what it still has queued.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// The close status of a connection whose viewing pass ended (policy violation).
const PASS_ENDED_CODE: u16 = 1008;
/// Its reason.
pub const PASS_ENDED: &str = "your viewing pass has ended";

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
    pass: Option<axum::Extension<ViewerPass>>,
    ws: Result<Upgrade, ApiError>,
) -> Response {
    let pass = pass.map(|axum::Extension(p)| p);
    if ctx.settings.get().chat.chat_disabled {
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
    // Held by the connection task until the socket closes.
    let place = match ctx.sockets_per_address.try_acquire(ip) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(%ip, "chat socket refused: {e}");
            return socket_cap_refusal();
        }
    };
    let edge = match ctx.link() {
        Some(Link { role: Role::Edge(edge), .. }) => Some(edge.clone()),
        _ => None,
    };
    let lookup = match q.access_token.filter(|t| !t.is_empty()) {
        None => Lookup::NoToken,
        // An edge asks the origin, which owns the users and bans.
        Some(token) if edge.is_some() => match edge.as_ref().map(|e| e.lookup(token, ip)) {
            Some(asked) => match asked.await {
                Ok(relay::Lookup::Ok { user }) => Lookup::Ok(user),
                Ok(relay::Lookup::Disabled { user }) => Lookup::Disabled(user),
                Ok(relay::Lookup::Unknown) => Lookup::Unknown,
                Ok(relay::Lookup::Banned) => return ApiError::Forbidden("forbidden".into()).into_response(),
                Ok(relay::Lookup::ChatDisabled) => {
                    return (StatusCode::SERVICE_UNAVAILABLE, p::CHAT_DISABLED).into_response()
                }
                Err(e) => {
                    tracing::warn!("chat: the origin did not answer a token check: {e}");
                    return (StatusCode::SERVICE_UNAVAILABLE, relay::MSG_UNAVAILABLE).into_response();
                }
            },
            None => Lookup::Unknown,
        },
        Some(token) => match ctx.store.call(move |c| users::by_token(c, &token)).await {
            Ok(Some(u)) if u.is_enabled() => Lookup::Ok(signed_in_by_pass(&ctx, u, pass.as_ref()).await),
            Ok(Some(u)) => Lookup::Disabled(u),
            Ok(None) => Lookup::Unknown,
            Err(e) => return ApiError::from(e).into_response(),
        },
    };
    let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let config = WebSocketConfig::default()
        .max_message_size(Some(2 * MAX_SOCKET_PAYLOAD_SIZE))
        .max_frame_size(Some(2 * MAX_SOCKET_PAYLOAD_SIZE))
        .read_buffer_size(4096)
        .write_buffer_size(0);
    let tasks = ctx.tasks.clone();
    ws.on_upgrade(&tasks, config, move |socket, writer| async move {
        run(ctx, socket, writer, lookup, ip, ua, pass).await;
        drop(place);
    })
}

/// `user`, signed in with the member's name the viewing pass carries (a JWT's), if it carries one and
/// the user is not signed in as that member already.
pub(crate) async fn signed_in_by_pass(ctx: &Chat, user: User, pass: Option<&ViewerPass>) -> User {
    let Some((pass, name)) = pass.and_then(|p| Some((p, p.name.clone()?))) else { return user };
    if user.auth_provider.as_deref() == Some(users::JWT_PROVIDER) {
        let id = user.id.clone();
        if let Ok(Some(identity)) = ctx.store.call(move |c| users::auth_identity(c, &id)).await {
            if identity == pass.subject {
                return user;
            }
        }
    }
    let sign_in = crate::http::SignIn {
        provider: users::JWT_PROVIDER.into(),
        identity: pass.subject.clone(),
        display_name: Some(name),
    };
    let id = user.id.clone();
    match crate::http::UserTokens::sign_in(ctx, &id, sign_in).await {
        Some(_) => {
            let id2 = id.clone();
            match ctx.store.call(move |c| users::by_id(c, &id2)).await {
                Ok(Some(u)) => u,
                _ => user,
            }
        }
        None => user,
    }
}

/// 429 for a socket over its address's cap: a StatusResponse that says so, and `Retry-After`.
fn socket_cap_refusal() -> Response {
    let message =
        format!("this address already holds {SOCKETS_PER_ADDRESS} chat connections, the most one address may");
    let body = axum::Json(crate::http::StatusResponse { success: false, message });
    let mut resp = (StatusCode::TOO_MANY_REQUESTS, body).into_response();
    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(SOCKET_CAP_RETRY.as_secs()));
    resp
}

/// Send one event and close (registration and disabled errors).
async fn refuse(writer: Arc<Writer>, event: Option<serde_json::Value>) {
    if let Some(ev) = event {
        writer.offer(&socket::text_frame(p::frame(&ev).as_bytes()));
    }
    close(&writer, false).await;
}

/// Close the connection: a close frame unless the peer's close was already answered, what is still
/// queued written within `CLOSE_TIMEOUT`, then the socket's write side dropped.
async fn close(writer: &Writer, peer_closed: bool) {
    if !peer_closed {
        writer.finish();
    }
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, writer.drain()).await;
    writer.kill();
}

async fn run(
    ctx: Arc<Chat>,
    mut socket: Socket,
    writer: Arc<Writer>,
    lookup: Lookup,
    ip: IpAddr,
    ua: String,
    pass: Option<ViewerPass>,
) {
    let user = match lookup {
        Lookup::NoToken => return refuse(writer, None).await,
        Lookup::Unknown => return refuse(writer, Some(p::error(p::ERROR_NEEDS_REGISTRATION, None))).await,
        Lookup::Disabled(u) => return refuse(writer, Some(p::error(p::ERROR_USER_DISABLED, Some(&u)))).await,
        Lookup::Ok(u) => u,
    };
    let info = p::frame(&p::connected_user_info(&user));
    let (client, fresh) = ctx.hub.add(user.clone(), ip, ua, writer.clone(), info);
    ctx.telemetry.set_chat_clients(ctx.hub.len() as u64);
    let settings = ctx.settings.get();
    if fresh && settings.chat.chat_join_messages_enabled && ctx.stream.borrow().online {
        broadcast_from(&ctx, p::user_joined(&user), client.id);
    }
    if !settings.instance.welcome_message.trim().is_empty() {
        let (ctx2, id) = (ctx.clone(), client.id);
        ctx.tasks.spawn_until_stopped(Stage::Connections, "chat: welcome message", async move {
            tokio::time::sleep(WELCOME_DELAY).await;
            if let Some(c) = ctx2.hub.client(id) {
                let s = ctx2.settings.get();
                c.send(p::frame(&p::system(&sanitize::render(&s.instance.welcome_message), &s.instance.name)));
            }
        });
    }
    drop(settings);

    // This task wakes for what the client sends, for a full socket (the writer queued frames), for a
    // close or kill, and for the keepalive ping; the room's frames are written by the fan-out.
    let mut limiter = RateLimiter::new(Instant::now());
    let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
    let read_deadline = tokio::time::sleep(READ_DEADLINE);
    tokio::pin!(read_deadline);
    let pass_ended = async {
        match &pass {
            Some(p) => p.ended().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(pass_ended);
    let mut peer_closed = false;
    loop {
        tokio::select! {
            biased;
            _ = &mut pass_ended => {
                tracing::debug!(client = client.id, "chat socket closed: its viewing pass ended");
                writer.finish_with(&socket::close_frame(PASS_ENDED_CODE, PASS_ENDED));
                break;
            }
            _ = writer.wake.notified() => {
                if !matches!(tokio::time::timeout(WRITE_TIMEOUT, writer.drain()).await, Ok(Ok(()))) {
                    break;
                }
                if writer.finished() {
                    break;
                }
            }
            msg = socket.next() => match msg {
                Some(Ok(msg)) => {
                    read_deadline.as_mut().reset(Instant::now() + READ_DEADLINE);
                    match msg {
                        Message::Text(text) => {
                            // Boxed: the handler's state is large and only needed while a frame is
                            // handled, so an idle connection's task stays small.
                            Box::pin(handle_inbound(&ctx, &client, &mut limiter, text.as_str())).await;
                        }
                        Message::Close(_) => {
                            // tungstenite has queued the reply (the peer's status code echoed) for its
                            // next write: flush it through the writer, or the client sees 1006.
                            let _ = tokio::time::timeout(CLOSE_TIMEOUT, socket.flush()).await;
                            peer_closed = true;
                            break;
                        }
                        _ => {}
                    }
                }
                Some(Err(_)) | None => break,
            },
            _ = &mut read_deadline => break,
            _ = ping.tick() => {
                if matches!(writer.offer(&socket::PING), Offer::Slow | Offer::Closed) {
                    break;
                }
            }
        }
    }
    if ctx.hub.remove(&client) {
        schedule_part(&ctx, &client);
    }
    ctx.telemetry.set_chat_clients(ctx.hub.len() as u64);
    close(&writer, peer_closed).await;
}

fn schedule_part(ctx: &Arc<Chat>, client: &Arc<Client>) {
    let (ctx2, client2) = (ctx.clone(), client.clone());
    let timer = ctx.tasks.spawn_cancellable(Stage::Connections, "chat: part timer", async move {
        tokio::time::sleep(PART_DELAY).await;
        if !ctx2.hub.finish_part(&client2.user_id) {
            return;
        }
        let user = client2.user.read().clone();
        // The connection that closed last: its id is the webhook's `clientId`, as in Owncast.
        let event = p::user_parted(&user);
        if ctx2.settings.get().chat.chat_join_messages_enabled {
            broadcast_from(&ctx2, event, client2.id);
        } else {
            ctx2.bus.publish(Event::Chat(event.with_client_id(client2.id)));
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
    let command = match ClientCommand::parse(text) {
        Ok(ClientCommand::Unknown(_)) => return,
        Ok(command) => command,
        Err(ParseError::TooBig(_)) => {
            action_to(client, p::MSG_TOO_BIG);
            return;
        }
        Err(ParseError::Unreadable(_)) => {
            tracing::debug!(client = client.id, "ignoring an unreadable chat event");
            return;
        }
    };
    if !client.user.read().is_enabled() {
        return;
    }
    if ctx.settings.get().chat.chat_spam_protection_enabled {
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
    if let Some(Link { role: Role::Edge(edge), node }) = ctx.link() {
        return forward(client, edge.as_ref(), node, command).await;
    }
    let speaker = Speaker::Local(client.clone());
    dispatch(ctx, &speaker, command, None).await;
}

/// On an edge: hand a client's command to the origin, which applies everything else and sends the
/// result to every node; a forward Redis did not take is answered to the client.
async fn forward(client: &Arc<Client>, edge: &dyn relay::EdgeLink, node: &str, command: ClientCommand) {
    let is_chat = matches!(command, ClientCommand::Chat { .. });
    let (kind, body, new_name, new_color) = command.into_fields();
    let msg = RemoteEvent {
        id: p::short_id(),
        node: node.to_string(),
        client: client.id,
        user_id: client.user_id.clone(),
        ip: client.ip,
        kind,
        body,
        new_name,
        new_color,
        frame: None,
    };
    let id = (is_chat && hops::on()).then(|| msg.id.clone());
    if let Some(id) = &id {
        hops::mark_recv(id, msg.body.as_deref().unwrap_or_default());
    }
    let taken = edge.forward(msg).await;
    if let Some(id) = &id {
        hops::mark("edge_added", id);
    }
    if !taken {
        client.send(relay::unavailable_frame());
    } else if is_chat {
        client.message_count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Apply a command of `speaker`'s (`id`: the id a relayed CHAT is stored under).
async fn dispatch(ctx: &Arc<Chat>, speaker: &Speaker, command: ClientCommand, id: Option<String>) {
    match command {
        ClientCommand::Chat { body } => chat(ctx, speaker, body, id).await,
        ClientCommand::NameChange { new_name } => name_change(ctx, speaker, new_name).await,
        ClientCommand::ColorChange { color } => color_change(ctx, speaker, color).await,
        ClientCommand::Unknown(_) => {}
    }
}

/// Who sent an event: a connection of this node, or (on the origin) one of another node's.
enum Speaker {
    Local(Arc<Client>),
    Remote { node: String, client: u64, user: User },
}

impl Speaker {
    fn user(&self) -> User {
        match self {
            Speaker::Local(c) => c.user.read().clone(),
            Speaker::Remote { user, .. } => user.clone(),
        }
    }

    fn user_id(&self) -> String {
        match self {
            Speaker::Local(c) => c.user_id.clone(),
            Speaker::Remote { user, .. } => user.id.clone(),
        }
    }

    fn client_id(&self) -> u64 {
        match self {
            Speaker::Local(c) => c.id,
            Speaker::Remote { client, .. } => *client,
        }
    }

    /// A frame to this connection only.
    fn send(&self, ctx: &Chat, frame: axum::extract::ws::Utf8Bytes) {
        match self {
            Speaker::Local(c) => {
                c.send(frame);
            }
            Speaker::Remote { node, client, .. } => {
                ctx.to_nodes(Outbound::Client { node: node.clone(), client: *client, frame: frame.to_string() })
            }
        }
    }

    /// A CHAT_ACTION to this connection only.
    fn action(&self, ctx: &Chat, body: &str) {
        self.send(ctx, p::frame(&p::chat_action(&sanitize::render(body))));
    }
}

/// On the origin: an event a client of another node sent (see `relay`). The checks the edge made per
/// connection (size, rate limit) are not repeated; everything else applies as for a local client.
/// A CHAT whose id is already stored was delivered before (a redelivered entry) and is skipped.
pub async fn handle_remote(ctx: &Arc<Chat>, msg: RemoteEvent) {
    if msg.kind == relay::ROOM {
        if let Some(frame) = msg.frame {
            ctx.hub.broadcast(frame.into());
        }
        return;
    }
    let command = ClientCommand::from_fields(msg.kind, msg.body, msg.new_name, msg.new_color);
    if matches!(command, ClientCommand::Chat { .. }) {
        hops::mark("origin_handle", &msg.id);
    }
    if ctx.is_banned(msg.ip) {
        return;
    }
    let (user_id, id) = (msg.user_id.clone(), msg.id.clone());
    let found = ctx
        .store
        .call(move |c| {
            let user = users::by_id(c, &user_id)?;
            let stored = super::messages::by_id(c, &id)?;
            Ok((user, stored))
        })
        .await;
    let user = match found {
        Ok((Some(user), None)) if user.is_enabled() => user,
        // Redelivered: stored once, sent to the other nodes again (`relay::resend`).
        Ok((_, Some(stored))) => return relay::resend(ctx, &stored),
        Ok(_) => return,
        Err(e) => {
            tracing::error!(error = %e, "chat: could not look up a remote sender");
            return;
        }
    };
    let speaker = Speaker::Remote { node: msg.node, client: msg.client, user };
    dispatch(ctx, &speaker, command, Some(msg.id)).await;
}

async fn chat(ctx: &Arc<Chat>, client: &Speaker, body: String, id: Option<String>) {
    let id = id.unwrap_or_else(p::short_id);
    if matches!(client, Speaker::Local(_)) {
        hops::mark_recv(&id, &body);
    }
    // Offline for more than 5 minutes and no scheduled stream opened chat: ignored, as Owncast does;
    // only the sender is told why (a CHAT_ACTION).
    if !ctx.takes_messages() {
        client.action(ctx, p::MSG_CHAT_CLOSED);
        return;
    }
    let user = client.user();
    let settings = ctx.settings.get();
    if settings.chat.chat_require_authentication && !user.authenticated {
        client.action(ctx, p::MSG_AUTHENTICATION_REQUIRED);
        return;
    }
    if settings.chat.chat_established_user_mode
        && !user.is_moderator
        && Utc::now() - user.created_at < ESTABLISHED_AFTER
    {
        client.action(ctx, p::MSG_ESTABLISHED_ONLY);
        return;
    }
    let mut raw = body;
    let mut body = sanitize::render(&raw);
    if sanitize::is_empty(&body) {
        return;
    }
    if settings.chat.chat_slur_filter_enabled {
        let filter = WordFilter::for_words(&settings.chat.chat_slur_filter_words);
        body = filter.mask_html(&body);
        raw = filter.mask_text(&raw);
    }
    drop(settings);
    let timestamp = Utc::now();
    let event = p::chat(&id, timestamp, &body, &user, true);
    let msg =
        ChatMessage { id, timestamp, kind: p::CHAT.into(), body, user: Some(user), visible: true, hidden_at: None };
    let hop_id = hops::on().then(|| msg.id.clone());
    if let Err(e) = ctx.store.call(move |c| super::messages::insert(c, &msg)).await {
        tracing::error!(error = %e, "could not store a chat message; it is still delivered");
    }
    if let Some(id) = &hop_id {
        hops::mark("stored", id);
    }
    if matches!(client, Speaker::Remote { .. }) {
        relay::crash_after_store_if(&raw);
    }
    if let Speaker::Local(c) = client {
        c.message_count.fetch_add(1, Ordering::Relaxed);
    }
    ctx.hub.broadcast(p::frame(&event));
    if let Some(id) = &hop_id {
        hops::mark("broadcast", id);
    }

    // Owncast's CHAT webhook payload also carries the unrendered text and the connection id.
    let mut data = event;
    if let ChatEvent::Message(m) = &mut data {
        m.raw_body = Some(raw);
        m.client_id = Some(client.client_id());
    }
    ctx.bus.publish(Event::Chat(data));
}

async fn name_change(ctx: &Arc<Chat>, client: &Speaker, new_name: String) {
    let proposed = users::clean_name(&new_name);
    let current = client.user();
    if proposed.is_empty() || proposed == current.display_name {
        return;
    }
    let reject = |why: String| {
        client.action(ctx, &why);
        client.send(ctx, p::frame(&p::connected_user_info(&current)));
    };
    let shown = ammonia::clean_text(&proposed);
    if users::is_forbidden(&proposed, &ctx.settings.get().chat.forbidden_usernames) {
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
            broadcast(ctx, p::name_change(&user, &current.display_name, Some(client.client_id())));
        }
        Ok(None) => reject(format!("The name <strong>{shown}</strong> has been already registered.")),
        Err(e) => tracing::error!(error = %e, "could not rename a chat user"),
    }
}

async fn color_change(ctx: &Arc<Chat>, client: &Speaker, color: Option<i64>) {
    let Some(color) = color.filter(|c| (0..=users::MAX_USER_COLOR).contains(c)) else { return };
    let id = client.user_id();
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
