//! `creds/:name` and `sts/:name`: credentials for a role, with the request's parameters from the
//! query (GET) or the body (POST, PUT).

use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::api::QueryParams;
use crate::broker::credentials::{self, Endpoint};
use crate::broker::error::{BrokerError, Result};
use crate::broker::http::VaultResponse;
use crate::broker::request::{EngineRequest, Operation};

pub async fn creds(request: &EngineRequest<'_>) -> Result<Response> {
    generate(request, Endpoint::Creds).await
}

pub async fn sts(request: &EngineRequest<'_>) -> Result<Response> {
    generate(request, Endpoint::Sts).await
}

async fn generate(request: &EngineRequest<'_>, endpoint: Endpoint) -> Result<Response> {
    let (state, mount) = (request.state, &request.mount);
    // The role before the parameters: a missing role is what a bad request hears first.
    let role = credentials::role(state.store.as_ref(), mount, request.name).await?;
    let params = parameters(request)?;
    let issued = credentials::issue(state, mount, &role, endpoint, &params, &request.caller.0).await?;
    Ok(VaultResponse::leased(issued.data, &issued.lease_id, issued.lease_duration, issued.renewable).into_response())
}

/// The generate parameters, from the query (a read) or the body (an update).
fn parameters(request: &EngineRequest<'_>) -> Result<Map<String, Value>> {
    if request.operation != Operation::Read {
        return request.object();
    }
    let params =
        QueryParams::parse(request.query.as_deref().unwrap_or("")).map_err(|e| BrokerError::invalid(e.detail))?;
    let mut map = Map::new();
    for name in ["role_arn", "role_session_name", "ttl", "mfa_code"] {
        if let Some(value) = params.non_empty(name) {
            map.insert(name.into(), Value::String(value.to_owned()));
        }
    }
    Ok(map)
}
