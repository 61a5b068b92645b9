//! Auth methods enabled at paths under `auth/` (`sys/auth`): Vault's JWT method, as many times
//! as wanted (`auth/jwt`, `auth/github-actions`, …), beside the token store that is always at
//! `auth/token`. Each mount's configuration and roles live in a partition of its own, named by
//! its uuid, so disabling it removes them in one walk; the tokens it issued are revoked with it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::error::{BrokerError, Result};
use super::mounts;
use crate::store::{keys, query_all_as, Condition, Item, ItemStore};

/// The one auth method type the broker offers besides its token store.
pub const JWT: &str = "jwt";
/// Most auth methods one broker holds: each login reads them all to find its own.
pub const MAX_AUTH_MOUNTS: usize = 64;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuthMount {
    /// Without slashes at either end, e.g. `jwt` or `ci/github`.
    pub path: String,
    pub kind: String,
    pub uuid: String,
    pub accessor: String,
    pub description: String,
}

/// Checks and normalises an auth method's path.
pub fn normalize(path: &str) -> Result<String> {
    let path = path.trim_matches('/');
    if path.len() > 128 || !mounts::well_formed(path) {
        return Err(BrokerError::invalid(format!("invalid auth path `{path}`")));
    }
    if path == "token" || path.starts_with("token/") {
        return Err(BrokerError::invalid("cannot mount under token/: the token store is there"));
    }
    Ok(path.to_owned())
}

pub async fn all(store: &dyn ItemStore) -> Result<Vec<AuthMount>> {
    Ok(query_all_as(store, keys::broker_auth_mounts()).await?)
}

/// The auth method serving a path under `auth/` (the longest path it starts with), and the
/// rest of the path within it.
pub async fn route<'p>(store: &dyn ItemStore, path: &'p str) -> Result<Option<(AuthMount, &'p str)>> {
    Ok(mounts::longest_prefix(all(store).await?, path, |m| &m.path))
}

pub async fn find(store: &dyn ItemStore, path: &str) -> Result<Option<AuthMount>> {
    let Ok(path) = normalize(path) else { return Ok(None) };
    let item = store.get(&keys::broker_auth_mount(&path)).await?;
    Ok(item.map(|item| item.parse()).transpose()?)
}

pub async fn enable(store: &dyn ItemStore, path: &str, kind: &str, description: &str) -> Result<()> {
    if kind != JWT {
        return Err(BrokerError::invalid(format!("unknown auth method type `{kind}`: this broker offers `jwt`")));
    }
    let path = normalize(path)?;
    let existing = all(store).await?;
    if existing.len() >= MAX_AUTH_MOUNTS {
        return Err(BrokerError::invalid(format!("at most {MAX_AUTH_MOUNTS} auth methods may be enabled")));
    }
    if let Some(existing) = mounts::overlapping(&existing, &path, |m| &m.path) {
        return Err(BrokerError::invalid(format!("path is already in use at auth/{}/", existing.path)));
    }
    let mount = AuthMount {
        path: path.clone(),
        kind: kind.to_owned(),
        uuid: uuid::Uuid::new_v4().to_string(),
        accessor: format!("auth_{kind}_{}", crate::ids::random_token(8).to_lowercase()),
        description: description.to_owned(),
    };
    match store.put(Item::from_value(keys::broker_auth_mount(&path), &mount)?, Condition::NotExists).await {
        Err(e) if e.is_condition_failed() => {
            Err(BrokerError::invalid(format!("path is already in use at auth/{path}/")))
        }
        other => Ok(other?),
    }
}

/// Removes an auth method, its configuration and its roles. The mount goes first, so no login
/// starts meanwhile; the tokens it issued are then revoked by the caller (`tokens`).
pub async fn disable(store: &dyn ItemStore, path: &str) -> Result<Option<AuthMount>> {
    let Some(mount) = find(store, path).await? else { return Ok(None) };
    store.delete(&keys::broker_auth_mount(&mount.path), Condition::Always).await?;
    mounts::delete_partition(store, &mount.uuid).await?;
    Ok(Some(mount))
}

/// The token store's entry, which `sys/auth` always lists.
fn token_store() -> Value {
    describe_parts("token", "token based credentials", "auth_token_root", "token")
}

/// An auth method as `sys/auth` shows it.
pub fn describe(mount: &AuthMount) -> Value {
    describe_parts(&mount.kind, &mount.description, &mount.accessor, &mount.uuid)
}

fn describe_parts(kind: &str, description: &str, accessor: &str, uuid: &str) -> Value {
    json!({
        "type": kind,
        "description": description,
        "accessor": accessor,
        "uuid": uuid,
        "config": { "default_lease_ttl": 0, "max_lease_ttl": 0, "token_type": "default-service" },
        "local": false,
        "seal_wrap": false,
        "external_entropy_access": false,
        "options": null,
    })
}

/// Every auth method by `<path>/`, the token store's included.
pub async fn listing(store: &dyn ItemStore) -> Result<Map<String, Value>> {
    let mut listed = Map::new();
    listed.insert("token/".into(), token_store());
    for mount in all(store).await? {
        listed.insert(format!("{}/", mount.path), describe(&mount));
    }
    Ok(listed)
}
