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

pub mod rtmp;
pub mod settings;
pub mod srt;
pub mod whip;

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use sha2::{Digest, Sha256};
use tracing::info;

use crate::http::{ApiError, Auth, Registry, StatusResponse};
use crate::media::{ChannelId, MediaPlane, PublisherGuard, Source};
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

/// The ingest feature's state.
pub struct Ingest {
    pub settings: SettingsStore,
    /// `--streamkey`: valid for this run only, never persisted.
    pub temp_stream_key: Option<String>,
    /// The media plane (its publisher slot).
    pub media: Arc<MediaPlane>,
    pub telemetry: Arc<Telemetry>,
    /// The WebRTC stack WHIP publishes through, once the daemon has bound its socket.
    pub whip: whip::WhipSlot,
    /// Wrong stream keys per client address, shared by RTMP, SRT and WHIP ([`key_backoff`]).
    pub key_backoff: Backoff,
}

impl Ingest {
    /// Whether `key` may publish: any configured stream key, or the temporary `--streamkey` (in
    /// constant time, see the module doc). Counts nothing: protocols check keys with `check_key`.
    pub fn stream_key_valid(&self, key: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let settings = self.settings.get();
        let configured = settings.server.stream_keys.iter().map(|k| k.key.as_str());
        let mut valid = false;
        for want in self.temp_stream_key.as_deref().into_iter().chain(configured) {
            let want: [u8; 32] = Sha256::digest(want.as_bytes()).into();
            // Every key is compared, whatever matched before (`black_box`: not skipped once true).
            valid |= std::hint::black_box(crate::password::same_secret(&given, &want));
        }
        valid
    }

    /// Whether `ip` may try a stream key now (refuse it in the handshake when not).
    pub fn may_try_key(&self, ip: IpAddr) -> Result<(), Limited> {
        self.key_backoff.check(ip)
    }

    /// Check `key`, sent from `ip`: refused unchecked while `ip` waits after wrong keys; a wrong key
    /// is counted. A right one does not clear the address yet: the protocol calls `key_proven` once
    /// every secret it asks for is right (SRT's passphrase comes after the key).
    /// A right key names the channel it publishes to (every key is the default channel's, until
    /// channels have keys of their own).
    pub fn check_key(&self, ip: IpAddr, key: &str) -> Result<ChannelId, KeyRefused> {
        self.key_backoff.check(ip)?;
        if self.stream_key_valid(key) {
            Ok(ChannelId::default_channel())
        } else {
            if let Some(wait) = self.key_backoff.failed(ip) {
                tracing::warn!(%ip, "wrong stream keys from this address: it waits {} s", wait.retry_after_secs());
            }
            Err(KeyRefused::Invalid)
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

    /// Take `channel`'s publisher slot for `source`; `None` while another publisher has it.
    pub fn claim(&self, channel: &ChannelId, source: Source) -> Option<PublisherGuard> {
        self.media.claim(channel, source)
    }
}

pub fn routes(reg: &mut Registry, ingest: Arc<Ingest>) {
    settings::routes(reg, ingest.clone());
    whip::routes(reg, ingest.clone());
    let mut reg = reg.scope(ingest);
    reg.get("/api/admin/disconnect", "admin", Auth::Admin, "Disconnect the inbound broadcaster", disconnect)
        .returns::<StatusResponse>()
        .error(400, "No broadcaster is connected (Owncast's answer)");
}

async fn disconnect(State(ingest): State<Arc<Ingest>>) -> Result<Json<StatusResponse>, ApiError> {
    if ingest.media.disconnect(&ChannelId::default_channel()) {
        info!("the admin disconnected the broadcaster");
        Ok(StatusResponse::ok("inbound stream disconnected"))
    } else {
        Err(ApiError::bad("no inbound stream connected"))
    }
}
