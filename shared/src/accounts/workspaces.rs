//! Workspaces: the subset other families need. Names are unique per organization, enforced by
//! the item key itself; a workspace in `agent` execution mode runs on one agent pool, and the
//! pool records it in the same transaction. A pool that lists a workspace in its
//! `allowed-workspaces` is recorded on the workspace too (`allowed_by`), in the pool's
//! transaction, so deleting the workspace takes it off every such pool without a scan; every
//! workspace write is conditional on its `revision`, so the two never miss each other.

use serde::{Deserialize, Serialize};

use super::access::{self, join, Organization, WORKSPACE_COUNT};
use super::error::{AccountsError, Result};
use super::grants::TeamAccess;
pub use super::grants::WorkspacePermissions;
use crate::agents::pool;
use crate::api::Field;
use crate::api::PageRequest;
use crate::auth::{Permission, Principal};
use crate::blobs::BlobStore;
use crate::ids::{new_id, Kind};
use crate::names;
use crate::store::{
    keys, parse_all, pointer, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, Transaction, Write, Writes,
    MAX_TRANSACTION_WRITES,
};

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
    /// Pools that may list the workspace in `allowed-workspaces` (a superset: a pool that
    /// stopped listing it, or was deleted, may remain).
    #[serde(default)]
    pub allowed_by: Vec<String>,
    #[serde(default)]
    pub revision: u64,
    /// When a write last changed it (none before the first change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// How many resources its current state holds (HCP's `resource-count`; 0 without state).
    #[serde(default)]
    pub resource_count: u64,
    /// Who holds the workspace's lock, if anyone (taken and given back in `locks.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_by: Option<Lock>,
    /// The state the workspace holds now, if any: set by each state version's write, in the
    /// same transaction, so a writer checks serial and lineage without reading the version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_state: Option<CurrentState>,
    /// How many state versions it has had: the next one's place in its sequence.
    #[serde(default)]
    pub state_versions: u64,
    /// The state version waiting for its state on an upload link, if one is: at most one, the
    /// newest; a state write supersedes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_state: Option<String>,
    /// How many times its lock has been taken: which lock a pending state version was made under.
    #[serde(default)]
    pub locks_taken: u64,
    #[serde(default, flatten)]
    pub settings: Settings,
}

/// How a workspace's runs are made: HCP's `terraform-version`, `working-directory` and
/// `auto-apply`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// A version (`1.5.7`), a constraint (`~> 1.5`), or none: `latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terraform_version: Option<String>,
    /// Where in the configuration Terraform runs, relative to its root; empty: the root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub working_directory: String,
    #[serde(default)]
    pub auto_apply: bool,
}

/// Changes to a workspace's [`Settings`]; `None` keeps a value.
#[derive(Debug, Clone, Default)]
pub struct SettingsChanges {
    pub terraform_version: Option<String>,
    pub working_directory: Option<String>,
    pub auto_apply: Option<bool>,
}

/// The longest `terraform-version` and `working-directory` a workspace takes.
const MAX_TERRAFORM_VERSION: usize = 64;
const MAX_WORKING_DIRECTORY: usize = 1024;

/// Whether `text` is a Terraform version constraint (`~> 1.5`, `>= 1.0, < 2.0`): SemVer's
/// requirement syntax but for Terraform's pessimistic `~>`, read here as SemVer's `~` (the two
/// differ in what they allow, not in their form).
fn is_constraint(text: &str) -> bool {
    semver::VersionReq::parse(&text.replace("~>", "~")).is_ok()
}

impl SettingsChanges {
    /// `current` with these changes, checked.
    fn applied_to(&self, current: &Settings) -> Result<Settings> {
        let mut next = current.clone();
        if let Some(version) = &self.terraform_version {
            let version = version.trim();
            let valid = version == "latest" || semver::Version::parse(version).is_ok() || is_constraint(version);
            if !valid || version.len() > MAX_TERRAFORM_VERSION {
                return Err(AccountsError::invalid(
                    Field::Attribute("terraform-version"),
                    "must be `latest`, a version such as `1.5.7`, or a constraint such as `~> 1.5`",
                ));
            }
            next.terraform_version = (version != "latest").then(|| version.to_owned());
        }
        if let Some(directory) = &self.working_directory {
            let directory = directory.trim_matches('/');
            let valid = directory.len() <= MAX_WORKING_DIRECTORY
                && !directory.chars().any(|c| c.is_control() || c == '\\')
                && !directory
                    .split('/')
                    .any(|part| part == ".." || part == "." || (part.is_empty() && !directory.is_empty()));
            if !valid {
                return Err(AccountsError::invalid(
                    Field::Attribute("working-directory"),
                    "must be a relative path inside the configuration (no `..`, at most 1024 bytes)",
                ));
            }
            next.working_directory = directory.to_owned();
        }
        if let Some(auto_apply) = self.auto_apply {
            next.auto_apply = auto_apply;
        }
        Ok(next)
    }
}

/// What a workspace records of its current state version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentState {
    pub id: String,
    pub serial: u64,
    pub lineage: String,
    /// Its place in the workspace's sequence, so that it is read by its key, with no pointer
    /// (0: recorded before it was kept; read through the pointer).
    #[serde(default)]
    pub sequence: u64,
}

/// Who holds a workspace's lock, since when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// The user id the holder acts as (what `locked-by` names).
    pub holder: String,
    pub reason: Option<String>,
    pub at: String,
}

impl pointer::Addressed for Workspace {
    const KIND: Kind = Kind::Workspace;
}

impl Workspace {
    pub fn key(&self) -> Key {
        keys::workspace(&self.org_id, &self.name)
    }

    pub(super) fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }

    /// The condition that the stored workspace is the one read (items written before
    /// workspaces had a revision have none, and read as revision 0).
    pub(super) fn unchanged(&self) -> Condition {
        match self.revision {
            0 => Condition::Exists.and(Condition::Below("revision".into(), 1)),
            revision => Condition::equals("revision", revision),
        }
    }

    /// The workspace as its next write stores it.
    pub(super) fn next(&self) -> Self {
        let updated_at = Some(crate::api::timestamp(chrono::Utc::now()));
        Self { revision: self.revision + 1, updated_at, ..self.clone() }
    }
}

/// The write a pool's transaction makes when it lists the workspace in `allowed-workspaces`:
/// records the pool on the workspace (or only checks the workspace is unchanged, when it is
/// recorded already), so a concurrent delete of the workspace fails one of the two.
pub fn allow_pool(workspace: &Workspace, pool_id: &str) -> Result<Write> {
    if workspace.allowed_by.iter().any(|id| id == pool_id) {
        return Ok(Write::Check { key: workspace.key(), condition: workspace.unchanged() });
    }
    let mut next = workspace.next();
    next.allowed_by.push(pool_id.to_owned());
    Ok(Write::Put { item: next.to_item()?, condition: workspace.unchanged() })
}

/// The workspace as a new state version leaves it, and the write that stores it: conditional on
/// the workspace being the one read, so of two writers of one workspace's state one fails and
/// reads again.
pub fn advance_state(workspace: &Workspace, current: CurrentState, resource_count: u64) -> Result<(Workspace, Write)> {
    let mut next = workspace.next();
    // The version waiting for its state, if it is not this one, is superseded.
    next.pending_state = None;
    next.current_state = Some(current);
    next.resource_count = resource_count;
    next.state_versions += 1;
    let write = Write::Put { item: next.to_item()?, condition: workspace.unchanged() };
    Ok((next, write))
}

/// The write that records `pending` as the version the workspace waits for (or none), on the
/// workspace as read.
pub fn await_state(workspace: &Workspace, pending: Option<String>) -> Result<Write> {
    let next = Workspace { pending_state: pending, ..workspace.next() };
    Ok(Write::Put { item: next.to_item()?, condition: workspace.unchanged() })
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
        // go-tfe refuses this too ("execution_mode must be set to 'agent' to assign agent_pool_id").
        ("remote" | "local", _) if matches!(execution.agent_pool, Some(Some(_))) => Err(AccountsError::invalid(
            Field::Attribute("execution-mode"),
            format!("execution mode `{mode}` cannot have an agent pool; use `agent` to run on one"),
        )),
        ("remote" | "local", _) => Ok((mode, None)),
        (AGENT, Some(pool)) => Ok((mode, Some(pool))),
        (AGENT, None) => Err(AccountsError::invalid(
            Field::Relationship("agent-pool"),
            "execution mode `agent` needs an agent pool the workspace may use",
        )),
        _ => Err(AccountsError::invalid(Field::Attribute("execution-mode"), "must be `remote`, `local` or `agent`")),
    }
}

/// Adds the writes that move a workspace from one pool to another (either may be none) to
/// `transaction`. Returns them: each is conditional on its pool being unchanged since it was
/// read here, so one fails when a pool changed meanwhile.
async fn pool_writes(
    store: &dyn ItemStore,
    workspace: &Workspace,
    from: Option<&str>,
    transaction: &mut Transaction,
) -> Result<Writes> {
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
    Ok(transaction.extend(writes))
}

/// The workspace's own writes of its creation.
struct CreationWrites {
    /// The workspace's item, new: the claim on its name (the name is its key), which fails when
    /// the name is taken in the organization.
    name_claim: Writes,
    /// The organization's count of workspaces, which fails when the organization is being
    /// deleted.
    org_active: Writes,
}

/// Adds the workspace's own writes of its creation to `transaction`: its item, its id pointer
/// and its count in the organization.
fn creation_writes(workspace: &Workspace, transaction: &mut Transaction) -> Result<CreationWrites> {
    let name_claim = transaction.add(Write::Put { item: workspace.to_item()?, condition: Condition::NotExists });
    transaction.add(pointer::create(&workspace.id, &workspace.key())?);
    let org_active = transaction.add(join(&workspace.org_id, WORKSPACE_COUNT, 1));
    Ok(CreationWrites { name_claim, org_active })
}

pub struct NewWorkspace {
    pub name: String,
    pub description: Option<String>,
    pub execution: Execution,
    pub settings: SettingsChanges,
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
    let settings = new.settings.applied_to(&Settings::default())?;
    let workspace = Workspace {
        id: new_id("ws"),
        org_id: org.id.clone(),
        name: new.name,
        description: new.description,
        execution_mode,
        agent_pool_id,
        created_at: crate::api::timestamp(chrono::Utc::now()),
        allowed_by: Vec::new(),
        revision: 0,
        updated_at: None,
        resource_count: 0,
        locked_by: None,
        current_state: None,
        state_versions: 0,
        pending_state: None,
        locks_taken: 0,
        settings,
    };
    // The pool writes are built afresh on each attempt, and retried when a pool changed meanwhile.
    let ws = &workspace;
    let committed = retry_on_race(|| async move {
        let mut transaction = Transaction::new();
        let own = creation_writes(ws, &mut transaction)?;
        let pools = pool_writes(store, ws, None, &mut transaction).await?;
        match transaction.commit(store).await {
            Err(e) if e.failed_on(own.name_claim) => Err(AccountsError::taken(Field::Attribute("name"))),
            Err(e) if e.failed_on(own.org_active) => Err(AccountsError::NotFound),
            Err(e) if e.failed_on(pools) => Ok(None),
            other => other.map(Some).map_err(AccountsError::from),
        }
    })
    .await?;
    committed.ok_or_else(|| {
        AccountsError::invalid(Field::Relationship("agent-pool"), "the agent pool is changing; retry")
    })?;
    Ok((workspace, org))
}

pub struct WorkspaceChanges {
    pub name: Option<String>,
    pub description: Option<String>,
    pub execution: Execution,
    pub settings: SettingsChanges,
}

/// Where a request points at a workspace: HCP's two paths, by its id or by the names of its
/// organization and itself.
#[derive(Debug, Clone, Copy)]
pub enum WorkspaceAt<'a> {
    Id(&'a str),
    Name { org: &'a str, name: &'a str },
}

/// A workspace a principal sees, with its organization and what the principal may do with it.
pub struct Found {
    pub workspace: Workspace,
    pub org: Organization,
    pub may: WorkspacePermissions,
}

impl Found {
    /// The workspace, if the principal may `allowed` (as [`WorkspacePermissions`] says); else
    /// forbidden, for it sees the workspace.
    pub fn requiring(self, allowed: fn(&WorkspacePermissions) -> bool, what: &str) -> Result<Self> {
        match allowed(&self.may) {
            true => Ok(self),
            false => Err(AccountsError::Forbidden(format!("You may not {what} in this workspace."))),
        }
    }
}

/// The workspace at `at`, if the principal sees it: a member of its organization that manages
/// its workspaces, or a team with access to this one. Else not found, whatever the reason.
pub async fn find(store: &dyn ItemStore, principal: &Principal, at: WorkspaceAt<'_>) -> Result<Found> {
    let (workspace, org) = match at {
        WorkspaceAt::Id(id) => {
            let workspace: Workspace = pointer::resolve(store, id).await?.ok_or(AccountsError::NotFound)?;
            access::require(principal, &workspace.org_id, Permission::FindWorkspaces)
                .map_err(AccountsError::concealed)?;
            let org = access::get_by_id(store, &workspace.org_id).await?;
            (workspace, org)
        }
        WorkspaceAt::Name { org, name } => {
            let org = access::authorized(store, principal, org, Permission::FindWorkspaces)
                .await
                .map_err(AccountsError::concealed)?;
            let workspace: Workspace =
                store.get(&keys::workspace(&org.id, name)).await?.ok_or(AccountsError::NotFound)?.parse()?;
            (workspace, org)
        }
    };
    let may = WorkspacePermissions::of(store, principal, &workspace.org_id, &workspace.id).await?;
    if !may.see {
        return Err(AccountsError::NotFound);
    }
    Ok(Found { workspace, org, may })
}

/// Updates the workspace at `at`, for a principal with admin access to it; omitted attributes
/// keep their value. A rename moves its item. Tried afresh when the workspace or its pools
/// changed meanwhile.
pub async fn update(
    store: &dyn ItemStore,
    principal: &Principal,
    at: WorkspaceAt<'_>,
    changes: WorkspaceChanges,
) -> Result<Found> {
    let found = find(store, principal, at).await?.requiring(|may| may.manage, "change settings")?;
    let workspace = apply(store, found.workspace, changes).await?;
    Ok(Found { workspace, ..found })
}

/// The workspace an attempt of a change starts from: the one read to check the caller's
/// permission for the first attempt (its write is conditioned on that read), read afresh by id
/// after a lost race.
pub async fn reread(store: &dyn ItemStore, id: &str, first: Option<Workspace>) -> Result<Workspace> {
    match first {
        Some(workspace) => Ok(workspace),
        None => pointer::resolve(store, id).await?.ok_or(AccountsError::NotFound),
    }
}

async fn apply(store: &dyn ItemStore, current: Workspace, changes: WorkspaceChanges) -> Result<Workspace> {
    if let Some(name) = &changes.name {
        names::check(name, names::WORKSPACE).map_err(|e| AccountsError::name(Field::Attribute("name"), e))?;
    }
    changes.settings.applied_to(&current.settings)?;
    let id = current.id.clone();
    let (id, changes, mut first) = (&id, &changes, Some(current));
    let updated = retry_on_race(|| {
        let first = first.take();
        async move {
            let current = reread(store, id, first).await?;
            let mut workspace = current.next();
            if let Some(name) = &changes.name {
                workspace.name = name.clone();
            }
            if changes.description.is_some() {
                workspace.description = changes.description.clone();
            }
            workspace.settings = changes.settings.applied_to(&current.settings)?;
            let current_execution = (current.execution_mode.as_str(), current.agent_pool_id.as_deref());
            (workspace.execution_mode, workspace.agent_pool_id) = resolve(current_execution, &changes.execution)?;
            let renamed = workspace.name != current.name;
            let mut transaction = Transaction::new();
            // The workspace's item under its new name, when it is renamed: the claim on that name.
            let name_claim = if !renamed {
                transaction.add(Write::Put { item: workspace.to_item()?, condition: current.unchanged() });
                None
            } else {
                let claim = transaction.add(Write::Put { item: workspace.to_item()?, condition: Condition::NotExists });
                transaction.add(Write::Delete { key: current.key(), condition: current.unchanged() });
                transaction.add(pointer::retarget(&workspace.id, &workspace.key())?);
                Some(claim)
            };
            pool_writes(store, &workspace, current.agent_pool_id.as_deref(), &mut transaction).await?;
            match transaction.commit(store).await {
                Ok(()) => Ok(Some(workspace)),
                Err(e) if name_claim.is_some_and(|claim| e.failed_on(claim)) => {
                    Err(AccountsError::taken(Field::Attribute("name")))
                }
                Err(e) if e.is_condition_failed() => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await?;
    updated.ok_or_else(|| AccountsError::invalid(Field::Document, "the workspace or its agent pool is changing; retry"))
}

/// A page of the organization's workspaces the principal sees, with what it may do with each and
/// how many match: those whose name contains `search` (case aside, as HCP's `search[name]`),
/// else all of them. A principal that manages the organization's workspaces sees them all, paged
/// by the store; a team, those it has access to, from its index.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    search: Option<&str>,
    page: &PageRequest,
) -> Result<(Vec<(Workspace, WorkspacePermissions)>, usize, Organization)> {
    let org = access::visible(store, principal, org_name).await?;
    let search = search.map(str::to_lowercase);
    let matches = |ws: &Workspace| search.as_ref().is_none_or(|search| ws.name.to_lowercase().contains(search));
    if !principal.can(&org.id, Permission::ManageWorkspaces) {
        let seen = accessible(store, principal, &org.id).await?;
        let mut matching: Vec<_> = seen.into_iter().filter(|(ws, _)| matches(ws)).collect();
        matching.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let count = matching.len();
        return Ok((page.slice(matching), count, org));
    }
    let with_all = |all: Vec<Workspace>| all.into_iter().map(|ws| (ws, WorkspacePermissions::ALL)).collect();
    if search.is_none() {
        let items = page.fetch(store, keys::workspaces(&org.id)).await?;
        let total = org.workspace_count;
        return Ok((with_all(parse_all::<Workspace>(&items)?), total, org));
    }
    let all: Vec<Workspace> = query_all_as(store, keys::workspaces(&org.id)).await?;
    let matching: Vec<Workspace> = all.into_iter().filter(matches).collect();
    let count = matching.len();
    Ok((with_all(page.slice(matching)), count, org))
}

/// The ids of the workspaces of `org_id` that `principal` sees: `None` for all of them (its
/// organization-level access sees every workspace), else those its team has access to (one
/// query of the team's accesses, no workspace read).
pub async fn visible_ids(
    store: &dyn ItemStore,
    principal: &Principal,
    org_id: &str,
) -> Result<Option<std::collections::HashSet<String>>> {
    if WorkspacePermissions::org_wide(principal, org_id).see {
        return Ok(None);
    }
    let Principal::Team(grant) = principal else { return Ok(Some(Default::default())) };
    let accesses: Vec<TeamAccess> = query_all_as(store, keys::team_workspaces(org_id, &grant.team_id)).await?;
    Ok(Some(accesses.into_iter().map(|access| access.workspace_id).collect()))
}

/// The workspaces a team has access to, with what the access grants.
async fn accessible(
    store: &dyn ItemStore,
    principal: &Principal,
    org_id: &str,
) -> Result<Vec<(Workspace, WorkspacePermissions)>> {
    let Principal::Team(grant) = principal else { return Ok(Vec::new()) };
    let accesses: Vec<TeamAccess> = query_all_as(store, keys::team_workspaces(org_id, &grant.team_id)).await?;
    let ids: Vec<String> = accesses.iter().map(|access| access.workspace_id.clone()).collect();
    let workspaces: Vec<Workspace> = pointer::resolve_many(store, &ids).await?;
    Ok(workspaces
        .into_iter()
        .filter_map(|ws| {
            let access = accesses.iter().find(|access| access.workspace_id == ws.id)?;
            Some((ws, WorkspacePermissions::granted(access)))
        })
        .collect())
}

/// Deletes the workspace at `at`, for a principal with admin access to it, taking it off its
/// agent pool and out of every pool's `allowed-workspaces`, in one transaction that fails if
/// either changed meanwhile.
/// With `safe`, HCP's `safe-delete`: refused while the workspace is locked or its state holds
/// resources.
/// What the workspace owned (its state versions and their states) goes after it.
pub async fn delete(
    store: &dyn ItemStore,
    blobs: &dyn BlobStore,
    principal: &Principal,
    at: WorkspaceAt<'_>,
    safe: bool,
) -> Result<()> {
    let workspace = find(store, principal, at).await?.requiring(|may| may.manage, "delete anything")?.workspace;
    let (org_id, id) = (workspace.org_id.clone(), workspace.id.clone());
    remove(store, workspace, safe).await?;
    super::cascade::purge_workspace(store, blobs, &org_id, &id).await?;
    Ok(())
}

/// Checked on the workspace as the deletion reads it (and conditioned on that read), so a state
/// written meanwhile is seen.
async fn remove(store: &dyn ItemStore, workspace: Workspace, safe: bool) -> Result<()> {
    let id = workspace.id.clone();
    let (id, mut first) = (&id, Some(workspace));
    let deleted = retry_on_race(|| {
        let first = first.take();
        async move {
            let workspace = reread(store, id, first).await?;
            // go-tfe tells this refusal by the word "locked" (ErrWorkspaceLockedCannotDelete).
            if safe && workspace.locked_by.is_some() {
                return Err(AccountsError::Conflict(
                    "The workspace is locked: unlock it before deleting it with safe-delete.".into(),
                ));
            }
            if safe && workspace.resource_count > 0 {
                return Err(AccountsError::Conflict(format!(
                    "The workspace's state holds {} resources: destroy them first, or delete it without safe-delete.",
                    workspace.resource_count
                )));
            }
            let mut transaction = Transaction::new();
            transaction.add(Write::Delete { key: workspace.key(), condition: workspace.unchanged() });
            transaction.add(pointer::remove(&workspace.id));
            let org_active = transaction.add(join(&workspace.org_id, WORKSPACE_COUNT, -1));
            let mut pools = workspace.allowed_by.clone();
            pools.extend(workspace.agent_pool_id.iter().filter(|id| !workspace.allowed_by.contains(id)).cloned());
            let mut pool_writes = pool::forget(store, &workspace.org_id, &pools, &workspace.id).await?;
            // Beyond one transaction, the rest follow; a pool left naming a deleted workspace keeps
            // working (entries it already lists are never checked again).
            let rest = pool_writes.split_off(pool_writes.len().min(MAX_TRANSACTION_WRITES - transaction.len()));
            transaction.extend(pool_writes);
            match transaction.commit(store).await {
                Ok(()) => Ok(Some(rest)),
                Err(e) if e.failed_on(org_active) => Err(AccountsError::NotFound),
                Err(e) if e.is_condition_failed() => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await?;
    let rest = deleted.ok_or_else(|| {
        AccountsError::invalid(Field::Document, "the workspace or its agent pools are changing; retry")
    })?;
    for chunk in rest.chunks(MAX_TRANSACTION_WRITES) {
        if let Err(e) = store.transact(chunk.to_vec()).await {
            tracing::warn!(workspace = %id, error = %e, "a pool still names the deleted workspace");
        }
    }
    Ok(())
}
