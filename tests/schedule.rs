//! Scheduled streams end to end against the real daemon: Owncast's validation rules and messages one
//! by one, one-off events and weekly series (RRULE with a TZID, across DST in Europe/Berlin and
//! America/New_York), cancelling one occurrence, the public schedule and its range rules, the
//! iCalendar feed parsed by Python's `icalendar` (tests/ical/requirements.txt, installed by
//! packaging/deps.sh), the settings with Owncast's allowed values, `/api/config` and `/api/status`
//! (`scheduledEvent`, `chatOpen`), the reminder: a post to a follower's inbox and the
//! SCHEDULED_EVENTS webhooks, all on loopback; the event's public page `/schedule/{id}` and its
//! calendar file; chat: opened before a scheduled stream, the notice when it never started, and the
//! sender told when chat is closed. (`tests/schedule_federation.rs` has the ActivityPub side.)

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Duration as Span, NaiveDate, Offset, SecondsFormat, TimeZone, Utc};
use common::fedactor::followed_by;
use common::receiver::Receiver;
use common::Server;
use serde_json::{json, Value};

fn enabled() -> Server {
    let s = Server::start();
    s.set("schedule/enabled", json!(true));
    s
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn in_minutes(m: i64) -> String {
    rfc(Utc::now() + Span::minutes(m))
}

fn save(s: &Server, body: Value) -> Value {
    let r = s.admin_post("/api/admin/schedule/event", &body);
    let status = r.status();
    let text = r.text().unwrap();
    assert!(status.is_success(), "saving {body}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// The 400 answer to `body` carries `msg` in Owncast's `error` and castd's `message`.
fn refused(s: &Server, path: &str, body: Value, msg: &str) {
    let r = s.admin_post(path, &body);
    assert_eq!(r.status().as_u16(), 400, "{path} {body}");
    let v: Value = r.json().unwrap();
    assert_eq!(v["error"], json!(msg), "{path} {body}: {v}");
    assert_eq!(v["message"], json!(msg));
    assert_eq!(v["success"], json!(false));
}

fn refused_prefix(s: &Server, path: &str, body: Value, prefix: &str) {
    let r = s.admin_post(path, &body);
    assert_eq!(r.status().as_u16(), 400, "{path} {body}");
    let v: Value = r.json().unwrap();
    let m = v["error"].as_str().unwrap_or_default();
    assert!(m.starts_with(prefix), "{body}: {v}");
}

fn event_by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().unwrap().iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("no {name} in {list}"))
}

const EVENT: &str = "/api/admin/schedule/event";
const DELETE: &str = "/api/admin/schedule/event/delete";
const PREVIEW: &str = "/api/admin/schedule/preview";

#[test]
fn admin_routes_need_the_admin() {
    let s = Server::start();
    for (method, path) in [("GET", "/api/admin/schedule"), ("POST", EVENT), ("POST", DELETE), ("POST", PREVIEW)] {
        let r = s.client.request(method.parse().unwrap(), s.url(path)).json(&json!({})).send().unwrap();
        assert_eq!(r.status().as_u16(), 401, "{method} {path}");
        assert!(r.headers().get("www-authenticate").unwrap().to_str().unwrap().starts_with("Basic realm="));
        let r = s.client.request("OPTIONS".parse().unwrap(), s.url(path)).send().unwrap();
        assert_eq!(r.status().as_u16(), 204, "OPTIONS {path}");
    }
    // and the public ones do not (an event page for no event is a 404 page)
    assert_eq!(s.get("/api/schedule").status().as_u16(), 200);
    assert_eq!(s.get("/schedule/abc123").status().as_u16(), 404);
    assert_eq!(s.get("/api/schedule.ics").status().as_u16(), 200);
}

#[test]
fn every_validation_rule_has_owncasts_message() {
    let s = enabled();
    let future = in_minutes(60);
    let rule = "DTSTART;TZID=Europe/Berlin:20300101T190000\nRRULE:FREQ=WEEKLY";
    // not JSON: the decoder's error
    let r =
        s.client.post(s.url(EVENT)).basic_auth("admin", Some(&s.admin_password)).body("{\"name\": ").send().unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().unwrap()["success"], json!(false));

    refused(&s, EVENT, json!({"name": "   ", "start": future}), "name is required");
    refused(&s, EVENT, json!({"start": future}), "name is required");
    for d in [0, -5, 10_081] {
        refused(
            &s,
            EVENT,
            json!({"name": "a", "start": future, "durationMinutes": d}),
            "durationMinutes is out of range",
        );
    }
    refused(
        &s,
        EVENT,
        json!({"name": "a", "start": future, "recurrence": rule}),
        "start and recurrence are mutually exclusive",
    );
    refused(&s, EVENT, json!({"name": "a"}), "start is required for a one-off event");
    refused(&s, EVENT, json!({"name": "a", "start": "2020-01-01T10:00:00Z"}), "start must be in the future");
    refused(&s, EVENT, json!({"name": "a", "start": future, "timezone": "Mars/Olympus"}), "unknown timezone");
    refused(&s, EVENT, json!({"name": "a", "recurrence": "  "}), "recurrence value is empty");
    refused(&s, EVENT, json!({"name": "a", "recurrence": "DTSTART:20300101T100000Z"}), "recurrence value has no RRULE");
    refused(&s, EVENT, json!({"name": "a", "recurrence": "RRULE:FREQ=DAILY"}), "recurrence value has no DTSTART");
    refused_prefix(
        &s,
        EVENT,
        json!({"name": "a", "recurrence": "DTSTART:tomorrow\nRRULE:FREQ=DAILY"}),
        "unable to parse recurrence value: ",
    );
    let today = Utc::now().format("%Y%m%d");
    refused(
        &s,
        EVENT,
        json!({"name": "a", "recurrence": format!("DTSTART:{today}T000000Z\nRRULE:FREQ=MINUTELY")}),
        "recurrence rule produces too many occurrences",
    );
    refused(
        &s,
        EVENT,
        json!({"name": "a", "recurrence": "DTSTART:19700101T000000Z\nRRULE:FREQ=MINUTELY"}),
        "recurrence rule is too dense to expand",
    );
    refused(&s, EVENT, json!({"id": "nope", "name": "a"}), "no scheduled event or series with that id");
    refused(&s, DELETE, json!({"id": "nope"}), "no scheduled event or series with that id");
    refused(&s, PREVIEW, json!({"recurrence": "RRULE:FREQ=DAILY"}), "recurrence value has no DTSTART");

    // the update rules
    let one = save(&s, json!({"name": "one-off", "start": future}));
    let id = event_by_name(&one["events"], "one-off")["id"].as_str().unwrap().to_string();
    refused(&s, EVENT, json!({"id": id, "timezone": "UTC"}), "timezone cannot be changed on an update");
    refused(
        &s,
        EVENT,
        json!({"id": id, "recurrence": rule}),
        "a one-off event cannot become a recurring series, create a new series instead",
    );
    refused(&s, EVENT, json!({"id": id, "start": "2020-01-01T00:00:00Z"}), "start must be in the future");
    refused(&s, EVENT, json!({"id": id, "name": ""}), "name is required");
    let all = save(&s, json!({"name": "weekly", "recurrence": rule}));
    let sid = all["series"][0]["id"].as_str().unwrap().to_string();
    refused(
        &s,
        EVENT,
        json!({"id": sid, "start": future}),
        "a recurring series has no single start, edit its recurrence instead",
    );
    // validation precedes writes: nothing changed
    let after = s.admin_json("/api/admin/schedule");
    assert_eq!(event_by_name(&after["events"], "one-off")["startTime"], json!(future));
    assert_eq!(after["series"].as_array().unwrap().len(), 1);

    // the public range rules
    let get = |q: &str| s.get(&format!("/api/schedule?{q}"));
    let r = get("from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z");
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().unwrap()["error"], "to must be after from");
    let r = get("from=2030-01-01T00:00:00Z&to=2031-01-03T00:00:00Z");
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().unwrap()["error"], "requested schedule range is too large");
    assert_eq!(get("from=yesterday").status().as_u16(), 400);
    assert_eq!(get("to=").status().as_u16(), 400, "an empty time is not the default");
    assert_eq!(get("from=2030-01-01T00:00:00Z&to=2030-12-31T00:00:00Z").status().as_u16(), 200);
}

#[test]
fn one_off_events_are_created_moved_cancelled_and_deleted() {
    let s = Server::start();
    let start = in_minutes(120);
    let all = save(
        &s,
        json!({"name": "  Launch  ", "description": "d", "start": start, "timezone": "America/New_York",
               "reminderMessage": "  come  "}),
    );
    let e = event_by_name(&all["events"], "Launch").clone();
    assert_eq!(e["startTime"], json!(start));
    assert_eq!(e["durationMinutes"], 60, "the default duration");
    assert_eq!(e["timezone"], "America/New_York");
    assert_eq!(e["status"], "scheduled");
    assert_eq!(e["reminderMessage"], "come");
    assert!(e.get("seriesId").is_none(), "a one-off has no seriesId: {e}");
    let id = e["id"].as_str().unwrap().to_string();

    // disabled: the public schedule is empty and the feed has no event
    assert_eq!(s.get_json("/api/schedule"), json!([]));
    assert!(!s.get("/api/schedule.ics").text().unwrap().contains("BEGIN:VEVENT"));
    s.set("schedule/enabled", json!(true));
    let public = s.get_json("/api/schedule");
    assert_eq!(public.as_array().unwrap().len(), 1);
    assert_eq!(public[0]["id"], json!(id));

    // update: omitted fields keep their values; start moves it
    let moved = in_minutes(180);
    let all = save(&s, json!({"id": id, "start": moved, "durationMinutes": 90}));
    let e = &all["events"][0];
    assert_eq!((e["name"].clone(), e["description"].clone()), (json!("Launch"), json!("d")));
    assert_eq!((e["startTime"].clone(), e["durationMinutes"].clone()), (json!(moved), json!(90)));
    assert_eq!(e["timezone"], "America/New_York");

    // cancel keeps the row, shown as cancelled publicly; delete removes it
    let all: Value = s.admin_post(DELETE, &json!({"id": id, "cancel": true})).json().unwrap();
    assert_eq!(all["events"][0]["status"], "cancelled");
    assert_eq!(s.get_json("/api/schedule")[0]["status"], "cancelled");
    assert!(s.get("/api/schedule.ics").text().unwrap().contains("STATUS:CANCELLED"));
    let all: Value = s.admin_post(DELETE, &json!({"id": id})).json().unwrap();
    assert_eq!(all["events"], json!([]));
    assert_eq!(s.get_json("/api/schedule"), json!([]));
}

/// The next day (local, in `tz`) at least 15 days away on which the zone's UTC offset changes.
fn next_transition(tz: chrono_tz::Tz) -> NaiveDate {
    let offset = |d: NaiveDate| {
        tz.from_local_datetime(&d.and_hms_opt(12, 0, 0).unwrap()).single().unwrap().offset().fix().local_minus_utc()
    };
    let mut day = Utc::now().date_naive() + Span::days(15);
    for _ in 0..400 {
        if offset(day) != offset(day - Span::days(1)) {
            return day;
        }
        day += Span::days(1);
    }
    panic!("{tz} has no DST change within a year");
}

#[test]
fn weekly_series_keep_local_time_across_dst_in_berlin_and_new_york() {
    let s = Server::start();
    for tz in [chrono_tz::Europe::Berlin, chrono_tz::America::New_York] {
        // weekly at 19:00 local, starting two weeks before the zone's next DST change
        let change = next_transition(tz);
        let first = change - Span::days(14);
        let rule = format!("DTSTART;TZID={}:{}T190000\nRRULE:FREQ=WEEKLY;COUNT=5", tz.name(), first.format("%Y%m%d"));
        let r = s.admin_post(PREVIEW, &json!({"recurrence": rule}));
        assert!(r.status().is_success());
        let got: Vec<String> = r.json::<Value>().unwrap()["occurrences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let expected: Vec<String> = (0..5)
            .map(|w| {
                let local = (first + Span::weeks(w)).and_hms_opt(19, 0, 0).unwrap();
                rfc(tz.from_local_datetime(&local).single().unwrap().with_timezone(&Utc))
            })
            .collect();
        assert_eq!(got, expected, "{rule}");
        // the UTC time really moves by an hour at the change, while the local time stays 19:00
        assert_ne!(&got[1][11..13], &got[2][11..13], "{tz}: {got:?}");
    }
    // a rule without occurrences in the next year previews to []
    let r = s.admin_post(PREVIEW, &json!({"recurrence": "DTSTART:20200101T100000Z\nRRULE:FREQ=DAILY;COUNT=2"}));
    assert_eq!(r.json::<Value>().unwrap(), json!({"occurrences": []}));
}

#[test]
fn series_occurrences_can_be_cancelled_one_by_one_and_the_series_edited_paused_deleted() {
    let s = enabled();
    let berlin = chrono_tz::Europe::Berlin;
    let first = (Utc::now().with_timezone(&berlin) + Span::days(1)).date_naive();
    let rule = format!("DTSTART;TZID=Europe/Berlin:{}T190000\nRRULE:FREQ=WEEKLY", first.format("%Y%m%d"));
    let all = save(&s, json!({"name": "Weekly", "recurrence": rule, "durationMinutes": 45, "description": "d"}));
    let series = &all["series"][0];
    assert_eq!(series["active"], true);
    assert_eq!(series["recurrence"], json!(rule));
    let sid = series["id"].as_str().unwrap().to_string();
    let events = all["events"].as_array().unwrap().clone();
    // 30 days ahead: 4 or 5 weekly occurrences, each 19:00 in Berlin whatever the offset
    assert!((4..=5).contains(&events.len()), "{events:?}");
    for e in &events {
        assert_eq!(e["seriesId"], json!(sid));
        assert_eq!(e["timezone"], "Europe/Berlin");
        assert_eq!(e["durationMinutes"], 45);
        let t: DateTime<Utc> = e["startTime"].as_str().unwrap().parse().unwrap();
        assert_eq!(t.with_timezone(&berlin).format("%H:%M").to_string(), "19:00", "{e}");
    }
    let (a, b) = (events[0]["id"].as_str().unwrap().to_string(), events[1]["id"].as_str().unwrap().to_string());
    // cancel one occurrence, delete another
    s.admin_post(DELETE, &json!({"id": a, "cancel": true}));
    s.admin_post(DELETE, &json!({"id": b}));
    // editing the series rewrites the future occurrences, but neither slot comes back
    let all = save(&s, json!({"id": sid, "name": "Weekly show"}));
    assert_eq!(all["series"][0]["name"], "Weekly show");
    assert_eq!(all["series"][0]["description"], "d", "omitted fields are kept");
    let before = events.len();
    let events = all["events"].as_array().unwrap();
    assert_eq!(events.len(), before - 1, "the deleted occurrence only is gone");
    let by_id = |id: &str| events.iter().find(|e| e["id"] == id).cloned();
    assert_eq!(by_id(&a).unwrap()["status"], "cancelled");
    assert!(by_id(&b).is_none(), "a deleted occurrence is not created again");
    assert!(events.iter().filter(|e| e["status"] == "scheduled").all(|e| e["name"] == "Weekly show"));
    // after a background tick nothing comes back either
    std::thread::sleep(Duration::from_secs(11));
    let now = s.admin_json("/api/admin/schedule");
    assert_eq!(now["events"].as_array().unwrap().len(), events.len());

    // pause (cancel the series) then delete it
    let all: Value = s.admin_post(DELETE, &json!({"id": sid, "cancel": true})).json().unwrap();
    assert_eq!(all["series"][0]["active"], false);
    let all: Value = s.admin_post(DELETE, &json!({"id": sid})).json().unwrap();
    assert_eq!(all["series"], json!([]));
    // Its future occurrences go with it, but the cancelled one stays, cancelled (as in Owncast), in
    // the answer, the admin list and the public schedule.
    let kept = |list: &Value| -> Vec<(String, String)> {
        let list = list.as_array().unwrap_or_else(|| panic!("not a list: {list}"));
        list.iter()
            .map(|e| (e["id"].as_str().unwrap().to_string(), e["status"].as_str().unwrap().to_string()))
            .collect()
    };
    let cancelled = vec![(a.clone(), "cancelled".to_string())];
    assert_eq!(kept(&all["events"]), cancelled, "{all}");
    assert_eq!(all["events"][0]["seriesId"], json!(sid), "it still names its series");
    assert_eq!(kept(&s.admin_json("/api/admin/schedule")["events"]), cancelled);
    assert_eq!(kept(&s.get_json("/api/schedule")), cancelled);
}

const ICAL_SCRIPT: &str = r#"
import json, sys
from icalendar import Calendar
cal = Calendar.from_ical(sys.stdin.buffer.read())
out = {"prodid": str(cal["PRODID"]), "version": str(cal["VERSION"]), "method": str(cal["METHOD"]), "events": []}
for ev in cal.walk("VEVENT"):
    out["events"].append({
        "uid": str(ev["UID"]),
        "summary": str(ev["SUMMARY"]),
        "description": str(ev.get("DESCRIPTION", "")),
        "start": ev.decoded("DTSTART").isoformat(),
        "end": ev.decoded("DTEND").isoformat(),
        "status": str(ev["STATUS"]),
    })
print(json.dumps(out))
"#;

fn parse_with_icalendar(ics: &[u8]) -> Value {
    let venv = std::env::var("CASTD_ICAL_VENV").unwrap_or_else(|_| "/opt/castd-ical-venv".into());
    let python = format!("{venv}/bin/python");
    let mut child = Command::new(&python)
        .args(["-c", ICAL_SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e} (packaging/deps.sh installs icalendar there)"));
    child.stdin.take().unwrap().write_all(ics).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "icalendar refused the feed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_ics_feed_is_valid_icalendar() {
    let s = enabled();
    let long = format!("Über café, at 7; bring \\snacks\\\nSecond line. {}", "Ünïcödé text that goes on. ".repeat(8));
    let start = Utc::now() + Span::days(2);
    let start = DateTime::from_timestamp(start.timestamp(), 0).unwrap();
    save(
        &s,
        json!({"name": "Talk, with; punctuation", "description": long, "start": rfc(start), "durationMinutes": 30,
               "timezone": "Asia/Tokyo"}),
    );
    let later = in_minutes(60 * 24 * 3);
    let all = save(&s, json!({"name": "Cancelled one", "start": later}));
    let cid = event_by_name(&all["events"], "Cancelled one")["id"].as_str().unwrap().to_string();
    s.admin_post(DELETE, &json!({"id": cid, "cancel": true}));

    let r = s.get("/api/schedule.ics");
    assert_eq!(r.headers()["content-type"], "text/calendar; charset=utf-8");
    assert!(r.headers()["cache-control"].to_str().unwrap().contains("no-cache"));
    let body = r.bytes().unwrap().to_vec();
    let text = String::from_utf8(body.clone()).unwrap();
    // CRLF only, every physical line at most 75 octets, continuation lines start with a space
    assert!(text.ends_with("\r\n"));
    assert!(!text.replace("\r\n", "").contains('\n'), "a bare LF");
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert!(lines.iter().all(|l| l.len() <= 75), "a line over 75 octets");
    assert!(lines.iter().any(|l| l.starts_with(' ')), "the long description is folded");
    assert!(text.contains("REFRESH-INTERVAL;VALUE=DURATION:PT15M\r\n"));

    let cal = parse_with_icalendar(&body);
    assert_eq!(cal["prodid"], "-//Owncast//Schedule//EN");
    assert_eq!(cal["version"], "2.0");
    assert_eq!(cal["method"], "PUBLISH");
    let events = cal["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    let talk = events.iter().find(|e| e["summary"] == "Talk, with; punctuation").unwrap();
    assert_eq!(talk["description"], json!(long.trim()), "escaping and folding round-trip (descriptions are trimmed)");
    assert_eq!(talk["start"], json!(start.format("%Y-%m-%dT%H:%M:%S+00:00").to_string()));
    assert_eq!(talk["end"], json!((start + Span::minutes(30)).format("%Y-%m-%dT%H:%M:%S+00:00").to_string()));
    assert_eq!(talk["status"], "CONFIRMED");
    let public = s.get_json("/api/schedule");
    let id = event_by_name(&public, "Talk, with; punctuation")["id"].as_str().unwrap().to_string();
    assert_eq!(talk["uid"], json!(format!("{id}@owncast")));
    let cancelled = events.iter().find(|e| e["summary"] == "Cancelled one").unwrap();
    assert_eq!(cancelled["status"], "CANCELLED");
    // UIDs are stable between fetches
    let again = parse_with_icalendar(&s.get("/api/schedule.ics").bytes().unwrap());
    let uids = |c: &Value| {
        let mut v: Vec<String> =
            c["events"].as_array().unwrap().iter().map(|e| e["uid"].as_str().unwrap().to_string()).collect();
        v.sort();
        v
    };
    assert_eq!(uids(&cal), uids(&again));
    // disabled: still a valid, empty calendar
    s.set("schedule/enabled", json!(false));
    let empty = parse_with_icalendar(&s.get("/api/schedule.ics").bytes().unwrap());
    assert_eq!(empty["events"], json!([]));
}

#[test]
fn settings_take_owncasts_values_and_messages() {
    let s = Server::start();
    let post = |name: &str, value: Value| {
        let r = s.admin_post(&format!("/api/admin/config/schedule/{name}"), &json!({ "value": value }));
        let status = r.status().as_u16();
        (status, r.json::<Value>().unwrap())
    };
    for (name, value, message) in [
        ("enabled", json!(true), "schedule feature updated"),
        ("showcountdown", json!(true), "schedule countdown setting updated"),
        ("chatopenminutes", json!(30), "schedule chat open setting updated"),
        ("firstreminderminutes", json!(1440), "schedule reminder setting updated"),
        ("secondreminderminutes", json!(0), "schedule reminder setting updated"),
        ("remindermessage", json!("  See you soon  "), "schedule reminder message updated"),
    ] {
        assert_eq!(post(name, value), (200, json!({"success": true, "message": message})), "{name}");
    }
    for (name, value, message) in [
        ("enabled", json!("yes"), "value must be a boolean"),
        ("showcountdown", json!(1), "value must be a boolean"),
        ("chatopenminutes", json!(7), "value must be 0, 5, 10, 30, or 60 minutes"),
        ("chatopenminutes", json!(2.5), "value must be a whole number of minutes"),
        ("chatopenminutes", json!("ten"), "value must be a whole number of minutes"),
        ("firstreminderminutes", json!(45), "value must be 0, 15, 30, 60, 120, or 1440 minutes"),
        ("secondreminderminutes", json!(5), "value must be 0, 15, 30, 60, 120, or 1440 minutes"),
        ("remindermessage", json!(5), "value must be a string"),
    ] {
        let (status, body) = post(name, value.clone());
        assert_eq!(status, 400, "{name} {value}");
        assert_eq!(body["success"], false);
        assert_eq!(body["message"], message, "{name} {value}");
    }
    let cfg = s.get_json("/api/config");
    assert_eq!(cfg["schedule"], json!({"enabled": true, "showCountdown": true, "chatOpenMinutesBefore": 30}));
    let admin = s.admin_json("/api/admin/serverconfig");
    assert_eq!(
        admin["schedule"],
        json!({"enabled": true, "showCountdown": true, "chatOpenMinutesBefore": 30,
               "reminderMessage": "See you soon", "firstReminderMinutes": 1440, "secondReminderMinutes": 0})
    );
    // Owncast's defaults on a fresh server
    let fresh = Server::start();
    assert_eq!(
        fresh.admin_json("/api/admin/serverconfig")["schedule"],
        json!({"enabled": false, "showCountdown": false, "chatOpenMinutesBefore": 0,
               "reminderMessage": "", "firstReminderMinutes": 120, "secondReminderMinutes": 15})
    );
}

#[test]
fn status_shows_the_next_event_and_whether_chat_is_open() {
    let s = Server::start();
    let soon = in_minutes(8);
    save(&s, json!({"name": "Later", "start": in_minutes(600)}));
    save(&s, json!({"name": "Soon", "start": soon, "description": "first", "durationMinutes": 20}));
    assert!(s.get_json("/api/status").get("scheduledEvent").is_none(), "omitted while the schedule is off");
    s.set("schedule/enabled", json!(true));
    let st = s.get_json("/api/status");
    let ev = &st["scheduledEvent"];
    assert_eq!(ev["name"], "Soon", "the earliest upcoming event: {st}");
    assert_eq!(ev["startTime"], json!(soon));
    assert_eq!(ev["durationMinutes"], 20);
    assert_eq!(ev["description"], "first");
    assert_eq!(ev["chatOpen"], false, "no pre-event chat by default");
    s.set("schedule/chatopenminutes", json!(10));
    assert_eq!(s.get_json("/api/status")["scheduledEvent"]["chatOpen"], true, "8 minutes before, window 10");
    s.set("schedule/chatopenminutes", json!(5));
    assert_eq!(s.get_json("/api/status")["scheduledEvent"]["chatOpen"], false, "8 minutes before, window 5");
    // cancelling it moves the status to the next one
    let id = event_by_name(&s.get_json("/api/schedule"), "Soon")["id"].clone();
    s.admin_post(DELETE, &json!({"id": id, "cancel": true}));
    assert_eq!(s.get_json("/api/status")["scheduledEvent"]["name"], "Later");
}

#[test]
fn reminders_reach_followers_and_webhooks_fire() {
    let s = Server::start_with_env(&["--federation-allow-http-loopback"], &[("CASTD_FEDERATION_RETRY_BASE_MS", "300")]);
    let alice = followed_by(&s, "alice");
    let hook = Receiver::start(&[]);
    let r = s.admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": ["SCHEDULED_EVENTS"]}));
    assert!(r.status().is_success(), "SCHEDULED_EVENTS is subscribable");

    s.set("schedule/remindermessage", json!("Starting soon, come along!"));
    s.set("schedule/firstreminderminutes", json!(15));
    let all = save(&s, json!({"name": "Morning show", "start": in_minutes(8), "timezone": "Europe/Berlin"}));
    let id = all["events"][0]["id"].as_str().unwrap().to_string();
    // nothing while the schedule is off
    std::thread::sleep(Duration::from_secs(2));
    assert!(hook.all().is_empty(), "webhooks wait for the schedule to be on");
    s.set("schedule/enabled", json!(true));

    let post = alice
        .wait_for(Duration::from_secs(20), |v| {
            v["type"] == "Create" && v["object"]["content"].as_str().unwrap_or("").contains("Starting soon")
        })
        .expect("the reminder reaches the follower");
    let content = post.json()["object"]["content"].as_str().unwrap().to_string();
    assert!(content.contains("Morning show"), "{content}");
    assert!(content.contains(&format!("/schedule/{id}")), "{content}");

    let of = |action: &'static str| {
        move |r: &common::receiver::Received| {
            r.json()["type"] == "SCHEDULED_EVENTS" && r.json()["eventData"]["action"] == action
        }
    };
    let warning = hook.wait_for(Duration::from_secs(20), of("10-minute-warning")).expect("the 10-minute warning");
    let data = &warning.json()["eventData"];
    assert_eq!(data["event"]["id"], json!(id));
    assert_eq!(data["serverURL"], json!(s.base));
    assert!(data["timestamp"].is_string() && data["status"]["online"] == false);
    let reminder = hook.wait_for(Duration::from_secs(20), of("reminder")).expect("the reminder webhook");
    assert!(reminder.json()["eventData"]["message"].as_str().unwrap().starts_with("Starting soon, come along!\n\n"));
    // each goes out once
    std::thread::sleep(Duration::from_secs(11));
    let count = |a: &str| hook.all().iter().filter(|r| r.json()["eventData"]["action"] == a).count();
    assert_eq!((count("10-minute-warning"), count("reminder")), (1, 1));
}

#[test]
fn offline_chat_opens_before_a_scheduled_stream() {
    use common::chatclient::{join, next_where, say};
    use common::media::{publish, wait_exit};
    // Owncast's rule with a 1 s grace instead of 5 minutes: once the stream has been offline longer, viewers'
    // messages are ignored, unless a scheduled stream opened chat.
    let s = Server::start_with_env(&["--streamkey", "schedule-chat-key"], &[("CASTD_CHAT_OFFLINE_GRACE_MS", "1000")]);
    let mut viewer = join(&s, "viewer");
    let mut listener = join(&s, "listener");
    let heard = |ws: &mut common::chatclient::Ws, body: &str| {
        next_where(ws, Duration::from_secs(3), |e| {
            e["type"] == "CHAT" && e["body"].as_str().unwrap_or("").contains(body)
        })
        .is_some()
    };
    say(&mut viewer.ws, "before any stream");
    assert!(heard(&mut listener.ws, "before any stream"), "a server that never streamed keeps chat open");

    let mut ff = publish(&s, "schedule-chat-key", "320x240", 3);
    s.wait_for(Duration::from_secs(20), || s.get_json("/api/status")["online"].as_bool().filter(|o| *o))
        .expect("online");
    wait_exit(&mut ff, Duration::from_secs(30)).expect("ffmpeg finishes");
    s.wait_for(Duration::from_secs(30), || (s.get_json("/api/status")["online"] == false).then_some(()))
        .expect("offline");
    std::thread::sleep(Duration::from_millis(1500));
    say(&mut viewer.ws, "after the grace");
    assert!(!heard(&mut listener.ws, "after the grace"), "offline for longer than the grace: ignored");
    let told = next_where(&mut viewer.ws, Duration::from_secs(3), |e| {
        e["type"] == "CHAT_ACTION"
            && e["body"].as_str().unwrap_or("").contains("Chat is closed while the stream is offline")
    });
    assert!(told.is_some(), "the sender is told why");

    // a stream scheduled in 8 minutes with chat opening 10 minutes before
    s.set("schedule/enabled", json!(true));
    s.set("schedule/chatopenminutes", json!(10));
    save(&s, json!({"name": "Soon", "start": in_minutes(8)}));
    assert_eq!(s.get_json("/api/status")["scheduledEvent"]["chatOpen"], true);
    say(&mut viewer.ws, "chat is open early");
    assert!(heard(&mut listener.ws, "chat is open early"), "the scheduled stream opened chat");
    // a shorter window closes it again
    s.set("schedule/chatopenminutes", json!(5));
    say(&mut viewer.ws, "too early now");
    assert!(!heard(&mut listener.ws, "too early now"));
}

#[test]
fn the_started_webhook_fires_at_the_start_and_the_title_becomes_the_event_name() {
    let s = enabled();
    let hook = Receiver::start(&[]);
    let r = s.admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": ["SCHEDULED_EVENTS"]}));
    assert!(r.status().is_success());
    let start = Utc::now() + Span::seconds(12);
    let all = save(&s, json!({"name": "Right now", "start": rfc(start), "durationMinutes": 30}));
    let id = all["events"][0]["id"].clone();
    let started = hook
        .wait_for(Duration::from_secs(40), |r| r.json()["eventData"]["action"] == "started")
        .expect("the started webhook");
    let received_at = Utc::now();
    assert!(received_at >= start, "not before the start");
    assert_eq!(started.json()["eventData"]["event"]["id"], id);
    assert_eq!(s.get_json("/api/status")["streamTitle"], "Right now");
    // the event runs: still the status' event, and no end yet
    assert_eq!(s.get_json("/api/status")["scheduledEvent"]["id"], id);
    assert!(hook.all().iter().all(|r| r.json()["eventData"]["action"] != "ended"));
}

#[test]
fn the_event_page_shows_the_event_with_a_countdown_and_add_to_calendar() {
    let s = Server::start();
    s.set("name", json!("Page Cast"));
    s.set("serverurl", json!("https://live.example.com"));
    let start = DateTime::from_timestamp((Utc::now() + Span::minutes(90)).timestamp(), 0).unwrap();
    let all = save(
        &s,
        json!({"name": "Launch <party>", "description": "We *launch* it.", "start": rfc(start),
               "timezone": "America/New_York", "durationMinutes": 45}),
    );
    let id = all["events"][0]["id"].as_str().unwrap().to_string();
    let path = format!("/schedule/{id}");
    assert_eq!(s.get(&path).status().as_u16(), 404, "no page while the schedule is off");
    s.set("schedule/enabled", json!(true));

    let r = s.get(&path);
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = r.text().unwrap();
    for want in [
        "<h1 id=\"event-name\">Launch &lt;party&gt;</h1>".to_string(),
        "<meta property=\"og:title\" content=\"Launch &lt;party&gt;\">".to_string(),
        "<meta property=\"og:description\" content=\"We *launch* it.\">".to_string(),
        format!("<meta property=\"og:url\" content=\"https://live.example.com/schedule/{id}\">"),
        "<meta property=\"og:site_name\" content=\"Page Cast\">".to_string(),
        "<em>launch</em>".to_string(),
        "45 minutes".to_string(),
        format!("data-start=\"{}\"", rfc(start)),
        "id=\"event-countdown\"".to_string(),
        format!("href=\"/schedule/{id}/calendar.ics\""),
        "href=\"/api/schedule.ics\"".to_string(),
    ] {
        assert!(html.contains(&want), "{want} missing from:\n{html}");
    }
    let local = start.with_timezone(&chrono_tz::America::New_York);
    assert!(html.contains(&local.format("%A, %B %-d, %Y at %-I:%M %p %Z").to_string()), "the event's zone");

    // Add to calendar: this one event, as valid iCalendar.
    let r = s.get(&format!("{path}/calendar.ics"));
    assert_eq!(r.headers()["content-type"], "text/calendar; charset=utf-8");
    let cal = parse_with_icalendar(&r.bytes().unwrap());
    let events = cal["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["uid"], json!(format!("{id}@owncast")));
    assert_eq!(events[0]["summary"], "Launch <party>");

    // Cancelled: the page says so and shows no countdown; unknown ids are 404 pages.
    s.admin_post(DELETE, &json!({"id": id, "cancel": true}));
    let html = s.get(&path).text().unwrap();
    assert!(html.contains("This stream was cancelled.") && !html.contains("id=\"event-countdown\""), "{html}");
    let r = s.client.get(s.url("/schedule/nosuchevent")).header("accept", "text/html").send().unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(r.text().unwrap().contains("No such scheduled stream"), "a page for a browser");
    let r = s.get("/schedule/nosuchevent");
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.json::<Value>().unwrap()["success"], json!(false), "JSON for other clients");
}

#[test]
fn chat_hears_when_a_scheduled_stream_that_opened_it_never_started() {
    use common::chatclient::{join, next_where};
    let s = enabled();
    s.set("schedule/chatopenminutes", json!(10));
    let mut listener = join(&s, "listener");
    // An event that started 9 minutes ago (the API takes only future starts): written into the
    // daemon's database, as the schedule would have it by then.
    let db = rusqlite::Connection::open(s.data_dir.join("castd.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let start = Utc::now() - Span::minutes(9) - Span::seconds(1);
    let ts = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    db.execute(
        "INSERT INTO stream_events (id, name, description, reminder_message, start_time, duration_minutes, timezone,
           status, created_at, updated_at) VALUES ('noshow1', 'No show', '', '', ?1, 60, 'UTC', 'scheduled', ?2, ?2)",
        [ts(start), ts(Utc::now())],
    )
    .unwrap();
    drop(db);
    let notice = next_where(&mut listener.ws, Duration::from_secs(25), |e| e["type"] == "SYSTEM")
        .expect("the never-started notice");
    assert_eq!(
        notice["body"].as_str().unwrap().trim(),
        "<p>This scheduled live stream never started, so chat is being turned off. Thanks for coming!</p>"
    );
    assert_eq!(notice["user"]["displayName"], "castd");
    // once
    assert!(next_where(&mut listener.ws, Duration::from_secs(12), |e| e["type"] == "SYSTEM").is_none());
}
