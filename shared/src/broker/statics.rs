//! Static roles: one existing IAM user each, whose keys the engine holds (sealed) and rotates.
//! A schedule index ordered by next rotation lets the scheduled run (`rotation.rs`) read only
//! the roles that are due.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{BrokerError, Result};
use super::mounts::{self, Mount};
pub use super::static_claims::Claim;
use super::static_claims::{self as claims};
use super::{config, duration};
use crate::aws::{self, SharedCloud};
use crate::seal::{Resealed, SealContext};
use crate::state::AppState;
use crate::store::{keys, query_all, schedule, Condition, Index, Item, ItemStore};

/// The schedule partition of static roles, ordered by next rotation.
pub const SCHEDULE_PARTITION: &str = keys::STATIC_ROLE_SCHEDULE;
const MINIMUM_PERIOD: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StaticRole {
    pub name: String,
    pub mount_uuid: String,
    pub username: String,
    pub user_id: String,
    pub rotation_period: u64,
    pub access_key: String,
    pub sealed_secret_key: String,
    /// Unix time of the next rotation.
    pub next_rotation: i64,
    /// The user's IAM path, when known (roles written before it was recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_path: Option<String>,
    /// The key the last rotation replaced, which the broker also created: IAM keeps it until
    /// the next rotation, and deleting the role deletes it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_access_key: Option<String>,
    /// While a write or a rotation makes the role's key: its write-ahead record ([`Claim`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
}

/// The IAM path in a user's ARN (`arn:…:user/<path>/<name>` gives `/<path>/`).
fn path_of(arn: &str) -> Option<String> {
    let rest = arn.split_once(":user/")?.1;
    Some(format!("/{}", &rest[..rest.rfind('/').map_or(0, |i| i + 1)]))
}

/// Whether the deployment still lets this role hold its user (`HANGAR_BROKER_STATIC_USERS`):
/// the list may have been narrowed since the role was written.
pub fn user_allowed(state: &AppState, role: &StaticRole) -> bool {
    state.config.broker_limits.allows_static_user(&role.username, role.user_path.as_deref())
}

/// Refuses a user the deployment does not let static roles hold (`HANGAR_BROKER_STATIC_USERS`).
fn check_user(state: &AppState, username: &str, path: Option<&str>) -> Result<()> {
    match state.config.broker_limits.allows_static_user(username, path) {
        true => Ok(()),
        false => Err(BrokerError::invalid(format!(
            "IAM user {username} is not allowed by this deployment (HANGAR_BROKER_STATIC_USERS)"
        ))),
    }
}

/// The stored item of a role, in the schedule partition at its next rotation.
pub fn item(role: &StaticRole) -> Result<Item> {
    let item = Item::from_value(keys::mount_static_role(&role.mount_uuid, &role.name), role)?;
    let schedule = schedule::sort_key(role.next_rotation, &format!("{}#{}", role.mount_uuid, role.name));
    Ok(item.with_index(Index::Gsi1, SCHEDULE_PARTITION, schedule))
}

/// What a static role's secret key is sealed for: this role of this mount.
pub fn key_context(mount_uuid: &str, name: &str) -> SealContext {
    SealContext::static_role_key(mount_uuid, name)
}

pub async fn load(store: &dyn ItemStore, mount: &Mount, name: &str) -> Result<Option<StaticRole>> {
    match store.get(&keys::mount_static_role(&mount.uuid, name)).await? {
        Some(found) => Ok(Some(found.parse()?)),
        None => Ok(None),
    }
}

/// Replaces the oldest key when the user already has two, then creates one: Vault's order.
pub async fn new_key(cloud: &SharedCloud, user: &str, keep: Option<&str>) -> Result<aws::AccessKey> {
    let existing = cloud.list_access_keys(Some(user)).await?;
    new_key_beside(cloud, user, existing, keep).await
}

/// [`new_key`], the user's keys already listed.
pub(super) async fn new_key_beside(
    cloud: &SharedCloud,
    user: &str,
    mut existing: Vec<aws::AccessKeyInfo>,
    keep: Option<&str>,
) -> Result<aws::AccessKey> {
    if existing.len() >= 2 {
        existing.sort_by_key(|k| k.created);
        if let Some(oldest) = existing.iter().find(|k| Some(k.id.as_str()) != keep) {
            cloud.delete_access_key(Some(user), &oldest.id).await?;
        }
    }
    Ok(cloud.create_access_key(Some(user)).await?)
}

/// Refuses a user deleted and recreated under the role's user name since the role was written
/// (IAM's user id is what stays), as Vault compares it: the role never holds a stranger's keys.
pub async fn check_same_user(cloud: &SharedCloud, role: &StaticRole) -> Result<()> {
    let user = cloud.get_user(Some(&role.username)).await?;
    if role.user_id.is_empty() || user.id == role.user_id {
        return Ok(());
    }
    Err(BrokerError::invalid(format!(
        "IAM user {} is not the user static role {} was written for: its user id is {}, not {} \
         (deleted and recreated?); delete the role and write it again",
        role.username, role.name, user.id, role.user_id
    )))
}

/// Deletes the keys the broker created for a role (its current and previous key) from its
/// user; a key already gone is not an error.
async fn delete_keys(cloud: &SharedCloud, role: &StaticRole) -> Result<()> {
    // A role whose write died before its key existed holds none: it can still be deleted.
    let held = std::iter::once(&role.access_key).chain(role.previous_access_key.as_ref());
    for key in held.filter(|key| !key.is_empty()) {
        match cloud.delete_access_key(Some(&role.username), key).await {
            Ok(()) | Err(aws::CloudError::NotFound(_)) => {}
            Err(e) => {
                tracing::warn!(role = %role.name, key = %key, error = %e, "a static role's key could not be deleted");
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// IAM's rule for a user name, checked before AWS is asked to find one.
fn is_iam_user_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

/// Writes `static-roles/:name`. A new role, or a new user, gets a fresh key from AWS; the same
/// user with a new period keeps its keys and restarts its schedule.
pub async fn write(state: &AppState, mount: &Mount, name: &str, body: &Map<String, Value>) -> Result<()> {
    let mut existing = load(state.store.as_ref(), mount, name).await?;
    if let Some(claimed) = existing.as_ref().filter(|role| role.is_being_written()) {
        let (cloud, _) = config::mount_cloud(state, mount).await?;
        existing = claims::settle(state, &cloud, mount, claimed).await?;
    }
    let username = match body.get("username").and_then(Value::as_str).map(str::trim).filter(|u| !u.is_empty()) {
        Some(username) => username.to_owned(),
        None => {
            existing.as_ref().map(|r| r.username.clone()).ok_or_else(|| BrokerError::invalid("username is required"))?
        }
    };
    if !is_iam_user_name(&username) {
        return Err(BrokerError::invalid(
            "username must be an IAM user name: 1 to 64 letters, digits or any of _+=,.@-",
        ));
    }
    let period = match body.get("rotation_period").filter(|v| !v.is_null()) {
        Some(value) => duration::parse(value).map_err(|e| BrokerError::invalid(format!("rotation_period: {e}")))?,
        None => Duration::from_secs(
            existing
                .as_ref()
                .map(|r| r.rotation_period)
                .ok_or_else(|| BrokerError::invalid("rotation_period is required"))?,
        ),
    };
    if period < MINIMUM_PERIOD {
        return Err(BrokerError::invalid("rotation_period must be at least 1 minute"));
    }
    let now = chrono::Utc::now().timestamp();
    // Written only over what was read: no concurrent write (a rotation, the reseal pass,
    // another write of this role) is lost.
    let condition = match &existing {
        Some(role) => Condition::equals("sealed_secret_key", role.sealed_secret_key.clone()),
        None => Condition::NotExists,
    };
    let named_user = body.get("username").is_some_and(|v| !v.is_null());
    match existing {
        // Same user: a new period resets the schedule, keys stay. Naming the user again checks
        // it is still the same user, as Vault does.
        Some(mut role) if role.username == username => {
            check_user(state, &role.username, role.user_path.as_deref())?;
            if named_user {
                let (cloud, _) = config::mount_cloud(state, mount).await?;
                check_same_user(&cloud, &role).await?;
            }
            role.rotation_period = period.as_secs();
            role.next_rotation = now + period.as_secs() as i64;
            match state.store.put(item(&role)?, condition).await {
                Err(e) if e.is_condition_failed() => Err(changed_meanwhile(name)),
                other => Ok(other?),
            }
        }
        replaced => {
            let (cloud, root) = config::mount_cloud(state, mount).await?;
            let user = cloud.get_user(Some(&username)).await.map_err(|e| match e {
                aws::CloudError::NotFound(_) => BrokerError::invalid(format!("IAM user {username} does not exist")),
                other => other.into(),
            })?;
            let user_path = path_of(&user.arn);
            check_user(state, &username, user_path.as_deref())?;
            let keys = cloud.list_access_keys(Some(&username)).await?;
            check_not_the_engines_own(&cloud, &root, &user, &keys).await?;
            let role = StaticRole {
                name: name.to_owned(),
                mount_uuid: mount.uuid.clone(),
                username,
                user_id: user.id,
                rotation_period: period.as_secs(),
                access_key: String::new(),
                sealed_secret_key: String::new(),
                next_rotation: now + period.as_secs() as i64,
                user_path,
                previous_access_key: None,
                claim: None,
            };
            with_new_key(state, &cloud, role, keys, condition, replaced).await
        }
    }
}

fn changed_meanwhile(name: &str) -> BrokerError {
    BrokerError::Conflict(format!("static role {name} was changed by another request; try again"))
}

/// Refuses the IAM user the mount's `config/root` signs in as: a static role would rotate the
/// engine's own key away. Known by its access key among the user's (static root keys), else by
/// asking IAM who the engine is (the default chain); a caller IAM does not name (an assumed
/// role, workload identity) is no IAM user at all.
async fn check_not_the_engines_own(
    cloud: &SharedCloud,
    root: &config::RootConfig,
    user: &aws::IamUser,
    keys: &[aws::AccessKeyInfo],
) -> Result<()> {
    let own = match root.access_key.is_empty() {
        false => keys.iter().any(|key| key.id == root.access_key),
        // Refused by IAM (credentials that are no user's, a policy without GetUser on itself):
        // no user of IAM's to compare; AWS not answering is retried by the caller.
        true => match cloud.get_user(None).await {
            Ok(own) => own.id == user.id,
            Err(e) if e.is_on_aws_side() => return Err(e.into()),
            Err(_) => false,
        },
    };
    match own {
        true => Err(BrokerError::invalid(format!(
            "IAM user {} is the user this mount's config/root signs in as: a static role may not hold it",
            user.name
        ))),
        false => Ok(()),
    }
}

/// Stores `role` with a new key of its user, whose keys are `keys_before`. The role is claimed
/// first (written under `condition` with a [`Claim`] in place of its key), so of concurrent
/// writes one makes a key and the others make none, and a write that dies leaves its record;
/// then the key is made and stored over the claim. A failure puts back what was there
/// (`replaced`, or nothing); success deletes the keys made for a replaced user.
async fn with_new_key(
    state: &AppState,
    cloud: &SharedCloud,
    mut role: StaticRole,
    keys_before: Vec<aws::AccessKeyInfo>,
    condition: Condition,
    replaced: Option<StaticRole>,
) -> Result<()> {
    let name = role.name.clone();
    let now = chrono::Utc::now().timestamp();
    let marker = claims::marker();
    let period = role.rotation_period as i64;
    role.sealed_secret_key = marker.clone();
    let keys = keys_before.iter().map(|key| key.id.clone()).collect();
    role.claim = Some(Claim { at: now, keys_before: keys, replaced: replaced.clone().map(Box::new) });
    // Due in the schedule once the claim expires, for the job to roll back a write that died.
    role.next_rotation = now + claims::lifetime(state);
    match state.store.put(item(&role)?, condition).await {
        Err(e) if e.is_condition_failed() => return Err(changed_meanwhile(&name)),
        other => other?,
    }
    let claimed = Condition::equals("sealed_secret_key", marker);
    let made = async {
        let key = new_key_beside(cloud, &role.username, keys_before, None).await?;
        let context = key_context(&role.mount_uuid, &role.name);
        let sealed = state.sealer.seal_for(&context, &key.secret).await;
        Ok::<_, BrokerError>((key.id, sealed))
    }
    .await;
    let stored = match made {
        Ok((key, Ok(sealed))) => {
            let keyed = StaticRole {
                access_key: key.clone(),
                sealed_secret_key: sealed,
                next_rotation: now + period,
                claim: None,
                ..role.clone()
            };
            match state.store.put(item(&keyed)?, claimed.clone()).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    if let Err(undo) = cloud.delete_access_key(Some(&role.username), &key).await {
                        tracing::warn!(role = %name, key = %key, error = %undo, "an unstored static role key could not be deleted");
                    }
                    Err(match e.is_condition_failed() {
                        true => changed_meanwhile(&name),
                        false => e.into(),
                    })
                }
            }
        }
        Ok((key, Err(e))) => {
            let _ = cloud.delete_access_key(Some(&role.username), &key).await;
            Err(e.into())
        }
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        if let Err(restore) = claims::put_back(state.store.as_ref(), &role, claimed).await {
            tracing::warn!(role = %name, error = %restore, "a static role's claim could not be undone; the job rolls it back");
        }
        return Err(e);
    }
    // A new user: the keys the broker made for the previous one go.
    match replaced {
        Some(previous) => delete_keys(cloud, &previous).await,
        None => Ok(()),
    }
}

/// `static-creds/:name`: the role's current key, unsealed, as (access key id, secret key).
pub async fn creds(state: &AppState, mount: &Mount, name: &str) -> Result<(String, String)> {
    let role = load(state.store.as_ref(), mount, name).await?.ok_or(BrokerError::NotFound)?;
    check_user(state, &role.username, role.user_path.as_deref())?;
    if role.is_being_written() {
        return Err(claims::being_written(name));
    }
    let secret = state.sealer.unseal_for(&key_context(&mount.uuid, name), &role.sealed_secret_key).await?;
    Ok((role.access_key, secret))
}

/// Rebinds the mount's static-role keys still in format 1 (sealed before contexts existed),
/// stopping once `tally` has rewritten `limit`.
pub async fn reseal_keys(state: &AppState, mount: &Mount, limit: usize, tally: &mut Resealed) -> Result<()> {
    for item in query_all(state.store.as_ref(), keys::mount_static_roles(&mount.uuid)).await? {
        if tally.rewritten >= limit {
            tally.left += 1;
            continue;
        }
        let Some(name) = item.attr::<String>("name")? else { continue };
        config::reseal_value(state, &item, "sealed_secret_key", &key_context(&mount.uuid, &name), tally).await?;
    }
    Ok(())
}

/// The names of a mount's static roles.
pub async fn list(store: &dyn ItemStore, mount: &Mount) -> Result<Vec<String>> {
    mounts::names(store, keys::mount_static_roles(&mount.uuid)).await
}

/// Removes the role and the keys the broker created for it, as Vault does; the IAM user stays.
/// The keys go first, so a failure leaves the role to delete again; a role rotated meanwhile
/// is read again, so its new key goes too.
pub async fn delete(state: &AppState, mount: &Mount, name: &str) -> Result<()> {
    const ATTEMPTS: usize = 3;
    for _ in 0..ATTEMPTS {
        let Some(role) = load(state.store.as_ref(), mount, name).await? else { return Ok(()) };
        let (cloud, _) = config::mount_cloud(state, mount).await?;
        if role.is_being_written() || role.claim.is_some() {
            // Never under a write or a rotation making a key: its key would outlive the role.
            claims::settle(state, &cloud, mount, &role).await?;
            continue;
        }
        delete_keys(&cloud, &role).await?;
        let unchanged = Condition::equals("sealed_secret_key", role.sealed_secret_key.clone());
        match state.store.delete(&keys::mount_static_role(&mount.uuid, name), unchanged).await {
            Err(e) if e.is_condition_failed() => continue,
            other => return other.map(drop).map_err(BrokerError::from),
        }
    }
    Err(BrokerError::Conflict(format!("static role {name} kept changing while it was deleted; try again")))
}
