//! The simulcast section of the settings: the forward targets. The `simulcast` feature owns its setter
//! (`simulcast/targets`) and its part (`simulcastTargets`, stream keys masked) of the admin configuration.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

/// What a target forwards: the broadcaster's own stream (no encode; the default) or one of the
/// transcoder's variants, by index in the video ladder (its output, no extra encode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TargetVariant {
    #[default]
    Source,
    Index(usize),
}

impl Serialize for TargetVariant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TargetVariant::Source => s.serialize_str("source"),
            TargetVariant::Index(i) => s.serialize_u64(*i as u64),
        }
    }
}

impl<'de> Deserialize<'de> for TargetVariant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(TargetVariant::Source),
            serde_json::Value::String(s) if s == "source" => Ok(TargetVariant::Source),
            serde_json::Value::String(s) => s
                .parse()
                .map(TargetVariant::Index)
                .map_err(|_| serde::de::Error::custom("variant: \"source\" or a variant index")),
            serde_json::Value::Number(n) => n
                .as_u64()
                .filter(|i| *i < 64)
                .map(|i| TargetVariant::Index(i as usize))
                .ok_or_else(|| serde::de::Error::custom("variant: \"source\" or a variant index")),
            _ => Err(serde::de::Error::custom("variant: \"source\" or a variant index")),
        }
    }
}

/// One forward target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SimulcastTarget {
    /// Stable id (castd makes one when the admin sends none).
    #[schema(required)]
    pub id: String,
    #[schema(required)]
    pub name: String,
    /// `rtmp://host[:port]/app`, `rtmps://...` or `srt://host:port`.
    #[schema(required)]
    pub url: String,
    /// The platform's stream key (write-only: the admin view shows it masked).
    #[schema(required)]
    pub stream_key: String,
    #[schema(required)]
    pub enabled: bool,
    /// `"source"` or a variant index.
    #[schema(required, schema_with = target_variant_schema)]
    pub variant: TargetVariant,
}

/// `TargetVariant` as it is written: `"source"` or a variant index.
fn target_variant_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    Schema::OneOf(
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["source"])))
            .item(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)))
            .description(Some("`\"source\"` or a variant index."))
            .build(),
    )
}

/// The simulcast settings. Field names are the persisted keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SimulcastSettings {
    pub simulcast_targets: Vec<SimulcastTarget>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn variant_is_source_or_an_index() {
        let t: SimulcastTarget = serde_json::from_value(json!({"name": "a", "variant": 1})).unwrap();
        assert_eq!(t.variant, TargetVariant::Index(1));
        let t: SimulcastTarget = serde_json::from_value(json!({"name": "a"})).unwrap();
        assert_eq!(t.variant, TargetVariant::Source);
        assert_eq!(serde_json::to_value(&t).unwrap()["variant"], json!("source"));
        assert!(serde_json::from_value::<SimulcastTarget>(json!({"variant": "x"})).is_err());
        assert!(serde_json::from_value::<SimulcastTarget>(json!({"variant": -1})).is_err());
    }
}
