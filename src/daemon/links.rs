//! What a channel's stack is given of the other channels at construction: the registry of channels
//! as the stacks hold it ([`Every`], weakly: the registry holds the stacks; every answer is "nothing"
//! once it is gone, at exit), ingest's [`KeyDirectory`] (stream keys, a channel's telemetry) and a
//! stack's [`Links`] (its stream keys and its actor's name unique across the server; the root's
//! WebFinger and merged metrics: `server::root_links`).

use std::sync::{Arc, Weak};

use crate::channels::{Channel, Channels};
use crate::ingest::KeyDirectory;
use crate::media::ChannelId;
use crate::telemetry::Telemetry;

/// The registry, as what the stacks keep holds it (weakly: the registry holds the stacks). Every
/// answer is "nothing" once the registry is gone (at exit).
#[derive(Clone)]
pub struct Every(Weak<Channels>);

impl Every {
    pub fn new(channels: &Arc<Channels>) -> Every {
        Every(Arc::downgrade(channels))
    }

    /// Every open channel, the default first.
    pub fn all(&self) -> Vec<(ChannelId, Arc<dyn Channel>)> {
        self.0.upgrade().map(|c| c.every()).unwrap_or_default()
    }

    /// Channel `id`, while it is open (the default included).
    pub fn channel(&self, id: &ChannelId) -> Option<Arc<dyn Channel>> {
        self.0.upgrade()?.channel(id)
    }

    /// The fediverse user names of every channel but `except`.
    pub fn usernames(&self, except: &ChannelId) -> Vec<String> {
        let all = self.all();
        let others = all.into_iter().filter(|(id, _)| id != except);
        others.map(|(_, ch)| ch.settings().get().federation.federation_username.clone()).collect()
    }
}

impl KeyDirectory for Every {
    fn keys(&self) -> Vec<(ChannelId, Vec<String>)> {
        self.0.upgrade().map(|c| c.keys()).unwrap_or_default()
    }

    fn telemetry(&self, id: &ChannelId) -> Option<Arc<Telemetry>> {
        self.channel(id).map(|c| c.telemetry())
    }
}

/// What a channel's stack is given of the other channels at construction (the registry answers).
pub struct Links {
    /// Whether a stream key is another channel's (its stream-keys setter asks).
    pub key_taken: crate::api::KeyTaken,
    /// Its actor's names: whether a user name is another channel's, and (the root's) the other
    /// channels' actors for WebFinger.
    pub names: crate::federation::Names,
    /// The root's metrics merge every other channel's exposition.
    pub other_channels: Option<crate::metrics::OtherChannels>,
}

impl Links {
    /// A channel's links: its stream keys and its actor's name are unique across the server.
    pub fn of(every: &Every, id: &ChannelId) -> Links {
        let (keys, names, me) = (every.0.clone(), every.clone(), id.clone());
        let key_taken: crate::api::KeyTaken =
            Arc::new(move |key: &str| keys.upgrade().is_some_and(|c| c.key_taken(key, &me)));
        let me = id.clone();
        let username_taken: crate::federation::UsernameTaken =
            Arc::new(move |name: &str| names.usernames(&me).iter().any(|n| n.eq_ignore_ascii_case(name)));
        Links {
            key_taken,
            names: crate::federation::Names { username_taken, other_actors: None },
            other_channels: None,
        }
    }
}

/// The root's WebFinger lookup of the other channels' actors: the actor of the channel (not `root`)
/// whose user name is `name`, while that channel's federation is on.
pub fn other_actors(every: Every, root: ChannelId) -> crate::federation::ActorLookup {
    Arc::new(move |name: &str| {
        every.all().into_iter().filter(|(id, _)| *id != root).find_map(|(_, ch)| {
            let s = ch.settings().get();
            s.federation
                .federation_username
                .eq_ignore_ascii_case(name)
                .then(|| crate::federation::active_local(&s))
                .flatten()
        })
    })
}
