//! "Does this ladder fit this box" (`/api/admin/video/fit`) against the real daemon: a small ladder fits,
//! four 4K60 rungs at cpuUsageLevel 4 do not, a second ask is answered from the box's cache (fast,
//! `cached: true`), the cache is this box's own (another box's file is measured again; this box's figures
//! are read back after a restart), rungs beyond one answer's measuring time are estimated and measured when asked
//! again, only the admin may ask, and a bad ladder is a 400.

mod common;

use std::time::{Duration, Instant};

use common::{each_channel, On, Server};
use serde_json::{json, Value};

fn rung(w: u32, h: u32, fps: u32, level: u32) -> Value {
    json!({"name": format!("{h}p{fps}"), "videoPassthrough": false, "audioPassthrough": true, "videoBitrate": 2500,
           "scaledWidth": w, "scaledHeight": h, "framerate": fps, "cpuUsageLevel": level})
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// POST a ladder as the admin: the answer and how long it took.
fn fit(s: &Server, ladder: &Value) -> (Value, Duration) {
    let t = Instant::now();
    let r = s.admin_post("/api/admin/video/fit", ladder);
    let status = r.status();
    let text = r.text().unwrap_or_default();
    assert_eq!(status, 200, "POST /api/admin/video/fit {ladder}: {text}");
    (serde_json::from_str(&text).expect("json"), t.elapsed())
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} is a number in {v}"))
}

#[test]
fn a_small_ladder_fits_a_huge_one_does_not_and_a_second_ask_is_cached() {
    let s = Server::start();
    let small = json!({"variants": [{"videoPassthrough": true}, rung(640, 360, 30, 1)]});
    let (a, _) = fit(&s, &small);
    assert_eq!(a["fits"], true, "{a:#}");
    assert_eq!(a["cached"], false, "the first ask measures: {a:#}");
    assert_eq!(a["cores"].as_u64(), Some(cores() as u64));
    assert_eq!(f(&a, "budgetCores"), cores().saturating_sub(1).max(1) as f64, "one core is left to the rest");
    assert_eq!(a["encoder"], "libx264", "no GPU here: the video codec 'auto' selects libx264");
    assert!(a["measuredAt"].is_string(), "{a:#}");
    let v = a["variants"].as_array().expect("variants");
    assert_eq!(v.len(), 2);
    assert_eq!((v[0]["encoder"].as_str(), v[0]["cpuCoresNeeded"].as_f64()), (Some("copy"), Some(0.0)));
    assert_eq!(
        (v[0]["width"].as_u64(), v[0]["height"].as_u64()),
        (Some(1920), Some(1080)),
        "the source counts as 1080p"
    );
    assert_eq!(v[1]["encoder"], "libx264");
    assert_eq!(v[1]["preset"], "superfast");
    assert_eq!(
        (v[1]["width"].as_u64(), v[1]["height"].as_u64(), v[1]["framerate"].as_u64()),
        (Some(640), Some(360), Some(30))
    );
    assert_eq!(v[1]["measured"], true);
    let needed = f(&v[1], "cpuCoresNeeded");
    assert!(needed > 0.0 && needed < 0.5, "360p30 superfast costs a little of a core: {needed}");
    assert!(f(&v[1], "speed") > 1.0, "360p30 encodes faster than real time: {v:?}");
    let decode = f(&a, "decodeCores");
    assert!(decode > 0.0 && decode < 0.8, "decoding the 1080p30 source: {decode}");
    assert!((f(&a, "loadCores") - (needed + decode)).abs() < 1e-6, "load = rungs + decode: {a:#}");
    assert!(f(&a, "loadCores") <= 0.8 * f(&a, "budgetCores"));
    let msg = a["message"].as_str().unwrap_or_default();
    assert!(msg.starts_with("This ladder fits this box (uses ~"), "{msg}");

    // Four 4K60 rungs at cpuUsageLevel 4 (x264 fast): far beyond this box.
    let huge = json!({"variants": [rung(3840, 2160, 60, 4), rung(3840, 2160, 60, 4), rung(3840, 2160, 60, 4), rung(3840, 2160, 60, 4)]});
    let (b, first) = fit(&s, &huge);
    assert_eq!(b["fits"], false, "{b:#}");
    assert_eq!(b["cached"], false, "a new rung is measured: {b:#}");
    assert!(f(&b, "loadCores") > f(&b, "budgetCores"), "{b:#}");
    let msg = b["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("This ladder does not fit this box: needs ~")
            && msg.contains("available — use fewer or smaller rungs, a faster CPU usage level, or passthrough"),
        "{msg}"
    );
    let rungs = b["variants"].as_array().expect("variants");
    assert_eq!(rungs.len(), 4);
    assert!(
        rungs.iter().all(|r| r["cpuCoresNeeded"] == rungs[0]["cpuCoresNeeded"] && r["preset"] == "fast"),
        "{rungs:?}"
    );
    assert_eq!(rungs[0]["measured"], true, "the same rung four times is measured once");
    // The decode of a 4K60 source: the 1080p30 decode × 4 × 2.
    assert!((f(&b, "decodeCores") - decode * 8.0).abs() < 1e-6, "{} vs {decode}", f(&b, "decodeCores"));

    // Asked again: from the cache, fast, the same figures.
    let (c, second) = fit(&s, &huge);
    assert_eq!(c["cached"], true, "{c:#}");
    assert_eq!(c["loadCores"], b["loadCores"]);
    assert_eq!(c["fits"], false);
    assert!(second < first && second < Duration::from_secs(2), "cached: {second:?}, measured: {first:?}");
    assert_eq!(fit(&s, &small).0["cached"], true, "the small ladder is cached too");
    assert!(s.log_text().contains("measured the ladder's rungs on this box"));
}

#[test]
fn another_boxs_figures_are_measured_again_and_this_boxs_are_kept() {
    let s = Server::start();
    // 360p30: it fits a busy 2-core box with room to spare (720p30 was measured at 0.89 of 1 core there,
    // over the margin), and ×100 it fits no box.
    let ladder = json!({"variants": [rung(640, 360, 30, 2)]});
    let (a, _) = fit(&s, &ladder);
    assert_eq!((a["cached"].as_bool(), a["fits"].as_bool()), (Some(false), Some(true)), "{a:#}");
    let path = s.data_dir.join("ladder-fit.json");
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).expect("the cache file")).expect("json");
    assert_eq!(file["box"]["cores"].as_u64(), Some(cores() as u64), "{file:#}");
    assert!(file["box"]["cpuModel"].as_str().is_some_and(|m| !m.is_empty()), "{file:#}");
    let key = "libx264|veryfast|640x360@30";
    assert!(file["rungs"][key]["cpuPerFrame"].as_f64().is_some_and(|c| c > 0.0), "{file:#}");

    // This box's file, its figures made 100× larger: the answer is read from it.
    let measured = file["rungs"][key]["cpuPerFrame"].as_f64().unwrap_or_default();
    file["rungs"][key]["cpuPerFrame"] = json!(measured * 100.0);
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let (b, _) = fit(&s, &ladder);
    assert_eq!(b["cached"], true);
    let rung_b = f(&b["variants"][0], "cpuCoresNeeded");
    assert!((rung_b - measured * 100.0 * 30.0).abs() < 1e-6, "{rung_b} from the file's {measured} × 100 × 30 fps");
    assert_eq!(b["fits"], false, "{b:#}");

    // Another box's file (another CPU): measured again, and the file is this box's again.
    file["box"]["cpuModel"] = json!("Another CPU of another box");
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let (c, _) = fit(&s, &ladder);
    assert_eq!(c["cached"], false, "another box's figures are not this box's: {c:#}");
    assert!(f(&c["variants"][0], "cpuCoresNeeded") < rung_b / 10.0, "{c:#}");
    let again: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_ne!(again["box"]["cpuModel"], "Another CPU of another box");

    // The figures outlive a restart.
    let s = s.restart();
    let (d, _) = fit(&s, &ladder);
    assert_eq!(d["cached"], true, "{d:#}");
    assert_eq!(d["variants"][0]["cpuCoresNeeded"], c["variants"][0]["cpuCoresNeeded"]);
}

#[test]
fn a_bad_ladder_is_a_400() {
    let s = Server::start();
    for body in [
        json!({}),
        json!([]),
        json!({"variants": []}),
        json!({"variants": "720p"}),
        json!({"variants": [{"framerate": 500}]}),
        json!({"variants": [{"scaledWidth": 641}]}),
        json!({"variants": [{"cpuUsageLevel": 9}]}),
        json!({"variants": [{"framerate": -1}]}),
        json!({"variants": vec![rung(640, 360, 30, 0); 11]}),
    ] {
        let r = s.admin_post("/api/admin/video/fit", &body);
        assert_eq!(r.status(), 400, "{body}");
        let answer: Value = r.json().expect("json");
        assert_eq!(answer["success"], false, "{body}: {answer}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}: {answer}");
    }
    let r = s
        .client
        .post(s.url("/api/admin/video/fit"))
        .basic_auth("admin", Some(&s.admin_password))
        .header("Content-Type", "application/json")
        .body("not json")
        .send()
        .expect("POST");
    assert_eq!(r.status(), 400);
}

/// The configured ladder (the channel's own on a channel), and nobody but the admin may ask.
fn the_configured_ladder_is_judged_for_the_admin_only(on: On) {
    let s = Server::start();
    let t = on.of(&s);
    t.set(
        "video/streamoutputvariants",
        json!([rung(640, 360, 24, 0), {"videoPassthrough": true}, rung(426, 240, 24, 0)]),
    );
    let r = t.admin_get("/api/admin/video/fit");
    assert_eq!(r.status(), 200);
    let a: Value = r.json().expect("json");
    let v = a["variants"].as_array().expect("variants");
    assert_eq!(v.len(), 3, "{a:#}");
    assert_eq!((v[0]["height"].as_u64(), v[0]["preset"].as_str()), (Some(360), Some("ultrafast")));
    assert_eq!(v[1]["encoder"], "copy");
    assert_eq!((v[2]["width"].as_u64(), v[2]["framerate"].as_u64()), (Some(426), Some(24)));
    assert_eq!(a["fits"], true, "{a:#}");

    let anonymous = [t.get("/api/admin/video/fit"), t.post_json("/api/admin/video/fit", &json!({"variants": [{}]}))];
    let wrong = [
        t.client.get(t.url("/api/admin/video/fit")).basic_auth("admin", Some("not-the-password")).send().expect("GET"),
        t.client
            .post(t.url("/api/admin/video/fit"))
            .basic_auth("admin", Some("not-the-password"))
            .json(&json!({"variants": [{}]}))
            .send()
            .expect("POST"),
    ];
    for r in anonymous.into_iter().chain(wrong) {
        assert_eq!(r.status(), 401, "{}", r.url());
    }
}

each_channel!(the_configured_ladder_is_judged_for_the_admin_only);

#[test]
fn rungs_beyond_the_measuring_time_are_estimated_then_measured_when_asked_again() {
    let s = Server::start();
    // Ten different 4K rungs: about a second of measuring each, more than one answer measures (5 s).
    let ladder = json!({"variants": (51..61).map(|fps| rung(3840, 2160, fps, 1)).collect::<Vec<_>>()});
    let (a, _) = fit(&s, &ladder);
    let measured = |v: &Value| v["variants"].as_array().unwrap().iter().filter(|r| r["measured"] == true).count();
    let first = measured(&a);
    assert!((1..10).contains(&first), "some rungs measured, the rest estimated: {a:#}");
    let msg = a["message"].as_str().unwrap_or_default();
    assert!(msg.contains("were estimated from the others"), "{msg}");
    for r in a["variants"].as_array().unwrap() {
        assert!(f(r, "cpuCoresNeeded") > 0.0, "an estimate is a figure too: {r}");
    }
    // Asked again, the estimated rungs are measured (until all are).
    let mut last = first;
    for _ in 0..10 {
        let (b, _) = fit(&s, &ladder);
        let now = measured(&b);
        assert!(now > last || now == 10, "{now} after {last}: {b:#}");
        last = now;
        if now == 10 {
            assert!(!b["message"].as_str().unwrap_or_default().contains("estimated"), "{b:#}");
            break;
        }
    }
    assert_eq!(last, 10);
    assert_eq!(fit(&s, &ladder).0["cached"], true);
}
