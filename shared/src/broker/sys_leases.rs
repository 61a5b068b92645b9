//! `sys/leases/*` (and the older `sys/renew`): Vault's lease endpoints over the broker's leases.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{post, put};
use axum::Router;
use serde_json::{json, Value};

use super::error::{BrokerError, Result};
use super::http::{Caller, VaultBody, VaultResponse};
use super::{duration, leases, policies};
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sys/leases/lookup", put(lookup).post(lookup))
        .route("/sys/leases/renew", put(renew).post(renew))
        .route("/sys/leases/revoke", put(revoke).post(revoke))
        .route("/sys/leases/revoke/{*lease_id}", put(revoke_by_path))
        .route("/sys/renew", post(renew).put(renew))
}

fn lease_id(body: VaultBody) -> Result<String> {
    let body = body.object()?;
    body.get("lease_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| BrokerError::invalid("lease_id is required"))
}

fn rfc3339(at: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(at, 0).map(|at| at.to_rfc3339())
}

async fn lookup(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<VaultResponse> {
    policies::require(state.store.as_ref(), &caller.0, "sys/leases/lookup", "update").await?;
    let id = lease_id(body)?;
    let (_, lease) = leases::find(&state, &id).await?.ok_or_else(|| BrokerError::invalid("invalid lease"))?;
    let now = chrono::Utc::now().timestamp();
    Ok(VaultResponse::data(json!({
        "id": lease.id,
        "issue_time": rfc3339(lease.issued_at),
        "expire_time": rfc3339(lease.expire_at),
        "last_renewal": lease.last_renewal.and_then(rfc3339),
        "renewable": true,
        "ttl": (lease.expire_at - now).max(0),
    })))
}

async fn renew(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<VaultResponse> {
    policies::require(state.store.as_ref(), &caller.0, "sys/leases/renew", "update").await?;
    let body = body.object()?;
    let id =
        body.get("lease_id").and_then(Value::as_str).ok_or_else(|| BrokerError::invalid("lease_id is required"))?;
    let increment = match body.get("increment").filter(|v| !v.is_null()) {
        Some(value) => Some(duration::parse(value).map_err(|e| BrokerError::invalid(format!("increment: {e}")))?),
        None => None,
    };
    let lease = leases::renew(&state, id, increment)
        .await?
        .ok_or_else(|| BrokerError::invalid("lease not found or lease is not renewable"))?;
    let ttl = (lease.expire_at - chrono::Utc::now().timestamp()).max(0) as u64;
    Ok(VaultResponse::leased(Value::Null, &lease.id, ttl, true))
}

async fn revoke_id(state: &AppState, caller: &Caller, id: &str) -> Result<StatusCode> {
    policies::require(state.store.as_ref(), &caller.0, "sys/leases/revoke", "update").await?;
    leases::revoke_by_id(state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<StatusCode> {
    let id = lease_id(body)?;
    revoke_id(&state, &caller, &id).await
}

async fn revoke_by_path(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode> {
    revoke_id(&state, &caller, &id).await
}
