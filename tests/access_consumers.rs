//! The features that act on a viewer's pass or a channel's visibility (issue #42), against the real
//! daemon: a chat socket ends when its pass is revoked (and a new one is refused), a member's pass
//! (a JWT's name) signs into chat under that name, a WHEP session ends with its pass, go-live posts
//! of channels that are not public go to followers only or nowhere, the channel list leaves out
//! unlisted channels and shows private ones without their title, the directory is not pinged for a
//! channel that is not public, and object storage is not used while a pass is needed.

mod common;

use std::time::{Duration, Instant};

use common::media::{publish, wait_exit};
use common::receiver::Receiver;
use common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
use common::Server;
use serde_json::{json, Value};
use tungstenite::client::IntoClientRequest;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::Message;

const KEY: &str = "access-consumers-key-1";

/// Whether the channel is live (a private channel's 401 status says that much).
fn online(server: &Server) -> bool {
    server.get("/api/status").json::<Value>().ok().and_then(|v| v["online"].as_bool()).unwrap_or(false)
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(15)).build().expect("client")
}

/// A password channel with one viewer password: (its id, a pass from it).
fn password_channel(server: &Server) -> (i64, String) {
    server.set("visibility", json!("password"));
    let r = server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "letmein", "comment": "t"}));
    assert!(r.status().is_success(), "create password: {}", r.status());
    let id = r.json::<Value>().expect("json")["id"].as_i64().expect("id");
    let pass = unlock(server);
    (id, pass)
}

fn unlock(server: &Server) -> String {
    let r = server.post_json("/api/viewer/unlock", &json!({"password": "letmein"}));
    assert_eq!(r.status().as_u16(), 200, "unlock");
    r.json::<Value>().expect("json")["pass"].as_str().expect("pass").to_string()
}

fn cookie(pass: &str) -> String {
    format!("castd_pass={pass}")
}

/// `POST /api/chat/register` with the pass cookie: (status, body).
fn register(server: &Server, pass: Option<&str>, name: Option<&str>) -> (u16, Value) {
    let mut req = client().post(server.url("/api/chat/register")).json(&json!({"displayName": name}));
    if let Some(p) = pass {
        req = req.header("Cookie", cookie(p));
    }
    let r = req.send().expect("register");
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

type Ws = tungstenite::WebSocket<MaybeTlsStream<std::net::TcpStream>>;

/// Open `/ws` with the pass cookie: the socket, or the refusal's status and body.
fn open_ws(server: &Server, token: &str, pass: Option<&str>) -> Result<Ws, (u16, Value)> {
    let url = server.url(&format!("/ws?accessToken={token}")).replacen("http", "ws", 1);
    let mut req = url.into_client_request().expect("request");
    if let Some(p) = pass {
        req.headers_mut().insert("Cookie", cookie(p).parse().expect("header"));
    }
    match tungstenite::connect(req) {
        Ok((ws, _)) => {
            if let MaybeTlsStream::Plain(t) = ws.get_ref() {
                t.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
            }
            Ok(ws)
        }
        Err(tungstenite::Error::Http(resp)) => {
            let status = resp.status().as_u16();
            let body = resp.body().as_ref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
            Err((status, body))
        }
        Err(e) => panic!("websocket: {e}"),
    }
}

/// The events read until `f` matches one, within `timeout`.
fn next_event(ws: &mut Ws, timeout: Duration, f: impl Fn(&Value) -> bool) -> Option<Value> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(t)) => {
                for line in t.as_str().lines() {
                    if let Ok(v) = serde_json::from_str::<Value>(line) {
                        if f(&v) {
                            return Some(v);
                        }
                    }
                }
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("the socket failed before the event: {e}"),
        }
    }
    None
}

#[test]
fn a_chat_socket_ends_with_its_viewing_pass() {
    let server = Server::start();
    let (id, pass) = password_channel(&server);

    // Without a pass: no registration, no socket (401 with a StatusResponse).
    let (status, body) = register(&server, None, Some("anon"));
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["success"], false, "{body}");
    let (_, user) = register(&server, Some(&pass), Some("viewer1"));
    let token = user["accessToken"].as_str().expect("accessToken").to_string();
    match open_ws(&server, &token, None) {
        Err((status, body)) => {
            assert_eq!(status, 401);
            assert_eq!(body["success"], false, "{body}");
        }
        Ok(_) => panic!("a socket without a pass on a password channel"),
    }

    // With the pass: connected.
    let mut ws = open_ws(&server, &token, Some(&pass)).expect("a socket with the pass");
    next_event(&mut ws, Duration::from_secs(5), |v| v["type"] == "CONNECTED_USER_INFO").expect("CONNECTED_USER_INFO");

    // The password is deleted: the socket is closed with a reason, within a few seconds.
    let r = server.admin_post("/api/admin/viewer/passwords/delete", &json!({"id": id}));
    assert!(r.status().is_success(), "delete: {}", r.status());
    let deleted = Instant::now();
    let reason = loop {
        assert!(deleted.elapsed() < Duration::from_secs(5), "the socket is still open 5 s after the revocation");
        match ws.read() {
            Ok(Message::Close(frame)) => break frame.map(|f| (u16::from(f.code), f.reason.to_string())),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("the socket ended without a close frame: {e}"),
        }
    };
    let (code, reason) = reason.expect("a close frame with a status");
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("viewing pass has ended"), "{reason}");

    // The pass no longer opens a socket.
    match open_ws(&server, &token, Some(&pass)) {
        Err((status, body)) => {
            assert_eq!(status, 401, "{body}");
            assert_eq!(body["success"], false, "{body}");
        }
        Ok(_) => panic!("a revoked pass opened a socket"),
    }
}

/// An HS256 JWT signed with `secret`.
fn hs256(secret: &str, claims: &Value) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{head}.{body}");
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

#[test]
fn a_members_pass_signs_into_chat_under_the_name_it_carries() {
    let server = Server::start();
    let secret = "a-test-secret-of-more-than-32-characters-long";
    server.admin_post("/api/admin/config/viewer/jwt", &json!({"value": {"secret": secret}}));
    server.set("visibility", json!("token"));
    let exp = chrono::Utc::now().timestamp() + 3600;
    let jwt = hs256(secret, &json!({"sub": "member-42", "exp": exp, "name": "Ada Member"}));
    let r = server.post_json("/api/viewer/token", &json!({"jwt": jwt}));
    assert_eq!(r.status().as_u16(), 200, "token exchange");
    let pass = r.json::<Value>().expect("json")["pass"].as_str().expect("pass").to_string();

    // Registering with the member's pass: an authenticated user with the member's name.
    let (status, user) = register(&server, Some(&pass), Some("something else"));
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["displayName"], "Ada Member", "{user}");
    let token = user["accessToken"].as_str().expect("accessToken").to_string();
    let mut ws = open_ws(&server, &token, Some(&pass)).expect("socket");
    let info = next_event(&mut ws, Duration::from_secs(5), |v| v["type"] == "CONNECTED_USER_INFO").expect("info");
    assert_eq!(info["user"]["displayName"], "Ada Member", "{info}");
    assert_eq!(info["user"]["authenticated"], true, "{info}");
}

#[test]
fn a_whep_session_ends_with_its_viewing_pass() {
    let server = Server::start_with_args(&["--streamkey", KEY]);
    let (id, pass) = password_channel(&server);
    // A second audience's password, whose pass stays valid.
    let r = server.admin_post("/api/admin/viewer/passwords/create", &json!({"password": "other", "comment": "b"}));
    assert!(r.status().is_success());
    let r = server.post_json("/api/viewer/unlock", &json!({"password": "other"}));
    let other = r.json::<Value>().expect("json")["pass"].as_str().expect("pass").to_string();
    let mut ffmpeg = publish(&server, KEY, "320x240", 60);
    let live = server.wait_for(Duration::from_secs(40), || online(&server).then_some(()));
    assert!(live.is_some(), "the RTMP publish goes live; log:\n{}", server.log_text());
    let linked = server
        .wait_for(Duration::from_secs(20), || server.log_text().contains("real-time output connected").then_some(()));
    assert!(linked.is_some(), "the worker's real-time output connects; log:\n{}", server.log_text());

    let offer = |pass: Option<&str>| {
        let mut req = client()
            .post(server.url("/whep"))
            .header("Content-Type", "application/sdp")
            .body(common::sdp::whep_offer());
        if let Some(p) = pass {
            req = req.header("Authorization", format!("Bearer {p}"));
        }
        req.send().expect("POST /whep")
    };
    let r = offer(None);
    assert_eq!(r.status().as_u16(), 401, "no pass, no session");
    let r = offer(Some(&pass));
    assert_eq!(r.status().as_u16(), 201, "the pass opens a session");
    let location = r.headers()["location"].to_str().expect("Location").to_string();

    // The password is deleted: the session ends (well before its 15 s connect timeout).
    let r = server.admin_post("/api/admin/viewer/passwords/delete", &json!({"id": id}));
    assert!(r.status().is_success());
    let deleted = Instant::now();
    let ended = server.wait_for(Duration::from_secs(5), || {
        server.log_text().contains("whep session closed: its viewing pass ended").then_some(())
    });
    assert!(ended.is_some(), "the session ends with its pass; log:\n{}", server.log_text());
    // Gone: its resource is no more (asked with another audience's pass).
    let gone = server.wait_for(Duration::from_secs(3), || {
        let r = client()
            .delete(server.url(&location))
            .header("Authorization", format!("Bearer {other}"))
            .send()
            .expect("DELETE");
        (r.status().as_u16() == 404).then_some(())
    });
    assert!(gone.is_some(), "the session's resource is gone");
    assert!(deleted.elapsed() < Duration::from_secs(10), "ended by the pass, not the connect timeout");
    assert_eq!(offer(Some(&pass)).status().as_u16(), 401, "a revoked pass opens no session");
    let _ = ffmpeg.kill();
    let _ = wait_exit(&mut ffmpeg, Duration::from_secs(5));
}

/// Go live, wait until online, and return the publisher.
fn go_live(server: &Server) -> std::process::Child {
    let ff = publish(server, KEY, "320x240", 60);
    let live = server.wait_for(Duration::from_secs(40), || online(server).then_some(()));
    assert!(live.is_some(), "the publish goes live; log:\n{}", server.log_text());
    ff
}

fn stop_live(server: &Server, mut ff: std::process::Child) {
    let _ = ff.kill();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
    let offline = server.wait_for(Duration::from_secs(20), || (!online(server)).then_some(()));
    assert!(offline.is_some(), "offline after the publisher went away");
}

#[test]
fn go_live_posts_of_channels_that_are_not_public_go_to_followers_or_nowhere() {
    const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
    let server = Server::start_with_args(&["--streamkey", KEY, "--federation-allow-http-loopback"]);
    let alice = common::fedactor::followed_by(&server, "alice");
    server.set("streamtitle", json!("Members-only title"));

    // Unlisted (followers by default): the post goes to the followers only.
    server.set("visibility", json!("unlisted"));
    let seen = alice.received().len();
    let ff = go_live(&server);
    let v = server
        .wait_for(Duration::from_secs(20), || {
            alice.received().into_iter().skip(seen).map(|r| r.json()).find(|v| v["type"] == "Create")
        })
        .unwrap_or_else(|| panic!("a go-live post; log:\n{}", server.log_text()));
    let followers = format!("{}/federation/user/streamer/followers", server.base);
    assert_eq!(v["to"], json!([followers]), "{v}");
    assert!(!v.to_string().contains(PUBLIC), "no public addressing: {v}");
    assert!(v["object"]["content"].as_str().unwrap_or_default().contains("Members-only title"), "{v}");
    stop_live(&server, ff);

    // Password, followers: to the followers, without the stream title.
    server.set("visibility", json!("password"));
    let seen = alice.received().len();
    let ff = go_live(&server);
    let v = server
        .wait_for(Duration::from_secs(20), || {
            alice.received().into_iter().skip(seen).map(|r| r.json()).find(|v| v["type"] == "Create")
        })
        .unwrap_or_else(|| panic!("a second go-live post; log:\n{}", server.log_text()));
    assert_eq!(v["to"], json!([followers]), "{v}");
    assert!(!v.to_string().contains(PUBLIC), "no public addressing: {v}");
    assert!(!v.to_string().contains("Members-only title"), "a private channel's title stays private: {v}");
    stop_live(&server, ff);

    // None: no post at all.
    server.set("viewer/federationposts", json!("none"));
    let seen = alice.received().iter().filter(|r| r.json()["type"] == "Create").count();
    let ff = go_live(&server);
    std::thread::sleep(Duration::from_secs(6));
    let now = alice.received().iter().filter(|r| r.json()["type"] == "Create").count();
    assert_eq!(now, seen, "no go-live post when the channel says none");
    assert!(server.log_text().contains("no go-live post: the channel is not public"), "{}", server.log_text());
    stop_live(&server, ff);
}

/// A channel that is not public announces its scheduled streams to its followers only, or not at all.
#[test]
fn scheduled_stream_posts_of_channels_that_are_not_public_go_to_followers_or_nowhere() {
    const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
    let server = Server::start_with_args(&["--federation-allow-http-loopback"]);
    let alice = common::fedactor::followed_by(&server, "alice");
    server.set("schedule/enabled", json!(true));
    server.set("visibility", json!("password"));
    let start = (chrono::Utc::now() + chrono::TimeDelta::days(2)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let event = |name: &str| {
        let body = json!({"name": name, "start": start, "durationMinutes": 60, "timezone": "UTC"});
        let r = server.admin_post("/api/admin/schedule/event", &body);
        assert!(r.status().is_success(), "{:?}", r.text());
    };
    let creates = || {
        alice
            .received()
            .into_iter()
            .map(|r| r.json())
            .filter(|v| v["type"] == "Create" && v["object"]["type"] == "Event")
            .collect::<Vec<_>>()
    };
    event("Members' show");
    let made = server
        .wait_for(Duration::from_secs(20), || creates().into_iter().next())
        .unwrap_or_else(|| panic!("the Event is announced; log:\n{}", server.log_text()));
    let followers = format!("{}/federation/user/streamer/followers", server.base);
    assert_eq!(made["to"], json!([followers]), "{made}");
    assert!(!made.to_string().contains(PUBLIC), "no public addressing: {made}");
    // None: nothing more is announced.
    server.set("viewer/federationposts", json!("none"));
    event("Another members' show");
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(creates().len(), 1, "no scheduled-stream post when the channel says none");
    assert!(server.log_text().contains("no scheduled-stream post: the channel is not public"));
}

#[test]
fn channel_lists_and_the_directory_leave_out_what_is_not_public() {
    let dir = Receiver::start_answering(&[200; 64], "application/json", r#"{"success":true,"key":"k1"}"#);
    let server = Server::start_with_env(&[], &[("CASTD_YP_PING_SECS", "1")]);
    server.set("streamtitle", json!("Secret plans"));
    server.set("visibility", json!("unlisted"));
    server.set("serverurl", json!(server.base));
    server.set("directoryurl", json!(dir.url));
    server.set("directoryenabled", json!(true));

    // Unlisted: not in the list, no pings.
    let list = server.get_json("/api/channels");
    assert!(list.as_array().expect("list").iter().all(|c| c["slug"] != "default"), "{list}");
    std::thread::sleep(Duration::from_secs(3));
    assert!(dir.all().iter().all(|r| !r.path.ends_with("/api/ping")), "no directory ping while unlisted");

    // Password: listed with its visibility, without its title and thumbnail; still no pings.
    server.set("visibility", json!("password"));
    let list = server.get_json("/api/channels");
    let me = list.as_array().expect("list").iter().find(|c| c["slug"] == "default").cloned().expect("listed");
    assert_eq!(me["visibility"], "password", "{me}");
    assert_eq!(me["streamTitle"], "", "{me}");
    assert_eq!(me["thumbnail"], "", "{me}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(dir.all().iter().all(|r| !r.path.ends_with("/api/ping")), "no directory ping while private");

    // Public: everything as before, and the directory is pinged.
    server.set("visibility", json!("public"));
    let list = server.get_json("/api/channels");
    let me = list.as_array().expect("list").iter().find(|c| c["slug"] == "default").cloned().expect("listed");
    assert_eq!(me["visibility"], "public", "{me}");
    assert_eq!(me["streamTitle"], "Secret plans", "{me}");
    let ping = dir.wait_for(Duration::from_secs(10), |r| r.path.ends_with("/api/ping"));
    assert!(ping.is_some(), "a public channel pings the directory; log:\n{}", server.log_text());
}

fn s3_settings(s3: &S3Server) -> Value {
    json!({
        "enabled": true,
        "endpoint": s3.endpoint(),
        "accessKey": ACCESS_KEY,
        "secret": SECRET_KEY,
        "bucket": BUCKET,
        "region": "us-east-1",
        "acl": "public-read",
        "pathPrefix": "/live/",
        "forcePathStyle": true,
    })
}

fn uris(playlist: &str) -> Vec<String> {
    playlist.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect()
}

#[test]
fn a_channel_behind_a_pass_is_served_from_castd_not_the_bucket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = S3Server::start(dir.path());
    let public = s3.public();
    let http = client();
    let server = Server::start_with_args(&["--streamkey", KEY]);
    server.set(
        "video/streamoutputvariants",
        json!([{"name": "low", "scaledWidth": 320, "videoBitrate": 300, "framerate": 15, "cpuUsageLevel": 0}]),
    );
    server.set("video/streamlatencylevel", json!(1));
    server.set("s3", s3_settings(&s3));
    let (_, pass) = password_channel(&server);
    let playlist = |pass: &str| {
        let r = http.get(server.url("/hls/0/stream.m3u8")).header("Cookie", cookie(pass)).send().expect("GET");
        r.status().is_success().then(|| r.text().unwrap_or_default())
    };

    let mut ff = publish(&server, KEY, "640x360", 60);
    // The served playlist names local segments, which castd serves; nothing goes to the bucket.
    let local = server
        .wait_for(Duration::from_secs(40), || playlist(&pass).filter(|p| uris(p).len() >= 3))
        .unwrap_or_else(|| panic!("no playlist; log:\n{}", server.log_text()));
    assert!(uris(&local).iter().all(|u| !u.starts_with("http")), "no bucket URL: {local}");
    let seg = uris(&local).pop().expect("a segment");
    let r = http.get(server.url(&format!("/hls/0/{seg}"))).header("Cookie", cookie(&pass)).send().expect("GET");
    assert_eq!(r.status(), 200, "the local segment is served");
    assert!(public.list(&http, "live/hls").is_empty(), "nothing uploaded while private");

    // Public again: the bucket takes over (the store works: the check above could fail).
    server.set("visibility", json!("public"));
    let bucket = server
        .wait_for(Duration::from_secs(40), || {
            text_of(&server, "/hls/0/stream.m3u8").filter(|p| uris(p).first().is_some_and(|u| u.starts_with("http")))
        })
        .unwrap_or_else(|| panic!("no playlist naming the bucket once public; log:\n{}", server.log_text()));
    assert!(!public.list(&http, "live/hls").is_empty(), "{bucket}");

    // Private again: at once no bucket URL is served.
    server.set("visibility", json!("password"));
    let pass = unlock(&server);
    let local = playlist(&pass).expect("playlist");
    assert!(uris(&local).iter().all(|u| !u.starts_with("http")), "no bucket URL once private again: {local}");
    let _ = ff.kill();
    let _ = wait_exit(&mut ff, Duration::from_secs(5));
}

fn text_of(server: &Server, path: &str) -> Option<String> {
    let r = server.get(path);
    r.status().is_success().then(|| r.text().unwrap_or_default())
}
