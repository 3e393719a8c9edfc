//! The WebRTC playback section of the settings (WHEP): on or off, the viewer cap, the variant sent in
//! real time, and whether viewers must present a chat access token. The `whep` feature owns its
//! setters.

use serde::{Deserialize, Serialize};

/// The default cap on WebRTC viewers.
pub const DEFAULT_MAX_VIEWERS: u32 = 100;

/// The WebRTC playback settings. Field names are the persisted keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WebRtcSettings {
    /// WHEP playback on (`POST /whep`).
    pub webrtc_enabled: bool,
    /// WebRTC viewers at once; beyond it `POST /whep` answers 503.
    pub webrtc_max_viewers: u32,
    /// The quality variant sent over WebRTC (an index into the video variants); -1 (or a passthrough
    /// or missing variant): the lowest encoded variant.
    pub webrtc_variant: i32,
    /// Viewers must present a chat access token (`Authorization: Bearer`).
    pub webrtc_require_authentication: bool,
}

impl Default for WebRtcSettings {
    fn default() -> Self {
        Self {
            webrtc_enabled: true,
            webrtc_max_viewers: DEFAULT_MAX_VIEWERS,
            webrtc_variant: -1,
            webrtc_require_authentication: false,
        }
    }
}

impl WebRtcSettings {
    /// The variant sent in real time: the configured one if it is encoded, else the encoded variant with
    /// the lowest video bitrate; `None` when WebRTC is off or every variant is passthrough.
    pub fn realtime_variant(&self, variants: &[super::StreamOutputVariant]) -> Option<usize> {
        if !self.webrtc_enabled {
            return None;
        }
        if let Ok(n) = usize::try_from(self.webrtc_variant) {
            if variants.get(n).is_some_and(|v| !v.video_passthrough) {
                return Some(n);
            }
        }
        variants
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.video_passthrough)
            .min_by_key(|(_, v)| (v.video_bitrate, v.scaled_width, v.scaled_height))
            .map(|(n, _)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StreamOutputVariant;

    #[test]
    fn the_lowest_encoded_variant_by_default() {
        let v = |kbps: u32, pass: bool| StreamOutputVariant {
            video_bitrate: kbps,
            video_passthrough: pass,
            ..Default::default()
        };
        let variants = vec![v(0, true), v(2000, false), v(600, false)];
        let mut s = WebRtcSettings::default();
        assert_eq!(s.realtime_variant(&variants), Some(2));
        s.webrtc_variant = 1;
        assert_eq!(s.realtime_variant(&variants), Some(1));
        s.webrtc_variant = 0;
        assert_eq!(s.realtime_variant(&variants), Some(2), "a passthrough variant is not encoded here");
        s.webrtc_enabled = false;
        assert_eq!(s.realtime_variant(&variants), None);
        assert_eq!(WebRtcSettings::default().realtime_variant(&[v(0, true)]), None);
    }
}
