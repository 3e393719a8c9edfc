//! Channels: the names broadcasts are kept by. The default channel (`default`) is today's castd, its
//! routes and files where they always were; every other channel is named by its slug.

use std::sync::Arc;

/// A channel: the default one (`default`, today's castd: its routes and files) or one made by the
/// admin, named by its slug (`[a-z0-9-]{1,32}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(Arc<str>);

/// A slug that is not a channel's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a channel slug is 1 to 32 lower-case letters, digits and '-': '{0}' is not one")]
pub struct BadSlug(pub String);

impl ChannelId {
    /// The default channel's slug.
    pub const DEFAULT: &'static str = "default";

    /// The default channel.
    pub fn default_channel() -> ChannelId {
        ChannelId(Arc::from(Self::DEFAULT))
    }

    /// The channel named `slug`.
    pub fn new(slug: &str) -> Result<ChannelId, BadSlug> {
        let ok = (1..=32).contains(&slug.len())
            && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(ChannelId(Arc::from(slug)))
        } else {
            Err(BadSlug(slug.chars().take(64).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        &*self.0 == Self::DEFAULT
    }
}

impl Default for ChannelId {
    fn default() -> Self {
        Self::default_channel()
    }
}

impl std::fmt::Display for ChannelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_slugs() {
        assert!(ChannelId::default_channel().is_default());
        assert_eq!(ChannelId::new("church-2").unwrap().as_str(), "church-2");
        for bad in ["", "Church", "a b", "a/b", "..", &"x".repeat(33), "ü"] {
            assert!(ChannelId::new(bad).is_err(), "{bad}");
        }
    }
}
