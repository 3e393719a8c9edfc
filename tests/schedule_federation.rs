//! Scheduled streams on the Fediverse and in notifications, end to end against the real daemon and an
//! in-test signed Fediverse account (`common::fedactor`) on loopback: the ActivityPub `Event` of a
//! scheduled stream (Create, Update on a change and on a cancellation, Delete with a Tombstone, served
//! at `/federation/event/<id>`), the reminder as a `Create{Note}` in reply to it, the delivery
//! queue's ordering and coalescing (an inbox that was down gets the Create, then only the newest
//! Update), a series' announced occurrences updated or deleted when the series changes, and the
//! reminder by browser push and Discord.

mod common;

use std::time::Duration;

use chrono::{Duration as Span, SecondsFormat, Utc};
use common::fedactor::{followed_by, FedActor};
use common::push::push_subscription;
use common::receiver::Receiver;
use common::Server;
use serde_json::{json, Value};

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
const EVENT: &str = "/api/admin/schedule/event";
const DELETE: &str = "/api/admin/schedule/event/delete";

fn in_minutes(m: i64) -> String {
    (Utc::now() + Span::minutes(m)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn save(s: &Server, body: Value) -> Value {
    let r = s.admin_post(EVENT, &body);
    let status = r.status();
    let text = r.text().unwrap();
    assert!(status.is_success(), "saving {body}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// A federating server with the schedule on, and `alice` following it.
fn federating_server() -> (Server, FedActor) {
    let s = Server::start_with_env(&["--federation-allow-http-loopback"], &[("CASTD_FEDERATION_RETRY_BASE_MS", "300")]);
    let alice = followed_by(&s, "alice");
    s.set("schedule/enabled", json!(true));
    (s, alice)
}

/// The activities `alice` received, in arrival order.
fn activities(alice: &FedActor) -> Vec<Value> {
    alice.received().iter().map(|r| r.json()).collect()
}

fn wait(alice: &FedActor, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    alice
        .wait_for(Duration::from_secs(25), f)
        .unwrap_or_else(|| panic!("{what}; received: {:#?}", activities(alice)))
        .json()
}

fn get_ap(s: &Server, path: &str) -> reqwest::blocking::Response {
    s.client.get(s.url(path)).header("accept", "application/activity+json").send().unwrap()
}

#[test]
fn an_event_is_announced_reminded_updated_cancelled_and_deleted_on_the_fediverse() {
    let (s, alice) = federating_server();
    s.set("schedule/remindermessage", json!("Starting soon, come along!"));
    s.set("schedule/firstreminderminutes", json!(15));
    let start = in_minutes(8);
    let all = save(
        &s,
        json!({"name": "Morning show", "description": "Bring coffee.", "start": start, "durationMinutes": 90,
               "timezone": "Europe/Berlin"}),
    );
    let id = all["events"][0]["id"].as_str().unwrap().to_string();
    let iri = format!("{}/federation/event/{id}", s.base);
    let actor = format!("{}/federation/user/streamer", s.base);

    // Create{Event}
    let create = wait(&alice, "the Create of the Event", |v| v["type"] == "Create" && v["object"]["type"] == "Event");
    assert_eq!(create["id"], json!(format!("{iri}/activity/create")));
    assert_eq!(create["actor"], json!(actor));
    let ev = &create["object"];
    assert_eq!(ev["id"], json!(iri));
    assert_eq!(ev["name"], "Morning show");
    assert_eq!(ev["content"], "<p>Bring coffee.</p>");
    assert_eq!(ev["startTime"], json!(start));
    let end = chrono::DateTime::parse_from_rfc3339(&start).unwrap() + Span::minutes(90);
    assert_eq!(ev["endTime"], json!(end.with_timezone(&Utc).to_rfc3339_opts(SecondsFormat::Secs, true)));
    assert_eq!(ev["duration"], "PT90M");
    assert_eq!(ev["timezone"], "Europe/Berlin");
    assert_eq!(ev["url"], json!(format!("{}/schedule/{id}", s.base)));
    assert_eq!(ev["attributedTo"], json!(actor));
    assert_eq!(ev["eventStatus"], "EventScheduled");
    assert_eq!((ev["joinMode"].clone(), ev["displayEndTime"].clone()), (json!("none"), json!(true)));
    assert_eq!(ev["location"]["type"], "VirtualLocation");
    assert!(ev["@context"].as_array().unwrap().contains(&json!("https://w3id.org/fep/8a8e")), "{ev}");
    assert_eq!(ev["to"], json!([PUBLIC]));
    assert_eq!(ev["cc"], json!([format!("{actor}/followers")]));

    // The reminder: a Create{Note} in reply to the Event, after it.
    let reminder =
        wait(&alice, "the reminder Note", |v| v["type"] == "Create" && v["object"]["inReplyTo"] == json!(iri));
    let note = &reminder["object"];
    assert_eq!(note["type"], "Note");
    assert_eq!(note["id"], json!(format!("{iri}/reminder/1")));
    let content = note["content"].as_str().unwrap();
    assert!(content.starts_with("<p>Starting soon, come along!</p>"), "{content}");
    assert!(content.contains("Morning show") && content.contains(&format!("/schedule/{id}")), "{content}");
    let order: Vec<Value> = activities(&alice).iter().map(|a| a["id"].clone()).collect();
    let pos = |x: &Value| order.iter().position(|o| o == x).unwrap();
    assert!(pos(&create["id"]) < pos(&reminder["id"]), "the Event before its reminder: {order:?}");

    // Served at its IRI; a browser goes to the event's page.
    let r = get_ap(&s, &format!("/federation/event/{id}"));
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().unwrap()["name"], "Morning show");
    let r = get_ap(&s, &format!("/federation/event/{id}/reminder/1"));
    assert_eq!(r.json::<Value>().unwrap()["inReplyTo"], json!(iri));
    let browser = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = browser.get(s.url(&format!("/federation/event/{id}"))).send().unwrap();
    assert_eq!(r.headers()["location"].to_str().unwrap(), format!("/schedule/{id}"));

    // A change: Update number 1 with the new name.
    save(&s, json!({"id": id, "name": "Evening show"}));
    let update = wait(&alice, "the Update", |v| v["type"] == "Update");
    assert_eq!(update["id"], json!(format!("{iri}/activity/update/1")));
    assert_eq!(update["object"]["name"], "Evening show");
    assert_eq!(update["object"]["published"], ev["published"], "published stays the first announcement's");
    assert_eq!(get_ap(&s, &format!("/federation/event/{id}")).json::<Value>().unwrap()["name"], "Evening show");

    // Cancelled: Update number 2 with the cancelled status.
    s.admin_post(DELETE, &json!({"id": id, "cancel": true}));
    let cancelled =
        wait(&alice, "the cancellation", |v| v["type"] == "Update" && v["id"].as_str().unwrap().ends_with("/2"));
    assert_eq!(cancelled["object"]["eventStatus"], "EventCancelled");

    // Deleted: a Delete of a Tombstone, and the IRI answers 410 with it.
    s.admin_post(DELETE, &json!({"id": id}));
    let delete = wait(&alice, "the Delete", |v| v["type"] == "Delete");
    assert_eq!(delete["id"], json!(format!("{iri}/activity/delete")));
    assert_eq!(delete["object"]["type"], "Tombstone");
    assert_eq!(delete["object"]["formerType"], "Event");
    assert_eq!(delete["object"]["id"], json!(iri));
    let r = get_ap(&s, &format!("/federation/event/{id}"));
    assert_eq!(r.status().as_u16(), 410);
    assert_eq!(r.json::<Value>().unwrap()["type"], "Tombstone");
    // each went out once
    std::thread::sleep(Duration::from_secs(11));
    let kinds: Vec<String> = activities(&alice)
        .iter()
        .filter(|a| a["type"] != "Accept")
        .map(|a| a["type"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds, ["Create", "Create", "Update", "Update", "Delete"], "{:#?}", activities(&alice));
}

#[test]
fn an_inbox_that_was_down_gets_the_create_first_then_only_the_newest_update() {
    let (s, alice) = federating_server();
    *alice.inbox_down.lock().unwrap() = true;
    let all = save(&s, json!({"name": "Take 1", "start": in_minutes(120)}));
    let id = all["events"][0]["id"].as_str().unwrap().to_string();
    // Let the Create be queued and fail at least once, then change the event twice.
    s.wait_for(Duration::from_secs(25), || s.log_text().contains("delivery failed, will retry").then_some(()))
        .expect("the Create is tried while the inbox is down");
    // (each save wakes the schedule at once: its Update is queued behind the Create)
    save(&s, json!({"id": id, "name": "Take 2"}));
    std::thread::sleep(Duration::from_secs(1));
    save(&s, json!({"id": id, "name": "Take 3", "description": "final"}));
    std::thread::sleep(Duration::from_secs(1));
    *alice.inbox_down.lock().unwrap() = false;

    let last = wait(&alice, "the newest Update", |v| v["type"] == "Update" && v["object"]["name"] == "Take 3");
    assert_eq!(last["id"].as_str().unwrap().rsplit('/').next(), Some("2"), "{last}");
    std::thread::sleep(Duration::from_secs(3));
    let got: Vec<(String, String)> = activities(&alice)
        .iter()
        .filter(|a| a["type"] != "Accept")
        .map(|a| (a["type"].as_str().unwrap().to_string(), a["object"]["name"].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(
        got,
        [("Create".to_string(), "Take 1".to_string()), ("Update".to_string(), "Take 3".to_string())],
        "the Create first, the superseded Update never"
    );
    assert!(
        s.log_text().contains("a newer activity superseded a queued one; dropped unsent"),
        "an Update was superseded"
    );
}

#[test]
fn a_series_change_updates_its_announced_occurrences_and_deletes_those_the_rule_dropped() {
    let (s, alice) = federating_server();
    // Four days from tomorrow: every occurrence is announced.
    let day = (Utc::now() + Span::days(1)).format("%Y%m%d");
    let rule = format!("DTSTART;TZID=Europe/Berlin:{day}T120000\nRRULE:FREQ=DAILY;COUNT=4");
    let all = save(&s, json!({"name": "Daily", "recurrence": rule}));
    let series = all["series"][0]["id"].as_str().unwrap().to_string();
    let ids: Vec<String> =
        all["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 4);
    alice
        .wait_for(Duration::from_secs(25), |_| {
            activities(&alice).iter().filter(|a| a["type"] == "Create" && a["object"]["type"] == "Event").count() == 4
        })
        .expect("four Creates");

    // The rule now stops after two: two Updates (renamed), two Deletes.
    let rule2 = format!("DTSTART;TZID=Europe/Berlin:{day}T120000\nRRULE:FREQ=DAILY;COUNT=2");
    save(&s, json!({"id": series, "name": "Daily show", "recurrence": rule2}));
    alice
        .wait_for(Duration::from_secs(25), |_| {
            let a = activities(&alice);
            a.iter().filter(|a| a["type"] == "Update").count() == 2
                && a.iter().filter(|a| a["type"] == "Delete").count() == 2
        })
        .unwrap_or_else(|| panic!("two Updates and two Deletes: {:#?}", activities(&alice)));
    let a = activities(&alice);
    for u in a.iter().filter(|a| a["type"] == "Update") {
        assert_eq!(u["object"]["name"], "Daily show");
    }
    let event_id = |v: &Value, field: &str| v[field]["id"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
    let mut updated: Vec<String> = a.iter().filter(|a| a["type"] == "Update").map(|u| event_id(u, "object")).collect();
    let mut deleted: Vec<String> = a.iter().filter(|a| a["type"] == "Delete").map(|d| event_id(d, "object")).collect();
    updated.sort();
    deleted.sort();
    let mut first_two = ids[..2].to_vec();
    let mut last_two = ids[2..].to_vec();
    first_two.sort();
    last_two.sort();
    assert_eq!((updated, deleted), (first_two, last_two), "the kept slots keep their ids");
    // and no new occurrence was announced
    assert_eq!(a.iter().filter(|a| a["type"] == "Create").count(), 4);
}

#[test]
fn reminders_go_out_by_browser_push_and_discord() {
    use common::chatclient::register;
    // The push service runs on loopback: the development switch lets castd deliver there.
    let s = Server::start_with_env(&[], &[("CASTD_PUSH_ALLOW_LOOPBACK", "1")]);
    let rx = Receiver::start(&[]);
    s.set("serverurl", json!("https://live.example.com"));
    s.set("name", json!("Reminder Cast"));
    s.set("notifications/browser", json!({"enabled": true, "goLiveMessage": "We are live!"}));
    s.set(
        "notifications/discord",
        json!({"enabled": true, "webhook": format!("{}/discord", rx.url), "goLiveMessage": "Going live now"}),
    );
    let (_, token, _) = register(&s, Some("subscriber"));
    let (sub, secret, auth) = push_subscription(&format!("{}/push/one", rx.url));
    let r = s.post_json(
        &format!("/api/notifications/register?accessToken={token}"),
        &json!({"channel": "BROWSER_PUSH_NOTIFICATION", "destination": sub.to_string()}),
    );
    assert_eq!(r.status().as_u16(), 200);

    s.set("schedule/enabled", json!(true));
    s.set("schedule/remindermessage", json!("Don't miss it"));
    s.set("schedule/firstreminderminutes", json!(15));
    let all = save(&s, json!({"name": "Q&A", "start": in_minutes(10), "timezone": "America/New_York"}));
    let id = all["events"][0]["id"].as_str().unwrap().to_string();
    let page = format!("https://live.example.com/schedule/{id}");

    let discord = rx.wait_for(Duration::from_secs(25), |r| r.path == "/discord").expect("the Discord reminder");
    let text = discord.json()["content"].as_str().unwrap().to_string();
    assert!(text.starts_with("Don't miss it\n\nQ&A "), "{text}");
    assert!(text.ends_with(&page), "{text}");
    assert_eq!(discord.json()["username"], "Reminder Cast");

    let push = rx.wait_for(Duration::from_secs(15), |r| r.path == "/push/one").expect("the push reminder");
    let auth = web_push_native::Auth::clone_from_slice(&auth);
    let plain = web_push_native::decrypt(push.body.clone(), &secret, &auth).expect("payload decrypts");
    let payload: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(payload["title"], "Reminder Cast");
    assert_eq!(payload["body"], json!(text));
    assert_eq!(payload["url"], json!(page));
    // once each
    std::thread::sleep(Duration::from_secs(11));
    assert_eq!(rx.all().iter().filter(|r| r.path == "/discord").count(), 1);
    assert_eq!(rx.all().iter().filter(|r| r.path == "/push/one").count(), 1);
}
