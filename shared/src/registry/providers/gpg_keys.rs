//! GPG keys (HCP's `/api/registry/private/v2/gpg-keys`): the public keys that sign an
//! organization's provider releases. A key is parsed when it is added and belongs to one
//! organization (its namespace). Every version that names a key counts itself on the key's
//! item (`uses`, in the version's own transaction), and a key in use cannot be removed or moved:
//! what signs a served release stays registered.

use serde::{Deserialize, Serialize};

use crate::accounts::access::{self, Organization};
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{Permission, Principal};
use crate::ids::new_id;
use crate::openpgp;
use crate::registry::error::{RegistryError, Result};
use crate::store::{keys, query_all_as, Condition, Item, ItemStore, Transaction, Write};

/// The attribute of a key's item counting the versions it signs.
pub(super) const USES: &str = "uses";
/// The largest armored key taken: a key with its signatures is a few KiB.
const MAX_ARMOR: usize = 64 * 1024;
/// The most namespaces one list names.
const MAX_NAMESPACES: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpgKey {
    pub id: String,
    pub org_id: String,
    pub key_id: String,
    pub ascii_armor: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub uses: u64,
}

impl GpgKey {
    fn item(&self) -> Result<Item> {
        Ok(Item::from_value(keys::gpg_key(&self.org_id, &self.key_id), self)?)
    }
}

/// Adds a key to the namespace (organization) `namespace`.
pub async fn create(
    store: &dyn ItemStore,
    principal: &Principal,
    namespace: &str,
    armor: &str,
) -> Result<(GpgKey, Organization)> {
    if namespace.is_empty() {
        return Err(RegistryError::invalid(Field::Attribute("namespace"), "namespace is required"));
    }
    let org = access::authorized(store, principal, namespace, Permission::ManageProviders).await?;
    let field = Field::Attribute("ascii-armor");
    if armor.len() > MAX_ARMOR {
        return Err(RegistryError::invalid(field, format!("ascii-armor is over {} KiB", MAX_ARMOR / 1024)));
    }
    let parsed = openpgp::public_key(armor).map_err(|e| RegistryError::invalid(field, e.to_string()))?;
    let now = timestamp(chrono::Utc::now());
    let key = GpgKey {
        id: new_id("gpgkey"),
        org_id: org.id.clone(),
        key_id: parsed.key_id,
        ascii_armor: armor.to_owned(),
        created_at: now.clone(),
        updated_at: now,
        uses: 0,
    };
    match store.transact(vec![Write::Put { item: key.item()?, condition: Condition::NotExists }]).await {
        Ok(()) => Ok((key, org)),
        Err(e) if e.is_condition_failed() => Err(RegistryError::invalid(
            field,
            format!("the key {} is already registered in namespace {namespace}", key.key_id),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The keys of the namespaces named (each one the caller may read; any other is missing).
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    namespaces: &[&str],
    page: &PageRequest,
) -> Result<(Vec<(GpgKey, Organization)>, usize)> {
    if namespaces.is_empty() || namespaces.len() > MAX_NAMESPACES {
        return Err(RegistryError::invalid(
            Field::Document,
            format!("filter[namespace] must name 1 to {MAX_NAMESPACES} namespaces"),
        ));
    }
    let mut all = Vec::new();
    for namespace in namespaces {
        let org = access::authorized(store, principal, namespace, Permission::Read).await?;
        let keys: Vec<GpgKey> = query_all_as(store, keys::gpg_keys(&org.id)).await?;
        all.extend(keys.into_iter().map(|key| (key, org.clone())));
    }
    let total = all.len();
    Ok((page.slice(all), total))
}

/// One key, if the caller may read its namespace.
pub async fn get(
    store: &dyn ItemStore,
    principal: &Principal,
    namespace: &str,
    key_id: &str,
) -> Result<(GpgKey, Organization)> {
    let org = access::authorized(store, principal, namespace, Permission::Read).await?;
    Ok((read(store, &org, key_id).await?, org))
}

/// A key of the organization by its id (case as HCP shows it, upper-case hex).
pub(super) async fn read(store: &dyn ItemStore, org: &Organization, key_id: &str) -> Result<GpgKey> {
    let key_id = key_id.to_ascii_uppercase();
    if key_id.len() != 16 || !key_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RegistryError::NotFound);
    }
    Ok(store.get(&keys::gpg_key(&org.id, &key_id)).await?.ok_or(RegistryError::NotFound)?.parse()?)
}

/// Moves a key to another namespace the caller also manages providers in (HCP's only change
/// to a key); a key that signs versions stays where they are.
pub async fn update(
    store: &dyn ItemStore,
    principal: &Principal,
    namespace: &str,
    key_id: &str,
    to: &str,
) -> Result<(GpgKey, Organization)> {
    let org = access::authorized(store, principal, namespace, Permission::ManageProviders).await?;
    let key = read(store, &org, key_id).await?;
    if to.is_empty() || to == namespace {
        return Ok((key, org));
    }
    // go-tfe tells this refusal by its words (`ErrNamespaceNotAuthorized`), and not as a 404.
    let target = match access::authorized(store, principal, to, Permission::ManageProviders).await {
        Ok(target) => target,
        Err(e) => match RegistryError::from(e) {
            RegistryError::NotFound => return Err(RegistryError::Forbidden(format!("namespace not authorized: {to}"))),
            e => return Err(e),
        },
    };
    // Moved only while it signs nothing (the delete's condition): it arrives signing nothing.
    let moved = GpgKey { org_id: target.id.clone(), updated_at: timestamp(chrono::Utc::now()), uses: 0, ..key.clone() };
    let mut transaction = Transaction::new();
    let unused = transaction.add(Write::Delete { key: keys::gpg_key(&org.id, &key.key_id), condition: unused() });
    let free = transaction.add(Write::Put { item: moved.item()?, condition: Condition::NotExists });
    match transaction.commit(store).await {
        Ok(()) => Ok((moved, target)),
        Err(e) if e.failed_on(unused) => Err(in_use(&key)),
        Err(e) if e.failed_on(free) => Err(RegistryError::invalid(
            Field::Attribute("namespace"),
            format!("the key {} is already registered in namespace {to}", key.key_id),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Removes a key that signs no version.
pub async fn delete(store: &dyn ItemStore, principal: &Principal, namespace: &str, key_id: &str) -> Result<()> {
    let org = access::authorized(store, principal, namespace, Permission::ManageProviders).await?;
    let key = read(store, &org, key_id).await?;
    let removal = Write::Delete { key: keys::gpg_key(&org.id, &key.key_id), condition: unused() };
    match store.transact(vec![removal]).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_condition_failed() => match store.get(&keys::gpg_key(&org.id, &key.key_id)).await? {
            Some(_) => Err(in_use(&key)),
            None => Err(RegistryError::NotFound),
        },
        Err(e) => Err(e.into()),
    }
}

/// The key is there and signs no version.
fn unused() -> Condition {
    Condition::Exists.and(Condition::Below(USES.into(), 1))
}

fn in_use(key: &GpgKey) -> RegistryError {
    RegistryError::Conflict(format!(
        "the key {} signs provider versions; delete those versions before the key",
        key.key_id
    ))
}
