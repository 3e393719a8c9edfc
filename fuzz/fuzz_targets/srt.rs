//! libFuzzer target `srt` (see `fuzz/targets.rs`).
#![no_main]

#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    targets::srt_one(data);
});
