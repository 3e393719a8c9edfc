//! WHIP and WHEP over plain HTTP (tests/whip.rs, tests/whep.rs): POST an SDP offer with an optional
//! `Authorization: Bearer`, and read a refusal's StatusResponse.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use serde_json::Value;

use super::Server;

pub fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(15)).build().expect("client")
}

/// `POST path` with `body` as `ctype`, and `Authorization: Bearer <bearer>` when given.
pub fn post(server: &Server, path: &str, bearer: Option<&str>, ctype: &str, body: String) -> Response {
    let mut req = client().post(server.url(path)).header("Content-Type", ctype).body(body);
    if let Some(b) = bearer {
        req = req.header("Authorization", format!("Bearer {b}"));
    }
    req.send().unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// The status and the StatusResponse message of an error answer.
pub fn error_of(r: Response) -> (u16, String) {
    let status = r.status().as_u16();
    let v: Value = r.json().expect("a StatusResponse body");
    assert_eq!(v["success"], false, "{v}");
    (status, v["message"].as_str().unwrap_or_default().to_string())
}
