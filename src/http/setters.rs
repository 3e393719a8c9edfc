//! The plumbing of the admin config setters (`POST /api/admin/config/<name>` with `{"value": ...}`,
//! answered with a StatusResponse), shared by every feature that owns a section of the settings.
//!
//! A feature keeps a table of `Setter`s (path, documented value shape, and a function that validates
//! the value and applies it to a copy of the settings) and registers it from its own `routes` with
//! `register`. The settings store persists the copy only if the function succeeds, and announces the
//! change itself (`Event::SettingsChanged`, which sections changed): a setter announces nothing, and no
//! feature learns of a change by a setter's name. A setter whose call means more than its value (the
//! stream title's STREAM_TITLE_UPDATED) says so with its own `after` function.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use serde_json::Value;

use super::{setter_value, ApiError, Auth, BodyDoc, Registry, StatusResponse, ValueDoc};
use crate::config::validate::ValidationError;
use crate::config::Settings;
use crate::store::settings::SettingsStore;

/// The OpenAPI group of every setter.
const GROUP: &str = "admin";

/// Validate `value` and apply it to the settings; `C` is the owning feature's state.
pub type Apply<C> = fn(&C, &Value, &mut Settings) -> Result<(), ValidationError>;

/// One plain setter of the feature whose state is `C`.
pub struct Setter<C: 'static> {
    /// The path under `/api/admin/config/`.
    pub name: &'static str,
    pub summary: &'static str,
    pub value: ValueDoc,
    pub apply: Apply<C>,
    /// Takes effect only after a restart (ports, addresses).
    pub needs_restart: bool,
    /// Run after every successful call (whether or not the value changed).
    pub after: Option<fn(&C)>,
    /// The server's, not a channel's (ports, the server URL, the encoder): a channel's API has no
    /// such route (404; the server admin sets it on the root API).
    pub server_wide: bool,
    /// Run before the value is validated and saved; its error is the answer (a rate limit's 429).
    pub guard: Option<Guard<C>>,
}

/// See [`Setter::guard`].
pub type Guard<C> = fn(&C, &Value) -> Result<(), ApiError>;

impl<C: 'static> Setter<C> {
    /// A setter whose change takes effect at once.
    pub const fn new(name: &'static str, summary: &'static str, value: ValueDoc, apply: Apply<C>) -> Self {
        Setter { name, summary, value, apply, needs_restart: false, after: None, server_wide: false, guard: None }
    }

    /// A setter whose change takes effect when castd restarts.
    pub const fn restart(name: &'static str, summary: &'static str, value: ValueDoc, apply: Apply<C>) -> Self {
        Setter { name, summary, value, apply, needs_restart: true, after: None, server_wide: false, guard: None }
    }

    /// This setter, running `f` after every successful call.
    pub const fn after(self, f: fn(&C)) -> Self {
        Setter { after: Some(f), ..self }
    }

    /// This setter, running `f` before every call (its error is the answer).
    pub const fn guard(self, f: Guard<C>) -> Self {
        Setter { guard: Some(f), ..self }
    }

    /// This setter is the server's (`config::ServerSettings`): a channel's API does not register it.
    pub const fn server_wide(self) -> Self {
        Setter { server_wide: true, ..self }
    }
}

/// Store a validated value in its settings field.
pub fn set<T>(slot: &mut T, value: Result<T, ValidationError>) -> Result<(), ValidationError> {
    *slot = value?;
    Ok(())
}

/// The state of a feature that owns setters: where the settings are.
pub trait SettingsHost: Send + Sync + 'static {
    fn settings_store(&self) -> &SettingsStore;

    /// Whether this is a channel's API (not the root's): server-wide setters are not registered here.
    fn is_channel(&self) -> bool {
        false
    }
}

/// Validate and save `value` with `setter` (the store announces the change), then run its `after`.
pub async fn apply<C: SettingsHost>(
    host: &Arc<C>,
    setter: &'static Setter<C>,
    value: Value,
) -> Result<Json<StatusResponse>, ApiError> {
    if let Some(guard) = setter.guard {
        guard(host, &value)?;
    }
    let ctx = host.clone();
    host.settings_store().update::<ApiError, _>(|s| Ok((setter.apply)(&ctx, &value, s)?)).await?;
    if let Some(after) = setter.after {
        after(host);
    }
    let msg = if setter.needs_restart {
        format!("{} saved; it takes effect when castd restarts", setter.name)
    } else {
        format!("{} changed", setter.name)
    };
    Ok(StatusResponse::ok(msg))
}

async fn apply_body<C: SettingsHost>(
    host: Arc<C>,
    setter: &'static Setter<C>,
    body: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    apply(&host, setter, setter_value(&body)?).await
}

/// Add `POST /api/admin/config/<name>` (admin only) for every setter of `setters` (on a channel's
/// API, every one but the server-wide ones).
pub fn register<C: SettingsHost>(reg: &mut Registry, host: Arc<C>, setters: &'static [Setter<C>]) {
    let channel = host.is_channel();
    let mut reg = reg.scope(host);
    for setter in setters.iter().filter(|s| !(channel && s.server_wide)) {
        let path = format!("/api/admin/config/{}", setter.name);
        reg.post(
            &path,
            GROUP,
            Auth::Admin,
            setter.summary,
            BodyDoc::Value(setter.value),
            move |State(host): State<Arc<C>>, body: Bytes| apply_body(host, setter, body),
        );
    }
}
