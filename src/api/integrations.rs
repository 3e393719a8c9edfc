//! The integrations API (`/api/integrations/...`): Owncast's stable API for bots and tools, with
//! `Authorization: Bearer <access token>` and a scope per route (see `tokens::authorize`). Preflight
//! `OPTIONS` and the open CORS header come from the router's CORS layer. The chat routes are added by
//! the chat module's integration glue.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::Server;
use crate::http::{parse_json, ApiError, Auth, BodyDoc, Registry, StatusResponse, ValueDoc};
use crate::tokens::{authorize, HAS_ADMIN_ACCESS};

const GROUP: &str = "integrations";

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    let mut reg = reg.scope(server);
    reg.post(
        "/api/integrations/streamtitle",
        GROUP,
        Auth::Integration(HAS_ADMIN_ACCESS),
        "Set the stream title",
        BodyDoc::Value(ValueDoc::String),
        stream_title,
    );
    reg.get("/api/integrations/status", GROUP, Auth::Integration(HAS_ADMIN_ACCESS), "Server status", status)
        .returns::<super::admin::AdminStatus>();
}

#[derive(Deserialize)]
struct ValueBody {
    value: Option<Value>,
}

async fn stream_title(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    authorize(&server.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    let body: ValueBody = parse_json(&body)?;
    let value = body.value.ok_or_else(|| ApiError::bad("the request body must be {\"value\": \"<title>\"}"))?;
    super::setters::apply_named(&server, "streamtitle", value).await
}

async fn status(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
) -> Result<Json<super::admin::AdminStatus>, ApiError> {
    authorize(&server.tokens, &headers, HAS_ADMIN_ACCESS).await?;
    Ok(Json(super::admin::admin_status(&server)))
}
