//! `sys/leases/*` (and the older `sys/renew`): Vault's lease endpoints over the broker's leases.
//!
//! As in Vault, `revoke-prefix`, `revoke-force` and the `LIST` of `lookup/<prefix>` are
//! root-protected: besides the operation's capability on the path, the caller's policy must
//! grant `sudo` there (the root token always may).

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use serde_json::{json, Value};

use super::error::{BrokerError, Result};
use super::http::{is_list, Caller, VaultBody, VaultPath, VaultResponse};
use super::leases::Revocation;
use super::{duration, http, leases, policies};
use crate::state::AppState;
use crate::store::ItemStore;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sys/leases/lookup", get(list_all).put(lookup).post(lookup))
        .route("/sys/leases/lookup/{*prefix}", get(list_prefix))
        .route("/sys/leases/renew", put(renew).post(renew))
        .route("/sys/leases/revoke", put(revoke).post(revoke))
        .route("/sys/leases/revoke/{*lease_id}", put(revoke_by_path))
        .route("/sys/leases/revoke-prefix/{*prefix}", put(revoke_prefix).post(revoke_prefix))
        .route("/sys/leases/revoke-force/{*prefix}", put(revoke_force).post(revoke_force))
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
    let (_, lease) =
        leases::find(state.store.as_ref(), &id).await?.ok_or_else(|| BrokerError::invalid("invalid lease"))?;
    let now = chrono::Utc::now().timestamp();
    Ok(VaultResponse::data(json!({
        "id": lease.id,
        "issue_time": rfc3339(lease.issued_at),
        "expire_time": rfc3339(lease.expire_at),
        "last_renewal": lease.last_renewal.and_then(rfc3339),
        "renewable": lease.renewable(),
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
    let lease = leases::renew(state.store.as_ref(), id, increment).await?;
    let ttl = (lease.expire_at - chrono::Utc::now().timestamp()).max(0) as u64;
    Ok(VaultResponse::leased(Value::Null, &lease.id, ttl, true))
}

/// Revokes lease `id`, the caller's policy checked on the path the request came by: Vault checks
/// `sys/leases/revoke/<lease_id>` as it is, so a deny on a lease's path holds.
async fn revoke_id(state: &AppState, caller: &Caller, checked: &str, id: &str) -> Result<StatusCode> {
    policies::require(state.store.as_ref(), &caller.0, checked, "update").await?;
    leases::revoke_by_id(state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    body: VaultBody,
) -> Result<StatusCode> {
    let id = lease_id(body)?;
    revoke_id(&state, &caller, &checked, &id).await
}

async fn revoke_by_path(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    revoke_id(&state, &caller, &checked, &id).await
}

/// `sys/leases/revoke-prefix/<prefix>`: every lease under the prefix, or the one it names.
/// Synchronous unless the body says `sync=false` (what the CLI's `lease revoke -prefix` sends
/// without `-sync`), which Vault answers 202 as it queues the work; so is a revocation that left
/// leases to the scheduled job.
async fn revoke_prefix(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(prefix): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    policies::require_sudo(state.store.as_ref(), &caller.0, &checked, "update").await?;
    let body = body.object()?;
    let sync = http::flag(&body, "sync")?.unwrap_or(true);
    let how = if sync { Revocation::Sync } else { Revocation::Queued };
    let done = leases::revoke_prefix(&state, &prefix, how).await?;
    Ok(if sync && done.queued == 0 { StatusCode::NO_CONTENT } else { StatusCode::ACCEPTED })
}

/// `sys/leases/revoke-force/<prefix>`: as `revoke-prefix`, but a lease whose IAM user cannot be
/// deleted is removed all the same.
async fn revoke_force(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(prefix): Path<String>,
) -> Result<StatusCode> {
    policies::require_sudo(state.store.as_ref(), &caller.0, &checked, "update").await?;
    let done = leases::revoke_prefix(&state, &prefix, Revocation::Force).await?;
    Ok(if done.queued == 0 { StatusCode::NO_CONTENT } else { StatusCode::ACCEPTED })
}

/// `LIST sys/leases/lookup/<prefix>`: the next level of lease ids under the prefix.
async fn list_prefix(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    RawQuery(query): RawQuery,
    Path(prefix): Path<String>,
) -> Result<Response> {
    list(state.store.as_ref(), &caller, &checked, query.as_deref(), &prefix).await
}

/// `LIST sys/leases/lookup/`: the first level of every lease id (the mounts holding leases).
async fn list_all(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    list(state.store.as_ref(), &caller, &checked, query.as_deref(), "").await
}

/// A LIST is checked on the path with a trailing slash, as Vault checks one; a GET that is not a
/// LIST has no operation here.
async fn list(
    store: &dyn ItemStore,
    caller: &Caller,
    checked: &str,
    query: Option<&str>,
    prefix: &str,
) -> Result<Response> {
    if !is_list(query) {
        return Err(BrokerError::MethodNotAllowed);
    }
    policies::require_sudo(store, &caller.0, &format!("{checked}/"), "list").await?;
    Ok(VaultResponse::keys(leases::list_prefix(store, prefix).await?)?.into_response())
}
