//! Workspaces: the subset other families need. Names are unique per organization, enforced by
//! the item key itself; a workspace in `agent` execution mode runs on one agent pool, and the
//! pool records it in the same transaction.

use serde::{Deserialize, Serialize};

use super::access::{self, join, Organization, WORKSPACE_COUNT};
use super::error::{AccountsError, Result};
use crate::agents::pool;
use crate::api::Field;
use crate::api::PageRequest;
use crate::auth::{Permission, Principal};
use crate::ids::{new_id, Kind};
use crate::names;
use crate::store::{keys, parse_all, pointer, retry_on_race, Condition, Item, ItemStore, Key, Write};

const AGENT: &str = "agent";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workspace {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub description: Option<String>,
    pub execution_mode: String,
    /// The pool it runs on, in `agent` execution mode.
    #[serde(default)]
    pub agent_pool_id: Option<String>,
    pub created_at: String,
}

impl pointer::Addressed for Workspace {
    const KIND: Kind = Kind::Workspace;
}

impl Workspace {
    pub fn key(&self) -> Key {
        keys::workspace(&self.org_id, &self.name)
    }

    fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }
}

/// How a request sets a workspace's execution: a mode and, for `agent`, a pool.
#[derive(Debug, Default, Clone)]
pub struct Execution {
    pub mode: Option<String>,
    /// `Some(None)` when the request clears the pool.
    pub agent_pool: Option<Option<String>>,
}

/// The mode and pool a workspace ends up with, checked.
fn resolve(current: (&str, Option<&str>), execution: &Execution) -> Result<(String, Option<String>)> {
    let pool = match &execution.agent_pool {
        Some(pool) => pool.clone(),
        None => current.1.map(str::to_owned),
    };
    // Naming a pool without a mode means running on it, as HCP Terraform does.
    let mode = match (&execution.mode, &execution.agent_pool) {
        (Some(mode), _) => mode.clone(),
        (None, Some(Some(_))) => AGENT.to_owned(),
        (None, _) => current.0.to_owned(),
    };
    match (mode.as_str(), pool) {
        ("remote" | "local", _) => Ok((mode, None)),
        (AGENT, Some(pool)) => Ok((mode, Some(pool))),
        (AGENT, None) => Err(AccountsError::invalid(
            Field::Relationship("agent-pool"),
            "execution mode `agent` needs an agent pool the workspace may use",
        )),
        _ => Err(AccountsError::invalid(Field::Attribute("execution-mode"), "must be `remote`, `local` or `agent`")),
    }
}

/// The writes that move a workspace from one pool to another (either may be none).
async fn pool_writes(store: &dyn ItemStore, workspace: &Workspace, from: Option<&str>) -> Result<Vec<Write>> {
    let to = workspace.agent_pool_id.as_deref();
    let mut writes = Vec::new();
    if from != to {
        if let Some(old) = from {
            writes.extend(pool::detach(store, &workspace.org_id, old, &workspace.id).await?);
        }
    }
    if let Some(new) = to {
        writes.push(pool::attach(store, &workspace.org_id, new, &workspace.id).await?);
    }
    Ok(writes)
}

/// Commits the workspace's own writes with the pool writes, built afresh on each attempt and
/// retried when a pool changed meanwhile. A failure of an own write is the caller's to read.
async fn commit(store: &dyn ItemStore, workspace: &Workspace, from: Option<&str>, own: Vec<Write>) -> Result<()> {
    let own = &own;
    let committed = retry_on_race(|| async move {
        let pool = pool_writes(store, workspace, from).await?;
        let first_pool_write = own.len();
        let writes: Vec<Write> = own.iter().cloned().chain(pool).collect();
        match store.transact(writes).await {
            Err(e) if e.failed_write().is_some_and(|i| i >= first_pool_write) => Ok(None),
            other => other.map(Some).map_err(AccountsError::from),
        }
    })
    .await?;
    committed
        .ok_or_else(|| AccountsError::invalid(Field::Relationship("agent-pool"), "the agent pool is changing; retry"))
}

pub struct NewWorkspace {
    pub name: String,
    pub description: Option<String>,
    pub execution: Execution,
}

pub async fn create(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    new: NewWorkspace,
) -> Result<(Workspace, Organization)> {
    let org = access::authorized(store, principal, org_name, Permission::ManageWorkspaces).await?;
    names::check(&new.name, names::WORKSPACE).map_err(|e| AccountsError::name(Field::Attribute("name"), e))?;
    let (execution_mode, agent_pool_id) = resolve(("remote", None), &new.execution)?;
    let workspace = Workspace {
        id: new_id("ws"),
        org_id: org.id.clone(),
        name: new.name,
        description: new.description,
        execution_mode,
        agent_pool_id,
        created_at: crate::api::timestamp(chrono::Utc::now()),
    };
    let own = vec![
        Write::Put { item: workspace.to_item()?, condition: Condition::NotExists },
        pointer::create(&workspace.id, &workspace.key())?,
        join(&org.id, WORKSPACE_COUNT, 1),
    ];
    commit(store, &workspace, None, own).await.map_err(|e| match e {
        AccountsError::Store(e) if e.failed_write() == Some(0) => AccountsError::taken(Field::Attribute("name")),
        AccountsError::Store(e) if e.failed_write() == Some(2) => AccountsError::NotFound,
        other => other,
    })?;
    Ok((workspace, org))
}

pub struct WorkspaceChanges {
    pub name: Option<String>,
    pub description: Option<String>,
    pub execution: Execution,
}

/// Updates a workspace; omitted attributes keep their value. A rename moves its item.
pub async fn update(store: &dyn ItemStore, current: &Workspace, changes: WorkspaceChanges) -> Result<Workspace> {
    let mut workspace = current.clone();
    if let Some(name) = changes.name {
        names::check(&name, names::WORKSPACE).map_err(|e| AccountsError::name(Field::Attribute("name"), e))?;
        workspace.name = name;
    }
    if changes.description.is_some() {
        workspace.description = changes.description;
    }
    let current_execution = (current.execution_mode.as_str(), current.agent_pool_id.as_deref());
    (workspace.execution_mode, workspace.agent_pool_id) = resolve(current_execution, &changes.execution)?;
    let renamed = workspace.name != current.name;
    let own = if !renamed {
        vec![Write::Put { item: workspace.to_item()?, condition: Condition::Exists }]
    } else {
        vec![
            Write::Put { item: workspace.to_item()?, condition: Condition::NotExists },
            Write::Delete { key: current.key(), condition: Condition::Exists },
            pointer::retarget(&workspace.id, &workspace.key())?,
        ]
    };
    commit(store, &workspace, current.agent_pool_id.as_deref(), own).await.map_err(|e| match e {
        AccountsError::Store(e) if e.failed_write() == Some(0) && renamed => {
            AccountsError::taken(Field::Attribute("name"))
        }
        AccountsError::Store(e) if e.is_condition_failed() => AccountsError::NotFound,
        other => other,
    })?;
    Ok(workspace)
}

/// A workspace by id, if the principal holds `permission` in its organization.
pub async fn get(
    store: &dyn ItemStore,
    principal: &Principal,
    id: &str,
    permission: Permission,
) -> Result<(Workspace, Organization)> {
    let workspace: Workspace = pointer::resolve(store, id).await?.ok_or(AccountsError::NotFound)?;
    access::require(principal, &workspace.org_id, permission)?;
    let org = access::get_by_id(store, &workspace.org_id).await?;
    Ok((workspace, org))
}

pub async fn get_by_name(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    name: &str,
    permission: Permission,
) -> Result<(Workspace, Organization)> {
    let org = access::authorized(store, principal, org_name, permission).await?;
    let workspace = store.get(&keys::workspace(&org.id, name)).await?.ok_or(AccountsError::NotFound)?.parse()?;
    Ok((workspace, org))
}

pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    page: &PageRequest,
) -> Result<(Vec<Workspace>, Organization)> {
    let org = access::visible(store, principal, org_name).await?;
    let items = page.fetch(store, keys::workspaces(&org.id)).await?;
    let workspaces = parse_all::<Workspace>(&items)?;
    Ok((workspaces, org))
}

/// Deletes a workspace, taking it off its agent pool.
pub async fn delete(store: &dyn ItemStore, workspace: &Workspace) -> Result<()> {
    let own = vec![
        Write::Delete { key: workspace.key(), condition: Condition::Exists },
        pointer::remove(&workspace.id),
        join(&workspace.org_id, WORKSPACE_COUNT, -1),
    ];
    let leaving = Workspace { agent_pool_id: None, ..workspace.clone() };
    commit(store, &leaving, workspace.agent_pool_id.as_deref(), own).await.map_err(|e| match e {
        AccountsError::Store(e) if e.is_condition_failed() => AccountsError::NotFound,
        other => other,
    })
}
