//! Channels: the names broadcasts are kept by. The default channel (`default`) is today's castd, its
//! routes and files where they always were; every other channel is named by its slug.
//!
//! Where the default channel differs by its name is said here only: its URL ([`ChannelId::base_path`]),
//! its folders ([`ChannelId::folder_in`]) and its reserved slug ([`ChannelId::made`]). Whether a
//! stack is the server's own or a tenant's (its admin's trust) is decided once where the stack is
//! built (`daemon::channel`) and asked of each feature's own handle, not of the name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A channel: the default one (`default`, today's castd: its routes and files) or one made by the
/// admin, named by its slug (`[a-z0-9-]{1,32}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(Arc<str>);

/// Why a slug cannot be given to a new channel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlugError {
    #[error(transparent)]
    Bad(#[from] BadSlug),
    /// `default` names the default channel (the server's own, at the root).
    #[error("'default' is the default channel's slug")]
    Default,
}

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

    /// A channel the server admin makes (or imports), named `slug`: any slug but the default's.
    pub fn made(slug: &str) -> Result<ChannelId, SlugError> {
        let id = ChannelId::new(slug)?;
        if id.is_default() {
            return Err(SlugError::Default);
        }
        Ok(id)
    }

    /// The path its routes are under: `""` for the default channel (the root), `/c/{slug}` for any other.
    pub fn base_path(&self) -> String {
        if self.is_default() {
            String::new()
        } else {
            format!("/c/{self}")
        }
    }

    /// Its folder in `root`: `root` itself for the default channel (its files are where they always
    /// were), `root/channels/{slug}` for any other.
    pub fn folder_in(&self, root: &Path) -> PathBuf {
        if self.is_default() {
            root.to_path_buf()
        } else {
            root.join("channels").join(self.as_str())
        }
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
        assert_eq!(ChannelId::default_channel().base_path(), "");
        assert_eq!(ChannelId::new("church-2").unwrap().base_path(), "/c/church-2");
        assert_eq!(ChannelId::default_channel().folder_in(Path::new("/d")), Path::new("/d"));
        assert_eq!(ChannelId::new("c1").unwrap().folder_in(Path::new("/d")), Path::new("/d/channels/c1"));
        assert_eq!(ChannelId::made("default"), Err(SlugError::Default));
        assert!(matches!(ChannelId::made("Bad"), Err(SlugError::Bad(_))));
        assert_eq!(ChannelId::made("c1").unwrap().as_str(), "c1");
        assert_eq!(ChannelId::new("church-2").unwrap().as_str(), "church-2");
        for bad in ["", "Church", "a b", "a/b", "..", &"x".repeat(33), "ü"] {
            assert!(ChannelId::new(bad).is_err(), "{bad}");
        }
    }
}
