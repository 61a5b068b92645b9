//! Write-ahead records of the IAM users the broker creates, so that no user outlives the broker's
//! knowledge of it. A record (mount, user name, time) is written before `CreateUser` and removed
//! in the same transaction that writes the user's lease; a request that fails undoes its user and
//! removes the record, and one that dies midway (a `kill -9`, a Lambda timeout) leaves the record
//! to the scheduled job, which rolls back records older than `HANGAR_BROKER_ROLLBACK_MIN_AGE` by
//! deleting everything the user holds — Vault's WAL rollback of `path_user.go`.
//!
//! The job claims a record before it deletes the user, and the lease's transaction requires an
//! unclaimed record, so a request slower than the minimum age loses its user cleanly (its lease
//! is refused and it undoes) instead of handing out credentials the job is deleting.

use serde::{Deserialize, Serialize};

use super::config::MountClouds;
use super::error::{BrokerError, Result};
use super::mounts::{self, Mount};
use crate::aws::{Deletion, SharedCloud};
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore, UpdateOp, Write};

/// How long IAM may take to show a user just created (Vault's 5 minutes): a user IAM does not
/// know is taken as gone only once its record or lease is older than this.
pub const IAM_CONSISTENCY_WINDOW_SECS: i64 = 300;

const SCHEDULE_PARTITION: &str = keys::USER_INTENT_SCHEDULE;

/// The write-ahead record of one IAM user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserIntent {
    pub mount_uuid: String,
    pub user: String,
    /// When the record was written (unix seconds), before `CreateUser` was sent.
    pub created_at: i64,
    /// Set by the job once it rolls the user back; the lease then cannot be written.
    pub claimed: bool,
    /// Random, and tagged on the user as [`REQUEST_TAG`]; empty in records written before.
    #[serde(default)]
    pub nonce: String,
}

impl UserIntent {
    fn key(&self) -> crate::store::Key {
        keys::mount_user_intent(&self.mount_uuid, &self.user)
    }

    /// The write that removes the record with the lease, failing if the job claimed it.
    pub fn settled(&self) -> Write {
        Write::Delete { key: self.key(), condition: Condition::equals("claimed", false) }
    }

    fn old_enough_to_be_gone(&self, now: i64) -> bool {
        now - self.created_at >= IAM_CONSISTENCY_WINDOW_SECS
    }
}

/// Records that `user` is about to be created in `mount`; a record of the same name still
/// standing is a conflict.
pub async fn record(store: &dyn ItemStore, mount: &Mount, user: &str) -> Result<UserIntent> {
    let intent = UserIntent {
        mount_uuid: mount.uuid.clone(),
        user: user.to_owned(),
        created_at: chrono::Utc::now().timestamp(),
        claimed: false,
        nonce: crate::ids::random_token(20),
    };
    let item = Item::from_value(intent.key(), &intent)?.with_index(
        Index::Gsi1,
        SCHEDULE_PARTITION,
        schedule::sort_key(intent.created_at, &format!("{}/{}", intent.mount_uuid, intent.user)),
    );
    // One record a name: a second request that renders the same name (a template without
    // randomness) is refused here, never handed the first one's user as its own.
    match store.put(item, Condition::NotExists).await {
        Err(e) if e.is_condition_failed() => {
            Err(BrokerError::Conflict(format!("IAM user {user} is being created by another request")))
        }
        other => Ok(other?),
    }?;
    Ok(intent)
}

/// The tag every user the broker creates carries: its record's nonce, so that a user whose
/// `CreateUser` answer was lost is known as the record's own (IAM says `EntityAlreadyExists` to
/// the SDK's retry, as it would to a stranger's user of the same name).
pub const REQUEST_TAG: &str = "hangar:request";

/// Whose the user a record names is, by its nonce ([`REQUEST_TAG`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// It carries the record's nonce: the record's, whatever refused its creation.
    Record,
    /// It carries another nonce or none: someone else's user of the same name.
    Stranger,
    /// IAM does not know it (yet).
    Nobody,
}

/// Whose the user a record names is. A record written before nonces existed owns any user of
/// its name, as it did then.
pub async fn owner(cloud: &SharedCloud, intent: &UserIntent) -> Result<Owner> {
    match cloud.get_user(Some(&intent.user)).await {
        Err(crate::aws::CloudError::NotFound(_)) => Ok(Owner::Nobody),
        Err(e) => Err(e.into()),
        Ok(_) if intent.nonce.is_empty() => Ok(Owner::Record),
        Ok(user) => {
            let carries = user.tags.iter().any(|(key, value)| key == REQUEST_TAG && *value == intent.nonce);
            Ok(if carries { Owner::Record } else { Owner::Stranger })
        }
    }
}

/// Forgets a record whose `CreateUser` IAM refused: nothing was created.
pub async fn forget(store: &dyn ItemStore, intent: &UserIntent) -> Result<()> {
    store.delete(&intent.key(), Condition::equals("claimed", false)).await.map(drop).or_else(ignore_condition)?;
    Ok(())
}

/// Undoes a user whose request failed after `CreateUser` was sent: deletes it and forgets the
/// record, or, when that cannot be done now, leaves the record to the job.
pub async fn undo(store: &dyn ItemStore, cloud: &SharedCloud, intent: &UserIntent) {
    let user = &intent.user;
    match cloud.delete_user(user).await {
        Ok(Deletion::Deleted) => {
            if let Err(e) = forget(store, intent).await {
                tracing::warn!(user = %user, error = %e, "IAM user undone; its record is left to the job");
            }
        }
        Ok(Deletion::Absent) => tracing::info!(user = %user, "IAM user not found yet; the job rolls it back"),
        Err(e) => tracing::warn!(user = %user, error = %e, "IAM user not undone; the job rolls it back"),
    }
}

/// Rolls back up to `limit` records written at least `min_age_secs` before `now`; returns how
/// many users were rolled back. A failure leaves its record for the next run.
pub async fn roll_back_due(
    state: &AppState,
    clouds: &mut MountClouds,
    now: i64,
    min_age_secs: i64,
    limit: usize,
) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), SCHEDULE_PARTITION, now - min_age_secs, limit).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mounts = mounts::all(state.store.as_ref()).await?;
    let mut rolled_back = 0;
    for found in due {
        let intent: UserIntent = found.parse()?;
        let Some(mount) = mounts.iter().find(|m| m.uuid == intent.mount_uuid) else {
            // Its mount is gone; unmounting rolled its users back.
            state.store.delete(&found.key, Condition::Always).await?;
            continue;
        };
        let outcome = match clouds.get(state, mount).await {
            Ok(cloud) => roll_back(state.store.as_ref(), &cloud, &intent, now).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(true) => rolled_back += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(user = %intent.user, error = %e, "IAM user not rolled back; retried next run"),
        }
    }
    Ok(rolled_back)
}

/// Rolls back every record of a mount (before it is unmounted), whatever its age.
pub async fn roll_back_mount(state: &AppState, mount: &Mount) -> Result<()> {
    let mut clouds = MountClouds::default();
    for found in crate::store::query_all(state.store.as_ref(), keys::mount_user_intents(&mount.uuid)).await? {
        let intent: UserIntent = found.parse()?;
        let cloud = clouds.get(state, mount).await?;
        if claim_and_delete(state.store.as_ref(), &cloud, &intent).await? != Some(Deletion::Deleted) {
            tracing::info!(user = %intent.user, "IAM user of an unmounted mount not found, or not its own; left");
        }
        state.store.delete(&found.key, Condition::Always).await?;
    }
    Ok(())
}

/// Claims the record, deletes the user, and forgets the record once the user is gone: deleted
/// now, or unknown to IAM and older than its consistency window, or someone else's (left
/// alone). True when a user was deleted.
async fn roll_back(store: &dyn ItemStore, cloud: &SharedCloud, intent: &UserIntent, now: i64) -> Result<bool> {
    let deletion = claim_and_delete(store, cloud, intent).await?;
    if deletion != Some(Deletion::Absent) || intent.old_enough_to_be_gone(now) {
        store.delete(&intent.key(), Condition::Always).await?;
        match deletion {
            Some(Deletion::Deleted) => tracing::info!(user = %intent.user, "IAM user left without a lease rolled back"),
            None => tracing::warn!(
                user = %intent.user,
                "an IAM user of the name a request was creating is not that request's; left alone"
            ),
            Some(Deletion::Absent) => {}
        }
    }
    Ok(deletion == Some(Deletion::Deleted))
}

/// Claims the record and deletes its user, if the user is the record's; `None` for someone
/// else's user of the same name, which is left alone.
async fn claim_and_delete(store: &dyn ItemStore, cloud: &SharedCloud, intent: &UserIntent) -> Result<Option<Deletion>> {
    store.update(&intent.key(), vec![UpdateOp::set("claimed", true)], Condition::Exists).await?;
    match owner(cloud, intent).await? {
        Owner::Stranger => Ok(None),
        Owner::Nobody => Ok(Some(Deletion::Absent)),
        Owner::Record => Ok(Some(cloud.delete_user(&intent.user).await?)),
    }
}

fn ignore_condition(e: crate::store::StoreError) -> std::result::Result<(), crate::store::StoreError> {
    if e.is_condition_failed() {
        Ok(())
    } else {
        Err(e)
    }
}
