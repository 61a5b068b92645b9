//! Leases of iam_user credentials: `<mount>/creds/<role>/<random>`, renewable up to the mount's
//! `lease_max`. Revoking one, or letting it expire, deletes the IAM user with everything
//! attached; a user already gone counts as revoked. An expiry index lets the scheduled job find
//! what is due without reading anything else.
//!
//! A lease belongs to the token it was issued to, as in Vault: it is listed under that token's
//! accessor (so revoking the token revokes it) and never outlives the token, renewals included.
//!
//! STS credentials are leased too, as Vault leases them, though AWS cannot revoke them (they
//! expire): their lease is a record that lookup finds and revocation removes, never renewable.
//!
//! A lease id starts with its mount's path and is the key of its record within the mount's
//! partition, so the leases under a prefix (`sys/leases/revoke-prefix`, `LIST
//! sys/leases/lookup`) are one query of one mount, or of each mount below a prefix that spans
//! several (`teams` over `teams/payments` and `teams/ops`).

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::{self, MountClouds};
use super::error::{BrokerError, Result};
use super::intents;
use super::mounts::{self, Mount};
use crate::aws::{Deletion, SharedCloud};
use crate::state::AppState;
use crate::store::{keys, query_all, schedule, Condition, Index, Item, ItemStore, Transaction, UpdateOp, Write};

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
    /// STS credentials, which hold no IAM user (`user` is empty) and cannot be revoked in AWS:
    /// revoking the lease removes the record alone.
    #[serde(default)]
    pub sts: bool,
}

impl Lease {
    /// Only an IAM user's lease is renewed: STS credentials live as long as AWS granted.
    pub fn renewable(&self) -> bool {
        !self.sts
    }
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
/// expires, whichever comes first, together with `settled` (the removal of the user's
/// write-ahead record). Refused (403) when the holder is being revoked meanwhile, and refused
/// when the scheduled job has claimed the user to roll it back.
pub async fn create(
    store: &dyn ItemStore,
    mount: &Mount,
    role: &str,
    user: &str,
    ttl: Duration,
    holder: Holder<'_>,
    settled: Write,
) -> Result<Lease> {
    let id = format!("{}/creds/{role}/{}", mount.path, crate::ids::random_token(24));
    let lease = issued(mount, role, id, user, ttl, &holder, false);
    let mut transaction = Transaction::new();
    transaction.add(Write::Put { item: item(&lease)?, condition: Condition::NotExists });
    let holder_standing = transaction.add(holder.standing);
    let intent_unclaimed = transaction.add(settled);
    match transaction.commit(store).await {
        Err(e) if e.failed_on(holder_standing) => Err(BrokerError::PermissionDenied),
        Err(e) if e.failed_on(intent_unclaimed) => {
            Err(BrokerError::Failed(format!("IAM user {user} took too long to create and was rolled back; try again")))
        }
        other => other.map_err(BrokerError::from),
    }?;
    Ok(lease)
}

/// Records the lease of STS credentials under the id they were issued with (`<mount>/sts/<role>/…`
/// or `<mount>/creds/<role>/…`, after the request path), held by `holder` as any lease is; `ttl`
/// is the lifetime AWS granted. Refused (403) when the holder is being revoked meanwhile.
pub async fn create_sts(
    store: &dyn ItemStore,
    mount: &Mount,
    role: &str,
    lease_id: &str,
    ttl: Duration,
    holder: Holder<'_>,
) -> Result<Lease> {
    let lease = issued(mount, role, lease_id.to_owned(), "", ttl, &holder, true);
    let mut transaction = Transaction::new();
    transaction.add(Write::Put { item: item(&lease)?, condition: Condition::NotExists });
    let holder_standing = transaction.add(holder.standing);
    match transaction.commit(store).await {
        Err(e) if e.failed_on(holder_standing) => Err(BrokerError::PermissionDenied),
        other => other.map_err(BrokerError::from),
    }?;
    Ok(lease)
}

/// A new lease issued now to `holder`, for `ttl` or until the holder expires.
fn issued(mount: &Mount, role: &str, id: String, user: &str, ttl: Duration, holder: &Holder<'_>, sts: bool) -> Lease {
    let now = chrono::Utc::now().timestamp();
    let wanted = now + ttl.as_secs() as i64;
    Lease {
        id,
        mount_uuid: mount.uuid.clone(),
        role: role.to_owned(),
        user: user.to_owned(),
        issued_at: now,
        expire_at: holder.expire_at.map_or(wanted, |token| wanted.min(token)),
        last_renewal: None,
        token_accessor: Some(holder.accessor.to_owned()),
        token_expire_at: holder.expire_at,
        sts,
    }
}

/// The lease with this id, and its mount.
pub async fn find(store: &dyn ItemStore, lease_id: &str) -> Result<Option<(Mount, Lease)>> {
    let Some((mount, _)) = mounts::route(store, lease_id.trim_matches('/')).await? else {
        return Ok(None);
    };
    let Some(found) = store.get(&keys::mount_lease(&mount.uuid, lease_id)).await? else { return Ok(None) };
    Ok(Some((mount, found.parse()?)))
}

/// Deletes the lease's IAM user and the lease.
pub async fn revoke(state: &AppState, mount: &Mount, lease: &Lease) -> Result<()> {
    revoke_at(state, mount, lease, chrono::Utc::now().timestamp()).await
}

async fn revoke_at(state: &AppState, mount: &Mount, lease: &Lease, now: i64) -> Result<()> {
    revoke_in_run(state, &mut MountClouds::default(), mount, lease, now).await
}

/// [`revoke_at`] with the client of the mount that `clouds`, one run's, holds.
async fn revoke_in_run(
    state: &AppState,
    clouds: &mut MountClouds,
    mount: &Mount,
    lease: &Lease,
    now: i64,
) -> Result<()> {
    if lease.sts {
        return forget(state.store.as_ref(), mount, lease).await;
    }
    let cloud = clouds.get(state, mount).await?;
    revoke_with(state.store.as_ref(), &cloud, mount, lease, now).await
}

/// Deletes the lease's user, then the lease. A user IAM does not know counts as gone only once
/// the lease is older than IAM's consistency window. A revocation that fails is due at once, so
/// the scheduled job retries it until it succeeds.
async fn revoke_with(store: &dyn ItemStore, cloud: &SharedCloud, mount: &Mount, lease: &Lease, now: i64) -> Result<()> {
    let deleted = match cloud.delete_user(&lease.user).await {
        Ok(Deletion::Deleted) => Ok(()),
        Ok(Deletion::Absent) if now - lease.issued_at >= intents::IAM_CONSISTENCY_WINDOW_SECS => Ok(()),
        Ok(Deletion::Absent) => Err(BrokerError::Upstream(format!(
            "IAM does not show user {} yet; its revocation is retried until it is gone",
            lease.user
        ))),
        Err(e) => Err(e.into()),
    };
    if let Err(e) = deleted {
        due_now(store, mount, lease, now).await;
        return Err(e);
    }
    forget(store, mount, lease).await
}

/// Makes a lease due at once, so the scheduled job revokes it (or retries its revocation).
async fn due_now(store: &dyn ItemStore, mount: &Mount, lease: &Lease, now: i64) {
    if lease.expire_at > now {
        let key = keys::mount_lease(&mount.uuid, &lease.id);
        let due_now = vec![UpdateOp::set("expire_at", now), schedule::reschedule(now, &lease.id)];
        if let Err(e) = store.update(&key, due_now, Condition::Exists).await {
            tracing::warn!(lease = %lease.id, error = %e, "failed revocation not rescheduled");
        }
    }
}

/// Removes a lease's record (what revoking STS credentials amounts to).
async fn forget(store: &dyn ItemStore, mount: &Mount, lease: &Lease) -> Result<()> {
    store.delete(&keys::mount_lease(&mount.uuid, &lease.id), Condition::Always).await?;
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
        intents::roll_back_mount(state, &mount).await?;
        mounts::delete(state.store.as_ref(), &path).await?;
    }
    Ok(())
}

/// How many leases a mount holds, counted up to `bound` (`bound + 1` means more).
pub async fn count(store: &dyn ItemStore, mount: &Mount, bound: usize) -> Result<usize> {
    Ok(store.query(keys::mount_leases(&mount.uuid).limit(bound + 1)).await?.items.len())
}

/// Revokes up to `limit` leases whose time has come; returns how many.
pub async fn revoke_expired(state: &AppState, clouds: &mut MountClouds, limit: usize, now: i64) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), EXPIRY_PARTITION, now, limit).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mounts = mounts::all(state.store.as_ref()).await?;
    let mut revoked = 0;
    for found in due {
        let lease: Lease = found.parse()?;
        match mounts.iter().find(|m| m.uuid == lease.mount_uuid) {
            Some(mount) => match revoke_in_run(state, clouds, mount, &lease, now).await {
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
/// issue time plus the mount's `lease_max`. Refused (400) with Vault's messages for a lease that
/// does not exist, one that has expired, and one that is not renewable (STS credentials).
pub async fn renew(store: &dyn ItemStore, id: &str, increment: Option<Duration>) -> Result<Lease> {
    let Some((mount, mut lease)) = find(store, id).await? else {
        return Err(BrokerError::invalid("lease not found"));
    };
    let now = chrono::Utc::now().timestamp();
    if lease.expire_at <= now {
        return Err(BrokerError::invalid("lease expired"));
    }
    if !lease.renewable() {
        return Err(BrokerError::invalid("lease is not renewable"));
    }
    let limits = config::lease(store, &mount).await?;
    let increment = increment.map_or(limits.lease, |increment| increment.as_secs());
    let ceiling = lease.issued_at + limits.lease_max as i64;
    let ceiling = lease.token_expire_at.map_or(ceiling, |token| ceiling.min(token));
    lease.expire_at = (now + increment as i64).min(ceiling);
    lease.last_renewal = Some(now);
    let ops = vec![
        UpdateOp::set("expire_at", lease.expire_at),
        UpdateOp::set("last_renewal", now),
        schedule::reschedule(lease.expire_at, &lease.id),
    ];
    store.update(&keys::mount_lease(&mount.uuid, &lease.id), ops, Condition::Exists).await?;
    Ok(lease)
}

/// Revokes the lease with this id, if there is one.
pub async fn revoke_by_id(state: &AppState, id: &str) -> Result<()> {
    if let Some((mount, lease)) = find(state.store.as_ref(), id).await? {
        revoke(state, &mount, &lease).await?;
    }
    Ok(())
}

/// How a prefix revocation meets a failure: Vault's `sync` flag, and `revoke-force`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The first failure is the answer; the leases after it stay (`sync`, the default).
    Sync,
    /// A failure is left to the scheduled job, which retries it (`sync=false`).
    Queued,
    /// A lease whose IAM user cannot be deleted is removed all the same (`revoke-force`): the
    /// user is then the operator's to clean up, as Vault leaves a forced secret.
    Force,
}

/// The IAM revocations one prefix revocation makes: each is about eight IAM calls, and the call
/// must answer within API Gateway's 29 seconds. The leases past them are queued for the job.
pub const PREFIX_REVOCATIONS_PER_CALL: usize = 20;

/// What a prefix revocation did.
#[derive(Debug, Default)]
pub struct PrefixRevoked {
    /// Leases gone (forced ones included).
    pub revoked: usize,
    /// Leases left due at once for the scheduled job: past the call's bound, or failed.
    pub queued: usize,
}

/// Revokes every lease under `prefix`, whole segments only (`aws/creds/dev` reaches
/// `aws/creds/dev/…`, not `aws/creds/dev2/…`), or the one lease whose id it is, as Vault's
/// `revokePrefixCommon` does. Once a mount's IAM has failed, its remaining leases are queued
/// (or, forced, removed) without trying it again.
pub async fn revoke_prefix(state: &AppState, prefix: &str, how: Revocation) -> Result<PrefixRevoked> {
    let prefix = prefix.trim_matches('/');
    let leases = match find(state.store.as_ref(), prefix).await? {
        Some(one) => vec![one],
        None => under(state.store.as_ref(), prefix).await?,
    };
    let (total, now) = (leases.len(), chrono::Utc::now().timestamp());
    let mut clouds = MountClouds::default();
    let mut failed: HashSet<String> = HashSet::new();
    let (mut attempts, mut done) = (0, PrefixRevoked::default());
    for (at, (mount, lease)) in leases.iter().enumerate() {
        let broken = failed.contains(&mount.uuid);
        if !lease.sts && (attempts == PREFIX_REVOCATIONS_PER_CALL || (broken && how != Revocation::Force)) {
            due_now(state.store.as_ref(), mount, lease, now).await;
            done.queued += 1;
            continue;
        }
        let revoked = if lease.sts {
            forget(state.store.as_ref(), mount, lease).await
        } else if broken {
            Err(BrokerError::Upstream(format!("IAM failed for mount {} earlier in this revocation", mount.path)))
        } else {
            attempts += 1;
            match clouds.get(state, mount).await {
                Ok(cloud) => revoke_with(state.store.as_ref(), &cloud, mount, lease, now).await,
                Err(e) => Err(e),
            }
        };
        let Err(e) = revoked else {
            done.revoked += 1;
            continue;
        };
        failed.insert(mount.uuid.clone());
        match how {
            Revocation::Sync => return Err(failed_to_revoke(&lease.id, at + 1, total, e)),
            Revocation::Queued => {
                tracing::warn!(lease = %lease.id, error = %e, "lease not revoked; the job retries it");
                due_now(state.store.as_ref(), mount, lease, now).await;
                done.queued += 1;
            }
            Revocation::Force => {
                tracing::warn!(lease = %lease.id, user = %lease.user, error = %e, "lease removed by force; its IAM user is left");
                forget(state.store.as_ref(), mount, lease).await?;
                done.revoked += 1;
            }
        }
    }
    if done.queued > 0 {
        state.work.notify_one();
    }
    Ok(done)
}

/// A sync revocation's failure, naming the lease as Vault does (`failed to revoke "…" (2 / 5)`)
/// where the message is the caller's to see.
fn failed_to_revoke(id: &str, at: usize, total: usize, e: BrokerError) -> BrokerError {
    let context = format!("failed to revoke \"{id}\" ({at} / {total})");
    match e {
        BrokerError::Invalid(message) => BrokerError::Invalid(format!("{context}: {message}")),
        BrokerError::Upstream(message) => BrokerError::Upstream(format!("{context}: {message}")),
        BrokerError::Failed(message) => BrokerError::Failed(format!("{context}: {message}")),
        other => {
            tracing::warn!(lease = %id, error = %other, "{context}");
            other
        }
    }
}

/// Where the leases under `prefix` (without slashes at either end; empty for all) are: the
/// mount the prefix lies in or names, with the lease-id prefix within it; else every mount below
/// the prefix, whole.
async fn scopes(store: &dyn ItemStore, prefix: &str) -> Result<Vec<(Mount, String)>> {
    if !prefix.is_empty() {
        if let Some((mount, _)) = mounts::route(store, prefix).await? {
            return Ok(vec![(mount, format!("{prefix}/"))]);
        }
    }
    let below = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
    let mounts = mounts::all(store).await?.into_iter().filter(|m| m.path.starts_with(&below));
    Ok(mounts
        .map(|mount| {
            let ids = format!("{}/", mount.path);
            (mount, ids)
        })
        .collect())
}

/// Every lease under `prefix`, with its mount.
async fn under(store: &dyn ItemStore, prefix: &str) -> Result<Vec<(Mount, Lease)>> {
    let mut found = Vec::new();
    for (mount, ids) in scopes(store, prefix).await? {
        for item in query_all(store, keys::mount_leases_under(&mount.uuid, &ids)).await? {
            found.push((mount.clone(), item.parse()?));
        }
    }
    Ok(found)
}

/// What `LIST sys/leases/lookup/<prefix>` answers, as Vault lists its lease store: the next
/// segment of every lease id under `prefix`, a lease's own last segment or a level below it
/// ending in `/`, sorted, each once. A mount below the prefix shows as its next segment when it
/// holds any lease (one item read).
pub async fn list_prefix(store: &dyn ItemStore, prefix: &str) -> Result<Vec<String>> {
    let prefix = prefix.trim_matches('/');
    let dir = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
    let next = |rest: &str| match rest.find('/') {
        Some(at) => rest[..=at].to_owned(),
        None => rest.to_owned(),
    };
    let mut keys = BTreeSet::new();
    for (mount, ids) in scopes(store, prefix).await? {
        if ids.len() > dir.len() {
            let any = store.query(keys::mount_leases(&mount.uuid).limit(1)).await?;
            if !any.items.is_empty() {
                keys.insert(next(&ids[dir.len()..]));
            }
            continue;
        }
        for item in query_all(store, keys::mount_leases_under(&mount.uuid, &ids)).await? {
            let lease: Lease = item.parse()?;
            if let Some(rest) = lease.id.strip_prefix(&dir).filter(|rest| !rest.is_empty()) {
                keys.insert(next(rest));
            }
        }
    }
    Ok(keys.into_iter().collect())
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
    async fn mount(&mut self, store: &dyn ItemStore, uuid: &str) -> Result<Option<Mount>> {
        if self.mounts.is_none() {
            self.mounts = Some(mounts::all(store).await?);
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
                let Some(mount) = self.mount(store, &lease.mount_uuid).await? else {
                    // Its mount is gone, and its users were revoked with it.
                    store.delete(&found.key, Condition::Always).await?;
                    continue;
                };
                if *budget == 0 || self.failed.contains(&mount.uuid) {
                    return Ok(false);
                }
                *budget -= 1;
                let revoked = if lease.sts {
                    forget(store, &mount, &lease).await
                } else {
                    match self.clouds.get(state, &mount).await {
                        Ok(cloud) => revoke_with(store, &cloud, &mount, &lease, chrono::Utc::now().timestamp()).await,
                        Err(e) => Err(e),
                    }
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
