//! Static roles (one existing IAM user each, whose keys the engine rotates), `static-creds`,
//! `config/rotate-root`, and the rotation the scheduled job runs.
//!
//! A due role is claimed by moving its next rotation forward with a conditional write, so two
//! overlapping runs never rotate it twice; the new key replaces the stored one only once it
//! exists, so a role always keeps a working key. A schedule index ordered by next rotation
//! lets a run read only what is due.

use std::collections::HashMap;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::config;
use super::credentials::cloud;
use super::duration;
use super::engine::EngineRequest;
use super::error::{BrokerError, Result};
use super::http::VaultResponse;
use super::mounts::{self, Mount};
use crate::app::AppState;
use crate::aws::{self, SharedCloud};
use crate::store::{keys, query_all, Condition, Index, Item};

const SCHEDULE_PARTITION: &str = "BSTATIC";
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
}

fn item(role: &StaticRole) -> Result<Item> {
    let item = Item::from_value(keys::mount_static_role(&role.mount_uuid, &role.name), role)?;
    let schedule = super::schedule_sort_key(role.next_rotation, &format!("{}#{}", role.mount_uuid, role.name));
    Ok(item.with_index(Index::Gsi1, SCHEDULE_PARTITION, schedule))
}

async fn load(state: &AppState, mount: &Mount, name: &str) -> Result<Option<StaticRole>> {
    match state.store.get(&keys::mount_static_role(&mount.uuid, name)).await? {
        Some(found) => Ok(Some(found.parse()?)),
        None => Ok(None),
    }
}

/// Replaces the oldest key when the user already has two, then creates one: Vault's order.
async fn new_key(cloud: &SharedCloud, user: &str, keep: Option<&str>) -> Result<aws::AccessKey> {
    let mut existing = cloud.list_access_keys(Some(user)).await?;
    if existing.len() >= 2 {
        existing.sort_by_key(|k| k.created);
        if let Some(oldest) = existing.iter().find(|k| Some(k.id.as_str()) != keep) {
            cloud.delete_access_key(Some(user), &oldest.id).await?;
        }
    }
    Ok(cloud.create_access_key(Some(user)).await?)
}

fn body(request: &EngineRequest<'_>) -> Result<Map<String, Value>> {
    match &request.body {
        Some(Value::Object(map)) => Ok(map.clone()),
        None | Some(Value::Null) => Ok(Map::new()),
        Some(_) => Err(BrokerError::invalid("the request body must be a JSON object")),
    }
}

pub(super) async fn write(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    let state = request.state;
    let body = body(request)?;
    let existing = load(state, &request.mount, name).await?;
    let username = match body.get("username").and_then(Value::as_str).map(str::trim).filter(|u| !u.is_empty()) {
        Some(username) => username.to_owned(),
        None => {
            existing.as_ref().map(|r| r.username.clone()).ok_or_else(|| BrokerError::invalid("username is required"))?
        }
    };
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
            role.rotation_period = period.as_secs();
            role.next_rotation = now + period.as_secs() as i64;
            role
        }
        None => {
            let (cloud, _) = cloud(request).await?;
            let user = cloud.get_user(Some(&username)).await.map_err(|e| match e {
                aws::CloudError::NotFound(_) => BrokerError::invalid(format!("IAM user {username} does not exist")),
                other => other.into(),
            })?;
            let key = new_key(&cloud, &username, None).await?;
            StaticRole {
                name: name.to_owned(),
                mount_uuid: request.mount.uuid.clone(),
                username,
                user_id: user.id,
                rotation_period: period.as_secs(),
                access_key: key.id,
                sealed_secret_key: state.sealer.seal(&key.secret).await?,
                next_rotation: now + period.as_secs() as i64,
            }
        }
    };
    state.store.put(item(&role)?, Condition::Always).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Fields the spec places at the top level; they are in `data` too, where Vault clients look.
fn top_level(fields: Value) -> Response {
    let map = fields.as_object().cloned().unwrap_or_default();
    VaultResponse::data(fields).with_top_level(&map).into_response()
}

pub(super) async fn read(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    let role = load(request.state, &request.mount, name).await?.ok_or(BrokerError::NotFound)?;
    Ok(top_level(json!({ "name": role.name, "username": role.username, "rotation_period": role.rotation_period })))
}

pub(super) async fn creds(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    let role = load(request.state, &request.mount, name).await?.ok_or(BrokerError::NotFound)?;
    let secret = request.state.sealer.unseal(&role.sealed_secret_key).await?;
    Ok(top_level(json!({ "access_key": role.access_key, "secret_key": secret })))
}

pub(super) async fn list(request: &EngineRequest<'_>) -> Result<Response> {
    let items = query_all(request.state.store.as_ref(), keys::mount_static_roles(&request.mount.uuid)).await?;
    let names = items.iter().filter_map(|i| i.attrs.get("name").and_then(Value::as_str).map(str::to_owned)).collect();
    Ok(VaultResponse::keys(names)?.into_response())
}

/// Removes the definition only; the IAM user and its keys stay, as in Vault.
pub(super) async fn delete(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    request.state.store.delete(&keys::mount_static_role(&request.mount.uuid, name), Condition::Always).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `config/rotate-root`: a new key for the engine's own user, stored, then the old one deleted.
pub(super) async fn rotate_root(request: &EngineRequest<'_>) -> Result<Response> {
    let state = request.state;
    let (cloud, mut root) = cloud(request).await?;
    if root.access_key.is_empty() {
        return Err(BrokerError::invalid("rotate-root needs static credentials in config/root"));
    }
    let user = cloud.get_user(None).await?;
    let keys = cloud.list_access_keys(Some(&user.name)).await?;
    if keys.len() > 1 {
        return Err(BrokerError::invalid(format!(
            "IAM user {} has {} access keys; rotate-root needs the engine's key to be its only one",
            user.name,
            keys.len()
        )));
    }
    let new = cloud.create_access_key(Some(&user.name)).await?;
    let old = std::mem::replace(&mut root.access_key, new.id.clone());
    root.sealed_secret_key = Some(state.sealer.seal(&new.secret).await?);
    let stored = Item::from_value(keys::mount_config(&request.mount.uuid, "root"), &root)?;
    state.store.put(stored, Condition::Always).await?;
    // The old key goes only once the new one is stored; until then both work.
    if let Err(e) = cloud.delete_access_key(Some(&user.name), &old).await {
        tracing::warn!(error = %e, "the previous root key could not be deleted");
    }
    Ok(VaultResponse::data(json!({ "access_key": new.id })).into_response())
}

/// Rotates up to `limit` static roles that are due; returns how many were rotated. The root
/// configuration and AWS client of each mount are looked up once per run, not once per role.
pub async fn rotate_due(state: &AppState, limit: usize) -> Result<usize> {
    let now = chrono::Utc::now().timestamp();
    let due = super::due(state.store.as_ref(), SCHEDULE_PARTITION, now, limit).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mounts = mounts::all(state.store.as_ref()).await?;
    let mut clouds = HashMap::new();
    let mut rotated = 0;
    for found in due {
        let role: StaticRole = found.parse()?;
        let mount = mounts.iter().find(|m| m.uuid == role.mount_uuid);
        match rotate(state, role, mount, &mut clouds, now).await {
            Ok(true) => rotated += 1,
            Ok(false) => {}
            Err((name, e)) => tracing::warn!(role = %name, error = %e, "static role not rotated; retried next run"),
        }
    }
    Ok(rotated)
}

/// The AWS client of a mount's root configuration, from the run's cache.
async fn mount_cloud(
    state: &AppState,
    mount: &Mount,
    clouds: &mut HashMap<String, SharedCloud>,
) -> Result<SharedCloud> {
    if let Some(cloud) = clouds.get(&mount.uuid) {
        return Ok(cloud.clone());
    }
    let root = config::root(state, mount).await?;
    let cloud = config::cloud(state, &root).await?;
    clouds.insert(mount.uuid.clone(), cloud.clone());
    Ok(cloud)
}

/// Claims a due role (conditional on its schedule being unchanged) and rotates its key. A lost
/// claim, or a role whose mount is gone, is `Ok(false)`; a failure leaves the stored key as it
/// was and reschedules soon.
async fn rotate(
    state: &AppState,
    role: StaticRole,
    mount: Option<&Mount>,
    clouds: &mut HashMap<String, SharedCloud>,
    now: i64,
) -> std::result::Result<bool, (String, BrokerError)> {
    let name = role.name.clone();
    let fail = |e: BrokerError| (name.clone(), e);
    let mut claimed = role.clone();
    claimed.next_rotation = now + role.rotation_period as i64;
    let claim = item(&claimed).map_err(fail)?;
    match state.store.put(claim, Condition::equals("next_rotation", role.next_rotation)).await {
        Err(e) if e.is_condition_failed() => return Ok(false),
        other => other.map_err(|e| fail(e.into()))?,
    }
    let Some(mount) = mount else { return Ok(false) };
    let rotated: Result<StaticRole> = async {
        let cloud = mount_cloud(state, mount, clouds).await?;
        let key = new_key(&cloud, &role.username, Some(&role.access_key)).await?;
        let mut next = claimed.clone();
        next.access_key = key.id;
        next.sealed_secret_key = state.sealer.seal(&key.secret).await?;
        Ok(next)
    }
    .await;
    match rotated {
        Ok(next) => {
            let written = item(&next).map_err(fail)?;
            state
                .store
                .put(written, Condition::equals("next_rotation", claimed.next_rotation))
                .await
                .map_err(|e| fail(e.into()))?;
            Ok(true)
        }
        Err(e) => {
            // Retry on the next run rather than a whole period later.
            let mut retry = claimed;
            retry.next_rotation = now;
            if let Ok(written) = item(&retry) {
                let _ = state
                    .store
                    .put(written, Condition::equals("next_rotation", now + role.rotation_period as i64))
                    .await;
            }
            Err(fail(e))
        }
    }
}
