//! IndieAuth across two real daemons on loopback: a chat user on castd B signs in with castd A's URL,
//! A's admin approves, B marks the user authenticated (and "require authentication" then admits them
//! and not an anonymous user). The refusals: wrong state, wrong verifier, reused code, expired code,
//! `me` on another host, a `me` on the same host whose page names another authorization endpoint
//! (IndieAuth §5.3), authorization endpoints on private addresses, a denied request — each
//! answered with `error`/`errorDescription`, and the user stays unauthenticated.
//!
//! Both daemons run with `CASTD_INDIEAUTH_ALLOW_LOOPBACK=1` (they must fetch each other on 127.0.0.1).

mod common;

use std::time::Duration;

use common::chatclient::{self, next_of, next_where, say};
use common::receiver::Receiver;
use common::Server;
use reqwest::blocking::Client;
use serde_json::{json, Value};

const LOOPBACK: (&str, &str) = ("CASTD_INDIEAUTH_ALLOW_LOOPBACK", "1");

fn daemon(env: &[(&str, &str)]) -> Server {
    let s = Server::start_with_env(&[], env);
    s.set("serverurl", json!(s.base));
    s
}

/// A client that shows redirects instead of following them.
fn raw() -> Client {
    Client::builder().redirect(reqwest::redirect::Policy::none()).timeout(Duration::from_secs(30)).build().unwrap()
}

fn query(url: &str, key: &str) -> Option<String> {
    let u = url::Url::parse(url).unwrap();
    u.query_pairs().find(|(k, _)| k == key).map(|(_, v)| v.into_owned())
}

fn with_query(url: &str, key: &str, value: &str) -> String {
    let mut u = url::Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = u
        .query_pairs()
        .map(|(k, v)| (k.to_string(), if k == key { value.to_string() } else { v.into_owned() }))
        .collect();
    u.query_pairs_mut().clear().extend_pairs(pairs);
    u.to_string()
}

/// Start a sign-in on `b` for the user holding `token`: the status and the answer.
fn start(b: &Server, token: &str, auth_host: &str) -> (u16, Value) {
    let r = b.post_json(&format!("/api/auth/indieauth?accessToken={token}"), &json!({ "authHost": auth_host }));
    let status = r.status().as_u16();
    (status, r.json().unwrap())
}

/// A's admin opens the authorization URL and decides; returns where A sends the browser back.
fn decide(a: &Server, authorize_url: &str, decision: &str) -> String {
    let page = raw().get(authorize_url).basic_auth("admin", Some(&a.admin_password)).send().unwrap();
    assert_eq!(page.status(), 200, "approval page");
    let html = page.text().unwrap();
    let id = html.split(r#"name="request" value=""#).nth(1).and_then(|r| r.split('"').next()).expect("request id");
    let r = raw()
        .post(a.url("/api/auth/provider/indieauth/approve"))
        .basic_auth("admin", Some(&a.admin_password))
        .form(&[("request", id), ("decision", decision)])
        .send()
        .unwrap();
    assert_eq!(r.status(), 303);
    r.headers()["location"].to_str().unwrap().to_string()
}

/// Follow the redirect back to B's callback, asking for the JSON result.
fn callback(back: &str) -> (u16, Value) {
    let r = raw().get(back).header("accept", "application/json").send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap())
}

fn user(b: &Server, id: &str) -> Value {
    let list = b.admin_json("/api/admin/users?limit=100");
    list["results"].as_array().unwrap().iter().find(|u| u["id"] == id).cloned().expect("user listed")
}

fn assert_refused(status: u16, answer: &Value, error: &str, words: &str) {
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"], error, "{answer}");
    let description = answer["errorDescription"].as_str().unwrap_or_default();
    assert!(description.contains(words), "'{description}' should mention '{words}'");
    assert_eq!(answer["success"], false);
}

#[test]
fn a_chat_user_on_b_signs_in_with_a_and_may_then_chat_when_authentication_is_required() {
    let a = daemon(&[LOOPBACK]);
    a.set("name", json!("Stream A"));
    let b = daemon(&[LOOPBACK]);
    assert_eq!(b.get_json("/api/config")["authentication"]["indieAuthEnabled"], true);
    // A's viewer page names its metadata and authorization endpoint; the metadata names A as issuer.
    let link = a.get("/").headers()["link"].to_str().unwrap().to_string();
    assert!(link.contains(r#"</api/auth/provider/indieauth>; rel="authorization_endpoint""#), "{link}");
    assert!(link.contains(r#"</.well-known/oauth-authorization-server>; rel="indieauth-metadata""#), "{link}");
    let meta = a.get_json("/.well-known/oauth-authorization-server");
    assert_eq!(meta["issuer"], format!("{}/", a.base));
    assert_eq!(meta["authorization_endpoint"], a.url("/api/auth/provider/indieauth"));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));

    let mut viewer = chatclient::join(&b, "viewer");
    let mut anon = chatclient::join(&b, "anon");
    let (status, answer) = start(&b, &viewer.token, &a.base);
    assert_eq!(status, 200, "{answer}");
    let redirect = answer["redirect"].as_str().unwrap().to_string();
    assert!(redirect.starts_with(&a.url("/api/auth/provider/indieauth?")), "{redirect}");
    assert_eq!(query(&redirect, "client_id").unwrap(), format!("{}/", b.base));
    assert_eq!(query(&redirect, "redirect_uri").unwrap(), b.url("/api/auth/indieauth/callback"));
    assert_eq!(query(&redirect, "code_challenge_method").unwrap(), "S256");
    assert_eq!(query(&redirect, "response_type").unwrap(), "code");
    assert!(query(&redirect, "state").unwrap().len() >= 32);

    // Only A's admin may approve.
    assert_eq!(raw().get(&redirect).send().unwrap().status(), 401);
    let back = decide(&a, &redirect, "approve");
    assert!(back.starts_with(&b.url("/api/auth/indieauth/callback?")), "{back}");
    assert_eq!(query(&back, "iss").unwrap(), format!("{}/", a.base));

    let (status, result) = callback(&back);
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["me"], format!("{}/", a.base));
    assert_eq!(result["profile"]["name"], "Stream A");
    assert_eq!(result["profile"]["photo"], format!("{}/logo", a.base));

    // B tells the user's socket, and takes the profile name.
    let info = next_where(&mut viewer.ws, Duration::from_secs(5), |e| {
        e["type"] == "CONNECTED_USER_INFO" && e["user"]["authenticated"] == true
    })
    .expect("CONNECTED_USER_INFO with authenticated");
    assert_eq!(info["user"]["displayName"], "Stream A");
    let u = user(&b, &viewer.id);
    assert_eq!(u["authenticated"], true);
    assert_eq!(u["authProvider"], "indieauth");
    assert_eq!(user(&b, &anon.id)["authenticated"], false);

    // A callback whose `iss` is not the issuer B discovered is refused.
    let (_, answer) = start(&b, &anon.token, &a.base);
    let other = decide(&a, answer["redirect"].as_str().unwrap(), "approve");
    let (status, r) = callback(&with_query(&other, "iss", "https://someone-else.example/"));
    assert_refused(status, &r, "invalid_issuer", "someone-else.example");

    // The same callback again is refused (the state is used once).
    let (status, again) = callback(&back);
    assert_refused(status, &again, "invalid_state", "state");

    b.set("chat/requireauthentication", json!(true));
    say(&mut viewer.ws, "signed in and talking");
    let seen = next_of(&mut anon.ws, "CHAT", Duration::from_secs(5)).expect("the signed-in user's message");
    assert!(seen["body"].as_str().unwrap().contains("signed in and talking"));
    assert_eq!(seen["user"]["authenticated"], true);
    say(&mut anon.ws, "anonymous words");
    let refused = next_of(&mut anon.ws, "CHAT_ACTION", Duration::from_secs(5)).expect("authentication required");
    assert!(refused["body"].as_str().unwrap().to_lowercase().contains("authenticat"), "{refused}");
    let history = chatclient::history(&b, &viewer.token);
    assert!(history.iter().any(|m| m["body"].as_str().unwrap_or_default().contains("signed in and talking")));
    assert!(!history.iter().any(|m| m["body"].as_str().unwrap_or_default().contains("anonymous words")));
}

#[test]
fn refusals_leave_the_user_unauthenticated() {
    let a = daemon(&[LOOPBACK]);
    let b = daemon(&[LOOPBACK]);
    let viewer = chatclient::join(&b, "viewer");
    let t = viewer.token.clone();

    // Wrong state.
    let (_, answer) = start(&b, &t, &a.base);
    let back = decide(&a, answer["redirect"].as_str().unwrap(), "approve");
    let (status, r) = callback(&with_query(&back, "state", "not-the-state"));
    assert_refused(status, &r, "invalid_state", "state");

    // The admin denies.
    let (_, answer) = start(&b, &t, &a.base);
    let back = decide(&a, answer["redirect"].as_str().unwrap(), "deny");
    assert_eq!(query(&back, "error").unwrap(), "access_denied");
    let (status, r) = callback(&back);
    assert_refused(status, &r, "access_denied", "approve");

    // `me` on another host: the user typed localhost, A vouches for 127.0.0.1.
    let (status, answer) = start(&b, &t, &format!("http://localhost:{}/", a.web_port));
    assert_eq!(status, 200, "{answer}");
    let back = decide(&a, answer["redirect"].as_str().unwrap(), "approve");
    let (status, r) = callback(&back);
    assert_refused(status, &r, "invalid_me", "not on http://localhost");

    // Authorization endpoints (and metadata) on private addresses are never fetched.
    for page in [
        r#"<html><head><link rel="authorization_endpoint" href="http://10.11.12.13/auth"></head></html>"#,
        r#"<html><head><link rel="indieauth-metadata" href="http://192.168.77.1/meta"></head></html>"#,
        r#"<html><head><link rel="authorization_endpoint" href="http://[fd00::7]/auth"></head></html>"#,
    ] {
        let site = Receiver::start_answering(&[], "text/html", page);
        let (status, r) = start(&b, &t, &site.url);
        assert_refused(status, &r, "forbidden_address", "private or local address");
    }
    let (status, r) = start(&b, &t, "http://169.254.169.254/");
    assert_refused(status, &r, "forbidden_address", "169.254.169.254");
    // A page that publishes no endpoint.
    let site = Receiver::start_answering(&[], "text/html", "<html><head></head></html>");
    let (status, r) = start(&b, &t, &site.url);
    assert_refused(status, &r, "discovery_failed", "no IndieAuth authorization endpoint");
    // No token, bad body.
    assert_eq!(b.post_json("/api/auth/indieauth", &json!({ "authHost": a.base })).status(), 401);
    let (status, r) = start(&b, &t, "");
    assert_refused(status, &r, "invalid_request", "website");

    let u = user(&b, &viewer.id);
    assert_eq!(u["authenticated"], false, "{u}");
    assert_eq!(u["displayName"], "viewer");
}

#[test]
fn codes_are_bound_to_the_verifier_used_once_and_expire() {
    let a = daemon(&[LOOPBACK, ("CASTD_INDIEAUTH_CODE_SECS", "1")]);
    let client_id = "http://127.0.0.1:9/";
    let redirect_uri = "http://127.0.0.1:9/cb";
    let verifier = "a-verifier-of-the-right-length-0123456789-abcdefghij";
    let challenge = {
        use base64::Engine;
        use sha2::Digest;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
    };
    let authorize = || {
        let mut u = url::Url::parse(&a.url("/api/auth/provider/indieauth")).unwrap();
        u.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", "s1")
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        let back = decide(&a, u.as_str(), "approve");
        assert_eq!(query(&back, "state").unwrap(), "s1");
        query(&back, "code").unwrap()
    };
    let redeem = |code: &str, v: &str| {
        let r = raw()
            .post(a.url("/api/auth/provider/indieauth"))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("client_id", client_id),
                ("redirect_uri", redirect_uri),
                ("code_verifier", v),
            ])
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json::<Value>().unwrap())
    };

    // Right verifier: me and profile; the same code again: refused.
    let code = authorize();
    let (status, r) = redeem(&code, verifier);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["me"], format!("{}/", a.base));
    assert!(r["profile"]["name"].is_string());
    let (status, r) = redeem(&code, verifier);
    assert_refused(status, &r, "invalid_grant", "already used");

    // Wrong verifier.
    let code = authorize();
    let (status, r) = redeem(&code, "a-verifier-that-is-not-the-one-0123456789-abcdefghij");
    assert_refused(status, &r, "invalid_grant", "code_verifier");

    // JSON with Owncast's `codeVerifier` works too.
    let code = authorize();
    let r = raw()
        .post(a.url("/api/auth/provider/indieauth"))
        .json(&json!({ "code": code, "client_id": client_id, "redirect_uri": redirect_uri, "codeVerifier": verifier }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);

    // Expired (the code lives 1 s here).
    let code = authorize();
    std::thread::sleep(Duration::from_millis(1500));
    let (status, r) = redeem(&code, verifier);
    assert_refused(status, &r, "invalid_grant", "expired");

    // A redirect_uri on another host that the client does not publish: no approval page at all.
    let mut u = url::Url::parse(&a.url("/api/auth/provider/indieauth")).unwrap();
    u.query_pairs_mut()
        .append_pair("client_id", &a.base)
        .append_pair("redirect_uri", "http://127.0.0.2:9/steal")
        .append_pair("state", "s")
        .append_pair("code_challenge", &challenge);
    let r = raw().get(u.as_str()).basic_auth("admin", Some(&a.admin_password)).send().unwrap();
    assert_eq!(r.status(), 400);
    let r: Value = r.json().unwrap();
    assert!(r["errorDescription"].as_str().unwrap().contains("redirect_uri"), "{r}");

    // End to end: an expired code makes B refuse, and its user stays anonymous.
    let b = daemon(&[LOOPBACK]);
    let viewer = chatclient::join(&b, "viewer");
    let (_, answer) = start(&b, &viewer.token, &a.base);
    let back = decide(&a, answer["redirect"].as_str().unwrap(), "approve");
    std::thread::sleep(Duration::from_millis(1500));
    let (status, r) = callback(&back);
    assert_refused(status, &r, "invalid_grant", "expired");
    assert_eq!(user(&b, &viewer.id)["authenticated"], false);
}

/// A web site on loopback with several people's pages and their own authorization endpoints: `pages`
/// maps a path to the authorization endpoint (a path) its HTML names, `endpoints` maps an endpoint's
/// path to the `me` (a path) it vouches for when a code is redeemed there. Returns its base URL.
fn people_site(
    pages: &'static [(&'static str, &'static str)],
    endpoints: &'static [(&'static str, &'static str)],
) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let me_base = base.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let me_base = me_base.clone();
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                while let Some(req) = common::receiver::read_request(&mut reader) {
                    let path = req.path.split('?').next().unwrap_or_default().to_string();
                    let (status, ctype, body) = if let Some((_, ep)) = pages.iter().find(|(p, _)| *p == path) {
                        let html =
                            format!(r#"<html><head><link rel="authorization_endpoint" href="{ep}"></head></html>"#);
                        (200, "text/html", html)
                    } else if let Some((_, me)) = endpoints.iter().find(|(e, _)| *e == path && req.method == "POST") {
                        (200, "application/json", json!({ "me": format!("{me_base}{me}") }).to_string())
                    } else {
                        (404, "text/plain", "no".to_string())
                    };
                    if !common::receiver::write_response(reader.get_ref(), status, ctype, &body) {
                        return;
                    }
                }
            });
        }
    });
    base
}

/// Issue #39 (finding 11), IndieAuth §5.3: a `me` other than the URL entered is accepted only when its
/// own page names the authorization endpoint that vouched for it. On a site with many users, Mallory's
/// endpoint vouching for Alice's page (same host) must not sign Mallory in as Alice.
#[test]
fn another_users_endpoint_cannot_vouch_for_a_page_on_the_same_host() {
    static PAGES: &[(&str, &str)] =
        &[("/mallory", "/auth/mallory"), ("/alice", "/auth/alice"), ("/bob", "/auth/bob"), ("/b", "/auth/bob")];
    static ENDPOINTS: &[(&str, &str)] = &[("/auth/mallory", "/alice"), ("/auth/bob", "/bob")];
    let site = people_site(PAGES, ENDPOINTS);
    let b = daemon(&[LOOPBACK]);
    let sign_in = |who: &str, entered: &str| {
        let viewer = chatclient::join(&b, who);
        let (status, answer) = start(&b, &viewer.token, &format!("{site}{entered}"));
        assert_eq!(status, 200, "{answer}");
        let state = query(answer["redirect"].as_str().unwrap(), "state").unwrap();
        let back = format!("{}?code=a-code&state={state}", b.url("/api/auth/indieauth/callback"));
        let (status, r) = callback(&back);
        (viewer, status, r)
    };

    // Mallory's endpoint vouches for Alice's page: refused, Mallory stays anonymous.
    let (mallory, status, r) = sign_in("mallory", "/mallory");
    assert_refused(status, &r, "invalid_me", "another authorization endpoint");
    assert_eq!(user(&b, &mallory.id)["authenticated"], false);

    // Bob entered a short URL of his; his endpoint vouches for his page, which names that endpoint.
    let (bob, status, r) = sign_in("bob", "/b");
    assert_eq!(status, 200, "{r}");
    let u = user(&b, &bob.id);
    assert_eq!(u["authenticated"], true, "{u}");
}
