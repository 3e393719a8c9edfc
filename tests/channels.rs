//! Channels: the server admin creates channels; each has Owncast's API under `/c/{slug}`, its own admin
//! password (good on that channel only), its own stream keys (a key publishes to its channel), and the
//! default channel is unchanged.

mod common;

use std::time::Duration;

use common::media::{online, publish, wait_exit};
use common::Server;
use serde_json::{json, Value};

fn create(server: &Server, slug: &str, name: &str, password: &str) -> reqwest::blocking::Response {
    server.admin_post("/api/admin/channels/create", &json!({"slug": slug, "name": name, "adminPassword": password}))
}

fn status_of(r: reqwest::blocking::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().unwrap_or_default())
}

#[test]
fn the_server_admin_makes_channels_each_with_its_own_api_admin_and_keys() {
    let server = Server::start();

    // Refusals: a bad slug, `default`, a missing password; only the server admin may create.
    // (`default` is taken by the default channel: 409.)
    for (slug, why, code) in [("Bad Slug", "slug", 400), ("default", "default", 409), ("a/b", "slug", 400)] {
        let (status, body) = status_of(create(&server, slug, "X", "pw-123456"));
        assert_eq!(status, code, "{slug}: {body}");
        assert!(body["message"].as_str().unwrap_or_default().contains(why), "{slug}: {body}");
    }
    let (status, _) = status_of(create(&server, "nopw", "X", ""));
    assert_eq!(status, 400);
    let anonymous = server
        .client
        .post(server.url("/api/admin/channels/create"))
        .json(&json!({"slug": "sneaky", "name": "S", "adminPassword": "x"}))
        .send()
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // Create two channels; a slug is taken once.
    let (status, body) = status_of(create(&server, "church", "Church", "church-admin-pw"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(status_of(create(&server, "school", "School", "school-admin-pw")).0, 200);
    assert_eq!(status_of(create(&server, "church", "Again", "x")).0, 409);

    // Each channel answers Owncast's API under its prefix, with its own name.
    let config = server.get_json("/c/church/api/config");
    assert_eq!(config["name"], "Church");
    assert_eq!(server.get_json("/c/school/api/config")["name"], "School");
    assert_ne!(server.get_json("/api/config")["name"], "Church", "the default channel is its own");
    assert_eq!(server.get_json("/c/church/api/status")["online"], false);
    assert_eq!(server.get("/c/nosuch/api/status").status(), 404);

    // The channel admin password works on its channel's admin API only.
    let as_church = |path: &str| {
        server.client.get(server.url(path)).basic_auth("admin", Some("church-admin-pw")).send().unwrap().status()
    };
    assert_eq!(as_church("/c/church/api/admin/status"), 200);
    assert_eq!(as_church("/c/school/api/admin/status"), 401, "another channel's admin");
    assert_eq!(as_church("/api/admin/status"), 401, "the default channel's admin");
    assert_eq!(as_church("/api/admin/channels"), 401, "the server admin's routes");
    // The server admin's password works everywhere.
    assert_eq!(server.admin_get("/c/church/api/admin/status").status(), 200);
    // Server-wide settings are not a channel's to change: a channel's API has no such setter.
    let r = server
        .client
        .post(server.url("/c/church/api/admin/config/webserverport"))
        .basic_auth("admin", Some("church-admin-pw"))
        .json(&json!({"value": 9999}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);

    // The server admin's list; the public list.
    let list = server.admin_json("/api/admin/channels");
    let slugs: Vec<&str> = list.as_array().unwrap().iter().map(|c| c["slug"].as_str().unwrap()).collect();
    assert_eq!(slugs, ["default", "church", "school"]);
    let public = server.get_json("/api/channels");
    assert_eq!(public.as_array().unwrap().len(), 3);

    // A channel's stream key publishes to that channel only.
    let key = server.admin_json("/c/church/api/admin/serverconfig")["streamKeys"][0]["key"]
        .as_str()
        .expect("a generated stream key")
        .to_string();
    // Keys are unique across the server.
    let r =
        server.admin_post("/c/school/api/admin/config/streamkeys", &json!({"value": [{"key": key, "comment": "x"}]}));
    assert_eq!(r.status(), 400, "another channel's key is refused");
    let mut ffmpeg = publish(&server, &key, "320x240", 30);
    let live = server.wait_for(Duration::from_secs(40), || {
        (server.get_json("/c/church/api/status")["online"] == true).then_some(())
    });
    assert!(live.is_some(), "the church channel went live; log:\n{}", server.log_text());
    assert!(!online(&server), "the default channel stays offline");
    assert_eq!(server.get_json("/c/school/api/status")["online"], false);
    let master = server.wait_for(Duration::from_secs(30), || {
        let r = server.get("/c/church/hls/stream.m3u8");
        r.status().is_success().then(|| r.text().unwrap_or_default())
    });
    assert!(master.is_some_and(|m| m.contains("#EXT-X-STREAM-INF")), "the channel's HLS is served under its prefix");
    assert!(server.data_dir.join("channels/church/hls/stream.m3u8").exists(), "in the channel's own folder");
    // A live channel cannot be deleted.
    assert_eq!(status_of(server.admin_post("/api/admin/channels/delete", &json!({"slug": "church"}))).0, 409);
    let _ = ffmpeg.kill();
    wait_exit(&mut ffmpeg, Duration::from_secs(5));
    assert!(server
        .wait_for(Duration::from_secs(30), || (server.get_json("/c/church/api/status")["online"] == false)
            .then_some(()))
        .is_some());

    // Delete: gone from the lists and the routes; its files stay unless purged.
    assert_eq!(status_of(server.admin_post("/api/admin/channels/delete", &json!({"slug": "church"}))).0, 200);
    assert_eq!(server.get("/c/church/api/status").status(), 404);
    assert!(!server.data_dir.join("channels/church").exists(), "the slug's folder is free");
    let kept = std::fs::read_dir(server.data_dir.join("channels/.deleted"))
        .map(|d| d.filter_map(|e| e.ok()).any(|e| e.path().join("castd.db").exists()))
        .unwrap_or(false);
    assert!(kept, "kept aside without purge");
    assert_eq!(
        status_of(server.admin_post("/api/admin/channels/delete", &json!({"slug": "school", "purge": true}))).0,
        200
    );
    assert!(!server.data_dir.join("channels/school").exists(), "purged");

    // Channels come back after a restart.
    assert_eq!(status_of(create(&server, "again", "Again", "again-pw")).0, 200);
    let server = server.restart();
    assert_eq!(server.get_json("/c/again/api/config")["name"], "Again");
}
