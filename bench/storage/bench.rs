//! Object storage uploader benchmark (driven by `bench/storage/run.sh`): castd's real uploader
//! (`castd::storage`) against an S3 server, fed by a synthetic muxer that writes a 4-variant ladder's
//! segments and playlists into an HLS folder at `--multiplier` times the ladder's bitrate, in real time,
//! and announces each playlist on the bus as the transcoder does. Prints the bitrate needed and the
//! upload throughput achieved side by side, and the segment-ready-to-object-visible latency
//! (file written → PUT acknowledged) p50/p99/max.
//!
//! Usage: storage-bench --endpoint http://127.0.0.1:PORT --access-key K --secret S [--bucket B]
//!        [--seconds 60] [--multiplier 10] [--segment-secs 2]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use castd::events::Bus;
use castd::health::HealthHub;
use castd::media::{ChannelId, Container, MediaEvent, MediaPlane, Profile, Protocol, SegmentWritten, Source};
use castd::storage::{Storage, StorageDeps};
use castd::store::settings::SettingsStore;
use castd::store::Store;
use castd::stream::StreamWriter;
use castd::telemetry::Telemetry;

/// The ladder: (name, video kbps + audio kbps).
const LADDER: [(&str, u64); 4] = [("1080p", 6000 + 160), ("720p", 3000 + 128), ("480p", 1200 + 96), ("360p", 800 + 64)];
const LIST_SIZE: u64 = 10;

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Write `bytes` to `path` through a temporary name, as the muxer does (ready = renamed).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

fn playlist(first: u64, last: u64, secs: u64) -> String {
    let mut p = format!("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:{secs}\n#EXT-X-MEDIA-SEQUENCE:{first}\n");
    for i in first..=last {
        p.push_str(&format!("#EXTINF:{secs}.000000,\nstream-bench-{i}.ts\n"));
    }
    p
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = arg(&args, "--endpoint", "http://127.0.0.1:8014");
    let seconds: u64 = arg(&args, "--seconds", "60").parse()?;
    let multiplier: u64 = arg(&args, "--multiplier", "10").parse()?;
    let seg_secs: u64 = arg(&args, "--segment-secs", "2").parse()?;
    let dir = tempfile::tempdir()?;
    let store = Store::open(&dir.path().join("castd.db"))?;
    let bus = Bus::default();
    let settings = SettingsStore::open(store, bus.clone())?;
    settings.update_blocking(|s| {
        s.storage.s3.enabled = true;
        s.storage.s3.endpoint = endpoint.clone();
        s.storage.s3.access_key = arg(&args, "--access-key", "");
        s.storage.s3.secret = arg(&args, "--secret", "");
        s.storage.s3.bucket = arg(&args, "--bucket", "castd");
        s.storage.s3.path_prefix = "bench".into();
        s.storage.s3.force_path_style = true;
    })?;
    let hls_dir = dir.path().join("hls");
    for v in 0..LADDER.len() {
        std::fs::create_dir_all(hls_dir.join(v.to_string()))?;
    }
    let telemetry = Arc::new(Telemetry::default());
    let (_writer, stream) = StreamWriter::new();
    let media = MediaPlane::new(hls_dir.clone(), dir.path().to_path_buf());
    let tasks = castd::tasks::Tasks::new();
    let storage = Storage::new(StorageDeps {
        settings: settings.clone(),
        bus: bus.clone(),
        telemetry: telemetry.clone(),
        tasks: tasks.clone(),
        drain_limit: Duration::from_secs(10),
    });
    castd::storage::start(storage.clone());
    // The default channel's uploader (every channel has one; the bench plays the default channel).
    let uploads = storage.channel(castd::storage::uploader::ChannelDeps {
        channel: ChannelId::default_channel(),
        settings,
        stream,
        health: HealthHub::new(bus.clone()),
        hls_dir: hls_dir.clone(),
        media: media.clone(),
        tasks: tasks.clone(),
    });
    castd::storage::uploader::start_channel(uploads);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A broadcast as ingest and the transcoder make one: this program plays the transcoder.
    let source = Source { protocol: Protocol::Rtmp, container: Container::Flv, remote: "127.0.0.1:1935".parse()? };
    let guard = media.claim(&ChannelId::default_channel(), source)?;
    let _writer = media.go_live(guard);
    let media = _writer.broadcast().clone();
    media.start(Profile {
        stream_id: "bench".into(),
        started_at: chrono::Utc::now(),
        variants: Vec::new(),
        segment_seconds: seg_secs as u32,
        list_size: LIST_SIZE as u32,
        latency_level: 0,
        low_latency: false,
        realtime_variant: None,
        encoders: Vec::new(),
    });

    let ladder_kbps: u64 = LADDER.iter().map(|(_, k)| k).sum();
    let needed_mbps = (ladder_kbps * multiplier) as f64 / 1000.0;
    let master: String = LADDER
        .iter()
        .enumerate()
        .map(|(i, (_, k))| format!("#EXT-X-STREAM-INF:BANDWIDTH={}\n{i}/stream.m3u8\n", k * 1000))
        .collect();
    write_atomic(&hls_dir.join("stream.m3u8"), format!("#EXTM3U\n{master}").as_bytes())?;
    media.publish(MediaEvent::PlaylistWritten { variant: None });

    let segments = seconds / seg_secs;
    println!(
        "ladder: {} = {ladder_kbps} kbps; x{multiplier} = {needed_mbps:.1} Mbit/s; {seg_secs} s segments, {segments} per variant, window {LIST_SIZE}",
        LADDER.iter().map(|(n, k)| format!("{n} {k}k")).collect::<Vec<_>>().join(", ")
    );
    // Pseudo-random payload (incompressible enough; nothing compresses on the way anyway).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let start = Instant::now();
    let mut next = start;
    let mut written = 0u64;
    for i in 0..segments {
        for (v, (_, kbps)) in LADDER.iter().enumerate() {
            let len = (kbps * 1000 * multiplier * seg_secs / 8) as usize;
            let mut body = vec![0u8; len];
            for chunk in body.chunks_mut(8) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
            }
            body[0] = 0x47;
            written += len as u64;
            let vdir = hls_dir.join(v.to_string());
            let file = format!("stream-bench-{i}.ts");
            write_atomic(&vdir.join(&file), &body)?;
            let first = (i + 1).saturating_sub(LIST_SIZE);
            write_atomic(&vdir.join("stream.m3u8"), playlist(first, i, seg_secs).as_bytes())?;
            // As the worker reports it; retention deletes what left the window once it is uploaded.
            media.publish(MediaEvent::SegmentWritten(SegmentWritten {
                variant: v,
                msn: i,
                file,
                duration: seg_secs as f64,
                program_date_time: None,
                bytes: len as u64,
                independent: true,
            }));
            media.publish(MediaEvent::PlaylistWritten { variant: Some(v) });
        }
        next += Duration::from_secs(seg_secs);
        tokio::time::sleep_until(next.into()).await;
    }
    // Let the last round finish.
    let drain = Instant::now();
    while telemetry.storage_totals().queue_depth > 0 && drain.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let elapsed = start.elapsed().as_secs_f64();
    let totals = telemetry.storage_totals();
    let mut lat = telemetry.take_storage_latencies();
    lat.sort_by(f64::total_cmp);
    let expected_segments = segments * LADDER.len() as u64;
    let achieved_mbps = totals.bytes as f64 * 8.0 / elapsed / 1e6;
    let written_mbps = written as f64 * 8.0 / elapsed / 1e6;
    println!("segments written {expected_segments}, segment uploads {} (latency samples), all uploads {}, failures {}, deletes {}", lat.len(), totals.uploads, totals.failures, totals.deletes);
    println!(
        "throughput over {elapsed:.1} s: needed {needed_mbps:.1} Mbit/s | written {written_mbps:.1} Mbit/s ({:.1} MB of segments) | uploaded {achieved_mbps:.1} Mbit/s ({:.1} MB, playlists included)",
        written as f64 / 1e6,
        totals.bytes as f64 / 1e6
    );
    println!(
        "segment ready -> object visible: p50 {:.1} ms | p99 {:.1} ms | max {:.1} ms (segment duration {} ms)",
        percentile(&lat, 0.5) * 1e3,
        percentile(&lat, 0.99) * 1e3,
        lat.last().copied().unwrap_or(f64::NAN) * 1e3,
        seg_secs * 1000
    );
    let keeps_up =
        lat.len() as u64 == expected_segments && totals.failures == 0 && percentile(&lat, 0.99) < seg_secs as f64;
    println!("keeps up with x{multiplier}: {}", if keeps_up { "yes" } else { "NO" });
    tasks.stop(castd::tasks::Stage::Outputs, Duration::from_secs(1)).await;
    Ok(())
}
