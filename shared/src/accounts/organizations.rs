//! Organizations: created by the site admin with their `owners` team, renamed atomically,
//! deleted with everything they own.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cascade;
use super::error::{AccountsError, Result};
use super::names;
use super::teams::Team;
use crate::auth::{Permission, Principal};
use crate::blobs::BlobStore;
use crate::ids::new_id;
use crate::store::{keys, Condition, Item, ItemStore, Key, UpdateOp, Write};

/// Attribute of the organization item that is true until deletion starts; every write that
/// adds to the organization checks it, so nothing is created inside a vanishing organization.
pub const ACTIVE: &str = "active";
/// Counters kept on the organization item, for list totals without counting.
pub const TEAM_COUNT: &str = "team_count";
pub const WORKSPACE_COUNT: &str = "workspace_count";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Organization {
    /// The immutable id (`org-…`), HCP Terraform's `external-id`; names can change.
    pub id: String,
    pub name: String,
    pub email: String,
    pub created_at: String,
    #[serde(default)]
    pub team_count: usize,
    #[serde(default)]
    pub workspace_count: usize,
    #[serde(default)]
    pub private_module_count: usize,
    #[serde(default)]
    pub public_module_count: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct NameMarker {
    org_id: String,
}

/// The write that lets a new item join the organization: counts it, and fails if the
/// organization is being deleted.
pub fn join(org_id: &str, counter: &str, delta: i64) -> Write {
    Write::Update {
        key: keys::organization(org_id),
        ops: vec![UpdateOp::Add(counter.into(), delta)],
        condition: Condition::equals(ACTIVE, true),
    }
}

async fn by_id(store: &dyn ItemStore, org_id: &str) -> Result<Option<Organization>> {
    match store.get(&keys::organization(org_id)).await? {
        Some(item) if item.attrs.get(ACTIVE) == Some(&Value::Bool(true)) => Ok(Some(item.parse()?)),
        _ => Ok(None),
    }
}

/// The organization with this name, if the principal may see it; else `NotFound`.
pub async fn visible(store: &dyn ItemStore, principal: &Principal, name: &str) -> Result<Organization> {
    authorized(store, principal, name, Permission::Read).await
}

/// The organization with this name, if the principal holds `permission` in it. A principal
/// that cannot even read it learns nothing (`NotFound`); one that can read it but lacks the
/// permission is told so.
pub async fn authorized(
    store: &dyn ItemStore,
    principal: &Principal,
    name: &str,
    permission: Permission,
) -> Result<Organization> {
    let org_id = own_id(store, name).await?.ok_or(AccountsError::NotFound)?;
    let org = by_id(store, &org_id).await?.ok_or(AccountsError::NotFound)?;
    require(principal, &org.id, permission)?;
    Ok(org)
}

/// Checks a permission in an organization the principal is known to see.
pub fn require(principal: &Principal, org_id: &str, permission: Permission) -> Result<()> {
    if !principal.can(org_id, Permission::Read) {
        return Err(AccountsError::NotFound);
    }
    if !principal.can(org_id, permission) {
        return Err(AccountsError::Forbidden(format!(
            "This token lacks the {} permission.",
            permission_name(permission)
        )));
    }
    Ok(())
}

fn permission_name(permission: Permission) -> &'static str {
    match permission {
        Permission::Read => "read",
        Permission::ManageModules => "manage-modules",
        Permission::ManageAgentPools => "manage-agent-pools",
        Permission::ManageWorkspaces => "manage-workspaces",
        Permission::Own => "owners",
    }
}

async fn own_id(store: &dyn ItemStore, name: &str) -> Result<Option<String>> {
    match store.get(&keys::organization_name(name)).await? {
        Some(item) => Ok(Some(item.parse::<NameMarker>()?.org_id)),
        None => Ok(None),
    }
}

/// Looks an organization up by id (for resources reached by their own id).
pub async fn get_by_id(store: &dyn ItemStore, org_id: &str) -> Result<Organization> {
    by_id(store, org_id).await?.ok_or(AccountsError::NotFound)
}

fn org_item(org: &Organization) -> Result<Item> {
    let (index, pk, sk) = keys::organization_index_key(&org.name);
    let mut item = Item::from_value(keys::organization(&org.id), org)?.with_index(index, pk, sk);
    item.attrs.insert(ACTIVE.into(), Value::Bool(true));
    Ok(item)
}

fn marker_item(name: &str, org_id: &str) -> Result<Item> {
    Ok(Item::from_value(keys::organization_name(name), &NameMarker { org_id: org_id.to_owned() })?)
}

pub struct NewOrganization {
    pub name: String,
    pub email: String,
}

/// Creates the organization and its owners team in one transaction.
pub async fn create(store: &dyn ItemStore, principal: &Principal, new: NewOrganization) -> Result<Organization> {
    if !principal.is_site_admin() {
        return Err(AccountsError::Forbidden("Only the site administrator can create organizations.".into()));
    }
    names::check("/data/attributes/name", &new.name, names::ORGANIZATION_NAME_MAX)?;
    names::check_email("/data/attributes/email", &new.email)?;
    let now = crate::api::timestamp(chrono::Utc::now());
    let mut org = Organization {
        id: new_id("org"),
        name: new.name,
        email: new.email,
        created_at: now.clone(),
        team_count: 1,
        workspace_count: 0,
        private_module_count: 0,
        public_module_count: 0,
    };
    let owners = Team::owners(&org.id, &now);
    let mut writes = vec![
        Write::Put { item: marker_item(&org.name, &org.id)?, condition: Condition::NotExists },
        Write::Put { item: org_item(&org)?, condition: Condition::NotExists },
    ];
    writes.extend(owners.creation_writes()?);
    writes.push(count_created());
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(0) => Err(AccountsError::taken("/data/attributes/name")),
        other => other.map_err(AccountsError::from),
    }?;
    org.team_count = 1;
    Ok(org)
}

pub struct OrganizationChanges {
    pub name: Option<String>,
    pub email: Option<String>,
}

/// Updates the email and, atomically, the name (moving the name marker).
pub async fn update(
    store: &dyn ItemStore,
    principal: &Principal,
    name: &str,
    changes: OrganizationChanges,
) -> Result<Organization> {
    let mut org = authorized(store, principal, name, Permission::Own).await?;
    let mut ops = Vec::new();
    let mut writes = Vec::new();
    if let Some(email) = changes.email {
        names::check_email("/data/attributes/email", &email)?;
        ops.push(UpdateOp::set("email", email.clone()));
        org.email = email;
    }
    if let Some(new_name) = changes.name.filter(|n| *n != org.name) {
        names::check("/data/attributes/name", &new_name, names::ORGANIZATION_NAME_MAX)?;
        let (_, _, index_sk) = keys::organization_index_key(&new_name);
        writes.push(Write::Put { item: marker_item(&new_name, &org.id)?, condition: Condition::NotExists });
        writes.push(Write::Delete {
            key: keys::organization_name(&org.name),
            condition: Condition::equals("org_id", org.id.clone()),
        });
        ops.push(UpdateOp::set("name", new_name.clone()));
        ops.push(UpdateOp::set(crate::store::Index::Gsi1.key_attrs().1, index_sk));
        org.name = new_name;
    }
    if ops.is_empty() {
        return Ok(org);
    }
    writes.push(Write::Update { key: keys::organization(&org.id), ops, condition: Condition::equals(ACTIVE, true) });
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(0) && org.name != name => Err(AccountsError::taken("/data/attributes/name")),
        other => other.map_err(AccountsError::from),
    }?;
    Ok(org)
}

/// Deletes the organization and everything it owns. First the organization stops accepting
/// new items, then its partition is purged, then it goes; an interrupted delete can be rerun.
pub async fn delete(store: &dyn ItemStore, blobs: &dyn BlobStore, principal: &Principal, name: &str) -> Result<()> {
    // Found whether or not a deletion already started, so an interrupted one can be finished.
    let org_id = own_id(store, name).await?.ok_or(AccountsError::NotFound)?;
    let org_key: Key = keys::organization(&org_id);
    let org: Organization = store.get(&org_key).await?.ok_or(AccountsError::NotFound)?.parse()?;
    require(principal, &org.id, Permission::Own)?;
    store.update(&org_key, vec![UpdateOp::set(ACTIVE, false)], Condition::Exists).await?;
    cascade::purge_partition(store, blobs, &org.id).await?;
    store
        .transact(vec![
            Write::Delete { key: keys::organization_name(&org.name), condition: Condition::Always },
            Write::Delete { key: org_key, condition: Condition::Exists },
            Write::Update {
                key: keys::organization_total(),
                ops: vec![UpdateOp::Add("count".into(), -1)],
                condition: Condition::Always,
            },
        ])
        .await
        .map_err(|e| if e.failed_write() == Some(1) { AccountsError::NotFound } else { e.into() })
}

/// The organizations the principal can see, by name: all of them for the site admin, its
/// own for a team token.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    page: &crate::api::PageRequest,
) -> Result<(Vec<Organization>, usize)> {
    match principal.org_id() {
        Some(org_id) => {
            let own: Vec<Organization> = by_id(store, org_id).await?.into_iter().collect();
            let total = own.len();
            Ok((page.slice(own), total))
        }
        None => {
            let (index, partition, _) = keys::organizations_by_name();
            let items = page.fetch(store, crate::store::Query::index(index, partition, "")).await?;
            let total = store
                .get(&keys::organization_total())
                .await?
                .and_then(|item| item.attrs.get("count").and_then(Value::as_u64))
                .unwrap_or(0) as usize;
            let orgs = items
                .iter()
                .filter(|i| i.attrs.get(ACTIVE) == Some(&Value::Bool(true)))
                .map(Item::parse)
                .collect::<Result<_, _>>()?;
            Ok((orgs, total))
        }
    }
}

/// The write that counts a new organization in the site-wide total.
pub fn count_created() -> Write {
    Write::Update {
        key: keys::organization_total(),
        ops: vec![UpdateOp::Add("count".into(), 1)],
        condition: Condition::Always,
    }
}
