//! The agent pool record and the narrow surface other families use: a workspace that changes
//! its pool attaches to or detaches from the pool in the workspace's own transaction. It depends
//! on the store alone, so the accounts family can call it without reaching into the agents
//! family's rules.

use serde::{Deserialize, Serialize};

use crate::ids::Kind;
use crate::store::{keys, pointer, Condition, Item, ItemStore, Key, StoreError, Write};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentPool {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub organization_scoped: bool,
    /// Workspaces permitted to use the pool (beyond all of them, when organization-scoped).
    pub allowed_workspaces: Vec<String>,
    /// Workspaces that run on the pool.
    pub workspaces: Vec<String>,
    pub created_at: String,
    #[serde(default)]
    pub revision: u64,
}

/// Why a workspace cannot run on a pool.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Not a pool of the workspace's organization, or one that does not allow the workspace.
    #[error("{0}")]
    NotUsable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl pointer::Addressed for AgentPool {
    const KIND: Kind = Kind::AgentPool;
}

impl AgentPool {
    pub fn key(&self) -> Key {
        keys::agent_pool(&self.org_id, &self.id)
    }

    /// Whether a workspace may run on this pool.
    pub fn allows(&self, workspace_id: &str) -> bool {
        self.organization_scoped || self.allowed_workspaces.iter().any(|id| id == workspace_id)
    }

    pub(super) fn to_item(&self) -> Result<Item, StoreError> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }

    /// The pool's write, conditional on nobody having changed it since it was read.
    pub(super) fn put_if_unchanged(&self, read_revision: u64) -> Result<Write, StoreError> {
        let mut next = self.clone();
        next.revision = read_revision + 1;
        Ok(Write::Put { item: next.to_item()?, condition: Condition::equals("revision", read_revision) })
    }
}

/// The write that records `workspace_id` as running on the pool, after checking the pool is the
/// organization's and lets the workspace use it. Conditional on the pool being unchanged.
pub async fn attach(
    store: &dyn ItemStore,
    org_id: &str,
    pool_id: &str,
    workspace_id: &str,
) -> Result<Write, PoolError> {
    let pool: Option<AgentPool> = pointer::resolve(store, pool_id).await?;
    let Some(mut pool) = pool.filter(|pool| pool.org_id == org_id) else {
        return Err(PoolError::NotUsable(format!("`{pool_id}` is not an agent pool of this organization")));
    };
    // A workspace already on the pool stays on it when the pool is scoped, as in HCP Terraform.
    let attached = pool.workspaces.iter().any(|id| id == workspace_id);
    if !attached && !pool.allows(workspace_id) {
        return Err(PoolError::NotUsable(format!(
            "agent pool {} is not organization-scoped and does not allow this workspace",
            pool.name
        )));
    }
    if !pool.workspaces.iter().any(|id| id == workspace_id) {
        pool.workspaces.push(workspace_id.to_owned());
    }
    Ok(pool.put_if_unchanged(pool.revision)?)
}

/// The write that takes `workspace_id` off the pool, if the pool still exists.
pub async fn detach(
    store: &dyn ItemStore,
    org_id: &str,
    pool_id: &str,
    workspace_id: &str,
) -> Result<Option<Write>, StoreError> {
    let Some(item) = store.get(&keys::agent_pool(org_id, pool_id)).await? else { return Ok(None) };
    let mut pool: AgentPool = item.parse()?;
    pool.workspaces.retain(|id| id != workspace_id);
    Ok(Some(pool.put_if_unchanged(pool.revision)?))
}

/// The writes that take a deleted workspace off each of `pool_ids` that still exists and names
/// it (on the pool or in its `allowed-workspaces`), each conditional on the pool being unchanged.
pub async fn forget(
    store: &dyn ItemStore,
    org_id: &str,
    pool_ids: &[String],
    workspace_id: &str,
) -> Result<Vec<Write>, StoreError> {
    let keys: Vec<Key> = pool_ids.iter().map(|id| keys::agent_pool(org_id, id)).collect();
    let mut writes = Vec::new();
    for item in store.get_many(&keys).await?.into_iter().flatten() {
        let mut pool: AgentPool = item.parse()?;
        let before = pool.workspaces.len() + pool.allowed_workspaces.len();
        pool.workspaces.retain(|id| id != workspace_id);
        pool.allowed_workspaces.retain(|id| id != workspace_id);
        if pool.workspaces.len() + pool.allowed_workspaces.len() != before {
            writes.push(pool.put_if_unchanged(pool.revision)?);
        }
    }
    Ok(writes)
}

/// The organization id under which Hangar's own runners are recorded: no organization has it
/// (ids are `org-` and 16 characters), so no organization's API reaches their pool or agents.
pub const SITE_ORG: &str = "hangar-site";

/// The id of the site's pool of runners, which run the workspaces in `remote` execution mode;
/// also the name of their job queue.
pub const SITE_POOL: &str = "remote";

/// Records the site's pool of runners, once (a start that finds it changes nothing), so that
/// runners register and report as any agent does.
pub async fn ensure_site_pool(store: &dyn ItemStore) -> Result<(), StoreError> {
    let pool = AgentPool {
        id: SITE_POOL.into(),
        org_id: SITE_ORG.into(),
        name: "Hangar's runners".into(),
        organization_scoped: true,
        allowed_workspaces: Vec::new(),
        workspaces: Vec::new(),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        revision: 0,
    };
    let item = Item::from_value(pool.key(), &pool)?;
    match store.transact(vec![Write::Put { item, condition: Condition::NotExists }]).await {
        Err(e) if !e.is_condition_failed() => Err(e),
        _ => Ok(()),
    }
}
