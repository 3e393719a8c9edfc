//! Bounded time series: `{time, value}` points in a ring buffer, and the playback series that the
//! admin `metrics/video` endpoint returns.
//!
//! Every series keeps at most `SERIES_CAPACITY` points; pushing one more drops the oldest. With the
//! 30 s window that is 10 hours of history (Owncast keeps 300 points of 2 minutes). Memory is fixed
//! no matter how long the daemon runs.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Points each series keeps: 1200 × 30 s = 10 h.
pub const SERIES_CAPACITY: usize = 1200;

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Point {
    pub time: DateTime<Utc>,
    pub value: f64,
}

/// A ring buffer of points, oldest first.
#[derive(Debug, Clone)]
pub struct Series {
    points: VecDeque<Point>,
    cap: usize,
}

impl Default for Series {
    fn default() -> Self {
        Self::with_capacity(SERIES_CAPACITY)
    }
}

impl Series {
    pub fn with_capacity(cap: usize) -> Self {
        Self { points: VecDeque::with_capacity(cap.min(64)), cap: cap.max(1) }
    }

    /// Append a point, dropping the oldest when full. Values are kept finite (JSON has no infinity,
    /// and sums of client-reported counts can overflow): infinities saturate, NaN is 0; and -0.0 (the
    /// sum of nothing) is 0, so the JSON says `0.0`, not `-0.0`.
    pub fn push(&mut self, time: DateTime<Utc>, value: f64) {
        let value = if value.is_nan() || value == 0.0 { 0.0 } else { value.clamp(f64::MIN, f64::MAX) };
        if self.points.len() >= self.cap {
            self.points.pop_front();
        }
        self.points.push_back(Point { time, value });
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    pub fn last(&self) -> Option<Point> {
        self.points.back().copied()
    }

    /// All points, oldest first.
    pub fn to_vec(&self) -> Vec<Point> {
        self.points.iter().copied().collect()
    }

    /// The points with `start <= time <= end` (either bound optional).
    pub fn between(&self, start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Vec<Point> {
        self.points
            .iter()
            .filter(|p| start.is_none_or(|s| p.time >= s) && end.is_none_or(|e| p.time <= e))
            .copied()
            .collect()
    }
}

/// The playback series of `GET /api/admin/metrics/video` (field names are the wire names).
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VideoSeries {
    pub errors: SeriesJson,
    pub quality_variant_changes: SeriesJson,
    pub highest_latency: SeriesJson,
    pub median_latency: SeriesJson,
    pub lowest_latency: SeriesJson,
    pub median_segment_download_duration: SeriesJson,
    pub maximum_segment_download_duration: SeriesJson,
    pub minimum_segment_download_duration: SeriesJson,
    pub min_player_bitrate: SeriesJson,
    pub median_player_bitrate: SeriesJson,
    pub max_player_bitrate: SeriesJson,
}

/// A `Series` that serializes as its array of points.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
#[schema(value_type = Vec<Point>)]
pub struct SeriesJson(pub Series);

impl Serialize for SeriesJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.points.iter())
    }
}

/// What one window of player reports reduces to (Owncast's reduction; `None` where no client
/// reported the value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowSummary {
    /// Clients that reported anything in the window.
    pub clients: usize,
    pub clients_with_errors: usize,
    /// Clients with a bandwidth figure, and those among them slower than `slow_below_kbps`.
    pub clients_with_bandwidth: usize,
    pub errors: f64,
    pub quality_variant_changes: f64,
    /// (lowest, median, highest) seconds behind the live edge.
    pub latency: Option<(f64, f64, f64)>,
    /// (min, median, max) seconds per segment download.
    pub download: Option<(f64, f64, f64)>,
    /// (min, median, max) player bandwidth in kbps, rounded.
    pub bitrate: Option<(f64, f64, f64)>,
    /// Each reporting client's bandwidth (kbps), for the slow-network health check.
    pub bandwidths: Vec<f64>,
}

impl VideoSeries {
    /// Record one reduced window at `time`. Error and quality-change counts get a point whenever
    /// `always_counts` (the stream is online) or some client reported; the other series only when a
    /// client reported that value.
    pub fn record(&mut self, time: DateTime<Utc>, w: &WindowSummary, always_counts: bool) {
        if always_counts || w.clients > 0 {
            self.errors.0.push(time, w.errors);
            self.quality_variant_changes.0.push(time, w.quality_variant_changes);
        }
        if let Some((lo, med, hi)) = w.latency {
            self.lowest_latency.0.push(time, lo);
            self.median_latency.0.push(time, med);
            self.highest_latency.0.push(time, hi);
        }
        if let Some((lo, med, hi)) = w.download {
            self.minimum_segment_download_duration.0.push(time, lo);
            self.median_segment_download_duration.0.push(time, med);
            self.maximum_segment_download_duration.0.push(time, hi);
        }
        if let Some((lo, med, hi)) = w.bitrate {
            self.min_player_bitrate.0.push(time, lo);
            self.median_player_bitrate.0.push(time, med);
            self.max_player_bitrate.0.push(time, hi);
        }
    }
}

/// (min, median, max) of `values`; the median of an even count is the mean of the middle two.
/// Non-finite values are ignored.
pub fn min_median_max(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { v[n / 2 - 1] / 2.0 + v[n / 2] / 2.0 }; // no overflow
    Some((v[0], median, v[n - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_buffer_drops_oldest() {
        let mut s = Series::with_capacity(3);
        let t0 = Utc::now();
        for i in 0..5 {
            s.push(t0 + chrono::Duration::seconds(i), i as f64);
        }
        let v: Vec<f64> = s.to_vec().iter().map(|p| p.value).collect();
        assert_eq!(v, vec![2.0, 3.0, 4.0]);
        assert_eq!(s.between(Some(t0 + chrono::Duration::seconds(3)), None).len(), 2);
        assert_eq!(s.between(None, Some(t0 + chrono::Duration::seconds(2))).len(), 1);
    }

    #[test]
    fn points_stay_finite() {
        let mut s = Series::default();
        for v in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MAX + f64::MAX] {
            s.push(Utc::now(), v);
        }
        let v: Vec<f64> = s.to_vec().iter().map(|p| p.value).collect();
        assert_eq!(v, vec![f64::MAX, f64::MIN, 0.0, f64::MAX]);
    }

    #[test]
    fn an_empty_windows_counts_are_written_as_zero_not_minus_zero() {
        // Summing no clients' counts gives -0.0, which JSON would carry as `-0.0`.
        let nothing: f64 = std::iter::empty::<f64>().sum();
        let summary = WindowSummary { errors: nothing, quality_variant_changes: -0.0, ..Default::default() };
        let mut series = VideoSeries::default();
        series.record(Utc::now(), &summary, true);
        // The check reads each point's value back from the JSON: the timestamp beside it has `-0` in it on
        // most days of the year (`2026-12-07`), so matching the text would depend on the date.
        for series in [&series.errors, &series.quality_variant_changes] {
            let json = serde_json::to_string(series).unwrap();
            let points: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
            assert!(!points.is_empty(), "{json}");
            for point in &points {
                let value = point["value"].as_f64().unwrap();
                assert!(value == 0.0 && value.is_sign_positive(), "{json}");
                assert!(!point["value"].to_string().starts_with('-'), "{json}");
            }
        }
    }

    #[test]
    fn default_capacity_is_ten_hours_of_30s_windows() {
        const { assert!(SERIES_CAPACITY * 30 >= 10 * 3600) };
        let mut s = Series::default();
        for i in 0..(SERIES_CAPACITY + 10) {
            s.push(Utc::now(), i as f64);
        }
        assert_eq!(s.len(), SERIES_CAPACITY);
    }

    #[test]
    fn medians() {
        assert_eq!(min_median_max(&[]), None);
        assert_eq!(min_median_max(&[3.0, 1.0, 2.0]), Some((1.0, 2.0, 3.0)));
        assert_eq!(min_median_max(&[4.0, 1.0, 2.0, 3.0]), Some((1.0, 2.5, 4.0)));
        assert_eq!(min_median_max(&[f64::NAN, 5.0]), Some((5.0, 5.0, 5.0)));
        assert_eq!(min_median_max(&[f64::MAX, f64::MAX]), Some((f64::MAX, f64::MAX, f64::MAX)));
    }
}
