//! Replays the fuzzing corpora on every `cargo test`: each target of `fuzz/targets.rs` runs on the
//! committed crash regressions (`tests/fuzz/regressions/<target>/`, replayed first) and seeds
//! (`tests/fuzz/corpus/<target>/`). The coverage-guided search itself is libFuzzer's, run by
//! `fuzz/run.sh` (part of `make test`), which starts from the same directories; an input it finds
//! crashing is fixed and then committed as a regression here. Every input runs under `catch_unwind`:
//! a panic fails the test and prints the file.

#[path = "../fuzz/targets.rs"]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn files(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz").join(kind).join(target);
    let mut out: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

fn replay(target: &str) {
    let one = targets::target(target).expect("a known target");
    let regressions = files("regressions", target);
    let corpus = files("corpus", target);
    assert!(!corpus.is_empty(), "no seed corpus for {target}");
    let dict = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fuzz/dict/{target}.dict"));
    assert!(dict.is_file(), "no dictionary for {target} at {}", dict.display());
    for file in regressions.iter().chain(corpus.iter()) {
        let input = std::fs::read(file).expect("a readable corpus file");
        if catch_unwind(AssertUnwindSafe(|| one(&input))).is_err() {
            panic!("fuzz {target}: {} panicked: {:?}", file.display(), String::from_utf8_lossy(&input));
        }
    }
    println!("fuzz {target}: {} regressions and {} seeds replayed", regressions.len(), corpus.len());
}

#[test]
fn every_target_has_a_corpus_and_a_dictionary() {
    for t in targets::TARGETS {
        assert!(targets::target(t).is_some(), "{t}");
        assert!(!files("corpus", t).is_empty(), "no seeds for {t}");
    }
}

#[test]
fn fuzz_rtmp_chunk_stream_and_flv_tags() {
    targets::quiet_caught_rtmp_panics(Some("fuzz_rtmp"));
    replay("rtmp");
}

#[test]
fn fuzz_chat_inbound_frames_and_markdown_sanitizer() {
    replay("chat");
}

#[test]
fn fuzz_cmcd_query_header_and_json() {
    replay("cmcd");
}

#[test]
fn fuzz_setter_value_decoder() {
    replay("setters");
}

#[test]
fn fuzz_mpeg_ts_demux_and_srt_stream_ids() {
    replay("ts");
}

#[test]
fn fuzz_srt_datagrams_through_the_listener_and_connection() {
    replay("srt");
}
