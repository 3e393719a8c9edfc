//! The OpenAPI 3 document, generated from the route registry and the `ToSchema` types.
//!
//! Every route the router serves is recorded in `Registry` when it is added, so `document` lists
//! exactly those routes; the schemas of request bodies are the `ToSchema` types the features registered.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use utoipa::openapi::path::{HttpMethod, OperationBuilder};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    schema, ArrayBuilder, ComponentsBuilder, ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, OpenApiBuilder,
    PathItem, PathsBuilder, Ref, RefOr, ResponseBuilder, ResponsesBuilder, Schema, Type,
};

use super::{Auth, BodyDoc, RouteDoc, ValueDoc};

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
    }
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
    let mut responses = ResponsesBuilder::new().response("200", ResponseBuilder::new().description("Success"));
    if doc.method != axum::http::Method::GET || matches!(doc.body, BodyDoc::Value(_) | BodyDoc::Schema(_)) {
        responses = responses.response(
            "400",
            ResponseBuilder::new().description("Bad input").content(
                "application/json",
                ContentBuilder::new().schema(Some(Ref::from_schema_name("StatusResponse"))).build(),
            ),
        );
    }
    let (security, auth_note) = match doc.auth {
        Auth::Public => (None, String::new()),
        Auth::Admin => (Some(SecurityRequirement::new("admin", Vec::<String>::new())), String::new()),
        Auth::User => (None, " Requires a chat user's `?accessToken=`.".to_string()),
        Auth::Moderator => (None, " Requires a moderator's `?accessToken=`.".to_string()),
        Auth::Integration(scope) => (Some(SecurityRequirement::new("bearer", [scope])), format!(" Scope {scope}.")),
    };
    if security.is_some() {
        responses = responses.response("401", ResponseBuilder::new().description("Missing or invalid credentials"));
    }
    let mut op = OperationBuilder::new()
        .summary(Some(doc.summary))
        .description(Some(format!("{}{}", doc.summary, auth_note)))
        .tag(doc.group)
        .responses(responses.build());
    if let Some(sec) = security {
        op = op.security(sec);
    }
    let body = match doc.body {
        BodyDoc::None => None,
        BodyDoc::Schema(name) => Some(("application/json", RefOr::Ref(Ref::from_schema_name(name)))),
        BodyDoc::Value(v) => Some((
            "application/json",
            RefOr::T(Schema::Object(ObjectBuilder::new().property("value", value_schema(v)).required("value").build())),
        )),
        BodyDoc::Multipart => Some((
            "multipart/form-data",
            RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::Object).build())),
        )),
    };
    if let Some((ctype, schema)) = body {
        op = op.request_body(Some(
            RequestBodyBuilder::new().content(ctype, ContentBuilder::new().schema(Some(schema)).build()).build(),
        ));
    }
    op.build()
}

/// Build the document for `routes`.
pub fn document(routes: &[RouteDoc], schemas: &[(String, RefOr<Schema>)]) -> OpenApi {
    let mut paths = PathsBuilder::new();
    for r in routes {
        paths = paths.path(r.path.clone(), PathItem::new(http_method(&r.method), operation(r)));
    }
    let mut components = ComponentsBuilder::new();
    for (name, schema) in schemas {
        components = components.schema(name.clone(), schema.clone());
    }
    let components = components
        .security_scheme("admin", SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)))
        .security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)))
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
