//! Workspaces: the subset other families need (agent pools attach to them). Names are unique
//! per organization, enforced by the item key itself.

use serde::{Deserialize, Serialize};

use super::cascade::{satellites, SATELLITES};
use super::error::{AccountsError, Result};
use super::names;
use super::organizations::{self, join, Organization, WORKSPACE_COUNT};
use crate::api::PageRequest;
use crate::auth::{Permission, Principal};
use crate::ids::new_id;
use crate::store::{keys, pointer, Condition, Item, ItemStore, Key, Write};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workspace {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub description: Option<String>,
    pub execution_mode: String,
    pub created_at: String,
}

impl Workspace {
    pub fn key(&self) -> Key {
        keys::workspace(&self.org_id, &self.name)
    }
}

pub struct NewWorkspace {
    pub name: String,
    pub description: Option<String>,
    pub execution_mode: Option<String>,
}

fn check_execution_mode(mode: Option<String>) -> Result<String> {
    match mode.as_deref() {
        None => Ok("remote".into()),
        Some(m @ ("remote" | "local")) => Ok(m.to_owned()),
        Some("agent") => Err(AccountsError::invalid(
            "/data/attributes/execution-mode",
            "`agent` needs an agent pool, and this organization has none that the workspace may use",
        )),
        Some(_) => {
            Err(AccountsError::invalid("/data/attributes/execution-mode", "must be `remote`, `local` or `agent`"))
        }
    }
}

pub async fn create(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    new: NewWorkspace,
) -> Result<(Workspace, Organization)> {
    let org = organizations::authorized(store, principal, org_name, Permission::ManageWorkspaces).await?;
    names::check("/data/attributes/name", &new.name, names::WORKSPACE_NAME_MAX)?;
    let workspace = Workspace {
        id: new_id("ws"),
        org_id: org.id.clone(),
        name: new.name,
        description: new.description,
        execution_mode: check_execution_mode(new.execution_mode)?,
        created_at: crate::api::timestamp(chrono::Utc::now()),
    };
    let mut item = Item::from_value(workspace.key(), &workspace)?;
    item.attrs.insert(SATELLITES.into(), satellites(&[keys::id_pointer(&workspace.id)]));
    let writes = vec![
        Write::Put { item, condition: Condition::NotExists },
        pointer::create(&workspace.id, &workspace.key())?,
        join(&org.id, WORKSPACE_COUNT, 1),
    ];
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(0) => Err(AccountsError::taken("/data/attributes/name")),
        Err(e) if e.failed_write() == Some(2) => Err(AccountsError::NotFound),
        other => other.map_err(AccountsError::from),
    }?;
    Ok((workspace, org))
}

/// A workspace by id, if the principal holds `permission` in its organization.
pub async fn get(
    store: &dyn ItemStore,
    principal: &Principal,
    id: &str,
    permission: Permission,
) -> Result<(Workspace, Organization)> {
    let workspace: Workspace = pointer::follow(store, id).await?.ok_or(AccountsError::NotFound)?.parse()?;
    organizations::require(principal, &workspace.org_id, permission)?;
    let org = organizations::get_by_id(store, &workspace.org_id).await?;
    Ok((workspace, org))
}

pub async fn get_by_name(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    name: &str,
    permission: Permission,
) -> Result<(Workspace, Organization)> {
    let org = organizations::authorized(store, principal, org_name, permission).await?;
    let workspace = store.get(&keys::workspace(&org.id, name)).await?.ok_or(AccountsError::NotFound)?.parse()?;
    Ok((workspace, org))
}

pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    page: &PageRequest,
) -> Result<(Vec<Workspace>, Organization)> {
    let org = organizations::visible(store, principal, org_name).await?;
    let items = page.fetch(store, keys::workspaces(&org.id)).await?;
    let workspaces = items.iter().map(Item::parse).collect::<Result<Vec<Workspace>, _>>()?;
    Ok((workspaces, org))
}

pub async fn delete(store: &dyn ItemStore, workspace: &Workspace) -> Result<()> {
    store
        .transact(vec![
            Write::Delete { key: workspace.key(), condition: Condition::Exists },
            pointer::remove(&workspace.id),
            join(&workspace.org_id, WORKSPACE_COUNT, -1),
        ])
        .await?;
    Ok(())
}
