//! Ingest: what every publishing protocol shares — the stream-key check, the single-publisher rule
//! (the media plane's `PublisherSlot`, which `GET /api/admin/disconnect` closes whatever the protocol)
//! and the hand-off of an accepted publisher's media to the transcoder.
//!
//! One module per protocol: `rtmp` (RTMP on `rtmpServerPort`), `srt` (MPEG-TS over SRT on `srtServerPort`),
//! `whip` (WebRTC through `crate::webrtc`, `POST /whip`). A protocol module
//! checks the key with `Ingest::stream_key_valid`, claims the slot with a `media::Source`, and hands its
//! media on through the `Feeder` that `Ingest::hand_off` returns; it does not reach into the transcoder.

pub mod rtmp;
pub mod settings;
pub mod srt;
pub mod whip;

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use tracing::info;

use crate::events::Bus;
use crate::http::{ApiError, Auth, Registry, StatusResponse};
use crate::media::{MediaPlane, PublisherGuard};
use crate::store::settings::SettingsStore;
use crate::telemetry::Telemetry;
use crate::transcode::Transcoder;

pub use crate::transcode::supervisor::Feeder;
pub use rtmp::{bind_address, serve, start, IngestError, APP_NAME, IDLE_TIMEOUT, MAX_CONNECTIONS, SETUP_TIMEOUT};

/// The ingest feature's state.
pub struct Ingest {
    pub settings: SettingsStore,
    /// The bus its setters announce CONFIG_CHANGED on.
    pub bus: Bus,
    /// `--streamkey`: valid for this run only, never persisted.
    pub temp_stream_key: Option<String>,
    /// The media plane (its publisher slot).
    pub media: Arc<MediaPlane>,
    pub transcoder: Arc<Transcoder>,
    pub telemetry: Arc<Telemetry>,
    /// The WebRTC stack WHIP publishes through, once the daemon has bound its socket.
    pub whip: whip::WhipSlot,
}

impl Ingest {
    /// Whether `key` may publish: any configured stream key, or the temporary `--streamkey`.
    pub fn stream_key_valid(&self, key: &str) -> bool {
        if self.temp_stream_key.as_deref() == Some(key) {
            return true;
        }
        self.settings.get().server.stream_keys.iter().any(|k| k.key == key)
    }

    /// An accepted publisher (holding the slot) goes live: the stream starts and its media goes to the
    /// returned feeder. The guard is held until the stream is offline.
    pub fn hand_off(&self, guard: PublisherGuard) -> Feeder {
        self.transcoder.start(guard)
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
    if ingest.media.slot.disconnect() {
        info!("the admin disconnected the broadcaster");
        Ok(StatusResponse::ok("inbound stream disconnected"))
    } else {
        Err(ApiError::bad("no inbound stream connected"))
    }
}
