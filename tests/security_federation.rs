//! Federation as an attacker on the Fediverse would try it (issue #39), against the real daemon and real
//! signing peers on 127.0.0.1 (`common::fedactor`): a server signing as another server's actor, key
//! documents the actor never listed, `javascript:` IRIs, signatures without `host` or made for another
//! host, replayed activities, engagement with objects castd never published, `javascript:` profile
//! links and follow pages, guessing Fediverse sign-in codes, remote follow aimed at private addresses,
//! floods of unknown keys, blocked domains written with a trailing dot, hidden followers. Every refused
//! attempt is checked to have stored nothing.

mod common;

use std::time::Duration;

use common::chatclient::{self, next_of};
use common::fedactor::{followed_by, FedActor};
use common::receiver::Receiver;
use common::Server;
use serde_json::{json, Value};

/// A daemon with federation on (plain http on loopback allowed, as every federation test).
fn federating() -> Server {
    let s = Server::start_with_args(&["--federation-allow-http-loopback"]);
    s.set("serverurl", json!(s.base));
    s.set("federation/enable", json!(true));
    s
}

fn actor_iri(s: &Server) -> String {
    format!("{}/federation/user/streamer", s.base)
}

fn inbox(s: &Server) -> String {
    format!("{}/federation/user/streamer/inbox", s.base)
}

fn follower_count(s: &Server, which: &str) -> i64 {
    s.admin_json(&format!("/api/admin/followers{which}"))["total"].as_i64().unwrap()
}

fn actions(s: &Server) -> Vec<Value> {
    s.admin_json("/api/admin/federation/actions")["results"].as_array().unwrap().clone()
}

fn follow_of(s: &Server, actor: &str, id: &str) -> Value {
    json!({"@context": "https://www.w3.org/ns/activitystreams", "id": id, "type": "Follow", "actor": actor,
        "object": actor_iri(s)})
}

/// Nothing stored: no follower (approved, pending or blocked), no activity.
fn assert_nothing_stored(s: &Server) {
    assert_eq!(follower_count(s, ""), 0, "no follower");
    assert_eq!(follower_count(s, "/pending"), 0, "no pending follower");
    assert_eq!(follower_count(s, "/blocked"), 0, "no blocked follower");
    assert_eq!(actions(s), Vec::<Value>::new(), "no activity");
}

/// Any fediverse engagement event within `wait`.
fn engagement_in_chat(ws: &mut chatclient::Ws, wait: Duration) -> Option<Value> {
    chatclient::next_where(ws, wait, |e| e["type"].as_str().is_some_and(|t| t.starts_with("FEDIVERSE_ENGAGEMENT")))
}

/// Finding 1, the setting: a daemon, a victim actor, an evil actor on another server (another origin:
/// another port), a chat watcher. `forge` prepares what evil serves and returns the activities it sends
/// and the key id it signs them with (with its own key). Each must be refused with 401 or 403, and
/// nothing be stored, shown in chat or answered; the victim, signing with its own key, is still heard.
fn forgery_is_refused(forge: impl FnOnce(&Server, &FedActor, &FedActor) -> (Vec<Value>, String)) {
    let a = federating();
    let victim = FedActor::start("victim");
    let evil = FedActor::start("evil");
    let mut chat = chatclient::join(&a, "watcher");
    let (activities, key_id) = forge(&a, &victim, &evil);
    for activity in &activities {
        let body = activity.to_string().into_bytes();
        let status = evil.post_raw(&inbox(&a), &evil.sign(&inbox(&a), &body, &key_id, chrono::Utc::now()), &body);
        assert!(status == 401 || status == 403, "a forged {}: {status}", activity["type"]);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_nothing_stored(&a);
    assert!(engagement_in_chat(&mut chat.ws, Duration::from_secs(1)).is_none(), "nothing shown in chat");
    assert!(victim.received().is_empty() && evil.received().is_empty(), "no Accept sent anywhere");
    assert_eq!(victim.send(&inbox(&a), &follow_of(&a, &victim.iri(), &format!("{}/follows/1", victim.base))), 202);
    assert_eq!(follower_count(&a, ""), 1, "the victim itself is still heard");
}

/// Finding 1: evil.example hosts a key document that says it belongs to the victim
/// (`owner: https://other.example/users/victim`) and signs a Follow and an Update as the victim.
#[test]
fn a_key_document_naming_another_servers_actor_is_refused() {
    forgery_is_refused(|a, victim, evil| {
        let key_id = format!("{}/keys/victim#main-key", evil.base);
        evil.serve(
            "/keys/victim",
            &json!({"id": key_id, "type": "Key", "owner": victim.iri(), "publicKeyPem": evil.public_pem()}),
        );
        let follow = follow_of(a, &victim.iri(), &format!("{}/follows/forged", victim.base));
        let update = json!({"id": format!("{}/updates/forged", victim.base), "type": "Update", "actor": victim.iri(),
            "object": {"id": victim.iri(), "type": "Person", "inbox": format!("{}/users/evil/inbox", evil.base)}});
        (vec![follow, update], key_id)
    });
}

/// Finding 1: a key document on the victim's own server (say, a file one of its users uploaded) that
/// the victim's actor document does not list.
#[test]
fn a_key_the_actors_own_document_does_not_list_is_refused() {
    forgery_is_refused(|a, victim, evil| {
        let uploaded = format!("{}/uploads/key.json#main-key", victim.base);
        victim.serve(
            "/uploads/key.json",
            &json!({"id": uploaded, "type": "Key", "owner": victim.iri(), "publicKeyPem": evil.public_pem()}),
        );
        (vec![follow_of(a, &victim.iri(), &format!("{}/follows/uploaded", victim.base))], uploaded)
    });
}

/// Finding 1: `javascript:` IRIs have the origin `null`: an actor document on evil.example whose `id`
/// and key `owner` are `javascript:` URLs.
#[test]
fn actors_with_javascript_iris_are_refused() {
    forgery_is_refused(|a, _victim, evil| {
        let js = "javascript:alert(document.domain)//";
        let js_key = format!("{}/users/js#main-key", evil.base);
        evil.serve(
            "/users/js",
            &json!({"id": js, "type": "Person", "preferredUsername": "js",
                "inbox": format!("{}/users/evil/inbox", evil.base), "url": js,
                "publicKey": {"id": js_key, "owner": js, "publicKeyPem": evil.public_pem()}}),
        );
        (vec![follow_of(a, js, &format!("{}/follows/js", evil.base))], js_key)
    });
}

/// A signature must cover `host`, and the `Host` must be this server's: a request signed without it,
/// or signed for another server (and replayed here), is refused.
#[test]
fn signatures_must_cover_this_servers_host() {
    let a = federating();
    let alice = FedActor::start("alice");
    let now = chrono::Utc::now();
    let follow = follow_of(&a, &alice.iri(), &format!("{}/follows/1", alice.base));
    let body = follow.to_string().into_bytes();

    let no_host =
        alice.sign_with(&inbox(&a), &body, &alice.key_id(), now, &["(request-target)", "date", "digest"], None);
    assert_eq!(alice.post_raw(&inbox(&a), &no_host, &body), 401, "host not signed");
    let covered = ["(request-target)", "host", "date", "digest"];
    let elsewhere = alice.sign_with(&inbox(&a), &body, &alice.key_id(), now, &covered, Some("other.example"));
    assert_eq!(alice.post_raw(&inbox(&a), &elsewhere, &body), 401, "signed for another host");
    let no_date =
        alice.sign_with(&inbox(&a), &body, &alice.key_id(), now, &["(request-target)", "host", "digest"], None);
    assert_eq!(alice.post_raw(&inbox(&a), &no_date, &body), 401, "date not signed");
    assert_nothing_stored(&a);

    // signed as Mastodon signs: accepted
    assert_eq!(alice.post_raw(&inbox(&a), &alice.sign(&inbox(&a), &body, &alice.key_id(), now), &body), 202);
    assert_eq!(follower_count(&a, ""), 1);
}

/// A captured signed Follow replayed after its Undo (inside the signature's window) is dropped by its
/// activity id, also after a restart (the replay store is in the database).
#[test]
fn a_replayed_follow_is_dropped_even_after_a_restart() {
    // A fixed server URL, so the captured request's signed Host stays this server's after the restart
    // (which moves the daemon to another port).
    let a = Server::start_with_args(&["--federation-allow-http-loopback"]);
    a.set("serverurl", json!("http://castd.test"));
    a.set("federation/enable", json!(true));
    let alice = FedActor::start("alice");
    let inbox_at = |s: &Server| format!("{}/federation/user/streamer/inbox", s.base);
    let actor = "http://castd.test/federation/user/streamer";
    let follow =
        json!({"id": format!("{}/follows/1", alice.base), "type": "Follow", "actor": alice.iri(), "object": actor});
    let body = follow.to_string().into_bytes();
    let signed_for = "http://castd.test/federation/user/streamer/inbox";
    let captured = alice.sign(signed_for, &body, &alice.key_id(), chrono::Utc::now());

    assert_eq!(alice.post_raw(&inbox_at(&a), &captured, &body), 202);
    assert_eq!(follower_count(&a, ""), 1);
    alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Accept").expect("the Accept");
    let undo = json!({"id": format!("{}/undo/1", alice.base), "type": "Undo", "actor": alice.iri(), "object": follow});
    let undo_body = undo.to_string().into_bytes();
    let signed_undo = alice.sign(signed_for, &undo_body, &alice.key_id(), chrono::Utc::now());
    assert_eq!(alice.post_raw(&inbox_at(&a), &signed_undo, &undo_body), 202);
    assert_eq!(follower_count(&a, ""), 0);

    // the captured Follow, byte for byte
    let status = alice.post_raw(&inbox_at(&a), &captured, &body);
    assert!(status == 202 || status == 401, "{status}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(follower_count(&a, ""), 0, "the replayed Follow did not re-add the follower");
    let a = a.restart();
    let status = alice.post_raw(&inbox_at(&a), &captured, &body);
    assert!(status == 202 || status == 401, "{status}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(follower_count(&a, ""), 0, "nor after a restart");
    let accepts = alice.received().iter().filter(|r| r.json()["type"] == "Accept").count();
    assert_eq!(accepts, 1, "only the first Follow was answered");
}

/// Likes and boosts (and their Undo) of objects castd did not publish are not recorded or shown: another
/// server's post, an IRI under castd's prefix it never published, castd's actor itself.
#[test]
fn engagement_with_objects_that_are_not_castds_is_not_recorded() {
    let a = Server::start_with_args(&["--federation-allow-http-loopback"]);
    let alice = followed_by(&a, "alice");
    let mut chat = chatclient::join(&a, "watcher");
    let before = actions(&a);
    let mut n = 0;
    for object in [
        "https://elsewhere.example/notes/1".to_string(),
        format!("{}/federation/never-published", a.base),
        actor_iri(&a),
    ] {
        for kind in ["Like", "Announce"] {
            n += 1;
            let activity =
                json!({"id": format!("{}/act/{n}", alice.base), "type": kind, "actor": alice.iri(), "object": object});
            assert_eq!(alice.send(&inbox(&a), &activity), 202, "{kind} of {object}");
            let undo = json!({"id": format!("{}/undo/{n}", alice.base), "type": "Undo", "actor": alice.iri(), "object": activity});
            assert_eq!(alice.send(&inbox(&a), &undo), 202);
        }
    }
    assert_eq!(actions(&a), before, "nothing recorded");
    assert!(engagement_in_chat(&mut chat.ws, Duration::from_secs(1)).is_none(), "nothing shown");

    // A like of a post castd published counts.
    assert!(a.admin_post("/api/admin/federation/send", &json!({"value": "hello"})).status().is_success());
    let post = alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Create").expect("the post");
    let note = post.json()["object"]["id"].as_str().unwrap().to_string();
    let like =
        json!({"id": format!("{}/likes/real", alice.base), "type": "Like", "actor": alice.iri(), "object": note});
    assert_eq!(alice.send(&inbox(&a), &like), 202);
    assert!(actions(&a).iter().any(|x| x["type"] == "LIKE"));
    assert!(next_of(&mut chat.ws, "FEDIVERSE_ENGAGEMENT_LIKE", Duration::from_secs(5)).is_some());
    // Another actor's Undo of that like changes nothing.
    let bob = FedActor::start("bob");
    let undo = json!({"id": format!("{}/undo/x", bob.base), "type": "Undo", "actor": bob.iri(), "object": like});
    assert_eq!(bob.send(&inbox(&a), &undo), 202);
    assert!(actions(&a).iter().any(|x| x["type"] == "LIKE"), "bob cannot undo alice's like");
}

/// Finding 2 (the federation side): `javascript:` (or any non-http) profile links and avatars of a
/// remote actor are never stored or broadcast (chat event, webhook, follower list), neither from its
/// document nor from its Update; a remote follow page that is not http(s) is never handed out.
#[test]
fn javascript_urls_from_remote_documents_are_never_stored_or_broadcast() {
    let a = federating();
    let hook = Receiver::start(&[]);
    let r = a
        .admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": ["FEDIVERSE_ENGAGEMENT_FOLLOW"]}));
    assert!(r.status().is_success());
    let mut chat = chatclient::join(&a, "watcher");
    let mallory = FedActor::start("mallory");
    {
        let mut extra = mallory.actor_extra.lock().unwrap();
        extra.insert("url".into(), json!("javascript:alert(document.domain)"));
        extra.insert("icon".into(), json!({"type": "Image", "url": "javascript:alert(2)"}));
    }
    let follow = follow_of(&a, &mallory.iri(), &format!("{}/follows/1", mallory.base));
    assert_eq!(mallory.send(&inbox(&a), &follow), 202);

    let ev = next_of(&mut chat.ws, "FEDIVERSE_ENGAGEMENT_FOLLOW", Duration::from_secs(5)).expect("the chat event");
    let no_script = |v: &Value, what: &str| {
        let text = v.to_string().to_ascii_lowercase();
        assert!(!text.contains("javascript:"), "{what}: {v}");
    };
    no_script(&ev, "chat event");
    assert_eq!(ev["link"], "", "the profile link is dropped");
    assert!(ev["image"].is_null(), "the avatar is dropped: {ev}");
    let hooked = hook
        .wait_for(Duration::from_secs(10), |r| r.json()["type"] == "FEDIVERSE_ENGAGEMENT_FOLLOW")
        .expect("the webhook");
    no_script(&hooked.json(), "webhook");
    let list = a.admin_json("/api/admin/followers");
    no_script(&list, "follower list");
    assert_eq!(list["results"][0]["image"], "");

    // An Update with other schemes changes nothing of that.
    let update = json!({"id": format!("{}/upd/1", mallory.base), "type": "Update", "actor": mallory.iri(),
        "object": {"id": mallory.iri(), "type": "Person", "preferredUsername": "mallory", "name": "M",
            "inbox": format!("{}/inbox", mallory.iri()), "url": "JavaScript:alert(3)",
            "icon": {"url": "data:text/html,<script>alert(4)</script>"}}});
    assert_eq!(mallory.send(&inbox(&a), &update), 202);
    let list = a.admin_json("/api/admin/followers");
    assert_eq!(list["results"][0]["name"], "M", "the update was applied");
    no_script(&list, "follower list after the update");
    assert_eq!(list["results"][0]["image"], "");
    assert!(!list.to_string().contains("data:"), "{list}");

    // Remote follow hands out only an http(s) follow page.
    *mallory.follow_template.lock().unwrap() = "javascript:alert(document.cookie)//{uri}".into();
    let r = a.post_json("/api/remotefollow", &json!({"account": mallory.account()}));
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().unwrap();
    assert_eq!(v["success"], false);
    assert!(v.get("redirectUrl").is_none(), "{v}");
    *mallory.follow_template.lock().unwrap() = format!("{}/authorize_interaction?uri={{uri}}", mallory.base);
    let v: Value = a.post_json("/api/remotefollow", &json!({"account": mallory.account()})).json().unwrap();
    assert!(v["redirectUrl"].as_str().unwrap().starts_with(&format!("{}/authorize_interaction?uri=", mallory.base)));
}

/// An actor whose inbox castd may not deliver to (a private address) is refused: castd stores no such
/// follower and never sends there.
#[test]
fn an_actor_whose_inbox_is_a_private_address_is_refused() {
    let a = federating();
    let mallory = FedActor::start("mallory");
    mallory.actor_extra.lock().unwrap().insert("inbox".into(), json!("https://10.0.0.1/inbox"));
    let follow = follow_of(&a, &mallory.iri(), &format!("{}/follows/1", mallory.base));
    assert_eq!(mallory.send(&inbox(&a), &follow), 401);
    assert_nothing_stored(&a);
}

fn dm_code(alice: &FedActor, since: usize) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = alice.received().into_iter().skip(since).find(|r| r.json()["type"] == "Create");
        if let Some(r) = got {
            let content = r.json()["object"]["content"].as_str().unwrap().to_string();
            return content.split("<strong>").nth(1).unwrap().split("</strong>").next().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the DM with the code");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Finding 3: Fediverse sign-in codes are long and random, work only with the token of the chat user
/// who asked, are burnt after three wrong tries, and wrong codes from one address are slowed down (429).
#[test]
fn sign_in_codes_are_long_bound_to_their_user_and_burnt_after_three_misses() {
    let a = federating();
    let alice = FedActor::start("alice");
    let (_, token1, _) = chatclient::register(&a, Some("one"));
    let (_, token2, _) = chatclient::register(&a, Some("two"));
    let ask = |token: &str| {
        let r = a.post_json(&format!("/api/auth/fediverse?accessToken={token}"), &json!({"account": alice.account()}));
        assert!(r.status().is_success(), "{}", r.text().unwrap_or_default());
    };
    let verify = |token: Option<&str>, code: &str| {
        let path = match token {
            Some(t) => format!("/api/auth/fediverse/verify?accessToken={t}"),
            None => "/api/auth/fediverse/verify".to_string(),
        };
        a.post_json(&path, &json!({"code": code}))
    };

    ask(&token1);
    let code = dm_code(&alice, 0);
    let plain: String = code.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    assert!(plain.len() >= 10, "a long code: {code}");
    assert!(!plain.chars().all(|c| c.is_ascii_digit()) || plain.len() >= 16, "more than digits: {code}");
    assert_eq!(verify(None, &code).status().as_u16(), 401, "no token");
    assert_eq!(verify(Some(&token2), &code).status().as_u16(), 403, "another user's token");
    assert_eq!(verify(Some("not-a-token"), &code).status().as_u16(), 401);
    assert!(verify(Some(&token1), &code).status().is_success(), "the asking user's token");

    // three wrong tries burn the code
    let seen = alice.received().len();
    ask(&token1);
    let code = dm_code(&alice, seen);
    let wrong = if code == "00000-00000" { "11111-11111" } else { "00000-00000" };
    for _ in 0..3 {
        assert_eq!(verify(Some(&token1), wrong).status().as_u16(), 403);
    }
    let r = verify(Some(&token1), &code);
    assert_eq!(r.status().as_u16(), 403, "burnt");
    assert_eq!(r.json::<Value>().unwrap()["success"], false);

    // wrong codes from one address: backoff (429 with a StatusResponse and Retry-After)
    let mut limited = None;
    for _ in 0..10 {
        let r = verify(Some(&token1), wrong);
        if r.status().as_u16() == 429 {
            limited = Some(r);
            break;
        }
        assert_eq!(r.status().as_u16(), 403);
    }
    let r = limited.expect("429 after repeated wrong codes");
    assert!(r.headers().get("retry-after").is_some());
    let v: Value = r.json().unwrap();
    assert_eq!(v["success"], false);
    assert!(v["message"].is_string());
}

/// Finding 4 (federation side): unauthenticated remote follow never fetches loopback or private
/// targets (without the development switch), and answers one generic sentence on any failure, never
/// the remote server's error text.
#[test]
fn remote_follow_never_reaches_private_addresses_and_answers_generically() {
    let s = Server::start();
    s.set("serverurl", json!(s.base));
    s.set("federation/enable", json!(true));
    let peer = Receiver::start_answering(&[], "application/jrd+json", r#"{"links":[]}"#);
    let port = peer.url.rsplit(':').next().unwrap().to_string();
    let generic = |r: reqwest::blocking::Response, account: &str| {
        assert_eq!(r.status().as_u16(), 400, "{account}");
        let v: Value = r.json().unwrap();
        assert_eq!(v["success"], false);
        let m = v["message"].as_str().unwrap().to_string();
        for leak in ["127.0.0.1", "10.255", "169.254", "localhost", "error", "connect", "tls", "refused", port.as_str()]
        {
            assert!(!m.to_ascii_lowercase().contains(leak), "{account}: the answer tells {leak}: {m}");
        }
        m
    };
    let mut messages = Vec::new();
    for account in [
        format!("x@127.0.0.1:{port}"),
        format!("x@localhost:{port}"),
        format!("x@[::1]:{port}"),
        "x@10.255.255.1".to_string(),
        "x@169.254.169.254".to_string(),
        "x@0.0.0.0".to_string(),
    ] {
        let r = s.post_json("/api/remotefollow", &json!({ "account": account }));
        messages.push(generic(r, &account));
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "one sentence whatever went wrong: {messages:?}");
    assert!(peer.all().is_empty(), "nothing reached the loopback peer: {:?}", peer.all().len());

    // With the development switch loopback is allowed; a server that answers with an error still
    // gets only the generic sentence back.
    let d = federating();
    let failing = Receiver::start_answering(&[500], "text/plain", "secret internal detail");
    let account = format!("x@{}", failing.url.trim_start_matches("http://"));
    let r = d.post_json("/api/remotefollow", &json!({ "account": account }));
    let m = generic(r, &account);
    assert!(!m.contains("secret") && !m.contains("500"), "{m}");
    assert_eq!(failing.all().len(), 1, "it was asked once");
}

/// Finding 4 (the inbox): a flood of requests naming unknown keys, or bad signatures with a known key,
/// cannot make castd fetch without bound: failed fetches are remembered, a cached actor is fetched
/// again at most once a minute, and fetches are limited per sending address and per remote host.
#[test]
fn floods_of_unknown_keys_or_bad_signatures_cause_few_fetches() {
    let a = federating();
    let evil = FedActor::start("evil");
    let note = format!("{}/federation/x", a.base);
    let like = |actor: &str, n: usize| {
        let activity =
            json!({"id": format!("{}/likes/{n}", evil.base), "type": "Like", "actor": actor, "object": note});
        let body = activity.to_string().into_bytes();
        let h = evil.sign(&inbox(&a), &body, &format!("{actor}#main-key"), chrono::Utc::now());
        evil.post_raw(&inbox(&a), &h, &body)
    };

    // one unknown actor, 40 times: fetched once
    let ghost = format!("{}/users/ghost", evil.base);
    for n in 0..40 {
        let st = like(&ghost, n);
        assert!(st == 401 || st == 429 || st == 503, "{st}");
    }
    assert!(evil.gets_of("/users/ghost") <= 1, "one fetch for one unknown actor: {}", evil.gets_of("/users/ghost"));

    // 100 different unknown actors: bounded by the per-address and per-host limits
    for n in 0..100 {
        let st = like(&format!("{}/users/ghost{n}", evil.base), 100 + n);
        assert!(st == 401 || st == 429 || st == 503, "{st}");
    }
    let fetched = evil.gets.lock().unwrap().iter().filter(|p| p.starts_with("/users/ghost")).count();
    assert!(fetched <= 45, "100 unknown actors caused {fetched} fetches");

    // a known actor, 30 bad signatures (signed with another key): at most one fetch more (the
    // address's rate, spent by the flood above, refills first: every peer here is 127.0.0.1)
    std::thread::sleep(Duration::from_secs(3));
    let alice = FedActor::start("alice");
    let follow = follow_of(&a, &alice.iri(), &format!("{}/follows/1", alice.base));
    assert_eq!(alice.send(&inbox(&a), &follow), 202);
    let before = alice.gets_of("/users/alice");
    for n in 0..30 {
        let activity =
            json!({"id": format!("{}/likes/{n}", alice.base), "type": "Like", "actor": alice.iri(), "object": note});
        let body = activity.to_string().into_bytes();
        let h = evil.sign(&inbox(&a), &body, &alice.key_id(), chrono::Utc::now());
        let st = evil.post_raw(&inbox(&a), &h, &body);
        assert!(st == 401 || st == 429, "{st}");
    }
    let refetched = alice.gets_of("/users/alice") - before;
    assert!(refetched <= 1, "30 bad signatures caused {refetched} fetches of the actor");
    assert_eq!(actions(&a).len(), 1, "only the follow");
}

/// Blocked domains are refused on delivery, on Fediverse sign-in and on remote follow (not only
/// inbound): nothing is sent to, fetched from or accepted for a blocked server.
#[test]
fn blocked_domains_are_refused_on_delivery_sign_in_and_remote_follow() {
    let a = Server::start_with_args(&["--federation-allow-http-loopback"]);
    let alice = followed_by(&a, "alice");
    let (_, token, _) = chatclient::register(&a, Some("viewer"));
    a.set("federation/blockdomains", json!(["127.0.0.1"]));
    let gets_before = alice.gets.lock().unwrap().len();
    let received_before = alice.received().len();
    // delivery: a post does not go to the (already recorded) follower
    assert!(a
        .admin_post("/api/admin/federation/send", &json!({"value": "not for blocked servers"}))
        .status()
        .is_success());
    // sign-in
    let r = a.post_json(&format!("/api/auth/fediverse?accessToken={token}"), &json!({"account": alice.account()}));
    assert_eq!(r.status().as_u16(), 403, "sign-in");
    // remote follow
    let r = a.post_json("/api/remotefollow", &json!({"account": alice.account()}));
    assert_eq!(r.status().as_u16(), 403, "remote follow");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(alice.received().len(), received_before, "nothing delivered to a blocked domain");
    assert_eq!(alice.gets.lock().unwrap().len(), gets_before, "nothing fetched from a blocked domain");
}

/// Blocked domains are normalised (lower case, no trailing dot) when set and when checked: `host.` is
/// the same host.
#[test]
fn blocked_domains_are_normalised() {
    let a = Server::start_with_args(&["--federation-allow-http-loopback"]);
    let alice = followed_by(&a, "alice");
    let before = actions(&a).len();
    a.set("federation/blockdomains", json!(["127.0.0.1."]));
    let like =
        json!({"id": format!("{}/likes/1", alice.base), "type": "Like", "actor": alice.iri(), "object": actor_iri(&a)});
    assert_eq!(alice.send(&inbox(&a), &like), 403, "inbound");
    assert_eq!(actions(&a).len(), before);
    assert_eq!(a.admin_json("/api/admin/serverconfig")["federation"]["blockedDomains"], json!(["127.0.0.1"]));
}

/// `hidefollowers` hides the list from `/api/followers` too (only the total is public, as in the
/// ActivityPub collection); the admin's list stays.
#[test]
fn hidden_followers_are_not_listed_publicly() {
    let a = Server::start_with_args(&["--federation-allow-http-loopback"]);
    let alice = followed_by(&a, "alice");
    let public = a.get_json("/api/followers");
    assert_eq!(public["results"][0]["link"], alice.iri());
    a.set("federation/hidefollowers", json!(true));
    let public = a.get_json("/api/followers");
    assert_eq!(public["total"], 1);
    assert_eq!(public["results"], json!([]), "{public}");
    assert!(!public.to_string().contains(&alice.iri()));
    let admin = a.admin_json("/api/admin/followers");
    assert_eq!(admin["results"][0]["link"], alice.iri(), "the admin still sees them");
    let ap: Value = a
        .client
        .get(a.url("/federation/user/streamer/followers?page=1"))
        .header("accept", "application/activity+json")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(ap["orderedItems"], json!([]));
    assert_eq!(ap["totalItems"], 1);
}
