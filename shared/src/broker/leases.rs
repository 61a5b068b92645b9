//! Leases of iam_user credentials: `<mount>/creds/<role>/<random>`, renewable up to the mount's
//! `lease_max`. Revoking one, or letting it expire, deletes the IAM user with everything
//! attached; a user already gone counts as revoked. An expiry index lets the scheduled job find
//! what is due without reading anything else.
//!
//! A lease belongs to the token it was issued to, as in Vault: it is listed under that token's
//! accessor (so revoking the token revokes it) and never outlives the token, renewals included.

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::{self, MountClouds};
use super::error::{BrokerError, Result};
use super::mounts::{self, Mount};
use crate::aws::SharedCloud;
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore, UpdateOp, Write};

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
    /// The accessor of the token the lease was issued to; `None` for a lease issued before
    /// leases belonged to tokens.
    #[serde(default)]
    pub token_accessor: Option<String>,
    /// When that token expires (`None`: never): the lease's expiry never passes it.
    #[serde(default)]
    pub token_expire_at: Option<i64>,
}

/// The token a lease is issued to.
pub struct Holder<'a> {
    pub accessor: &'a str,
    pub expire_at: Option<i64>,
    /// The check that the token still stands, written with the lease.
    pub standing: Write,
}

fn item(lease: &Lease) -> Result<Item> {
    let mut item = Item::from_value(keys::mount_lease(&lease.mount_uuid, &lease.id), lease)?;
    if let Some(accessor) = &lease.token_accessor {
        let (index, pk, sk) = keys::lease_held(accessor, &lease.id);
        item = item.with_index(index, pk, sk);
    }
    Ok(item.with_index(Index::Gsi1, EXPIRY_PARTITION, schedule::sort_key(lease.expire_at, &lease.id)))
}

/// Records a lease for a created IAM user, issued to `holder` for `ttl` or until the holder
/// expires, whichever comes first. Refused (403) when the holder is being revoked meanwhile.
pub async fn create(
    store: &dyn ItemStore,
    mount: &Mount,
    role: &str,
    user: &str,
    ttl: Duration,
    holder: Holder<'_>,
) -> Result<Lease> {
    let now = chrono::Utc::now().timestamp();
    let wanted = now + ttl.as_secs() as i64;
    let lease = Lease {
        id: format!("{}/creds/{role}/{}", mount.path, crate::ids::random_token(24)),
        mount_uuid: mount.uuid.clone(),
        role: role.to_owned(),
        user: user.to_owned(),
        issued_at: now,
        expire_at: holder.expire_at.map_or(wanted, |token| wanted.min(token)),
        last_renewal: None,
        token_accessor: Some(holder.accessor.to_owned()),
        token_expire_at: holder.expire_at,
    };
    let writes = vec![Write::Put { item: item(&lease)?, condition: Condition::NotExists }, holder.standing];
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(1) => Err(BrokerError::PermissionDenied),
        other => other.map_err(BrokerError::from),
    }?;
    Ok(lease)
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
    revoke_with(state, &cloud, mount, lease).await
}

async fn revoke_with(state: &AppState, cloud: &SharedCloud, mount: &Mount, lease: &Lease) -> Result<()> {
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
    let ceiling = lease.token_expire_at.map_or(ceiling, |token| ceiling.min(token));
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

/// Revokes leases by the tokens that hold them, for one revocation (a call, or a run of the
/// job): the mounts are read once, each mount's AWS client is built once, and a mount whose IAM
/// failed is not tried again (its leases wait for the next run, bounded in time).
#[derive(Default)]
pub struct Revoker {
    mounts: Option<Vec<Mount>>,
    clouds: MountClouds,
    failed: HashSet<String>,
    /// Leases revoked so far.
    pub revoked: usize,
    /// The first failure, which the caller hears of.
    pub failure: Option<BrokerError>,
}

impl Revoker {
    async fn mount(&mut self, state: &AppState, uuid: &str) -> Result<Option<Mount>> {
        if self.mounts.is_none() {
            self.mounts = Some(mounts::all(state.store.as_ref()).await?);
        }
        Ok(self.mounts.iter().flatten().find(|m| m.uuid == uuid).cloned())
    }

    /// Revokes the leases the token with this accessor holds, at most `*budget` of them (each
    /// takes several IAM calls); true once it holds none.
    pub async fn revoke_held(&mut self, state: &AppState, accessor: &str, budget: &mut usize) -> Result<bool> {
        const PAGE: usize = 25;
        let store = state.store.as_ref();
        let mut query = keys::leases_held(accessor).limit(PAGE);
        loop {
            let page = store.query(query.clone()).await?;
            for found in page.items {
                let lease: Lease = found.parse()?;
                let Some(mount) = self.mount(state, &lease.mount_uuid).await? else {
                    // Its mount is gone, and its users were revoked with it.
                    store.delete(&found.key, Condition::Always).await?;
                    continue;
                };
                if *budget == 0 || self.failed.contains(&mount.uuid) {
                    return Ok(false);
                }
                *budget -= 1;
                let revoked = match self.clouds.get(state, &mount).await {
                    Ok(cloud) => revoke_with(state, &cloud, &mount, &lease).await,
                    Err(e) => Err(e),
                };
                match revoked {
                    Ok(()) => self.revoked += 1,
                    Err(e) => {
                        let id = &lease.id;
                        tracing::warn!(lease = %id, error = %e, "lease not revoked with its token; the job retries it");
                        self.failed.insert(mount.uuid.clone());
                        self.failure.get_or_insert(e);
                        return Ok(false);
                    }
                }
            }
            match page.next {
                Some(next) => query.cursor = Some(next),
                None => return Ok(true),
            }
        }
    }
}
