//! The agent-facing API (function `agent-gateway`), authenticated only by an agent token:
//!
//! - `POST /api/agent/register` `{"name": "runner-1"}` → 201 with the `agents` resource (`idle`)
//! - `PUT /api/agent/agents/:id/status` `{"status": "idle" | "busy" | "exited" | "errored"}` →
//!   200 with the agent; also the heartbeat that keeps a live agent from becoming `unknown`.
//!
//! Hangar's own protocol: HCP Terraform's `tfc-agent` speaks an undocumented one. Bodies are
//! plain JSON; answers are JSON:API documents and errors, axum's refusals (400, 413, 415)
//! included, which `app::finish` renders through `api::refusal`. A name is checked by
//! `agents::check_name`; only the token that registered an agent may report for it (any other
//! gets 404, as for a missing agent).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::routing::{post, put};
use axum::{Json, Router};
use serde::Deserialize;

use super::agents;
use super::render;
use crate::api::{ApiError, Document};
use crate::auth::AgentCaller;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/agent/register", post(register)).route("/api/agent/agents/{id}/status", put(report))
}

/// The caller's address: API Gateway's `requestContext.http.sourceIp` on Lambda, the TCP peer
/// under dev-server.
pub struct SourceIp(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for SourceIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(lambda_http::request::RequestContext::ApiGatewayV2(context)) = parts.extensions.get() {
            return Ok(SourceIp(context.http.source_ip.clone()));
        }
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip().to_string());
        Ok(SourceIp(peer))
    }
}

#[derive(Deserialize, Default)]
struct Registration {
    name: Option<String>,
}

fn body<T: for<'de> Deserialize<'de>>(raw: Option<Json<serde_json::Value>>) -> Result<Option<T>, ApiError> {
    raw.map(|Json(value)| {
        serde_json::from_value(value)
            .map_err(|e| ApiError::invalid("/", format!("The request body is not understood: {e}")))
    })
    .transpose()
}

async fn register(
    State(state): State<AppState>,
    AgentCaller(grant): AgentCaller,
    SourceIp(ip): SourceIp,
    raw: Option<Json<serde_json::Value>>,
) -> Result<Document, ApiError> {
    let registration: Registration = body(raw)?.unwrap_or_default();
    let agent = agents::register(&state, &grant, registration.name, ip).await?;
    Ok(Document::one(render::agent(&agent, &state)).created().meta("report-in", state.config.agent_report_in().into()))
}

async fn report(
    State(state): State<AppState>,
    AgentCaller(grant): AgentCaller,
    Path(id): Path<String>,
    raw: Option<Json<serde_json::Value>>,
) -> Result<Document, ApiError> {
    let status = raw.as_ref().and_then(|Json(body)| body.get("status")).and_then(|status| status.as_str());
    let status =
        status.ok_or_else(|| ApiError::invalid("/status", "status is required: idle, busy, exited or errored"))?;
    let agent = agents::report(&state, &grant, &id, status).await?;
    // When to report next, well inside the ping timeout whatever it is set to.
    Ok(Document::one(render::agent(&agent, &state)).meta("report-in", state.config.agent_report_in().into()))
}
