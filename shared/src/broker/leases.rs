//! Leases of iam_user credentials: `<mount>/creds/<role>/<random>`, renewable up to the mount's
//! `lease_max`. Revoking one, or letting it expire, deletes the IAM user with everything
//! attached; a user already gone counts as revoked. An expiry index lets the scheduled job find
//! what is due without reading anything else.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{post, put};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::{BrokerError, Result};
use super::http::{Caller, VaultBody, VaultResponse};
use super::mounts::{self, Mount};
use super::{config, duration, policies};
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore, UpdateOp};

const EXPIRY_PARTITION: &str = keys::LEASE_EXPIRY_SCHEDULE;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    pub mount_uuid: String,
    pub role: String,
    /// The IAM user the credentials belong to.
    pub user: String,
    pub issued_at: i64,
    pub expire_at: i64,
    pub last_renewal: Option<i64>,
}

fn item(lease: &Lease) -> Result<Item> {
    let item = Item::from_value(keys::mount_lease(&lease.mount_uuid, &lease.id), lease)?;
    Ok(item.with_index(Index::Gsi1, EXPIRY_PARTITION, schedule::sort_key(lease.expire_at, &lease.id)))
}

/// Records a lease for a created IAM user; returns its id.
pub async fn create(store: &dyn ItemStore, mount: &Mount, role: &str, user: &str, ttl: Duration) -> Result<String> {
    let now = chrono::Utc::now().timestamp();
    let lease = Lease {
        id: format!("{}/creds/{role}/{}", mount.path, crate::ids::random_token(24)),
        mount_uuid: mount.uuid.clone(),
        role: role.to_owned(),
        user: user.to_owned(),
        issued_at: now,
        expire_at: now + ttl.as_secs() as i64,
        last_renewal: None,
    };
    store.put(item(&lease)?, Condition::NotExists).await?;
    Ok(lease.id)
}

/// The lease with this id, and its mount.
async fn find(state: &AppState, lease_id: &str) -> Result<Option<(Mount, Lease)>> {
    let Some((mount, _)) = mounts::route(state.store.as_ref(), lease_id.trim_matches('/')).await? else {
        return Ok(None);
    };
    let Some(found) = state.store.get(&keys::mount_lease(&mount.uuid, lease_id)).await? else { return Ok(None) };
    Ok(Some((mount, found.parse()?)))
}

/// Deletes the lease's IAM user and the lease.
pub async fn revoke(state: &AppState, mount: &Mount, lease: &Lease) -> Result<()> {
    let (cloud, _) = config::mount_cloud(state, mount).await?;
    cloud.delete_user(&lease.user).await?;
    state.store.delete(&keys::mount_lease(&mount.uuid, &lease.id), Condition::Always).await?;
    Ok(())
}

/// Revokes every lease of a mount (before it is unmounted).
pub async fn revoke_all(state: &AppState, mount: &Mount) -> Result<()> {
    let items = crate::store::query_all(state.store.as_ref(), keys::mount_leases(&mount.uuid)).await?;
    for found in items {
        revoke(state, mount, &found.parse()?).await?;
    }
    Ok(())
}

/// Unmounts a path: revokes its leases, then removes its configuration, roles and leases.
pub async fn unmount(state: &AppState, path: &str) -> Result<()> {
    let path = mounts::normalize(path)?;
    if let Some(mount) = mounts::all(state.store.as_ref()).await?.into_iter().find(|m| m.path == path) {
        revoke_all(state, &mount).await?;
        mounts::delete(state.store.as_ref(), &path).await?;
    }
    Ok(())
}

/// Revokes up to `limit` leases whose time has come; returns how many.
pub async fn revoke_expired(state: &AppState, limit: usize, now: i64) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), EXPIRY_PARTITION, now, limit).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mounts = mounts::all(state.store.as_ref()).await?;
    let mut revoked = 0;
    for found in due {
        let lease: Lease = found.parse()?;
        match mounts.iter().find(|m| m.uuid == lease.mount_uuid) {
            Some(mount) => match revoke(state, mount, &lease).await {
                Ok(()) => revoked += 1,
                Err(e) => tracing::warn!(lease = %lease.id, error = %e, "expired lease not revoked; retried next run"),
            },
            None => {
                state.store.delete(&found.key, Condition::Always).await?;
            }
        }
    }
    Ok(revoked)
}

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sys/leases/lookup", put(lookup).post(lookup))
        .route("/sys/leases/renew", put(renew).post(renew))
        .route("/sys/leases/revoke", put(revoke_handler).post(revoke_handler))
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
    let (_, lease) = find(&state, &id).await?.ok_or_else(|| BrokerError::invalid("invalid lease"))?;
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
    let id = body
        .get("lease_id")
        .and_then(Value::as_str)
        .ok_or_else(|| BrokerError::invalid("lease_id is required"))?
        .to_owned();
    let (mount, mut lease) =
        find(&state, &id).await?.ok_or_else(|| BrokerError::invalid("lease not found or lease is not renewable"))?;
    let limits = config::lease(state.store.as_ref(), &mount).await?;
    let increment = match body.get("increment").filter(|v| !v.is_null()) {
        Some(value) => duration::parse(value).map_err(|e| BrokerError::invalid(format!("increment: {e}")))?.as_secs(),
        None => limits.lease,
    };
    let now = chrono::Utc::now().timestamp();
    let ceiling = lease.issued_at + limits.lease_max as i64;
    lease.expire_at = (now + increment as i64).min(ceiling);
    lease.last_renewal = Some(now);
    let previous = keys::mount_lease(&mount.uuid, &lease.id);
    let ops = vec![
        UpdateOp::set("expire_at", lease.expire_at),
        UpdateOp::set("last_renewal", now),
        schedule::reschedule(lease.expire_at, &lease.id),
    ];
    state.store.update(&previous, ops, Condition::Exists).await?;
    Ok(VaultResponse::leased(Value::Null, &lease.id, (lease.expire_at - now).max(0) as u64, true))
}

async fn revoke_id(state: &AppState, caller: &Caller, id: &str) -> Result<StatusCode> {
    policies::require(state.store.as_ref(), &caller.0, "sys/leases/revoke", "update").await?;
    if let Some((mount, lease)) = find(state, id).await? {
        revoke(state, &mount, &lease).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke_handler(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<StatusCode> {
    let id = lease_id(body)?;
    revoke_id(&state, &caller, &id).await
}

async fn revoke_by_path(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<StatusCode> {
    revoke_id(&state, &caller, &id).await
}
