//! Capacity: how many channels may be live at once and how much transcoding the box takes, decided
//! when a publisher claims its channel's slot (`MediaPlane::claim`), before anything is decoded.
//!
//! The limits are server-wide settings (`server/maxlivechannels`, `server/transcodebudget`,
//! `server/overcapacity`), read through a [`CapacityPolicy`] the composition root gives the plane (it
//! also knows each channel's planned ladder). A claim is over capacity when
//! - `maxlivechannels` is set and that many channels hold their publisher slot already (live, or
//!   claimed and about to go live), or
//! - another channel is live and the encoded pixels per second of every live channel's encoded rungs
//!   plus the new channel's planned ladder exceed the transcode budget. A channel alone is always
//!   given its ladder: there is nobody to protect, and a one-channel castd behaves as it always did.
//!
//! Over capacity, the publisher is refused in the protocol's handshake with the reason, or (with
//! `overcapacity=passthrough`) taken and served as passthrough: its broadcast carries the reason
//! (`Broadcast::passthrough`) and the transcoder runs one passthrough variant, encoding nothing. The
//! channels already live are never touched. The reason also goes to the channel's capacity notice
//! (`MediaPlane::capacity_notice`), which the channel's health message shows.
//!
//! **Cost.** A rung costs width × height × frame rate (encoded pixels per second); passthrough rungs
//! cost nothing. A rung's size is its scaled size; one scaled dimension keeps a 16:9 aspect, and a rung
//! with neither (the source's size, unknown before the media arrives) counts as 1920×1080. Frame rate 0
//! is Owncast's default of 24.
//!
//! **The automatic budget** (`transcodebudget` 0): [`auto_budget`] = (cores − 1, at least 1) ×
//! 1920×1080×30 (about 62 million pixels per second per core). libx264 at the presets castd uses
//! encodes 1080p30 on one core of a current CPU at two to three times real time (see
//! `hwaccel::recipe::x264_threads`); half of that is kept for decoding the source, scaling every rung,
//! audio, muxing and load peaks (scene changes), and one core is left to the rest of the server (chat,
//! the API, HLS serving, the other channels' ingest). On 2 cores that is one 1080p30 rung, or three
//! channels each with a 720p passthrough and a 360p30 rung. The budget assumes software encoding: on a
//! box that encodes on a GPU, set `transcodebudget` to what the GPU takes.

use std::sync::Arc;

use super::channel::ChannelId;
use crate::config::{OverCapacity, StreamOutputVariant};

/// Owncast's frame rate for a rung that names none.
const DEFAULT_FPS: u64 = 24;
/// The size a rung at the source's size is counted as (unknown before the media arrives).
const SOURCE_SIZE: (u64, u64) = (1920, 1080);
/// Encoded pixels per second one core is counted for in the automatic budget (1080p30).
pub const PIXELS_PER_CORE: u64 = 1920 * 1080 * 30;

/// The server's limits, as the policy reads them now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most channels live at once (0: no limit).
    pub max_live: u32,
    /// Encoded pixels per second the server transcodes in real time (already resolved: never 0).
    pub budget: u64,
    pub over: OverCapacity,
}

impl Default for Limits {
    /// No limits (what the plane uses until the daemon gives it a policy).
    fn default() -> Self {
        Limits { max_live: 0, budget: u64::MAX, over: OverCapacity::Refuse }
    }
}

/// What the composition root tells the plane: the server's limits and a channel's planned ladder.
pub trait CapacityPolicy: Send + Sync {
    /// The limits now (read from the server-wide settings at every claim).
    fn limits(&self) -> Limits;
    /// The encoded pixels per second of channel `id`'s ladder as it would be transcoded now (its
    /// video settings), see [`ladder_cost`].
    fn planned_cost(&self, id: &ChannelId) -> u64;
}

/// The cores transcoding may use on a box of `cores`: one is left to the rest of the server, at least
/// one (the automatic budget's and the Video page's "does this ladder fit" budget, `hardware::fit`).
pub fn budget_cores(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// The automatic transcode budget for `cores` CPU cores (see the module doc).
pub fn auto_budget(cores: usize) -> u64 {
    (budget_cores(cores) as u64).saturating_mul(PIXELS_PER_CORE)
}

/// The budget in force for the `transcodebudget` setting: the setting, or 0's [`auto_budget`] for this
/// machine's cores.
pub fn budget_in_force(setting: u64) -> u64 {
    if setting > 0 {
        setting
    } else {
        auto_budget(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// The encoded pixels per second of one rung (0 for passthrough; see the module doc).
pub fn rung_cost(v: &StreamOutputVariant) -> u64 {
    if v.video_passthrough {
        return 0;
    }
    let (w, h) = (u64::from(v.scaled_width), u64::from(v.scaled_height));
    let (w, h) = match (w, h) {
        (0, 0) => SOURCE_SIZE,
        (0, h) => (h * 16 / 9, h),
        (w, 0) => (w, w * 9 / 16),
        wh => wh,
    };
    let fps = if v.framerate == 0 { DEFAULT_FPS } else { u64::from(v.framerate) };
    w.saturating_mul(h).saturating_mul(fps)
}

/// The encoded pixels per second of a ladder: the sum of its rungs'.
pub fn ladder_cost(variants: &[StreamOutputVariant]) -> u64 {
    variants.iter().map(rung_cost).fold(0, u64::saturating_add)
}

/// What is live when a publisher claims: the channels holding their slot and what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Channels holding their publisher slot (live or about to be), the claiming one not counted.
    pub live: usize,
    /// Their encoded pixels per second.
    pub cost: u64,
}

/// How a claim is admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Within capacity: the channel's own ladder.
    Ladder,
    /// Over capacity, served as passthrough, for this reason.
    Passthrough(String),
    /// Over capacity, refused, for this reason.
    Refused(String),
}

/// Decide a claim whose channel's planned ladder costs `cost`, beside `load` (see the module doc).
pub fn admit(limits: &Limits, load: Load, cost: u64) -> Admission {
    let reason = if limits.max_live > 0 && load.live >= limits.max_live as usize {
        Some(format!(
            "{} channel(s) are live, the most this server takes at once (server/maxlivechannels {})",
            load.live, limits.max_live
        ))
    } else if load.live > 0 && cost > 0 && load.cost.saturating_add(cost) > limits.budget {
        Some(format!(
            "transcoding this channel's ladder ({}) beside the {} already live would exceed the server's \
             transcode budget of {} (server/transcodebudget)",
            mpx(cost),
            mpx(load.cost),
            mpx(limits.budget)
        ))
    } else {
        None
    };
    match (reason, limits.over) {
        (None, _) => Admission::Ladder,
        (Some(r), OverCapacity::Refuse) => Admission::Refused(format!("over capacity: {r}")),
        (Some(r), OverCapacity::Passthrough) => Admission::Passthrough(format!(
            "This stream is served as passthrough (the broadcaster's own video, no quality ladder) because \
             the server is over capacity: {r}."
        )),
    }
}

/// Pixels per second, for people (`12.4 Mpx/s`).
fn mpx(pixels_per_second: u64) -> String {
    format!("{:.1} Mpx/s", pixels_per_second as f64 / 1e6)
}

/// The plane's policy until the daemon gives it one: no limits.
pub(super) struct Unlimited;

impl CapacityPolicy for Unlimited {
    fn limits(&self) -> Limits {
        Limits::default()
    }

    fn planned_cost(&self, _: &ChannelId) -> u64 {
        0
    }
}

/// A shared policy.
pub type Policy = Arc<dyn CapacityPolicy>;

#[cfg(test)]
mod tests {
    use super::*;

    fn rung(w: u32, h: u32, fps: u32) -> StreamOutputVariant {
        StreamOutputVariant { scaled_width: w, scaled_height: h, framerate: fps, ..Default::default() }
    }

    #[test]
    fn a_rung_costs_its_encoded_pixels_per_second() {
        assert_eq!(rung_cost(&rung(640, 360, 30)), 640 * 360 * 30);
        assert_eq!(rung_cost(&rung(0, 720, 30)), 1280 * 720 * 30, "16:9 from the height");
        assert_eq!(rung_cost(&rung(1280, 0, 0)), 1280 * 720 * 24, "16:9 from the width, Owncast's 24 fps");
        assert_eq!(rung_cost(&rung(0, 0, 30)), 1920 * 1080 * 30, "the source's size counts as 1080p");
        let copy = StreamOutputVariant { video_passthrough: true, ..rung(1920, 1080, 60) };
        assert_eq!(rung_cost(&copy), 0, "passthrough encodes nothing");
        assert_eq!(ladder_cost(&[copy, rung(640, 360, 30), rung(0, 480, 30)]), 640 * 360 * 30 + 853 * 480 * 30);
    }

    #[test]
    fn the_automatic_budget_keeps_a_core_for_the_rest() {
        assert_eq!(auto_budget(1), PIXELS_PER_CORE);
        assert_eq!(auto_budget(2), PIXELS_PER_CORE);
        assert_eq!(auto_budget(8), 7 * PIXELS_PER_CORE);
        // Three channels of 720p passthrough + one 360p30 rung fit on 2 cores.
        let ladder = [StreamOutputVariant { video_passthrough: true, ..rung(0, 0, 0) }, rung(640, 360, 30)];
        assert!(3 * ladder_cost(&ladder) <= auto_budget(2));
    }

    #[test]
    fn admission_by_count_and_budget() {
        let limits = Limits { max_live: 2, budget: 10_000_000, over: OverCapacity::Refuse };
        let small = 640 * 360 * 30; // 6.9 Mpx/s
        assert_eq!(admit(&limits, Load::default(), 50_000_000), Admission::Ladder, "alone: always its ladder");
        assert_eq!(admit(&limits, Load { live: 1, cost: 0 }, small), Admission::Ladder);
        let Admission::Refused(why) = admit(&limits, Load { live: 1, cost: small }, small) else {
            panic!("over the budget")
        };
        assert!(why.contains("transcode budget") && why.contains("10.0 Mpx/s"), "{why}");
        assert_eq!(
            admit(&limits, Load { live: 1, cost: 9_000_000 }, 0),
            Admission::Ladder,
            "passthrough costs nothing"
        );
        let Admission::Refused(why) = admit(&limits, Load { live: 2, cost: 0 }, 0) else { panic!("over the count") };
        assert!(why.contains("maxlivechannels 2"), "{why}");
        let passthrough = Limits { over: OverCapacity::Passthrough, ..limits };
        let Admission::Passthrough(why) = admit(&passthrough, Load { live: 2, cost: 0 }, small) else {
            panic!("served as passthrough")
        };
        assert!(why.contains("passthrough") && why.contains("maxlivechannels"), "{why}");
        let unlimited = Limits::default();
        assert_eq!(admit(&unlimited, Load { live: 40, cost: u64::MAX / 2 }, u64::MAX / 4), Admission::Ladder);
    }
}
