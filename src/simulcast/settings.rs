//! The simulcast section of the settings (`config::SimulcastSettings`): its setter
//! (`/api/admin/config/simulcast/targets`) and its part (`simulcastTargets`, each stream key shown only as
//! set or not set: `********` or empty) of the admin server configuration.
//!
//! The setter takes the whole list. A target without an `id` (or with one used twice) gets a new one; a
//! `streamKey` of `********` keeps the key stored for that id, so the admin page can send back what it
//! was shown — but only while the target's URL is the one the key was saved with: a masked key sent
//! with a new URL is dropped (the target has no key until one is entered), so a saved key is never
//! sent to an address it was not entered for.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Simulcast;
use crate::config::validate::ValidationError;
use crate::config::{Settings, SimulcastTarget, TargetVariant, MASKED};
use crate::http::setters::{self, Setter};
use crate::http::{Registry, ValueDoc};

/// Targets at most.
pub const MAX_TARGETS: usize = 20;

const TARGETS: &str = r#"{"type":"array","maxItems":20,"items":{"type":"object","required":["name","url"],
  "properties":{"id":{"type":["string","null"],"pattern":"^[A-Za-z0-9_-]{0,64}$"},
  "name":{"type":"string","minLength":1,"maxLength":100,"pattern":"\\S"},
  "url":{"type":"string","maxLength":2048,
    "pattern":"^(rtmps?://[A-Za-z0-9]+([.-][A-Za-z0-9]+)*(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]+)+/?|srt://[A-Za-z0-9]+([.-][A-Za-z0-9]+)*:[1-9][0-9]{0,3})$"},
  "streamKey":{"type":["string","null"],"maxLength":1024},
  "enabled":{"type":["boolean","null"]},
  "variant":{"oneOf":[{"type":"string","enum":["source"]},{"type":"integer","minimum":0,"maximum":63},{"type":"null"}]}}}}"#;

/// The simulcast setter, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter<Simulcast>] = &[Setter::new(
    "simulcast/targets",
    "Simulcast targets (castd): the whole list of {id?, name, url, streamKey, enabled, variant}",
    ValueDoc::Json(TARGETS),
    |sc, v, s| {
        let next = validate_targets(v, &s.simulcast.simulcast_targets)?;
        // A channel's target at a refused literal address is refused now, with the reason.
        for t in &next {
            sc.reach.check_saved("the simulcast target URL", &t.url).map_err(ValidationError)?;
        }
        s.simulcast.simulcast_targets = next;
        Ok(())
    },
)];

fn bad<T>(msg: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError(msg.into()))
}

/// Check an `rtmp://`, `rtmps://` or `srt://` target URL.
pub fn validate_url(url: &str) -> Result<(), String> {
    if url.starts_with("srt://") {
        let u = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if u.host_str().is_none_or(str::is_empty) || u.port().is_none() {
            return Err("an SRT target is srt://host:port".into());
        }
        return Ok(());
    }
    super::rtmp::Endpoint::parse(url).map(|_| ())
}

/// The new target list from the setter's value; `current` supplies the keys sent back masked.
pub fn validate_targets(v: &Value, current: &[SimulcastTarget]) -> Result<Vec<SimulcastTarget>, ValidationError> {
    let Value::Array(items) = v else { return bad("value must be a list of targets") };
    if items.len() > MAX_TARGETS {
        return bad(format!("at most {MAX_TARGETS} targets"));
    }
    let mut out: Vec<SimulcastTarget> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(map) = item else { return bad(format!("target {i}: must be an object")) };
        let text = |k: &str, max: usize| -> Result<String, ValidationError> {
            match map.get(k) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) if s.chars().count() <= max => Ok(s.clone()),
                Some(Value::String(_)) => bad(format!("target {i}: {k} is longer than {max} characters")),
                Some(_) => bad(format!("target {i}: {k} must be a string")),
            }
        };
        let mut id = text("id", 64)?;
        if !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return bad(format!("target {i}: id may hold letters, digits, - and _"));
        }
        let name = text("name", 100)?.trim().to_string();
        if name.is_empty() {
            return bad(format!("target {i}: name is required"));
        }
        let url = text("url", 2048)?.trim().to_string();
        validate_url(&url).map_err(|e| ValidationError(format!("target {i} ({name}): url: {e}")))?;
        let mut stream_key = text("streamKey", 1024)?;
        let enabled = match map.get("enabled") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return bad(format!("target {i}: enabled must be true or false")),
        };
        let variant = match map.get("variant") {
            None | Some(Value::Null) => TargetVariant::Source,
            Some(Value::String(s)) if s == "source" => TargetVariant::Source,
            // A whole number, also written with a fraction of zero (JSON Schema's integer, as 2.0).
            Some(Value::Number(n)) => match n.as_f64().filter(|n| n.fract() == 0.0 && (0.0..64.0).contains(n)) {
                Some(n) => TargetVariant::Index(n as usize),
                None => return bad(format!("target {i}: variant is \"source\" or a variant index")),
            },
            Some(_) => return bad(format!("target {i}: variant is \"source\" or a variant index")),
        };
        if id.is_empty() || out.iter().any(|t| t.id == id) {
            id = crate::password::random_token(12).chars().filter(char::is_ascii_alphanumeric).collect();
        }
        if stream_key == MASKED {
            stream_key =
                current.iter().find(|t| t.id == id && t.url == url).map(|t| t.stream_key.clone()).unwrap_or_default();
        }
        out.push(SimulcastTarget { id, name, url, stream_key, enabled, variant });
    }
    Ok(out)
}

/// The simulcast setter route.
pub fn routes(reg: &mut Registry, simulcast: Arc<Simulcast>) {
    setters::register(reg, simulcast, SETTERS);
}

/// Simulcast's part of `GET /api/admin/serverconfig` (flattened into it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SimulcastConfigPart {
    /// The targets, each stream key shown only as set (`********`) or not set (empty).
    pub simulcast_targets: Vec<SimulcastTarget>,
}

/// Simulcast's part of the admin server configuration.
pub fn server_config(s: &Settings) -> SimulcastConfigPart {
    let simulcast_targets = s
        .simulcast
        .simulcast_targets
        .iter()
        .map(|t| SimulcastTarget {
            stream_key: if t.stream_key.is_empty() { String::new() } else { MASKED.to_string() },
            ..t.clone()
        })
        .collect();
    SimulcastConfigPart { simulcast_targets }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the documented schema allows, the setter takes (schemathesis checks it on the real daemon).
    #[test]
    fn schema_valid_edge_cases_are_accepted() {
        for url in ["rtmp://a/b", "rtmps://a-b.c:1/x/y/", "rtmp://a:9999/.", "srt://h.x:1", "rtmp://a/~"] {
            let v = serde_json::json!([{"name": "x", "url": url}]);
            assert!(validate_targets(&v, &[]).is_ok(), "{url}");
        }
    }

    #[test]
    fn targets_are_checked_and_masked_keys_kept() {
        let first = validate_targets(
            &json!([{"name": "YouTube", "url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": "abcd-1234", "enabled": true}]),
            &[],
        )
        .unwrap();
        assert_eq!(first.len(), 1);
        assert!(!first[0].id.is_empty());
        assert_eq!(first[0].variant, TargetVariant::Source);
        let id = first[0].id.clone();
        let again = validate_targets(
            &json!([{"id": id, "name": "YouTube", "url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": MASKED,
                     "variant": 1}]),
            &first,
        )
        .unwrap();
        assert_eq!(again[0].stream_key, "abcd-1234", "the masked key keeps the stored one");
        for moved in ["rtmp://b.rtmp.youtube.com/live2", "rtmp://a.rtmp.youtube.com/other", "srt://evil.example:9000"] {
            let elsewhere =
                validate_targets(&json!([{"id": id, "name": "YouTube", "url": moved, "streamKey": MASKED}]), &first)
                    .unwrap();
            assert_eq!(elsewhere[0].stream_key, "", "a masked key is not sent to a new URL ({moved})");
        }
        assert_eq!(again[0].variant, TargetVariant::Index(1));
        assert!(!again[0].enabled);
        for bad in [
            json!({"name": "x"}),
            json!([{"name": "", "url": "rtmp://h/app"}]),
            json!([{"name": "x", "url": "http://h/app"}]),
            json!([{"name": "x", "url": "rtmp://h"}]),
            json!([{"name": "x", "url": "srt://h"}]),
            json!([{"name": "x", "url": "rtmp://h/app", "variant": "hd"}]),
            json!([{"name": "x", "url": "rtmp://h/app", "enabled": "yes"}]),
            json!([{"name": "x", "url": "rtmp://h/app", "id": "a b"}]),
        ] {
            assert!(validate_targets(&bad, &[]).is_err(), "{bad}");
        }
        let two = validate_targets(
            &json!([{"id": "a", "name": "x", "url": "srt://h:9000"}, {"id": "a", "name": "y", "url": "rtmps://h/app"}]),
            &[],
        )
        .unwrap();
        assert_ne!(two[0].id, two[1].id, "a repeated id is replaced");
        let shown = server_config(&Settings {
            simulcast: crate::config::SimulcastSettings { simulcast_targets: again },
            ..Default::default()
        });
        assert_eq!(shown.simulcast_targets[0].stream_key, MASKED);
    }
}
