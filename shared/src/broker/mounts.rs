//! Secrets engine mounts: the AWS engine at configurable paths, `aws` by default. Each mount's
//! configuration, roles and leases live in a partition of their own, named by the mount's id,
//! so they are its own and an unmount removes them in one walk.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::error::{BrokerError, Result};
use crate::store::{keys, query_all, query_all_as, Condition, Item, ItemStore, Query, Write, MAX_TRANSACTION_WRITES};

pub const DEFAULT_MOUNT: &str = "aws";
pub const AWS: &str = "aws";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Mount {
    /// Without slashes at either end, e.g. `aws` or `teams/payments`.
    pub path: String,
    pub kind: String,
    pub uuid: String,
    pub accessor: String,
    pub description: String,
}

/// Whether a path (without slashes at either end) is one a mount may have: segments of letters,
/// digits, `-`, `_` and `.`. Secrets engines and auth methods alike.
pub fn well_formed(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
}

/// Of `mounts`, the one whose path (`path_of`) is the longest that `path` starts with, and the
/// rest of `path` within it.
pub fn longest_prefix<T>(mounts: Vec<T>, path: &str, path_of: impl Fn(&T) -> &str) -> Option<(T, &str)> {
    let found = mounts
        .into_iter()
        .filter(|m| path == path_of(m) || path.starts_with(&format!("{}/", path_of(m))))
        .max_by_key(|m| path_of(m).len())?;
    let rest = path[path_of(&found).len()..].trim_start_matches('/');
    Some((found, rest))
}

/// Of `mounts`, one whose path is `path`, under it, or above it: where a new mount cannot go.
pub fn overlapping<'m, T>(mounts: &'m [T], path: &str, path_of: impl Fn(&T) -> &str) -> Option<&'m T> {
    mounts.iter().find(|m| {
        let at = path_of(m);
        at == path || path.starts_with(&format!("{at}/")) || at.starts_with(&format!("{path}/"))
    })
}

/// Deletes everything a mount's partition holds (its configuration, roles, leases), a
/// transaction's worth at a time.
pub async fn delete_partition(store: &dyn ItemStore, uuid: &str) -> Result<()> {
    let owned = query_all(store, keys::mount_partition(uuid)).await?;
    let deletes: Vec<Write> =
        owned.into_iter().map(|item| Write::Delete { key: item.key, condition: Condition::Always }).collect();
    for chunk in deletes.chunks(MAX_TRANSACTION_WRITES) {
        store.transact(chunk.to_vec()).await?;
    }
    Ok(())
}

/// Checks and normalises a mount path from a URL.
pub fn normalize(path: &str) -> Result<String> {
    let path = path.trim_matches('/');
    if !well_formed(path) {
        return Err(BrokerError::invalid(format!("invalid mount path `{path}`")));
    }
    if path == "sys" || path == "auth" || path.starts_with("sys/") || path.starts_with("auth/") {
        return Err(BrokerError::invalid(format!("cannot mount at `{path}/`: the path is reserved")));
    }
    Ok(path.to_owned())
}

fn new_mount(path: &str, description: &str) -> Mount {
    Mount {
        path: path.to_owned(),
        kind: AWS.to_owned(),
        uuid: crate::ids::random_token(20).to_lowercase(),
        accessor: format!("aws_{}", crate::ids::random_token(8).to_lowercase()),
        description: description.to_owned(),
    }
}

/// Mounts `aws` the first time the broker is used; once unmounted it stays unmounted.
async fn ensure_default(store: &dyn ItemStore) -> Result<()> {
    if store.get(&keys::broker_mounts_initialized()).await?.is_some() {
        return Ok(());
    }
    let mount = new_mount(DEFAULT_MOUNT, "the AWS secrets engine");
    let writes = vec![
        Write::Put { item: Item::new(keys::broker_mounts_initialized(), Map::new()), condition: Condition::NotExists },
        Write::Put {
            item: Item::from_value(keys::broker_mount(&mount.path), &mount)?,
            condition: Condition::NotExists,
        },
    ];
    match store.transact(writes).await {
        Err(e) if e.is_condition_failed() => Ok(()),
        other => Ok(other?),
    }
}

pub async fn all(store: &dyn ItemStore) -> Result<Vec<Mount>> {
    ensure_default(store).await?;
    Ok(query_all_as(store, keys::broker_mounts()).await?)
}

/// The mount that serves a request path (the longest mount path it starts with), and the rest
/// of the path within the mount.
pub async fn route<'p>(store: &dyn ItemStore, path: &'p str) -> Result<Option<(Mount, &'p str)>> {
    Ok(longest_prefix(all(store).await?, path, |m| &m.path))
}

pub async fn create(store: &dyn ItemStore, path: &str, kind: &str, description: &str) -> Result<()> {
    if kind != AWS {
        return Err(BrokerError::invalid(format!("unknown secrets engine type `{kind}`: this broker offers `aws`")));
    }
    let path = normalize(path)?;
    ensure_default(store).await?;
    let mounts = all(store).await?;
    if let Some(existing) = overlapping(&mounts, &path, |m| &m.path) {
        return Err(BrokerError::invalid(format!("path is already in use at {}/", existing.path)));
    }
    let mount = new_mount(&path, description);
    match store.put(Item::from_value(keys::broker_mount(&path), &mount)?, Condition::NotExists).await {
        Err(e) if e.is_condition_failed() => Err(BrokerError::invalid(format!("path is already in use at {path}/"))),
        other => Ok(other?),
    }
}

/// The `name` of every item a query of a mount's partition finds (its roles, its static roles):
/// what a LIST answers.
pub async fn names(store: &dyn ItemStore, query: Query) -> Result<Vec<String>> {
    let items = query_all(store, query).await?;
    let names = items.iter().map(|item| item.attr::<String>("name")).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(names.into_iter().flatten().collect())
}

/// Removes a mount and everything it holds; its leases are revoked first (`leases::unmount`).
pub async fn delete(store: &dyn ItemStore, path: &str) -> Result<Option<Mount>> {
    let path = normalize(path)?;
    ensure_default(store).await?;
    let Some(item) = store.get(&keys::broker_mount(&path)).await? else { return Ok(None) };
    let mount: Mount = item.parse()?;
    delete_partition(store, &mount.uuid).await?;
    store.delete(&keys::broker_mount(&path), Condition::Always).await?;
    Ok(Some(mount))
}

/// A mount as `sys/mounts` shows it.
pub fn describe(mount: &Mount) -> Value {
    json!({
        "type": mount.kind,
        "description": mount.description,
        "accessor": mount.accessor,
        "uuid": mount.uuid,
        "config": { "default_lease_ttl": 0, "max_lease_ttl": 0, "force_no_cache": false },
        "local": false,
        "seal_wrap": false,
        "options": null,
    })
}
