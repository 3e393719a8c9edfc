//! HTTP routes of the metrics module: `GET /api/ping`, the CMCD collector (`/api/metrics/cmcd` and
//! the interface's `/metrics/cmcd`), the legacy `POST /api/metrics/playback`, and the admin reads
//! (`viewers`, `viewersOverTime`, `viewers/playback`, `metrics/video`, `prometheus`).
//!
//! The collectors are open to any origin (`Access-Control-Allow-Origin: *` on every answer, 204 to
//! preflight) and read at most `MAX_CMCD_BODY` bytes; bad input is a 400 `{success:false}` that
//! says what was wrong, and nothing of a request with one bad report is recorded.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Query, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::cmcd::{self, Report};
use super::playback::{self, ClientCtx, LegacyValues, Source};
use super::series::{Point, VideoSeries};
use super::viewers;
use super::Metrics;
use crate::http::{ApiError, Auth, BodyDoc, JsonBody, Registry, ResponseDoc, StatusResponse, ValueDoc};

/// The documented `?CMCD=` query: a dictionary of the numeric keys (the collector also takes the
/// other keys, the CMCD-* headers and bodies; this is the form a schema can state exactly).
const CMCD_QUERY_SCHEMA: &str =
    r#"{"type":"string","pattern":"^(bl|br|d|dl|mtp|rtp|tb)=[0-9]{1,6}(,(bl|br|d|dl|mtp|rtp|tb)=[0-9]{1,6})*$"}"#;

/// Largest CMCD request body read (64 KiB).
pub const MAX_CMCD_BODY: usize = 64 * 1024;

pub fn routes(reg: &mut Registry, metrics: Arc<Metrics>) {
    let mut reg = reg.scope(metrics);
    reg.schema::<LegacyPlaybackReport>();
    reg.get("/api/ping", "public", Auth::Public, "Mark this viewer as watching", ping);
    for path in ["/api/metrics/cmcd", "/metrics/cmcd"] {
        reg.get(path, "metrics", Auth::Public, "CMCD report in the ?CMCD= query or CMCD-* headers", cmcd_get)
            .query("CMCD", true, ValueDoc::Json(CMCD_QUERY_SCHEMA))
            .returns::<StatusResponse>();
        reg.post(
            path,
            "metrics",
            Auth::Public,
            "CMCD report(s): a JSON object or array, text/cmcd lines, or ?CMCD= / CMCD-* headers",
            BodyDoc::None,
            cmcd_post,
        )
        .query("CMCD", true, ValueDoc::Json(CMCD_QUERY_SCHEMA))
        .error(413, "Body over 64 KiB");
        reg.route(Method::OPTIONS, path, "metrics", Auth::Public, "CORS preflight", BodyDoc::None, cmcd_options)
            .answers(ResponseDoc::NoContent);
    }
    reg.post(
        "/api/metrics/playback",
        "metrics",
        Auth::Public,
        "Legacy player metrics (deprecated in favour of the CMCD collector)",
        BodyDoc::Schema("LegacyPlaybackReport"),
        legacy,
    );
    reg.get("/api/admin/viewers", "admin", Auth::Admin, "Active viewers", admin_viewers)
        .returns_list::<viewers::Viewer>();
    reg.get(
        "/api/admin/viewersOverTime",
        "admin",
        Auth::Admin,
        "Viewer count over time (?windowStart=&windowEnd=, unix seconds or RFC 3339)",
        viewers_over_time,
    )
    .returns_list::<Point>();
    reg.get("/api/admin/viewers/playback", "admin", Auth::Admin, "Playback clients and their measurements", clients)
        .returns_list::<playback::ClientEntry>();
    reg.get("/api/admin/metrics/video", "admin", Auth::Admin, "Playback metrics time series", video_metrics)
        .returns::<VideoMetrics>();
    // Owncast's five operations; like Owncast's admin middleware, the OPTIONS preflight answers 204
    // without credentials (the API's CORS layer does that before any route runs).
    for method in [Method::GET, Method::POST, Method::PUT, Method::DELETE] {
        reg.route(
            method,
            "/api/admin/prometheus",
            "admin",
            Auth::Admin,
            "Prometheus metrics",
            BodyDoc::None,
            prometheus,
        )
        .answers(ResponseDoc::Content(super::prometheus::CONTENT_TYPE));
    }
    reg.route(
        Method::OPTIONS,
        "/api/admin/prometheus",
        "admin",
        Auth::Public,
        "CORS preflight of the Prometheus endpoint (204, no credentials needed)",
        BodyDoc::None,
        prometheus,
    )
    .answers(ResponseDoc::NoContent);
}

async fn ping(
    State(metrics): State<Arc<Metrics>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> StatusCode {
    metrics.viewers.touch_request(peer, &headers);
    StatusCode::OK
}

/// Add the open CORS headers of the collector.
fn cors(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, OPTIONS"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type, CMCD-Request, CMCD-Object, CMCD-Status, CMCD-Session"),
    );
    resp
}

fn answer(result: Result<Json<StatusResponse>, ApiError>) -> Response {
    cors(result.into_response())
}

async fn cmcd_options() -> Response {
    cors(StatusCode::NO_CONTENT.into_response())
}

fn bad(e: cmcd::CmcdError) -> ApiError {
    ApiError::bad(e.to_string())
}

/// The report of a request's query or headers; 400 when there is none.
fn report_of_request(query: Option<&str>, headers: &HeaderMap) -> Result<Report, ApiError> {
    let map = cmcd::from_request(query, headers).map_err(bad)?.ok_or_else(|| {
        ApiError::bad("no CMCD data: send a report as JSON, as ?CMCD=<dictionary>, or in CMCD-* headers")
    })?;
    Report::from_map(&map).map_err(bad)
}

fn record_all(metrics: &Metrics, ctx: &ClientCtx, reports: &[Report]) -> Json<StatusResponse> {
    for r in reports {
        playback::record_cmcd(&metrics.playback, ctx, r, Source::Client);
    }
    let n = reports.len();
    StatusResponse::ok(if n == 1 { "CMCD report received".to_string() } else { format!("{n} CMCD reports received") })
}

async fn cmcd_get(
    State(metrics): State<Arc<Metrics>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let ctx = ClientCtx::from_request(peer, &headers);
    answer(report_of_request(query.as_deref(), &headers).map(|r| record_all(&metrics, &ctx, &[r])))
}

async fn cmcd_post(
    State(metrics): State<Arc<Metrics>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Body,
) -> Response {
    let ctx = ClientCtx::from_request(peer, &headers);
    let result = async {
        let bytes = read_capped(body, MAX_CMCD_BODY).await?;
        let reports = parse_body(&bytes, query.as_deref(), &headers)?;
        Ok(record_all(&metrics, &ctx, &reports))
    }
    .await;
    answer(result)
}

/// Bodies over the cap are still read (and dropped) up to this size before the 413, so the client gets
/// the answer instead of a reset connection; anything larger is cut off.
const DRAIN_LIMIT: usize = 1024 * 1024;

/// The body if it is at most `cap` bytes; a larger one is drained (up to `DRAIN_LIMIT`) and refused.
async fn read_capped(body: Body, cap: usize) -> Result<axum::body::Bytes, ApiError> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad(format!("could not read the request body: {e}")))?;
        seen += chunk.len();
        if seen <= cap {
            buf.extend_from_slice(&chunk);
        } else if seen > DRAIN_LIMIT {
            break;
        }
    }
    if seen > cap {
        return Err(ApiError::TooLarge);
    }
    Ok(buf.into())
}

/// The reports of a POST body: JSON (one object or an array of objects; any body sent as JSON or
/// starting with `{`/`[`), or else `text/cmcd` (one dictionary per line); an empty body falls back to
/// the query and headers.
fn parse_body(bytes: &[u8], query: Option<&str>, headers: &HeaderMap) -> Result<Vec<Report>, ApiError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ApiError::bad("the CMCD body is not UTF-8"))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return report_of_request(query, headers).map(|r| vec![r]);
    }
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    if json_type || trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: Value =
            serde_json::from_str(trimmed).map_err(|e| ApiError::bad(format!("invalid JSON CMCD report: {e}")))?;
        let maps: Vec<Map<String, Value>> = match value {
            Value::Object(m) => vec![m],
            Value::Array(items) if items.is_empty() => return Err(ApiError::bad("the CMCD report array is empty")),
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::Object(m) => Ok(m),
                    _ => Err(ApiError::bad(format!("CMCD report {i} is not a JSON object"))),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(ApiError::bad("a CMCD report is a JSON object or an array of objects")),
        };
        return maps
            .iter()
            .enumerate()
            .map(|(i, m)| Report::from_map(m).map_err(|e| ApiError::bad(format!("CMCD report {i}: {e}"))))
            .collect();
    }
    trimmed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| cmcd::parse_dictionary(line).and_then(|m| Report::from_map(&m)).map_err(bad))
        .collect()
}

/// The legacy report's body. `errors` and `qualityVariantChanges` are required and count what
/// happened since the previous report.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LegacyPlaybackReport {
    /// Measured throughput, kbps.
    #[schema(minimum = 0)]
    pub bandwidth: Option<f64>,
    /// Seconds behind the live edge.
    #[schema(minimum = 0)]
    pub latency: Option<f64>,
    /// Errors since the previous report (required).
    #[schema(required = true, nullable = false, minimum = 0)]
    pub errors: Option<f64>,
    /// Seconds the most recent segment took to download.
    #[schema(minimum = 0)]
    pub download_duration: Option<f64>,
    /// Variant switches since the previous report (required).
    #[schema(required = true, nullable = false, minimum = 0)]
    pub quality_variant_changes: Option<f64>,
}

fn field(name: &str, v: Option<f64>, required: bool) -> Result<Option<f64>, ApiError> {
    match v {
        None if required => Err(ApiError::bad(format!("{name} is required"))),
        Some(x) if !x.is_finite() || x < 0.0 => Err(ApiError::bad(format!("{name} must be a number >= 0"))),
        other => Ok(other),
    }
}

async fn legacy(
    State(metrics): State<Arc<Metrics>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<LegacyPlaybackReport>,
) -> Result<Json<StatusResponse>, ApiError> {
    let values = LegacyValues {
        errors: field("errors", body.errors, true)?.unwrap_or_default(),
        quality_variant_changes: field("qualityVariantChanges", body.quality_variant_changes, true)?
            .unwrap_or_default(),
        bandwidth_kbps: field("bandwidth", body.bandwidth, false)?,
        latency_seconds: field("latency", body.latency, false)?,
        download_seconds: field("downloadDuration", body.download_duration, false)?,
    };
    let ctx = ClientCtx::from_request(peer, &headers);
    playback::record_legacy(&metrics.playback, &ctx, &values);
    Ok(StatusResponse::ok("playback metrics received"))
}

async fn admin_viewers(State(metrics): State<Arc<Metrics>>) -> Json<Vec<viewers::Viewer>> {
    Json(metrics.viewers.snapshot())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Window {
    window_start: Option<String>,
    window_end: Option<String>,
}

fn parse_time(name: &str, v: Option<&str>) -> Result<Option<DateTime<Utc>>, ApiError> {
    let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if let Ok(secs) = v.parse::<i64>() {
        return DateTime::from_timestamp(secs, 0)
            .map(Some)
            .ok_or_else(|| ApiError::bad(format!("{name} is out of range")));
    }
    DateTime::parse_from_rfc3339(v)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| ApiError::bad(format!("{name} must be unix seconds or an RFC 3339 time")))
}

async fn viewers_over_time(
    State(metrics): State<Arc<Metrics>>,
    query: Result<Query<Window>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<Point>>, ApiError> {
    let Query(w) = query.map_err(|e| ApiError::bad(e.body_text()))?;
    let start = parse_time("windowStart", w.window_start.as_deref())?;
    let end = parse_time("windowEnd", w.window_end.as_deref())?;
    Ok(Json(metrics.viewers.over_time(start, end)))
}

async fn clients(State(metrics): State<Arc<Metrics>>) -> Json<Vec<playback::ClientEntry>> {
    Json(playback::clients(&metrics.playback, &metrics.viewers))
}

/// `GET /api/admin/metrics/video`: the playback series, plus the variants' bitrates, the segment
/// length and the health representation.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoMetrics {
    #[serde(flatten)]
    pub series: VideoSeries,
    /// kbps of each variant (1200 where the setting is 0, Owncast's default).
    pub available_bitrates: Vec<u32>,
    /// Seconds per segment.
    pub segment_length: u32,
    pub representation: u32,
}

/// The series, plus the variants' bitrates, the segment length and the representation.
/// While live, the variants and segment length are the running broadcast's (its profile); offline, the
/// settings' (what the next broadcast will run).
pub fn video_metrics_of(metrics: &Metrics) -> VideoMetrics {
    let s = metrics.settings.get();
    let series = metrics.series.lock().clone();
    let running = metrics.media.running(&metrics.channel);
    let (variants, segment_length) = match &running {
        Some(p) => (&p.variants, p.segment_seconds),
        None => (&s.video.video_quality_variants, s.latency().0),
    };
    VideoMetrics {
        series,
        available_bitrates: variants
            .iter()
            .map(|v| if v.video_bitrate == 0 { 1200 } else { v.video_bitrate })
            .collect(),
        segment_length,
        representation: metrics.health.get().representation,
    }
}

async fn video_metrics(State(metrics): State<Arc<Metrics>>) -> Json<VideoMetrics> {
    Json(video_metrics_of(&metrics))
}

async fn prometheus(State(metrics): State<Arc<Metrics>>) -> Result<Response, ApiError> {
    let text = metrics.exposition().map_err(|e| ApiError::Internal(format!("encoding metrics: {e}")))?;
    Ok(([(header::CONTENT_TYPE, super::prometheus::CONTENT_TYPE)], text).into_response())
}
