//! Channels are tenants (issue 52), against the real daemon: a channel made with a deleted channel's
//! slug starts from nothing (none of the old stream keys, tokens, webhooks, viewer passwords, chat users
//! or passes work); a channel admin cannot test guesses of other channels' stream keys at speed; the
//! admin's viewing pass ends when the admin password changes, and a channel's pass lifetime is capped;
//! a channel's "does this ladder fit" asks measure a few new rungs at a time.

mod common;

use common::Server;
use reqwest::blocking::Response;
use serde_json::{json, Value};

fn create(server: &Server, body: Value) -> (u16, Value) {
    let r = server.admin_post("/api/admin/channels/create", &body);
    (r.status().as_u16(), r.json().unwrap_or_default())
}

/// A request as channel `slug`'s admin (password `pw`).
fn as_channel(server: &Server, pw: &str, method: reqwest::Method, path: &str, body: Option<&Value>) -> Response {
    let mut req = server.client.request(method, server.url(path)).basic_auth("admin", Some(pw));
    if let Some(b) = body {
        req = req.json(b);
    }
    req.send().expect("request")
}

fn bearer_get(server: &Server, path: &str, token: &str) -> u16 {
    server.client.get(server.url(path)).bearer_auth(token).send().expect("GET").status().as_u16()
}

#[test]
fn a_channel_made_with_a_deleted_channels_slug_inherits_nothing() {
    let server = Server::start();
    let old_pw = "music-old-admin-pw";
    assert_eq!(create(&server, json!({"slug": "music", "name": "Music", "adminPassword": old_pw})).0, 200);
    let post = |path: &str, body: Value| {
        let r = as_channel(&server, old_pw, reqwest::Method::POST, path, Some(&body));
        let status = r.status().as_u16();
        let text = r.text().unwrap_or_default();
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str::<Value>(&text).unwrap_or_default()
    };
    // The old owner's secrets: a stream key, an admin-scope integration token, a webhook, a viewer
    // password (and the pass it gives), a chat user.
    let old_key = "music-old-stream-key-0123456789";
    post("/c/music/api/admin/config/streamkeys", json!({"value": [{"key": old_key, "comment": "old"}]}));
    let token =
        post("/c/music/api/admin/accesstokens/create", json!({"name": "old bot", "scopes": ["HAS_ADMIN_ACCESS"]}))
            ["accessToken"]
            .as_str()
            .expect("a token")
            .to_string();
    assert_eq!(bearer_get(&server, "/c/music/api/integrations/chat", &token), 200, "the token works meanwhile");
    post("/c/music/api/admin/webhooks/create", json!({"url": "http://127.0.0.1:9/hook", "events": ["CHAT"]}));
    post("/c/music/api/admin/viewer/passwords/create", json!({"password": "old viewers pw", "comment": "old"}));
    post("/c/music/api/admin/config/visibility", json!({"value": "password"}));
    let unlocked = server.post_json("/c/music/api/viewer/unlock", &json!({"password": "old viewers pw"}));
    assert_eq!(unlocked.status().as_u16(), 200);
    let old_pass = unlocked.json::<Value>().unwrap()["pass"].as_str().expect("a pass").to_string();
    assert_eq!(bearer_get(&server, "/c/music/api/config", &old_pass), 200, "the pass works meanwhile");
    let chat = server
        .client
        .post(server.url(&format!("/c/music/api/chat/register?pass={old_pass}")))
        .json(&json!({"displayName": "old fan"}))
        .send()
        .expect("register");
    assert_eq!(chat.status().as_u16(), 200);
    let chat_token = chat.json::<Value>().unwrap()["accessToken"].as_str().expect("a chat token").to_string();

    // Deleted without purge: its files are kept, aside; the slug's folder is free.
    let r = server.admin_post("/api/admin/channels/delete", &json!({"slug": "music"}));
    assert_eq!(r.status().as_u16(), 200);
    let msg = r.json::<Value>().unwrap()["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("channels/.deleted/music-"), "{msg}");
    assert!(!server.data_dir.join("channels/music").exists(), "the slug's folder is free");
    let aside: Vec<_> = std::fs::read_dir(server.data_dir.join("channels/.deleted"))
        .expect("the deleted channels' folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("music-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert!(aside[0].path().join("castd.db").exists(), "kept for the server admin");

    // A new owner, the same slug, a private channel again: nothing of the old one works or is listed.
    let new_pw = "music-new-admin-pw";
    let body = json!({"slug": "music", "name": "Music 2", "adminPassword": new_pw, "visibility": "password"});
    assert_eq!(create(&server, body).0, 200);
    let get_new = |path: &str| -> Value {
        let r = as_channel(&server, new_pw, reqwest::Method::GET, path, None);
        assert_eq!(r.status().as_u16(), 200, "{path}");
        r.json().expect("json")
    };
    assert_eq!(bearer_get(&server, "/c/music/api/integrations/chat", &token), 401, "the old integration token");
    let keys = get_new("/c/music/api/admin/serverconfig")["streamKeys"].clone();
    assert!(!keys.to_string().contains(old_key), "the old stream key: {keys}");
    assert_eq!(get_new("/c/music/api/admin/webhooks"), json!([]), "the old webhooks");
    assert_eq!(get_new("/c/music/api/admin/accesstokens"), json!([]), "the old tokens");
    let passwords = get_new("/c/music/api/admin/viewer/passwords");
    assert!(passwords.as_array().is_some_and(|p| p.is_empty()), "the old viewer passwords: {passwords}");
    let r = server.post_json("/c/music/api/viewer/unlock", &json!({"password": "old viewers pw"}));
    assert_eq!(r.status().as_u16(), 401, "the old viewer password");
    assert_eq!(bearer_get(&server, "/c/music/api/config", &old_pass), 401, "the old pass (the old signing key)");
    let old_admin = as_channel(&server, old_pw, reqwest::Method::GET, "/c/music/api/admin/status", None);
    assert_eq!(old_admin.status().as_u16(), 401, "the old admin password");
    // The old chat user is unknown (on a channel the new admin made public, so the pass is not the refusal).
    let r = as_channel(
        &server,
        new_pw,
        reqwest::Method::POST,
        "/c/music/api/admin/config/visibility",
        Some(&json!({"value": "public"})),
    );
    assert_eq!(r.status().as_u16(), 200);
    let history = server.get(&format!("/c/music/api/chat?accessToken={chat_token}"));
    assert_eq!(history.status().as_u16(), 401, "the old chat user");
}

#[test]
fn a_channel_admin_cannot_test_guesses_of_another_channels_stream_key_at_speed() {
    let server = Server::start();
    for (slug, pw) in [("alpha", "alpha-admin-pw"), ("beta", "beta-admin-pw")] {
        assert_eq!(create(&server, json!({"slug": slug, "name": slug, "adminPassword": pw})).0, 200);
    }
    let secret = "beta-secret-stream-key-42";
    let r = server.admin_post("/c/beta/api/admin/config/streamkeys", &json!({"value": [{"key": secret}]}));
    assert_eq!(r.status().as_u16(), 200);

    // Alpha's admin tries 20 wrong guesses, then the right one, as fast as the server answers.
    let guess = |key: &str| {
        as_channel(
            &server,
            "alpha-admin-pw",
            reqwest::Method::POST,
            "/c/alpha/api/admin/config/streamkeys",
            Some(&json!({"value": [{"key": key, "comment": "guess"}]})),
        )
    };
    let mut answered = 0;
    let mut limited = None;
    for i in 0..20 {
        let r = guess(&format!("beta-secret-stream-key-{i:02}x"));
        match r.status().as_u16() {
            429 => {
                let retry = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
                let body: Value = r.json().unwrap_or_default();
                assert_eq!(body["success"], false, "{body}");
                limited.get_or_insert((i, retry));
            }
            status => {
                assert_eq!(status, 200, "a wrong guess is taken as alpha's key");
                answered += 1;
            }
        }
    }
    let (first, retry) = limited.expect("the guesses are limited");
    assert!(first <= 6 && answered <= 7, "{answered} guesses answered, the first 429 at {first}");
    assert!(retry.is_some_and(|s| s.parse::<u64>().is_ok_and(|n| n >= 1)), "a Retry-After");
    let right = guess(secret);
    let status = right.status().as_u16();
    let text = right.text().unwrap_or_default();
    assert_eq!(status, 429, "the right guess gets no answer about beta's keys: {text}");
    assert!(!text.contains("another channel"), "{text}");

    // The server admin's own keys (the default channel) are not limited: they may read every key anyway.
    for i in 0..8 {
        let r = server
            .admin_post("/api/admin/config/streamkeys", &json!({"value": [{"key": format!("root-key-{i}-abcdef")}]}));
        assert_eq!(r.status().as_u16(), 200, "the server admin's key {i}");
    }
}

#[test]
fn the_admins_pass_ends_when_the_admin_password_changes() {
    let server = Server::start();
    let pw = "club-admin-pw";
    let body = json!({"slug": "club", "name": "Club", "adminPassword": pw, "visibility": "password"});
    assert_eq!(create(&server, body).0, 200);
    assert_eq!(server.get("/c/club/api/config").status().as_u16(), 401, "a pass channel");
    let take_pass = |pw: &str| {
        let r = as_channel(&server, pw, reqwest::Method::POST, "/c/club/api/admin/viewer/pass", Some(&json!({})));
        assert_eq!(r.status().as_u16(), 200);
        let v: Value = r.json().expect("json");
        v["pass"].as_str().expect("a pass").to_string()
    };

    // The dashboard's pass, then the channel admin changes the password: the old pass ends.
    let pass = take_pass(pw);
    assert_eq!(bearer_get(&server, "/c/club/api/config", &pass), 200);
    let r = as_channel(
        &server,
        pw,
        reqwest::Method::POST,
        "/c/club/api/admin/config/adminpass",
        Some(&json!({"value": "club-new-pw"})),
    );
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(bearer_get(&server, "/c/club/api/config", &pass), 401, "the pass of the old password");
    let again = take_pass("club-new-pw");
    assert_eq!(bearer_get(&server, "/c/club/api/config", &again), 200, "a pass of the new password");

    // The server admin removes the channel admin (a new password): the removed admin's pass ends too.
    let r = server.admin_post("/api/admin/channels/update", &json!({"slug": "club", "adminPassword": "club-third-pw"}));
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(bearer_get(&server, "/c/club/api/config", &again), 401, "the removed admin's pass");

    // A channel's pass lifetime is capped by the server (7 days); an admin's pass lasts at most 12 h.
    let set_lifetime = |secs: u64| {
        as_channel(
            &server,
            "club-third-pw",
            reqwest::Method::POST,
            "/c/club/api/admin/config/viewer/passlifetime",
            Some(&json!({"value": secs})),
        )
    };
    let r = set_lifetime(30 * 24 * 3600);
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().unwrap_or_default();
    assert!(v["message"].as_str().is_some_and(|m| m.contains("at most 604800 seconds")), "{v}");
    assert_eq!(set_lifetime(7 * 24 * 3600).status().as_u16(), 200);
    let r =
        as_channel(&server, "club-third-pw", reqwest::Method::POST, "/c/club/api/admin/viewer/pass", Some(&json!({})));
    let v: Value = r.json().expect("json");
    let expires = chrono::DateTime::parse_from_rfc3339(v["expiresAt"].as_str().expect("expiresAt")).expect("a time");
    let left = expires.timestamp() - chrono::Utc::now().timestamp();
    assert!(left > 0 && left <= 12 * 3600 + 60, "the admin's pass lasts at most 12 h: {left} s");
}

fn rung(w: u32, h: u32, fps: u32) -> Value {
    json!({"videoPassthrough": false, "audioPassthrough": true, "videoBitrate": 2500,
           "scaledWidth": w, "scaledHeight": h, "framerate": fps, "cpuUsageLevel": 1})
}

#[test]
fn a_channels_fit_asks_measure_a_few_new_rungs_at_a_time() {
    let server = Server::start();
    let pw = "fit-admin-pw";
    assert_eq!(create(&server, json!({"slug": "fit", "name": "Fit", "adminPassword": pw})).0, 200);
    let path = server.data_dir.join("ladder-fit.json");
    let cached_rungs = || -> usize {
        std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["rungs"].as_object().map(|o| o.len()))
            .unwrap_or(0)
    };
    // Ten new 4K rungs per ask, a different ten each time.
    let mut measured_total = 0;
    for ask in 0..4u32 {
        let ladder =
            json!({"variants": (0..10).map(|i| rung(3840 - 2 * (ask * 10 + i), 2160, 30)).collect::<Vec<_>>()});
        let r = as_channel(&server, pw, reqwest::Method::POST, "/c/fit/api/admin/video/fit", Some(&ladder));
        assert_eq!(r.status().as_u16(), 200);
        let a: Value = r.json().expect("json");
        let measured = a["variants"].as_array().expect("variants").iter().filter(|v| v["measured"] == true).count();
        assert!(measured <= 2, "ask {ask}: at most 2 new rungs measured, {measured}: {a:#}");
        let msg = a["message"].as_str().unwrap_or_default();
        assert!(msg.contains("were not measured but estimated") && msg.contains("at most 2 new rungs"), "{msg}");
        for v in a["variants"].as_array().unwrap() {
            assert!(v["cpuCoresNeeded"].as_f64().is_some_and(|c| c > 0.0), "an estimate is a figure too: {v}");
        }
        measured_total += measured;
        assert!(cached_rungs() <= 6, "the file holds what the window allowed: {}", cached_rungs());
    }
    assert!(measured_total <= 6, "at most 6 new rungs per 10 minutes: {measured_total}");
}
