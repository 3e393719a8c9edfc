//! The OpenAPI 3 document, generated from the route registry and the `ToSchema` types.
//!
//! Every route the router serves is recorded in `Registry` when it is added, so `document` lists
//! exactly those routes; the schemas of request bodies are the `ToSchema` types the features registered.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use utoipa::openapi::path::{HttpMethod, OperationBuilder};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    schema, ArrayBuilder, ComponentsBuilder, ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, OpenApiBuilder,
    PathItem, PathsBuilder, Ref, RefOr, ResponseBuilder, ResponsesBuilder, Schema, Type,
};

use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::Required;

use super::gate::Guarded;
use super::{Auth, BodyDoc, ResponseDoc, RouteDoc, ValueDoc};

pub(super) async fn serve(State(doc): State<Arc<OpenApi>>) -> Json<OpenApi> {
    Json((*doc).clone())
}

fn value_schema(v: ValueDoc) -> RefOr<Schema> {
    let prim = |t: Type| RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(t).build()));
    match v {
        ValueDoc::String => prim(Type::String),
        ValueDoc::Boolean => prim(Type::Boolean),
        ValueDoc::Integer => prim(Type::Integer),
        ValueDoc::StringList => RefOr::T(Schema::Array(ArrayBuilder::new().items(prim(Type::String)).build())),
        ValueDoc::StringMap => RefOr::T(Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .additional_properties(Some(schema::AdditionalProperties::RefOr(prim(Type::String))))
                .build(),
        )),
        ValueDoc::Schema(name) => RefOr::Ref(Ref::from_schema_name(name)),
        ValueDoc::SchemaList(name) => {
            RefOr::T(Schema::Array(ArrayBuilder::new().items(RefOr::Ref(Ref::from_schema_name(name))).build()))
        }
        ValueDoc::Json(text) => written_schema(text),
    }
}

/// A schema written out as JSON text in a route table. They are constants of the source, checked by
/// `tests::every_written_schema_parses`; one that does not parse is logged and documented as "any".
fn written_schema(text: &str) -> RefOr<Schema> {
    serde_json::from_str(text).unwrap_or_else(|e| {
        tracing::error!(%e, text, "a documented schema does not parse");
        RefOr::T(Schema::Object(ObjectBuilder::new().build()))
    })
}

/// The path parameters of an axum path (`{name}`, `{*rest}`), and the path as OpenAPI writes it.
pub fn path_params(path: &str) -> (String, Vec<String>) {
    let mut names = Vec::new();
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else { break };
        let name = rest[open + 1..open + close].trim_start_matches('*');
        out.push('{');
        out.push_str(name);
        out.push('}');
        names.push(name.to_string());
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    (out, names)
}

/// What a gated route answers when the request does not pass the gate (`gate::Guarded`), each with a
/// StatusResponse: the statuses of [`Guarded::Pass`], and the admission hook's of [`Guarded::PassAndHook`].
const GATE_PASS: &[(u16, &str)] = &[
    (401, "A viewing pass is needed: the channel is private (unlock it with `/api/viewer/*`), or the pass given is not valid"),
    (429, "Too many wrong admin passwords from this address (the channel admin's Basic credentials pass the gate): wait the Retry-After seconds"),
    (503, "The server is busy checking passwords: try again shortly"),
];
const GATE_HOOK: &[(u16, &str)] = &[
    (403, "The channel's admission hook refused this viewer"),
    (503, "The channel's admission hook cannot be reached (a private channel refuses meanwhile): try again shortly"),
];

/// Every error status a route can answer: those its shape implies (bad input for a body, query or
/// path parameter; 413 for a body; 401 for authenticated routes; 404 for a path naming something),
/// those it declares, and those of the gate in front of it (`RouteDoc::gated`). One status that has
/// several causes is described with each.
pub fn error_statuses(doc: &RouteDoc) -> Vec<(u16, String)> {
    let mut out: Vec<(u16, String)> = Vec::new();
    for (status, when) in route_error_statuses(doc) {
        add_cause(&mut out, status, when);
    }
    let gate: &[&[(u16, &str)]] = match doc.gated {
        Guarded::No => &[],
        Guarded::Pass => &[GATE_PASS],
        Guarded::PassAndHook => &[GATE_PASS, GATE_HOOK],
    };
    for (status, when) in gate.iter().flat_map(|g| g.iter()) {
        add_cause(&mut out, *status, when);
    }
    out.sort_by_key(|(s, _)| *s);
    out
}

/// Add `when` to what `status` is answered for (once).
fn add_cause(out: &mut Vec<(u16, String)>, status: u16, when: &str) {
    match out.iter_mut().find(|(s, _)| *s == status) {
        Some((_, text)) if text == when || text.split("; or: ").any(|t| t == when) => {}
        Some((_, text)) => {
            text.push_str("; or: ");
            text.push_str(when);
        }
        None => out.push((status, when.to_string())),
    }
}

/// The route's own error statuses (its shape and what it declares; see [`error_statuses`]).
fn route_error_statuses(doc: &RouteDoc) -> Vec<(u16, &'static str)> {
    let has_params = doc.path.contains('{');
    let mut out: Vec<(u16, &'static str)> = Vec::new();
    if !matches!(doc.body, BodyDoc::None) || has_params || !doc.query.is_empty() {
        out.push((400, "Bad input"));
    }
    if doc.auth != Auth::Public {
        out.push((401, "Missing or invalid credentials"));
    }
    if has_params {
        out.push((404, "Nothing by that name"));
    }
    if !matches!(doc.body, BodyDoc::None) {
        out.push((413, "Request body too large"));
    }
    for (status, when) in &doc.errors {
        if !out.iter().any(|(s, _)| s == status) {
            out.push((*status, when));
        }
    }
    if doc.auth == Auth::Admin {
        for (status, when) in [
            (429, "Too many wrong passwords from this address: wait the Retry-After seconds"),
            (503, "The server is busy checking passwords: try again shortly"),
        ] {
            if !out.iter().any(|(s, _)| *s == status) {
                out.push((status, when));
            }
        }
    }
    out
}

fn json_content(schema: RefOr<Schema>) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(schema)).build()
}

fn http_method(m: &axum::http::Method) -> HttpMethod {
    match *m {
        axum::http::Method::POST => HttpMethod::Post,
        axum::http::Method::PUT => HttpMethod::Put,
        axum::http::Method::DELETE => HttpMethod::Delete,
        axum::http::Method::PATCH => HttpMethod::Patch,
        axum::http::Method::OPTIONS => HttpMethod::Options,
        axum::http::Method::HEAD => HttpMethod::Head,
        _ => HttpMethod::Get,
    }
}

fn operation(doc: &RouteDoc) -> utoipa::openapi::path::Operation {
    let mut responses = ResponsesBuilder::new();
    let ok = ResponseBuilder::new().description("Success");
    let ok = match doc.response {
        ResponseDoc::Any => Some(ok),
        ResponseDoc::Json(name) => {
            Some(ok.content("application/json", json_content(Ref::from_schema_name(name).into())))
        }
        ResponseDoc::JsonList(name) => Some(ok.content(
            "application/json",
            json_content(RefOr::T(Schema::Array(ArrayBuilder::new().items(Ref::from_schema_name(name)).build()))),
        )),
        ResponseDoc::JsonAs(ctype, name) => Some(ok.content(ctype, json_content(Ref::from_schema_name(name).into()))),
        ResponseDoc::JsonSchema(text) => Some(ok.content("application/json", json_content(written_schema(text)))),
        // Files, pages and text: the body is a string of that media type.
        ResponseDoc::Content(ctype) => Some(ok.content(
            ctype,
            json_content(RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).build()))),
        )),
        ResponseDoc::NoContent | ResponseDoc::Redirect(..) | ResponseDoc::Upgrade(..) | ResponseDoc::Created(_) => None,
    };
    responses = match (ok, doc.response) {
        (Some(ok), _) => responses.response("200", ok),
        (None, ResponseDoc::Redirect(status, to)) => {
            responses.response(status.to_string(), ResponseBuilder::new().description(to))
        }
        (None, ResponseDoc::Created(ctype)) => responses.response(
            "201",
            ResponseBuilder::new().description("Created: the session resource is in Location").content(
                ctype,
                json_content(RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).build()))),
            ),
        ),
        (None, ResponseDoc::Upgrade(what)) => responses.response("101", ResponseBuilder::new().description(what)),
        (None, _) => responses.response("204", ResponseBuilder::new().description("Done")),
    };
    for (status, to) in &doc.redirects {
        responses = responses.response(status.to_string(), ResponseBuilder::new().description(*to));
    }
    // The gate sends a browser's page navigation without a pass to the channel's page (`access::gate`).
    if doc.gated == Guarded::PassAndHook
        && doc.method == axum::http::Method::GET
        && !doc.redirects.iter().any(|(s, _)| *s == 303)
    {
        responses = responses.response(
            "303",
            ResponseBuilder::new()
                .description("A browser's page navigation (`Accept: text/html`) without a pass: sent to the channel's page, to unlock it"),
        );
    }
    for (status, when) in error_statuses(doc) {
        responses = responses.response(
            status.to_string(),
            ResponseBuilder::new()
                .description(when)
                .content("application/json", json_content(Ref::from_schema_name("StatusResponse").into())),
        );
    }
    let (own, mut auth_note) = match doc.auth {
        Auth::Public => (None, String::new()),
        Auth::Admin => (Some(("admin", Vec::new())), String::new()),
        Auth::User => (Some(("chatUser", Vec::new())), " A chat user's `?accessToken=`.".into()),
        Auth::Moderator => (Some(("chatModerator", Vec::new())), " A moderator's `?accessToken=`.".into()),
        Auth::Integration(scope) => (Some(("bearer", vec![scope])), format!(" Scope {scope}.")),
    };
    let security = security_of(own, doc.gated);
    if doc.gated != Guarded::No && doc.auth != Auth::Admin {
        auth_note.push_str(GATE_NOTE);
    }
    let mut params = Vec::new();
    for name in path_params(&doc.path).1 {
        let schema = match doc.path_params.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => value_schema(*v),
            None => {
                RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).build()))
            }
        };
        params.push(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(schema))
                .build(),
        );
    }
    for q in &doc.query {
        params.push(
            ParameterBuilder::new()
                .name(q.name)
                .parameter_in(ParameterIn::Query)
                .required(if q.required { Required::True } else { Required::False })
                .schema(Some(value_schema(q.schema)))
                .build(),
        );
    }
    let mut op = OperationBuilder::new()
        .summary(Some(doc.summary))
        .description(Some(format!("{}{}", doc.summary, auth_note)))
        .tag(doc.group)
        .parameters(Some(params))
        .responses(responses.build());
    for sec in security {
        op = op.security(sec);
    }
    let body = match doc.body {
        BodyDoc::None => None,
        BodyDoc::Schema(name) => Some(("application/json", RefOr::Ref(Ref::from_schema_name(name)))),
        BodyDoc::Json(text) => Some(("application/json", written_schema(text))),
        BodyDoc::Form(text) => Some(("application/x-www-form-urlencoded", written_schema(text))),
        BodyDoc::Value(v) => Some((
            "application/json",
            RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("value", value_schema(v))
                    .required("value")
                    .build(),
            )),
        )),
        BodyDoc::Multipart => Some((
            "multipart/form-data",
            RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::Object).build())),
        )),
        BodyDoc::Content(ctype) => {
            Some((ctype, RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).build()))))
        }
        BodyDoc::MultipartFile(field) => Some((
            "multipart/form-data",
            RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property(
                        field,
                        ObjectBuilder::new().schema_type(Type::String).content_media_type("application/octet-stream"),
                    )
                    .required(field)
                    .build(),
            )),
        )),
    };
    if let Some((ctype, schema)) = body {
        op = op.request_body(Some(
            RequestBodyBuilder::new()
                .content(ctype, ContentBuilder::new().schema(Some(schema)).build())
                .required(Some(if doc.body_optional { Required::False } else { Required::True }))
                .build(),
        ));
    }
    op.build()
}

/// What the description of a gated route says (see [`security_of`]).
const GATE_NOTE: &str = " On a private channel also a viewing pass (the channel's cookie, `?pass=` or \
                         `Authorization: Bearer`) or the channel admin's Basic credentials.";

/// The security requirements (alternatives) of a route whose own scheme is `own` (name, scopes), behind
/// a gate that `gated` says of. A private channel's ways out want a viewer's pass (`viewerPass`) or the
/// channel admin's Basic credentials (`admin`); a public channel's want neither, hence the alternative
/// with the route's own credentials alone (none: `{}`). A route with credentials of its own (a chat
/// user's token) lists the admin's as its alternative and leaves the pass to the text ([`GATE_NOTE`]):
/// an optional `?pass=` beside a required token is one a client (a fuzzer) fills in with a made-up
/// value, and the token alone is then taken as "bad credentials accepted". The alternatives with the
/// gate's credentials come first: a client picking the first it can satisfy sends them.
fn security_of(own: Option<(&'static str, Vec<&'static str>)>, gated: Guarded) -> Vec<SecurityRequirement> {
    let none = Vec::<String>::new;
    match own {
        None if gated == Guarded::No => Vec::new(),
        None => vec![
            SecurityRequirement::new("admin", none()),
            SecurityRequirement::new("viewerPass", none()),
            SecurityRequirement::default(),
        ],
        Some((name, scopes)) => {
            let only_own = SecurityRequirement::new(name, scopes.clone());
            // Not gated; the admin, whose credentials pass the gate already; a bearer token, which and
            // the admin's Basic credentials would both be `Authorization` (the pass is in the text).
            if gated == Guarded::No || name == "admin" || name == "bearer" {
                vec![only_own]
            } else {
                vec![SecurityRequirement::new(name, scopes).add("admin", none()), only_own]
            }
        }
    }
}

/// Build the document for `routes`.
pub fn document(routes: &[RouteDoc], schemas: &[(String, RefOr<Schema>)]) -> OpenApi {
    let mut paths = PathsBuilder::new();
    for r in routes {
        paths = paths.path(path_params(&r.path).0, PathItem::new(http_method(&r.method), operation(r)));
    }
    let mut components = ComponentsBuilder::new();
    for (name, schema) in schemas {
        components = components.schema(name.clone(), schema.clone());
    }
    let components = components
        .security_scheme("admin", SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)))
        .security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)))
        // Chat users and moderators authenticate with the token `POST /api/chat/register` gave them, in the
        // query (Owncast's `?accessToken=`); two schemes, since a moderator's token is not any user's.
        .security_scheme("chatUser", SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::new("accessToken"))))
        .security_scheme("chatModerator", SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::new("accessToken"))))
        // A private channel's ways out want a viewing pass (`POST /api/viewer/*` issues one): in the
        // channel's cookie, in `?pass=` (players without cookies) or as `Authorization: Bearer`.
        .security_scheme(
            "viewerPass",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "pass",
                "A viewing pass of a private channel (`POST /api/viewer/unlock`, `/invite`, `/token` issue one); \
                 also taken from the channel's cookie (`castd_pass`, `castd_pass_{slug}`) or as `Authorization: Bearer`.",
            ))),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("castd")
                .version(crate::VERSION)
                .description(Some("castd's HTTP API: Owncast-compatible paths, methods and JSON fields."))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components))
        .build()
}

/// One object schema made of the properties (and required names) of `parts`, each an object schema:
/// the schema of a JSON object that is several serialized structs flattened together (the admin server
/// configuration, assembled from each feature's part), written as one plain object.
pub fn merged_object(description: &str, parts: impl IntoIterator<Item = RefOr<Schema>>) -> RefOr<Schema> {
    let mut out = schema::Object::with_type(Type::Object);
    out.description = Some(description.to_string());
    for part in parts {
        if let RefOr::T(Schema::Object(obj)) = part {
            out.properties.extend(obj.properties);
            out.required.extend(obj.required);
        }
    }
    RefOr::T(Schema::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_are_found_and_written_the_openapi_way() {
        assert_eq!(
            path_params("/a/{id}/b/{*rest}"),
            ("/a/{id}/b/{rest}".to_string(), vec!["id".into(), "rest".into()])
        );
        assert_eq!(path_params("/plain"), ("/plain".to_string(), vec![]));
    }

    fn route(auth: Auth, gated: Guarded) -> RouteDoc {
        RouteDoc {
            method: axum::http::Method::GET,
            path: "/api/chat".into(),
            group: "chat",
            auth,
            summary: "Chat history",
            body: BodyDoc::None,
            body_optional: false,
            response: ResponseDoc::Any,
            errors: vec![(403, "Banned")],
            redirects: Vec::new(),
            query: Vec::new(),
            path_params: Vec::new(),
            gated,
        }
    }

    #[test]
    fn a_gated_route_documents_the_gates_answers_beside_its_own() {
        let statuses = |doc: &RouteDoc| error_statuses(doc).into_iter().map(|(s, _)| s).collect::<Vec<_>>();
        let open = route(Auth::User, Guarded::No);
        assert_eq!(statuses(&open), [401, 403]);
        let gated = route(Auth::User, Guarded::PassAndHook);
        assert_eq!(statuses(&gated), [401, 403, 429, 503]);
        let all = error_statuses(&gated);
        let text = |s: u16| all.iter().find(|(n, _)| *n == s).map(|(_, t)| t.as_str()).unwrap_or_default();
        // One status with several causes names each, once.
        assert!(text(401).starts_with("Missing or invalid credentials; or: A viewing pass is needed"), "{}", text(401));
        assert!(text(403).starts_with("Banned; or: The channel's admission hook refused"), "{}", text(403));
        assert_eq!(text(503).matches("try again shortly").count(), 2, "{}", text(503));
        // The status of a private channel: a pass, not the hook.
        assert_eq!(statuses(&route(Auth::Public, Guarded::Pass)), [401, 403, 429, 503]);
        let status = error_statuses(&route(Auth::Public, Guarded::Pass));
        assert!(!status.iter().any(|(_, t)| t.contains("admission hook")), "{status:?}");
    }

    #[test]
    fn a_gated_route_takes_a_pass_or_the_admin_besides_its_own_credentials() {
        let names = |reqs: Vec<SecurityRequirement>| {
            reqs.iter()
                .map(|r| {
                    serde_json::to_value(r).unwrap().as_object().unwrap().keys().cloned().collect::<Vec<_>>().join("+")
                })
                .collect::<Vec<_>>()
        };
        assert!(security_of(None, Guarded::No).is_empty());
        assert_eq!(names(security_of(None, Guarded::PassAndHook)), ["admin", "viewerPass", ""]);
        assert_eq!(
            names(security_of(Some(("chatUser", vec![])), Guarded::PassAndHook)),
            ["admin+chatUser", "chatUser"]
        );
        assert_eq!(names(security_of(Some(("chatUser", vec![])), Guarded::No)), ["chatUser"]);
        assert_eq!(names(security_of(Some(("admin", vec![])), Guarded::PassAndHook)), ["admin"]);
        assert_eq!(names(security_of(Some(("bearer", vec!["X"])), Guarded::PassAndHook)), ["bearer"]);
    }
}
