//! Federation (ActivityPub) end to end, on loopback only: two real castd daemons federating with each
//! other (B follows A, A goes live with an ffmpeg publish, B sees A online, then offline), and a small
//! test actor with its own RSA key sending signed (and badly signed) activities.

mod common;

use std::time::Duration;

use common::chatclient::{self, next_of};
use common::fedactor::{self, FedActor};
use common::media::{publish, wait_exit};
use common::receiver::Receiver;
use common::Server;
use serde_json::{json, Value};

const KEY: &str = "federation-test-key-1";
const AP: &str = "application/activity+json";

/// A daemon with federation on (plain http on loopback allowed), quick retries.
fn federating(env: &[(&str, &str)]) -> Server {
    let mut all = vec![("CASTD_FEDERATION_RETRY_BASE_MS", "300"), ("CASTD_FEDERATION_DELIVERY_TIMEOUT_MS", "3000")];
    all.extend_from_slice(env);
    let s = Server::start_with_env(&["--federation-allow-http-loopback", "--streamkey", KEY], &all);
    s.set("serverurl", json!(s.base));
    s.set("federation/enable", json!(true));
    s
}

fn no_redirects() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

fn ap_get(s: &Server, path: &str) -> Value {
    let r = no_redirects().get(s.url(path)).header("accept", AP).send().unwrap();
    assert!(r.status().is_success(), "GET {path}: {}", r.status());
    r.json().unwrap()
}

fn actor_iri(s: &Server) -> String {
    format!("{}/federation/user/streamer", s.base)
}

fn inbox(s: &Server) -> String {
    format!("{}/federation/user/streamer/inbox", s.base)
}

fn followers(s: &Server, which: &str) -> Value {
    s.admin_json(&format!("/api/admin/followers{which}"))
}

fn actions(s: &Server) -> Vec<Value> {
    s.admin_json("/api/admin/federation/actions")["results"].as_array().unwrap().clone()
}

#[test]
fn disabled_federation_answers_405() {
    let s = Server::start_with_args(&["--federation-allow-http-loopback"]);
    for path in [
        "/.well-known/webfinger?resource=acct:streamer@x",
        "/.well-known/host-meta",
        "/.well-known/nodeinfo",
        "/.well-known/x-nodeinfo2",
        "/nodeinfo/2.0",
        "/api/v1/instance",
        "/federation/user/streamer",
        "/federation/user/streamer/outbox",
        "/federation/user/streamer/followers",
    ] {
        assert_eq!(s.get(path).status().as_u16(), 405, "{path}");
    }
    let r = s.post_json("/federation/user/streamer/inbox", &json!({"type": "Follow"}));
    assert_eq!(r.status().as_u16(), 405);
    // enabling needs a server URL
    let r = s.admin_post("/api/admin/config/federation/enable", &json!({"value": true}));
    assert_eq!(r.status().as_u16(), 400);
}

#[test]
fn discovery_and_actor_documents() {
    let s = federating(&[]);
    let host = s.base.trim_start_matches("http://").to_string();
    let c = no_redirects();
    let wf = c.get(s.url(&format!("/.well-known/webfinger?resource=acct:streamer@{host}"))).send().unwrap();
    assert_eq!(wf.status().as_u16(), 200);
    assert_eq!(wf.headers()["content-type"], "application/jrd+json");
    let jrd: Value = wf.json().unwrap();
    assert_eq!(jrd["subject"], format!("acct:streamer@{host}"));
    let self_link = jrd["links"].as_array().unwrap().iter().find(|l| l["rel"] == "self").unwrap();
    assert_eq!(self_link["href"], actor_iri(&s));
    for (q, want) in [
        ("", 400),
        ("?resource=streamer@x", 400),
        ("?resource=acct:nobody", 400),
        ("?resource=acct:streamer@elsewhere.example", 501),
        (&format!("?resource=acct:nobody@{host}") as &str, 404),
    ] {
        let r = c.get(s.url(&format!("/.well-known/webfinger{q}"))).send().unwrap();
        assert_eq!(r.status().as_u16(), want, "webfinger{q}");
    }
    let index = s.get_json("/.well-known/nodeinfo");
    assert_eq!(index["links"][0]["href"], format!("{}/nodeinfo/2.0", s.base));
    let ni = s.get_json("/nodeinfo/2.0");
    assert_eq!(ni["version"], "2.0");
    assert_eq!(ni["protocols"], json!(["activitypub"]));
    assert!(ni["software"]["name"].as_str().unwrap().chars().all(|c| c.is_ascii_lowercase() || c == '-'));
    assert_eq!(ni["usage"]["users"]["total"], 1);
    assert_eq!(ni["openRegistrations"], false);
    assert_eq!(s.get_json("/.well-known/x-nodeinfo2")["server"]["baseUrl"], s.base);
    assert_eq!(s.get_json("/api/v1/instance")["uri"], host);
    let hm = s.get("/.well-known/host-meta").text().unwrap();
    assert!(hm.contains("/.well-known/webfinger?resource={uri}"), "{hm}");

    let actor = ap_get(&s, "/federation/user/streamer");
    assert_eq!(actor["type"], "Service");
    assert_eq!(actor["id"], actor_iri(&s));
    assert_eq!(actor["inbox"], inbox(&s));
    assert!(actor["publicKey"]["publicKeyPem"].as_str().unwrap().contains("BEGIN PUBLIC KEY"));
    assert_eq!(actor["publicKey"]["owner"], actor_iri(&s));
    assert_eq!(actor["icon"]["url"], format!("{}/logo/external", s.base));
    // browsers are sent to the web page
    let r = c.get(s.url("/federation/user/streamer")).header("accept", "text/html").send().unwrap();
    assert_eq!(r.status().as_u16(), 307);
    assert_eq!(r.headers()["location"], "/");
    assert_eq!(c.get(s.url("/federation/user/other")).header("accept", AP).send().unwrap().status().as_u16(), 404);
    assert_eq!(
        c.get(s.url("/federation/user/streamer/following")).header("accept", AP).send().unwrap().status().as_u16(),
        404
    );
    let outbox = ap_get(&s, "/federation/user/streamer/outbox");
    assert_eq!(outbox["type"], "OrderedCollection");
    assert_eq!(outbox["totalItems"], 0);
    assert_eq!(ap_get(&s, "/federation/user/streamer/followers")["totalItems"], 0);
    // the key is made once and kept across a restart
    let pem = actor["publicKey"]["publicKeyPem"].clone();
    let s = s.restart();
    assert_eq!(ap_get(&s, "/federation/user/streamer")["publicKey"]["publicKeyPem"], pem);
}

#[test]
fn two_servers_federate_and_go_live() {
    let a = federating(&[]);
    let b = federating(&[("CASTD_FEDERATION_STATUS_POLL_MS", "500")]);
    a.set("streamtitle", json!("Federated test stream"));
    let r = b.admin_post("/api/admin/federation/servers", &json!({ "url": a.base }));
    assert!(r.status().is_success(), "add server: {} {}", r.status(), r.text().unwrap_or_default());
    // A accepts B's signed Follow; B records the Accept
    let followed = b.wait_for(Duration::from_secs(15), || {
        let list = b.admin_json("/api/admin/federation/servers");
        list["servers"][0]["followedAt"].is_string().then_some(list)
    });
    let list = followed.expect("B's follow of A accepted");
    assert_eq!(list["servers"][0]["name"], a.get_json("/api/config")["name"]);
    assert_eq!(list["servers"][0]["isOnline"], false);
    let f = followers(&a, "");
    assert_eq!(f["total"], 1, "{f}");
    assert_eq!(f["results"][0]["link"], actor_iri(&b));
    assert_eq!(a.get_json("/api/followers")["total"], 1);
    assert_eq!(a.get_json("/api/config")["federation"]["followerCount"], 1);
    assert!(actions(&a).iter().any(|x| x["type"] == "FOLLOW" && x["actorIRI"] == actor_iri(&b)));

    // A goes live: B receives the signed go-live Note and shows A online with its title
    let mut ff = publish(&a, KEY, "320x240", 8);
    let online = b.wait_for(Duration::from_secs(40), || {
        let list = b.get_json("/api/federation/servers");
        (list["servers"][0]["isOnline"] == true).then_some(list)
    });
    online.expect("B shows A online");
    // the title is fetched from A's status right after, off the inbox request
    let titled = b.wait_for(Duration::from_secs(10), || {
        let list = b.get_json("/api/federation/servers");
        (list["servers"][0]["streamTitle"] == "Federated test stream").then_some(list)
    });
    let list = titled.expect("B shows A's stream title");
    assert_eq!(list["servers"][0]["isOnline"], true);
    assert!(list["servers"][0]["lastSeenOnline"].is_string());
    wait_exit(&mut ff, Duration::from_secs(30));
    // Owncast posts nothing when a stream ends: B's status poll sees A offline
    let offline = b.wait_for(Duration::from_secs(15), || {
        let list = b.get_json("/api/federation/servers");
        (list["servers"][0]["isOnline"] == false).then_some(list)
    });
    let list = offline.expect("B shows A offline once its stream ended");
    assert!(list["servers"][0]["lastSeenOnline"].is_string(), "{list}");
    let outbox = ap_get(&a, "/federation/user/streamer/outbox?page=1");
    assert_eq!(outbox["totalItems"], 1);
    let note = &outbox["orderedItems"][0]["object"];
    assert_eq!(note["type"], "Note");
    let content = note["content"].as_str().unwrap();
    assert!(content.contains("I&#39;ve gone live!") || content.contains("I've gone live!"), "{content}");
    assert!(content.contains(&a.base) && content.contains("#streaming"), "{content}");
    assert_eq!(note["to"], json!(["https://www.w3.org/ns/activitystreams#Public"]));
    // the note itself is served
    let id = note["id"].as_str().unwrap().trim_start_matches(&a.base).to_string();
    assert_eq!(ap_get(&a, &id)["type"], "Note");

    // B stops following A: the Undo removes the follower on A
    let id = list["servers"][0]["id"].as_i64().unwrap();
    let r = b
        .client
        .delete(b.url(&format!("/api/admin/federation/servers/{id}")))
        .basic_auth("admin", Some(&b.admin_password))
        .send()
        .unwrap();
    assert!(r.status().is_success());
    assert!(a.wait_for(Duration::from_secs(10), || (followers(&a, "")["total"] == 0).then_some(())).is_some());
    assert_eq!(b.admin_json("/api/admin/federation/servers")["servers"], json!([]));
}

#[test]
fn private_mode_waits_for_approval() {
    let a = federating(&[]);
    let b = federating(&[]);
    a.set("federation/private", json!(true));
    assert_eq!(ap_get(&a, "/federation/user/streamer")["manuallyApprovesFollowers"], true);
    let r = b.admin_post("/api/admin/federation/servers", &json!({ "url": a.base }));
    assert!(r.status().is_success());
    let pending = a.wait_for(Duration::from_secs(15), || {
        let p = followers(&a, "/pending");
        (p["total"] == 1).then_some(p)
    });
    assert_eq!(pending.expect("a pending follower")["results"][0]["link"], actor_iri(&b));
    assert_eq!(followers(&a, "")["total"], 0);
    std::thread::sleep(Duration::from_secs(1));
    assert!(b.admin_json("/api/admin/federation/servers")["servers"][0]["followedAt"].is_null());
    let r = a.admin_post("/api/admin/followers/approve", &json!({"actorIRI": actor_iri(&b), "approved": true}));
    assert!(r.status().is_success());
    assert_eq!(followers(&a, "")["total"], 1);
    assert_eq!(followers(&a, "/pending")["total"], 0);
    let accepted = b.wait_for(Duration::from_secs(15), || {
        b.admin_json("/api/admin/federation/servers")["servers"][0]["followedAt"].as_str().map(str::to_string)
    });
    assert!(accepted.is_some(), "the approval sends the Accept");
    // unknown follower, bad bodies
    let r = a.admin_post("/api/admin/followers/approve", &json!({"actorIRI": "https://x.example/u", "approved": true}));
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(a.admin_post("/api/admin/followers/approve", &json!({"approved": true})).status().as_u16(), 400);
    // remove
    let r = a.admin_post("/api/admin/followers/remove", &json!({"actorIRI": actor_iri(&b)}));
    assert!(r.status().is_success());
    assert_eq!(followers(&a, "")["total"], 0);
}

#[test]
fn inbox_verifies_signatures_and_handles_activities() {
    let a = federating(&[]);
    let alice = FedActor::start("alice");
    let hook = Receiver::start(&[]);
    let r = a
        .admin_post("/api/admin/webhooks/create", &json!({"url": hook.url, "events": ["FEDIVERSE_ENGAGEMENT_FOLLOW"]}));
    assert!(r.status().is_success());
    let mut chat = chatclient::join(&a, "watcher");
    let a_pem = ap_get(&a, "/federation/user/streamer")["publicKey"]["publicKeyPem"].as_str().unwrap().to_string();

    // Follow: 202, follower stored, a signed Accept arrives in alice's inbox
    let follow_id = format!("{}/follows/1", alice.base);
    let follow = json!({"@context": "https://www.w3.org/ns/activitystreams", "id": follow_id, "type": "Follow",
        "actor": alice.iri(), "object": actor_iri(&a)});
    assert_eq!(alice.send(&inbox(&a), &follow), 202);
    let accept = alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Accept").expect("an Accept");
    assert_eq!(accept.json()["object"]["id"], follow_id);
    assert_eq!(accept.json()["actor"], actor_iri(&a));
    fedactor::verify_request(&accept, &a_pem).expect("the Accept is signed with A's key");
    let f = followers(&a, "");
    assert_eq!(f["total"], 1);
    assert_eq!(f["results"][0]["link"], alice.iri());
    assert_eq!(f["results"][0]["username"], alice.account());
    let ev = next_of(&mut chat.ws, "FEDIVERSE_ENGAGEMENT_FOLLOW", Duration::from_secs(5)).expect("chat event");
    assert_eq!(ev["title"], alice.account());
    let hooked = hook.wait_for(Duration::from_secs(10), |r| r.json()["type"] == "FEDIVERSE_ENGAGEMENT_FOLLOW");
    assert!(hooked.is_some(), "the follow webhook");

    // an admin post reaches the follower
    let r = a.admin_post("/api/admin/federation/send", &json!({"value": "hello **fediverse**"}));
    assert!(r.status().is_success());
    let post = alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Create").expect("the admin's post");
    assert!(post.json()["object"]["content"].as_str().unwrap().contains("<strong>fediverse</strong>"));
    fedactor::verify_request(&post, &a_pem).expect("signed");

    // Like and Announce of that post: activity list, chat events
    let note = post.json()["object"]["id"].as_str().unwrap().to_string();
    let like = json!({"id": format!("{}/likes/1", alice.base), "type": "Like", "actor": alice.iri(), "object": note});
    assert_eq!(alice.send(&inbox(&a), &like), 202);
    assert!(next_of(&mut chat.ws, "FEDIVERSE_ENGAGEMENT_LIKE", Duration::from_secs(5)).is_some());
    let boost =
        json!({"id": format!("{}/boosts/1", alice.base), "type": "Announce", "actor": alice.iri(), "object": note});
    assert_eq!(alice.send(&inbox(&a), &boost), 202);
    assert!(next_of(&mut chat.ws, "FEDIVERSE_ENGAGEMENT_REPOST", Duration::from_secs(5)).is_some());
    let kinds: Vec<String> = actions(&a).iter().map(|x| x["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, ["REPOST", "LIKE", "FOLLOW"]);

    // refused requests change nothing
    let before = (actions(&a).len(), followers(&a, "")["total"].clone());
    let like2 = json!({"id": format!("{}/likes/2", alice.base), "type": "Like", "actor": alice.iri(), "object": note});
    let body = like2.to_string().into_bytes();
    let now = chrono::Utc::now();
    // tampered body (signed one thing, sent another with its own digest)
    let mut h = alice.sign(&inbox(&a), &body, &alice.key_id(), now);
    let other = json!({"id": "x", "type": "Like", "actor": alice.iri(), "object": "y"}).to_string().into_bytes();
    assert_eq!(alice.post_raw(&inbox(&a), &h, &other), 401, "digest mismatch");
    for (k, v) in h.iter_mut() {
        if k == "digest" {
            *v = fedactor::digest(&other);
        }
    }
    assert_eq!(alice.post_raw(&inbox(&a), &h, &other), 401, "tampered signature");
    // stale date
    let h = alice.sign(&inbox(&a), &body, &alice.key_id(), now - chrono::TimeDelta::hours(24));
    assert_eq!(alice.post_raw(&inbox(&a), &h, &body), 401, "stale date");
    // unknown key
    let ghost = format!("{}/users/ghost#main-key", alice.base);
    let h = alice.sign(&inbox(&a), &body, &ghost, now);
    assert_eq!(alice.post_raw(&inbox(&a), &h, &body), 401, "unknown key");
    // no signature at all
    assert_eq!(alice.post_raw(&inbox(&a), &[], &body), 401, "unsigned");
    // signed by alice for another origin's actor
    let spoof = json!({"id": "https://elsewhere.example/l", "type": "Like", "actor": "https://elsewhere.example/users/bob", "object": note});
    assert_eq!(alice.send(&inbox(&a), &spoof), 403, "actor is not the key owner");
    // blocked domain
    a.set("federation/blockdomains", json!(["127.0.0.1"]));
    assert_eq!(alice.send(&inbox(&a), &like2), 403, "blocked domain");
    a.set("federation/blockdomains", json!([]));
    assert_eq!((actions(&a).len(), followers(&a, "")["total"].clone()), before, "nothing changed");
    // garbage bodies
    assert_eq!(alice.post_raw(&inbox(&a), &[], b"not json"), 400);

    // Undo Like removes it from the list
    let undo = json!({"id": format!("{}/undo/1", alice.base), "type": "Undo", "actor": alice.iri(), "object": like});
    assert_eq!(alice.send(&inbox(&a), &undo), 202);
    assert!(!actions(&a).iter().any(|x| x["type"] == "LIKE"));
    // Update renames the follower
    *alice.name.lock().unwrap() = "Alice Renamed".into();
    let update = json!({"id": format!("{}/upd/1", alice.base), "type": "Update", "actor": alice.iri(),
        "object": {"id": alice.iri(), "type": "Person", "preferredUsername": "alice", "name": "Alice Renamed",
                   "inbox": format!("{}/inbox", alice.iri())}});
    assert_eq!(alice.send(&inbox(&a), &update), 202);
    assert_eq!(followers(&a, "")["results"][0]["name"], "Alice Renamed");
    // Undo Follow unfollows
    let undo = json!({"id": format!("{}/undo/2", alice.base), "type": "Undo", "actor": alice.iri(), "object": follow});
    assert_eq!(alice.send(&inbox(&a), &undo), 202);
    assert_eq!(followers(&a, "")["total"], 0);
    // follow again (a new Follow: the same one again is a replay), then a Delete of the actor removes it
    assert_eq!(alice.send(&inbox(&a), &follow), 202);
    assert_eq!(followers(&a, "")["total"], 0, "the same Follow again is dropped");
    let follow2 = json!({"id": format!("{}/follows/2", alice.base), "type": "Follow", "actor": alice.iri(),
        "object": actor_iri(&a)});
    assert_eq!(alice.send(&inbox(&a), &follow2), 202);
    assert_eq!(followers(&a, "")["total"], 1);
    let del =
        json!({"id": format!("{}/del/1", alice.base), "type": "Delete", "actor": alice.iri(), "object": alice.iri()});
    assert_eq!(alice.send(&inbox(&a), &del), 202);
    assert_eq!(followers(&a, "")["total"], 0);
}

/// The admin's denial of a pending follow answers the follower with a Reject of that follow and
/// blocks it: a later follow from it is ignored.
#[test]
fn a_denied_follow_gets_a_reject_and_later_follows_are_ignored() {
    let a = federating(&[]);
    a.set("federation/private", json!(true));
    let alice = FedActor::start("alice");
    let follow_id = format!("{}/follows/1", alice.base);
    let follow = json!({"id": follow_id, "type": "Follow", "actor": alice.iri(), "object": actor_iri(&a)});
    assert_eq!(alice.send(&inbox(&a), &follow), 202);
    assert_eq!(followers(&a, "/pending")["total"], 1);
    let r = a.admin_post("/api/admin/followers/approve", &json!({"actorIRI": alice.iri(), "approved": false}));
    assert!(r.status().is_success());
    let reject = alice.wait_for(Duration::from_secs(15), |v| v["type"] == "Reject").expect("a Reject");
    let v = reject.json();
    assert_eq!(v["actor"], actor_iri(&a));
    assert_eq!(v["object"]["id"], follow_id.as_str(), "it rejects that follow");
    assert_eq!(followers(&a, "/pending")["total"], 0);
    assert_eq!(followers(&a, "/blocked")["total"], 1);

    let again = json!({"id": format!("{}/follows/2", alice.base), "type": "Follow", "actor": alice.iri(), "object": actor_iri(&a)});
    a.set("federation/private", json!(false));
    assert_eq!(alice.send(&inbox(&a), &again), 202);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(followers(&a, "")["total"], 0, "a blocked follower stays out");
    let answers =
        alice.received().iter().filter(|r| matches!(r.json()["type"].as_str(), Some("Accept" | "Reject"))).count();
    assert_eq!(answers, 1, "the ignored follow gets no answer");
}

#[test]
fn deliveries_retry_and_survive_a_restart() {
    let a = federating(&[]);
    let alice = FedActor::start("alice");
    let follow = json!({"id": format!("{}/follows/1", alice.base), "type": "Follow", "actor": alice.iri(), "object": actor_iri(&a)});
    // the Accept is refused twice with 503, then delivered
    alice.inbox_statuses.lock().unwrap().extend([503, 503]);
    assert_eq!(alice.send(&inbox(&a), &follow), 202);
    assert!(alice.wait_for(Duration::from_secs(15), |v| v["type"] == "Accept").is_some(), "retried until delivered");
    // the inbox is down while a post is sent and the server restarts: the post waits in the queue
    *alice.inbox_down.lock().unwrap() = true;
    let r = a.admin_post("/api/admin/federation/send", &json!({"value": "kept across a restart"}));
    assert!(r.status().is_success());
    std::thread::sleep(Duration::from_secs(1));
    let a = a.restart();
    *alice.inbox_down.lock().unwrap() = false;
    let post = alice.wait_for(Duration::from_secs(20), |v| v["type"] == "Create");
    assert!(post.expect("delivered after the restart").json()["object"]["content"]
        .as_str()
        .unwrap()
        .contains("kept across a restart"));
    drop(a);
}

#[test]
fn fediverse_chat_sign_in() {
    let a = federating(&[("CASTD_FEDIVERSE_CODE_TTL_SECS", "3")]);
    let alice = FedActor::start("alice");
    let mut user = chatclient::join(&a, "viewer");
    let path = format!("/api/auth/fediverse?accessToken={}", user.token);
    // no token: 401
    assert_eq!(a.post_json("/api/auth/fediverse", &json!({"account": alice.account()})).status().as_u16(), 401);
    let r = a.post_json(&path, &json!({"account": format!("@{}", alice.account())}));
    assert!(r.status().is_success(), "{}", r.text().unwrap_or_default());
    let dm = alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Create").expect("the DM");
    let v = dm.json();
    assert_eq!(v["object"]["to"], json!([alice.iri()]));
    assert_eq!(v["object"]["tag"][0]["type"], "Mention");
    let content = v["object"]["content"].as_str().unwrap();
    let code = content.split("<strong>").nth(1).unwrap().split("</strong>").next().unwrap().to_string();
    assert_eq!(code.len(), 11, "XXXXX-XXXXX: {code}");
    let verify = |code: &str| {
        a.post_json(&format!("/api/auth/fediverse/verify?accessToken={}", user.token), &json!({"code": code}))
    };
    let wrong = if code == "00000-00000" { "00000-00001" } else { "00000-00000" };
    assert_eq!(verify(wrong).status().as_u16(), 403, "a wrong code");
    assert!(verify(&code).status().is_success(), "the right code");
    let info = chatclient::next_where(&mut user.ws, Duration::from_secs(5), |e| {
        e["type"] == "CONNECTED_USER_INFO" && e["user"]["authenticated"] == true
    })
    .expect("the user is authenticated");
    assert_eq!(info["user"]["authProvider"], "fediverse");
    assert_eq!(verify(&code).status().as_u16(), 403, "a code works once");
    // an expired code fails
    alice.inbox.lock().unwrap().clear();
    assert!(a.post_json(&path, &json!({"account": alice.account()})).status().is_success());
    let dm = alice.wait_for(Duration::from_secs(10), |v| v["type"] == "Create").expect("the second DM");
    let content = dm.json()["object"]["content"].as_str().unwrap().to_string();
    let code = content.split("<strong>").nth(1).unwrap().split("</strong>").next().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(verify(&code).status().as_u16(), 403, "an expired code");
    // an unknown account
    let r = a.post_json(&path, &json!({"account": format!("nobody@{}", alice.host)}));
    assert_eq!(r.status().as_u16(), 400);
}
