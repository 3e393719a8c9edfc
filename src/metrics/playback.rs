//! Playback clients: what each player reports (CMCD, harvested CMCD, the legacy report, server-side
//! timings), the per-client entries of `GET /api/admin/viewers/playback`, and the per-window
//! collection that `series` and `health` reduce every window.
//!
//! A client that sends a CMCD session ID (`sid`) is its own entry, so players behind one address are
//! told apart; anything else is keyed by its viewer ID (md5 of IP + User-Agent). Within a window each
//! client's error and quality-change counts add up (the legacy report sends per-interval counts) and
//! its latest bandwidth, latency and download time win, as Owncast does.
//!
//! Bounds: at most `MAX_CLIENTS` sessions and window entries; reports from further new clients are
//! acknowledged but not tracked until old sessions expire (idle for `MetricsConfig::session_timeout`).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use axum::http::{header, HeaderMap};
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::Serialize;

use super::cmcd::{self, Mode, Report};
use super::series::{min_median_max, WindowSummary};
use super::viewers::{self, Geo, Viewers};

/// Most playback sessions (and window entries) tracked at once.
pub const MAX_CLIENTS: usize = 20_000;

/// Who a report came from.
#[derive(Debug, Clone)]
pub struct ClientCtx {
    pub ip: String,
    pub user_agent: String,
    pub viewer_id: String,
}

impl ClientCtx {
    pub fn new(ip: IpAddr, user_agent: &str) -> Self {
        let ip = ip.to_string();
        let viewer_id = viewers::viewer_id(&ip, user_agent);
        Self { ip, user_agent: user_agent.to_string(), viewer_id }
    }

    /// The client of a request: its IP (see `http::client_ip`) and User-Agent.
    pub fn from_request(peer: SocketAddr, headers: &HeaderMap) -> Self {
        let ua = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        Self::new(crate::http::client_ip(peer, headers), ua)
    }
}

/// Where a client's playback figures come from (`playback.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Server-side timing of the client's segment downloads.
    Server,
    /// CMCD keys on the client's HLS requests (request mode).
    Request,
    /// The deprecated `POST /api/metrics/playback` report.
    Legacy,
    /// CMCD reports posted to the collector.
    Client,
    /// A WHEP (WebRTC) viewer: the server's RTCP view of its session (receiver reports).
    Webrtc,
}

#[derive(Debug, Clone)]
struct Session {
    client_id: String,
    viewer_id: String,
    first_seen: DateTime<Utc>,
    ip: String,
    user_agent: String,
    source: Source,
    last_update: DateTime<Utc>,
    last_seen: Instant,
    player_state: String,
    bandwidth_kbps: Option<f64>,
    latency_seconds: Option<f64>,
    download_seconds: Option<f64>,
    bitrate_kbps: Option<f64>,
    error_count: u64,
    quality_variant_changes: u64,
    /// WebRTC only: the fraction of packets lost (0..1) and the round-trip time from RTCP.
    packet_loss: Option<f64>,
    rtt_seconds: Option<f64>,
    /// The client reports its own download times (`ttlb`), so the server does not time it.
    self_reporting: bool,
    client_measured: bool,
    server_estimated: bool,
}

impl Session {
    fn new(client_id: String, ctx: &ClientCtx, source: Source) -> Self {
        let now = Utc::now();
        Self {
            client_id,
            viewer_id: ctx.viewer_id.clone(),
            first_seen: now,
            ip: ctx.ip.clone(),
            user_agent: ctx.user_agent.clone(),
            source,
            last_update: now,
            last_seen: Instant::now(),
            player_state: String::new(),
            bandwidth_kbps: None,
            latency_seconds: None,
            download_seconds: None,
            bitrate_kbps: None,
            error_count: 0,
            quality_variant_changes: 0,
            packet_loss: None,
            rtt_seconds: None,
            self_reporting: false,
            client_measured: false,
            server_estimated: false,
        }
    }

    fn touch(&mut self, source: Source) {
        self.last_update = Utc::now();
        self.last_seen = Instant::now();
        // a more direct source replaces a less direct one, never the other way round
        if source >= self.source {
            self.source = source;
        }
    }

    fn measurement_status(&self) -> &'static str {
        if self.self_reporting || self.client_measured {
            "measured"
        } else if self.server_estimated {
            "estimated"
        } else {
            "unmeasurable"
        }
    }
}

/// One client's contribution to the current window.
#[derive(Debug, Clone, Default)]
struct ClientWindow {
    errors: f64,
    quality_changes: f64,
    latency: Option<f64>,
    bandwidth: Option<f64>,
    download: Option<f64>,
}

/// Playback sessions and the current window.
#[derive(Default)]
pub struct Playback {
    sessions: Mutex<HashMap<String, Session>>,
    window: Mutex<HashMap<String, ClientWindow>>,
}

/// The `playback` object of a client entry.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlaybackJson {
    pub source: Source,
    pub last_update: DateTime<Utc>,
    pub player_state: String,
    pub measurement_status: &'static str,
    pub bandwidth_kbps: f64,
    /// `null` until something measured it (a request-mode CMCD client reports no latency of its own).
    pub latency_seconds: Option<f64>,
    /// `null` until something measured it.
    pub download_seconds: Option<f64>,
    pub bitrate_kbps: f64,
    pub error_count: u64,
    pub quality_variant_changes: u64,
    /// WebRTC viewers: the percentage of packets lost (from their RTCP receiver reports); absent for HLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packet_loss_percent: Option<f64>,
    /// WebRTC viewers: the round-trip time in seconds (RTCP); absent for HLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_seconds: Option<f64>,
}

/// One entry of `GET /api/admin/viewers/playback`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientEntry {
    #[serde(rename = "clientID")]
    pub client_id: String,
    #[serde(rename = "viewerID")]
    pub viewer_id: String,
    pub first_seen: DateTime<Utc>,
    pub geo: Geo,
    pub user_agent: String,
    pub ip_address: String,
    pub playback: Option<PlaybackJson>,
}

impl Playback {
    /// Run `f` on the session `client_id` (created from `ctx` when new) and on its window entry.
    /// Returns false when the client limit keeps a new client from being tracked.
    fn update(
        &self,
        client_id: &str,
        ctx: &ClientCtx,
        source: Source,
        f: impl FnOnce(&mut Session, &mut ClientWindow),
    ) -> bool {
        let mut sessions = self.sessions.lock();
        if !sessions.contains_key(client_id) && sessions.len() >= MAX_CLIENTS {
            return false;
        }
        let mut window = self.window.lock();
        if !window.contains_key(client_id) && window.len() >= MAX_CLIENTS {
            return false;
        }
        let s =
            sessions.entry(client_id.to_string()).or_insert_with(|| Session::new(client_id.to_string(), ctx, source));
        s.touch(source);
        // the address and agent of the latest report win (a player may change networks)
        s.ip.clone_from(&ctx.ip);
        s.user_agent.clone_from(&ctx.user_agent);
        s.viewer_id.clone_from(&ctx.viewer_id);
        let w = window.entry(client_id.to_string()).or_default();
        f(s, w);
        true
    }

    /// Forget sessions idle for longer than `timeout`; returns how many were dropped.
    pub fn prune(&self, timeout: std::time::Duration) -> usize {
        let mut sessions = self.sessions.lock();
        let before = sessions.len();
        sessions.retain(|_, s| s.last_seen.elapsed() <= timeout);
        before - sessions.len()
    }

    /// Reduce the current window and start a new one. `slow_below_kbps` is not applied here; the
    /// summary carries every bandwidth so health can judge them.
    pub fn reduce_window(&self) -> WindowSummary {
        let window = std::mem::take(&mut *self.window.lock());
        let latencies: Vec<f64> = window.values().filter_map(|w| w.latency).collect();
        let downloads: Vec<f64> = window.values().filter_map(|w| w.download).collect();
        let bandwidths: Vec<f64> = window.values().filter_map(|w| w.bandwidth).collect();
        WindowSummary {
            clients: window.len(),
            clients_with_errors: window.values().filter(|w| w.errors > 0.0).count(),
            clients_with_bandwidth: bandwidths.len(),
            errors: window.values().map(|w| w.errors).sum(),
            quality_variant_changes: window.values().map(|w| w.quality_changes).sum(),
            latency: min_median_max(&latencies),
            download: min_median_max(&downloads),
            bitrate: min_median_max(&bandwidths).map(|(a, b, c)| (a.round(), b.round(), c.round())),
            bandwidths,
        }
    }

    /// Forget the session `client_id` (a WebRTC viewer that left); its window entry stays until the
    /// window is reduced.
    pub fn remove(&self, client_id: &str) {
        self.sessions.lock().remove(client_id);
    }

    /// Number of tracked sessions.
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Record one CMCD report (posted to the collector, or harvested from an HLS request). Returns the
/// client ID it was recorded under.
pub fn record_cmcd(playback: &Playback, ctx: &ClientCtx, report: &Report, source: Source) -> String {
    let client_id = report.sid.clone().unwrap_or_else(|| ctx.viewer_id.clone());
    // `br` is the bitrate of the object requested; only video objects say which rendition plays.
    let video_object = matches!(report.object_type.as_deref(), None | Some("v" | "av"));
    let media_object = !matches!(report.object_type.as_deref(), Some("m" | "i" | "c" | "tt" | "k"));
    playback.update(&client_id, ctx, source, |s, w| {
        if let Some(state) = &report.state {
            s.player_state.clone_from(state);
        }
        if let Some(kbps) = report.throughput_kbps {
            s.bandwidth_kbps = Some(kbps);
            s.client_measured = true;
            w.bandwidth = Some(kbps);
        }
        if let Some(ms) = report.latency_ms {
            s.latency_seconds = Some(ms / 1000.0);
            s.client_measured = true;
            w.latency = Some(ms / 1000.0);
        }
        if let (Some(ms), true, Mode::Response | Mode::Event) = (report.ttlb_ms, media_object, report.mode) {
            s.download_seconds = Some(ms / 1000.0);
            s.self_reporting = true;
            w.download = Some(ms / 1000.0);
        }
        if let (Some(br), true) = (report.bitrate_kbps, video_object) {
            if s.bitrate_kbps.is_some_and(|prev| (prev - br).abs() >= 1.0) {
                s.quality_variant_changes = s.quality_variant_changes.saturating_add(1);
                w.quality_changes += 1.0;
            }
            s.bitrate_kbps = Some(br);
        }
        if report.is_error() {
            s.error_count = s.error_count.saturating_add(1);
            w.errors += 1.0;
        }
    });
    client_id
}

/// What the server knows of a WebRTC viewer's session, from RTCP (one sample a second or so).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WebrtcSample {
    /// Fraction of packets lost (0..1) in the viewer's latest receiver reports.
    pub loss: Option<f64>,
    pub rtt_seconds: Option<f64>,
    /// What castd sent the viewer since the previous sample.
    pub sent_kbps: Option<f64>,
}

/// Record a WebRTC viewer's session `client_id` (its own entry, `source: "webrtc"`): the bitrate it is
/// sent, and its loss and round-trip time as its receiver reports say. The player is measured by the
/// server's RTCP view, so the entry is "measured".
pub fn record_webrtc(playback: &Playback, ctx: &ClientCtx, client_id: &str, sample: WebrtcSample) {
    playback.update(client_id, ctx, Source::Webrtc, |s, w| {
        s.player_state = "playing".to_string();
        s.client_measured = true;
        if let Some(kbps) = sample.sent_kbps {
            s.bitrate_kbps = Some(kbps);
            s.bandwidth_kbps = Some(kbps);
            w.bandwidth = Some(kbps);
        }
        if let Some(l) = sample.loss {
            s.packet_loss = Some(l.clamp(0.0, 1.0));
        }
        if let Some(r) = sample.rtt_seconds {
            s.rtt_seconds = Some(r);
        }
    });
}

/// A legacy `POST /api/metrics/playback` report; counts are per interval (not running totals).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LegacyValues {
    pub bandwidth_kbps: Option<f64>,
    pub latency_seconds: Option<f64>,
    pub errors: f64,
    pub download_seconds: Option<f64>,
    pub quality_variant_changes: f64,
}

/// Seam for the HLS handler: collect the CMCD request-mode data (`?CMCD=` or `CMCD-*` headers) that
/// players attach to playlist and segment requests, and record it for the player's session.
///
/// Call it on every `/hls/*` request with the peer address, headers and raw query. Returns the
/// playback client ID the data was recorded under (the CMCD `sid`, or the viewer ID when the player
/// sends no session ID), or `None` when the request carries no usable CMCD data. Malformed CMCD on a
/// media request is ignored (the segment is still served), so this never fails.
pub fn harvest_request(
    playback: &Playback,
    peer: SocketAddr,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<String> {
    let map = cmcd::from_request(query, headers).ok().flatten()?;
    let report = Report::from_map(&map).ok()?;
    let ctx = ClientCtx::from_request(peer, headers);
    Some(record_cmcd(playback, &ctx, &report, Source::Request))
}

/// Record a legacy report under the client's viewer ID. Zero bandwidth, latency and download time
/// mean "not measured" and are skipped, as Owncast does.
pub fn record_legacy(playback: &Playback, ctx: &ClientCtx, v: &LegacyValues) -> String {
    let client_id = ctx.viewer_id.clone();
    let positive = |x: Option<f64>| x.filter(|x| *x > 0.0);
    playback.update(&client_id, ctx, Source::Legacy, |s, w| {
        if let Some(b) = positive(v.bandwidth_kbps) {
            s.bandwidth_kbps = Some(b);
            w.bandwidth = Some(b);
            s.client_measured = true;
        }
        if let Some(l) = positive(v.latency_seconds) {
            s.latency_seconds = Some(l);
            w.latency = Some(l);
            s.client_measured = true;
        }
        if let Some(d) = positive(v.download_seconds) {
            s.download_seconds = Some(d);
            w.download = Some(d);
            s.self_reporting = true;
        }
        // Counts come from clients: a huge one saturates instead of overflowing.
        s.error_count = s.error_count.saturating_add(v.errors.round() as u64);
        s.quality_variant_changes = s.quality_variant_changes.saturating_add(v.quality_variant_changes.round() as u64);
        w.errors += v.errors;
        w.quality_changes += v.quality_variant_changes;
    });
    client_id
}

/// Seam for the HLS handler: the server timed a segment download of `client_id` (a CMCD session ID
/// returned by `playback::harvest_request`, or a viewer ID returned by `viewers::touch`): `bytes` took
/// `seconds`. Used as the client's bandwidth and download time unless the client reports its own
/// (`ttlb`). Unknown client IDs that are not active viewers are ignored.
pub fn record_server_download(playback: &Playback, viewers: &Viewers, client_id: &str, bytes: u64, seconds: f64) {
    if !(seconds.is_finite() && seconds > 0.0) {
        return;
    }
    let ctx = {
        let sessions = playback.sessions.lock();
        match sessions.get(client_id) {
            Some(s) if s.self_reporting => return,
            Some(s) => ClientCtx { ip: s.ip.clone(), user_agent: s.user_agent.clone(), viewer_id: s.viewer_id.clone() },
            None => match viewers.get(client_id) {
                Some(v) => ClientCtx { ip: v.ip_address, user_agent: v.user_agent, viewer_id: v.id },
                None => return,
            },
        }
    };
    let kbps = bytes as f64 * 8.0 / 1000.0 / seconds;
    playback.update(client_id, &ctx, Source::Server, |s, w| {
        s.download_seconds = Some(seconds);
        s.server_estimated = true;
        w.download = Some(seconds);
        if !s.client_measured {
            s.bandwidth_kbps = Some(kbps);
            w.bandwidth = Some(kbps);
        }
    });
}

/// Every playback client now: CMCD sessions by `sid`, others by viewer, viewers without any
/// measurement with `playback: null`. Oldest first.
pub fn clients(playback: &Playback, viewers: &Viewers) -> Vec<ClientEntry> {
    let viewers = viewers.snapshot();
    let geo_of: HashMap<&str, &Geo> = viewers.iter().map(|v| (v.id.as_str(), &v.geo)).collect();
    let mut seen = HashSet::new();
    let mut out: Vec<ClientEntry> = {
        let sessions = playback.sessions.lock();
        sessions
            .values()
            .map(|s| {
                seen.insert(s.viewer_id.clone());
                ClientEntry {
                    client_id: s.client_id.clone(),
                    viewer_id: s.viewer_id.clone(),
                    first_seen: s.first_seen,
                    geo: geo_of.get(s.viewer_id.as_str()).map(|g| (*g).clone()).unwrap_or_default(),
                    user_agent: s.user_agent.clone(),
                    ip_address: s.ip.clone(),
                    playback: Some(PlaybackJson {
                        source: s.source,
                        last_update: s.last_update,
                        player_state: s.player_state.clone(),
                        measurement_status: s.measurement_status(),
                        bandwidth_kbps: s.bandwidth_kbps.unwrap_or(0.0),
                        latency_seconds: s.latency_seconds,
                        download_seconds: s.download_seconds,
                        bitrate_kbps: s.bitrate_kbps.unwrap_or(0.0),
                        error_count: s.error_count,
                        quality_variant_changes: s.quality_variant_changes,
                        packet_loss_percent: s.packet_loss.map(|l| (l * 1000.0).round() / 10.0),
                        round_trip_seconds: s.rtt_seconds,
                    }),
                }
            })
            .collect()
    };
    for v in &viewers {
        if !seen.contains(&v.id) {
            out.push(ClientEntry {
                client_id: v.id.clone(),
                viewer_id: v.id.clone(),
                first_seen: v.first_seen,
                geo: v.geo.clone(),
                user_agent: v.user_agent.clone(),
                ip_address: v.ip_address.clone(),
                playback: None,
            });
        }
    }
    out.sort_by(|a, b| a.first_seen.cmp(&b.first_seen).then_with(|| a.client_id.cmp(&b.client_id)));
    out
}
