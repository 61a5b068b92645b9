//! The runs routes (HCP Terraform's configuration versions, runs, plans and applies). Each
//! handler parses, calls one domain function and renders.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use serde::Deserialize;

use super::configurations::{self, NewConfiguration};
use super::job_files;
use super::record::{Phase, Run};
use super::render;
use super::runs::{self, Action, NewRun};
use crate::api::{ApiError, BaseUrl, Document, JsonApiBody, Listing, QueryParams, Resource};
use crate::auth::Principal;
use crate::errors::Kind;
use crate::links::Signed;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/workspaces/{id}/configuration-versions", get(list_configurations).post(create_configuration))
        .route("/api/v2/configuration-versions/{id}", get(show_configuration))
        .route("/api/v2/configuration-versions/{id}/upload", put(upload_configuration))
        .route("/api/v2/runs", post(create_run))
        .route("/api/v2/runs/{id}", get(show_run))
        .route("/api/v2/workspaces/{id}/runs", get(list_runs))
        .route("/api/v2/runs/{id}/actions/{action}", post(act))
        .route("/api/v2/runs/{id}/run-events", get(run_events))
        .route("/api/v2/plans/{id}", get(show_phase))
        .route("/api/v2/applies/{id}", get(show_phase))
        .route("/api/v2/logs/{id}/{expires}/{signature}", get(read_log))
        .route("/api/v2/organizations/{org}/runs/queue", get(organization_queue))
        .route("/api/v2/organizations/{org}/capacity", get(capacity))
        .merge(super::identity::routes())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct ConfigurationAttrs {
    auto_queue_runs: Option<bool>,
    #[serde(default)]
    speculative: bool,
    /// go-tfe's; a provisional version is an ordinary one here.
    #[serde(default)]
    #[allow(dead_code)]
    provisional: bool,
}

fn upload_url(state: &AppState, base: &str, cv: &super::ConfigurationVersion) -> Option<String> {
    state.links.as_ref().and_then(|signer| configurations::upload_url(signer, base, cv))
}

async fn create_configuration(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs: ConfigurationAttrs = body.attributes_or_default(&["configuration-versions"])?;
    // HCP's default: a version that lands queues a run of its own.
    let new =
        NewConfiguration { auto_queue_runs: attrs.auto_queue_runs.unwrap_or(true), speculative: attrs.speculative };
    let seen = configurations::create(state.store.as_ref(), &principal, &id, new).await?;
    let url = upload_url(&state, &base, &seen.cv);
    Ok(Document::one(render::configuration_version(&seen.cv, url)).created())
}

async fn show_configuration(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
) -> Result<Document> {
    let seen = configurations::get(state.store.as_ref(), &principal, &id).await?;
    let url = seen.may.queue_run.then(|| upload_url(&state, &base, &seen.cv)).flatten();
    Ok(Document::one(render::configuration_version(&seen.cv, url)))
}

async fn list_configurations(
    State(state): State<AppState>,
    principal: Principal,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    let (versions, total) = configurations::list(state.store.as_ref(), &principal, &id, &listing.page).await?;
    let resources = versions.iter().map(|cv| render::configuration_version(cv, None)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

/// The upload link: the signed query is the whole authorization (a bearer token sent along is
/// not looked at); the body is the archive, read up to the registry's compressed limit.
async fn upload_configuration(
    State(state): State<AppState>,
    Path(id): Path<String>,
    link: std::result::Result<Query<Signed>, QueryRejection>,
    body: Body,
) -> Result<StatusCode> {
    let Ok(Query(signed)) = link else {
        return Err(ApiError::forbidden("The link's signature is invalid or has expired."));
    };
    let limit = usize::try_from(state.config.archive_limits.max_compressed_bytes).unwrap_or(usize::MAX);
    let body = axum::body::to_bytes(body, limit.saturating_add(1)).await.map_err(|_| {
        let detail = format!("The archive is over this Hangar's limit of {limit} bytes (HANGAR_MAX_UPLOAD_BYTES).");
        ApiError::new(Kind::TooLarge, "payload too large", detail)
    })?;
    configurations::upload(&state, &id, &signed, body).await?;
    Ok(StatusCode::OK)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RunAttrs {
    message: Option<String>,
    #[serde(default)]
    is_destroy: bool,
    refresh: Option<bool>,
    #[serde(default)]
    refresh_only: bool,
    #[serde(default)]
    plan_only: bool,
    auto_apply: Option<bool>,
    #[serde(default)]
    target_addrs: Option<Vec<String>>,
    #[serde(default)]
    replace_addrs: Option<Vec<String>>,
    #[serde(default)]
    variables: Option<Vec<RunVariable>>,
    /// Read by HCP to pick a Terraform version for a plan-only run; the agent's binary decides.
    #[serde(default)]
    #[allow(dead_code)]
    terraform_version: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    allow_empty_apply: Option<bool>,
}

#[derive(Deserialize)]
struct RunVariable {
    key: String,
    value: String,
}

async fn create_run(State(state): State<AppState>, principal: Principal, body: JsonApiBody) -> Result<Document> {
    let incoming = body.resource::<RunAttrs>(&["runs"])?;
    let workspace = incoming
        .to_one("workspace", "workspaces")?
        .flatten()
        .ok_or_else(|| ApiError::invalid("/data/relationships/workspace", "A run needs its workspace."))?;
    let cv = incoming.to_one("configuration-version", "configuration-versions")?.flatten();
    let attrs = incoming.attributes;
    let new = NewRun {
        workspace_id: workspace.id,
        configuration_version_id: cv.map(|cv| cv.id),
        message: attrs.message,
        is_destroy: attrs.is_destroy,
        refresh: attrs.refresh,
        refresh_only: attrs.refresh_only,
        plan_only: attrs.plan_only,
        auto_apply: attrs.auto_apply,
        target_addrs: attrs.target_addrs.unwrap_or_default(),
        replace_addrs: attrs.replace_addrs.unwrap_or_default(),
        variables: attrs.variables.unwrap_or_default().into_iter().map(|v| (v.key, v.value)).collect(),
    };
    let seen = runs::create(&state, &principal, new).await?;
    Ok(Document::one(render::run(&seen.run, &seen.may)).created())
}

/// The plan and apply a read includes (go-tfe asks for them by name).
fn with_included(document: Document, state: &AppState, base: &str, run: &Run, included: &[&str]) -> Document {
    let resources: Vec<Resource> = included
        .iter()
        .filter_map(|name| match *name {
            "plan" => Some(phase_resource(state, base, run, Phase::Plan)),
            "apply" => Some(phase_resource(state, base, run, Phase::Apply)),
            _ => None,
        })
        .collect();
    if resources.is_empty() {
        document
    } else {
        document.included(resources)
    }
}

fn phase_resource(state: &AppState, base: &str, run: &Run, phase: Phase) -> Resource {
    let lifetime = state.config.log_link_lifetime;
    let url = state.links.as_ref().map(|signer| job_files::log_url(signer, lifetime, base, run, phase));
    render::phase(run, phase, url)
}

/// What a run read may include: its plan and apply, and the relationships go-tfe names, which
/// are served as linkage alone.
const RUN_INCLUSIONS: &[&str] = &[
    "plan",
    "apply",
    "workspace",
    "configuration_version",
    "created_by",
    "cost_estimate",
    "run_events",
    "task_stages",
];

async fn show_run(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    params: QueryParams,
    Path(id): Path<String>,
) -> Result<Document> {
    let included = params.inclusions(RUN_INCLUSIONS)?;
    let seen = runs::get(&state, &principal, &id).await?;
    Ok(with_included(Document::one(render::run(&seen.run, &seen.may)), &state, &base, &seen.run, &included))
}

async fn list_runs(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    let included = listing.params.inclusions(RUN_INCLUSIONS)?;
    let (list, total, may) = runs::list(state.store.as_ref(), &principal, &id, &listing.page).await?;
    let resources = list.iter().map(|run| render::run(run, &may)).collect();
    let mut document = Document::page(resources, &listing.envelope(total));
    for run in &list {
        document = with_included(document, &state, &base, run, &included);
    }
    Ok(document)
}

/// `POST /runs/:id/actions/:action`: HCP answers 202 with no body.
async fn act(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, action)): Path<(String, String)>,
) -> Result<StatusCode> {
    let action = match action.as_str() {
        "apply" => Action::Apply,
        "discard" => Action::Discard,
        "cancel" => Action::Cancel,
        "force-cancel" => Action::ForceCancel,
        _ => return Err(ApiError::not_found()),
    };
    runs::act(&state, &principal, &id, action).await?;
    Ok(StatusCode::ACCEPTED)
}

/// A run's events: Hangar records none beyond its status timestamps.
async fn run_events(
    State(state): State<AppState>,
    principal: Principal,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    runs::get(&state, &principal, &id).await?;
    Ok(Document::page(Vec::new(), &listing.envelope(0)))
}

async fn show_phase(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
) -> Result<Document> {
    let (seen, phase) = runs::phase(&state, &principal, &id).await?;
    Ok(Document::one(phase_resource(&state, &base, &seen.run, phase)))
}

#[derive(Deserialize)]
struct LogWindow {
    offset: Option<u64>,
    limit: Option<usize>,
}

/// The most bytes one read of a log link serves.
const MAX_LOG_READ: usize = 1024 * 1024;

/// A log link: the signature in its path is the whole authorization (the CLI sends no token).
async fn read_log(
    State(state): State<AppState>,
    Path((id, expires, signature)): Path<(String, String, String)>,
    window: std::result::Result<Query<LogWindow>, QueryRejection>,
) -> Result<Response> {
    let Ok(expires) = expires.parse::<i64>() else {
        return Err(ApiError::forbidden("The link's signature is invalid or has expired."));
    };
    let Query(window) =
        window.map_err(|_| ApiError::invalid_parameter("offset", "offset and limit are byte counts"))?;
    let signed = Signed { expires, signature };
    let limit = window.limit.unwrap_or(MAX_LOG_READ).min(MAX_LOG_READ);
    let bytes = job_files::read(&state, &id, &signed, window.offset.unwrap_or(0), limit).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response())
}

async fn organization_queue(
    State(state): State<AppState>,
    principal: Principal,
    listing: Listing,
    Path(org): Path<String>,
) -> Result<Document> {
    let (queue, total) = runs::organization_queue(state.store.as_ref(), &principal, &org, &listing.page).await?;
    let resources = queue.iter().map(|(run, may)| render::run(run, may)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn capacity(State(state): State<AppState>, principal: Principal, Path(org): Path<String>) -> Result<Document> {
    let (name, pending, running) = runs::capacity(state.store.as_ref(), &principal, &org).await?;
    Ok(Document::one(render::capacity(&name, pending, running)))
}
