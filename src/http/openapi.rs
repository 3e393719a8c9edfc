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

/// Every error status a route can answer: those its shape implies (bad input for a body, query or
/// path parameter; 413 for a body; 401 for authenticated routes; 404 for a path naming something)
/// and those it declares.
pub fn error_statuses(doc: &RouteDoc) -> Vec<(u16, &'static str)> {
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
    out.sort_by_key(|(s, _)| *s);
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
    for (status, when) in error_statuses(doc) {
        responses = responses.response(
            status.to_string(),
            ResponseBuilder::new()
                .description(when)
                .content("application/json", json_content(Ref::from_schema_name("StatusResponse").into())),
        );
    }
    let (security, auth_note) = match doc.auth {
        Auth::Public => (None, String::new()),
        Auth::Admin => (Some(SecurityRequirement::new("admin", Vec::<String>::new())), String::new()),
        Auth::User => {
            (Some(SecurityRequirement::new("chatUser", Vec::<String>::new())), " A chat user's `?accessToken=`.".into())
        }
        Auth::Moderator => (
            Some(SecurityRequirement::new("chatModerator", Vec::<String>::new())),
            " A moderator's `?accessToken=`.".into(),
        ),
        Auth::Integration(scope) => (Some(SecurityRequirement::new("bearer", [scope])), format!(" Scope {scope}.")),
    };
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
    if let Some(sec) = security {
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
}
