//! Ingest: what every publishing protocol shares — the stream-key check, the single-publisher rule
//! (a channel's publisher slot on the media plane, which `GET /api/admin/disconnect` closes whatever the
//! protocol) and the hand-off of an accepted publisher's media to the media plane.
//!
//! One module per protocol: `rtmp` (RTMP on `rtmpServerPort`), `srt` (MPEG-TS over SRT on `srtServerPort`),
//! `whip` (WebRTC through `crate::webrtc`, `POST /whip`). A protocol module checks the key with
//! `Ingest::check_key` (which names the channel the key publishes to), claims that channel's slot with a
//! `media::Source` (`Ingest::claim`), and hands its media on through the `media::SourceWriter` that
//! `Ingest::hand_off` returns (the broadcast goes live: the transcoder is the media plane's first reader).
//! Ingest imports only `media` of the media path: it knows no transcoder.
//!
//! Stream keys are guessable secrets: they are compared in constant time (the SHA-256 of the key sent
//! against that of every accepted key, all of them every time, so neither the key's length nor which
//! key matched shows in the time taken), and wrong ones are limited per client address by one
//! `throttle::Backoff` the three protocols share (5 free failures, then a doubling wait up to 5
//! minutes; a right key, with any passphrase, clears the address). An address that must wait is refused in the protocol's
//! handshake before its key is looked at: RTMP with an error status on connect or publish, SRT with
//! the reject reason `overload`, WHIP with 429 and `Retry-After`. Keys are never logged.
//!
//! The admission hook (`admissionHook.onPublish` of the key's channel): once the key is right, the
//! protocol asks `Ingest::admit`, which calls the `publish_check` handle the composition root gives
//! (ingest does not know the hook). A refusal is refused in the handshake with the hook's reason (RTMP
//! `NetStream.Publish.Rejected`, SRT `2403 forbidden`, WHIP 403) and logged; a hook that does not
//! answer lets the publisher in (a valid key fails open), which the handle logs as a warning.
//!
//! Capacity: the claim itself may be refused when the server is over capacity (`media::capacity`:
//! `server/maxlivechannels`, the transcode budget, `server/overcapacity=refuse`); the protocol refuses
//! in its handshake with the reason: RTMP `NetStream.Publish.Rejected` with it as the description, SRT
//! the reject reason `2503 down` (the reason is logged and in the channel's health), WHIP a 503
//! StatusResponse with it.

pub mod rtmp;
pub mod settings;
pub mod srt;
pub mod whip;

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use sha2::{Digest, Sha256};
use tracing::info;

use crate::http::{ApiError, Auth, Registry, StatusResponse};
use crate::media::{ChannelId, ClaimRefused, MediaPlane, PublisherGuard, Source};
use crate::store::settings::SettingsStore;
use crate::telemetry::Telemetry;
use crate::throttle::{Backoff, BackoffConfig, Limited};

pub use crate::media::SourceWriter as Feeder;
pub use rtmp::{
    bind_address, serve, start, IngestError, APP_NAME, IDLE_TIMEOUT, MAX_CONNECTIONS, PREAUTH_PER_ADDRESS,
    SETUP_TIMEOUT,
};

/// Why a stream key was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefused {
    /// Not a key castd accepts (counted against the address).
    #[error("invalid stream key")]
    Invalid,
    /// The address made too many wrong attempts: the key was not looked at.
    #[error(transparent)]
    Limited(#[from] Limited),
}

/// The backoff of wrong stream keys ([`BackoffConfig::SECRETS`]), for [`Ingest::key_backoff`].
pub fn key_backoff() -> Backoff {
    Backoff::new(BackoffConfig::SECRETS)
}

/// Every channel's stream keys and telemetry: the composition root gives ingest one over all channels
/// (the default channel's, and every channel the server admin made).
pub trait KeyDirectory: Send + Sync {
    /// Each channel's stream keys, the default channel's first.
    fn keys(&self) -> Vec<(ChannelId, Vec<String>)>;
    /// Channel `id`'s telemetry (its publisher's measured bitrate goes there).
    fn telemetry(&self, id: &ChannelId) -> Option<Arc<Telemetry>>;
}

/// A publisher with a right key, as the publish check sees it.
#[derive(Clone)]
pub struct PublishAttempt {
    /// The key it sent: for the handle to find the key's comment, never to be sent anywhere or logged.
    pub key: String,
    /// The publisher's address.
    pub address: IpAddr,
    /// What the publisher says it is (WHIP's `User-Agent`; none for RTMP and SRT).
    pub user_agent: Option<String>,
}

impl std::fmt::Debug for PublishAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishAttempt")
            .field("address", &self.address)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

/// The publish check the composition root gives ingest (the channel's admission hook): `Err` holds
/// the reason a publisher is refused.
pub type PublishCheck =
    Arc<dyn Fn(ChannelId, PublishAttempt) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// The ingest feature's state.
pub struct Ingest {
    /// The server-wide ingest settings (the SRT port and passphrase: the default channel's settings).
    pub settings: SettingsStore,
    /// `--streamkey`: valid for this run, for the default channel, never persisted.
    pub temp_stream_key: Option<String>,
    /// The media plane (the channels' publisher slots).
    pub media: Arc<MediaPlane>,
    /// The default channel's telemetry (a channel without one of its own reports there).
    pub telemetry: Arc<Telemetry>,
    /// Which channel a key publishes to.
    pub keys: Arc<dyn KeyDirectory>,
    /// The WebRTC stack WHIP publishes through (none when WebRTC is off).
    pub whip: whip::WhipSlot,
    /// Wrong stream keys per client address, shared by RTMP, SRT and WHIP ([`key_backoff`]).
    pub key_backoff: Backoff,
    /// Asked once a key is right, before the slot is claimed (the admission hook); none: all pass.
    pub publish_check: Option<PublishCheck>,
}

impl Ingest {
    /// The channel `key` publishes to: any channel's configured stream key, or the temporary
    /// `--streamkey` (the default channel's), compared in constant time (see the module doc). Counts
    /// nothing: protocols check keys with `check_key`.
    pub fn channel_of_key(&self, key: &str) -> Option<ChannelId> {
        let given: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let mut keys = self.keys.keys();
        if let Some(temp) = &self.temp_stream_key {
            keys.insert(0, (ChannelId::default_channel(), vec![temp.clone()]));
        }
        let mut found = None;
        for (channel, channel_keys) in &keys {
            for want in channel_keys {
                let want: [u8; 32] = Sha256::digest(want.as_bytes()).into();
                // Every key is compared, whatever matched before (`black_box`: not skipped once found).
                if std::hint::black_box(crate::password::same_secret(&given, &want)) && found.is_none() {
                    found = Some(channel.clone());
                }
            }
        }
        found
    }

    /// Whether `key` may publish to some channel (see [`Ingest::channel_of_key`]).
    pub fn stream_key_valid(&self, key: &str) -> bool {
        self.channel_of_key(key).is_some()
    }

    /// Channel `id`'s telemetry (the default channel's when it has none of its own).
    pub fn telemetry(&self, id: &ChannelId) -> Arc<Telemetry> {
        self.keys.telemetry(id).unwrap_or_else(|| self.telemetry.clone())
    }

    /// Whether `ip` may try a stream key now (refuse it in the handshake when not).
    pub fn may_try_key(&self, ip: IpAddr) -> Result<(), Limited> {
        self.key_backoff.check(ip)
    }

    /// Check `key`, sent from `ip`: refused unchecked while `ip` waits after wrong keys; a wrong key
    /// is counted. A right one does not clear the address yet: the protocol calls `key_proven` once
    /// every secret it asks for is right (SRT's passphrase comes after the key).
    /// A right key names the channel it publishes to.
    pub fn check_key(&self, ip: IpAddr, key: &str) -> Result<ChannelId, KeyRefused> {
        self.key_backoff.check(ip)?;
        if let Some(channel) = self.channel_of_key(key) {
            Ok(channel)
        } else {
            if let Some(wait) = self.key_backoff.failed(ip) {
                tracing::warn!(%ip, "wrong stream keys from this address: it waits {} s", wait.retry_after_secs());
            }
            Err(KeyRefused::Invalid)
        }
    }

    /// Whether the publisher with a right key for `channel` may go live (the publish check, when the
    /// composition root set one): `Err` holds the reason to refuse it with.
    pub async fn admit(&self, channel: &ChannelId, attempt: PublishAttempt) -> Result<(), String> {
        match self.publish_check.as_ref() {
            Some(check) => check(channel.clone(), attempt).await,
            None => Ok(()),
        }
    }

    /// `ip` proved it holds the key (and any passphrase): its wrong attempts are forgotten.
    pub fn key_proven(&self, ip: IpAddr) {
        self.key_backoff.succeeded(ip);
    }

    /// An accepted publisher (holding the slot) goes live: the stream starts and its media goes to the
    /// returned feeder. The guard is held until the stream is offline.
    pub fn hand_off(&self, guard: PublisherGuard) -> Feeder {
        self.media.go_live(guard)
    }

    /// Take `channel`'s publisher slot for `source`: refused while another publisher has it, or when
    /// the server is over capacity and refuses (the protocol says why in its handshake). Over capacity
    /// with `overcapacity=passthrough` the guard is taken, its broadcast marked passthrough.
    pub fn claim(&self, channel: &ChannelId, source: Source) -> Result<PublisherGuard, ClaimRefused> {
        self.media.claim(channel, source)
    }
}

/// The default channel's ingest routes: the server-wide ingest settings (SRT), WHIP and the disconnect.
pub fn routes(reg: &mut Registry, ingest: Arc<Ingest>) {
    settings::routes(reg, ingest.clone());
    channel_routes(reg, ingest, ChannelId::default_channel());
}

/// A channel's ingest routes: WHIP (the key says which channel goes live) and its own disconnect.
pub fn channel_routes(reg: &mut Registry, ingest: Arc<Ingest>, channel: ChannelId) {
    whip::routes(reg, ingest.clone());
    let mut reg = reg.scope((ingest, channel));
    // POST, or GET from a tool (Owncast's own form): a browser's GET is refused (`Scope::action`).
    reg.action("/api/admin/disconnect", "admin", Auth::Admin, "Disconnect the inbound broadcaster", disconnect)
        .returns::<StatusResponse>()
        .error(400, "No broadcaster is connected (Owncast's answer)");
}

async fn disconnect(
    State((ingest, channel)): State<(Arc<Ingest>, ChannelId)>,
) -> Result<Json<StatusResponse>, ApiError> {
    if ingest.media.disconnect(&channel) {
        info!(%channel, "the admin disconnected the broadcaster");
        Ok(StatusResponse::ok("inbound stream disconnected"))
    } else {
        Err(ApiError::bad("no inbound stream connected"))
    }
}
