//! Leases of iam_user credentials: `<mount>/creds/<role>/<random>`, renewable up to the mount's
//! `lease_max`. Revoking one, or letting it expire, deletes the IAM user with everything
//! attached; a user already gone counts as revoked. An expiry index lets the scheduled job find
//! what is due without reading anything else.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config;
use super::error::Result;
use super::mounts::{self, Mount};
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
pub async fn find(state: &AppState, lease_id: &str) -> Result<Option<(Mount, Lease)>> {
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

/// Extends a lease by `increment` (the mount's default lease when `None`), never past its
/// issue time plus the mount's `lease_max`. `None` when no such lease exists.
pub async fn renew(state: &AppState, id: &str, increment: Option<Duration>) -> Result<Option<Lease>> {
    let Some((mount, mut lease)) = find(state, id).await? else { return Ok(None) };
    let limits = config::lease(state.store.as_ref(), &mount).await?;
    let increment = increment.map_or(limits.lease, |increment| increment.as_secs());
    let now = chrono::Utc::now().timestamp();
    let ceiling = lease.issued_at + limits.lease_max as i64;
    lease.expire_at = (now + increment as i64).min(ceiling);
    lease.last_renewal = Some(now);
    let ops = vec![
        UpdateOp::set("expire_at", lease.expire_at),
        UpdateOp::set("last_renewal", now),
        schedule::reschedule(lease.expire_at, &lease.id),
    ];
    state.store.update(&keys::mount_lease(&mount.uuid, &lease.id), ops, Condition::Exists).await?;
    Ok(Some(lease))
}

/// Revokes the lease with this id, if there is one.
pub async fn revoke_by_id(state: &AppState, id: &str) -> Result<()> {
    if let Some((mount, lease)) = find(state, id).await? {
        revoke(state, &mount, &lease).await?;
    }
    Ok(())
}
