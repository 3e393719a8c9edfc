//! Issue 42: private channels. On a password channel every way out (HLS and its segments, WHEP, the chat
//! socket and history, status details, config, thumbnail and preview, replays, clips and their MP4
//! downloads) answers 401 with a StatusResponse without a viewing pass and works with one, whether the
//! pass comes as the cookie, `Authorization: Bearer` or `?pass=`; ffprobe given only the `?pass=` playlist
//! URL plays every variant (the pass travels into every URI); a revoked password, a rotated key and an
//! expired pass stop working at once; invite links give a pass once per use; wrong passwords are rate
//! limited. Each test runs on the default channel (the root's fast lanes) and on a channel (`/c/c1`).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::media::{publish_to, segments, wait_exit};
use common::{each_channel, On, Target};
use reqwest::blocking::Response;
use serde_json::{json, Value};

/// How a request carries the pass.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    Cookie,
    Bearer,
    Query,
}

fn cookie_name(t: &Target) -> String {
    match &t.slug {
        None => "castd_pass".into(),
        Some(slug) => format!("castd_pass_{slug}"),
    }
}

fn get_via(t: &Target, path: &str, pass: &str, via: Via) -> Response {
    let url = match via {
        Via::Query => {
            let sep = if path.contains('?') { '&' } else { '?' };
            t.url(&format!("{path}{sep}pass={pass}"))
        }
        _ => t.url(path),
    };
    let mut req = t.client.get(url);
    match via {
        Via::Cookie => req = req.header("cookie", format!("{}={pass}", cookie_name(t))),
        Via::Bearer => req = req.header("authorization", format!("Bearer {pass}")),
        _ => {}
    }
    req.send().unwrap()
}

/// A 401 of the gate: a StatusResponse that says a viewing pass is needed.
fn assert_needs_pass(r: Response, what: &str) {
    assert_eq!(r.status().as_u16(), 401, "{what}");
    let v: Value = r.json().unwrap_or(Value::Null);
    assert_eq!(v["success"], false, "{what}: {v}");
    assert!(v["message"].as_str().is_some_and(|m| m.contains("viewing pass")), "{what}: {v}");
}

fn unlock(t: &Target, password: &str) -> Response {
    t.post_json("/api/viewer/unlock", &json!({ "password": password }))
}

fn pass_of(r: Response) -> String {
    assert_eq!(r.status().as_u16(), 200);
    let cookie = r.headers().get("set-cookie").map(|v| v.to_str().unwrap().to_string()).expect("a cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
    let v: Value = r.json().unwrap();
    let pass = v["pass"].as_str().expect("a pass").to_string();
    assert!(cookie.contains(&pass), "the cookie carries the pass: {cookie}");
    assert!(v["expiresAt"].as_str().is_some());
    pass
}

fn ladder() -> Value {
    json!([
        {"name": "180p", "scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 200, "framerate": 15,
         "cpuUsageLevel": 0, "audioPassthrough": true},
        {"name": "90p", "scaledWidth": 160, "scaledHeight": 90, "videoBitrate": 100, "framerate": 15,
         "cpuUsageLevel": 0, "audioPassthrough": true}
    ])
}

/// Make `t` a password channel with one viewer password; its id.
fn make_private(t: &Target, password: &str) -> i64 {
    let r = t.admin_post("/api/admin/viewer/passwords/create", &json!({"password": password, "comment": "friends"}));
    assert_eq!(r.status().as_u16(), 200);
    let id = r.json::<Value>().unwrap()["id"].as_i64().expect("an id");
    t.set("visibility", json!("password"));
    id
}

/// The widths ffprobe reads from `url` (every variant of a master playlist).
fn probe_widths(url: &str) -> Vec<u64> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-rw_timeout", "10000000", "-show_entries", "stream=width", "-of", "json"])
        .arg(url)
        .output()
        .expect("ffprobe");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let mut widths: Vec<u64> =
        v["streams"].as_array().into_iter().flatten().filter_map(|s| s["width"].as_u64()).collect();
    widths.sort();
    widths.dedup();
    widths
}

each_channel!(every_way_out_needs_a_pass);

fn every_way_out_needs_a_pass(on: On) {
    let server = common::Server::start();
    let t = on.of(&server);
    t.set("video/streamoutputvariants", ladder());
    t.set("video/streamlatencylevel", json!(1));
    t.set("streamtitle", json!("The secret show"));
    make_private(&t, "open sesame");
    let key = t.stream_key();
    let url = format!("rtmp://127.0.0.1:{}/live/{key}", server.rtmp_port.unwrap());
    let mut ff = publish_to(&url, "flv", "320x180", 30);

    // Not unlocked: the page shell opens (it asks for the password), the status says online and nothing
    // else, and every way out is refused.
    let page = t.get("/");
    assert_eq!(page.status().as_u16(), 200);
    assert!(!page.text().unwrap().contains("The secret show"));
    let info = t.get_json("/api/viewer/access");
    assert_eq!(info["visibility"], "password");
    assert_eq!(info["unlocked"], false);
    assert_eq!(info["methods"], json!(["password", "invite"]));
    let live = t.wait_for(Duration::from_secs(40), || {
        let r = t.get("/api/status");
        let v: Value = r.json().ok()?;
        (v["online"] == true).then_some(v)
    });
    let status = live.expect("the status says online");
    assert_eq!(status["success"], false);
    let keys: Vec<&String> = status.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3, "online, and nothing of the stream: {status}");

    let r = unlock(&t, "wrong");
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.json::<Value>().unwrap()["message"], "wrong password");
    let pass = pass_of(unlock(&t, "open sesame"));
    let with = |path: &str| get_via(&t, path, &pass, Via::Cookie);

    // The live outputs, once they are there.
    let variant = t
        .wait_for(Duration::from_secs(40), || {
            let text = with("/hls/1/stream.m3u8").text().ok()?;
            (segments(&text).len() >= 2).then_some(text)
        })
        .expect("variant 1 has segments");
    let segment = format!("/hls/1/{}", segments(&variant)[0]);
    t.wait_for(Duration::from_secs(20), || (with("/thumbnail.jpg").status().as_u16() == 200).then_some(()))
        .expect("a thumbnail");
    let ways = [
        "/hls/stream.m3u8",
        "/hls/1/stream.m3u8",
        segment.as_str(),
        "/thumbnail.jpg",
        "/api/config",
        "/api/chat",
        "/api/emoji",
        "/api/replays",
        "/api/clips",
        "/api/video/variants",
        "/ws",
    ];
    for way in ways {
        assert_needs_pass(t.get(way), way);
        assert_needs_pass(get_via(&t, way, "cp1.forged.pass", Via::Cookie), way);
    }
    for via in [Via::Cookie, Via::Bearer, Via::Query] {
        for way in &ways[..5] {
            let r = get_via(&t, way, &pass, via);
            assert_eq!(r.status().as_u16(), 200, "{way} with the pass as {via:?}");
        }
    }
    // What a pass holder gets is not for shared caches.
    for way in [segment.as_str(), "/hls/1/stream.m3u8"] {
        let r = with(way);
        let cc = r.headers().get("cache-control").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        assert!(cc.starts_with("private"), "{way}: Cache-Control {cc}");
    }
    // The status with a pass: all of it.
    let full: Value = with("/api/status").json().unwrap();
    assert_eq!(full["online"], true);
    assert!(full.get("viewerCount").is_some(), "{full}");
    assert!(with("/api/config").json::<Value>().unwrap()["name"].is_string());
    // A page navigation without a pass goes to the channel's page (which asks for the password).
    let nav = t.client.get(t.url("/thumbnail.jpg")).header("accept", "text/html").send().unwrap();
    assert_eq!(nav.url().path(), format!("{}/", t.prefix), "redirected to the channel's page");

    // WHEP: an offer needs the pass (Bearer or cookie).
    let offer = common::sdp::whep_offer();
    let whep = |auth: Option<String>| {
        let mut req = t.client.post(t.url("/whep")).header("content-type", "application/sdp").body(offer.clone());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        req.send().unwrap()
    };
    assert_needs_pass(whep(None), "WHEP without a pass");
    let r = whep(Some(format!("Bearer {pass}")));
    assert_eq!(r.status().as_u16(), 201, "WHEP with the pass: {:?}", r.text());

    // Chat: registering and the socket need the pass; with it, the socket opens.
    assert_needs_pass(t.post_json("/api/chat/register", &json!({"displayName": "Eve"})), "chat register");
    let reg: Value = t
        .client
        .post(t.url("/api/chat/register"))
        .header("cookie", format!("{}={pass}", cookie_name(&t)))
        .json(&json!({"displayName": "Ann"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let token = reg["accessToken"].as_str().expect("registered with the pass").to_string();
    let ws_url = t.ws_url(&format!("/ws?accessToken={token}"));
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(ws_url.as_str()).unwrap();
    assert!(tungstenite::connect(req.clone()).is_err(), "no socket without the pass");
    req.headers_mut().insert("cookie", format!("{}={pass}", cookie_name(&t)).parse().unwrap());
    let (mut ws, _) = tungstenite::connect(req).expect("the socket opens with the pass");
    let _ = ws.close(None);

    // ffprobe, given only the ?pass= master playlist, reads every variant (the pass is in every URI).
    let master = get_via(&t, "/hls/stream.m3u8", &pass, Via::Query).text().unwrap();
    assert!(master.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).all(|l| l.contains("pass=")), "{master}");
    let widths = probe_widths(&t.url(&format!("/hls/stream.m3u8?pass={pass}")));
    assert_eq!(widths, vec![160, 320], "every variant plays from the ?pass= URL alone");
    assert!(probe_widths(&t.url("/hls/stream.m3u8")).is_empty(), "and nothing plays without it");

    // Replays and clips, with their downloads.
    assert!(wait_exit(&mut ff, Duration::from_secs(60)).is_some(), "the publisher ends");
    let sid = t
        .wait_for(Duration::from_secs(30), || {
            let list = t.admin_json("/api/admin/replays");
            list.as_array()?.iter().find(|r| r["status"] == "finished").map(|r| r["id"].as_str().unwrap().to_string())
        })
        .expect("a finished replay");
    let r = t.admin_post("/api/admin/replays/update", &json!({"id": sid, "public": true}));
    assert_eq!(r.status().as_u16(), 200);
    let made: Value =
        t.admin_post("/api/admin/clips/create", &json!({"streamId": sid, "clipTitle": "a moment", "relativeStartTimeSeconds": 2.0, "relativeEndTimeSeconds": 8.0})).json().unwrap();
    let clip = made["id"].as_str().expect("a clip").to_string();
    let downloads = [
        format!("/replay/{sid}"),
        format!("/replay/{sid}/download.mp4"),
        format!("/clip/{clip}"),
        format!("/clip/{clip}/download.mp4"),
    ];
    for way in &downloads {
        assert_needs_pass(t.get(way), way);
        let r = with(way);
        assert_eq!(r.status().as_u16(), 200, "{way} with the pass");
    }
    assert_eq!(with("/api/replays").json::<Value>().unwrap()[0]["id"], sid.as_str());

    // Revocation: deleting the password ends its passes at once.
    let id = t.admin_json("/api/admin/viewer/passwords")[0]["id"].as_i64().unwrap();
    let r = t.admin_post("/api/admin/viewer/passwords/delete", &json!({"id": id}));
    assert_eq!(r.status().as_u16(), 200);
    assert_needs_pass(with("/api/replays"), "after the password is deleted");
    assert_eq!(unlock(&t, "open sesame").status().as_u16(), 401, "the password is gone");
}

each_channel!(passes_expire_and_end_with_the_key);

fn passes_expire_and_end_with_the_key(on: On) {
    let server = common::Server::start();
    let t = on.of(&server);
    make_private(&t, "pw-one");
    t.set("viewer/passlifetime", json!(10));
    let short = pass_of(unlock(&t, "pw-one"));
    assert_eq!(get_via(&t, "/api/config", &short, Via::Cookie).status().as_u16(), 200);
    t.set("viewer/passlifetime", json!(3600));
    let long = pass_of(unlock(&t, "pw-one"));
    // The key: a new one ends every pass.
    let r = t.admin_post("/api/admin/viewer/rotatekey", &json!({}));
    assert_eq!(r.status().as_u16(), 200);
    assert_needs_pass(get_via(&t, "/api/config", &long, Via::Bearer), "after the key is rotated");
    let fresh = pass_of(unlock(&t, "pw-one"));
    assert_eq!(get_via(&t, "/api/config", &fresh, Via::Bearer).status().as_u16(), 200);
    // A stale cookie does not hide a good pass in the query.
    let r = t
        .client
        .get(t.url(&format!("/api/config?pass={fresh}")))
        .header("cookie", format!("{}={long}", cookie_name(&t)))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // The short pass was signed with the old key; a new short one expires by itself.
    t.set("viewer/passlifetime", json!(10));
    let short = pass_of(unlock(&t, "pw-one"));
    assert_eq!(get_via(&t, "/api/config", &short, Via::Query).status().as_u16(), 200);
    std::thread::sleep(Duration::from_secs(11));
    assert_needs_pass(get_via(&t, "/api/config", &short, Via::Query), "an expired pass");
    // The channel's admin needs no pass; a public channel needs none at all.
    assert_eq!(t.admin_get("/api/config").status().as_u16(), 200);
    t.set("visibility", json!("public"));
    assert_eq!(t.get("/api/config").status().as_u16(), 200);
    assert_eq!(t.get_json("/api/status")["online"], false);
}

each_channel!(invite_links_give_a_pass_per_use);

fn invite_links_give_a_pass_per_use(on: On) {
    let server = common::Server::start();
    let t = on.of(&server);
    make_private(&t, "unused-password");
    let made: Value = t
        .admin_post(
            "/api/admin/viewer/invites/create",
            &json!({"comment": "press", "expiresInSeconds": 3600, "maxUses": 1}),
        )
        .json()
        .unwrap();
    let invite = made["invite"].as_str().expect("an invite").to_string();
    assert!(made["url"].as_str().unwrap().ends_with(&format!("{}/?invite={invite}", t.prefix)), "{made}");
    // Opening the link: a cookie, and the same page without the secret in its address.
    let no_redirect = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = no_redirect.get(t.url(&format!("/?invite={invite}&x=1"))).header("accept", "text/html").send().unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers()["location"], format!("{}/?x=1", t.prefix));
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let pass = cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string();
    assert_eq!(get_via(&t, "/api/config", &pass, Via::Cookie).status().as_u16(), 200);
    // One use only.
    let again = t.post_json("/api/viewer/invite", &json!({ "invite": invite }));
    assert_eq!(again.status().as_u16(), 401);
    let listed = t.admin_json("/api/admin/viewer/invites");
    assert_eq!(listed[0]["uses"], 1);
    assert!(listed[0].get("invite").is_none(), "the secret is not listed: {listed}");
    // A link that works until it is revoked.
    let forever = t.admin_post("/api/admin/viewer/invites/create", &json!({"expiresInSeconds": 0}));
    assert!(forever.json::<Value>().unwrap()["expiresAt"].as_str().unwrap().starts_with("9999-"));
    // Revoking the link ends its passes.
    let r = t.admin_post("/api/admin/viewer/invites/delete", &json!({"id": made["id"]}));
    assert_eq!(r.status().as_u16(), 200);
    assert_needs_pass(get_via(&t, "/api/config", &pass, Via::Cookie), "after the invite is revoked");
}

each_channel!(wrong_passwords_are_rate_limited);

fn wrong_passwords_are_rate_limited(on: On) {
    let server = common::Server::start();
    let t = on.of(&server);
    make_private(&t, "the-right-one");
    let started = Instant::now();
    let mut codes = Vec::new();
    for _ in 0..7 {
        codes.push(unlock(&t, "guess").status().as_u16());
    }
    assert_eq!(&codes[..5], &[401; 5], "{codes:?}");
    assert!(codes[5..].contains(&429), "then 429: {codes:?}");
    let limited = unlock(&t, "the-right-one");
    assert_eq!(limited.status().as_u16(), 429, "even the right one waits");
    assert!(limited.headers().contains_key("retry-after"));
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// The settings as the admin sees them: the visibility, secrets masked; bad values refused.
#[test]
fn access_settings_are_validated_and_masked() {
    let server = common::Server::start();
    let t = On::Default.of(&server);
    for (setter, value) in [
        ("visibility", json!("secret")),
        ("viewer/passlifetime", json!(5)),
        ("viewer/federationposts", json!("all")),
        ("viewer/jwt", json!({"secret": "short"})),
        ("viewer/jwt", json!({"jwksUrl": "ftp://x"})),
        ("viewer/admissionhook", json!({"url": "not a url"})),
    ] {
        let r = t.admin_post(&format!("/api/admin/config/{setter}"), &json!({ "value": value }));
        assert_eq!(r.status().as_u16(), 400, "{setter} {value}");
    }
    t.set("viewer/jwt", json!({"secret": "0123456789abcdef0123456789abcdef", "issuer": "https://shop.example"}));
    t.set("viewer/admissionhook", json!({"url": "http://127.0.0.1:9/admit", "secret": "hook-secret"}));
    let cfg = t.admin_json("/api/admin/serverconfig");
    assert_eq!(cfg["access"]["visibility"], "public");
    assert_eq!(cfg["access"]["viewerJwt"]["secret"], "********");
    assert_eq!(cfg["access"]["viewerJwt"]["issuer"], "https://shop.example");
    assert_eq!(cfg["access"]["admissionHook"]["secret"], "********");
    // Saving the masked form keeps the secret.
    t.set("viewer/jwt", json!({"secret": "********", "issuer": "https://shop.example"}));
    let db = rusqlite::Connection::open(t.db_path()).unwrap();
    let stored: String = db.query_row("SELECT value FROM settings WHERE key = 'viewerJwt'", [], |r| r.get(0)).unwrap();
    assert!(stored.contains("0123456789abcdef0123456789abcdef"), "{stored}");
    // Only the admin: the viewer routes of the admin are refused without credentials.
    for path in ["/api/admin/viewer/passwords", "/api/admin/viewer/invites"] {
        assert_eq!(t.get(path).status().as_u16(), 401, "{path}");
    }
    let r = t.post_json("/api/admin/viewer/passwords/create", &json!({"password": "x"}));
    assert_eq!(r.status().as_u16(), 401);
}

each_channel!(ll_hls_parts_and_hints_carry_the_pass);

/// LL-HLS: with `?pass=`, the media playlist's parts, preload hint, map and rendition reports carry it,
/// a blocking reload with it is answered, and every URI it names is served with it and refused without.
fn ll_hls_parts_and_hints_carry_the_pass(on: On) {
    let server = common::Server::start();
    let t = on.of(&server);
    t.set(
        "video/streamoutputvariants",
        json!([{"name": "180p", "scaledWidth": 320, "scaledHeight": 180, "videoBitrate": 200, "framerate": 15,
                "cpuUsageLevel": 0, "audioPassthrough": true}]),
    );
    t.set("video/streamlatencylevel", json!(0));
    make_private(&t, "low latency");
    let pass = pass_of(unlock(&t, "low latency"));
    let key = t.stream_key();
    let mut ff =
        publish_to(&format!("rtmp://127.0.0.1:{}/live/{key}", server.rtmp_port.unwrap()), "flv", "320x180", 25);
    let playlist = t
        .wait_for(Duration::from_secs(40), || {
            let text = get_via(&t, "/hls/0/stream.m3u8", &pass, Via::Query).text().ok()?;
            (text.contains("#EXT-X-PART:") && text.contains("#EXT-X-PRELOAD-HINT")).then_some(text)
        })
        .expect("an LL-HLS playlist");
    assert_needs_pass(t.get("/hls/0/stream.m3u8"), "the LL-HLS playlist");
    let mut uris = Vec::new();
    for line in playlist.lines() {
        if let Some(rest) = line.split("URI=\"").nth(1) {
            uris.push(rest.split('"').next().unwrap().to_string());
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            uris.push(line.trim().to_string());
        }
    }
    assert!(uris.len() >= 3, "{playlist}");
    for uri in &uris {
        assert!(uri.contains(&format!("pass={pass}")), "{uri} carries the pass:\n{playlist}");
    }
    // Every part and segment named (not the preload hint, which may not exist yet) is served with the
    // pass it carries, and refused without it.
    let hint = playlist.lines().find(|l| l.starts_with("#EXT-X-PRELOAD-HINT")).unwrap();
    for uri in uris.iter().filter(|u| !hint.contains(u.as_str())).take(4) {
        let path = format!("/hls/0/{uri}");
        let r = t.get(&path);
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let bare = path.replace(&format!("pass={pass}"), "").replace("?&", "?");
        assert_needs_pass(t.get(bare.trim_end_matches('?')), &bare);
    }
    // A blocking reload for the next part, with the pass in the query.
    let msn: u64 = playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let segs = playlist.lines().filter(|l| l.starts_with("#EXTINF")).count() as u64;
    let r = get_via(&t, &format!("/hls/0/stream.m3u8?_HLS_msn={}&_HLS_part=0", msn + segs + 1), &pass, Via::Query);
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.text().unwrap().contains(&format!("pass={pass}")));
    let _ = wait_exit(&mut ff, Duration::from_secs(40));
}

/// The channel list: an unlisted channel is not in it; a password channel is, with its name and whether
/// it is live, but not its title, thumbnail or viewers; the server admin's list shows every visibility,
/// which lives in the channel's own settings (the channel's `visibility` setter and the server admin's
/// `channels/update` change the same thing).
#[test]
fn the_channel_list_shows_what_each_visibility_allows() {
    let server = common::Server::start();
    let create = |slug: &str, visibility: &str| {
        let body = json!({"slug": slug, "name": slug.to_uppercase(), "adminPassword": common::target::channel_password(slug), "visibility": visibility});
        assert_eq!(server.admin_post("/api/admin/channels/create", &body).status().as_u16(), 200, "{slug}");
    };
    create("open", "public");
    create("hidden", "unlisted");
    create("club", "password");
    server.channel("club").set("streamtitle", json!("Members only"));
    let list = server.get_json("/api/channels");
    let slugs: Vec<&str> = list.as_array().unwrap().iter().map(|c| c["slug"].as_str().unwrap()).collect();
    assert!(slugs.contains(&"open") && slugs.contains(&"club") && !slugs.contains(&"hidden"), "{list}");
    let club = list.as_array().unwrap().iter().find(|c| c["slug"] == "club").unwrap();
    assert_eq!(club["visibility"], "password");
    assert_eq!(club["streamTitle"], "");
    assert_eq!(club["thumbnail"], "");
    assert_eq!(server.channel("club").admin_json("/api/admin/serverconfig")["access"]["visibility"], "password");
    // The channel's own setter and the server admin's update are one setting.
    server.channel("hidden").set("visibility", json!("public"));
    let admin = server.admin_json("/api/admin/channels");
    let hidden = admin.as_array().unwrap().iter().find(|c| c["slug"] == "hidden").unwrap();
    assert_eq!(hidden["visibility"], "public");
    let r = server.admin_post("/api/admin/channels/update", &json!({"slug": "open", "visibility": "unlisted"}));
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(server.channel("open").admin_json("/api/admin/serverconfig")["access"]["visibility"], "unlisted");
    // The default channel follows its own setting too.
    server.set("visibility", json!("unlisted"));
    let list = server.get_json("/api/channels");
    assert!(!list.as_array().unwrap().iter().any(|c| c["slug"] == "default"), "{list}");
}

each_channel!(twenty_passwords_each_unlock_and_a_wrong_one_costs_no_bcrypt_per_password);

/// Issue 52: a wrong password is not bcrypt-verified against each of the channel's passwords (each
/// password keeps a keyed prefix of its own; only the rows with the given password's prefix are
/// verified). Timed: a wrong password answers sooner than five right ones would (it was 20 verifies).
fn twenty_passwords_each_unlock_and_a_wrong_one_costs_no_bcrypt_per_password(on: On) {
    let server = common::Server::start();
    let t = on.of(&server);
    let passwords: Vec<String> = (0..20).map(|i| format!("viewer password number {i}")).collect();
    for p in &passwords {
        let r = t.admin_post("/api/admin/viewer/passwords/create", &json!({"password": p, "comment": ""}));
        assert_eq!(r.status().as_u16(), 200);
    }
    t.set("visibility", json!("password"));
    let timed = |password: &str| {
        let started = Instant::now();
        let r = unlock(&t, password);
        (r, started.elapsed())
    };
    // Three wrong guesses (the backoff allows five): the usual answer, and each sooner than five
    // bcrypt verifies (one right unlock is one verify, so 20 verifies would be about 20 times one).
    let mut wrong = Duration::MAX;
    for i in 0..3 {
        let (r, took) = timed(&format!("a wrong guess {i}"));
        assert_eq!(r.status().as_u16(), 401);
        let v: Value = r.json().unwrap();
        assert_eq!((v["success"].as_bool(), v["message"].as_str()), (Some(false), Some("wrong password")), "{v}");
        wrong = wrong.min(took);
    }
    let mut one = Duration::MAX;
    for p in &passwords {
        let (r, took) = timed(p);
        pass_of(r);
        one = one.min(took);
    }
    assert!(wrong < one * 5, "a wrong password took {wrong:?}, a right one {one:?}");
    // The passes work.
    let pass = pass_of(unlock(&t, &passwords[19]));
    assert_eq!(get_via(&t, "/api/config", &pass, Via::Cookie).status().as_u16(), 200);
    assert_needs_pass(t.get("/api/config"), "no pass");
    // The prefixes' key is a file of the channel's, outside its database, owner only.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(t.data_dir.join("viewer-passwords.key")).expect("the key file").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
}
