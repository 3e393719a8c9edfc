//! libFuzzer target `rtmp` (see `fuzz/targets.rs`).
#![no_main]

#[path = "../targets.rs"]
mod targets;

static QUIET: std::sync::Once = std::sync::Once::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // After libFuzzer's own hook (installed at start-up), so that the panics castd catches pass.
    QUIET.call_once(|| targets::quiet_caught_rtmp_panics(None));
    targets::rtmp_one(data);
});
