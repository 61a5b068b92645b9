//! What other families use of the accounts family: the organization record, and the checks that
//! a principal may see or act in an organization. "Not allowed to see" and "missing" answer the
//! same `NotFound`, so a caller learns nothing about other organizations.

use serde::{Deserialize, Serialize};

use super::error::{AccountsError, Result};
use crate::auth::{NameRead, Permission, Principal};
use crate::store::{keys, Condition, Item, ItemStore, Key, UpdateOp, Write};

/// Attribute of the organization item that is true until deletion starts; every write that
/// adds to the organization checks it, so nothing is created inside a vanishing organization.
pub const ACTIVE: &str = "active";
/// Counters kept on the organization item, for list totals without counting.
pub const TEAM_COUNT: &str = "team_count";
pub const WORKSPACE_COUNT: &str = "workspace_count";
/// The organization's private registry providers, counted on its item: a rename to a name
/// Terraform would not read as a namespace is conditioned on there being none.
pub const PRIVATE_PROVIDER_COUNT: &str = "private_provider_count";

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
    /// Whether it is active (not being deleted): the stored `active` attribute, only read here;
    /// the writes that create and retire an organization set the attribute themselves.
    #[serde(default, skip_serializing)]
    pub active: bool,
}

/// The item that maps an organization's name to its id.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct NameMarker {
    pub org_id: String,
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

/// The write that only checks the organization is not being deleted, for a transaction that
/// adds to it without counting anything.
pub fn still_active(org_id: &str) -> Write {
    Write::Update {
        key: keys::organization(org_id),
        ops: vec![UpdateOp::set(ACTIVE, true)],
        condition: Condition::equals(ACTIVE, true),
    }
}

pub(super) async fn by_id(store: &dyn ItemStore, org_id: &str) -> Result<Option<Organization>> {
    active(store.get(&keys::organization(org_id)).await?)
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
    let located = locate(store, principal, name, None).await?;
    Ok(authorized_at(store, principal, name, &located, permission, &[]).await?.0)
}

/// Where an organization named in a path is, before it is read: a team token's item names its
/// organization, so a team's is known without a read (and proven by the name marker read in the
/// same batch as the organization, see [`authorized_at`]); the site admin's names none, so its
/// takes a read of the name marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// The principal's own organization: to be checked against the name marker.
    Own(String),
    /// Read from the name marker.
    Named(String),
}

impl Located {
    pub fn org_id(&self) -> &str {
        match self {
            Located::Own(id) | Located::Named(id) => id,
        }
    }
}

/// Finds where the organization called `name` is for this principal: no read when its name
/// marker was read with the token (`read`, see [`crate::auth::Scoped`]) or for a team, else one.
pub async fn locate(
    store: &dyn ItemStore,
    principal: &Principal,
    name: &str,
    read: Option<&NameRead>,
) -> Result<Located> {
    if let Some(read) = read.filter(|read| read.name == name) {
        let marker = read.marker.as_ref().ok_or(AccountsError::NotFound)?.parse::<NameMarker>()?;
        return Ok(Located::Named(marker.org_id));
    }
    match principal.org_id() {
        Some(org_id) => Ok(Located::Own(org_id.to_owned())),
        None => Ok(Located::Named(own_id(store, name).await?.ok_or(AccountsError::NotFound)?)),
    }
}

/// The organization called `name` where [`locate`] found it, if the principal holds `permission`
/// in it, and the items at `also` (keys in its partition), all read in one BatchGetItem. Answers
/// as [`authorized`] does: a marker naming another organization than the token's is `NotFound`.
pub async fn authorized_at(
    store: &dyn ItemStore,
    principal: &Principal,
    name: &str,
    located: &Located,
    permission: Permission,
    also: &[Key],
) -> Result<(Organization, Vec<Option<Item>>)> {
    let org_id = located.org_id();
    let mut wanted = vec![keys::organization(org_id)];
    if matches!(located, Located::Own(_)) {
        wanted.push(keys::organization_name(name));
    }
    wanted.extend_from_slice(also);
    let mut found = store.get_many(&wanted).await?.into_iter();
    let org = active(found.next().flatten())?;
    if let Located::Own(_) = located {
        let marker = found.next().flatten().map(|item| item.parse::<NameMarker>()).transpose()?;
        if marker.is_none_or(|marker| marker.org_id != org_id) {
            return Err(AccountsError::NotFound);
        }
    }
    let org = org.ok_or(AccountsError::NotFound)?;
    require(principal, &org.id, permission)?;
    Ok((org, found.collect()))
}

/// The checks, for a transaction that must hold only where a read at `located` would find the
/// organization called `name` (one that counts a download, say): that it is not being deleted
/// and, where the name marker was not read already, that the name is still its own.
pub fn still_there(name: &str, located: &Located) -> Vec<Write> {
    let org_id = located.org_id();
    let mut checks = vec![Write::Check { key: keys::organization(org_id), condition: Condition::equals(ACTIVE, true) }];
    if let Located::Own(_) = located {
        let condition = Condition::equals("org_id", org_id);
        checks.push(Write::Check { key: keys::organization_name(name), condition });
    }
    checks
}

/// The organization with this id and the items at `also`, read in one BatchGetItem, if the
/// principal holds `permission` in it: for resources reached by their own id whose organization
/// is known before the read (a team's own).
pub async fn by_id_with(
    store: &dyn ItemStore,
    principal: &Principal,
    org_id: &str,
    permission: Permission,
    also: &[Key],
) -> Result<(Organization, Vec<Option<Item>>)> {
    require(principal, org_id, permission)?;
    let mut wanted = vec![keys::organization(org_id)];
    wanted.extend_from_slice(also);
    let mut found = store.get_many(&wanted).await?;
    let org = active(found.remove(0))?.ok_or(AccountsError::NotFound)?;
    Ok((org, found))
}

fn active(item: Option<Item>) -> Result<Option<Organization>> {
    let organization = item.map(|item| item.parse::<Organization>()).transpose()?;
    Ok(organization.filter(|organization| organization.active))
}

/// Checks a permission in an organization the principal is known to see.
pub fn require(principal: &Principal, org_id: &str, permission: Permission) -> Result<()> {
    // A run's job token holds a narrow permission without `Read`: it sees the organization only
    // through what it holds.
    if !principal.can(org_id, Permission::Read) && !principal.can(org_id, permission) {
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
        Permission::ManageProviders => "manage-providers",
        Permission::ManageAgentPools => "manage-agent-pools",
        Permission::ManageWorkspaces => "manage-workspaces",
        Permission::Own => "owners",
        Permission::ReadRegistry => "read the registry",
        Permission::FindWorkspaces => "read workspaces",
    }
}

pub(super) async fn own_id(store: &dyn ItemStore, name: &str) -> Result<Option<String>> {
    match store.get(&keys::organization_name(name)).await? {
        Some(item) => Ok(Some(item.parse::<NameMarker>()?.org_id)),
        None => Ok(None),
    }
}

/// Looks an organization up by id (for resources reached by their own id).
pub async fn get_by_id(store: &dyn ItemStore, org_id: &str) -> Result<Organization> {
    by_id(store, org_id).await?.ok_or(AccountsError::NotFound)
}
