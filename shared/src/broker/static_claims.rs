//! The write-ahead records of static-role keys. A write (`statics::write`) or a rotation
//! (`rotation.rs`) stores a [`Claim`] in the role before it sends `CreateAccessKey`: when, and the
//! keys the user held then. A write also puts a marker in place of the role's key (it has none
//! to give out yet) and keeps the role it replaces. If the call dies after IAM made the key, the
//! claim says which key nobody holds; once the claim has expired, the scheduled job (or the
//! role's next write or delete, or its next rotation) rolls it back: [`roll_back`].

use serde::{Deserialize, Serialize};

use super::error::{BrokerError, Result};
use super::mounts::Mount;
use super::statics::{self, StaticRole};
use crate::aws::{self, SharedCloud};
use crate::state::AppState;
use crate::store::{keys, query_all, Condition, Item, ItemStore};

/// What a role's `sealed_secret_key` holds while a write that claimed it makes its key: what
/// that write's store of the key is conditioned on.
pub const BEING_WRITTEN: &str = "being-written:";
/// What it holds while a write's claim is rolled back: a write still running after all can
/// no longer store its key (its marker is gone), and deletes it.
const ROLLING_BACK: &str = "rolling-back:";
/// How far IAM's clock may be behind ours when it dates a key a claim announced.
const CLOCK_SKEW_SECS: i64 = 60;

/// The write-ahead record of a key being made for a static role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claim {
    /// When the claim was made (unix seconds), before `CreateAccessKey` was sent.
    pub at: i64,
    /// The ids of the access keys the user held then.
    pub keys_before: Vec<String>,
    /// A write's: the role as it was before the write, if it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Box<StaticRole>>,
}

impl StaticRole {
    /// Whether a write has claimed the role and is making its key (no key to give out yet), or
    /// that write's claim is being rolled back.
    pub fn is_being_written(&self) -> bool {
        self.sealed_secret_key.starts_with(BEING_WRITTEN) || self.sealed_secret_key.starts_with(ROLLING_BACK)
    }
}

/// A new write's marker.
pub fn marker() -> String {
    format!("{BEING_WRITTEN}{}", crate::ids::random_token(16))
}

/// How long a claim stands before it is taken as the record of a call that died.
pub fn lifetime(state: &AppState) -> i64 {
    i64::try_from(state.config.broker_rollback_min_age.as_secs()).unwrap_or(i64::MAX / 4)
}

/// Whether a role's claim has expired by `now`: the call that made it died (or is slower than a
/// call may be, and will fail to store its key). A write's claim of a version that recorded no
/// time is taken as expired.
pub fn expired(state: &AppState, role: &StaticRole, now: i64) -> bool {
    role.claim.as_ref().is_none_or(|claim| now >= claim.at.saturating_add(lifetime(state)))
}

pub fn being_written(name: &str) -> BrokerError {
    BrokerError::Conflict(format!("static role {name} is being written by another request; try again"))
}

/// What a write or delete meeting a claimed role does: a conflict while the claim stands; once
/// it has expired, the claim's rollback, and then the role as it stands.
pub async fn settle(
    state: &AppState,
    cloud: &SharedCloud,
    mount: &Mount,
    role: &StaticRole,
) -> Result<Option<StaticRole>> {
    if !expired(state, role, chrono::Utc::now().timestamp()) {
        return Err(being_written(&role.name));
    }
    roll_back(state.store.as_ref(), cloud, role).await?;
    statics::load(state.store.as_ref(), mount, &role.name).await
}

/// Rolls back the call that claimed `role` and died: deletes the keys of its user made since the
/// claim that the user did not hold before it and no static role of the mount holds (the key
/// whose answer was lost), then, for a write, puts back the role it replaced (or removes it),
/// and for a rotation clears the claim. A claim settled meanwhile is left as it is.
pub async fn roll_back(store: &dyn ItemStore, cloud: &SharedCloud, role: &StaticRole) -> Result<()> {
    let writing = role.is_being_written();
    let Some(claim) = &role.claim else {
        tracing::warn!(
            role = %role.name,
            user = %role.username,
            "a static-role write left unfinished by an earlier version recorded no keys: check the user's keys in IAM"
        );
        put_back(store, role, Condition::equals("sealed_secret_key", role.sealed_secret_key.clone())).await?;
        return Ok(());
    };
    // A write's marker goes first, so the write cannot store a key deleted below.
    let current = match writing && role.sealed_secret_key.starts_with(BEING_WRITTEN) {
        true => {
            let rolling = StaticRole {
                sealed_secret_key: format!("{ROLLING_BACK}{}", crate::ids::random_token(16)),
                ..role.clone()
            };
            let claimed = Condition::equals("sealed_secret_key", role.sealed_secret_key.clone());
            match store.put(statics::item(&rolling)?, claimed).await {
                Err(e) if e.is_condition_failed() => return Ok(()),
                other => other?,
            }
            rolling
        }
        false => role.clone(),
    };
    delete_strays(store, cloud, &current, claim).await?;
    let unchanged = Condition::equals("sealed_secret_key", current.sealed_secret_key.clone());
    let settled = match writing {
        true => put_back(store, &current, unchanged).await?,
        false => {
            let cleared = StaticRole { claim: None, ..current.clone() };
            let unchanged = unchanged.and(Condition::equals("next_rotation", current.next_rotation));
            match store.put(statics::item(&cleared)?, unchanged).await {
                Err(e) if e.is_condition_failed() => false,
                other => other.map(|()| true)?,
            }
        }
    };
    if settled {
        tracing::info!(role = %role.name, "a static-role key left unfinished was rolled back");
    }
    Ok(())
}

/// Deletes the keys of the role's user that the claim's call may have made and nobody holds.
async fn delete_strays(store: &dyn ItemStore, cloud: &SharedCloud, role: &StaticRole, claim: &Claim) -> Result<()> {
    let held: Vec<String> = query_all(store, keys::mount_static_roles(&role.mount_uuid))
        .await?
        .iter()
        .map(Item::parse::<StaticRole>)
        .collect::<std::result::Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|other| other.username == role.username)
        .flat_map(|other| std::iter::once(other.access_key).chain(other.previous_access_key))
        .collect();
    let keys = match cloud.list_access_keys(Some(&role.username)).await {
        Err(aws::CloudError::NotFound(_)) => Vec::new(),
        keys => keys?,
    };
    let made_since =
        |key: &aws::AccessKeyInfo| key.created.is_none_or(|at| at.timestamp() >= claim.at - CLOCK_SKEW_SECS);
    let strays =
        keys.iter().filter(|key| !claim.keys_before.contains(&key.id) && !held.contains(&key.id) && made_since(key));
    for key in strays {
        match cloud.delete_access_key(Some(&role.username), &key.id).await {
            Ok(()) | Err(aws::CloudError::NotFound(_)) => {
                tracing::info!(role = %role.name, user = %role.username, key = %key.id, "an access key nobody holds was deleted");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Puts back what a claimed role replaced (or removes the role), on `condition`; false when the
/// condition failed (the claim was settled meanwhile).
pub async fn put_back(store: &dyn ItemStore, role: &StaticRole, condition: Condition) -> Result<bool> {
    let replaced = role.claim.as_ref().and_then(|claim| claim.replaced.as_deref());
    let written = match replaced {
        Some(previous) => store.put(statics::item(previous)?, condition).await,
        None => store.delete(&keys::mount_static_role(&role.mount_uuid, &role.name), condition).await.map(drop),
    };
    match written {
        Err(e) if e.is_condition_failed() => Ok(false),
        other => other.map(|()| true).map_err(BrokerError::from),
    }
}
