//! A small Fediverse account for federation tests: a real HTTP server on 127.0.0.1 that serves its
//! WebFinger, its actor document (with its own RSA public key) and an inbox recording what it
//! receives, and that signs the requests it sends (HTTP Signatures, written here independently of
//! castd's implementation).
#![allow(dead_code)]

use std::collections::VecDeque;
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
}

fn http_date(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
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
        };
        let pem = RsaPublicKey::from(&actor.key).to_public_key_pem(LineEnding::LF).unwrap();
        let (inbox, statuses, down, name) =
            (actor.inbox.clone(), actor.inbox_statuses.clone(), actor.inbox_down.clone(), actor.name.clone());
        let user = username.to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (inbox, statuses, down, name) = (inbox.clone(), statuses.clone(), down.clone(), name.clone());
                let (base, host, user, pem) = (base.clone(), host.clone(), user.clone(), pem.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    while let Some(Received { method, path, headers, body }) = read_request(&mut reader) {
                        let actor_iri = format!("{base}/users/{user}");
                        let (status, ctype, text) = if method == "POST" && path == format!("/users/{user}/inbox") {
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
                                        {"rel": "http://ostatus.org/schema/1.0/subscribe", "template": format!("{base}/authorize_interaction?uri={{uri}}")}
                                    ]
                                });
                                (200, "application/jrd+json", jrd.to_string())
                            } else {
                                (404, "text/plain", String::new())
                            }
                        } else if method == "GET" && path == format!("/users/{user}") {
                            let doc = json!({
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

    /// Signature headers for a POST of `body` to `url`, signed with `key_id` at `date`.
    pub fn sign(
        &self,
        url: &str,
        body: &[u8],
        key_id: &str,
        date: chrono::DateTime<chrono::Utc>,
    ) -> Vec<(String, String)> {
        let u = url::Url::parse(url).unwrap();
        let host = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap());
        let date = http_date(date);
        let digest = digest(body);
        let text = format!("(request-target): post {}\nhost: {host}\ndate: {date}\ndigest: {digest}", u.path());
        let sig = SigningKey::<Sha256>::new(self.key.clone()).sign(text.as_bytes()).to_bytes();
        vec![
            ("host".into(), host),
            ("date".into(), date),
            ("digest".into(), digest),
            (
                "signature".into(),
                format!(
                    "keyId=\"{key_id}\",algorithm=\"rsa-sha256\",headers=\"(request-target) host date digest\",signature=\"{}\"",
                    B64.encode(sig)
                ),
            ),
        ]
    }

    /// POST `headers` + `body` to `url`; the status.
    pub fn post_raw(&self, url: &str, headers: &[(String, String)], body: &[u8]) -> u16 {
        let client = reqwest::blocking::Client::new();
        let mut req = client.post(url).header("content-type", "application/activity+json").body(body.to_vec());
        for (k, v) in headers {
            if k != "host" {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        req.send().expect("POST to inbox").status().as_u16()
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
