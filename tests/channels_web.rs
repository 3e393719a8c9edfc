//! The web UI of channels, as the server serves it: a channel's pages carry its base path
//! (`<meta name="castd-base">`), the default channel's are unchanged, the redirects stay under the prefix,
//! the directory page `/channels` is the root's alone, and a channel's routes with a path parameter
//! (admin pages, icons, clips, replays) answer under the prefix as at the root.

mod common;

use common::Server;
use serde_json::json;

const META: &str = r#"<meta name="castd-base" content="/c/music">"#;

fn web_built() -> bool {
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web/dist/index.html").exists();
    if !built {
        eprintln!("skipped: web/dist is not built (make test builds it first)");
    }
    built
}

fn no_redirects() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

#[test]
fn a_channels_pages_carry_its_base_and_stay_under_its_prefix() {
    if !web_built() {
        return;
    }
    let server = Server::start();
    let r = server.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": "music", "name": "Music", "adminPassword": "music-admin-pw"}),
    );
    assert_eq!(r.status(), 200);

    // Every page of the channel has the meta right after <head>; the default channel's pages have none.
    for path in ["/c/music/", "/c/music/embed/video", "/c/music/embed/chat/readonly", "/c/music/embed/chat/readwrite"] {
        let r = server.get(path);
        assert_eq!(r.status(), 200, "{path}");
        let html = r.text().unwrap();
        assert!(html.contains(&format!("<head>{META}")), "{path}: {html}");
    }
    for path in ["/c/music/admin/", "/c/music/admin/video", "/c/music/admin/stream-keys"] {
        let r = server.client.get(server.url(path)).basic_auth("admin", Some("music-admin-pw")).send().unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.text().unwrap().contains(META), "{path}");
    }
    for path in ["/", "/embed/video", "/channels"] {
        let html = server.get(path).text().unwrap();
        assert!(!html.contains("castd-base"), "{path}: the default channel's pages are the build's files");
    }
    let admin = server.admin_get("/admin/video").text().unwrap();
    assert!(!admin.contains("castd-base"));

    // The viewer page's IndieAuth discovery names the channel's endpoints.
    let root = server.get("/c/music/");
    let link = root.headers()["link"].to_str().unwrap().to_string();
    assert!(link.contains("</c/music/api/auth/indieauth/callback>; rel=\"redirect_uri\""), "{link}");
    assert!(server.get("/").headers()["link"].to_str().unwrap().starts_with("</.well-known/"));

    // A channel's page is its own representation (not the root's validator) and revalidates.
    let etag = root.headers()["etag"].to_str().unwrap().to_string();
    assert_ne!(etag, server.get("/").headers()["etag"].to_str().unwrap());
    let again = server.client.get(server.url("/c/music/")).header("if-none-match", &etag).send().unwrap();
    assert_eq!(again.status(), 304);

    // Redirects stay on the channel.
    let plain = no_redirects();
    let location = |path: &str| {
        let r = plain.get(server.url(path)).send().unwrap();
        (r.status().as_u16(), r.headers().get("location").map(|v| v.to_str().unwrap().to_string()))
    };
    assert_eq!(location("/c/music/admin"), (301, Some("/c/music/admin/".into())));
    assert_eq!(location("/c/music/embed/chat"), (307, Some("/c/music/embed/chat/readonly".into())));
    assert_eq!(location("/c/music/embed/chat/"), (307, Some("/c/music/embed/chat/readonly".into())));
    assert_eq!(location("/admin"), (301, Some("/admin/".into())), "the default channel's, unchanged");
    assert_eq!(location("/embed/chat"), (307, Some("/embed/chat/readonly".into())));

    // The directory is the root's page only.
    assert_eq!(server.get("/channels").status(), 200);
    assert_eq!(server.get("/c/music/channels").status(), 404);

    // Routes with a path parameter answer under the prefix (the dispatcher's own parameters do not
    // reach them): an icon, a clip that does not exist (404, not 500), an admin page.
    let icon = server.get("/c/music/img/platformlogos/github.svg");
    assert_eq!(icon.status(), 200);
    assert_eq!(server.get("/c/music/api/clips/nosuch").status(), 404);
    assert_eq!(server.get("/c/music/replay/nosuch").status(), 404);
}

/// The admin's channel switcher asks `/api/admin/channels` with whatever credentials the browser holds: a
/// channel admin's get 401 there, and with the web UI's `X-Castd-No-Challenge` that 401 carries no
/// `WWW-Authenticate`, so the browser does not ask for another password. Without the header the challenge
/// stays (Owncast's tools rely on it).
#[test]
fn the_switchers_probe_gets_a_401_without_a_password_prompt() {
    let server = Server::start();
    let r = server.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": "music", "name": "Music", "adminPassword": "music-admin-pw"}),
    );
    assert_eq!(r.status(), 200);
    let probe = |header: bool| {
        let mut req = server.client.get(server.url("/api/admin/channels")).basic_auth("admin", Some("music-admin-pw"));
        if header {
            req = req.header("X-Castd-No-Challenge", "1");
        }
        req.send().unwrap()
    };
    let quiet = probe(true);
    assert_eq!(quiet.status(), 401);
    assert!(quiet.headers().get("www-authenticate").is_none(), "{:?}", quiet.headers());
    let loud = probe(false);
    assert_eq!(loud.status(), 401);
    assert!(loud.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic"));
    // The server admin's credentials get the list, header or not.
    let ok = server
        .client
        .get(server.url("/api/admin/channels"))
        .basic_auth("admin", Some(server.admin_password.as_str()))
        .header("X-Castd-No-Challenge", "1")
        .send()
        .unwrap();
    assert_eq!(ok.status(), 200);
}
