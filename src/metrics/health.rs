//! The playback side of stream health, computed each window while the stream is online with Owncast's
//! rules plus castd's encoder check:
//!
//! * percentage = 100 − the percentage of reporting clients that had errors in the window (100 when
//!   no client reported); healthy when the percentage is above 75;
//! * representation = the percentage of active viewers that reported their bandwidth;
//! * message: the first that applies of — the encoder cannot keep up (any variant's average speed,
//!   its realtime factor, below 1.0 over the window; this also makes the stream unhealthy), wasteful
//!   inbound bitrate at high CPU, high CPU, slow viewer networks, viewer errors (3 or more clients).
//!
//! The result goes to the health hub as the playback input (`crate::health`), which combines it with
//! the transcoder's and the hardware's inputs. Offline, the playback input is the default (healthy,
//! 100 %, no message).

use super::series::WindowSummary;
use crate::health::{Health, HealthHub, HealthInput};
use crate::store::settings::SettingsStore;
use crate::stream::StreamWatch;
use crate::telemetry::Telemetry;

/// Owncast: healthy above this percentage.
pub const HEALTHY_ABOVE: u32 = 75;

/// Everything one evaluation looks at.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub window: WindowSummary,
    pub active_viewers: usize,
    pub cpu_average: Option<f64>,
    pub ingest_kbps: Option<f64>,
    /// Bitrates (kbps) of the transcoded (non-passthrough) variants.
    pub variant_kbps: Vec<f64>,
    pub any_passthrough: bool,
    pub segment_seconds: f64,
    /// Average realtime factor per variant over the window.
    pub encoder_speeds: Vec<(usize, f64)>,
}

fn pct(part: usize, whole: usize) -> u32 {
    if whole == 0 {
        return 0;
    }
    ((part as f64 * 100.0 / whole as f64).round() as u32).min(100)
}

/// Owncast's rules plus the encoder check (see the module doc).
pub fn evaluate(i: &Inputs) -> Health {
    let w = &i.window;
    let health_percentage = if w.clients == 0 { 100 } else { 100 - pct(w.clients_with_errors, w.clients) };
    let mut healthy = health_percentage > HEALTHY_ABOVE;
    let representation = pct(w.clients_with_bandwidth, i.active_viewers);
    let highest = i.variant_kbps.iter().copied().fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))));
    let lowest = i.variant_kbps.iter().copied().fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.min(b))));

    let slow_encoder = i.encoder_speeds.iter().filter(|(_, s)| *s < 1.0).min_by(|a, b| a.1.total_cmp(&b.1));
    let message = if let Some((variant, speed)) = slow_encoder {
        healthy = false;
        format!(
            "The encoder can't keep up: variant {variant} encodes at {speed:.2}× realtime (it needs at least 1×), so \
             viewers will buffer. Lower the resolution, frame rate or number of variants, pick a lower CPU usage \
             level, or use a hardware encoder."
        )
    } else if let (Some(cpu), Some(inbound), Some(hi)) = (i.cpu_average, i.ingest_kbps, highest) {
        if cpu >= 80.0 && inbound > hi {
            format!(
                "Your broadcasting software sends {inbound:.0} kbps, more than your highest quality variant \
                 ({hi:.0} kbps), while the CPU is at {cpu:.0}%. Lower the bitrate in your broadcasting software to \
                 save CPU."
            )
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    let message = if !message.is_empty() {
        message
    } else if let Some(cpu) = i.cpu_average.filter(|c| *c >= 90.0) {
        format!(
            "The server's CPU use is {cpu:.0}%. Video may be produced slower than it is watched, and viewers will \
             buffer. Give the server more CPU, or use fewer or cheaper quality variants."
        )
    } else if let Some(lo) = lowest.filter(|_| !w.bandwidths.is_empty()) {
        let slow = w.bandwidths.iter().filter(|b| **b < lo * 1.1).count();
        if slow > 0 {
            format!(
                "{slow} of {} viewers ({}%) download video slower than, or too close to, your lowest quality \
                 variant's bitrate of {lo:.0} kbps. Consider adding a lower quality variant.",
                w.bandwidths.len(),
                pct(slow, w.bandwidths.len())
            )
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    let message = if message.is_empty() && w.clients >= 3 && w.clients_with_errors > 0 {
        let mut m = format!(
            "{} of {} viewers ({}%) are seeing playback errors.",
            w.clients_with_errors,
            w.clients,
            pct(w.clients_with_errors, w.clients)
        );
        if i.any_passthrough {
            m.push_str(" Consider disabling video passthrough: the broadcaster's video may not suit every player.");
        } else if i.segment_seconds < 3.0 {
            m.push_str(" Consider raising the latency level so that segments are longer.");
        }
        m
    } else {
        message
    };
    Health { healthy, health_percentage, representation, message }
}

/// What the health evaluation reads besides the window and the viewer count, and where it reports.
pub struct Sources<'a> {
    pub telemetry: &'a Telemetry,
    pub stream: &'a StreamWatch,
    pub settings: &'a SettingsStore,
    pub hub: &'a HealthHub,
    pub media: &'a crate::media::MediaPlane,
    pub channel: &'a crate::media::ChannelId,
}

/// Gather the inputs, evaluate, and hand the result to the health hub (which publishes HEALTH_ALERT
/// when the message changes). Called once per window with that window's summary.
pub fn update(sources: &Sources<'_>, active_viewers: usize, window: &WindowSummary) -> Health {
    let t = &sources.telemetry;
    let speeds = t.take_speeds();
    let stream = sources.stream.borrow().clone();
    // What is running: the live broadcast's profile, not the settings (an admin may change those).
    let running = sources.media.running(sources.channel);
    let next = if let (true, Some(p)) = (stream.online, running) {
        let inbound = t.ingest_kbps().or_else(|| {
            stream.broadcaster.as_ref().map(|b| f64::from(b.stream_details.video_bitrate)).filter(|b| *b > 0.0)
        });
        evaluate(&Inputs {
            window: window.clone(),
            active_viewers,
            cpu_average: t.cpu_average(),
            ingest_kbps: inbound,
            variant_kbps: p
                .variants
                .iter()
                .filter(|v| !v.video_passthrough)
                .map(|v| f64::from(if v.video_bitrate == 0 { 1200 } else { v.video_bitrate }))
                .collect(),
            any_passthrough: p.variants.iter().any(|v| v.video_passthrough),
            segment_seconds: f64::from(p.segment_seconds),
            encoder_speeds: speeds,
        })
    } else {
        Health::default()
    };
    sources.hub.submit(HealthInput::Playback(next.clone()));
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(clients: usize, errors: usize, bandwidths: Vec<f64>) -> WindowSummary {
        WindowSummary {
            clients,
            clients_with_errors: errors,
            clients_with_bandwidth: bandwidths.len(),
            bandwidths,
            ..Default::default()
        }
    }

    #[test]
    fn percentage_and_representation() {
        let h =
            evaluate(&Inputs { window: window(4, 1, vec![5000.0, 6000.0]), active_viewers: 4, ..Default::default() });
        assert_eq!((h.health_percentage, h.healthy, h.representation), (75, false, 50));
        let h = evaluate(&Inputs { window: window(5, 1, vec![]), active_viewers: 5, ..Default::default() });
        assert_eq!((h.health_percentage, h.healthy), (80, true));
        let h = evaluate(&Inputs::default());
        assert_eq!((h.health_percentage, h.healthy, h.representation), (100, true, 0));
    }

    #[test]
    fn slow_encoder_is_unhealthy_and_comes_first() {
        let i = Inputs {
            window: window(3, 3, vec![100.0]),
            variant_kbps: vec![1200.0],
            cpu_average: Some(95.0),
            encoder_speeds: vec![(0, 1.2), (1, 0.8)],
            ..Default::default()
        };
        let h = evaluate(&i);
        assert!(!h.healthy);
        assert!(h.message.contains("can't keep up") && h.message.contains("variant 1"), "{}", h.message);
        let ok = evaluate(&Inputs { encoder_speeds: vec![(0, 1.0)], ..Default::default() });
        assert!(ok.healthy && ok.message.is_empty());
    }

    #[test]
    fn message_order() {
        let base = Inputs {
            window: window(3, 1, vec![1000.0, 5000.0, 6000.0]),
            active_viewers: 3,
            variant_kbps: vec![1200.0, 3000.0],
            segment_seconds: 2.0,
            ..Default::default()
        };
        let wasteful = evaluate(&Inputs { cpu_average: Some(85.0), ingest_kbps: Some(6000.0), ..base.clone() });
        assert!(wasteful.message.contains("broadcasting software sends 6000"), "{}", wasteful.message);
        let cpu = evaluate(&Inputs { cpu_average: Some(92.0), ..base.clone() });
        assert!(cpu.message.contains("CPU use is 92%"), "{}", cpu.message);
        let slow = evaluate(&base);
        assert!(slow.message.starts_with("1 of 3 viewers (33%) download"), "{}", slow.message);
        let errors = evaluate(&Inputs { window: window(3, 1, vec![]), ..base.clone() });
        assert!(errors.message.contains("playback errors") && errors.message.contains("latency"), "{}", errors.message);
        let two_clients = evaluate(&Inputs { window: window(2, 1, vec![]), ..base });
        assert_eq!(two_clients.message, "");
    }
}
