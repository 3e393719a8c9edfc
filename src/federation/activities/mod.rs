//! Inbound activities, typed: one type per file (activitypub-federation-rust's shape). Each type
//! reads what it needs from the activity, [`verify`](Activity::verify)s that it may act, and
//! [`receive`](Activity::receive)s (acts).
//!
//! By the time an activity gets here the inbox has established who signed it (`Context::actor`: the
//! actor's own document lists the key that verified) and that it is new (the replay store). What each
//! `verify` adds is what the activity is about: a Follow must be of castd's actor, a Like or Announce
//! of an object castd published, an Undo of the signer's own activity, an Update or Delete of the
//! signer's own actor, an Accept of castd's follow. An activity that fails its `verify` is answered
//! 202 like any other and changes nothing (nothing stored, nothing shown).

pub mod accept;
pub mod create;
pub mod delete;
pub mod engagement;
pub mod follow;
pub mod undo;
pub mod update;

use std::sync::Arc;

use serde_json::Value;

use super::client::RemoteActor;
use super::{FedError, Federation, Local};

/// What an activity is handled with: the feature, the local actor, and the verified sender.
pub struct Context<'a> {
    pub fed: &'a Arc<Federation>,
    pub local: &'a Local,
    pub actor: &'a RemoteActor,
}

/// A `verify`'s answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Act on it.
    Act,
    /// Change nothing (the reason, for the log).
    Ignore(String),
}

impl Check {
    /// `Act` when `ok`, else `Ignore(why)`.
    pub fn when(ok: bool, why: impl FnOnce() -> String) -> Check {
        if ok {
            Check::Act
        } else {
            Check::Ignore(why())
        }
    }
}

/// The `id` of a value that is an IRI or an object with an `id`.
pub fn id_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("id").and_then(Value::as_str),
        _ => None,
    }
}

/// An inbound activity, by type.
pub enum Activity {
    Follow(follow::Follow),
    Undo(undo::Undo),
    Like(engagement::Engagement),
    Announce(engagement::Engagement),
    Update(update::Update),
    Create(create::Create),
    Delete(delete::Delete),
    Accept(accept::Accept),
    Reject(accept::Reject),
    /// A type castd does not act on.
    Unsupported(String),
}

impl Activity {
    /// The activity as its type reads it.
    pub fn parse(v: &Value) -> Activity {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "Follow" => Activity::Follow(follow::Follow::parse(v)),
            "Undo" => Activity::Undo(undo::Undo::parse(v)),
            "Like" => Activity::Like(engagement::Engagement::parse(engagement::Kind::Like, v)),
            "Announce" => Activity::Announce(engagement::Engagement::parse(engagement::Kind::Announce, v)),
            "Update" => Activity::Update(update::Update::parse(v)),
            "Create" => Activity::Create(create::Create),
            "Delete" => Activity::Delete(delete::Delete::parse(v)),
            "Accept" => Activity::Accept(accept::Accept::parse(v)),
            "Reject" => Activity::Reject(accept::Reject),
            other => Activity::Unsupported(other.chars().take(64).collect()),
        }
    }

    /// Whether castd may act on it (see the module doc).
    pub async fn verify(&self, cx: &Context<'_>) -> Result<Check, FedError> {
        match self {
            Activity::Follow(a) => Ok(a.verify(cx)),
            Activity::Undo(a) => Ok(a.verify(cx)),
            Activity::Like(a) | Activity::Announce(a) => a.verify(cx).await,
            Activity::Update(a) => Ok(a.verify(cx)),
            Activity::Create(a) => Ok(a.verify(cx)),
            Activity::Delete(a) => Ok(a.verify(cx)),
            Activity::Accept(a) => Ok(a.verify(cx)),
            Activity::Reject(_) => Ok(Check::Act),
            Activity::Unsupported(kind) => Ok(Check::Ignore(format!("castd does not act on {kind:?} activities"))),
        }
    }

    /// Act on a verified activity.
    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        match self {
            Activity::Follow(a) => a.receive(cx).await,
            Activity::Undo(a) => a.receive(cx).await,
            Activity::Like(a) | Activity::Announce(a) => a.receive(cx).await,
            Activity::Update(a) => a.receive(cx).await,
            Activity::Create(a) => a.receive(cx).await,
            Activity::Delete(a) => a.receive(cx).await,
            Activity::Accept(a) => a.receive(cx).await,
            Activity::Reject(a) => {
                a.receive(cx);
                Ok(())
            }
            Activity::Unsupported(_) => Ok(()),
        }
    }
}
