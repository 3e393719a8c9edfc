//! Owncast's tables into castd's, inside the one transaction `build_into` opens: chat users (and the
//! SHA-256 of their access tokens), integrations (API users) as access tokens and their bot users,
//! chat history, IP bans, followers, outbox, activity, webhooks, push subscriptions and the key pairs.
//! Rows are written with their original ids and times; a row castd cannot take is counted in the
//! report with the reason.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use rusqlite::{params, Transaction};

use super::settings::Plan;
use super::source::{Row, Source};
use super::{ImportError, Report};
use crate::chat::protocol::MODERATOR_SCOPE;
use crate::chat::users::{clean_name, token_hash, ts, MAX_USER_COLOR};
use crate::events::EventType;

fn comma_list(s: &str) -> Vec<String> {
    s.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

/// A row's time, or `fallback` (with a note in the report) when it is unreadable.
fn time_or(row: &Row, col: &str, fallback: DateTime<Utc>, kind: &'static str, report: &mut Report) -> DateTime<Utc> {
    match row.time(col) {
        Ok(Some(t)) => t,
        Ok(None) => fallback,
        Err(what) => {
            let col = what.split(" = ").next().unwrap_or_default();
            report.skip("times", format!("{kind}: {col} unreadable, the import time used instead"));
            fallback
        }
    }
}

fn opt_time(row: &Row, col: &str, kind: &'static str, report: &mut Report) -> Option<DateTime<Utc>> {
    match row.time(col) {
        Ok(t) => t,
        Err(what) => {
            let col = what.split(" = ").next().unwrap_or_default();
            report.skip("times", format!("{kind}: {col} unreadable, left empty"));
            None
        }
    }
}

pub fn import_all(source: &Source, tx: &Transaction, plan: &Plan, report: &mut Report) -> Result<(), ImportError> {
    keys(tx, plan)?;
    let users = users(source, tx, report)?;
    messages(source, tx, &users, report)?;
    bans(source, tx, report)?;
    followers(source, tx, report)?;
    outbox(source, tx, report)?;
    activity(source, tx, report)?;
    webhooks(source, tx, report)?;
    notifications(source, tx, report)?;
    not_carried(source, report)?;
    Ok(())
}

fn keys(tx: &Transaction, plan: &Plan) -> Result<(), ImportError> {
    if let Some(pem) = &plan.federation_key_pem {
        tx.execute("INSERT OR REPLACE INTO federation_keys (name, value) VALUES ('rsa', ?1)", [pem])?;
    }
    if let Some(vapid) = &plan.vapid_key {
        tx.execute("INSERT OR REPLACE INTO notification_keys (name, value) VALUES ('vapid', ?1)", [vapid])?;
    }
    Ok(())
}

/// Users: the chat users, and the integrations (type API) as access tokens with their bot user.
/// Returns the ids imported (messages of other ids keep their text without an author).
fn users(source: &Source, tx: &Transaction, report: &mut Report) -> Result<HashSet<String>, ImportError> {
    const KIND: &str = "chat users";
    let now = Utc::now();
    // Newest token first per user (castd keeps one per user).
    let mut tokens: HashMap<String, Vec<(String, DateTime<Utc>)>> = HashMap::new();
    for t in source.rows("user_access_tokens", &["token", "user_id", "timestamp"])? {
        let when = t.time("timestamp").ok().flatten().unwrap_or_default();
        tokens.entry(t.text("user_id")).or_default().push((t.text("token"), when));
    }
    for list in tokens.values_mut() {
        list.sort_by_key(|t| std::cmp::Reverse(t.1));
    }
    // External identities (IndieAuth, Fediverse, plugins): the first per user.
    let auth_key = if source.has_column("auth", "auth_key") { "auth_key" } else { "token" };
    let mut auth: HashMap<String, (String, String)> = HashMap::new();
    for a in source.rows("auth", &["user_id", auth_key, "type"])? {
        auth.entry(a.text("user_id")).or_insert((a.text("type"), a.text(auth_key)));
    }
    let mut imported = HashSet::new();
    let mut used_hashes = HashSet::new();
    let cols = [
        "id",
        "display_name",
        "display_color",
        "created_at",
        "disabled_at",
        "previous_names",
        "namechanged_at",
        "authenticated_at",
        "scopes",
        "type",
        "last_used",
        "disabled_reason",
    ];
    for u in source.rows("users", &cols)? {
        let id = u.text("id");
        if id.is_empty() {
            report.skip(KIND, "no id");
            continue;
        }
        let mut name = clean_name(&u.text("display_name"));
        if name.is_empty() {
            name = format!("user-{}", id.chars().take(6).collect::<String>());
        }
        let color = u.int("display_color").unwrap_or(0).clamp(0, MAX_USER_COLOR);
        let created = time_or(&u, "created_at", now, KIND, report);
        let scopes = comma_list(&u.text("scopes"));
        let user_tokens = tokens.remove(&id).unwrap_or_default();
        if u.text("type") == "API" {
            // An integration: its token becomes a castd access token; the bot speaks as this id.
            let Some((token, _)) = user_tokens.first() else {
                report.skip("access tokens", "an integration without a token");
                continue;
            };
            let api_scopes: Vec<&String> =
                scopes.iter().filter(|s| crate::tokens::SCOPES.contains(&s.as_str())).collect();
            let prefix: String = token.chars().take(8).collect();
            let last_used = opt_time(&u, "last_used", "access tokens", report);
            let h = token_hash(token);
            if !used_hashes.insert(h.clone()) {
                report.skip("access tokens", "a token shared with another user");
                continue;
            }
            // As castd keeps every token: its SHA-256 and display form, never the token itself.
            tx.execute(
                "INSERT INTO access_tokens (id, token_hash, token_prefix, display_name, display_color, scopes, created_at, last_used_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![id, h, prefix, name, color, json(&api_scopes), created.to_rfc3339(), last_used.map(|t| t.to_rfc3339())],
            )?;
            tx.execute(
                "INSERT INTO chat_users (id, token_hash, display_name, display_color, created_at, is_bot, disabled_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)",
                params![
                    id,
                    format!("integration:{id}"),
                    name,
                    color,
                    ts(created),
                    opt_time(&u, "disabled_at", KIND, report).map(ts)
                ],
            )?;
            report.imported_one("access tokens");
            imported.insert(id);
            continue;
        }
        // A chat user: the newest token (as its SHA-256, which is how castd looks tokens up).
        let hash = match user_tokens.first() {
            Some((token, _)) => token_hash(token),
            None => token_hash(&crate::password::random_token(44)),
        };
        if user_tokens.len() > 1 {
            for _ in 1..user_tokens.len() {
                report.skip("chat user tokens", "castd keeps one token per user (the newest was kept)");
            }
        }
        if !used_hashes.insert(hash.clone()) {
            report.skip(KIND, "a token shared with another user");
            continue;
        }
        let mut previous = comma_list(&u.text("previous_names"));
        previous.retain(|p| !p.is_empty());
        let scopes: Vec<String> = scopes
            .into_iter()
            .filter(|s| s == MODERATOR_SCOPE || crate::tokens::SCOPES.contains(&s.as_str()))
            .collect();
        let authenticated = opt_time(&u, "authenticated_at", KIND, report).is_some();
        let (provider, identity) = match auth.get(&id) {
            Some((kind, key)) => (Some(kind.clone()), Some(key.clone())),
            None => (None, None),
        };
        if !u.text("disabled_reason").is_empty() {
            report.skip("reasons users were disabled", "castd keeps that a user is disabled, not why");
        }
        tx.execute(
            "INSERT INTO chat_users (id, token_hash, display_name, display_color, created_at, previous_names,
                name_changed_at, scopes, is_bot, authenticated, disabled_at, auth_provider, auth_identity)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?10, ?11, ?12)",
            params![
                id,
                hash,
                name,
                color,
                ts(created),
                json(&previous),
                opt_time(&u, "namechanged_at", KIND, report).map(ts),
                json(&scopes),
                authenticated || provider.is_some(),
                opt_time(&u, "disabled_at", KIND, report).map(ts),
                provider,
                identity,
            ],
        )?;
        report.imported_one(KIND);
        if provider.is_some() {
            report.imported_one("auth links");
        }
        imported.insert(id);
    }
    for orphan in tokens.values() {
        for _ in orphan {
            report.skip("chat user tokens", "belongs to no user");
        }
    }
    Ok(imported)
}

/// Chat history, oldest first (castd orders by insertion).
fn messages(
    source: &Source,
    tx: &Transaction,
    users: &HashSet<String>,
    report: &mut Report,
) -> Result<(), ImportError> {
    const KIND: &str = "chat messages";
    let now = Utc::now();
    let mut rows =
        source.rows("messages", &["id", "user_id", "body", "eventType", "hidden_at", "timestamp", "title"])?;
    let times: Vec<DateTime<Utc>> = rows.iter().map(|m| m.time("timestamp").ok().flatten().unwrap_or(now)).collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|i| times[*i]);
    let mut seen = HashSet::new();
    for i in order {
        let m = std::mem::take(&mut rows[i]);
        let id = m.text("id");
        if id.is_empty() || !seen.insert(id.clone()) {
            report.skip(KIND, "no id, or an id used twice");
            continue;
        }
        let kind = Some(m.text("eventType")).filter(|k| !k.is_empty()).unwrap_or_else(|| "CHAT".into());
        let mut body = m.text("body");
        if body.is_empty() {
            body = m.text("title");
        }
        // Owncast stored the HTML it rendered; castd shows a body as HTML, so it goes through castd's own
        // cleaning again (no script, no `javascript:` link, no foreign image), whatever the file held.
        let body = crate::chat::sanitize::clean_html(&body);
        let user = m.opt_text("user_id");
        let user = match user {
            Some(u) if users.contains(&u) => Some(u),
            Some(_) => {
                report.skip("chat message authors", "the user was not imported; the message is kept without an author");
                None
            }
            None => None,
        };
        tx.execute(
            "INSERT INTO chat_messages (id, type, user_id, body, timestamp, hidden_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, kind, user, body, ts(times[i]), opt_time(&m, "hidden_at", KIND, report).map(ts)],
        )?;
        report.imported_one(KIND);
    }
    Ok(())
}

fn bans(source: &Source, tx: &Transaction, report: &mut Report) -> Result<(), ImportError> {
    const KIND: &str = "IP bans";
    let now = Utc::now();
    for b in source.rows("ip_bans", &["ip_address", "notes", "created_at"])? {
        let Ok(ip) = b.text("ip_address").trim().parse::<IpAddr>() else {
            report.skip(KIND, "not an IP address");
            continue;
        };
        let ip = crate::chat::moderation::normalize_ip(ip);
        let created = time_or(&b, "created_at", now, KIND, report);
        tx.execute(
            "INSERT INTO chat_ip_bans (ip, notes, created_at) VALUES (?1, ?2, ?3) ON CONFLICT(ip) DO NOTHING",
            params![ip.to_string(), b.text("notes"), ts(created)],
        )?;
        report.imported_one(KIND);
    }
    Ok(())
}

fn followers(source: &Source, tx: &Transaction, report: &mut Report) -> Result<(), ImportError> {
    let now = Utc::now();
    let cols = [
        "iri",
        "inbox",
        "shared_inbox",
        "name",
        "username",
        "image",
        "request",
        "created_at",
        "approved_at",
        "disabled_at",
    ];
    for f in source.rows("ap_followers", &cols)? {
        let (iri, inbox) = (f.text("iri"), f.text("inbox"));
        let valid = |u: &str| url::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "https" | "http"));
        if !valid(&iri) || !valid(&inbox) {
            report.skip("followers", "no valid actor IRI or inbox");
            continue;
        }
        let shared = f.opt_text("shared_inbox").filter(|s| valid(s)).unwrap_or_else(|| inbox.clone());
        let created = time_or(&f, "created_at", now, "followers", report);
        let approved_at = opt_time(&f, "approved_at", "followers", report);
        let disabled_at = opt_time(&f, "disabled_at", "followers", report);
        tx.execute(
            "INSERT INTO federation_followers
             (iri, inbox, shared_inbox, name, username, image, link, follow_iri, approved, created_at, approved_at, disabled_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                iri,
                inbox,
                shared,
                f.text("name"),
                f.text("username").trim_start_matches('@'),
                Some(f.text("image")).filter(|i| valid(i)).unwrap_or_default(),
                iri,
                f.text("request"),
                approved_at.is_some(),
                created.to_rfc3339(),
                approved_at.map(|t| t.to_rfc3339()),
                disabled_at.map(|t| t.to_rfc3339()),
            ],
        )?;
        let kind = match (approved_at, disabled_at) {
            (_, Some(_)) => "blocked followers",
            (Some(_), None) => "followers",
            (None, None) => "pending follow requests",
        };
        report.imported_one(kind);
    }
    Ok(())
}

fn outbox(source: &Source, tx: &Transaction, report: &mut Report) -> Result<(), ImportError> {
    const KIND: &str = "federation posts";
    let now = Utc::now();
    for o in source.rows("ap_outbox", &["iri", "value", "type", "created_at"])? {
        let Ok(object) = serde_json::from_slice::<serde_json::Value>(&o.blob("value")) else {
            report.skip(KIND, "the stored activity is not JSON");
            continue;
        };
        let created = time_or(&o, "created_at", now, KIND, report);
        let kind = Some(o.text("type"))
            .filter(|t| !t.is_empty())
            .or_else(|| object.get("type").and_then(|t| t.as_str()).map(str::to_string))
            .unwrap_or_else(|| "Create".into());
        tx.execute(
            "INSERT OR REPLACE INTO federation_outbox (iri, kind, object, public, created_at) VALUES (?1, ?2, ?3, 1, ?4)",
            params![o.text("iri"), kind, object.to_string(), created.to_rfc3339()],
        )?;
        report.imported_one(KIND);
    }
    Ok(())
}

fn activity(source: &Source, tx: &Transaction, report: &mut Report) -> Result<(), ImportError> {
    const KIND: &str = "federation activity";
    let now = Utc::now();
    for a in source.rows("ap_accepted_activities", &["iri", "actor", "type", "timestamp"])? {
        if !url::Url::parse(&a.text("actor")).is_ok_and(|u| matches!(u.scheme(), "https" | "http")) {
            report.skip(KIND, "no http(s) actor IRI");
            continue;
        }
        let when = time_or(&a, "timestamp", now, KIND, report);
        tx.execute(
            "INSERT INTO federation_activity (iri, actor_iri, kind, timestamp) VALUES (?1, ?2, ?3, ?4)",
            params![a.text("iri"), a.text("actor"), a.text("type"), when.to_rfc3339()],
        )?;
        report.imported_one(KIND);
    }
    Ok(())
}

fn webhooks(source: &Source, tx: &Transaction, report: &mut Report) -> Result<(), ImportError> {
    const KIND: &str = "webhooks";
    let now = Utc::now();
    for w in source.rows("webhooks", &["id", "url", "events", "timestamp", "last_used", "secret"])? {
        let url = w.text("url");
        if !url::Url::parse(&url).is_ok_and(|u| matches!(u.scheme(), "https" | "http")) {
            report.skip(KIND, "not an http(s) URL");
            continue;
        }
        let mut events = Vec::new();
        for name in comma_list(&w.text("events")) {
            match serde_json::from_value::<EventType>(serde_json::Value::String(name.clone())) {
                Ok(e) if EventType::WEBHOOK_TYPES.contains(&e) => events.push(e),
                _ => report.skip("webhook events", format!("{name} is not an event castd sends")),
            }
        }
        let created = time_or(&w, "timestamp", now, KIND, report);
        let last_used = opt_time(&w, "last_used", KIND, report);
        tx.execute(
            "INSERT INTO webhooks (id, url, events, secret, created_at, last_used) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                w.int("id"),
                url,
                json(&events),
                w.text("secret"),
                created.to_rfc3339(),
                last_used.map(|t| t.to_rfc3339())
            ],
        )?;
        report.imported_one(KIND);
    }
    Ok(())
}

fn notifications(source: &Source, tx: &Transaction, report: &mut Report) -> Result<(), ImportError> {
    const KIND: &str = "push subscriptions";
    let now = Utc::now();
    for n in source.rows("notifications", &["channel", "destination", "created_at"])? {
        if n.text("channel") != crate::notifications::BROWSER_PUSH {
            report.skip(KIND, format!("channel {} is not browser push", n.text("channel")));
            continue;
        }
        let created = time_or(&n, "created_at", now, KIND, report);
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO notification_destinations (channel, destination, created_at) VALUES (?1, ?2, ?3)",
            params![crate::notifications::BROWSER_PUSH, n.text("destination"), ts(created)],
        )?;
        if inserted > 0 {
            report.imported_one(KIND);
        } else {
            report.skip(KIND, "a duplicate");
        }
    }
    Ok(())
}

/// Tables castd has no counterpart for, counted so the report says what stayed behind.
fn not_carried(source: &Source, report: &mut Report) -> Result<(), ImportError> {
    for (table, kind, reason) in [
        ("ap_delivery_queue", "pending federation deliveries", "castd's delivery queue starts empty"),
        ("federated_servers", "federated servers", "add them again in the admin (castd follows them anew)"),
    ] {
        let n = source.count(table)?;
        for _ in 0..n {
            report.skip(kind, reason);
        }
    }
    Ok(())
}
