//! The admin's "does this ladder fit" routes: `GET /api/admin/video/fit` judges the configured ladder
//! (for tools: a GET with a browser's marks is refused with 405, as every action's GET is, since it
//! makes the box measure), `POST /api/admin/video/fit` `{variants}` a ladder (the Video page's, saved
//! or not; nothing is saved). Admin only (HTTP Basic). A channel's routes judge the channel's ladder on the same box.
//! A channel's answers measure at most a few new rungs per answer and per window (`Measurer::Channel`;
//! the rest are estimated, and the answer says so).

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::Value;

use super::verdict::LadderFit;
use super::{FitState, Measurer};
use crate::config::validate;
use crate::hardware::Hardware;
use crate::http::{ApiError, Auth, BodyDoc, JsonBody, Registry};
use crate::store::settings::SettingsStore;

const GROUP: &str = "admin";

/// The POST body: `{variants}`, each variant as the `video/streamoutputvariants` setter takes it.
pub const BODY: &str = r#"{"type":"object","required":["variants"],"properties":{"variants":
  {"type":"array","minItems":1,"maxItems":10,"items":{"type":"object","properties":{
  "name":{"type":"string"},"videoPassthrough":{"type":"boolean"},"audioPassthrough":{"type":"boolean"},
  "videoBitrate":{"type":"integer","minimum":0,"maximum":100000},
  "audioBitrate":{"type":"integer","minimum":0,"maximum":1000},
  "scaledWidth":{"type":"integer","minimum":0,"maximum":7680,"multipleOf":2},
  "scaledHeight":{"type":"integer","minimum":0,"maximum":4320,"multipleOf":2},
  "framerate":{"type":"integer","minimum":0,"maximum":120},
  "cpuUsageLevel":{"type":"integer","minimum":0,"maximum":4}}}}}}"#;

/// What the routes need: the box (its encoders and the fit state) and the channel's settings.
#[derive(Clone)]
struct FitRoutes {
    hw: Arc<Hardware>,
    settings: SettingsStore,
    who: Measurer,
}

/// The fit routes of a channel whose settings are `settings`; `who` is the channel's measurer.
pub fn routes(reg: &mut Registry, hw: Arc<Hardware>, settings: SettingsStore, who: Measurer) {
    let mut reg = reg.scope(FitRoutes { hw, settings, who });
    // It measures on this box: a tool's GET only (a browser's is refused), the web UI POSTs its ladder.
    reg.get_for_tools(
        "/api/admin/video/fit",
        GROUP,
        Auth::Admin,
        "Whether the configured ladder fits this box (measured once per box and rung, then cached)",
        configured_fit,
    )
    .returns::<LadderFit>();
    reg.post(
        "/api/admin/video/fit",
        GROUP,
        Auth::Admin,
        "Whether a ladder (not saved) fits this box (measured once per box and rung, then cached)",
        BodyDoc::Json(BODY),
        ladder_fit,
    )
    .returns::<LadderFit>()
    .error(400, "Not a ladder: variants missing, empty, more than 10, or a value out of range");
}

impl FitRoutes {
    fn state(&self) -> &FitState {
        &self.hw.fit
    }

    async fn judge(&self, ladder: &[crate::config::StreamOutputVariant]) -> LadderFit {
        let s = self.settings.get();
        let (segment_seconds, _) = s.latency();
        let chosen = {
            let found = self.hw.encoders.borrow();
            hwaccel::select(&s.video.video_codec, &found).cloned()
        }
        .unwrap_or_else(|| hwaccel::software_encoders().remove(0));
        self.state().evaluate(ladder, &chosen, segment_seconds, &self.who).await
    }
}

async fn configured_fit(State(r): State<FitRoutes>) -> Json<LadderFit> {
    let ladder = r.settings.get().video.video_quality_variants.clone();
    Json(r.judge(&ladder).await)
}

async fn ladder_fit(State(r): State<FitRoutes>, JsonBody(body): JsonBody<Value>) -> Result<Json<LadderFit>, ApiError> {
    let variants = body.as_object().and_then(|o| o.get("variants")).ok_or_else(|| {
        ApiError::bad("expected {\"variants\": [...]}, the ladder as video/streamoutputvariants takes it")
    })?;
    let ladder = validate::variants(variants)?;
    Ok(Json(r.judge(&ladder).await))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_body_takes_the_variants_as_the_setter_does() {
        let body: serde_json::Value = serde_json::from_str(super::BODY).unwrap();
        let setter: serde_json::Value = serde_json::from_str(crate::api::video::VARIANTS).unwrap();
        assert_eq!(body["properties"]["variants"], setter);
    }
}
