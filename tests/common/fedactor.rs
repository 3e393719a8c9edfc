//! A small Fediverse account for federation tests: a real HTTP server on 127.0.0.1 that serves its
//! WebFinger, its actor document (with its own RSA public key) and an inbox recording what it
//! receives, and that signs the requests it sends (HTTP Signatures, written here independently of
//! castd's implementation) as Mastodon does: `(request-target) host date digest`.
//!
//! For attack tests it can also serve any document at any path (`serve`), add fields to its actor
//! document (`actor_extra`: a `javascript:` profile URL, another inbox), offer any remote-follow
//! template, count the GETs it is sent (`gets`), and sign with any key id, any set of headers and
//! any `Host` (`sign_with`).
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::BufReader;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::receiver::{read_request, write_response, Received};
use rsa::pkcs1v15::{Signature, SigningKey, VerifyingKey};
use rsa::pkcs8::{DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::signature::{SignatureEncoding, Signer, Verifier};
use rsa::{RsaPrivateKey, RsaPublicKey};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub struct FedActor {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub host: String,
    pub username: String,
    pub key: RsaPrivateKey,
    pub inbox: Arc<Mutex<Vec<Received>>>,
    /// Statuses the inbox answers next (then 202).
    pub inbox_statuses: Arc<Mutex<VecDeque<u16>>>,
    /// When set, every inbox request is answered 503.
    pub inbox_down: Arc<Mutex<bool>>,
    pub name: Arc<Mutex<String>>,
    /// The path of every GET it was sent, in order.
    pub gets: Arc<Mutex<Vec<String>>>,
    /// Documents served for GETs at these paths (ahead of everything else): status and JSON body.
    pub docs: Arc<Mutex<HashMap<String, (u16, String)>>>,
    /// Fields set in (or, when null, removed from) the actor document.
    pub actor_extra: Arc<Mutex<serde_json::Map<String, Value>>>,
    /// The remote-follow template of its WebFinger answer (`{uri}` is the account to follow).
    pub follow_template: Arc<Mutex<String>>,
}

fn http_date(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// `host[:port]` of a URL, as its `Host` header.
fn authority(u: &url::Url) -> String {
    match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap()),
        None => u.host_str().unwrap().to_string(),
    }
}

pub fn digest(body: &[u8]) -> String {
    format!("SHA-256={}", B64.encode(Sha256::digest(body)))
}

impl FedActor {
    pub fn start(username: &str) -> FedActor {
        let key = RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let base = format!("http://{host}");
        let actor = FedActor {
            base: base.clone(),
            host: host.clone(),
            username: username.to_string(),
            key,
            inbox: Arc::default(),
            inbox_statuses: Arc::default(),
            inbox_down: Arc::default(),
            name: Arc::new(Mutex::new(format!("{username} (test)"))),
            gets: Arc::default(),
            docs: Arc::default(),
            actor_extra: Arc::default(),
            follow_template: Arc::new(Mutex::new(format!("{base}/authorize_interaction?uri={{uri}}"))),
        };
        let pem = RsaPublicKey::from(&actor.key).to_public_key_pem(LineEnding::LF).unwrap();
        let (inbox, statuses, down, name) =
            (actor.inbox.clone(), actor.inbox_statuses.clone(), actor.inbox_down.clone(), actor.name.clone());
        let (gets, docs, extra, template) =
            (actor.gets.clone(), actor.docs.clone(), actor.actor_extra.clone(), actor.follow_template.clone());
        let user = username.to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (inbox, statuses, down, name) = (inbox.clone(), statuses.clone(), down.clone(), name.clone());
                let (gets, docs, extra, template) = (gets.clone(), docs.clone(), extra.clone(), template.clone());
                let (base, host, user, pem) = (base.clone(), host.clone(), user.clone(), pem.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    while let Some(Received { method, path, headers, body }) = read_request(&mut reader) {
                        let actor_iri = format!("{base}/users/{user}");
                        if method == "GET" {
                            gets.lock().unwrap().push(path.clone());
                        }
                        let served = (method == "GET").then(|| docs.lock().unwrap().get(&path).cloned()).flatten();
                        let (status, ctype, text) = if let Some((st, doc)) = served {
                            (st, "application/activity+json", doc)
                        } else if method == "POST" && path == format!("/users/{user}/inbox") {
                            let st = if *down.lock().unwrap() {
                                503
                            } else {
                                statuses.lock().unwrap().pop_front().unwrap_or(202)
                            };
                            if (200..300).contains(&st) {
                                inbox.lock().unwrap().push(Received { method, path, headers, body });
                            }
                            (st, "text/plain", String::new())
                        } else if method == "GET" && path.starts_with("/.well-known/webfinger") {
                            let want = format!("acct%3A{user}%40{}", host.replace(':', "%3A"));
                            if path.contains(&want) || path.contains(&format!("acct:{user}@{host}")) {
                                let jrd = json!({
                                    "subject": format!("acct:{user}@{host}"),
                                    "links": [
                                        {"rel": "self", "type": "application/activity+json", "href": actor_iri},
                                        {"rel": "http://ostatus.org/schema/1.0/subscribe", "template": template.lock().unwrap().clone()}
                                    ]
                                });
                                (200, "application/jrd+json", jrd.to_string())
                            } else {
                                (404, "text/plain", String::new())
                            }
                        } else if method == "GET" && path == format!("/users/{user}") {
                            let mut doc = json!({
                                "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
                                "id": actor_iri,
                                "type": "Person",
                                "preferredUsername": user,
                                "name": name.lock().unwrap().clone(),
                                "url": format!("{base}/@{user}"),
                                "inbox": format!("{actor_iri}/inbox"),
                                "icon": {"type": "Image", "url": format!("{base}/avatar.png")},
                                "publicKey": {"id": format!("{actor_iri}#main-key"), "owner": actor_iri, "publicKeyPem": pem}
                            });
                            for (k, v) in extra.lock().unwrap().iter() {
                                match v {
                                    Value::Null => doc.as_object_mut().unwrap().remove(k),
                                    v => doc.as_object_mut().unwrap().insert(k.clone(), v.clone()),
                                };
                            }
                            (200, "application/activity+json", doc.to_string())
                        } else {
                            (404, "text/plain", String::new())
                        };
                        if !write_response(reader.get_ref(), status, ctype, &text) {
                            return;
                        }
                    }
                });
            }
        });
        actor
    }

    pub fn iri(&self) -> String {
        format!("{}/users/{}", self.base, self.username)
    }

    pub fn key_id(&self) -> String {
        format!("{}#main-key", self.iri())
    }

    pub fn account(&self) -> String {
        format!("{}@{}", self.username, self.host)
    }

    /// The actor's public key (PEM), to put in documents served elsewhere.
    pub fn public_pem(&self) -> String {
        RsaPublicKey::from(&self.key).to_public_key_pem(LineEnding::LF).unwrap()
    }

    /// Signature headers for a POST of `body` to `url`, signed with `key_id` at `date`, as Mastodon
    /// signs: `(request-target) host date digest`.
    pub fn sign(
        &self,
        url: &str,
        body: &[u8],
        key_id: &str,
        date: chrono::DateTime<chrono::Utc>,
    ) -> Vec<(String, String)> {
        self.sign_with(url, body, key_id, date, &["(request-target)", "host", "date", "digest"], None)
    }

    /// Signature headers for a POST of `body` to `url` covering `covered` (in order), with `host` as
    /// the `Host` (the URL's authority when `None`).
    pub fn sign_with(
        &self,
        url: &str,
        body: &[u8],
        key_id: &str,
        date: chrono::DateTime<chrono::Utc>,
        covered: &[&str],
        host: Option<&str>,
    ) -> Vec<(String, String)> {
        let u = url::Url::parse(url).unwrap();
        let host = host.map(str::to_string).unwrap_or_else(|| authority(&u));
        let values: HashMap<&str, String> = [
            ("(request-target)", format!("post {}", u.path())),
            ("host", host.clone()),
            ("date", http_date(date)),
            ("digest", digest(body)),
        ]
        .into_iter()
        .collect();
        let text: Vec<String> = covered.iter().map(|h| format!("{h}: {}", values[h])).collect();
        let sig = SigningKey::<Sha256>::new(self.key.clone()).sign(text.join("\n").as_bytes()).to_bytes();
        vec![
            ("host".into(), host),
            ("date".into(), values["date"].clone()),
            ("digest".into(), values["digest"].clone()),
            (
                "signature".into(),
                format!(
                    "keyId=\"{key_id}\",algorithm=\"rsa-sha256\",headers=\"{}\",signature=\"{}\"",
                    covered.join(" "),
                    B64.encode(sig)
                ),
            ),
        ]
    }

    /// POST `headers` + `body` to `url`; the status. A `host` header other than the URL's authority
    /// is sent as the `Host`.
    pub fn post_raw(&self, url: &str, headers: &[(String, String)], body: &[u8]) -> u16 {
        self.post_raw_answer(url, headers, body).0
    }

    /// `post_raw`, with the answer's body.
    pub fn post_raw_answer(&self, url: &str, headers: &[(String, String)], body: &[u8]) -> (u16, String) {
        let client = reqwest::blocking::Client::new();
        let u = url::Url::parse(url).unwrap();
        let authority = authority(&u);
        let mut req = client.post(url).header("content-type", "application/activity+json").body(body.to_vec());
        for (k, v) in headers {
            if k != "host" || *v != authority {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        let r = req.send().expect("POST to inbox");
        (r.status().as_u16(), r.text().unwrap_or_default())
    }

    /// How many GETs it was sent at `path`.
    pub fn gets_of(&self, path: &str) -> usize {
        self.gets.lock().unwrap().iter().filter(|p| *p == path).count()
    }

    /// Serve `doc` (JSON, status 200) for GETs at `path`.
    pub fn serve(&self, path: &str, doc: &Value) {
        self.docs.lock().unwrap().insert(path.to_string(), (200, doc.to_string()));
    }

    /// Send `activity` to `inbox`, properly signed; the status.
    pub fn send(&self, inbox: &str, activity: &Value) -> u16 {
        let body = activity.to_string().into_bytes();
        let h = self.sign(inbox, &body, &self.key_id(), chrono::Utc::now());
        self.post_raw(inbox, &h, &body)
    }

    /// Every activity received in the inbox.
    pub fn received(&self) -> Vec<Received> {
        self.inbox.lock().unwrap().clone()
    }

    /// Wait for an activity matching `f`.
    pub fn wait_for(&self, timeout: Duration, f: impl Fn(&Value) -> bool) -> Option<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.received().into_iter().find(|r| f(&r.json())) {
                return Some(r);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Verify the HTTP Signature of a request received at `path` with the PEM public key: digest, then
/// the RSA-SHA256 signature over the headers it names. Written independently of castd's code.
pub fn verify_request(r: &Received, public_pem: &str) -> Result<(), String> {
    let sig = r.header("signature").ok_or("no signature header")?;
    let field = |name: &str| -> Option<String> {
        sig.split(',').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            (k == name).then(|| v.trim_matches('"').to_string())
        })
    };
    let names = field("headers").ok_or("no headers field")?;
    let signature = B64.decode(field("signature").ok_or("no signature field")?).map_err(|e| e.to_string())?;
    if r.header("digest") != Some(digest(&r.body).as_str()) {
        return Err("digest mismatch".into());
    }
    let mut lines = Vec::new();
    for n in names.split_whitespace() {
        if n == "(request-target)" {
            lines.push(format!("(request-target): {} {}", r.method.to_ascii_lowercase(), r.path));
        } else {
            lines.push(format!("{n}: {}", r.header(n).ok_or(format!("header {n} missing"))?));
        }
    }
    let key = RsaPublicKey::from_public_key_pem(public_pem).map_err(|e| e.to_string())?;
    let sig = Signature::try_from(signature.as_slice()).map_err(|e| e.to_string())?;
    VerifyingKey::<Sha256>::new(key).verify(lines.join("\n").as_bytes(), &sig).map_err(|e| e.to_string())
}

/// A federating castd (`serverurl` set, federation on) followed by a new in-test actor `name`.
pub fn followed_by(s: &super::Server, name: &str) -> FedActor {
    s.set("serverurl", serde_json::json!(s.base));
    s.set("federation/enable", serde_json::json!(true));
    let actor = FedActor::start(name);
    let inbox = format!("{}/federation/user/streamer/inbox", s.base);
    let follow = serde_json::json!({"@context": "https://www.w3.org/ns/activitystreams",
        "id": format!("{}/follows/1", actor.base), "type": "Follow", "actor": actor.iri(),
        "object": format!("{}/federation/user/streamer", s.base)});
    assert_eq!(actor.send(&inbox, &follow), 202);
    actor.wait_for(std::time::Duration::from_secs(10), |v| v["type"] == "Accept").expect("the follow is accepted");
    actor
}
