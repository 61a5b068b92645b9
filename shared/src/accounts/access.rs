//! What other families use of the accounts family: the organization record, and the checks that
//! a principal may see or act in an organization. "Not allowed to see" and "missing" answer the
//! same `NotFound`, so a caller learns nothing about other organizations.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{AccountsError, Result};
use crate::auth::{Permission, Principal};
use crate::store::{keys, Condition, ItemStore, UpdateOp, Write};

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
