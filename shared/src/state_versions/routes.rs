//! The state-versions routes. Each handler parses, calls one domain function and renders.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde::Deserialize;

use super::render;
use super::versions::{self, Declared, Download, Form, Links, NewStateVersion};
use crate::accounts::workspaces::WorkspaceAt;
use crate::api::{ApiError, BaseUrl, Document, JsonApiBody, Listing, QueryParams};
use crate::auth::Principal;
use crate::errors::Kind;
use crate::links::Signed;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/workspaces/{id}/state-versions", get(list_by_workspace).post(create))
        .route("/api/v2/workspaces/{id}/current-state-version", get(show_current))
        .route("/api/v2/workspaces/{id}/current-state-version-outputs", get(current_outputs))
        .route("/api/v2/state-versions", get(list_by_name))
        .route("/api/v2/state-versions/{id}", get(show))
        .route("/api/v2/state-versions/{id}/outputs", get(list_outputs))
        .route("/api/v2/state-versions/{id}/download", get(download_state))
        .route("/api/v2/state-versions/{id}/json-download", get(download_json))
        .route("/api/v2/state-version-outputs/{id}", get(show_output))
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StateVersionAttrs {
    serial: u64,
    md5: String,
    lineage: Option<String>,
    #[serde(default)]
    force: bool,
    state: Option<String>,
    json_state: Option<String>,
    /// Sent by newer clients beside `json-state`; the outputs are read from the state itself.
    #[serde(default)]
    #[allow(dead_code)]
    json_state_outputs: Option<String>,
}

fn decode(encoded: &str, pointer: &str) -> Result<bytes::Bytes> {
    BASE64.decode(encoded).map(bytes::Bytes::from).map_err(|_| ApiError::invalid(pointer, "must be base64."))
}

/// The body of a state write, read up to the state size limit (base64 takes 4 bytes for 3) with
/// room for the document around it, past axum's default limit for other bodies.
async fn read_body(state: &AppState, body: Body) -> Result<JsonApiBody> {
    let limit = usize::try_from(state.config.max_state_bytes.saturating_mul(8) / 3 + 1024 * 1024).unwrap_or(usize::MAX);
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        let detail = format!(
            "The request body is over what a state write may carry: a state of at most {} bytes (HANGAR_MAX_STATE_BYTES).",
            state.config.max_state_bytes
        );
        ApiError::new(Kind::TooLarge, "payload too large", detail)
    })?;
    JsonApiBody::parse(&bytes)
}

async fn create(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
    body: Body,
) -> Result<Document> {
    let attrs = read_body(&state, body).await?.resource::<StateVersionAttrs>(&["state-versions"])?.attributes;
    // Without `state`, the version waits for it on an upload link (go-tfe's Upload, Terraform 1.6
    // and later).
    let new = NewStateVersion {
        declared: Declared { serial: attrs.serial, md5: attrs.md5, lineage: attrs.lineage },
        force: attrs.force,
        state: attrs.state.as_deref().map(|state| decode(state, "/data/attributes/state")).transpose()?,
        json_state: attrs.json_state.as_deref().map(|json| decode(json, "/data/attributes/json-state")).transpose()?,
    };
    let created = versions::create(&state, &principal, &id, new).await?;
    let resource = render::state_version(&created.version, &created.seen, &Links::new(&state, &base)?);
    Ok(Document::one(render::with_upload_links(resource, created.upload_links)).created())
}

async fn shown(
    state: &AppState,
    base: &str,
    params: &QueryParams,
    (version, seen): (super::StateVersion, versions::Seen),
) -> Result<Document> {
    let document = Document::one(render::state_version(&version, &seen, &Links::new(state, base)?));
    if !params.includes("outputs")? {
        return Ok(document);
    }
    let outputs = versions::outputs(state.blobs.as_ref(), &version).await?;
    Ok(document.included(render::outputs(&version, &outputs)))
}

async fn show(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    params: QueryParams,
    Path(id): Path<String>,
) -> Result<Document> {
    let found = versions::get(state.store.as_ref(), &principal, &id).await?;
    shown(&state, &base, &params, found).await
}

async fn show_current(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    params: QueryParams,
    Path(id): Path<String>,
) -> Result<Document> {
    let found = versions::current(&state, &principal, WorkspaceAt::Id(&id)).await?;
    shown(&state, &base, &params, found).await
}

async fn listed(
    state: &AppState,
    principal: &Principal,
    base: &str,
    listing: &Listing,
    at: WorkspaceAt<'_>,
) -> Result<Document> {
    let (versions, total, seen) = versions::list(state.store.as_ref(), principal, at, &listing.page).await?;
    let links = Links::new(state, base)?;
    let resources = versions.iter().map(|version| render::state_version(version, &seen, &links)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn list_by_workspace(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    listed(&state, &principal, &base, &listing, WorkspaceAt::Id(&id)).await
}

/// go-tfe's list: `filter[workspace][name]` and `filter[organization][name]`, both required.
async fn list_by_name(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    listing: Listing,
) -> Result<Document> {
    let filter = |name: &'static str| {
        listing
            .params
            .non_empty(name)
            .ok_or_else(|| ApiError::invalid_parameter(name, format!("`{name}` is required.")))
    };
    let at = WorkspaceAt::Name { org: filter("filter[organization][name]")?, name: filter("filter[workspace][name]")? };
    listed(&state, &principal, &base, &listing, at).await
}

async fn list_outputs(
    State(state): State<AppState>,
    principal: Principal,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    let (version, _) = versions::get(state.store.as_ref(), &principal, &id).await?;
    outputs_page(&state, &listing, &version).await
}

async fn current_outputs(
    State(state): State<AppState>,
    principal: Principal,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    let (version, _) = versions::current(&state, &principal, WorkspaceAt::Id(&id)).await?;
    outputs_page(&state, &listing, &version).await
}

/// A page of a version's outputs, sensitive values null.
async fn outputs_page(state: &AppState, listing: &Listing, version: &super::StateVersion) -> Result<Document> {
    let outputs = versions::outputs(state.blobs.as_ref(), version).await?;
    let total = outputs.len();
    let resources = listing.page.slice(render::outputs(version, &outputs));
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_output(State(state): State<AppState>, principal: Principal, Path(id): Path<String>) -> Result<Document> {
    let (output, _) = versions::output(state.store.as_ref(), state.blobs.as_ref(), &principal, &id).await?;
    Ok(Document::one(render::output(&output, &id, true)))
}

async fn download_state(
    State(state): State<AppState>,
    Path(id): Path<String>,
    link: std::result::Result<Query<Signed>, QueryRejection>,
) -> Result<Response> {
    download(&state, &id, Form::State, link).await
}

async fn download_json(
    State(state): State<AppState>,
    Path(id): Path<String>,
    link: std::result::Result<Query<Signed>, QueryRejection>,
) -> Result<Response> {
    download(&state, &id, Form::Json, link).await
}

/// A download link: no bearer token is needed, or looked at (go-tfe sends one anyway).
async fn download(
    state: &AppState,
    id: &str,
    form: Form,
    link: std::result::Result<Query<Signed>, QueryRejection>,
) -> Result<Response> {
    let Ok(Query(signed)) = link else {
        return Err(ApiError::forbidden("The link's signature is invalid or has expired."));
    };
    Ok(match versions::download(state, id, form, &signed).await? {
        Download::Redirect(url) => (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, url)], "").into_response(),
        Download::Body(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
    })
}
