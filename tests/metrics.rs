//! Issue 7 acceptance: viewers, the CMCD collector, the legacy report, playback clients, the video
//! metrics series and the Prometheus exposition, against the real daemon.
//!
//! The daemon runs with the test switches `CASTD_VIEWER_IDLE_SECS` and `CASTD_METRICS_WINDOW_SECS`
//! so expiry and window reduction happen in about a second instead of 15 s / 30 s.

mod common;

use std::time::Duration;

use common::Server;
use reqwest::blocking::Response;
use serde_json::{json, Value};

const FAST: &[(&str, &str)] = &[("CASTD_VIEWER_IDLE_SECS", "3"), ("CASTD_METRICS_WINDOW_SECS", "0.5")];

/// `GET /api/ping` as the viewer at `ip` (sent as X-Forwarded-For, which castd trusts from loopback).
fn ping(server: &Server, ip: &str, ua: &str) {
    let r = server
        .client
        .get(server.url("/api/ping"))
        .header("X-Forwarded-For", ip)
        .header("User-Agent", ua)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

fn post_from(server: &Server, path: &str, ip: &str, body: &Value) -> Response {
    server
        .client
        .post(server.url(path))
        .header("X-Forwarded-For", ip)
        .header("User-Agent", "test-player/1.0")
        .json(body)
        .send()
        .unwrap()
}

fn assert_ok(r: Response, what: &str) -> Value {
    let status = r.status().as_u16();
    let cors = r.headers().get("access-control-allow-origin").map(|v| v.to_str().unwrap().to_string());
    let body: Value = r.json().unwrap_or(Value::Null);
    assert_eq!(status, 200, "{what}: {body}");
    assert_eq!(body["success"], json!(true), "{what}: {body}");
    assert_eq!(cors.as_deref(), Some("*"), "{what}: CORS header");
    body
}

fn assert_400(r: Response, what: &str) -> String {
    let status = r.status().as_u16();
    let body: Value = r.json().unwrap_or(Value::Null);
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(body["success"], json!(false), "{what}: {body}");
    let msg = body["message"].as_str().unwrap_or_default().to_string();
    assert!(!msg.is_empty(), "{what}: a 400 says why");
    msg
}

fn playback_clients(server: &Server) -> Vec<Value> {
    server.admin_json("/api/admin/viewers/playback").as_array().unwrap().clone()
}

fn client<'a>(clients: &'a [Value], id: &str) -> &'a Value {
    clients
        .iter()
        .find(|c| c["clientID"] == json!(id))
        .unwrap_or_else(|| panic!("no playback client {id} in {clients:?}"))
}

#[test]
fn ping_counts_viewers_who_expire_and_the_peak_survives_restart() {
    let server = Server::start_with_env(&[], FAST);
    assert_eq!(server.get_json("/api/status")["viewerCount"], json!(0));
    // the first admin request verifies the password with argon2 (slow in debug builds); do it before
    // the viewers start their idle clocks
    assert_eq!(server.admin_json("/api/admin/viewers"), json!([]));

    ping(&server, "203.0.113.1", "browser-a");
    ping(&server, "203.0.113.2", "browser-a");
    ping(&server, "203.0.113.2", "browser-b"); // same address, other agent: another viewer
    ping(&server, "203.0.113.1", "browser-a"); // the same viewer again
    let status = server.get_json("/api/status");
    assert_eq!(status["viewerCount"], json!(3), "{status}");
    assert_eq!(status["sessionMaxViewerCount"], json!(3));
    assert_eq!(status["overallMaxViewerCount"], json!(3));
    let admin = server.admin_json("/api/admin/status");
    assert_eq!(
        (
            admin["viewerCount"].clone(),
            admin["sessionPeakViewerCount"].clone(),
            admin["overallPeakViewerCount"].clone()
        ),
        (json!(3), json!(3), json!(3))
    );

    // the admin list of active viewers: id = md5(IP + User-Agent)
    let viewers = server.admin_json("/api/admin/viewers");
    let list = viewers.as_array().unwrap();
    assert_eq!(list.len(), 3, "{viewers}");
    let a = list.iter().find(|v| v["ipAddress"] == json!("203.0.113.1")).unwrap();
    assert_eq!(a["userAgent"], json!("browser-a"));
    assert_eq!(a["clientID"].as_str().unwrap().len(), 32);
    assert!(a["firstSeen"].is_string() && a["geo"].is_object());

    // the viewer count over time is sampled every window
    let sampled = server.wait_for(Duration::from_secs(10), || {
        ping(&server, "203.0.113.1", "browser-a");
        let points = server.admin_json("/api/admin/viewersOverTime");
        points
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["value"].as_f64() >= Some(1.0) && p["time"].is_string())
            .then_some(())
    });
    assert!(sampled.is_some(), "viewersOverTime never got a sample");
    let future = server.admin_json("/api/admin/viewersOverTime?windowStart=4102444800");
    assert_eq!(future, json!([]), "windowStart filters the samples");
    let r = server.admin_get("/api/admin/viewersOverTime?windowStart=yesterday");
    assert_400(r, "bad windowStart");

    // without pings the viewers expire after the idle time (3 s here)
    let gone = server.wait_for(Duration::from_secs(10), || {
        (server.get_json("/api/status")["viewerCount"] == json!(0)).then_some(())
    });
    assert!(gone.is_some(), "viewers did not expire");
    assert_eq!(server.admin_json("/api/admin/viewers"), json!([]));
    let status = server.get_json("/api/status");
    assert_eq!(status["overallMaxViewerCount"], json!(3), "the peak stays after viewers leave");

    // hideViewerCount hides the counts from the public status, not from the admin
    ping(&server, "203.0.113.9", "browser-c");
    server.set("hideviewercount", json!(true));
    let status = server.get_json("/api/status");
    assert!(status.get("viewerCount").is_none(), "{status}");
    assert!(status.get("overallMaxViewerCount").is_none(), "{status}");
    assert!(status.get("sessionMaxViewerCount").is_none(), "{status}");
    ping(&server, "203.0.113.9", "browser-c");
    assert_eq!(server.admin_json("/api/admin/status")["viewerCount"], json!(1));
    server.set("hideviewercount", json!(false));
    ping(&server, "203.0.113.9", "browser-c");
    assert_eq!(server.get_json("/api/status")["viewerCount"], json!(1));

    // the all-time peak is persisted
    let server = server.restart();
    let status = server.get_json("/api/status");
    assert_eq!(status["overallMaxViewerCount"], json!(3), "{status}");
    assert_eq!(status["viewerCount"], json!(0));
}

#[test]
fn cmcd_forms_are_accepted_and_sessions_listed_with_measurements() {
    let server = Server::start_with_env(&[], &[("CASTD_VIEWER_IDLE_SECS", "30")]);
    let ip = "198.51.100.20";

    // a single v2 report (request data posted by the player)
    let r = post_from(
        &server,
        "/api/metrics/cmcd",
        ip,
        &json!({"v": 2, "sid": "sess-a", "sta": "p", "mtp": 4800, "ltc": 3200, "br": 2000, "sn": 1,
                "ts": 1_700_000_000_000u64, "cid": "live", "com.example-custom": [1, 2]}),
    );
    assert_ok(r, "single report");
    // v2 event mode: an error event
    assert_ok(
        post_from(
            &server,
            "/api/metrics/cmcd",
            ip,
            &json!({"v": 2, "sid": "sess-a", "e": "e", "ec": "DECODE", "sn": 2}),
        ),
        "event report",
    );
    // v2 response mode: the player timed a segment download
    assert_ok(
        post_from(
            &server,
            "/metrics/cmcd",
            ip,
            &json!({"v": 2, "sid": "sess-a", "ot": "v", "ttlb": 850, "rc": 200, "url": "/hls/0/seg1.ts", "sn": 3}),
        ),
        "response report on the interface path",
    );
    // an array of v1 reports; the rendition changes once (br 800 -> 1600)
    assert_ok(
        post_from(
            &server,
            "/api/metrics/cmcd",
            ip,
            &json!([{"sid": "sess-b", "mtp": 1500, "br": 800, "ot": "v"}, {"v": 1, "sid": "sess-b", "br": 1600, "bs": true}]),
        ),
        "array of reports",
    );
    // the query-string form
    let q = url_encode(r#"sid="sess-c",mtp=9000,ltc=1500,v=2,sta=r"#);
    let r = server.client.get(server.url(&format!("/api/metrics/cmcd?CMCD={q}"))).send().unwrap();
    assert_ok(r, "query form");
    // the header form
    let r = server
        .client
        .get(server.url("/metrics/cmcd"))
        .header("CMCD-Session", r#"sid="sess-d",v=1"#)
        .header("CMCD-Request", "mtp=700,bl=2100")
        .header("CMCD-Status", "bs")
        .send()
        .unwrap();
    assert_ok(r, "header form");
    // text/cmcd lines, and a version castd has never heard of
    let r = server
        .client
        .post(server.url("/api/metrics/cmcd"))
        .header("Content-Type", "text/cmcd")
        .body("sid=\"sess-e\",mtp=300,v=9\nsid=\"sess-e\",sta=p")
        .send()
        .unwrap();
    assert_ok(r, "text/cmcd body");
    // a viewer that only pings is listed without playback data
    ping(&server, "198.51.100.99", "quiet-browser");

    let clients = playback_clients(&server);
    let a = client(&clients, "sess-a");
    for key in ["clientID", "viewerID", "firstSeen", "geo", "userAgent", "ipAddress", "playback"] {
        assert!(a.get(key).is_some(), "entry lacks {key}: {a}");
    }
    for key in ["countryCode", "regionName", "timeZone"] {
        assert!(a["geo"][key].is_string(), "geo lacks {key}: {a}");
    }
    assert_eq!(a["ipAddress"], json!(ip));
    assert_eq!(a["userAgent"], json!("test-player/1.0"));
    assert_eq!(a["viewerID"].as_str().unwrap().len(), 32);
    let p = &a["playback"];
    assert_eq!(p["source"], json!("client"));
    assert_eq!(p["playerState"], json!("p"));
    assert_eq!(p["measurementStatus"], json!("measured"));
    assert_eq!(p["bandwidthKbps"], json!(4800.0));
    assert_eq!(p["latencySeconds"], json!(3.2));
    assert_eq!(p["downloadSeconds"], json!(0.85));
    assert_eq!(p["bitrateKbps"], json!(2000.0));
    assert_eq!(p["errorCount"], json!(1));
    assert_eq!(p["qualityVariantChanges"], json!(0));
    assert!(p["lastUpdate"].is_string());

    let b = &client(&clients, "sess-b")["playback"];
    assert_eq!((b["qualityVariantChanges"].clone(), b["bitrateKbps"].clone()), (json!(1), json!(1600.0)));
    let c = &client(&clients, "sess-c")["playback"];
    assert_eq!(
        (c["bandwidthKbps"].clone(), c["latencySeconds"].clone(), c["playerState"].clone()),
        (json!(9000.0), json!(1.5), json!("r"))
    );
    assert_eq!(client(&clients, "sess-d")["playback"]["bandwidthKbps"], json!(700.0));
    assert_eq!(client(&clients, "sess-e")["playback"]["bandwidthKbps"], json!(300.0));
    // two sessions from one address are two clients of the same viewer
    assert_eq!(client(&clients, "sess-a")["viewerID"], client(&clients, "sess-b")["viewerID"]);
    let quiet = clients.iter().find(|c| c["userAgent"] == json!("quiet-browser")).expect("pinging viewer listed");
    assert_eq!(quiet["playback"], Value::Null);
    assert_eq!(quiet["clientID"], quiet["viewerID"]);
}

fn url_encode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

#[test]
fn malformed_cmcd_is_refused() {
    let server = Server::start();
    let post_raw = |path: &str, body: &str| {
        server
            .client
            .post(server.url(path))
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap()
    };
    assert_400(server.get("/api/metrics/cmcd"), "GET without a query");
    assert_400(server.get("/metrics/cmcd?foo=1"), "GET without CMCD");
    assert_400(post_raw("/api/metrics/cmcd", "{}"), "empty object");
    assert_400(post_raw("/api/metrics/cmcd", ""), "empty body");
    assert_400(post_raw("/api/metrics/cmcd", "{\"sid\": "), "broken JSON");
    assert_400(post_raw("/api/metrics/cmcd", "[]"), "empty array");
    assert_400(post_raw("/api/metrics/cmcd", "[1, 2]"), "array of numbers");
    assert_400(post_raw("/metrics/cmcd", "{\"mtp\": \"fast\"}"), "mistyped known key");
    assert_400(post_raw("/metrics/cmcd", "{\"ltc\": -3}"), "negative latency");
    let msg = assert_400(server.get(&format!("/api/metrics/cmcd?CMCD={}", url_encode("sid=\"open"))), "bad dictionary");
    assert!(msg.contains("CMCD"), "{msg}");
    let r = server.client.get(server.url("/api/metrics/cmcd")).header("CMCD-Request", "mtp=,").send().unwrap();
    assert_400(r, "bad header");
    // a batch with one bad report records nothing
    assert_400(post_raw("/api/metrics/cmcd", r#"[{"sid": "half", "mtp": 100}, {"sid": {"x": 1}}]"#), "bad batch");
    assert!(playback_clients(&server).iter().all(|c| c["clientID"] != json!("half")));
    // the body is capped at 64 KiB
    let big = format!("{{\"sid\": \"{}\"}}", "x".repeat(70 * 1024));
    let r = post_raw("/api/metrics/cmcd", &big);
    assert_eq!(r.status().as_u16(), 413);
    assert_eq!(r.json::<Value>().unwrap()["success"], json!(false));
    // errors carry the open CORS header too, and preflight answers 204 on both paths
    let r = post_raw("/metrics/cmcd", "nope");
    assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "*");
    assert_400(r, "a JSON content type with a body that is not JSON");
    for path in ["/api/metrics/cmcd", "/metrics/cmcd"] {
        let r = server
            .client
            .request(reqwest::Method::OPTIONS, server.url(path))
            .header("Origin", "https://player.example")
            .header("Access-Control-Request-Method", "POST")
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "{path}");
        assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "*");
        let methods = r.headers().get("access-control-allow-methods").unwrap().to_str().unwrap().to_string();
        assert!(methods.contains("POST"), "{methods}");
        let headers = r.headers().get("access-control-allow-headers").unwrap().to_str().unwrap().to_lowercase();
        assert!(headers.contains("content-type"), "{headers}");
    }
}

#[test]
fn legacy_report_needs_its_counts_and_is_recorded() {
    let server = Server::start();
    let ip = "192.0.2.44";
    let ok = post_from(
        &server,
        "/api/metrics/playback",
        ip,
        &json!({"bandwidth": 2500.0, "latency": 4.5, "errors": 1, "downloadDuration": 0.9, "qualityVariantChanges": 2}),
    );
    assert_ok(ok, "legacy report");
    // counts are per interval: a second report adds to them
    assert_ok(
        post_from(
            &server,
            "/api/metrics/playback",
            ip,
            &json!({"errors": 2, "qualityVariantChanges": 0, "bandwidth": 0}),
        ),
        "second legacy report",
    );
    let msg = assert_400(
        post_from(&server, "/api/metrics/playback", ip, &json!({"bandwidth": 100, "qualityVariantChanges": 0})),
        "missing errors",
    );
    assert!(msg.contains("errors"), "{msg}");
    let msg = assert_400(
        post_from(&server, "/api/metrics/playback", ip, &json!({"errors": 0})),
        "missing qualityVariantChanges",
    );
    assert!(msg.contains("qualityVariantChanges"), "{msg}");
    assert_400(
        post_from(&server, "/api/metrics/playback", ip, &json!({"errors": -1, "qualityVariantChanges": 0})),
        "negative errors",
    );
    assert_400(
        post_from(&server, "/api/metrics/playback", ip, &json!({"errors": "many", "qualityVariantChanges": 0})),
        "mistyped errors",
    );
    assert_400(post_from(&server, "/api/metrics/playback", ip, &json!([1])), "not an object");

    let clients = playback_clients(&server);
    let entry = clients.iter().find(|c| c["ipAddress"] == json!(ip)).expect("legacy client listed");
    assert_eq!(entry["clientID"], entry["viewerID"], "legacy clients are keyed by viewer");
    let p = &entry["playback"];
    assert_eq!(p["source"], json!("legacy"));
    assert_eq!(p["errorCount"], json!(3));
    assert_eq!(p["qualityVariantChanges"], json!(2));
    assert_eq!(p["bandwidthKbps"], json!(2500.0), "a zero bandwidth is 'not measured' and keeps the last figure");
    assert_eq!(p["latencySeconds"], json!(4.5));
    assert_eq!(p["downloadSeconds"], json!(0.9));
}

#[test]
fn metrics_video_has_every_series() {
    let server = Server::start_with_env(&[], FAST);
    let series = [
        "errors",
        "qualityVariantChanges",
        "highestLatency",
        "medianLatency",
        "lowestLatency",
        "medianSegmentDownloadDuration",
        "maximumSegmentDownloadDuration",
        "minimumSegmentDownloadDuration",
        "minPlayerBitrate",
        "medianPlayerBitrate",
        "maxPlayerBitrate",
    ];
    let empty = server.admin_json("/api/admin/metrics/video");
    for s in series {
        assert!(empty[s].is_array(), "{s} missing: {empty}");
    }
    assert_eq!(empty["availableBitrates"], json!([1200]), "{empty}");
    assert!(empty["segmentLength"].as_u64().is_some(), "{empty}");
    assert!(empty["representation"].as_u64().is_some(), "{empty}");

    // players report until a window has reduced their figures into every series
    let filled = server.wait_for(Duration::from_secs(15), || {
        post_from(
            &server,
            "/api/metrics/playback",
            "192.0.2.1",
            &json!({"bandwidth": 1000, "latency": 2, "errors": 1, "downloadDuration": 1.0, "qualityVariantChanges": 1}),
        );
        post_from(&server, "/api/metrics/cmcd", "192.0.2.2", &json!({"sid": "v2", "v": 2, "mtp": 3000, "ltc": 6000}));
        post_from(&server, "/api/metrics/cmcd", "192.0.2.2", &json!({"sid": "v2", "v": 2, "ttlb": 3000, "ot": "v"}));
        let m = server.admin_json("/api/admin/metrics/video");
        series.iter().all(|s| !m[*s].as_array().unwrap().is_empty()).then_some(m)
    });
    let m = filled.expect("every series gets points");
    for s in series {
        for p in m[s].as_array().unwrap() {
            assert!(p["time"].is_string() && p["value"].is_number(), "{s}: {p}");
        }
    }
    let last = |s: &str| m[s].as_array().unwrap().last().unwrap()["value"].as_f64().unwrap();
    // two clients: latency 2 s and 6 s; bandwidth 1000 and 3000 kbps; downloads 1 s and 3 s
    assert!(last("lowestLatency") <= last("medianLatency") && last("medianLatency") <= last("highestLatency"));
    assert!(last("minPlayerBitrate") <= last("maxPlayerBitrate"));
    assert!(last("minimumSegmentDownloadDuration") <= last("maximumSegmentDownloadDuration"));
    assert!(m["errors"].as_array().unwrap().iter().any(|p| p["value"].as_f64() >= Some(1.0)));
    assert!(last("maxPlayerBitrate") <= 3000.0 && last("minPlayerBitrate") >= 1000.0);
    // admin auth is required
    assert_eq!(server.get("/api/admin/metrics/video").status().as_u16(), 401);
    assert_eq!(server.get("/api/admin/viewers/playback").status().as_u16(), 401);
}

/// Strict line check of the text exposition (the crate parser below skips what it cannot read).
fn check_exposition_lines(text: &str) {
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let kind = comment.split_whitespace().next().unwrap_or_default();
            assert!(["HELP", "TYPE", "UNIT", "EOF"].contains(&kind), "unknown comment line: {line}");
            continue;
        }
        let (name_labels, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("sample without value: {line}"));
        let name = name_labels.split('{').next().unwrap();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line}"
        );
        if let Some(labels) = name_labels.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "bad labels in {line}");
            }
        }
        assert!(value.parse::<f64>().is_ok() || ["NaN", "+Inf", "-Inf"].contains(&value), "bad value in {line}");
    }
}

#[test]
fn prometheus_text_parses_and_needs_admin_auth() {
    let server = Server::start();
    ping(&server, "203.0.113.50", "prom-viewer");

    for method in ["GET", "POST", "PUT", "DELETE"] {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let anon = server.client.request(m.clone(), server.url("/api/admin/prometheus")).send().unwrap();
        assert_eq!(anon.status().as_u16(), 401, "{method} without auth");
        let wrong = server
            .client
            .request(m.clone(), server.url("/api/admin/prometheus"))
            .basic_auth("admin", Some("nope"))
            .send()
            .unwrap();
        assert_eq!(wrong.status().as_u16(), 401, "{method} with a wrong password");
        let ok = server
            .client
            .request(m, server.url("/api/admin/prometheus"))
            .basic_auth("admin", Some(&server.admin_password))
            .send()
            .unwrap();
        assert_eq!(ok.status().as_u16(), 200, "{method} as admin");
    }
    let r = server.client.request(reqwest::Method::OPTIONS, server.url("/api/admin/prometheus")).send().unwrap();
    assert_eq!(r.status().as_u16(), 204);

    let r = server.admin_get("/api/admin/prometheus");
    let ctype = r.headers().get("content-type").unwrap().to_str().unwrap().to_string();
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    let text = r.text().unwrap();
    check_exposition_lines(&text);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value = |name: &str| -> f64 {
        let s = scrape.samples.iter().find(|s| s.metric == name).unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => panic!("{name} is not a plain value"),
        }
    };
    assert_eq!(value("owncast_instance_active_viewer_count"), 1.0);
    for name in [
        "owncast_instance_active_chat_client_count",
        "owncast_instance_total_chat_users",
        "owncast_instance_current_chat_message_count",
        "owncast_instance_total_chat_message_count",
        "owncast_instance_playback_error_count",
        "castd_ingest_bitrate_kbps",
        "castd_webhook_deliveries_total",
        "castd_webhook_failures_total",
        "castd_chat_slow_clients_dropped_total",
    ] {
        assert_eq!(value(name), 0.0, "{name}");
    }
    // the hardware sampler feeds the CPU gauge: a real percentage
    let cpu = value("owncast_instance_cpu_usage");
    assert!((0.0..=100.0).contains(&cpu), "owncast_instance_cpu_usage {cpu}");
    // per-variant and per-GPU families have no series until a stream runs or a GPU is sampled
    assert!(!text.contains("castd_encode_speed{"), "{text}");
    assert!(scrape.docs.contains_key("owncast_instance_active_viewer_count"));
}

/// Found by schemathesis: a client's huge counts saturate (a debug build panicked on the overflow,
/// dropping the connection), and a later CMCD rendition change on the same client still counts.
#[test]
fn huge_client_counts_saturate_instead_of_overflowing() {
    let server = Server::start_with_env(&[], FAST);
    let huge = json!({ "errors": 0.0, "qualityVariantChanges": 4.2710951303677824e18 });
    assert_ok(post_from(&server, "/api/metrics/playback", "203.0.113.77", &huge), "legacy report");
    assert_ok(post_from(&server, "/api/metrics/playback", "203.0.113.77", &huge), "second legacy report");
    // Found by schemathesis: counts near f64::MAX from two clients summed to infinity, which the
    // video metrics then showed as null (JSON has no infinity).
    // Windows are half a second long, so on a busy box two reports can land in different windows:
    // post a pair again until one window holds both, and check on every read that no window says
    // null.
    let max = json!({ "errors": 1.7e308, "qualityVariantChanges": 1.7e308 });
    let saturated = |m: &Value, key: &str| {
        let points = m[key].as_array().cloned().unwrap_or_default();
        for p in &points {
            assert!(p["value"].as_f64().is_some_and(f64::is_finite), "{key} is a finite number: {m}");
        }
        points.iter().any(|p| p["value"].as_f64() == Some(f64::MAX))
    };
    let summed = server.wait_for(Duration::from_secs(20), || {
        for ip in ["203.0.113.78", "203.0.113.79"] {
            assert_ok(post_from(&server, "/api/metrics/playback", ip, &max), "a report near f64::MAX");
        }
        let m = server.admin_json("/api/admin/metrics/video");
        (saturated(&m, "errors") && saturated(&m, "qualityVariantChanges")).then_some(m)
    });
    assert!(summed.is_some(), "two reports near f64::MAX in one window saturate at f64::MAX");
    for br in ["br=3000", "br=0"] {
        let r = server
            .client
            .get(server.url(&format!("/api/metrics/cmcd?CMCD={}", url_encode(br))))
            .header("X-Forwarded-For", "203.0.113.77")
            .send()
            .expect("CMCD answered");
        assert_ok(r, br);
    }
    let r =
        server.client.post(server.url("/api/admin/webhooks/delete")).basic_auth("admin", Some(&server.admin_password));
    let r = r.json(&json!({ "id": 12.0 })).send().unwrap();
    assert_eq!(r.status(), 404, "a whole-number float id is read as the id");
}

/// A playlist request counts its viewer (Owncast's rule). `X-Castd-Edge` keeps a request out of the
/// count only with the cluster's edge mark, which a single box has none of: a viewer that sends the
/// header is still counted.
#[test]
fn a_playlist_request_counts_its_viewer_even_with_a_forged_edge_header() {
    let server = Server::start_with_env(&[], FAST);
    let hls_dir = server.data_dir.join("hls");
    std::fs::create_dir_all(&hls_dir).unwrap();
    std::fs::write(hls_dir.join("stream.m3u8"), "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n").unwrap();
    let get = |ip: &str, edge: Option<&str>| {
        let mut req = server
            .client
            .get(server.url("/hls/stream.m3u8"))
            .header("X-Forwarded-For", ip)
            .header("User-Agent", "player");
        if let Some(v) = edge {
            req = req.header("X-Castd-Edge", v);
        }
        let r = req.send().unwrap();
        assert_eq!(r.status().as_u16(), 200, "the playlist from disk");
    };
    get("203.0.113.20", None);
    get("203.0.113.21", Some("origin"));
    get("203.0.113.22", Some("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    let status = server.get_json("/api/status");
    assert_eq!(status["viewerCount"], json!(3), "every viewer counted: {status}");
}
