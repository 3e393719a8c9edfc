//! Integration access tokens: creation, listing, deletion, and the Bearer check of the integrations API.
//!
//! A token is a bearer secret, so castd keeps only its SHA-256 (which the Bearer check looks up) and its
//! first [`SHOWN_CHARS`] characters for display. The whole token is shown once, in the answer to
//! `POST /api/admin/accesstokens/create` (where Owncast tools such as owlbot and owncast-agent read it);
//! the list (`GET /api/admin/accesstokens`) gives each token's display form (`abcd1234…`) in
//! `accessToken`, with `accessTokenComplete: false`. Owncast lists tokens back in full; no tool needs
//! that to work (they authenticate with the token they were given at creation), and a list that holds
//! every token would hand them all to whoever reads one admin answer. Tokens stored in full by earlier
//! castd versions (and imported from Owncast by those) are reduced to their hash by a migration; they
//! keep working. The delete call accepts the full token, the record id, or the display form (when it
//! names exactly one token).
//!
//! `authorize` implements Owncast's `RequireExternalAPIAccessToken`: `Authorization: Bearer <token>`
//! (the prefix matched case-insensitively), the token must exist and hold the scope; any failure is a
//! 401 `Unauthorized`, as in Owncast (a valid token without the scope is also 401, not 403). Success
//! updates the token's last-used time.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::Json;
use chrono::{DateTime, Utc};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::http::{ApiError, Auth, BodyDoc, JsonBody, Registry, StatusResponse};
use crate::store::{Migrations, Store, StoreError};

pub const CAN_SEND_SYSTEM_MESSAGES: &str = "CAN_SEND_SYSTEM_MESSAGES";
pub const CAN_SEND_MESSAGES: &str = "CAN_SEND_MESSAGES";
pub const HAS_ADMIN_ACCESS: &str = "HAS_ADMIN_ACCESS";
/// Every integration scope (Owncast's complete list).
pub const SCOPES: [&str; 3] = [CAN_SEND_SYSTEM_MESSAGES, CAN_SEND_MESSAGES, HAS_ADMIN_ACCESS];

/// How many characters of a token are kept for display.
pub const SHOWN_CHARS: usize = 8;

const MIGRATIONS: Migrations = &[
    "CREATE TABLE access_tokens (
        id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        token_prefix TEXT NOT NULL,
        display_name TEXT NOT NULL,
        display_color INTEGER NOT NULL,
        scopes TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_used_at TEXT
    );",
    // The token itself, for the admin list (NULL for tokens created before it was kept).
    "ALTER TABLE access_tokens ADD COLUMN token TEXT;",
    // Tokens are kept as their SHA-256 only again (the list shows a display form): the stored values go,
    // overwritten on disk rather than only unlinked from the table.
    "PRAGMA secure_delete = ON;
     UPDATE access_tokens SET token = NULL;
     ALTER TABLE access_tokens DROP COLUMN token;
     PRAGMA secure_delete = OFF;",
];

/// Errors of the token store.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("stored scopes are not valid JSON: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl From<rusqlite::Error> for TokenError {
    fn from(e: rusqlite::Error) -> Self {
        TokenError::Store(StoreError::Sqlite(e))
    }
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// An access token as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessToken {
    pub id: String,
    /// The whole token in the answer to its creation (the only time it is shown); elsewhere its display
    /// form (`abcd1234…`, its first 8 characters).
    pub access_token: String,
    /// Whether `accessToken` is the whole token (true only in the creation's answer).
    pub access_token_complete: bool,
    pub display_name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub scopes: Vec<String>,
    pub display_color: i64,
    pub is_bot: bool,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl AccessToken {
    /// Whether the token holds `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The bot user this token speaks as in chat (Owncast's integration user shape).
    pub fn user_json(&self) -> Value {
        json!({
            "id": self.id,
            "displayName": self.display_name,
            "displayColor": self.display_color,
            "createdAt": self.created_at,
            "previousNames": [self.display_name],
            "scopes": self.scopes,
            "isBot": true,
            "authenticated": false,
            "isModerator": false,
        })
    }
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn shown(prefix: &str) -> String {
    format!("{prefix}…")
}

/// The token store.
#[derive(Clone)]
pub struct Tokens {
    store: Store,
}

type Row = (String, String, String, i64, String, String, Option<String>);

fn parse_time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).unwrap_or_default()
}

fn from_row(r: Row) -> Result<AccessToken, TokenError> {
    let (id, prefix, name, color, scopes, created, used) = r;
    Ok(AccessToken {
        id,
        access_token_complete: false,
        access_token: shown(&prefix),
        display_name: name,
        kind: "API",
        scopes: serde_json::from_str(&scopes)?,
        display_color: color,
        is_bot: true,
        created_at: parse_time(&created),
        last_used_at: used.as_deref().map(parse_time),
    })
}

const COLUMNS: &str = "id, token_prefix, display_name, display_color, scopes, created_at, last_used_at";

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

impl Tokens {
    pub fn open(store: Store) -> Result<Self, StoreError> {
        store.migrate("tokens", MIGRATIONS)?;
        Ok(Self { store })
    }

    /// Create a token with `name` and `scopes` (already validated); the answer holds the whole token,
    /// which is not stored (only its SHA-256 and display form are).
    pub async fn create(&self, name: String, scopes: Vec<String>) -> Result<AccessToken, TokenError> {
        let token = crate::password::random_token(44);
        let id = crate::password::random_token(16);
        let color = i64::from(rand::random::<u8>() % 8);
        let now = Utc::now();
        let scopes_json = serde_json::to_string(&scopes)?;
        let (h, prefix, id2, name2) = (hash(&token), token[..SHOWN_CHARS].to_string(), id.clone(), name.clone());
        self.store
            .call(move |c| {
                c.execute(
                    "INSERT INTO access_tokens
                       (id, token_hash, token_prefix, display_name, display_color, scopes, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    rusqlite::params![id2, h, prefix, name2, color, scopes_json, now.to_rfc3339()],
                )?;
                Ok(())
            })
            .await?;
        Ok(AccessToken {
            id,
            access_token: token,
            access_token_complete: true,
            display_name: name,
            kind: "API",
            scopes,
            display_color: color,
            is_bot: true,
            created_at: now,
            last_used_at: None,
        })
    }

    pub async fn list(&self) -> Result<Vec<AccessToken>, TokenError> {
        let rows: Vec<Row> = self
            .store
            .call(|c| {
                let mut stmt = c.prepare(&format!("SELECT {COLUMNS} FROM access_tokens ORDER BY created_at"))?;
                let rows = stmt.query_map([], read_row)?.collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .await?;
        rows.into_iter().map(from_row).collect()
    }

    /// Delete by full token, id, or display form (only when it names exactly one token); false when
    /// nothing matched.
    pub async fn delete(&self, token: &str) -> Result<bool, TokenError> {
        let h = hash(token);
        let prefix = token.strip_suffix('…').unwrap_or("").to_string();
        let id = token.to_string();
        let n = self
            .store
            .call(move |c| {
                let n = c.execute(
                    "DELETE FROM access_tokens WHERE token_hash = ?1 OR id = ?2
                       OR (?3 != '' AND token_prefix = ?3
                           AND (SELECT COUNT(*) FROM access_tokens WHERE token_prefix = ?3) = 1)",
                    rusqlite::params![h, id, prefix],
                )?;
                Ok(n)
            })
            .await?;
        Ok(n > 0)
    }

    /// Look a full token up and stamp its last use.
    pub async fn find_and_touch(&self, token: &str) -> Result<Option<AccessToken>, TokenError> {
        let h = hash(token);
        let row: Option<Row> = self
            .store
            .call(move |c| {
                let row = c
                    .query_row(&format!("SELECT {COLUMNS} FROM access_tokens WHERE token_hash = ?1"), [&h], read_row)
                    .optional()?;
                if row.is_some() {
                    c.execute(
                        "UPDATE access_tokens SET last_used_at = ?1 WHERE token_hash = ?2",
                        rusqlite::params![Utc::now().to_rfc3339(), h],
                    )?;
                }
                Ok(row)
            })
            .await?;
        row.map(from_row).transpose()
    }
}

/// The Bearer token of a request, if it has one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// Owncast's integration auth: a known token holding `scope`, else 401.
pub async fn authorize(tokens: &Tokens, headers: &HeaderMap, scope: &str) -> Result<AccessToken, ApiError> {
    let token = bearer(headers).ok_or(ApiError::UnauthorizedToken)?;
    match tokens.find_and_touch(token).await? {
        Some(t) if t.has_scope(scope) => Ok(t),
        _ => Err(ApiError::UnauthorizedToken),
    }
}

#[derive(Deserialize)]
struct CreateBody {
    name: Option<String>,
    scopes: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct DeleteBody {
    token: Option<String>,
}

const GROUP: &str = "admin";

/// An `AccessToken` as JSON.
pub fn routes(reg: &mut Registry, tokens: Tokens) {
    let mut reg = reg.scope(tokens);
    reg.get("/api/admin/accesstokens", GROUP, Auth::Admin, "List access tokens", list).returns_list::<AccessToken>();
    reg.post(
        "/api/admin/accesstokens/create",
        GROUP,
        Auth::Admin,
        "Create an access token {name, scopes}",
        BodyDoc::Json(
            r#"{"type":"object","required":["name","scopes"],"properties":{
              "name":{"type":"string","maxLength":64,"pattern":"\\S"},
              "scopes":{"type":"array","minItems":1,"items":{"type":"string",
                "enum":["CAN_SEND_SYSTEM_MESSAGES","CAN_SEND_MESSAGES","HAS_ADMIN_ACCESS"]}}}}"#,
        ),
        create,
    )
    .returns::<AccessToken>();
    reg.post(
        "/api/admin/accesstokens/delete",
        GROUP,
        Auth::Admin,
        "Delete an access token {token}",
        BodyDoc::Json(
            r#"{"type":"object","required":["token"],"properties":{"token":{"type":"string","minLength":1}}}"#,
        ),
        delete,
    )
    .error(404, "No such token");
}

async fn list(State(tokens): State<Tokens>) -> Result<Json<Vec<AccessToken>>, ApiError> {
    Ok(Json(tokens.list().await?))
}

async fn create(
    State(tokens): State<Tokens>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Json<AccessToken>, ApiError> {
    let name = body.name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| ApiError::bad("name is required"))?;
    if name.chars().count() > 64 {
        return Err(ApiError::bad("name may be at most 64 characters"));
    }
    let scopes = body.scopes.unwrap_or_default();
    if scopes.is_empty() {
        return Err(ApiError::bad(format!("at least one scope is required: {}", SCOPES.join(", "))));
    }
    if let Some(bad) = scopes.iter().find(|s| !SCOPES.contains(&s.as_str())) {
        return Err(ApiError::bad(format!("unknown scope {bad}; valid scopes: {}", SCOPES.join(", "))));
    }
    // Stored and echoed exactly as given (order and all), as Owncast does.
    Ok(Json(tokens.create(name, scopes).await?))
}

async fn delete(
    State(tokens): State<Tokens>,
    JsonBody(body): JsonBody<DeleteBody>,
) -> Result<Json<StatusResponse>, ApiError> {
    let token = body.token.filter(|t| !t.is_empty()).ok_or_else(|| ApiError::bad("token is required"))?;
    if tokens.delete(&token).await? {
        Ok(StatusResponse::ok("deleted token"))
    } else {
        Err(ApiError::NotFound("no such access token".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn create_find_delete() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::open(Store::open(&dir.path().join("t.db")).unwrap()).unwrap();
        let t = tokens.create("bot".into(), vec![CAN_SEND_MESSAGES.into()]).await.unwrap();
        assert_eq!(t.access_token.len(), 44);
        assert!(t.access_token_complete, "the creation's answer holds the token");
        let found = tokens.find_and_touch(&t.access_token).await.unwrap().unwrap();
        assert!(found.has_scope(CAN_SEND_MESSAGES));
        assert!(found.last_used_at.is_none(), "the returned row is read before the stamp");
        let listed = tokens.list().await.unwrap();
        assert!(listed[0].last_used_at.is_some());
        assert_eq!(listed[0].access_token, format!("{}…", &t.access_token[..SHOWN_CHARS]), "only the display form");
        assert!(!listed[0].access_token_complete);
        assert!(tokens.delete(&format!("{}…", &t.access_token[..SHOWN_CHARS])).await.unwrap(), "display form deletes");
        assert!(tokens.find_and_touch(&t.access_token).await.unwrap().is_none());
        assert!(!tokens.delete("nope").await.unwrap());
    }

    #[tokio::test]
    async fn the_token_itself_is_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let tokens = Tokens::open(store.clone()).unwrap();
        let t = tokens.create("bot".into(), vec![CAN_SEND_MESSAGES.into()]).await.unwrap();
        let dump: Vec<String> = store
            .call(|c| {
                let mut stmt = c.prepare("SELECT * FROM access_tokens")?;
                let n = stmt.column_count();
                let rows = stmt
                    .query_map([], |r| {
                        (0..n).map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}"))).collect()
                    })?
                    .collect::<Result<Vec<Vec<String>>, _>>()?;
                Ok(rows.concat())
            })
            .await
            .unwrap();
        assert!(!dump.iter().any(|v| v.contains(&t.access_token)), "{dump:?}");
    }

    #[tokio::test]
    async fn a_display_form_shared_by_two_tokens_deletes_neither() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let tokens = Tokens::open(store.clone()).unwrap();
        tokens.create("a".into(), vec![CAN_SEND_MESSAGES.into()]).await.unwrap();
        tokens.create("b".into(), vec![CAN_SEND_MESSAGES.into()]).await.unwrap();
        store.call(|c| Ok(c.execute("UPDATE access_tokens SET token_prefix = 'samesame'", [])?)).await.unwrap();
        assert!(!tokens.delete("samesame…").await.unwrap());
        assert_eq!(tokens.list().await.unwrap().len(), 2);
    }

    #[test]
    fn bearer_prefix_is_case_insensitive() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }
}
