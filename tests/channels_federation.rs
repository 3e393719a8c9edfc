//! Federation per channel, end to end on loopback: the default channel and two channels are three
//! ActivityPub actors on one host (`@streamer`, `@alpha`, `@beta`), each with its own key, followers
//! and outbox under its own prefix; the root's WebFinger finds every one; a signed Follow sent by a
//! test actor to a channel's inbox (`/c/{slug}/federation/user/{slug}/inbox`, signed over that path)
//! is accepted by that channel only; a channel's go-live post reaches its own followers only; the
//! channels' server URL follows the server's; a fediverse user name is one channel's only.

mod common;

use std::time::Duration;

use common::fedactor::{self, FedActor};
use common::media::{publish, wait_exit};
use common::Server;
use serde_json::{json, Value};

const AP: &str = "application/activity+json";

fn no_redirects() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

fn ap_get(s: &Server, path: &str) -> Value {
    let r = no_redirects().get(s.url(path)).header("accept", AP).send().unwrap();
    let status = r.status();
    let text = r.text().unwrap_or_default();
    assert!(status.is_success(), "GET {path}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// The path prefix of a channel (`""` for the default).
fn prefix(slug: &str) -> String {
    if slug == "default" {
        String::new()
    } else {
        format!("/c/{slug}")
    }
}

/// A channel's actor path.
fn actor_path(slug: &str, user: &str) -> String {
    format!("{}/federation/user/{user}", prefix(slug))
}

fn admin_set(s: &Server, slug: &str, name: &str, value: Value) -> (u16, Value) {
    let r = s.admin_post(&format!("{}/api/admin/config/{name}", prefix(slug)), &json!({ "value": value }));
    (r.status().as_u16(), r.json().unwrap_or_default())
}

fn followers(s: &Server, slug: &str) -> Value {
    s.admin_json(&format!("{}/api/admin/followers", prefix(slug)))
}

fn webfinger(s: &Server, path: &str, account: &str) -> (u16, Value) {
    let r = no_redirects().get(s.url(&format!("{path}?resource=acct:{account}"))).send().unwrap();
    (r.status().as_u16(), r.json().unwrap_or_default())
}

fn self_link(jrd: &Value) -> String {
    jrd["links"].as_array().unwrap().iter().find(|l| l["rel"] == "self").unwrap()["href"].as_str().unwrap().to_string()
}

/// `actor` follows the actor at `actor_iri` (inbox `inbox`); waits for the signed Accept, which
/// it checks against `pem`.
fn follow(actor: &FedActor, actor_iri: &str, inbox: &str, pem: &str) {
    let follow = json!({"@context": "https://www.w3.org/ns/activitystreams",
        "id": format!("{}/follows/1", actor.base), "type": "Follow", "actor": actor.iri(), "object": actor_iri});
    assert_eq!(actor.send(inbox, &follow), 202, "{} follows {actor_iri}", actor.username);
    let accept = actor
        .wait_for(Duration::from_secs(15), |v| v["type"] == "Accept")
        .unwrap_or_else(|| panic!("{} gets an Accept from {actor_iri}", actor.username));
    assert_eq!(accept.json()["actor"], actor_iri);
    fedactor::verify_request(&accept, pem).expect("the Accept is signed with the followed actor's key");
}

#[test]
fn two_channels_are_two_actors_and_following_one_does_not_follow_the_other() {
    let s = Server::start_with_env(
        &["--federation-allow-http-loopback"],
        &[("CASTD_FEDERATION_RETRY_BASE_MS", "300"), ("CASTD_FEDERATION_DELIVERY_TIMEOUT_MS", "3000")],
    );
    let host = s.base.trim_start_matches("http://").to_string();
    // The channels exist before the server URL is set: theirs follows the server's.
    for slug in ["alpha", "beta"] {
        let r = s.admin_post(
            "/api/admin/channels/create",
            &json!({"slug": slug, "name": slug.to_uppercase(), "adminPassword": format!("{slug}-admin-pw")}),
        );
        assert_eq!(r.status(), 200, "create {slug}");
    }
    let (status, _) = admin_set(&s, "alpha", "federation/enable", json!(true));
    assert_eq!(status, 400, "no server URL yet");
    s.set("serverurl", json!(s.base));
    s.set("federation/enable", json!(true));
    for slug in ["alpha", "beta"] {
        let on = s.wait_for(Duration::from_secs(10), || {
            (admin_set(&s, slug, "federation/enable", json!(true)).0 == 200).then_some(())
        });
        assert!(on.is_some(), "{slug}'s server URL follows the server's; log:\n{}", s.log_text());
    }

    // Three actors: each its own IRIs under its prefix, its own user name (the slug) and key.
    let mut pems = Vec::new();
    for (slug, user) in [("default", "streamer"), ("alpha", "alpha"), ("beta", "beta")] {
        let iri = format!("{}{}", s.base, actor_path(slug, user));
        let actor = ap_get(&s, &actor_path(slug, user));
        assert_eq!(actor["id"], iri, "{slug}");
        assert_eq!(actor["preferredUsername"], user);
        assert_eq!(actor["inbox"], format!("{iri}/inbox"));
        assert_eq!(actor["outbox"], format!("{iri}/outbox"));
        assert_eq!(actor["followers"], format!("{iri}/followers"));
        assert_eq!(actor["publicKey"]["id"], format!("{iri}#main-key"));
        assert_eq!(actor["url"], format!("{}{}", s.base, prefix(slug)));
        assert_eq!(
            s.get_json(&format!("{}/api/config", prefix(slug)))["federation"]["account"],
            format!("{user}@{host}")
        );
        pems.push(actor["publicKey"]["publicKeyPem"].as_str().unwrap().to_string());
    }
    assert!(pems[0] != pems[1] && pems[1] != pems[2] && pems[0] != pems[2], "three keys");
    // A channel's actor is not the default's, and the other way round.
    assert_eq!(no_redirects().get(s.url("/federation/user/alpha")).header("accept", AP).send().unwrap().status(), 404);
    assert_eq!(
        no_redirects().get(s.url("/c/alpha/federation/user/streamer")).header("accept", AP).send().unwrap().status(),
        404
    );

    // The root's WebFinger resolves each actor; a channel's own resolves its actor.
    for (slug, user) in [("default", "streamer"), ("alpha", "alpha"), ("beta", "beta")] {
        let (status, jrd) = webfinger(&s, "/.well-known/webfinger", &format!("{user}@{host}"));
        assert_eq!(status, 200, "{user}: {jrd}");
        assert_eq!(jrd["subject"], format!("acct:{user}@{host}"));
        assert_eq!(self_link(&jrd), format!("{}{}", s.base, actor_path(slug, user)));
    }
    let (status, jrd) = webfinger(&s, "/c/alpha/.well-known/webfinger", &format!("alpha@{host}"));
    assert_eq!((status, self_link(&jrd)), (200, format!("{}{}", s.base, actor_path("alpha", "alpha"))));
    assert_eq!(webfinger(&s, "/.well-known/webfinger", &format!("nobody@{host}")).0, 404);
    assert_eq!(webfinger(&s, "/.well-known/webfinger", "alpha@elsewhere.example").0, 501);

    // A user name is one channel's: refused on another channel and on the default, whatever the case.
    let (status, body) = admin_set(&s, "beta", "federation/username", json!("ALPHA"));
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("another channel"), "{body}");
    assert_eq!(admin_set(&s, "default", "federation/username", json!("beta")).0, 400);
    assert_eq!(admin_set(&s, "alpha", "federation/username", json!("streamer")).0, 400);
    // Renamed, the actor moves, and the root's WebFinger follows it.
    assert_eq!(admin_set(&s, "beta", "federation/username", json!("beta_room")).0, 200);
    let (status, jrd) = webfinger(&s, "/.well-known/webfinger", &format!("beta_room@{host}"));
    assert_eq!((status, self_link(&jrd)), (200, format!("{}{}", s.base, actor_path("beta", "beta_room"))));
    assert_eq!(webfinger(&s, "/.well-known/webfinger", &format!("beta@{host}")).0, 404);
    assert_eq!(admin_set(&s, "beta", "federation/username", json!("beta")).0, 200);
    // A channel whose federation is off is not found.
    assert_eq!(admin_set(&s, "beta", "federation/enable", json!(false)).0, 200);
    assert_eq!(webfinger(&s, "/.well-known/webfinger", &format!("beta@{host}")).0, 404);
    assert_eq!(admin_set(&s, "beta", "federation/enable", json!(true)).0, 200);

    // A Follow of alpha, signed over the path the sender wrote (with the /c/alpha prefix).
    let alice = FedActor::start("alice");
    let alpha_iri = format!("{}{}", s.base, actor_path("alpha", "alpha"));
    let alpha_inbox = format!("{alpha_iri}/inbox");
    // Signed over the path without the prefix (what alpha's router sees): not what was sent, 401.
    let body = json!({"id": format!("{}/follows/0", alice.base), "type": "Follow", "actor": alice.iri(),
        "object": alpha_iri})
    .to_string()
    .into_bytes();
    let unprefixed = format!("{}/federation/user/alpha/inbox", s.base);
    let h = alice.sign(&unprefixed, &body, &alice.key_id(), chrono::Utc::now());
    assert_eq!(alice.post_raw(&alpha_inbox, &h, &body), 401, "a signature over another path");
    assert_eq!(followers(&s, "alpha")["total"], 0);
    follow(&alice, &alpha_iri, &alpha_inbox, &pems[1]);
    let f = followers(&s, "alpha");
    assert_eq!(f["total"], 1, "{f}");
    assert_eq!(f["results"][0]["link"], alice.iri());
    assert_eq!(followers(&s, "beta")["total"], 0, "following alpha does not follow beta");
    assert_eq!(followers(&s, "default")["total"], 0, "nor the default channel");
    assert_eq!(ap_get(&s, &format!("{}/followers", actor_path("alpha", "alpha")))["totalItems"], 1);
    assert_eq!(ap_get(&s, &format!("{}/followers", actor_path("beta", "beta")))["totalItems"], 0);
    assert_eq!(s.get_json("/c/alpha/api/config")["federation"]["followerCount"], 1);
    assert_eq!(s.get_json("/api/config")["federation"]["followerCount"], 0);

    // Bob follows beta, carol the default channel.
    let bob = FedActor::start("bob");
    let beta_iri = format!("{}{}", s.base, actor_path("beta", "beta"));
    follow(&bob, &beta_iri, &format!("{beta_iri}/inbox"), &pems[2]);
    let carol = FedActor::start("carol");
    let default_iri = format!("{}{}", s.base, actor_path("default", "streamer"));
    follow(&carol, &default_iri, &format!("{default_iri}/inbox"), &pems[0]);
    assert_eq!(followers(&s, "alpha")["total"], 1);
    assert_eq!(followers(&s, "beta")["total"], 1);
    assert_eq!(followers(&s, "default")["total"], 1);

    // Alpha goes live: its go-live post, signed with its key, reaches alice only.
    let key = s.admin_json("/c/alpha/api/admin/serverconfig")["streamKeys"][0]["key"].as_str().unwrap().to_string();
    let mut ff = publish(&s, &key, "320x240", 8);
    let post = alice.wait_for(Duration::from_secs(40), |v| v["type"] == "Create");
    let post = post.unwrap_or_else(|| panic!("alice gets alpha's go-live post; log:\n{}", s.log_text()));
    fedactor::verify_request(&post, &pems[1]).expect("signed with alpha's key");
    let create = post.json();
    assert_eq!(create["actor"], alpha_iri);
    assert_eq!(create["object"]["attributedTo"], alpha_iri);
    assert!(create["object"]["cc"].as_array().unwrap().contains(&json!(format!("{alpha_iri}/followers"))));
    let content = create["object"]["content"].as_str().unwrap();
    assert!(content.contains(&format!("{}/c/alpha", s.base)), "{content}");
    assert!(post.header("signature").unwrap().contains(&format!("keyId=\"{alpha_iri}#main-key\"")));
    wait_exit(&mut ff, Duration::from_secs(30));
    // The others' followers get nothing (alpha's deliveries are done by now; give any stray one time).
    std::thread::sleep(Duration::from_secs(2));
    for (who, actor) in [("bob", &bob), ("carol", &carol)] {
        let creates: Vec<_> = actor.received().into_iter().filter(|r| r.json()["type"] == "Create").collect();
        assert!(creates.is_empty(), "{who} got a post: {:?}", creates.iter().map(|r| r.json()).collect::<Vec<_>>());
    }
    assert_eq!(ap_get(&s, &format!("{}/outbox", actor_path("alpha", "alpha")))["totalItems"], 1, "the go-live post");
    assert_eq!(ap_get(&s, &format!("{}/outbox", actor_path("beta", "beta")))["totalItems"], 0);
    assert_eq!(ap_get(&s, &format!("{}/outbox", actor_path("default", "streamer")))["totalItems"], 0);

    // The server admin moves the server: every channel's actor follows.
    let port = host.rsplit(':').next().unwrap();
    let moved = format!("http://localhost:{port}");
    s.set("serverurl", json!(moved));
    let followed = s.wait_for(Duration::from_secs(10), || {
        (ap_get(&s, &actor_path("alpha", "alpha"))["id"] == format!("{moved}/c/alpha/federation/user/alpha"))
            .then_some(())
    });
    assert!(followed.is_some(), "alpha's actor moved with the server URL");
    assert_eq!(ap_get(&s, &actor_path("beta", "beta"))["id"], format!("{moved}/c/beta/federation/user/beta"));
    assert_eq!(ap_get(&s, &actor_path("default", "streamer"))["id"], format!("{moved}/federation/user/streamer"));
}

fn name(s: &Server, slug: &str) -> Value {
    s.admin_json(&format!("/c/{slug}/api/admin/serverconfig"))["federation"]["username"].clone()
}

/// A channel opened after a restart keeps its actor's name; a new channel whose slug is the name of
/// another actor gets a free one; a slug with `-` gives a name with `_`.
#[test]
fn a_channels_actor_name_comes_from_its_slug_and_stays_its_own() {
    let s = Server::start_with_args(&["--federation-allow-http-loopback"]);
    s.set("serverurl", json!(s.base));
    let host = s.base.trim_start_matches("http://").to_string();
    for slug in ["streamer", "church-2", "gamma"] {
        let r = s.admin_post(
            "/api/admin/channels/create",
            &json!({"slug": slug, "name": slug, "adminPassword": "channel-admin-pw"}),
        );
        assert_eq!(r.status(), 200, "create {slug}");
        assert_eq!(admin_set(&s, slug, "federation/enable", json!(true)).0, 200);
    }
    assert_eq!(name(&s, "streamer"), "streamer_2", "the default channel's actor is @streamer");
    assert_eq!(name(&s, "church-2"), "church_2");
    assert_eq!(name(&s, "gamma"), "gamma");
    assert_eq!(admin_set(&s, "gamma", "federation/username", json!("gamma_show")).0, 200);
    let old_base = s.base.clone();
    let s = s.restart();
    assert_eq!(name(&s, "gamma"), "gamma_show", "the admin's choice is kept across a restart");
    assert_eq!(name(&s, "streamer"), "streamer_2");
    let (status, jrd) = webfinger(&s, "/.well-known/webfinger", &format!("church_2@{host}"));
    assert_eq!((status, self_link(&jrd)), (200, format!("{old_base}/c/church-2/federation/user/church_2")));
}

/// The dispatcher hands a channel's router the connection (the websocket upgrade, the peer's
/// address) and none of its own path parameters: a channel's chat websocket works, and so do its
/// routes with a path parameter (the actor in the test above; a clip here).
#[test]
fn a_channels_websocket_goes_through_the_dispatcher() {
    use common::chatclient::{next_of, say};
    let s = Server::start_with_args(&[]);
    let r = s.admin_post(
        "/api/admin/channels/create",
        &json!({"slug": "alpha", "name": "Alpha", "adminPassword": "pw-alpha"}),
    );
    assert_eq!(r.status(), 200);
    let r = s.post_json("/c/alpha/api/chat/register", &json!({"displayName": "viewer"}));
    assert_eq!(r.status(), 200);
    let token = r.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let url = format!("ws://127.0.0.1:{}/c/alpha/ws?accessToken={token}", s.web_port);
    let (mut ws, _) = tungstenite::connect(url).expect("a channel's websocket upgrades");
    if let tungstenite::stream::MaybeTlsStream::Plain(t) = ws.get_ref() {
        t.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    }
    let info = next_of(&mut ws, "CONNECTED_USER_INFO", Duration::from_secs(5)).expect("CONNECTED_USER_INFO");
    assert_eq!(info["user"]["displayName"], "viewer");
    say(&mut ws, "hello alpha");
    let chat = next_of(&mut ws, "CHAT", Duration::from_secs(5)).expect("the message comes back");
    assert_eq!(chat["body"], "<p>hello alpha</p>");
    // A route with a path parameter, in the channel's router: its own answer (404), not a 500 for
    // the dispatcher's parameters added to its own.
    let r = no_redirects().get(s.url("/c/alpha/api/clips/no-such-clip")).send().unwrap();
    assert_eq!(r.status(), 404, "{}", r.text().unwrap_or_default());
}
