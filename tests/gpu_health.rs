//! GPU health against the real daemon, without a GPU: the hidden switch `--debug-gpu-sample FILE` makes
//! the hardware sampler report the file's readings instead of NVML's, so `/api/admin/hardwarestats`'
//! `gpu` series, the `castd_gpu_*` Prometheus gauges and `castd gpus` are checked end to end; and on a
//! box without an NVIDIA driver (CI) there is no GPU series, no GPU gauge, and `castd gpus` says so in
//! one line and exits 0. The mapping itself is unit-tested in `hardware::stats`, `telemetry` and
//! `metrics::prometheus`; a real GPU is read by `bench/gpu` on a lent machine.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Server, BIN};
use serde_json::{json, Value};

/// Whether this box could have an NVIDIA driver (then the no-driver assertions are skipped).
fn nvidia_present() -> bool {
    Path::new("/dev/nvidia0").exists()
}

/// Two fabricated GPUs as `castd gpus` prints them: an H200 with every figure, and a card that answers
/// neither power nor temperature nor its decoder.
fn sample() -> Value {
    json!({
        "driverVersion": "580.159.04",
        "gpus": [
            {"index": 0, "name": "NVIDIA H200", "utilization": 37.0, "memory": 30.0, "memoryUsedMiB": 43131,
             "memoryTotalMiB": 143771, "encoder": 0.0, "decoder": 64.0, "temperature": 41.0, "power": 312.5},
            {"index": 1, "name": "Sensorless GPU", "utilization": 5.0, "memory": 1.5, "memoryUsedMiB": 245,
             "memoryTotalMiB": 16384, "encoder": 12.0, "decoder": null, "temperature": null, "power": null}
        ]
    })
}

fn write_sample(dir: &Path) -> String {
    let path = dir.join("gpu-sample.json");
    std::fs::write(&path, serde_json::to_vec(&sample()).unwrap()).unwrap();
    path.to_string_lossy().into_owned()
}

/// The value of the sample `name{labels}` in an OpenMetrics text (None: no such sample).
fn sample_value(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' ')?.trim().parse().ok())
}

fn latest(series: &Value) -> Option<f64> {
    series.as_array()?.last()?["value"].as_f64()
}

#[test]
fn fabricated_gpu_readings_reach_hardwarestats_and_the_prometheus_gauges() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write_sample(tmp.path());
    let server = Server::start_with_args(&["--debug-gpu-sample", &file]);

    let stats = server
        .wait_for(Duration::from_secs(15), || {
            let v = server.admin_json("/api/admin/hardwarestats");
            v["gpu"].as_array().is_some_and(|g| g.len() == 2).then_some(v)
        })
        .expect("two GPU series within 15 s of start");
    // Owncast's series are still there beside it.
    for key in ["cpu", "memory", "disk"] {
        assert!(stats[key].as_array().is_some_and(|a| !a.is_empty()), "{key}: {stats}");
    }
    let h200 = &stats["gpu"][0];
    assert_eq!(h200["index"], 0);
    assert_eq!(h200["name"], "NVIDIA H200");
    assert_eq!(h200["memoryTotalMiB"], 143771);
    assert_eq!(h200["memoryUsedMiB"], 43131);
    for (key, want) in [
        ("utilization", 37.0),
        ("memory", 30.0),
        ("encoder", 0.0),
        ("decoder", 64.0),
        ("temperature", 41.0),
        ("power", 312.5),
    ] {
        assert_eq!(latest(&h200[key]), Some(want), "gpu 0 {key}: {h200}");
        let time = h200[key][0]["time"].as_str().unwrap_or_default();
        assert!(time.len() >= 20 && time.as_bytes()[10] == b'T', "{key} time {time}");
    }
    let other = &stats["gpu"][1];
    assert_eq!(other["name"], "Sensorless GPU");
    assert_eq!(latest(&other["encoder"]), Some(12.0));
    for key in ["power", "temperature", "decoder"] {
        assert_eq!(other[key], json!([]), "a figure the GPU does not answer has no points: {other}");
    }
    assert!(server.log_text().contains("--debug-gpu-sample"), "the switch says it is on");

    // Admin only, GPUs included.
    assert_eq!(server.get("/api/admin/hardwarestats").status().as_u16(), 401);

    let text = server.admin_get("/api/admin/prometheus").text().unwrap();
    for (name, gpu, want) in [
        ("castd_gpu_utilization_percent", 0, 37.0),
        ("castd_gpu_memory_used_percent", 0, 30.0),
        ("castd_gpu_encoder_utilization_percent", 0, 0.0),
        ("castd_gpu_decoder_utilization_percent", 0, 64.0),
        ("castd_gpu_temperature_celsius", 0, 41.0),
        ("castd_gpu_power_watts", 0, 312.5),
        ("castd_gpu_utilization_percent", 1, 5.0),
        ("castd_gpu_encoder_utilization_percent", 1, 12.0),
    ] {
        let key = format!("{name}{{gpu=\"{gpu}\"}}");
        assert_eq!(sample_value(&text, &key), Some(want), "{key}:\n{text}");
    }
    for name in ["castd_gpu_power_watts", "castd_gpu_temperature_celsius", "castd_gpu_decoder_utilization_percent"] {
        let key = format!("{name}{{gpu=\"1\"}}");
        assert!(sample_value(&text, &key).is_none(), "no {key} for a GPU without that reading:\n{text}");
    }
}

#[test]
fn without_a_driver_there_is_no_gpu_series_and_no_gpu_gauge() {
    if nvidia_present() {
        return;
    }
    let server = Server::start();
    let stats = server
        .wait_for(Duration::from_secs(15), || {
            let v = server.admin_json("/api/admin/hardwarestats");
            v["cpu"].as_array().is_some_and(|a| !a.is_empty()).then_some(v)
        })
        .expect("a sample within 15 s");
    assert!(stats.get("gpu").is_none(), "no GPU series without a driver: {stats}");
    let text = server.admin_get("/api/admin/prometheus").text().unwrap();
    assert!(text.contains("owncast_instance_cpu_usage "), "the server-wide series are there:\n{text}");
    let samples: Vec<&str> = text.lines().filter(|l| l.starts_with("castd_gpu_")).collect();
    assert!(samples.is_empty(), "no GPU gauge without a GPU: {samples:?}");
}

#[test]
fn castd_gpus_prints_the_sample_or_says_there_is_no_driver() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write_sample(tmp.path());
    let out = Command::new(BIN).args(["gpus", "--debug-gpu-sample", &file]).output().expect("run castd gpus");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("castd gpus prints JSON");
    assert_eq!(printed, sample(), "what castd gpus prints is what the sampler reads, field for field");

    // A bare array of GPUs is taken too; a file that is neither is refused with its name.
    std::fs::write(&file, serde_json::to_vec(&sample()["gpus"]).unwrap()).unwrap();
    let out = Command::new(BIN).args(["gpus", "--debug-gpu-sample", &file]).output().unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["driverVersion"], Value::Null);
    assert_eq!(printed["gpus"][1]["power"], Value::Null);
    std::fs::write(&file, b"{\"gpus\": 3}").unwrap();
    let out = Command::new(BIN).args(["gpus", "--debug-gpu-sample", &file]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("gpu-sample.json"));

    if !nvidia_present() {
        let out = Command::new(BIN).arg("gpus").output().expect("run castd gpus");
        assert_eq!(out.status.code(), Some(0), "no driver is not an error");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().count(), 1, "one line: {text}");
        assert!(text.starts_with("no NVIDIA driver: "), "{text}");
        assert!(text.contains("libnvidia-ml"), "NVML's own words: {text}");
    }
}
