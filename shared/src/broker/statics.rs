//! Static roles: one existing IAM user each, whose keys the engine holds (sealed) and rotates.
//! A schedule index ordered by next rotation lets the scheduled run (`rotation.rs`) read only
//! the roles that are due.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{BrokerError, Result};
use super::mounts::{self, Mount};
use super::{config, duration};
use crate::aws::{self, SharedCloud};
use crate::seal::SealContext;
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore};

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
}

/// The IAM path in a user's ARN (`arn:…:user/<path>/<name>` gives `/<path>/`).
fn path_of(arn: &str) -> Option<String> {
    let rest = arn.split_once(":user/")?.1;
    Some(format!("/{}", &rest[..rest.rfind('/').map_or(0, |i| i + 1)]))
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
    let mut existing = cloud.list_access_keys(Some(user)).await?;
    if existing.len() >= 2 {
        existing.sort_by_key(|k| k.created);
        if let Some(oldest) = existing.iter().find(|k| Some(k.id.as_str()) != keep) {
            cloud.delete_access_key(Some(user), &oldest.id).await?;
        }
    }
    Ok(cloud.create_access_key(Some(user)).await?)
}

/// IAM's rule for a user name, checked before AWS is asked to find one.
fn is_iam_user_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

/// Writes `static-roles/:name`. A new role, or a new user, gets a fresh key from AWS; the same
/// user with a new period keeps its keys and restarts its schedule.
pub async fn write(state: &AppState, mount: &Mount, name: &str, body: &Map<String, Value>) -> Result<()> {
    let existing = load(state.store.as_ref(), mount, name).await?;
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
    let role = match existing.filter(|r| r.username == username) {
        // Same user: a new period resets the schedule, keys stay.
        Some(mut role) => {
            check_user(state, &role.username, role.user_path.as_deref())?;
            role.rotation_period = period.as_secs();
            role.next_rotation = now + period.as_secs() as i64;
            role
        }
        None => {
            let (cloud, _) = config::mount_cloud(state, mount).await?;
            let user = cloud.get_user(Some(&username)).await.map_err(|e| match e {
                aws::CloudError::NotFound(_) => BrokerError::invalid(format!("IAM user {username} does not exist")),
                other => other.into(),
            })?;
            let user_path = path_of(&user.arn);
            check_user(state, &username, user_path.as_deref())?;
            let key = new_key(&cloud, &username, None).await?;
            StaticRole {
                name: name.to_owned(),
                mount_uuid: mount.uuid.clone(),
                username,
                user_id: user.id,
                rotation_period: period.as_secs(),
                access_key: key.id,
                sealed_secret_key: state.sealer.seal_for(&key_context(&mount.uuid, name), &key.secret).await?,
                next_rotation: now + period.as_secs() as i64,
                user_path,
            }
        }
    };
    state.store.put(item(&role)?, Condition::Always).await?;
    Ok(())
}

/// `static-creds/:name`: the role's current key, unsealed, as (access key id, secret key).
pub async fn creds(state: &AppState, mount: &Mount, name: &str) -> Result<(String, String)> {
    let role = load(state.store.as_ref(), mount, name).await?.ok_or(BrokerError::NotFound)?;
    check_user(state, &role.username, role.user_path.as_deref())?;
    let secret = state.sealer.unseal_for(&key_context(&mount.uuid, name), &role.sealed_secret_key).await?;
    Ok((role.access_key, secret))
}

/// The names of a mount's static roles.
pub async fn list(store: &dyn ItemStore, mount: &Mount) -> Result<Vec<String>> {
    mounts::names(store, keys::mount_static_roles(&mount.uuid)).await
}

/// Removes the definition only; the IAM user and its keys stay, as in Vault.
pub async fn delete(store: &dyn ItemStore, mount: &Mount, name: &str) -> Result<()> {
    store.delete(&keys::mount_static_role(&mount.uuid, name), Condition::Always).await?;
    Ok(())
}
