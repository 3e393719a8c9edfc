//! Retention on the media plane, end to end: object storage is a consumer that *holds* each segment until
//! it is uploaded. With the store down, segments stay on disk past the live window (held); once the store
//! is back and they are uploaded, they are deleted; over a two-minute publish the number of segment files
//! stays bounded and every segment a playlist names is on disk.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::media::{publish, wait_exit};
use common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
use common::Server;
use serde_json::json;

const KEY: &str = "retention-test-key";
const PREFIX: &str = "held";
/// Latency level 1: 2 s segments, 15 listed.
const LIST_SIZE: usize = 15;
/// castd's retention grace (`media::retention::GRACE_SEGMENTS`).
const GRACE: usize = 2;
/// Segments storage keeps queued (and held) per variant while the store is down (`MAX_QUEUED`).
const MAX_QUEUED: usize = 64;

fn segment_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".ts"))
        .collect()
}

fn listed(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("stream.m3u8"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Newest segment number in a name `stream-<id>-<n>.ts`.
fn number(name: &str) -> u64 {
    name.trim_end_matches(".ts").rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// castd with one passthrough variant at latency level 1, offloading to the S3 server at `endpoint`.
fn offloading_server(endpoint: &str) -> Server {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set(
        "video/streamoutputvariants",
        json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]),
    );
    server.set("video/streamlatencylevel", json!(1));
    server.set(
        "s3",
        json!({
            "enabled": true, "endpoint": endpoint, "accessKey": ACCESS_KEY, "secret": SECRET_KEY,
            "bucket": BUCKET, "region": "us-east-1", "acl": "public-read", "pathPrefix": PREFIX,
            "forcePathStyle": true,
        }),
    );
    server
}

#[test]
fn a_held_segment_outlives_the_window_and_goes_once_released() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s3 = S3Server::start(tmp.path());
    let public = s3.public();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let server = offloading_server(&s3.endpoint());
    let dir = server.data_dir.join("hls").join("0");
    let started = Instant::now();
    let mut ff = publish(&server, KEY, "320x180", 125);
    let mut peak = 0usize;
    let sample = |peak: &mut usize| {
        let on_disk = segment_files(&dir);
        *peak = (*peak).max(on_disk.len());
        // Retention never deletes a segment a playlist names.
        let missing: Vec<String> = listed(&dir).into_iter().filter(|s| !on_disk.contains(s)).collect();
        assert!(missing.is_empty(), "listed but not on disk: {missing:?}");
    };
    let in_bucket = |name: &str| public.list(&client, PREFIX).iter().any(|k| k.ends_with(&format!("/0/{name}")));

    // Uploads work: the newest listed segment reaches the bucket.
    server
        .wait_for(Duration::from_secs(40), || {
            sample(&mut peak);
            listed(&dir).last().filter(|s| in_bucket(s)).map(drop)
        })
        .unwrap_or_else(|| panic!("no upload; log:\n{}", server.log_text()));

    // The store goes away: new segments cannot be uploaded and are held.
    s3.kill();
    std::thread::sleep(Duration::from_secs(3));
    let held = listed(&dir).last().cloned().expect("a listed segment");
    // Wait until the window has moved well past it (it is no longer listed, and more than the window plus
    // the grace came after it).
    server
        .wait_for(Duration::from_secs(60), || {
            sample(&mut peak);
            let newest = listed(&dir).last().map(|s| number(s)).unwrap_or(0);
            (newest >= number(&held) + (LIST_SIZE + GRACE + 2) as u64).then_some(())
        })
        .unwrap_or_else(|| panic!("the stream did not move on; log:\n{}", server.log_text()));
    assert!(!listed(&dir).contains(&held), "{held} is still listed");
    assert!(dir.join(&held).exists(), "{held} left the window and was deleted while storage still held it");
    let during = segment_files(&dir).len();
    assert!(during > LIST_SIZE + GRACE, "only {during} segment files while uploads were held back");

    // The store is back: the held segment is uploaded, then deleted locally.
    s3.restart();
    server
        .wait_for(Duration::from_secs(40), || {
            sample(&mut peak);
            (!dir.join(&held).exists()).then_some(())
        })
        .unwrap_or_else(|| panic!("{held} was never released; log:\n{}", server.log_text()));
    assert!(in_bucket(&held), "{held} was deleted without being uploaded");

    // To the end of a two-minute publish: bounded, and back to the window once everything is uploaded.
    while ff.try_wait().ok().flatten().is_none() && started.elapsed() < Duration::from_secs(170) {
        sample(&mut peak);
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_exit(&mut ff, Duration::from_secs(1));
    let settled = server.wait_for(Duration::from_secs(20), || {
        let n = segment_files(&dir).len();
        (n <= LIST_SIZE + GRACE).then_some(n)
    });
    let after = segment_files(&dir).len();
    println!(
        "retention: {:.0} s publish; {during} segment files while the store was down, peak {peak}, {after} at the end",
        started.elapsed().as_secs_f64()
    );
    assert!(settled.is_some(), "{after} segment files left after the stream ended (window {LIST_SIZE} + {GRACE})");
    assert!(peak <= LIST_SIZE + GRACE + MAX_QUEUED + 1, "{peak} segment files at the peak");
}

/// SIGTERM mid-publish with object storage behind a slow network: the stream ends the normal way, and
/// castd uploads the stream's last segments and its final playlists (with `EXT-X-ENDLIST`) before it
/// exits; none is dropped.
#[test]
fn sigterm_with_a_slow_store_uploads_the_last_segments_before_exiting() {
    let tmp = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(tmp.path());
    let slow = common::slowproxy::SlowProxy::start(s3.port, Duration::from_millis(120));
    let public = s3.public();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut server = offloading_server(&slow.endpoint());
    let dir = server.data_dir.join("hls").join("0");
    let mut ff = publish(&server, KEY, "320x180", 60);
    server
        .wait_for(Duration::from_secs(40), || (listed(&dir).len() >= 4).then_some(()))
        .unwrap_or_else(|| panic!("no segments; log:\n{}", server.log_text()));
    let code = server.stop();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
    assert_eq!(code, Some(0), "exit status after SIGTERM");
    let last = std::fs::read_to_string(dir.join("stream.m3u8")).unwrap();
    assert!(last.contains("#EXT-X-ENDLIST"), "the local playlist is final: {last}");
    let keys = public.list(&client, PREFIX);
    let missing: Vec<String> =
        listed(&dir).into_iter().filter(|s| !keys.iter().any(|k| k.ends_with(&format!("/0/{s}")))).collect();
    assert!(
        missing.is_empty(),
        "segments of the final playlist not in the bucket: {missing:?}\nlog:\n{}",
        server.log_text()
    );
    let key = keys.iter().find(|k| k.ends_with("/0/stream.m3u8")).expect("the playlist is in the bucket");
    let remote = client.get(format!("{}/{BUCKET}/{key}", public.endpoint())).send().unwrap().text().unwrap();
    assert_eq!(remote, last, "the bucket has the final playlist");
    assert!(server.log_text().contains("every segment and playlist is uploaded"), "{}", server.log_text());
}
