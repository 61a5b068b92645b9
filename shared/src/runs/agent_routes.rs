//! The job API agents speak (function `agent-gateway`, beside registration and status reports):
//!
//! - `POST /api/agent/jobs` `{"agent": "agent-…"}` (agent token) → 201 with a job (its run, its
//!   phase, its job token, when to report) or 204 when none waits;
//! - with the job token: `GET /api/agent/job` (what to run: the run, the workspace, its variables),
//!   `GET /api/agent/job/configuration` (the archive), `POST /api/agent/job/heartbeat` (renews the
//!   lease; says whether to cancel), `PUT /api/agent/job/log?offset=N` (appends to the log),
//!   `PUT`/`GET /api/agent/job/plan` (the saved plan), `POST /api/agent/job/finish` (the outcome).
//!
//! Hangar's own protocol, as the gateway's: plain JSON bodies and answers, JSON:API errors.

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::configurations;
use super::job_files;
use super::queue::{self, JobStatus, Outcome};
use super::runs;
use crate::api::ApiError;
use crate::auth::{AgentCaller, JobCaller};
use crate::errors::Kind;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/agent/jobs", post(claim))
        .route("/api/agent/job", get(spec))
        .route("/api/agent/job/configuration", get(configuration))
        .route("/api/agent/job/heartbeat", post(heartbeat))
        .route("/api/agent/job/log", put(append_log))
        .route("/api/agent/job/plan", put(put_plan).get(get_plan))
        .route("/api/agent/job/finish", post(finish))
}

fn parse<T: for<'de> Deserialize<'de>>(raw: Option<Json<Value>>) -> Result<T> {
    let value = raw.map(|Json(value)| value).unwrap_or(Value::Null);
    serde_json::from_value(value)
        .map_err(|e| ApiError::invalid("/", format!("The request body is not understood: {e}")))
}

#[derive(Deserialize)]
struct ClaimRequest {
    agent: String,
}

async fn claim(
    State(state): State<AppState>,
    AgentCaller(grant): AgentCaller,
    raw: Option<Json<Value>>,
) -> Result<Response> {
    let request: ClaimRequest = parse(raw)?;
    let queue = grant.pool_id.clone();
    match queue::claim(&state, &queue, &grant, &request.agent).await? {
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(claimed) => {
            let body = json!({
                "run": claimed.run.id,
                "phase": claimed.phase.as_str(),
                "token": claimed.token,
                "report-in": claimed.report_in,
            });
            Ok((StatusCode::CREATED, Json(body)).into_response())
        }
    }
}

async fn spec(State(state): State<AppState>, caller: JobCaller) -> Result<Json<Value>> {
    let spec = runs::job_spec(&state, &caller.principal, &caller.grant).await?;
    let run = &spec.run;
    let operation = &run.operation;
    Ok(Json(json!({
        "run": run.id,
        "phase": spec.phase.as_str(),
        "organization": spec.org_name,
        "workspace": {
            "id": spec.workspace.id,
            "name": spec.workspace.name,
            "working-directory": spec.workspace.settings.working_directory,
            "terraform-version": spec.workspace.settings.terraform_version,
        },
        "operation": {
            "is-destroy": operation.is_destroy,
            "refresh": operation.refresh,
            "refresh-only": operation.refresh_only,
            "target-addrs": operation.target_addrs,
            "replace-addrs": operation.replace_addrs,
            "variables": operation.variables.iter().map(|(key, value)| json!({"key": key, "value": value})).collect::<Vec<_>>(),
        },
        "variables": spec.variables,
        "credentials": spec.credentials,
        "report-in": queue::report_in(&state),
    })))
}

async fn configuration(State(state): State<AppState>, caller: JobCaller) -> Result<Response> {
    let archive = configurations::archive(&state, &caller.grant).await?;
    Ok(([(header::CONTENT_TYPE, "application/gzip")], archive).into_response())
}

async fn heartbeat(State(state): State<AppState>, caller: JobCaller) -> Result<Json<queue::Beat>> {
    Ok(Json(queue::renew(&state, &caller.grant).await?))
}

#[derive(Deserialize)]
struct LogOffset {
    offset: u64,
}

async fn append_log(
    State(state): State<AppState>,
    caller: JobCaller,
    Query(at): Query<LogOffset>,
    body: Body,
) -> Result<StatusCode> {
    let body = read(body, job_files::MAX_CHUNK_BYTES).await?;
    job_files::append(&state, &caller.grant, at.offset, &body).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn read(body: Body, limit: usize) -> Result<bytes::Bytes> {
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::new(Kind::TooLarge, "payload too large", format!("The body is over {limit} bytes.")))
}

async fn put_plan(State(state): State<AppState>, caller: JobCaller, body: Body) -> Result<StatusCode> {
    let body = read(body, job_files::MAX_PLAN_FILE_BYTES).await?;
    job_files::put_plan(&state, &caller.grant, body).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn get_plan(State(state): State<AppState>, caller: JobCaller) -> Result<Response> {
    let plan = job_files::plan_file(&state, &caller.grant).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], plan).into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Finish {
    status: String,
    #[serde(default)]
    has_changes: bool,
    #[serde(default)]
    resource_additions: u64,
    #[serde(default)]
    resource_changes: u64,
    #[serde(default)]
    resource_destructions: u64,
    #[serde(default)]
    error: Option<String>,
}

async fn finish(State(state): State<AppState>, caller: JobCaller, raw: Option<Json<Value>>) -> Result<Json<Value>> {
    let report: Finish = parse(raw)?;
    let status = match report.status.as_str() {
        "finished" => JobStatus::Finished,
        "errored" => JobStatus::Errored,
        "canceled" => JobStatus::Canceled,
        _ => return Err(ApiError::invalid("/status", "status must be finished, errored or canceled")),
    };
    let outcome = Outcome {
        status,
        has_changes: report.has_changes,
        additions: report.resource_additions,
        changes: report.resource_changes,
        destructions: report.resource_destructions,
        error: report.error,
    };
    let run = queue::finish(&state, &caller.grant, outcome).await?;
    Ok(Json(json!({ "run": run.id, "status": run.status.as_str() })))
}
