//! Agent pools: names unique per organization (a name item claimed in the same transaction),
//! a per-organization limit counted on the organization item, and the workspaces attached to
//! each pool kept on the pool so one read renders it.

use serde::{Deserialize, Serialize};

use super::error::{AgentsError, Result};
pub use super::pool::AgentPool;
use crate::accounts::access::{self, Organization, ACTIVE};
use crate::accounts::workspaces::Workspace;
use crate::api::Field;
use crate::api::{timestamp, PageRequest, Relationship};
use crate::auth::{Permission, Principal};
use crate::ids::new_id;
use crate::names;
use crate::state::AppState;
use crate::store::{keys, pointer, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, UpdateOp, Write};

pub const POOL_COUNT: &str = "agent_pool_count";

#[derive(Debug, Serialize, Deserialize)]
struct NameClaim {
    pool_id: String,
}

/// The claim on a pool's name, written when it is created or renamed.
fn name_claim(pool: &AgentPool) -> Result<Write> {
    let claim = NameClaim { pool_id: pool.id.clone() };
    Ok(Write::Put {
        item: Item::from_value(keys::agent_pool_name(&pool.org_id, &pool.name), &claim)?,
        condition: Condition::NotExists,
    })
}

pub(super) async fn load(store: &dyn ItemStore, key: &Key) -> Result<AgentPool> {
    Ok(store.get(key).await?.ok_or(AgentsError::NotFound)?.parse()?)
}

/// The pool with this id, if the principal holds `permission` in its organization.
pub async fn get(
    state: &AppState,
    principal: &Principal,
    id: &str,
    permission: Permission,
) -> Result<(AgentPool, Organization)> {
    let store = state.store.as_ref();
    let pool: AgentPool = pointer::resolve(store, id).await?.ok_or(AgentsError::NotFound)?;
    access::require(principal, &pool.org_id, permission)?;
    let org = access::get_by_id(store, &pool.org_id).await?;
    Ok((pool, org))
}

/// Checks every entry of `allowed-workspaces` names a workspace of the organization.
async fn allowed_workspaces(
    store: &dyn ItemStore,
    org: &Organization,
    entries: &[Relationship],
) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let workspace: Option<Workspace> = pointer::resolve(store, &entry.id).await?;
        if workspace.is_none_or(|ws| ws.org_id != org.id) {
            return Err(AgentsError::invalid(
                Field::RelationshipEntry("allowed-workspaces", i),
                format!("`{}` is not a workspace of organization {}", entry.id, org.name),
            ));
        }
        if !ids.contains(&entry.id) {
            ids.push(entry.id.clone());
        }
    }
    Ok(ids)
}

pub struct NewPool {
    pub name: String,
    pub organization_scoped: Option<bool>,
    pub allowed_workspaces: Option<Vec<Relationship>>,
}

pub async fn create(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    new: NewPool,
) -> Result<(AgentPool, Organization)> {
    let store = state.store.as_ref();
    let org = access::authorized(store, principal, org_name, Permission::ManageAgentPools).await?;
    names::check(&new.name, names::AGENT_POOL).map_err(|e| AgentsError::name(Field::Attribute("name"), e))?;
    let pool = AgentPool {
        id: new_id("apool"),
        org_id: org.id.clone(),
        name: new.name,
        organization_scoped: new.organization_scoped.unwrap_or(true),
        allowed_workspaces: allowed_workspaces(store, &org, new.allowed_workspaces.as_deref().unwrap_or_default())
            .await?,
        workspaces: Vec::new(),
        created_at: timestamp(chrono::Utc::now()),
        revision: 0,
    };
    let max = state.config.max_agent_pools;
    let count = Write::Update {
        key: keys::organization(&org.id),
        ops: vec![UpdateOp::Add(POOL_COUNT.into(), 1)],
        condition: Condition::equals(ACTIVE, true)
            .and(Condition::Below(POOL_COUNT.into(), i64::try_from(max).unwrap_or(i64::MAX))),
    };
    let writes = vec![
        Write::Put { item: pool.to_item()?, condition: Condition::NotExists },
        name_claim(&pool)?,
        pointer::create(&pool.id, &pool.key())?,
        count,
    ];
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(1) => {
            Err(AgentsError::invalid(Field::Attribute("name"), "has already been taken"))
        }
        Err(e) if e.failed_write() == Some(3) => Err(AgentsError::invalid(
            Field::Attribute("name"),
            format!(
                "organization {} already has {max} agent pool(s), the most it may have (HANGAR_MAX_AGENT_POOLS)",
                org.name
            ),
        )),
        other => other.map_err(AgentsError::from),
    }?;
    Ok((pool, org))
}

/// The list's parameters.
#[derive(Debug, Default)]
pub struct PoolQuery {
    pub q: Option<String>,
    /// `name` or `created-at`, descending when true.
    pub sort: Option<(String, bool)>,
    pub allowed_workspace_name: Option<String>,
}

/// A page of the organization's pools, how many match, and how many there are.
pub async fn list(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    query: &PoolQuery,
    page: &PageRequest,
) -> Result<(Vec<AgentPool>, usize, usize, Organization)> {
    let store = state.store.as_ref();
    let org = access::visible(store, principal, org_name).await?;
    let all: Vec<AgentPool> = query_all_as(store, keys::agent_pools(&org.id)).await?;
    let total = all.len();
    let allowed_workspace = match &query.allowed_workspace_name {
        Some(name) => {
            Some(store.get(&keys::workspace(&org.id, name)).await?.map(|item| item.parse::<Workspace>()).transpose()?)
        }
        None => None,
    };
    let q = query.q.as_deref().map(str::to_lowercase);
    let mut matching: Vec<AgentPool> = all
        .into_iter()
        .filter(|pool| q.as_ref().is_none_or(|q| pool.name.to_lowercase().contains(q)))
        .filter(|pool| match &allowed_workspace {
            None => true,
            Some(None) => pool.organization_scoped,
            Some(Some(ws)) => pool.allows(&ws.id),
        })
        .collect();
    match &query.sort {
        Some((field, descending)) => {
            matching.sort_by(|a, b| {
                let order = if field == "name" { a.name.cmp(&b.name) } else { a.created_at.cmp(&b.created_at) };
                if *descending {
                    order.reverse()
                } else {
                    order
                }
            });
        }
        None => matching.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id))),
    }
    let count = matching.len();
    Ok((page.slice(matching), count, total, org))
}

pub struct PoolChanges {
    pub name: Option<String>,
    pub organization_scoped: Option<bool>,
    pub allowed_workspaces: Option<Vec<Relationship>>,
}

pub async fn update(
    state: &AppState,
    principal: &Principal,
    id: &str,
    changes: PoolChanges,
) -> Result<(AgentPool, Organization)> {
    let store = state.store.as_ref();
    let (_, org) = get(state, principal, id, Permission::ManageAgentPools).await?;
    if let Some(name) = &changes.name {
        names::check(name, names::AGENT_POOL).map_err(|e| AgentsError::name(Field::Attribute("name"), e))?;
    }
    let allowed = match &changes.allowed_workspaces {
        Some(entries) => Some(allowed_workspaces(store, &org, entries).await?),
        None => None,
    };
    let (org, changes, allowed) = (&org, &changes, &allowed);
    let updated = retry_on_race(|| async move {
        let current = load(store, &keys::agent_pool(&org.id, id)).await?;
        let mut pool = current.clone();
        if let Some(scoped) = changes.organization_scoped {
            pool.organization_scoped = scoped;
        }
        if let Some(allowed) = &allowed {
            pool.allowed_workspaces = allowed.clone();
        }
        if let Some(using) = pool.workspaces.iter().find(|ws| !pool.allows(ws)) {
            return Err(AgentsError::invalid(
                Field::Relationship("allowed-workspaces"),
                format!("workspace {using} runs on this pool; it must stay allowed (or be moved off the pool first)"),
            ));
        }
        let mut writes = Vec::new();
        if let Some(name) = changes.name.as_ref().filter(|name| **name != current.name) {
            pool.name = name.clone();
            writes.push(name_claim(&pool)?);
            let old = keys::agent_pool_name(&org.id, &current.name);
            writes.push(Write::Delete { key: old, condition: Condition::equals("pool_id", pool.id.clone()) });
        }
        writes.insert(0, pool.put_if_unchanged(current.revision)?);
        match store.transact(writes).await {
            Ok(()) => {
                pool.revision = current.revision + 1;
                Ok(Some(pool))
            }
            Err(e) if e.failed_write() == Some(0) => Ok(None),
            Err(e) if e.failed_write() == Some(1) => {
                Err(AgentsError::invalid(Field::Attribute("name"), "has already been taken"))
            }
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    let pool = updated
        .ok_or_else(|| AgentsError::Conflict("The agent pool is being changed by other requests; retry.".into()))?;
    Ok((pool, org.clone()))
}

/// Deletes the pool with its tokens and agents, and moves its workspaces off it.
pub async fn delete(state: &AppState, principal: &Principal, id: &str) -> Result<()> {
    let store = state.store.as_ref();
    let (pool, org) = get(state, principal, id, Permission::ManageAgentPools).await?;
    let owned = super::owned_by_pool(state, &org.id, &pool.id).await?;
    let mut writes = owned;
    for ws_id in &pool.workspaces {
        if let Some(workspace) = pointer::resolve::<Workspace>(store, ws_id).await? {
            let ops = vec![UpdateOp::set("execution_mode", "remote"), UpdateOp::Remove("agent_pool_id".into())];
            writes.push(Write::Update { key: workspace.key(), ops, condition: Condition::Exists });
        }
    }
    let finale = vec![
        Write::Delete { key: pool.key(), condition: Condition::equals("revision", pool.revision) },
        Write::Delete { key: keys::agent_pool_name(&org.id, &pool.name), condition: Condition::Always },
        pointer::remove(&pool.id),
        Write::Update {
            key: keys::organization(&org.id),
            ops: vec![UpdateOp::Add(POOL_COUNT.into(), -1)],
            condition: Condition::Exists,
        },
    ];
    // Pieces first and the pool last, so an interrupted delete leaves a pool to delete again.
    let (pieces, last) = if writes.len() + finale.len() <= crate::store::MAX_TRANSACTION_WRITES {
        (Vec::new(), writes.into_iter().chain(finale).collect::<Vec<_>>())
    } else {
        (writes, finale)
    };
    for chunk in pieces.chunks(crate::store::MAX_TRANSACTION_WRITES) {
        store.transact(chunk.to_vec()).await?;
    }
    store.transact(last).await.map_err(|e| match e.failed_write() {
        Some(_) => AgentsError::Conflict("The agent pool changed while it was being deleted; retry.".into()),
        None => e.into(),
    })
}
