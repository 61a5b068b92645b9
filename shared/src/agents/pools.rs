//! Agent pools: names unique per organization (a name item claimed in the same transaction),
//! a per-organization limit counted on the organization item, and the workspaces attached to
//! each pool kept on the pool so one read renders it. As in HCP Terraform, a pool that
//! workspaces run on cannot be deleted, and scoping a pool never moves a workspace off it.

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::error::{AgentsError, Result};
use super::live_index;
pub use super::pool::AgentPool;
use crate::accounts::access::{self, Organization, ACTIVE};
use std::collections::HashSet;

use crate::accounts::workspaces::{self, Workspace, WorkspaceAt};
use crate::accounts::AccountsError;
use crate::api::Field;
use crate::api::{timestamp, PageRequest, Relationship};
use crate::auth::{Permission, Principal};
use crate::ids::new_id;
use crate::names;
use crate::state::AppState;
use crate::store::{
    keys, pointer, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, StoreError, Transaction, UpdateOp,
    Write, Writes, MAX_TRANSACTION_WRITES,
};

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
    store: &dyn ItemStore,
    principal: &Principal,
    id: &str,
    permission: Permission,
) -> Result<(AgentPool, Organization)> {
    let org_id = organization_of(store, principal, id).await?;
    get_in(store, principal, &org_id, id, permission).await
}

/// The organization the pool `id` would be in for this principal: a team's own, without a read
/// (a team reads only its organization's pools), else the one the id's pointer names (one read,
/// of the pointer alone). Whether the pool is there is for [`get_in`] to say.
pub async fn organization_of(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<String> {
    if crate::ids::Kind::of(id) != Some(crate::ids::Kind::AgentPool) {
        return Err(AgentsError::NotFound);
    }
    if let Some(org_id) = principal.org_id() {
        return Ok(org_id.to_owned());
    }
    let target = pointer::target::<AgentPool>(store, id).await?.ok_or(AgentsError::NotFound)?;
    keys::organization_of(&target).map(str::to_owned).ok_or(AgentsError::NotFound)
}

/// The pool `id` of the organization `org_id` and the organization, read in one batch, if the
/// principal holds `permission` there.
pub async fn get_in(
    store: &dyn ItemStore,
    principal: &Principal,
    org_id: &str,
    id: &str,
    permission: Permission,
) -> Result<(AgentPool, Organization)> {
    let (org, mut found) =
        access::by_id_with(store, principal, org_id, permission, &[keys::agent_pool(org_id, id)]).await?;
    let pool: AgentPool = found.remove(0).ok_or(AgentsError::NotFound)?.parse()?;
    Ok((pool, org))
}

/// The pool `id`, if the principal may read it, with its organization, how many of its agents
/// count (its `agent-count`) and, when `include`, its workspaces: the pool, the organization and
/// the pool's live index are read in one batch.
pub async fn show(state: &AppState, principal: &Principal, id: &str, include: bool) -> Result<Shown> {
    let store = state.store.as_ref();
    let org_id = organization_of(store, principal, id).await?;
    let wanted = [keys::agent_pool(&org_id, id), live_index::key(&org_id, id)];
    let (org, mut found) = access::by_id_with(store, principal, &org_id, Permission::Read, &wanted).await?;
    let index = found.pop().flatten();
    let pool: AgentPool = found.remove(0).ok_or(AgentsError::NotFound)?.parse()?;
    let counts = live_index::counts(store, &state.config, std::slice::from_ref(&pool), &[index], Utc::now()).await?;
    let workspaces = if include { attached_workspaces(store, std::slice::from_ref(&pool)).await? } else { Vec::new() };
    let visible = visible(store, principal, &org.id, std::slice::from_ref(&pool)).await?;
    Ok(Shown { org, pools: vec![(pool, counts[0])], workspaces, visible })
}

/// How many agents of each pool count (their `agent-count`), the pools' live indexes read in
/// one batch.
async fn agent_counts(state: &AppState, pools: &[AgentPool]) -> Result<Vec<usize>> {
    let store = state.store.as_ref();
    let wanted: Vec<Key> = pools.iter().map(|pool| live_index::key(&pool.org_id, &pool.id)).collect();
    let indexes = store.get_many(&wanted).await?;
    live_index::counts(store, &state.config, pools, &indexes, Utc::now()).await
}

/// Pools as the API shows them: each with how many of its agents count, and, when the caller
/// asked for them (`include=workspaces`), the workspaces attached to them.
pub struct Shown {
    pub org: Organization,
    pub pools: Vec<(AgentPool, usize)>,
    pub workspaces: Vec<Workspace>,
    /// The workspaces the caller sees, where it does not see them all: a pool names only these.
    pub visible: Option<HashSet<String>>,
}

impl Shown {
    async fn of(
        state: &AppState,
        principal: &Principal,
        org: Organization,
        pools: Vec<AgentPool>,
        include: bool,
    ) -> Result<Self> {
        let store = state.store.as_ref();
        let counts = agent_counts(state, &pools).await?;
        let workspaces = if include { attached_workspaces(store, &pools).await? } else { Vec::new() };
        let visible = visible(store, principal, &org.id, &pools).await?;
        Ok(Shown { org, pools: pools.into_iter().zip(counts).collect(), workspaces, visible })
    }

    /// Whether the caller sees the workspace `id` (and so may learn that a pool names it).
    pub fn sees(&self, id: &str) -> bool {
        self.visible.as_ref().is_none_or(|visible| visible.contains(id))
    }
}

/// The workspaces the caller sees, read only where one of the pools names any.
async fn visible(
    store: &dyn ItemStore,
    principal: &Principal,
    org_id: &str,
    pools: &[AgentPool],
) -> Result<Option<HashSet<String>>> {
    if pools.iter().all(|pool| pool.workspaces.is_empty() && pool.allowed_workspaces.is_empty()) {
        return Ok(None);
    }
    Ok(workspaces::visible_ids(store, principal, org_id).await?)
}

/// The workspaces attached to the pools (one read each, by id; one deleted meanwhile is left out).
async fn attached_workspaces(store: &dyn ItemStore, pools: &[AgentPool]) -> Result<Vec<Workspace>> {
    let mut attached = Vec::new();
    for id in pools.iter().flat_map(|pool| &pool.workspaces) {
        attached.extend(pointer::resolve::<Workspace>(store, id).await?);
    }
    Ok(attached)
}

/// The most workspaces one request may add to a pool's `allowed-workspaces`: each is written in
/// the pool's transaction, which holds at most [`MAX_TRANSACTION_WRITES`].
pub const MAX_ALLOWED_ADDED: usize = MAX_TRANSACTION_WRITES - 5;

/// The pool's new `allowed-workspaces` and the writes that record it on the workspaces it adds.
/// Every added entry must name a workspace of the organization; entries the pool lists already
/// are kept as they are (so a list stays writable whatever became of them).
async fn allowed_workspaces(
    store: &dyn ItemStore,
    org: &Organization,
    pool_id: &str,
    listed: &[String],
    entries: &[Relationship],
) -> Result<(Vec<String>, Vec<Write>)> {
    let (mut ids, mut writes) = (Vec::with_capacity(entries.len()), Vec::new());
    for (i, entry) in entries.iter().enumerate() {
        if ids.contains(&entry.id) {
            continue;
        }
        if !listed.contains(&entry.id) {
            let workspace: Option<Workspace> = pointer::resolve(store, &entry.id).await?;
            let Some(workspace) = workspace.filter(|ws| ws.org_id == org.id) else {
                return Err(AgentsError::invalid(
                    Field::RelationshipEntry("allowed-workspaces", i),
                    format!("`{}` is not a workspace of organization {}", entry.id, org.name),
                ));
            };
            if writes.len() == MAX_ALLOWED_ADDED {
                return Err(AgentsError::invalid(
                    Field::Relationship("allowed-workspaces"),
                    format!("at most {MAX_ALLOWED_ADDED} workspaces can be added to a pool in one request"),
                ));
            }
            writes.push(workspaces::allow_pool(&workspace, pool_id)?);
        }
        ids.push(entry.id.clone());
    }
    Ok((ids, writes))
}

pub struct NewPool {
    pub name: String,
    pub organization_scoped: Option<bool>,
    pub allowed_workspaces: Option<Vec<Relationship>>,
}

pub async fn create(state: &AppState, principal: &Principal, org_name: &str, new: NewPool) -> Result<Shown> {
    let store = state.store.as_ref();
    let org = access::authorized(store, principal, org_name, Permission::ManageAgentPools).await?;
    names::check(&new.name, names::AGENT_POOL).map_err(|e| AgentsError::name(Field::Attribute("name"), e))?;
    let pool = AgentPool {
        id: new_id("apool"),
        org_id: org.id.clone(),
        name: new.name,
        organization_scoped: new.organization_scoped.unwrap_or(true),
        allowed_workspaces: Vec::new(),
        workspaces: Vec::new(),
        created_at: timestamp(chrono::Utc::now()),
        revision: 0,
    };
    let max = state.config.max_agent_pools;
    let (org, pool, entries) = (&org, &pool, new.allowed_workspaces.as_deref().unwrap_or_default());
    let created = retry_on_race(|| async move {
        let (allowed, allowances) = allowed_workspaces(store, org, &pool.id, &[], entries).await?;
        let pool = AgentPool { allowed_workspaces: allowed, ..pool.clone() };
        let count = Write::Update {
            key: keys::organization(&org.id),
            ops: vec![UpdateOp::Add(POOL_COUNT.into(), 1)],
            condition: Condition::equals(ACTIVE, true)
                .and(Condition::Below(POOL_COUNT.into(), i64::try_from(max).unwrap_or(i64::MAX))),
        };
        let mut transaction = Transaction::new();
        transaction.add(Write::Put { item: pool.to_item()?, condition: Condition::NotExists });
        let name_claimed = transaction.add(name_claim(&pool)?);
        transaction.add(pointer::create(&pool.id, &pool.key())?);
        let below_limit = transaction.add(count);
        transaction.add(live_index::created(&pool.org_id, &pool.id));
        let workspaces_unchanged = transaction.extend(allowances);
        match transaction.commit(store).await {
            Ok(()) => Ok(Some(pool)),
            Err(e) if e.failed_on(name_claimed) => {
                Err(AgentsError::invalid(Field::Attribute("name"), "has already been taken"))
            }
            Err(e) if e.failed_on(below_limit) => Err(AgentsError::invalid(
                Field::Attribute("name"),
                format!(
                    "organization {} already has {max} agent pool(s), the most it may have (HANGAR_MAX_AGENT_POOLS)",
                    org.name
                ),
            )),
            // A workspace it allows changed meanwhile.
            Err(e) if e.failed_on(workspaces_unchanged) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    let pool = created.ok_or_else(|| {
        AgentsError::Conflict("The allowed workspaces are being changed by other requests; retry.".into())
    })?;
    Shown::of(state, principal, org.clone(), vec![pool], false).await
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
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    query: &PoolQuery,
    page: &PageRequest,
) -> Result<(Vec<AgentPool>, usize, usize, Organization)> {
    let org = access::visible(store, principal, org_name).await?;
    let all: Vec<AgentPool> = query_all_as(store, keys::agent_pools(&org.id)).await?;
    let total = all.len();
    // A workspace the caller does not see matches as a name that names none: the filter is no
    // way to learn which names exist.
    let allowed_workspace = match &query.allowed_workspace_name {
        Some(name) => match workspaces::find(store, principal, WorkspaceAt::Name { org: &org.name, name }).await {
            Ok(found) => Some(Some(found.workspace)),
            Err(AccountsError::NotFound) => Some(None),
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let q = query.q.as_deref().map(str::to_lowercase);
    let mut matching: Vec<AgentPool> = all
        .into_iter()
        .filter(|pool| q.as_ref().is_none_or(|q| pool.name.to_lowercase().contains(q)))
        // A name that names no workspace matches no pool, as in HCP Terraform.
        .filter(|pool| match &allowed_workspace {
            None => true,
            Some(None) => false,
            Some(Some(ws)) => pool.allows(&ws.id) || pool.workspaces.contains(&ws.id),
        })
        .collect();
    match &query.sort {
        Some((field, descending)) => {
            matching.sort_by(|a, b| {
                // Names sort as HCP Terraform sorts them: case aside, then as written.
                let order = if field == "name" {
                    a.name.to_lowercase().cmp(&b.name.to_lowercase()).then_with(|| a.name.cmp(&b.name))
                } else {
                    a.created_at.cmp(&b.created_at)
                };
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

/// A page of [`list`] as the API shows it ([`Shown`]), with how many pools match and how many
/// the organization has.
pub async fn list_shown(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    query: &PoolQuery,
    page: &PageRequest,
    include: bool,
) -> Result<(Shown, usize, usize)> {
    let (pools, matching, total, org) = list(state.store.as_ref(), principal, org_name, query, page).await?;
    Ok((Shown::of(state, principal, org, pools, include).await?, matching, total))
}

pub struct PoolChanges {
    pub name: Option<String>,
    pub organization_scoped: Option<bool>,
    pub allowed_workspaces: Option<Vec<Relationship>>,
}

pub async fn update(state: &AppState, principal: &Principal, id: &str, changes: PoolChanges) -> Result<Shown> {
    let store = state.store.as_ref();
    let (_, org) = get(store, principal, id, Permission::ManageAgentPools).await?;
    if let Some(name) = &changes.name {
        names::check(name, names::AGENT_POOL).map_err(|e| AgentsError::name(Field::Attribute("name"), e))?;
    }
    let (org, changes) = (&org, &changes);
    let updated = retry_on_race(|| async move {
        let current = load(store, &keys::agent_pool(&org.id, id)).await?;
        let mut pool = current.clone();
        if let Some(scoped) = changes.organization_scoped {
            pool.organization_scoped = scoped;
        }
        // Scoping never moves a workspace off the pool: those on it stay, allowed or not.
        let mut allowances = Vec::new();
        if let Some(entries) = &changes.allowed_workspaces {
            let listed = &current.allowed_workspaces;
            (pool.allowed_workspaces, allowances) = allowed_workspaces(store, org, &pool.id, listed, entries).await?;
        }
        let renamed = changes.name.as_ref().is_some_and(|name| *name != current.name);
        if let Some(name) = changes.name.as_ref().filter(|_| renamed) {
            pool.name = name.clone();
        }
        let mut transaction = Transaction::new();
        transaction.add(pool.put_if_unchanged(current.revision)?);
        // The claim on the new name, when the pool is renamed.
        let mut name_claimed = None;
        if renamed {
            name_claimed = Some(transaction.add(name_claim(&pool)?));
            let old = keys::agent_pool_name(&org.id, &current.name);
            transaction.add(Write::Delete { key: old, condition: Condition::equals("pool_id", pool.id.clone()) });
        }
        transaction.extend(allowances);
        match transaction.commit(store).await {
            Ok(()) => {
                pool.revision = current.revision + 1;
                Ok(Some(pool))
            }
            Err(e) if name_claimed.is_some_and(|claim| e.failed_on(claim)) => {
                Err(AgentsError::invalid(Field::Attribute("name"), "has already been taken"))
            }
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    let pool = updated
        .ok_or_else(|| AgentsError::Conflict("The agent pool is being changed by other requests; retry.".into()))?;
    Shown::of(state, principal, org.clone(), vec![pool], false).await
}

/// How many of the workspaces on a pool a refused delete names.
const NAMED_IN_REFUSAL: usize = 10;

/// Deletes the pool with its tokens and agents. As in HCP Terraform, a pool that workspaces run
/// on is refused, naming them; every write is conditional on the pool being unchanged, so a
/// workspace that joins the pool meanwhile makes the delete fail rather than point at nothing.
pub async fn delete(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<()> {
    let (pool, org) = get(store, principal, id, Permission::ManageAgentPools).await?;
    if !pool.workspaces.is_empty() {
        let mut names = Vec::new();
        for ws_id in pool.workspaces.iter().take(NAMED_IN_REFUSAL) {
            let workspace: Option<Workspace> = pointer::resolve(store, ws_id).await?;
            names.push(workspace.map_or_else(|| ws_id.clone(), |ws| ws.name));
        }
        let more = pool.workspaces.len().saturating_sub(NAMED_IN_REFUSAL);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        return Err(AgentsError::invalid(
            Field::Document,
            format!(
                "Agent pool {} is used by workspaces {}{more}; move them to another pool or execution mode first.",
                pool.name,
                names.join(", ")
            ),
        ));
    }
    let unchanged = Write::Check { key: pool.key(), condition: Condition::equals("revision", pool.revision) };
    let writes = super::owned_by_pool(store, &org.id, &pool.id, &unchanged).await?;
    let finale = vec![
        Write::Delete { key: pool.key(), condition: Condition::equals("revision", pool.revision) },
        Write::Delete { key: live_index::key(&org.id, &pool.id), condition: Condition::Always },
        Write::Delete { key: keys::agent_pool_name(&org.id, &pool.name), condition: Condition::Always },
        pointer::remove(&pool.id),
        Write::Update {
            key: keys::organization(&org.id),
            ops: vec![UpdateOp::Add(POOL_COUNT.into(), -1)],
            condition: Condition::Exists,
        },
    ];
    // Pieces first and the pool last, so an interrupted delete leaves a pool to delete again;
    // each piece checks the pool is unchanged.
    let (pieces, last) = if writes.len() + finale.len() <= MAX_TRANSACTION_WRITES {
        (Vec::new(), writes.into_iter().chain(finale).collect::<Vec<_>>())
    } else {
        (writes, finale)
    };
    // Every condition of a deletion's writes holds while the pool is unchanged: whichever fails,
    // the pool changed.
    let changed = |e: StoreError, deletion: Writes| {
        if e.failed_on(deletion) {
            AgentsError::Conflict("The agent pool changed while it was being deleted; retry.".into())
        } else {
            e.into()
        }
    };
    for chunk in pieces.chunks(MAX_TRANSACTION_WRITES - 1) {
        let mut transaction = Transaction::new();
        let deletion = transaction.extend(chunk.iter().cloned().chain([unchanged.clone()]));
        transaction.commit(store).await.map_err(|e| changed(e, deletion))?;
    }
    let mut transaction = Transaction::new();
    let deletion = transaction.extend(last);
    transaction.commit(store).await.map_err(|e| changed(e, deletion))
}
