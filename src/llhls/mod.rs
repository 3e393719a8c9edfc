//! Low-latency HLS: the live window of CMAF parts and segments in memory, the LL-HLS media playlists,
//! blocking playlist reload and blocking preload-hinted part requests.
//!
//! The transcoder's CMAF packager (`transcode::worker::cmaf`) writes each part (and each finished segment) to
//! `<data-dir>/hls/<variant>/` and reports it on the media feed (`media::MediaEvent::PartWritten`);
//! `start` maps the file into memory and wakes every waiting request. `serve` answers what the HLS route hands it while a
//! variant is live in LL mode: `N/stream.m3u8` is rendered from memory (`playlist`), holding
//! `?_HLS_msn=M&_HLS_part=P` until that part exists (400 when the request is more than two segments
//! ahead or names a part without a segment; 503 after `BLOCK_TARGETS` target durations), with
//! `_HLS_skip=YES` giving a delta update; a part, segment or init segment comes from memory, and a
//! request for the preload-hinted part waits until it is written. Anything else goes back to the HLS
//! route (disk). Memory holds the playlist window's segments and the parts of the newest ones.
//!
//! A worker restart (new init segment, media sequence numbers from 0 again) continues the window: its
//! segments get the next sequence numbers, after an `EXT-X-DISCONTINUITY` and their own `EXT-X-MAP`.

pub mod playlist;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::http::files::{respond, FileBody};
use crate::http::zerocopy::MappedFile;
use crate::http::ApiError;
use crate::media::{Attached, ChannelId, Delivery, HlsPart, MediaEvent, MediaPlane, Subscription};
use crate::tasks::{Stage, Tasks};

/// A blocking request waits at most this many target durations.
pub const BLOCK_TARGETS: u32 = 3;
/// Segments (from the newest) whose parts stay in memory.
pub const PARTS_KEPT_SEGMENTS: usize = 4;

const PLAYLIST_TYPE: &str = "application/x-mpegURL";
/// `Cache-Control` of a playlist asked for without delivery directives: it changes with every part,
/// so a shared cache keeps it one second at most (as AWS MediaPackage does for LL-HLS).
pub const PLAYLIST_CACHE: &str = "public, max-age=1";
/// `Cache-Control` of a blocking reload (`_HLS_msn`, with or without `_HLS_part`/`_HLS_skip`): every
/// answer to that query holds the part asked for, so a cache keyed by the whole URL (query included,
/// as Apple's LL-HLS spec expects of CDNs) may serve it to every player that asks the same; longer
/// than any player waits on one, shorter than the live window.
pub const BLOCKING_CACHE: &str = "public, max-age=10";
/// `Cache-Control` of parts, segments and init segments: their names are never reused.
pub const MEDIA_CACHE: &str = "public, max-age=31536000, immutable";

/// One part in the window.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub duration: f64,
    pub independent: bool,
    pub body: Option<FileBody>,
}

/// A segment of the window (or the one being written, `Variant::current`).
#[derive(Debug, Clone, Default)]
pub struct Segment {
    pub msn: u64,
    pub duration: f64,
    pub pdt_ms: i64,
    pub name: String,
    pub init: String,
    pub parts: Vec<Part>,
    pub part_count: u32,
    pub discontinuity: bool,
    pub body: Option<FileBody>,
}

/// One variant's LL state.
#[derive(Debug, Clone, Default)]
pub struct Variant {
    pub part_target: f64,
    pub segment_seconds: u32,
    pub list_size: u32,
    /// Name prefix of this run's parts (`part-<id>-`).
    pub prefix: String,
    /// Worker sequence number + offset = playlist sequence number.
    pub offset: u64,
    pub inits: HashMap<String, FileBody>,
    pub segments: VecDeque<Segment>,
    pub current: Segment,
    pub discontinuity_sequence: u64,
    /// The longest segment seen (the target duration never shrinks).
    pub longest: f64,
}

impl Variant {
    /// `EXT-X-TARGETDURATION`: the segment length, or more if a segment was longer.
    pub fn target_duration(&self) -> u32 {
        (self.longest.round() as u32).max(self.segment_seconds).max(1)
    }

    /// The part the worker writes next (`EXT-X-PRELOAD-HINT`).
    pub fn hint_name(&self) -> Option<String> {
        if self.prefix.is_empty() {
            return None;
        }
        let worker_msn = self.current.msn.checked_sub(self.offset)?;
        Some(format!("{}{worker_msn}-{}.m4s", self.prefix, self.current.parts.len()))
    }

    fn find(&self, name: &str) -> Option<FileBody> {
        if let Some(f) = self.inits.get(name) {
            return Some(f.clone());
        }
        let segs = self.segments.iter().rev().chain(std::iter::once(&self.current));
        for s in segs {
            if s.name == name {
                if let Some(b) = &s.body {
                    return Some(b.clone());
                }
            }
            if let Some(p) = s.parts.iter().find(|p| p.name == name) {
                return p.body.clone();
            }
        }
        None
    }

    /// Whether the playlist holds part `part` of segment `msn` or a later one (the whole segment `msn`
    /// when `part` is None): a part index past a finished segment's last part means the next
    /// segment's first part.
    fn has(&self, msn: u64, part: Option<u32>) -> bool {
        let Some(p) = part else { return msn < self.current.msn };
        if msn == self.current.msn {
            return (p as usize) < self.current.parts.len();
        }
        if msn > self.current.msn {
            return false;
        }
        let within = self.segments.iter().find(|s| s.msn == msn).is_none_or(|s| p < s.part_count);
        within || msn + 1 < self.current.msn || !self.current.parts.is_empty()
    }

    /// Add a reported part (its bytes read from disk), and the finished segment's when it ends one.
    fn add(&mut self, p: &HlsPart, part: Bytes, segment: Option<Bytes>, init: Option<Bytes>) {
        let now = SystemTime::now();
        let new_run = !self.inits.contains_key(&p.init);
        if new_run {
            if let Some(bytes) = init {
                self.inits.insert(p.init.clone(), FileBody::from_content(bytes, now, "video/mp4", MEDIA_CACHE));
            }
            let started = !self.segments.is_empty() || !self.current.parts.is_empty();
            // An unfinished segment of the previous run is dropped; the new run continues the numbers.
            self.current.parts.clear();
            self.offset = self.current.msn.saturating_sub(p.msn);
            self.current.discontinuity = started;
            self.prefix = p.prefix.clone();
        }
        self.part_target = p.part_target;
        self.segment_seconds = p.target_duration;
        self.list_size = p.list_size.max(1);
        let msn = p.msn + self.offset;
        if msn < self.current.msn {
            return;
        }
        if msn > self.current.msn {
            // A part was missed: start over at this segment.
            self.current = Segment { msn, discontinuity: self.current.discontinuity, ..Default::default() };
        }
        if self.current.parts.is_empty() {
            self.current.pdt_ms = p.pdt_ms;
            self.current.init = p.init.clone();
        }
        let body = FileBody::from_content(part, now, "video/iso.segment", MEDIA_CACHE);
        self.current.parts.push(Part {
            name: p.name.clone(),
            duration: p.duration,
            independent: p.independent,
            body: Some(body),
        });
        if let (Some(name), Some(bytes)) = (&p.segment, segment) {
            let mut done = std::mem::take(&mut self.current);
            done.name = name.clone();
            done.duration = p.segment_duration;
            done.part_count = done.parts.len() as u32;
            done.body = Some(FileBody::from_content(bytes, now, "video/iso.segment", MEDIA_CACHE));
            self.longest = self.longest.max(done.duration);
            self.current = Segment { msn: done.msn + 1, ..Default::default() };
            self.segments.push_back(done);
            while self.segments.len() > self.list_size as usize {
                if let Some(old) = self.segments.pop_front() {
                    if self.segments.front().is_some_and(|s| s.discontinuity) {
                        self.discontinuity_sequence += 1;
                    }
                    drop(old);
                }
            }
            let keep_from = self.segments.len().saturating_sub(PARTS_KEPT_SEGMENTS);
            for s in self.segments.iter_mut().take(keep_from) {
                s.parts.clear();
            }
            let inits: Vec<String> = self
                .segments
                .iter()
                .map(|s| s.init.clone())
                .chain([self.current.init.clone(), p.init.clone()])
                .collect();
            self.inits.retain(|k, _| inits.contains(k));
        }
    }
}

/// The LL-HLS state of every variant, and the signal waiting requests watch.
pub struct LlHls {
    hls_dir: PathBuf,
    variants: RwLock<HashMap<usize, Variant>>,
    version: watch::Sender<u64>,
}

/// What a request asks for in its query (`_HLS_msn`, `_HLS_part`, `_HLS_skip`).
#[derive(Debug, Default, PartialEq)]
pub struct Directives {
    pub msn: Option<u64>,
    pub part: Option<u32>,
    pub skip: bool,
}

impl Directives {
    pub fn parse(query: Option<&str>) -> Result<Directives, ApiError> {
        let mut d = Directives::default();
        for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "_HLS_msn" => d.msn = Some(v.parse().map_err(|_| ApiError::bad("_HLS_msn must be an integer"))?),
                "_HLS_part" => d.part = Some(v.parse().map_err(|_| ApiError::bad("_HLS_part must be an integer"))?),
                "_HLS_skip" => d.skip = v == "YES" || v == "v2",
                _ => {}
            }
        }
        if d.part.is_some() && d.msn.is_none() {
            return Err(ApiError::bad("_HLS_part needs _HLS_msn"));
        }
        Ok(d)
    }
}

fn unavailable(msg: &str) -> Response {
    let body = serde_json::json!({ "success": false, "message": msg }).to_string();
    let headers = [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")];
    (StatusCode::SERVICE_UNAVAILABLE, headers, Body::from(body)).into_response()
}

impl LlHls {
    pub fn new(hls_dir: PathBuf) -> Arc<LlHls> {
        Arc::new(LlHls { hls_dir, variants: RwLock::default(), version: watch::channel(0).0 })
    }

    /// Whether variant `n` is live in LL mode.
    pub fn is_live(&self, n: usize) -> bool {
        self.variants.read().contains_key(&n)
    }

    /// A copy of variant `n`'s state (tests, diagnostics).
    pub fn variant(&self, n: usize) -> Option<Variant> {
        self.variants.read().get(&n).cloned()
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    pub fn clear(&self) {
        self.variants.write().clear();
        self.bump();
    }

    /// A part was reported: map it (and its segment, and a new init segment) and wake the waiters. The
    /// files are mapped, not copied (`http::zerocopy`), and stay readable after retention deletes them.
    pub async fn on_part(&self, p: &HlsPart) -> std::io::Result<()> {
        let dir = self.hls_dir.join(p.variant.to_string());
        let known = self.variants.read().get(&p.variant).is_some_and(|v| v.inits.contains_key(&p.init));
        let (name, segment, init) = (p.name.clone(), p.segment.clone(), (!known).then(|| p.init.clone()));
        let (part, segment, init) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
            let part = MappedFile::load(&dir.join(name))?;
            let segment = segment.map(|s| MappedFile::load(&dir.join(s))).transpose()?;
            let init = init.map(|i| MappedFile::load(&dir.join(i))).transpose()?;
            Ok((part, segment, init))
        })
        .await
        .map_err(std::io::Error::other)??;
        self.variants.write().entry(p.variant).or_default().add(p, part, segment, init);
        self.bump();
        Ok(())
    }

    /// Answer `path` (under `/hls/`) if it is an LL resource of a live variant; `None`: not ours.
    pub async fn serve(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<Result<Response, ApiError>> {
        let (dir, name) = path.split_once('/')?;
        let n: usize = dir.parse().ok()?;
        if !self.is_live(n) {
            return None;
        }
        if name == "stream.m3u8" {
            return Some(self.playlist(n, query, headers).await);
        }
        if name.contains('/') {
            return None;
        }
        self.media(n, name, headers).await.map(Ok)
    }

    fn deadline(&self, n: usize) -> tokio::time::Instant {
        let target = self.variants.read().get(&n).map_or(1, Variant::target_duration);
        tokio::time::Instant::now() + Duration::from_secs(u64::from(target * BLOCK_TARGETS))
    }

    async fn playlist(&self, n: usize, query: Option<&str>, headers: &HeaderMap) -> Result<Response, ApiError> {
        let d = Directives::parse(query)?;
        let mut rx = self.version.subscribe();
        if let Some(msn) = d.msn {
            let deadline = self.deadline(n);
            loop {
                rx.borrow_and_update();
                {
                    let vars = self.variants.read();
                    let Some(v) = vars.get(&n) else {
                        return Err(ApiError::NotFound("the stream has ended".into()));
                    };
                    if msn > v.current.msn + 2 {
                        return Err(ApiError::bad(format!(
                            "_HLS_msn={msn} is too far ahead (the playlist is at {})",
                            v.current.msn
                        )));
                    }
                    if v.has(msn, d.part) {
                        break;
                    }
                }
                match tokio::time::timeout_at(deadline, rx.changed()).await {
                    Ok(Ok(())) => {}
                    _ => return Ok(unavailable("the requested part did not appear in time")),
                }
            }
        }
        let text = {
            let vars = self.variants.read();
            let Some(v) = vars.get(&n) else { return Err(ApiError::NotFound("the stream has ended".into())) };
            let mut reports: Vec<(usize, u64, u32)> = vars
                .iter()
                .filter(|(k, _)| **k != n)
                .filter_map(|(k, o)| playlist::last_part(o).map(|(m, p)| (*k, m, p)))
                .collect();
            reports.sort_unstable();
            playlist::render(v, d.skip, &reports)
        };
        let cache = if d.msn.is_some() { BLOCKING_CACHE } else { PLAYLIST_CACHE };
        let file = FileBody::from_content(Bytes::from(text), SystemTime::now(), PLAYLIST_TYPE, cache);
        Ok(respond(headers, &file))
    }

    /// A part, segment or init segment from memory; the preload-hinted part once it is written.
    async fn media(&self, n: usize, name: &str, headers: &HeaderMap) -> Option<Response> {
        let mut rx = self.version.subscribe();
        let deadline = self.deadline(n);
        loop {
            rx.borrow_and_update();
            {
                let vars = self.variants.read();
                let v = vars.get(&n)?;
                if let Some(f) = v.find(name) {
                    return Some(respond(headers, &f));
                }
                if v.hint_name().as_deref() != Some(name) {
                    return None;
                }
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return Some(unavailable("the hinted part was not written in time")),
            }
        }
    }
}

/// Keep `channel`'s LL window in step with its broadcasts' parts (each broadcast's feed) until the
/// broadcast ends; `Started` starts an empty window. A lagged feed starts the window afresh from the next
/// part (players re-block on the new parts; segments stay available from disk meanwhile).
pub fn start(ll: Arc<LlHls>, channel: &ChannelId, media: &MediaPlane, tasks: &Tasks) {
    let mut reader = media.reader_for(channel, "llhls");
    let spawner = tasks.clone();
    tasks.spawn_until_stopped(Stage::Outputs, "llhls: live windows", async move {
        while let Some(Attached { feed, .. }) = reader.next().await {
            spawner.spawn(Stage::Outputs, "llhls: live window", follow(ll.clone(), feed));
        }
    });
}

/// Follow one broadcast's parts.
async fn follow(ll: Arc<LlHls>, mut feed: Subscription) {
    while let Some(delivery) = feed.recv().await {
        match delivery {
            Delivery::Event(ev) => match &*ev {
                MediaEvent::Started(_) | MediaEvent::StreamEnded => ll.clear(),
                MediaEvent::PartWritten(p) => {
                    if let Err(e) = ll.on_part(p).await {
                        tracing::warn!("LL-HLS: part {} of variant {}: {e}", p.name, p.variant);
                    }
                }
                _ => {}
            },
            Delivery::Lagged => ll.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(msn: u64, n: u32, seg: bool) -> HlsPart {
        HlsPart {
            variant: 0,
            init: "init-a.mp4".into(),
            msn,
            part: n,
            name: format!("part-a-{msn}-{n}.m4s"),
            duration: 0.3,
            independent: n == 0,
            pdt_ms: 1_700_000_000_000 + msn as i64 * 1000,
            segment: seg.then(|| format!("seg-a-{msn}.m4s")),
            segment_duration: 0.9,
            part_target: 0.334,
            target_duration: 1,
            list_size: 25,
            prefix: "part-a-".into(),
        }
    }

    fn filled(segments: u64) -> Variant {
        let mut v = Variant::default();
        for msn in 0..segments {
            for n in 0..3 {
                let b = Bytes::from_static(b"x");
                v.add(&part(msn, n, n == 2), b.clone(), (n == 2).then(|| b.clone()), Some(b));
            }
        }
        v.add(&part(segments, 0, false), Bytes::from_static(b"y"), None, None);
        v
    }

    #[test]
    fn directives() {
        assert_eq!(Directives::parse(None).ok(), Some(Directives::default()));
        let d = Directives::parse(Some("_HLS_msn=5&_HLS_part=2&_HLS_skip=YES")).ok();
        assert_eq!(d, Some(Directives { msn: Some(5), part: Some(2), skip: true }));
        assert!(Directives::parse(Some("_HLS_part=2")).is_err());
        assert!(Directives::parse(Some("_HLS_msn=x")).is_err());
    }

    #[test]
    fn playlist_lists_parts_hint_and_reports() {
        let v = filled(10);
        let text = playlist::render(&v, false, &[(1, 10, 0)]);
        assert!(text.contains("#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=6.0,PART-HOLD-BACK=1.002"));
        assert!(text.contains("#EXT-X-PART-INF:PART-TARGET=0.334"));
        assert!(text.contains("#EXT-X-MEDIA-SEQUENCE:0\n"));
        assert!(text.contains("#EXT-X-MAP:URI=\"init-a.mp4\""));
        assert!(text.contains("#EXT-X-PART:DURATION=0.30000,URI=\"part-a-10-0.m4s\",INDEPENDENT=YES"));
        assert!(text.contains("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"part-a-10-1.m4s\""));
        assert!(text.contains("#EXT-X-RENDITION-REPORT:URI=\"../1/stream.m3u8\",LAST-MSN=10,LAST-PART=0"));
        // Parts only for the newest segments.
        assert!(!text.contains("part-a-0-0.m4s"));
        assert!(text.contains("part-a-9-2.m4s"));
        assert_eq!(text.matches("#EXTINF").count(), 10);
        assert_eq!(playlist::last_part(&v), Some((10, 0)));
    }

    #[test]
    fn delta_update_skips_old_segments() {
        let v = filled(10);
        let text = playlist::render(&v, true, &[]);
        // 9.3 s in the window, 6 s may not be skipped: the first three 0.9 s segments go.
        assert!(text.contains("#EXT-X-SKIP:SKIPPED-SEGMENTS=3\n"), "{text}");
        assert_eq!(text.matches("#EXTINF").count(), 7);
        assert!(text.contains("#EXT-X-MEDIA-SEQUENCE:0\n"));
    }

    #[test]
    fn a_new_run_continues_the_sequence_after_a_discontinuity() {
        let mut v = filled(3);
        let mut p = part(0, 0, false);
        p.init = "init-b.mp4".into();
        p.prefix = "part-b-".into();
        p.name = "part-b-0-0.m4s".into();
        v.add(&p, Bytes::from_static(b"z"), None, Some(Bytes::from_static(b"i")));
        assert_eq!(v.current.msn, 3);
        assert_eq!(v.current.parts.len(), 1);
        let text = playlist::render(&v, false, &[]);
        assert!(text.contains("#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI=\"init-b.mp4\""), "{text}");
        assert_eq!(v.hint_name().as_deref(), Some("part-b-0-1.m4s"));
        assert!(v.has(3, Some(0)) && !v.has(3, Some(1)) && v.has(2, None) && !v.has(3, None));
        // Past the last part of a finished segment: the next segment's first part.
        assert!(v.has(2, Some(3)) && v.has(2, Some(2)) && !v.has(4, Some(0)));
        let mut w = filled(2);
        w.current.parts.clear();
        assert!(w.has(1, Some(2)) && !w.has(1, Some(3)) && w.has(0, Some(9)));
    }
}
