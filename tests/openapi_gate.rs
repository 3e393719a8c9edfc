//! Issue 52: the OpenAPI document says what the viewer gate answers. On a private default channel, every
//! documented operation is asked without any credential: exactly those the gate refuses (401, "a viewing
//! pass is needed") document that 401 as the gate's, with the admission hook's 403 (all but the status,
//! which the hook is not asked about), both as StatusResponses, and list a viewing pass and the channel
//! admin's Basic credentials as ways in besides their own; the others claim neither. With the admin's
//! Basic credentials, as the document says, the gate lets every one of them through.

mod common;

use common::Server;
use serde_json::{json, Value};

/// Text of the gate's 401.
const GATE_401: &str = "viewing pass";
/// How the document describes the gate's 401 and the admission hook's 403.
const DOC_401: &str = "A viewing pass is needed";
const DOC_403: &str = "The channel's admission hook refused this viewer";

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            out.push((method.to_uppercase(), path.clone(), op.clone()));
        }
    }
    out
}

/// Whether `op` answers `status` with a StatusResponse whose description says `needle`.
fn documents(op: &Value, status: &str, needle: &str) -> bool {
    let r = &op["responses"][status];
    r["content"]["application/json"]["schema"]["$ref"] == json!("#/components/schemas/StatusResponse")
        && r["description"].as_str().is_some_and(|d| d.contains(needle))
}

/// The request's answer: status, and whether it is the gate's 401.
fn ask(server: &Server, method: &str, path: &str, admin: bool) -> (u16, bool) {
    // `{id}` becomes `xid`: a name nothing has, so nothing is found or changed.
    let concrete = path.replace('{', "x").replace('}', "");
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = server.client.request(m, server.url(&concrete));
    if admin {
        req = req.basic_auth("admin", Some(&server.admin_password));
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap_or_default();
    (status, status == 401 && text.contains(GATE_401))
}

#[test]
fn the_document_says_what_the_gate_answers() {
    let server = Server::start();
    let doc = server.get_json("/api/openapi.json");
    assert!(doc["components"]["securitySchemes"]["viewerPass"].is_object(), "no viewerPass scheme");
    server.set("visibility", json!("password"));
    // The gate reads the settings' snapshot: wait until it refuses a way out.
    server
        .wait_for(std::time::Duration::from_secs(10), || ask(&server, "GET", "/api/config", false).1.then_some(()))
        .expect("the channel did not become private");

    let (mut gated, mut open) = (Vec::new(), Vec::new());
    let mut wrong = Vec::new();
    for (method, path, op) in operations(&doc) {
        let (status, by_gate) = ask(&server, &method, &path, false);
        let claims = documents(&op, "401", DOC_401);
        let label = format!("{method} {path} ({status})");
        if by_gate != claims {
            wrong.push(format!("{label}: the gate {} it, the document {}", refused(by_gate), said(claims)));
            continue;
        }
        let hook = documents(&op, "403", DOC_403);
        let security = op["security"].as_array().cloned().unwrap_or_default();
        let alt = |name: &str| security.iter().any(|r| r.get(name).is_some());
        if by_gate {
            if hook != (path != "/api/status") {
                wrong.push(format!("{label}: the hook's 403 documented: {hook}"));
            }
            // A route with credentials of its own (a chat user's token) names the pass in its text only.
            let own = security
                .iter()
                .flat_map(|r| r.as_object().into_iter().flat_map(|o| o.keys()))
                .any(|k| k != "admin" && k != "viewerPass");
            if !alt("admin") || (!own && !alt("viewerPass")) {
                wrong.push(format!("{label}: no pass or admin alternative in {security:?}"));
            }
            // With the admin's Basic credentials the gate lets it through.
            let (status, by_gate) = ask(&server, &method, &path, true);
            if by_gate {
                wrong.push(format!("{label}: refused to the admin too ({status})"));
            }
            gated.push(label);
        } else {
            if hook || alt("viewerPass") {
                wrong.push(format!("{label}: not gated, but documented as gated"));
            }
            open.push(label);
        }
    }
    assert!(wrong.is_empty(), "{} wrong:\n{}", wrong.len(), wrong.join("\n"));
    // The ways out the issue names are among the gated ones, the admin's and the unlock routes are not.
    for way in ["GET /hls/{path}", "GET /api/config", "GET /api/status", "GET /api/chat", "GET /thumbnail.jpg"] {
        assert!(gated.iter().any(|g| g.starts_with(&format!("{way} "))), "{way} not gated: {gated:?}");
    }
    for not in ["GET /api/admin/status", "POST /api/viewer/unlock", "GET /api/openapi.json", "OPTIONS /whip"] {
        assert!(open.iter().any(|g| g.starts_with(&format!("{not} "))), "{not} gated: {open:?}");
    }
    assert!(gated.len() >= 40, "only {} gated operations", gated.len());
}

fn refused(yes: bool) -> &'static str {
    if yes {
        "refused"
    } else {
        "did not refuse"
    }
}

fn said(yes: bool) -> &'static str {
    if yes {
        "documents the gate's 401"
    } else {
        "does not"
    }
}
