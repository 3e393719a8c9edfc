//! A cluster edge enforces the viewing pass itself (`access::edge`, `cluster::edge_access`): the pass is
//! checked at the edge, before its HLS cache, its own chat socket or the origin see the request.
//!
//! One origin and one edge over a real `redis-server`; the origin's HLS is files in its HLS folders (no
//! publisher needed). The default channel set to `password` on the origin, then at the EDGE: the master
//! playlist, a media playlist and a segment without a pass → 401; with the pass (cookie, `?pass=`,
//! Bearer) → 200, the `?pass=` playlist carrying the pass in its URIs; a wrong or forged pass → 401; a
//! segment (and a playlist) the edge has cached from a viewer with a pass → 401 to a viewer without
//! one; the chat socket the edge holds needs the pass; a channel (`/c/music`) the edge serves has its
//! own pass (its chat socket too, which the edge holds in the channel's room); the password deleted on
//! the origin → the edge refuses its pass within 15 s, cached segment included.

mod common;

use std::time::{Duration, Instant};

use common::redis::Redis;
use common::Server;
use reqwest::blocking::{Client, Response};
use serde_json::{json, Value};

const SECRET: &str = "s3cret-for-the-access-edge-test";
const PASSWORD: &str = "opensesame-for-viewers";
const MASTER: &str = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-STREAM-INF:BANDWIDTH=1200000\n0/stream.m3u8\n";
const MEDIA: &str = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:1\n\
                     #EXTINF:2.0,\nseg1.ts\n#EXTINF:2.0,\nseg2.ts\n#EXTINF:2.0,\nseg3.ts\n";

/// HLS files as the transcoder leaves them: a master, one variant, three segments.
fn write_hls(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("0")).unwrap();
    std::fs::write(dir.join("stream.m3u8"), MASTER).unwrap();
    std::fs::write(dir.join("0/stream.m3u8"), MEDIA).unwrap();
    for n in 1..=3 {
        // An MPEG-TS sync byte, then anything.
        let mut seg = vec![0x47u8];
        seg.extend(format!("segment {n} of {}", dir.display()).bytes());
        std::fs::write(dir.join(format!("0/seg{n}.ts")), seg).unwrap();
    }
}

/// A client without a cookie store that follows no redirect: each request carries exactly what the test
/// gives it, and each answer is the edge's own.
fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(30)).redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

fn get(c: &Client, base: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = c.get(format!("{base}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().unwrap()
}

fn status(c: &Client, base: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    get(c, base, path, headers).status().as_u16()
}

/// The refusal's body: the StatusResponse.
fn refused(r: Response, what: &str) {
    assert_eq!(r.status(), 401, "{what}");
    let v: Value = r.json().unwrap_or_else(|e| panic!("{what}: a JSON body: {e}"));
    assert_eq!(v["success"], false, "{what}: {v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {v}");
}

/// Unlock `base` (a channel's root at the edge) with the password: the pass, and the cookie line.
fn unlock(c: &Client, base: &str) -> (String, String) {
    let r = c.post(format!("{base}/api/viewer/unlock")).json(&json!({ "password": PASSWORD })).send().unwrap();
    assert_eq!(r.status(), 200, "unlock through the edge");
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("castd_pass"))
        .expect("the origin's Set-Cookie passes through the edge")
        .to_string();
    let v: Value = r.json().unwrap();
    let pass = v["pass"].as_str().expect("a pass").to_string();
    let pair = cookie.split(';').next().unwrap().to_string();
    assert_eq!(pair.split_once('=').unwrap().1, pass, "the cookie carries the pass");
    (pass, pair)
}

/// Wait until `f` holds (polling every 200 ms); how long it took.
fn within(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    t0.elapsed()
}

#[test]
fn a_cluster_edge_checks_the_viewing_pass_itself() {
    let redis = Redis::start();
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("cluster-secret");
    std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
    let (url, secret) = (redis.url(), secret.to_str().unwrap().to_string());
    let origin = Server::start_with_args(&["--redis-url", &url, "--cluster-secret", &secret]);
    let edge = Server::start_with_args(&["--origin", &origin.base, "--redis-url", &url, "--cluster-secret", &secret]);
    let c = client();
    let e = edge.base.as_str();
    write_hls(&origin.data_dir.join("hls"));

    // The origin's access snapshot needs the cluster secret, and an edge does not pass it on.
    let r = origin.client.get(origin.url("/api/cluster/access")).header("x-castd-cluster-secret", "nope").send();
    assert_eq!(r.unwrap().status(), 403, "a wrong cluster secret is refused");
    assert_eq!(status(&c, e, "/api/cluster/access", &[("x-castd-cluster-secret", SECRET)]), 404);

    // Public: the edge serves the origin's HLS to anyone (and keeps the segment in its cache).
    assert_eq!(status(&c, e, "/hls/stream.m3u8", &[]), 200, "a public channel through the edge");
    assert_eq!(status(&c, e, "/hls/0/seg3.ts", &[]), 200, "a public segment through the edge");

    // The default channel made private on the origin, with a viewer password.
    origin.set("visibility", json!("password"));
    let r = origin.admin_post("/api/admin/viewer/passwords/create", &json!({"password": PASSWORD, "comment": "fans"}));
    assert_eq!(r.status(), 200, "create a viewer password");
    let password_id = r.json::<Value>().unwrap()["id"].as_i64().expect("an id");
    // The segment the edge cached while the channel was public: only the edge's own check refuses it.
    let took = within(Duration::from_secs(15), "the edge takes the channel's new visibility", || {
        status(&c, e, "/hls/0/seg3.ts", &[]) == 401
    });
    eprintln!("the edge refused a passless segment {took:?} after the channel turned private");

    // Without a pass: 401 with a StatusResponse, for every HLS way out; a page navigation to one is
    // sent to the channel's page.
    for path in ["/hls/stream.m3u8", "/hls/0/stream.m3u8", "/hls/0/seg1.ts", "/api/chat"] {
        refused(get(&c, e, path, &[]), &format!("{path} without a pass at the edge"));
    }
    let nav = get(&c, e, "/hls/0/stream.m3u8", &[("accept", "text/html")]);
    assert_eq!(nav.status(), 303, "a page navigation without a pass: {:?}", nav.headers());
    assert_eq!(nav.headers()["location"], "/");
    // The page shell and the unlock routes stay open.
    // (200, or 503 from a binary built without its web UI.)
    assert!([200, 503].contains(&status(&c, e, "/", &[])), "the viewer page (it shows the prompt)");
    assert_eq!(get(&c, e, "/api/viewer/access", &[]).json::<Value>().unwrap()["visibility"], "password");

    // The pass, from the origin through the edge.
    let wrong = c.post(format!("{e}/api/viewer/unlock")).json(&json!({"password": "not it"})).send().unwrap();
    assert_eq!(wrong.status(), 401, "a wrong password");
    let (pass, cookie) = unlock(&c, e);
    let with_cookie = [("cookie", cookie.as_str())];
    let bearer = format!("Bearer {pass}");
    for path in ["/hls/stream.m3u8", "/hls/0/stream.m3u8", "/hls/0/seg1.ts"] {
        assert_eq!(status(&c, e, path, &with_cookie), 200, "{path} with the cookie");
        assert_eq!(status(&c, e, &format!("{path}?pass={pass}"), &[]), 200, "{path}?pass=");
        assert_eq!(status(&c, e, path, &[("authorization", &bearer)]), 200, "{path} with a Bearer pass");
    }
    let carried = get(&c, e, &format!("/hls/stream.m3u8?pass={pass}"), &[]).text().unwrap();
    assert!(carried.contains(&format!("0/stream.m3u8?pass={pass}")), "the pass travels in the URIs: {carried}");

    // A wrong or forged pass.
    let (head, sig) = pass.rsplit_once('.').unwrap();
    let forged_sig = format!("{head}.{}", "A".repeat(sig.len()));
    let mut claims: Value = {
        use base64::Engine;
        let payload = head.strip_prefix("cp1.").unwrap();
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
    };
    claims["e"] = json!(claims["e"].as_i64().unwrap() + 86_400);
    let resigned_payload = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap())
    };
    let changed_claims = format!("cp1.{resigned_payload}.{}", pass.rsplit_once('.').unwrap().1);
    for bad in [forged_sig.as_str(), changed_claims.as_str(), "cp1.nonsense.x", "not-a-pass"] {
        refused(get(&c, e, &format!("/hls/0/seg1.ts?pass={bad}"), &[]), &format!("a forged pass {bad}"));
        let bad_cookie = format!("castd_pass={bad}");
        refused(get(&c, e, "/hls/0/seg1.ts", &[("cookie", &bad_cookie)]), "a forged pass in the cookie");
        // A bad cookie does not hide a good pass in the query (the gate's order, at the edge too).
        let both = status(&c, e, &format!("/hls/0/seg1.ts?pass={pass}"), &[("cookie", &bad_cookie)]);
        assert_eq!(both, 200, "a good ?pass= beside a bad cookie {bad}");
    }

    // What the edge has cached from a viewer with a pass is not served to one without: the edge itself
    // checks (the origin never sees these requests).
    assert_eq!(status(&c, e, "/hls/0/seg2.ts", &with_cookie), 200, "seg2 with the pass (now in the edge's cache)");
    let cached = get(&c, e, "/hls/0/seg2.ts", &with_cookie);
    assert!(cached.headers()["cache-control"].to_str().unwrap().contains("max-age"), "a cacheable segment");
    refused(get(&c, e, "/hls/0/seg2.ts", &[]), "a cached segment without a pass");
    assert_eq!(status(&c, e, "/hls/0/stream.m3u8", &with_cookie), 200);
    refused(get(&c, e, "/hls/0/stream.m3u8", &[]), "a cached playlist without a pass");
    // A playlist asked for with `?pass=` is only ever given to that pass.
    assert_eq!(status(&c, e, &format!("/hls/stream.m3u8?pass={pass}"), &[]), 200);
    let plain = get(&c, e, "/hls/stream.m3u8", &with_cookie).text().unwrap();
    assert!(!plain.contains("pass="), "a cookie viewer's playlist carries no one's pass: {plain}");

    // The chat socket this edge holds needs the pass too.
    let reg = c.post(format!("{e}/api/chat/register")).header("cookie", &cookie).json(&json!({})).send().unwrap();
    assert_eq!(reg.status(), 200, "register through the edge with the pass");
    let token = reg.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let ws =
        |query: &str| tungstenite::connect(format!("ws://127.0.0.1:{}/ws?accessToken={token}{query}", edge.web_port));
    match ws("") {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 401, "the edge's chat socket without a pass"),
        other => panic!("a chat socket at the edge without a pass: {:?}", other.map(|_| ())),
    }
    let (mut sock, _) = ws(&format!("&pass={pass}")).expect("the edge's chat socket with the pass");
    let _ = sock.close(None);

    // An invite link opened at the edge: the origin redeems it (its cookie comes back through the edge),
    // and the new invite's pass works at the edge at once, before the edge's next snapshot has its grant.
    let r = origin.admin_post(
        "/api/admin/viewer/invites/create",
        &json!({"comment": "a friend", "expiresInSeconds": 3600, "maxUses": 0}),
    );
    assert_eq!(r.status(), 200, "create an invite link");
    let invite = r.json::<Value>().unwrap()["invite"].as_str().expect("the invite").to_string();
    let opened = get(&c, e, &format!("/?invite={invite}"), &[("accept", "text/html")]);
    assert_eq!(opened.status(), 303, "the invite link's page is redirected without it");
    assert_eq!(opened.headers()["location"], "/");
    let invited = opened
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("castd_pass="))
        .expect("the invite's pass in a cookie")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(status(&c, e, "/hls/0/seg1.ts", &[("cookie", &invited)]), 200, "the invite's pass at the edge");
    let invited_pass = invited.split_once('=').unwrap().1.to_string();
    let (mut sock, _) = ws(&format!("&pass={invited_pass}")).expect("the edge's chat socket with the invite's pass");
    let _ = sock.close(None);

    // A channel the edge serves (`/c/music`) has a pass of its own.
    let r = origin.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": "music", "name": "Music", "adminPassword": "music-admin-pw"}),
    );
    assert!(r.status().is_success(), "create the channel: {}", r.status());
    write_hls(&origin.data_dir.join("channels/music/hls"));
    let music = format!("{e}/c/music");
    within(Duration::from_secs(15), "the edge knows the new channel (public)", || {
        status(&c, &music, "/hls/0/seg1.ts", &[]) == 200
    });
    let r = origin.admin_post("/c/music/api/admin/config/visibility", &json!({"value": "password"}));
    assert!(r.status().is_success(), "music private: {}", r.status());
    let r =
        origin.admin_post("/c/music/api/admin/viewer/passwords/create", &json!({"password": PASSWORD, "comment": ""}));
    assert_eq!(r.status(), 200);
    within(Duration::from_secs(15), "the edge takes the channel's visibility", || {
        status(&c, &music, "/hls/0/seg1.ts", &[]) == 401
    });
    refused(get(&c, &music, "/hls/stream.m3u8", &[]), "a channel's master without a pass");
    refused(get(&c, &music, "/hls/0/seg1.ts", &with_cookie), "the default channel's pass on another channel");
    refused(get(&c, &music, &format!("/hls/0/seg1.ts?pass={pass}"), &[]), "the default channel's pass in the query");
    let (music_pass, music_cookie) = unlock(&c, &music);
    assert!(music_cookie.starts_with("castd_pass_music="), "{music_cookie}");
    assert_eq!(status(&c, &music, "/hls/0/seg1.ts", &[("cookie", &music_cookie)]), 200);
    assert_eq!(status(&c, &music, &format!("/hls/stream.m3u8?pass={music_pass}"), &[]), 200);
    refused(get(&c, &music, "/hls/0/seg1.ts", &[]), "a channel's cached segment without a pass");
    // The channel's chat socket, which the edge holds itself (its room), needs the channel's own pass.
    let reg =
        c.post(format!("{music}/api/chat/register")).header("cookie", &music_cookie).json(&json!({})).send().unwrap();
    assert_eq!(reg.status(), 200, "register in the channel through the edge with its pass");
    let music_token = reg.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let music_ws = |query: &str| {
        tungstenite::connect(format!("ws://127.0.0.1:{}/c/music/ws?accessToken={music_token}{query}", edge.web_port))
    };
    let t0 = Instant::now();
    let mut sock = loop {
        match music_ws(&format!("&pass={music_pass}")) {
            Ok((sock, _)) => break sock,
            Err(e) => assert!(t0.elapsed() < Duration::from_secs(15), "the channel's chat socket at the edge: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = sock.close(None);
    for (query, what) in [(String::new(), "no pass"), (format!("&pass={pass}"), "the default channel's pass")] {
        match music_ws(&query) {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 401, "the channel's socket with {what}"),
            other => panic!("the channel's chat socket at the edge with {what}: {:?}", other.map(|_| ())),
        }
    }

    // The password deleted on the origin: the edge refuses its passes within 15 s, the segment it has
    // cached included; the channel's own pass is not touched.
    assert_eq!(status(&c, e, "/hls/0/seg3.ts", &with_cookie), 200, "seg3 (cached) with the pass");
    let r = origin.admin_post("/api/admin/viewer/passwords/delete", &json!({ "id": password_id }));
    assert!(r.status().is_success(), "delete the password: {}", r.status());
    let took = within(Duration::from_secs(15), "the edge refuses the revoked pass", || {
        status(&c, e, "/hls/0/seg3.ts", &with_cookie) == 401
    });
    eprintln!("the edge refused the revoked pass {took:?} after the password was deleted");
    refused(get(&c, e, &format!("/hls/0/seg1.ts?pass={pass}"), &[]), "the revoked pass in the query");
    refused(get(&c, e, "/hls/stream.m3u8", &[("authorization", &bearer)]), "the revoked pass as a Bearer");
    assert_eq!(status(&c, &music, "/hls/0/seg1.ts", &[("cookie", &music_cookie)]), 200, "another channel's pass");
    drop(redis);
}
