//! Simulcast: the live stream forwarded to other platforms (YouTube, Twitch, Kick, Facebook, another
//! castd) at the same time, each target with its own state.
//!
//! A target is a consumer on the media plane: a `source` target reads the media plane's source tap
//! (`media::SourceTap`: the broadcaster's own FLV tags, no encode; a late or reconnecting target starts
//! at the set-up and the next keyframe; a slow one skips to the next keyframe, and the transcoder
//! never waits for it) and publishes it with the RTMP(S) client (`rtmp`). Targets start when the
//! stream goes live and stop cleanly (`FCUnpublish`, `deleteStream`) when it ends; one enabled while
//! live starts at the next keyframe.
//!
//! - `settings`: the targets (`POST /api/admin/config/simulcast/targets`), `simulcastTargets` in the
//!   server configuration (stream keys write-only).
//! - `target`: a target's status and state machine (`off`, `connecting`, `live`, `retrying`, `failed`;
//!   exponential backoff 1 s to 60 s; `failed` after 10 minutes of failing, with a health message).
//! - `rtmp`: the RTMP(S) publishing client.
//! - This file: the feature's state, the manager task that keeps one runner per enabled target in step
//!   with the settings, the status route (`GET /api/admin/simulcast/status`), the
//!   SIMULCAST_STATE_CHANGED event and the health notice.
//!
//! - `variant`: a `variant` target's media (an index into the video ladder): the transcoder's MPEG-TS
//!   segments of that variant, followed on the media feed, remuxed to FLV by a `castd remux` child (no
//!   encode; a segment or two more latency than a source target).
//!
//! - `srt`: SRT targets (srt-tokio caller; MPEG-TS: an SRT source as it came, or a variant's segments).
//!
//! Not yet: variant targets at the LL-HLS latency level (fMP4 segments), a source that came in over SRT
//! (MPEG-TS) sent to `source` RTMP targets, and an RTMP source sent to `source` SRT targets (use a
//! variant target for either); those stop with the reason in `lastError`.
//!
//! Given: settings, bus, the media plane, the health hub, the task tracker; uses `transcode` for its
//! executable path (the remux child is `transcode::remux`). Its tasks run in the
//! `Outputs` stage; the stream ending first (the `Ingest` stage stops the broadcaster) unpublishes.

pub mod rtmp;
pub mod settings;
pub mod srt;
pub mod target;
pub mod variant;

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use parking_lot::Mutex;
use tokio_rustls::rustls;

use crate::config::Section;
use crate::events::{Bus, Event};
use crate::health::{HealthHub, HealthInput};
use crate::http::setters::SettingsHost;
use crate::http::{Auth, Registry};
use crate::media::MediaPlane;
use crate::store::settings::SettingsStore;
use crate::tasks::{Stage, Tasks};

pub use target::{TargetState, TargetStatus, Timing};

/// Errors of one target's connection (each ends that connection only; the target retries).
#[derive(Debug, thiserror::Error)]
pub enum SimulcastError {
    /// The remote refused the connection or the publish (a wrong key, an unknown application).
    #[error("{0}")]
    Refused(String),
    /// Network, TLS or protocol failure, or the remote went away.
    #[error("{0}")]
    Remote(String),
    /// What this target cannot forward (it stays off).
    #[error("{0}")]
    Unsupported(String),
}

/// What the feature is given.
pub struct SimulcastDeps {
    pub settings: SettingsStore,
    pub bus: Bus,
    pub media: Arc<MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    pub health: Arc<HealthHub>,
    pub tasks: Tasks,
    /// Where the channel's targets may lead (a channel's: through the guard, `outbound::Reach`).
    pub reach: crate::outbound::Reach,
}

/// The simulcast feature's state.
pub struct Simulcast {
    pub settings: SettingsStore,
    pub bus: Bus,
    pub media: Arc<MediaPlane>,
    /// The channel this instance serves (each channel has its own).
    pub channel: crate::media::ChannelId,
    pub health: Arc<HealthHub>,
    tasks: Tasks,
    pub timing: Timing,
    /// The TLS client configuration for `rtmps://` (an error when rustls could not make one).
    tls: Result<Arc<rustls::ClientConfig>, String>,
    /// The configured targets, in the settings' order.
    targets: Mutex<Vec<Arc<target::TargetHandle>>>,
    /// Where the targets may lead: every connection goes to an address [`resolve`] checked.
    pub reach: crate::outbound::Reach,
}

/// The addresses to connect to for a target at `host:port`, as `reach` allows: a refused address
/// stops the target (`Unsupported`: it stays off with the reason, and nothing is sent); a lookup that
/// fails is retried like any network failure.
pub(crate) async fn resolve(
    reach: &crate::outbound::Reach,
    host: &str,
    port: u16,
) -> Result<Vec<std::net::SocketAddr>, SimulcastError> {
    match reach.resolve(host, port, rtmp::CONNECT_TIMEOUT).await {
        Ok(addrs) => Ok(addrs),
        Err(crate::outbound::OutboundError::NotAllowed(_)) => {
            tracing::warn!(host, port, "simulcast target refused: its address is not one this channel may reach");
            Err(SimulcastError::Unsupported(format!(
                "{host}:{port} is not an address this channel may reach (loopback, private, link-local and \
                 reserved addresses are refused; the server admin's allowprivatetargets setting decides on \
                 loopback and private ones)"
            )))
        }
        Err(e) => Err(SimulcastError::Remote(e.to_string())),
    }
}

impl Simulcast {
    pub fn new(deps: SimulcastDeps) -> Arc<Simulcast> {
        Arc::new(Simulcast {
            settings: deps.settings,
            bus: deps.bus,
            media: deps.media,
            channel: deps.channel,
            health: deps.health,
            tasks: deps.tasks,
            timing: Timing::from_env(),
            tls: rtmp::tls_config(),
            targets: Mutex::new(Vec::new()),
            reach: deps.reach,
        })
    }

    /// Every target's status, in the settings' order.
    pub fn status(&self) -> Vec<TargetStatus> {
        self.targets.lock().iter().map(|h| h.status()).collect()
    }

    /// A target changed state: SIMULCAST_STATE_CHANGED, and the health notice follows the failed targets.
    fn state_changed(&self, h: &target::TargetHandle) {
        let status = h.status();
        if status.state == TargetState::Failed {
            tracing::warn!(
                target = %status.name,
                "simulcast target has failed for {} s: {}",
                self.timing.fail_after.as_secs(),
                status.last_error.as_deref().unwrap_or("no answer")
            );
        }
        self.bus.publish(Event::SimulcastStateChanged(status));
        self.update_health();
    }

    fn update_health(&self) {
        let failed: Vec<TargetStatus> = self.status().into_iter().filter(|s| s.state == TargetState::Failed).collect();
        let notice = failed.first().map(|s| {
            let mins = (self.timing.fail_after.as_secs() / 60).max(1);
            let more =
                if failed.len() > 1 { format!(" ({} more targets failed)", failed.len() - 1) } else { String::new() };
            format!(
                "Simulcast to \"{}\" has failed for {mins} min: {}. castd keeps trying; check its URL and stream key \
                 on the Simulcast page{more}.",
                s.name,
                s.last_error.as_deref().unwrap_or("no answer")
            )
        });
        self.health.submit(HealthInput::Simulcast(notice));
    }

    /// Keep one runner per configured target in step with the settings: a new or changed target gets a
    /// new runner (the old one stops cleanly), a removed one stops.
    fn reconcile(self: &Arc<Self>) {
        let wanted = self.settings.get().simulcast.simulcast_targets.clone();
        let mut targets = self.targets.lock();
        let mut next = Vec::with_capacity(wanted.len());
        for cfg in wanted {
            if let Some(pos) = targets.iter().position(|h| h.config == cfg) {
                next.push(targets.remove(pos));
                continue;
            }
            let stop = self.tasks.token(Stage::Outputs).child_token();
            let h = target::TargetHandle::new(cfg.clone(), stop);
            if cfg.enabled {
                let name = format!("simulcast target {}", cfg.id);
                self.tasks.spawn(Stage::Outputs, name, target::run(self.clone(), h.clone()));
            }
            next.push(h);
        }
        for gone in targets.drain(..) {
            gone.stop.cancel();
        }
        *targets = next;
        drop(targets);
        self.update_health();
    }
}

impl SettingsHost for Simulcast {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }
}

/// Start the manager (stage `Outputs`): runners for the saved targets now, and again whenever the
/// settings store announces a change of the simulcast section.
pub fn start(sc: Arc<Simulcast>, tasks: &Tasks) {
    let stop = tasks.token(Stage::Outputs);
    let mut sub = sc.bus.subscribe("simulcast");
    tasks.spawn(Stage::Outputs, "simulcast manager", async move {
        loop {
            sc.reconcile();
            loop {
                tokio::select! {
                    ev = sub.recv() => match ev.as_deref() {
                        None => return,
                        Some(Event::SettingsChanged(change)) if change.touches(Section::Simulcast) => break,
                        Some(_) => {}
                    },
                    _ = stop.cancelled() => return,
                }
            }
        }
    });
}

/// The setter and the status route.
pub fn routes(reg: &mut Registry, sc: Arc<Simulcast>) {
    settings::routes(reg, sc.clone());
    let mut reg = reg.scope(sc);
    reg.get("/api/admin/simulcast/status", "admin", Auth::Admin, "Simulcast targets' state (castd)", status)
        .returns_list::<TargetStatus>();
}

async fn status(State(sc): State<Arc<Simulcast>>) -> Json<Vec<TargetStatus>> {
    Json(sc.status())
}
