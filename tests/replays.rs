//! Replays and clips end to end: a broadcast becomes a replay (recorded by holding its segments on the
//! media plane), plays as EVENT while live and VOD after, downloads as an MP4 with `moov` before
//! `mdat`; clips by an established chat user and by a bot are their window's length; every Owncast
//! refusal answers its status and message; a `kill -9` leaves an `interrupted` replay that plays; the
//! disk budget deletes the oldest unpinned replay first.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use common::media::{publish, wait_exit};
use common::{each_channel, On, Server};
use serde_json::{json, Value};

const KEY: &str = "replays-test-key";
/// A segment at latency level 1 (and the publisher's GOP): the tolerance on durations.
const SEGMENT: f64 = 2.0;

fn setup(server: &Server) {
    server.set(
        "video/streamoutputvariants",
        json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]),
    );
    server.set("video/streamlatencylevel", json!(1));
}

fn auth_header(server: &Server) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(format!("admin:{}", server.admin_password));
    format!("Authorization: Basic {b}\r\n")
}

/// ffprobe's duration of `url` (with the admin's credentials when `admin`).
fn probe_duration(server: &Server, url: &str, admin: bool) -> Option<f64> {
    let mut cmd = Command::new("ffprobe");
    cmd.args(["-v", "error"]);
    if admin {
        cmd.args(["-headers", &auth_header(server)]);
    }
    let out = cmd
        .args(["-show_entries", "format=duration", "-of", "default=noprint_wrappers=1:nokey=1"])
        .arg(url)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// ffprobe's duration of a local file.
fn file_duration(path: &std::path::Path) -> Option<f64> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-show_entries", "format=duration", "-of", "default=noprint_wrappers=1:nokey=1"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The top-level MP4 box types, in order.
fn boxes(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 8 <= bytes.len() {
        let mut size = u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as u64;
        let kind = String::from_utf8_lossy(&bytes[at + 4..at + 8]).to_string();
        if size == 1 && at + 16 <= bytes.len() {
            size = u64::from_be_bytes(bytes[at + 8..at + 16].try_into().unwrap());
        }
        out.push(kind);
        if size < 8 {
            break;
        }
        at += size as usize;
    }
    out
}

fn replays(server: &Server) -> Vec<Value> {
    server.admin_json("/api/admin/replays").as_array().cloned().unwrap_or_default()
}

fn wait_finished(server: &Server, id: &str) -> Value {
    server
        .wait_for(Duration::from_secs(30), || {
            replays(server).into_iter().find(|r| r["id"] == id && r["status"] != "recording")
        })
        .unwrap_or_else(|| panic!("replay {id} did not finish: {:?}", replays(server)))
}

/// A chat user; `established` makes the account two hours old (in the database, as time would).
fn chat_user(server: &Server, name: &str, established: bool) -> String {
    let v: Value = server.post_json("/api/chat/register", &json!({ "displayName": name })).json().unwrap();
    let token = v["accessToken"].as_str().unwrap().to_string();
    if established {
        let db = rusqlite::Connection::open(server.data_dir.join("castd.db")).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        let old =
            (chrono::Utc::now() - chrono::TimeDelta::hours(2)).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let n = db
            .execute(
                "UPDATE chat_users SET created_at = ?1 WHERE id = ?2",
                rusqlite::params![old, v["id"].as_str().unwrap()],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    token
}

/// POST /api/clip as `token` from the address `ip` (X-Forwarded-For from loopback).
fn clip(server: &Server, token: Option<&str>, ip: &str, body: &Value) -> (u16, Value) {
    let path = match token {
        Some(t) => format!("/api/clip?accessToken={t}"),
        None => "/api/clip".to_string(),
    };
    let r = server.client.post(server.url(&path)).header("x-forwarded-for", ip).json(body).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn assert_refused(got: (u16, Value), status: u16, message: &str) {
    assert_eq!(got.0, status, "{got:?}");
    assert_eq!(got.1["success"], false, "{got:?}");
    assert_eq!(got.1["message"], message, "{got:?}");
}

fn window(sid: &str, start: f64, end: f64) -> Value {
    json!({"streamId": sid, "clipTitle": "a moment", "relativeStartTimeSeconds": start, "relativeEndTimeSeconds": end})
}

#[test]
fn a_broadcast_becomes_a_replay_with_clips_and_downloads() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    let hook = common::receiver::Receiver::start(&[]);
    let r = server.admin_post(
        "/api/admin/webhooks/create",
        &json!({"url": hook.url, "events": ["REPLAY_READY", "CLIP_CREATED"]}),
    );
    assert!(r.status().is_success(), "REPLAY_READY and CLIP_CREATED are webhook events");
    assert_eq!(
        server.get_json("/api/config")["clips"],
        json!({"enabled": true, "maxDurationSeconds": 120, "permissions": "established"})
    );
    let published = 30.0;
    let mut ff = publish(&server, KEY, "320x180", published as u32);
    let sid = server
        .wait_for(Duration::from_secs(30), || server.get_json("/api/status")["streamId"].as_str().map(str::to_string))
        .expect("/api/status gives the streamId while live");

    // Live: the replay is listed in progress and its media playlist is an EVENT playlist.
    let live = server
        .wait_for(Duration::from_secs(30), || {
            replays(&server).into_iter().find(|r| r["id"] == sid.as_str() && r["durationSeconds"].as_f64() > Some(8.0))
        })
        .expect("the live replay is listed with media");
    assert_eq!(live["inProgress"], true);
    assert_eq!(live["manifest"], format!("/replay/{sid}"));
    let media = server.admin_get(&format!("/replay/{sid}/0")).text().unwrap();
    assert!(media.contains("#EXT-X-PLAYLIST-TYPE:EVENT") && !media.contains("ENDLIST"), "{media}");

    // Clip refusals, in Owncast's order and words.
    let fresh = chat_user(&server, "Newbie", false);
    let viewer = chat_user(&server, "Clipper", true);
    assert_refused(clip(&server, Some(&viewer), "10.0.0.1", &window("nope", 1.0, 5.0)), 400, "stream not found");
    assert_refused(
        clip(&server, Some(&viewer), "10.0.0.1", &window(&sid, -1.0, 5.0)),
        400,
        "start time must not be negative",
    );
    assert_refused(
        clip(&server, Some(&viewer), "10.0.0.1", &window(&sid, 5.0, 5.0)),
        400,
        "end time must be after start time",
    );
    assert_refused(
        clip(&server, Some(&viewer), "10.0.0.1", &window(&sid, 9999.0, 10000.0)),
        400,
        "start time is after the known end of the stream",
    );
    assert_refused(
        clip(&server, None, "10.0.0.1", &window(&sid, 1.0, 5.0)),
        403,
        "clip creation requires joining chat first",
    );
    assert_refused(
        clip(&server, Some(&fresh), "10.0.0.1", &window(&sid, 1.0, 5.0)),
        403,
        "your account is too new to create clips",
    );
    server.set("replay/clippermissions", json!("moderators"));
    assert_refused(
        clip(&server, Some(&viewer), "10.0.0.1", &window(&sid, 1.0, 5.0)),
        403,
        "clip creation is limited to moderators",
    );
    server.set("replay/clippermissions", json!("authenticated"));
    assert_refused(
        clip(&server, Some(&viewer), "10.0.0.1", &window(&sid, 1.0, 5.0)),
        403,
        "clip creation is limited to authenticated viewers",
    );
    server.set("replay/clippermissions", json!("established"));
    let bad =
        server.client.post(server.url(&format!("/api/clip?accessToken={viewer}"))).body("{not json").send().unwrap();
    assert_eq!(bad.status().as_u16(), 200);
    assert_eq!(bad.json::<Value>().unwrap(), json!({"success": false, "message": "unable to create clip"}));
    server.set("replay/clipsenabled", json!(false));
    assert_refused(clip(&server, Some(&viewer), "10.0.0.1", &window(&sid, 1.0, 5.0)), 200, "clip creation is disabled");
    server.set("replay/clipsenabled", json!(true));
    // Setter validation, Owncast's messages.
    let r = server.admin_post("/api/admin/config/replay/maxclipduration", &json!({"value": 0}));
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().unwrap()["message"], "clip duration must be between 1 and 3600 seconds");
    let r = server.admin_post("/api/admin/config/replay/clippermissions", &json!({"value": "everyone"}));
    assert_eq!(
        r.json::<Value>().unwrap()["message"],
        "clip permissions must be one of: moderators, authenticated, established"
    );
    let r = server.admin_post("/api/admin/config/replay/enable", &json!({"value": true}));
    assert_eq!(r.json::<Value>().unwrap()["message"], "replay features saved");

    server
        .wait_for(Duration::from_secs(30), || {
            replays(&server).into_iter().find(|r| r["id"] == sid.as_str() && r["durationSeconds"].as_f64() > Some(18.0))
        })
        .expect("18 s recorded");
    // The viewer's clip (while live), announced in chat; then the rate limit: 3 back to back, the 4th
    // is refused.
    let mut watcher = common::chatclient::join(&server, "Watcher");
    let (status, made) = clip(&server, Some(&viewer), "10.0.0.2", &window(&sid, 2.0, 16.0));
    assert_eq!(status, 200, "{made}");
    let action = common::chatclient::next_where(&mut watcher.ws, Duration::from_secs(10), |e| {
        e["type"] == "CHAT_ACTION" && e["body"].as_str().is_some_and(|b| b.contains("Clipper clipped a moment"))
    });
    assert!(action.is_some(), "the clip is announced in chat");
    assert_eq!(made["success"], true);
    assert_eq!(made["message"], "clip created");
    assert_eq!(made["durationSeconds"], 14);
    let viewer_clip = made["id"].as_str().unwrap().to_string();
    assert_eq!(clip(&server, Some(&viewer), "10.0.0.2", &window(&sid, 0.0, 4.0)).0, 200);
    assert_eq!(clip(&server, Some(&viewer), "10.0.0.2", &window(&sid, 0.0, 4.0)).0, 200);
    assert_refused(
        clip(&server, Some(&viewer), "10.0.0.2", &window(&sid, 0.0, 4.0)),
        429,
        "too many clips created, please wait before creating another",
    );
    // An over-long window keeps its newest `max` seconds.
    server.set("replay/maxclipduration", json!(5));
    let (_, short) = clip(&server, Some(&viewer), "10.0.0.3", &window(&sid, 0.0, 8.0));
    assert_eq!(short["durationSeconds"], 5, "{short}");
    let c: Value = server.get_json(&format!("/api/clips/{}", short["id"].as_str().unwrap()));
    assert_eq!((c["relativeStartTime"].as_f64(), c["relativeEndTime"].as_f64()), (Some(3.0), Some(8.0)));
    server.set("replay/maxclipduration", json!(120));

    assert!(wait_exit(&mut ff, Duration::from_secs(60)).is_some(), "the publisher ends");
    let done = wait_finished(&server, &sid);
    assert_eq!(done["status"], "finished");
    assert!(done.get("inProgress").is_none());
    assert!(done["totalBytes"].as_i64() > Some(10_000));
    assert_eq!(done["clipCount"], 4);
    let ready = hook.wait_for(Duration::from_secs(20), |r| r.json()["type"] == "REPLAY_READY");
    assert_eq!(ready.expect("REPLAY_READY webhook").json()["eventData"]["id"], sid.as_str());
    let clipped = hook.wait_for(Duration::from_secs(5), |r| r.json()["type"] == "CLIP_CREATED");
    assert_eq!(clipped.expect("CLIP_CREATED webhook").json()["eventData"]["clippedBy"], "Clipper");

    // The bot's clip: no permission level, no rate limit, but (clips being public) only of the live
    // broadcast or a public replay: the finished replay is private yet, so it is an unknown stream.
    let token = server
        .admin_post("/api/admin/accesstokens/create", &json!({"name": "clipbot", "scopes": ["HAS_ADMIN_ACCESS"]}));
    let token = token.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let no_auth = server.post_json("/api/integrations/clips", &window(&sid, 10.0, 22.0));
    assert_eq!(no_auth.status().as_u16(), 401);
    let bot_clips = |body: &Value| {
        server
            .client
            .post(server.url("/api/integrations/clips"))
            .header("authorization", format!("Bearer {token}"))
            .json(body)
            .send()
            .unwrap()
    };
    let private = bot_clips(&window(&sid, 10.0, 22.0));
    assert_eq!(private.status().as_u16(), 400);
    assert_eq!(private.json::<Value>().unwrap()["message"], "stream not found");
    // The admin's form (castd): same rules, any replay, clippedBy is the server's name.
    let r = server.admin_post("/api/admin/clips/create", &window(&sid, 20.0, 26.0));
    let admin_clip: Value = r.json().unwrap();
    assert_eq!(admin_clip["durationSeconds"], 6, "{admin_clip}");
    assert_eq!(server.post_json("/api/admin/clips/create", &window(&sid, 20.0, 26.0)).status().as_u16(), 401);
    assert_eq!(server.get_json(&format!("/api/clips/{viewer_clip}"))["clippedBy"], "Clipper");

    // The finished replay: VOD + ENDLIST, the published duration within one segment.
    let media = server.admin_get(&format!("/replay/{sid}/0")).text().unwrap();
    assert!(media.contains("#EXT-X-PLAYLIST-TYPE:VOD") && media.trim_end().ends_with("#EXT-X-ENDLIST"), "{media}");
    let master_url = server.url(&format!("/replay/{sid}"));
    let d = probe_duration(&server, &master_url, true).expect("ffprobe reads the replay");
    assert!((d - published).abs() <= SEGMENT, "replay lasts {d} s, published {published} s");

    // Admin-only until made public.
    assert_eq!(server.get(&format!("/replay/{sid}")).status().as_u16(), 401);
    assert_eq!(server.get_json("/api/replays"), json!([]));
    let r = server.admin_post(
        "/api/admin/replays/update",
        &json!({"id": sid, "public": true, "pinned": true, "title": "Show #1"}),
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(server.get(&format!("/replay/{sid}")).status().as_u16(), 200);
    let public = server.get_json("/api/replays");
    assert_eq!(public[0]["id"], sid.as_str());
    assert_eq!(public[0]["title"], "Show #1");
    // Public now: the bot may clip it.
    let bot = bot_clips(&window(&sid, 10.0, 22.0));
    assert_eq!(bot.status().as_u16(), 200);
    let bot: Value = bot.json().unwrap();
    assert_eq!(bot["durationSeconds"], 12);
    let bot_clip = bot["id"].as_str().unwrap().to_string();
    assert_eq!(server.get_json(&format!("/api/clips/{bot_clip}"))["clippedBy"], "clipbot");
    // Segments: Range and ETag like live segments.
    let media_url = server.url(&format!("/replay/{sid}/0"));
    let seg = resolve(&media_url, media.lines().find(|l| !l.trim().is_empty() && !l.starts_with('#')).unwrap());
    let r = server.client.get(&seg).header("range", "bytes=0-187").send().unwrap();
    assert_eq!(r.status().as_u16(), 206);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let r = server.client.get(&seg).header("if-none-match", &etag).send().unwrap();
    assert_eq!(r.status().as_u16(), 304);

    // download.mp4: moov before mdat, the same duration, a sane file name, streamed.
    let started = Instant::now();
    let r = server.admin_get(&format!("/replay/{sid}/download.mp4"));
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "video/mp4");
    assert_eq!(r.headers()["content-disposition"], "attachment; filename=\"Show-1.mp4\"");
    let bytes = r.bytes().unwrap();
    eprintln!("download.mp4: {} bytes in {:?}", bytes.len(), started.elapsed());
    let kinds = boxes(&bytes);
    let moov = kinds.iter().position(|k| k == "moov").expect("a moov box");
    let mdat = kinds.iter().position(|k| k == "mdat").expect("an mdat box");
    assert!(moov < mdat, "{kinds:?}");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("replay.mp4");
    std::fs::write(&file, &bytes).unwrap();
    let d = file_duration(&file).expect("ffprobe reads the download");
    assert!((d - published).abs() <= SEGMENT, "download lasts {d} s");

    // Clips play for their length ± one GOP, have thumbnails and downloads.
    for (id, len) in [(&viewer_clip, 14.0), (&bot_clip, 12.0)] {
        let d = probe_duration(&server, &server.url(&format!("/clip/{id}")), false).expect("the clip plays");
        assert!((d - len).abs() <= SEGMENT + 0.5, "clip {id} lasts {d} s, asked {len} s");
        let thumb = server.wait_for(Duration::from_secs(20), || {
            let r = server.get(&format!("/clip-thumbnail/{id}.jpg"));
            (r.status().as_u16() == 200).then(|| r.bytes().unwrap())
        });
        let thumb = thumb.expect("a thumbnail");
        assert_eq!(&thumb[..2], &[0xff, 0xd8], "a JPEG");
        assert_eq!(server.get_json(&format!("/api/clips/{id}"))["thumbnail"], format!("/clip-thumbnail/{id}.jpg"));
        let r = server.get(&format!("/clip/{id}/download.mp4"));
        assert_eq!(r.status().as_u16(), 200);
        let f = tmp.path().join(format!("{id}.mp4"));
        std::fs::write(&f, r.bytes().unwrap()).unwrap();
        let d = file_duration(&f).expect("the clip download is an MP4");
        assert!((d - len).abs() <= SEGMENT + 0.5, "clip download lasts {d} s");
    }
    let page = server.get(&format!("/clips/{viewer_clip}")).text().unwrap();
    assert!(page.contains("og:title\" content=\"a moment\""), "{page}");

    // Unknown ids: 404; bad bodies: Owncast's answers.
    assert_eq!(server.admin_get("/replay/nope").status().as_u16(), 404);
    assert_eq!(server.get("/api/clips/nope").status().as_u16(), 404);
    assert_eq!(server.get("/clip/nope").status().as_u16(), 404);
    let r = server.admin_post("/api/admin/replays/delete", &json!({"id": "nope"}));
    assert_eq!((r.status().as_u16(), r.json::<Value>().unwrap()["message"].clone()), (404, json!("replay not found")));
    let r = server.admin_post("/api/admin/replays/delete", &json!({}));
    assert_eq!(r.json::<Value>().unwrap()["message"], "an id is required");
    let r = server
        .client
        .post(server.url("/api/admin/replays/delete"))
        .basic_auth("admin", Some(&server.admin_password))
        .body("{")
        .send()
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), r.json::<Value>().unwrap()["message"].clone()),
        (400, json!("unable to read request"))
    );
    let r = server.admin_post("/api/admin/clips/delete", &json!({"id": bot_clip}));
    assert_eq!(r.json::<Value>().unwrap()["message"], "clip deleted");
    assert_eq!(server.get(&format!("/api/clips/{bot_clip}")).status().as_u16(), 404);

    // Deleting the replay deletes its clips and files.
    let r = server.admin_post("/api/admin/replays/delete", &json!({"id": sid}));
    assert_eq!(r.json::<Value>().unwrap()["message"], "replay deleted");
    assert!(replays(&server).is_empty());
    assert_eq!(server.get_json("/api/clips"), json!([]));
    assert!(!server.data_dir.join("replays").join(&sid).exists());

    // Features off: every route is a 404.
    server.set("replay/enable", json!(false));
    assert_eq!(server.admin_get("/api/admin/replays").status().as_u16(), 404);
    assert_eq!(clip(&server, Some(&viewer), "10.0.0.9", &window(&sid, 1.0, 5.0)).0, 404);
}

/// Publish `secs` and wait for the replay it makes to be listed finished; returns its id.
fn broadcast(server: &Server, secs: u32) -> String {
    let before: Vec<Value> = replays(server);
    let mut ff = publish(server, KEY, "320x180", secs);
    assert!(wait_exit(&mut ff, Duration::from_secs(u64::from(secs) + 30)).is_some());
    let new = server
        .wait_for(Duration::from_secs(30), || {
            replays(server)
                .into_iter()
                .find(|r| !before.iter().any(|b| b["id"] == r["id"]) && r["status"] == "finished")
        })
        .expect("a new finished replay");
    new["id"].as_str().unwrap().to_string()
}

#[test]
fn kill_9_leaves_an_interrupted_replay_and_the_budget_keeps_the_newest_and_the_pinned() {
    let mut server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    let mut ff = publish(&server, KEY, "320x180", 60);
    let sid = server
        .wait_for(Duration::from_secs(40), || {
            replays(&server).into_iter().find(|r| r["durationSeconds"].as_f64() >= Some(8.0)).map(|r| r["id"].clone())
        })
        .expect("recording");
    let sid = sid.as_str().unwrap().to_string();
    common::unsafe_kill(server.pid().unwrap(), 9);
    let _ = ff.kill();
    let _ = ff.wait();
    server.stop();
    let server = server.restart();
    let r = replays(&server);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["id"], sid.as_str());
    assert_eq!(r[0]["status"], "interrupted");
    let media = server.admin_get(&format!("/replay/{sid}/0")).text().unwrap();
    assert!(media.contains("#EXT-X-ENDLIST"), "{media}");
    let d =
        probe_duration(&server, &server.url(&format!("/replay/{sid}")), true).expect("the interrupted replay plays");
    assert!(d >= 8.0 - SEGMENT, "it plays up to its last segment: {d} s");

    // Budget: pin the interrupted one, record two more, then a budget that holds the first and the
    // last but not the middle one.
    setup(&server);
    let r = server.admin_post("/api/admin/replays/update", &json!({"id": sid, "pinned": true}));
    assert_eq!(r.status().as_u16(), 200);
    let second = broadcast(&server, 8);
    let third = broadcast(&server, 8);
    let all = replays(&server);
    assert_eq!(all.len(), 3, "{all:?}");
    let size = |id: &str| all.iter().find(|r| r["id"] == id).unwrap()["totalBytes"].as_i64().unwrap();
    let keep = size(&sid) + size(&third);
    assert!(keep + size(&second) > keep);
    server.set("replay/maxgigabytes", json!((keep as f64 + 1000.0) / 1e9));
    let left = server
        .wait_for(Duration::from_secs(20), || {
            let ids: Vec<String> = replays(&server).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
            (ids.len() == 2).then_some(ids)
        })
        .expect("the budget deletes one replay");
    assert!(left.contains(&sid) && left.contains(&third), "{left:?}");
    assert!(!server.data_dir.join("replays").join(&second).exists());
    assert!(server.data_dir.join("replays").join(&third).exists());
}

#[test]
fn a_finished_replay_plays_from_the_bucket_and_deleting_it_removes_every_object() {
    use common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(dir.path());
    let public = s3.public();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    server.set(
        "s3",
        json!({
            "enabled": true, "endpoint": s3.endpoint(), "accessKey": ACCESS_KEY, "secret": SECRET_KEY,
            "bucket": BUCKET, "region": "us-east-1", "acl": "public-read", "pathPrefix": "pfx",
            "forcePathStyle": true,
        }),
    );
    // Players read the bucket through the anonymous instance.
    server.set("videoservingendpoint", json!(format!("{}/{BUCKET}", public.endpoint())));
    let published = 10.0;
    let id = broadcast(&server, published as u32);
    let media = server
        .wait_for(Duration::from_secs(30), || {
            let m = server.admin_get(&format!("/replay/{id}/0")).text().unwrap();
            m.contains(&public.endpoint()).then_some(m)
        })
        .expect("the replay's playlist names the bucket");
    assert!(media.contains(&format!("/{BUCKET}/pfx/replays/{id}/0/")), "{media}");
    let keys = public.list(&server.client, &format!("pfx/replays/{id}/"));
    assert!(keys.len() >= 4, "{keys:?}");
    // No local copy is left of the segments; it plays from the bucket.
    let local: Vec<_> =
        std::fs::read_dir(server.data_dir.join("replays").join(&id).join("0")).unwrap().flatten().collect();
    assert!(local.is_empty(), "{local:?}");
    // (Public, so the player sends no credentials the bucket would refuse.)
    let r = server.admin_post("/api/admin/replays/update", &json!({"id": id, "public": true}));
    assert_eq!(r.status().as_u16(), 200);
    let d = probe_duration(&server, &server.url(&format!("/replay/{id}")), false).expect("plays from the bucket");
    assert!((d - published).abs() <= SEGMENT, "{d} s");
    // The live stream's leftovers clean-up at the next start leaves replays alone; deleting removes them.
    let r = server.admin_post("/api/admin/replays/delete", &json!({"id": id}));
    assert_eq!(r.status().as_u16(), 200);
    assert!(public.list(&server.client, &format!("pfx/replays/{id}/")).is_empty());
}

#[test]
fn a_low_latency_broadcast_is_recorded_with_its_init_segment_and_plays() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    server.set("video/streamlatencylevel", json!(0));
    let id = broadcast(&server, 10);
    let media = server.admin_get(&format!("/replay/{id}/0")).text().unwrap();
    assert!(media.contains("#EXT-X-MAP:URI=\""), "fMP4 segments name their init segment: {media}");
    let d = probe_duration(&server, &server.url(&format!("/replay/{id}")), true).expect("the LL-HLS replay plays");
    assert!((d - 10.0).abs() <= SEGMENT, "{d} s");
    let r = server.admin_get(&format!("/replay/{id}/download.mp4"));
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("ll.mp4");
    std::fs::write(&f, r.bytes().unwrap()).unwrap();
    let d = file_duration(&f).expect("the download is an MP4");
    assert!((d - 10.0).abs() <= SEGMENT, "download {d} s");
}

/// The wall-clock time of a replay's media time 0 as a player reads it: the first segment's
/// `#EXT-X-PROGRAM-DATE-TIME` in its media playlist.
fn first_pdt(server: &Server, sid: &str) -> chrono::DateTime<chrono::Utc> {
    let media = server.admin_get(&format!("/replay/{sid}/0")).text().unwrap();
    let line = media.lines().find_map(|l| l.strip_prefix("#EXT-X-PROGRAM-DATE-TIME:")).expect("a PDT");
    chrono::DateTime::parse_from_rfc3339(line.trim()).expect("an RFC 3339 PDT").with_timezone(&chrono::Utc)
}

/// `GET /api/replays/{sid}/chat` (`query` appended) as anyone; (status, body).
fn replay_chat(server: &Server, sid: &str, query: &str) -> (u16, Value) {
    let r = server.get(&format!("/api/replays/{sid}/chat{query}"));
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn bodies(chat: &Value) -> Vec<String> {
    let text = |m: &Value| m["body"].as_str().unwrap().trim_start_matches("<p>").trim_end_matches("</p>").to_string();
    chat["messages"].as_array().unwrap().iter().map(text).collect()
}

/// A replay's chat: the messages sent during a broadcast come back in their window, in order, each with
/// its offset from the replay's start (within a second of where a player's playhead was when it was
/// sent); a hidden message and a banned user's are left out; a private replay's chat is the admin's, a
/// public one's anyone's, and on a password channel only with a viewing pass. `GET /api/replays/{id}` (one
/// replay, for a link to it) follows the same rules.
#[test]
fn a_replays_chat_comes_back_in_its_window_with_its_offsets() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    let mut ff = publish(&server, KEY, "320x180", 24);
    let sid = server
        .wait_for(Duration::from_secs(30), || server.get_json("/api/status")["streamId"].as_str().map(str::to_string))
        .expect("live");
    server
        .wait_for(Duration::from_secs(30), || {
            replays(&server).into_iter().find(|r| r["id"] == sid.as_str() && r["durationSeconds"].as_f64() > Some(0.5))
        })
        .expect("the replay records");

    let mut alice = common::chatclient::join(&server, "Alice");
    let mut troll = common::chatclient::join(&server, "Troll");
    let mut sent = Vec::new();
    // (who, body): every 2.5 s; "hidden" is hidden by the admin, the troll is banned.
    let script = [("a", "one"), ("a", "hidden"), ("t", "spam"), ("a", "two"), ("a", "three")];
    let mut hidden_id = String::new();
    for (who, body) in script {
        std::thread::sleep(Duration::from_millis(2500));
        let ws = if who == "a" { &mut alice.ws } else { &mut troll.ws };
        common::chatclient::say(ws, body);
        let at = chrono::Utc::now();
        let echo = common::chatclient::next_where(ws, Duration::from_secs(5), |e| {
            e["type"] == "CHAT" && e["body"] == format!("<p>{body}</p>")
        })
        .expect("the message is echoed");
        if body == "hidden" {
            hidden_id = echo["id"].as_str().unwrap().to_string();
        }
        sent.push((body, at));
    }
    let r =
        server.admin_post("/api/admin/chat/messagevisibility", &json!({ "idArray": [hidden_id], "visible": false }));
    assert_eq!(r.status().as_u16(), 200);
    let r = server.admin_post("/api/admin/chat/users/setenabled", &json!({ "userId": troll.id, "enabled": false }));
    assert_eq!(r.status().as_u16(), 200);
    // Banning hides the troll's messages; shown again, they still stay out (the user is disabled).
    let history = server.admin_json("/api/admin/chat/messages");
    let spam_id = history.as_array().unwrap().iter().find(|m| m["body"] == "<p>spam</p>").expect("spam")["id"].clone();
    let r = server.admin_post("/api/admin/chat/messagevisibility", &json!({ "idArray": [spam_id], "visible": true }));
    assert_eq!(r.status().as_u16(), 200);
    assert!(wait_exit(&mut ff, Duration::from_secs(60)).is_some(), "the publisher ends");
    wait_finished(&server, &sid);

    // Who may not: anyone, while the replay is not public (401); an unknown replay is a 404. The same for
    // the replay itself (`GET /api/replays/{id}`, what a link to it opens).
    let (status, _) = replay_chat(&server, &sid, "");
    assert_eq!(status, 401, "a private replay's chat is the admin's");
    assert_eq!(replay_chat(&server, "nope", "").0, 404);
    assert_eq!(server.get(&format!("/api/replays/{sid}")).status().as_u16(), 401, "a private replay is the admin's");
    assert_eq!(server.get("/api/replays/nope").status().as_u16(), 404);
    assert_eq!(server.admin_json(&format!("/api/replays/{sid}"))["id"], sid.as_str());
    let admin = server.admin_json(&format!("/api/replays/{sid}/chat"));
    assert_eq!(bodies(&admin), ["one", "two", "three"], "hidden and banned left out, in order: {admin}");
    assert_eq!(admin["truncated"], false);

    // Offsets: where a player's playhead was (the first segment's PDT is media time 0), within a second.
    let epoch = first_pdt(&server, &sid);
    let expected = |body: &str| {
        let at = sent.iter().find(|(b, _)| *b == body).unwrap().1;
        (at - epoch).num_milliseconds() as f64 / 1000.0
    };
    let offsets: Vec<f64> =
        admin["messages"].as_array().unwrap().iter().map(|m| m["offset"].as_f64().unwrap()).collect();
    for (m, off) in admin["messages"].as_array().unwrap().iter().zip(&offsets) {
        let want = expected(m["body"].as_str().unwrap().trim_start_matches("<p>").trim_end_matches("</p>"));
        assert!((off - want).abs() <= 1.0, "{}: offset {off}, sent at {want} s of the replay", m["body"]);
        assert!(m["user"]["displayName"] == "Alice" && m["type"] == "CHAT", "{m}");
    }

    // Public: anyone; a window answers exactly the messages in it.
    let r = server.admin_post("/api/admin/replays/update", &json!({ "id": sid, "public": true }));
    assert_eq!(r.status().as_u16(), 200);
    let (status, all) = replay_chat(&server, &sid, "");
    assert_eq!(status, 200);
    assert_eq!(bodies(&all), ["one", "two", "three"]);
    let one = server.get_json(&format!("/api/replays/{sid}"));
    assert_eq!(
        (&one["id"], &one["public"], &one["manifest"]),
        (&json!(sid), &json!(true), &json!(format!("/replay/{sid}")))
    );
    let mid = |a: f64, b: f64| (a + b) / 2.0;
    let q = format!("?from={}&to={}", mid(offsets[0], offsets[1]), mid(offsets[1], offsets[2]));
    assert_eq!(bodies(&replay_chat(&server, &sid, &q).1), ["two"], "{q}");
    let q = format!("?from={}", mid(offsets[0], offsets[1]));
    assert_eq!(bodies(&replay_chat(&server, &sid, &q).1), ["two", "three"], "{q}");
    let q = format!("?to={}", mid(offsets[0], offsets[1]));
    assert_eq!(bodies(&replay_chat(&server, &sid, &q).1), ["one"], "{q}");
    let (status, empty) = replay_chat(&server, &sid, "?from=30&to=1");
    assert_eq!((status, bodies(&empty).len()), (200, 0), "to before from is an empty window: {empty}");
    for bad in ["?from=x", "?to=-1", "?from=NaN", "?to=1e12", "?from="] {
        let (status, v) = replay_chat(&server, &sid, bad);
        assert_eq!((status, &v["success"]), (400, &json!(false)), "{bad}: {v}");
    }

    // A clip carries the chat of its window, placed on the clip's own time (its first segment is 0).
    let (a, b) = (mid(offsets[0], offsets[1]), mid(offsets[1], offsets[2]));
    let r = server.admin_post("/api/admin/clips/create", &window(&sid, a, b));
    let created: Value = r.json().unwrap();
    let clip_id = created["id"].as_str().unwrap_or_else(|| panic!("a clip: {created}"));
    let clip_chat = server.get_json(&format!("/api/clips/{clip_id}/chat"));
    assert_eq!(bodies(&clip_chat), ["two"], "{clip_chat}");
    let at = clip_chat["messages"][0]["offset"].as_f64().unwrap();
    assert!(at <= offsets[1] - a + SEGMENT && at >= offsets[1] - a - 0.01, "two at {at} s of the clip from {a}");
    assert_eq!(server.get("/api/clips/nope/chat").status().as_u16(), 404);

    // A password channel: the public replay's chat needs a viewing pass, like its video.
    let r =
        server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "friends-only", "comment": "x"}));
    assert_eq!(r.status().as_u16(), 200);
    server.set("visibility", json!("password"));
    let (status, v) = replay_chat(&server, &sid, "");
    assert_eq!(status, 401, "no pass: {v}");
    assert!(v["message"].as_str().is_some_and(|m| m.contains("viewing pass")), "{v}");
    let unlocked: Value =
        server.post_json("/api/viewer/unlock", &json!({ "password": "friends-only" })).json().unwrap();
    let pass = unlocked["pass"].as_str().expect("a pass");
    let (status, v) = replay_chat(&server, &sid, &format!("?pass={pass}"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(bodies(&v), ["one", "two", "three"]);
    assert_eq!(server.get(&format!("/api/replays/{sid}")).status().as_u16(), 401, "the replay needs the pass too");
    assert_eq!(server.get_json(&format!("/api/replays/{sid}?pass={pass}"))["id"], sid.as_str());
}

/// The URIs of a playlist: its URI lines and its `URI="..."` attributes.
fn playlist_uris(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !line.starts_with('#') {
            out.push(line.to_string());
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("URI=\"") {
            let tail = &rest[i + 5..];
            let Some(end) = tail.find('"') else { break };
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    out
}

/// Finding 6: a replay uploaded while the channel was public, on a channel that then takes a
/// password: its playlists name castd's own URLs (no bucket URL, so no pass ever goes to the bucket),
/// castd serves every file from the bucket behind the gate (`private`), ffprobe plays it with the pass
/// alone, and nothing plays without one.
#[test]
fn a_replay_in_the_bucket_plays_through_castd_with_a_pass_once_the_channel_is_private() {
    use common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
    let dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(dir.path());
    let mut public = s3.public();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    setup(&server);
    server.set(
        "s3",
        json!({
            "enabled": true, "endpoint": s3.endpoint(), "accessKey": ACCESS_KEY, "secret": SECRET_KEY,
            "bucket": BUCKET, "region": "us-east-1", "acl": "public-read", "pathPrefix": "pfx",
            "forcePathStyle": true,
        }),
    );
    server.set("videoservingendpoint", json!(format!("{}/{BUCKET}", public.endpoint())));
    let published = 10.0;
    let id = broadcast(&server, published as u32);
    server
        .wait_for(Duration::from_secs(30), || {
            let m = server.admin_get(&format!("/replay/{id}/0")).text().unwrap();
            m.contains(&public.endpoint()).then_some(())
        })
        .expect("while public, the replay's playlist names the bucket");
    let r = server.admin_post("/api/admin/replays/update", &json!({"id": id, "public": true}));
    assert_eq!(r.status().as_u16(), 200);
    // The players' anonymous way into the bucket is gone: what plays now comes through castd.
    public.kill();

    let r =
        server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "replay friends", "comment": ""}));
    assert_eq!(r.status().as_u16(), 200);
    server.set("visibility", json!("password"));
    let media_path = format!("/replay/{id}/0");
    for path in [format!("/replay/{id}"), media_path.clone(), format!("/api/replays/{id}")] {
        let r = server.get(&path);
        assert_eq!(r.status().as_u16(), 401, "{path} without a pass");
        let v: Value = r.json().unwrap_or(Value::Null);
        assert_eq!(v["success"], false, "{path}: {v}");
    }
    let r = server.post_json("/api/viewer/unlock", &json!({"password": "replay friends"}));
    assert_eq!(r.status().as_u16(), 200);
    let pass = r.json::<Value>().unwrap()["pass"].as_str().expect("a pass").to_string();

    let text = server.get(&format!("{media_path}?pass={pass}")).text().unwrap();
    assert!(text.contains("#EXT-X-ENDLIST"), "{text}");
    assert!(!text.contains(BUCKET) && !text.contains("://"), "no bucket URL, no absolute URL: {text}");
    let uris = playlist_uris(&text);
    assert!(uris.len() >= 3, "{text}");
    for uri in &uris {
        assert!(uri.starts_with(&format!("/replay/{id}/0/")) && uri.contains("pass="), "{uri}");
        let r = server.get(uri);
        assert_eq!(r.status().as_u16(), 200, "{uri} with the pass");
        let cache = r.headers().get("cache-control").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        assert!(cache.contains("private") && !cache.contains("public"), "{uri}: {cache}");
        assert!(!r.bytes().unwrap().is_empty(), "{uri}");
        let bare = uri.split('?').next().unwrap();
        assert_eq!(server.get(bare).status().as_u16(), 401, "{bare} without a pass");
    }
    // Nothing of it is on the disk: every file came from the bucket.
    let local: Vec<_> =
        std::fs::read_dir(server.data_dir.join("replays").join(&id).join("0")).unwrap().flatten().collect();
    assert!(local.is_empty(), "{local:?}");
    let master = server.url(&format!("/replay/{id}?pass={pass}"));
    let d = probe_duration(&server, &master, false).expect("ffprobe plays the replay with the pass alone");
    assert!((d - published).abs() <= SEGMENT, "{d} s");
    assert!(probe_duration(&server, &server.url(&format!("/replay/{id}")), false).is_none(), "not without it");

    // Public again: the playlist names the bucket as before.
    server.set("visibility", json!("public"));
    let text = server.get(&media_path).text().unwrap();
    assert!(text.contains(&format!("/{BUCKET}/pfx/replays/{id}/0/")), "{text}");
}

/// Issue 53: replay ids are each channel's own database's, so a channel and the default channel can
/// both have a replay `X`. In the bucket each channel's replays are under its own folder
/// (`<prefix>c/{slug}/replays/X/`, the default channel's where they always were, `<prefix>replays/X/`):
/// a channel's replay with the default's id (made so by renaming it while castd is stopped: ids are
/// random) plays from its own objects, and deleting it leaves the default's, which still plays.
#[test]
fn a_channels_replay_with_the_defaults_id_keeps_its_objects_apart() {
    use common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
    let s3dir = tempfile::tempdir().unwrap();
    let s3 = S3Server::start(s3dir.path());
    let public = s3.public();
    let data = tempfile::tempdir().unwrap();
    let mut server = Server::start_in(data.path(), &["--streamkey", KEY]);
    setup(&server);
    let channel = server.channel("c1");
    channel.set(
        "video/streamoutputvariants",
        json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]),
    );
    channel.set("video/streamlatencylevel", json!(1));
    let channel_key = channel.stream_key();
    drop(channel);
    server.set(
        "s3",
        json!({
            "enabled": true, "endpoint": s3.endpoint(), "accessKey": ACCESS_KEY, "secret": SECRET_KEY,
            "bucket": BUCKET, "region": "us-east-1", "acl": "public-read", "pathPrefix": "pfx",
            "forcePathStyle": true,
        }),
    );
    server.set("videoservingendpoint", json!(format!("{}/{BUCKET}", public.endpoint())));
    let in_bucket = |server: &Server, path: &str| {
        server
            .wait_for(Duration::from_secs(30), || {
                let m = server.admin_get(path).text().unwrap_or_default();
                m.contains(&public.endpoint()).then_some(m)
            })
            .unwrap_or_else(|| panic!("{path} names the bucket; log:\n{}", server.log_text()))
    };
    let a = broadcast(&server, 6);
    // The channel's broadcast.
    let channel = server.channel("c1");
    let mut ff = publish(&server, &channel_key, "320x180", 6);
    assert!(wait_exit(&mut ff, Duration::from_secs(40)).is_some());
    let b = channel
        .wait_for(Duration::from_secs(30), || {
            let list = channel.admin_json("/api/admin/replays");
            list.as_array()?.iter().find(|r| r["status"] == "finished")?["id"].as_str().map(str::to_string)
        })
        .expect("the channel's replay");
    let media = in_bucket(&server, &format!("/c/c1/replay/{b}/0"));
    assert!(media.contains(&format!("/{BUCKET}/pfx/c/c1/replays/{b}/0/")), "{media}");
    let media = in_bucket(&server, &format!("/replay/{a}/0"));
    assert!(media.contains(&format!("/{BUCKET}/pfx/replays/{a}/0/")), "{media}");
    assert!(public.list(&server.client, &format!("pfx/replays/{b}/")).is_empty(), "not in the default's folder");
    let default_objects = public.list(&server.client, &format!("pfx/replays/{a}/"));
    assert!(default_objects.len() >= 3, "{default_objects:?}");
    drop(channel);

    // The channel's replay takes the default's id (its rows, its folders).
    let password = server.admin_password.clone();
    server.stop();
    let db = rusqlite::Connection::open(data.path().join("channels/c1/castd.db")).unwrap();
    db.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    db.execute(
        "UPDATE replays SET id = ?1, remote_base = replace(remote_base, '/replays/' || ?2 || '/', '/replays/' || ?1 || '/') WHERE id = ?2",
        [&a, &b],
    )
    .unwrap();
    db.execute("UPDATE replay_segments SET replay_id = ?1 WHERE replay_id = ?2", [&a, &b]).unwrap();
    drop(db);
    let local = data.path().join("channels/c1/replays");
    if local.join(&b).exists() {
        std::fs::rename(local.join(&b), local.join(&a)).unwrap();
    }
    let objects = s3dir.path().join(BUCKET).join("pfx/c/c1/replays");
    std::fs::rename(objects.join(&b), objects.join(&a)).unwrap();
    let mut server = Server::start_in(data.path(), &["--streamkey", KEY]);
    server.admin_password = password;
    let channel = server.channel("c1");

    // Each plays from its own objects.
    let media = in_bucket(&server, &format!("/c/c1/replay/{a}/0"));
    assert!(media.contains(&format!("/{BUCKET}/pfx/c/c1/replays/{a}/0/")), "{media}");
    for (t, path) in [(&channel, format!("/c/c1/replay/{a}")), (&server.default_channel(), format!("/replay/{a}"))] {
        let r = t.admin_post("/api/admin/replays/update", &json!({"id": a, "public": true}));
        assert_eq!(r.status().as_u16(), 200);
        let d = probe_duration(&server, &server.url(&path), false).unwrap_or_else(|| panic!("{path} plays"));
        assert!((d - 6.0).abs() <= SEGMENT, "{path}: {d} s");
    }
    // Deleting the channel's removes its objects only.
    let r = channel.admin_post("/api/admin/replays/delete", &json!({"id": a}));
    assert_eq!(r.status().as_u16(), 200);
    assert!(public.list(&server.client, &format!("pfx/c/c1/replays/{a}/")).is_empty());
    assert_eq!(public.list(&server.client, &format!("pfx/replays/{a}/")), default_objects, "the default's stay");
    let d = probe_duration(&server, &server.url(&format!("/replay/{a}")), false).expect("the default's still plays");
    assert!(server.get(&format!("/c/c1/replay/{a}/0")).status().is_client_error(), "the channel's is gone");
    assert!((d - 6.0).abs() <= SEGMENT, "{d} s");
}

/// `uri` of a playlist fetched from `playlist_url`, resolved as a player resolves it (RFC 3986: an
/// absolute URL as is, `/...` against the origin, anything else against the playlist's folder).
fn resolve(playlist_url: &str, uri: &str) -> String {
    let uri = uri.trim();
    if uri.contains("://") {
        return uri.to_string();
    }
    let scheme_end = playlist_url.find("://").map_or(0, |i| i + 3);
    let path_start = playlist_url[scheme_end..].find('/').map_or(playlist_url.len(), |i| scheme_end + i);
    if uri.starts_with('/') {
        return format!("{}{uri}", &playlist_url[..path_start]);
    }
    let without_query = playlist_url.split('?').next().unwrap_or(playlist_url);
    let folder_end = without_query.rfind('/').map_or(without_query.len(), |i| i + 1);
    format!("{}{uri}", &without_query[..folder_end])
}

#[test]
fn resolve_follows_a_players_rules() {
    let m = "http://127.0.0.1:8080/c/c1/replay/X?pass=p";
    assert_eq!(resolve(m, "/replay/X/0"), "http://127.0.0.1:8080/replay/X/0");
    assert_eq!(resolve(m, "X/0"), "http://127.0.0.1:8080/c/c1/replay/X/0");
    assert_eq!(resolve(m, "https://bucket/a.ts"), "https://bucket/a.ts");
}

each_channel!(a_replays_playlists_lead_to_its_own_channels_files);

/// Issue 53: a replay's JSON names its own channel's URLs, and a player that opens its `manifest` and
/// follows the master's variant URI and the media playlist's segment URIs (resolved against each
/// playlist's URL) stays under the channel's `/c/{slug}/` and gets the channel's recorded files (not
/// the default channel's replay of that id, behind the default channel's gate).
fn a_replays_playlists_lead_to_its_own_channels_files(on: On) {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let t = on.of(&server);
    t.set(
        "video/streamoutputvariants",
        json!([{"name": "source", "videoPassthrough": true, "audioPassthrough": true}]),
    );
    t.set("video/streamlatencylevel", json!(1));
    let key = if on.is_channel() { t.stream_key() } else { KEY.to_string() };
    let mut ff = publish(&server, &key, "320x180", 6);
    assert!(wait_exit(&mut ff, Duration::from_secs(40)).is_some());
    let replay = t
        .wait_for(Duration::from_secs(30), || {
            let list = t.admin_json("/api/admin/replays");
            list.as_array()?.iter().find(|r| r["status"] == "finished").cloned()
        })
        .expect("a finished replay");
    let id = replay["id"].as_str().unwrap().to_string();
    assert_eq!(replay["manifest"], t.path(&format!("/replay/{id}")).as_str(), "{replay}");
    assert_eq!(replay["download"], t.path(&format!("/replay/{id}/download.mp4")).as_str(), "{replay}");
    let one = t.admin_json(&format!("/api/replays/{id}"));
    assert_eq!(one["manifest"], replay["manifest"]);
    let r = t.admin_post("/api/admin/replays/update", &json!({"id": id, "public": true}));
    assert_eq!(r.status().as_u16(), 200);
    // A public replay: the player needs no credentials, so nothing but the URLs decides what it gets.
    let origin = format!("http://127.0.0.1:{}", t.web_port);
    let master_url = format!("{origin}{}", replay["manifest"].as_str().unwrap());
    let master = server.client.get(&master_url).send().unwrap();
    assert_eq!(master.status().as_u16(), 200, "{master_url}");
    let master = master.text().unwrap();
    let variants = playlist_uris(&master);
    assert_eq!(variants.len(), 1, "{master}");
    let media_url = resolve(&master_url, &variants[0]);
    assert_eq!(media_url, t.url(&format!("/replay/{id}/0")), "{master}");
    let media = server.client.get(&media_url).send().unwrap();
    assert_eq!(media.status().as_u16(), 200, "{media_url}");
    let media = media.text().unwrap();
    let segments = playlist_uris(&media);
    assert!(segments.len() >= 2, "{media}");
    let folder = t.data_dir.join("replays").join(&id).join("0");
    for uri in &segments {
        let url = resolve(&media_url, uri);
        assert!(url.starts_with(&t.url(&format!("/replay/{id}/0/"))), "{uri} in {media_url} -> {url}");
        let r = server.client.get(&url).send().unwrap();
        assert_eq!(r.status().as_u16(), 200, "{url}");
        let file = url.rsplit('/').next().unwrap().split('?').next().unwrap();
        let on_disk = std::fs::read(folder.join(file)).unwrap_or_else(|e| panic!("{file} in {folder:?}: {e}"));
        assert_eq!(r.bytes().unwrap().as_ref(), on_disk.as_slice(), "{url} is the channel's {file}");
    }
    let d = probe_duration(&server, &master_url, false).expect("ffprobe plays the replay from its manifest");
    assert!((d - 6.0).abs() <= SEGMENT, "{master_url}: {d} s");
}
