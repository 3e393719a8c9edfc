//! Which encoder a stream uses, and what is said when that changes.
//!
//! At stream start the configured `video/codec` (or `auto`) is looked up among the encoders the
//! hardware probe found (libx264 when it is not available). When the supervisor leaves an encoder after
//! a fault, or cannot put the whole ladder on the chosen one, the stream state shows the encoders now in
//! use and the health hub gets the transcoder's notice (which the admin health message shows and
//! HEALTH_ALERT announces); the notice is cleared when the stream stops.

use hwaccel::EncoderInfo;
use tracing::warn;

use super::Transcoder;
use crate::health::HealthInput;

/// The encoder the transcoder should use now: the configured `video/codec` (or `auto`) among the
/// available ones, else libx264.
pub fn selected(t: &Transcoder) -> EncoderInfo {
    let wanted = t.deps.settings.get().video.video_codec.clone();
    let found = t.deps.encoders.borrow();
    hwaccel::select(&wanted, &found).cloned().unwrap_or_else(|| hwaccel::software_encoders().remove(0))
}

/// Record that the transcoder left `from` for `to` because of `reason`.
pub fn report_fallback(t: &Transcoder, from: &str, to: &str, reason: &str, encoders_now: Vec<String>) {
    let message = if to == "copy" {
        format!(
            "The encoder {from} failed ({reason}); the stream continues with the broadcaster's own video \
             (passthrough) until it restarts."
        )
    } else if from.contains("decode and scaling on") {
        format!("The GPU path {from} failed ({reason}); the stream continues with {to} on the CPU alone.")
    } else {
        format!("The hardware encoder {from} failed ({reason}); the stream continues with the software encoder {to}.")
    };
    warn!("{message}");
    t.deps.stream.update(|st| st.encoders = encoders_now);
    t.deps.health.submit(HealthInput::Encoder(Some(message)));
}

/// Record that the ladder does not run entirely on the chosen encoder (the message of
/// `hwaccel::plan_sessions`, e.g. NVENC's session cap).
pub fn report_session_plan(t: &Transcoder, plan: &hwaccel::SessionPlan) {
    let encoders = plan.encoders.clone();
    t.deps.stream.update(|st| st.encoders = encoders);
    if let Some(message) = &plan.message {
        warn!("{message}");
        t.deps.health.submit(HealthInput::Encoder(Some(message.clone())));
    }
}
