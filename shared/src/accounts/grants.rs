//! What a team may do in one workspace (HCP Terraform's team access, `team-workspaces`), and
//! what a principal may do with a workspace as a whole ([`WorkspacePermissions`]). Owners, the
//! site admin and teams that manage the organization's workspaces may do everything; any other
//! team only what its access to the workspace grants, and without one it does not see the
//! workspace at all. The record lives under the workspace's data, keyed by its team, so the check
//! is one read by key; an index under the team lists its workspaces.

use serde::{Deserialize, Serialize};

use super::error::{AccountsError, Result};
use crate::api::Field;
use crate::auth::{Permission, Principal};
use crate::ids::Kind;
use crate::store::{keys, pointer, ItemStore, Key};

/// HCP's fixed permission sets, or `custom`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Plan,
    Write,
    Admin,
    Custom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runs {
    Read,
    Plan,
    Apply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variables {
    None,
    Read,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateVersions {
    None,
    ReadOutputs,
    Read,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SentinelMocks {
    None,
    Read,
}

/// The fine-grained permissions of a team's access, HCP's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Grants {
    pub runs: Runs,
    pub variables: Variables,
    pub state_versions: StateVersions,
    pub sentinel_mocks: SentinelMocks,
    pub workspace_locking: bool,
    pub run_tasks: bool,
}

impl Access {
    pub fn parse(raw: &str) -> Result<Self> {
        serde_json::from_value(serde_json::Value::String(raw.to_owned())).map_err(|_| {
            AccountsError::invalid(Field::Attribute("access"), "must be `read`, `plan`, `write`, `admin` or `custom`")
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Plan => "plan",
            Access::Write => "write",
            Access::Admin => "admin",
            Access::Custom => "custom",
        }
    }

    /// What a fixed set grants, as HCP documents them; `custom` starts from HCP's defaults (runs
    /// read, nothing else), and the request's attributes change it.
    pub fn grants(self) -> Grants {
        let read = Grants {
            runs: Runs::Read,
            variables: Variables::Read,
            state_versions: StateVersions::Read,
            sentinel_mocks: SentinelMocks::None,
            workspace_locking: false,
            run_tasks: false,
        };
        match self {
            Access::Read => read,
            Access::Custom => Grants { variables: Variables::None, state_versions: StateVersions::None, ..read },
            Access::Plan => Grants { runs: Runs::Plan, ..read },
            Access::Write => Grants {
                runs: Runs::Apply,
                variables: Variables::Write,
                state_versions: StateVersions::Write,
                sentinel_mocks: SentinelMocks::Read,
                workspace_locking: true,
                run_tasks: false,
            },
            Access::Admin => Grants { run_tasks: true, ..Access::Write.grants() },
        }
    }
}

/// A team's access to a workspace, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TeamAccess {
    pub id: String,
    pub org_id: String,
    pub workspace_id: String,
    pub team_id: String,
    pub access: Access,
    pub grants: Grants,
    pub created_at: String,
    pub revision: u64,
}

impl pointer::Addressed for TeamAccess {
    const KIND: Kind = Kind::TeamAccess;
}

impl TeamAccess {
    pub fn key(&self) -> Key {
        keys::team_access(&self.org_id, &self.workspace_id, &self.team_id)
    }

    /// Its entry in the team's index of workspaces.
    pub fn index_key(&self) -> Key {
        keys::team_workspace(&self.org_id, &self.team_id, &self.workspace_id)
    }
}

/// The access `team_id` has to the workspace, if any.
pub async fn of_team(
    store: &dyn ItemStore,
    org_id: &str,
    workspace_id: &str,
    team_id: &str,
) -> Result<Option<TeamAccess>> {
    Ok(store.get(&keys::team_access(org_id, workspace_id, team_id)).await?.map(|item| item.parse()).transpose()?)
}

/// What a principal may do with a workspace and what it holds, as HCP's `permissions` block
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkspacePermissions {
    /// Sees the workspace at all.
    pub see: bool,
    /// Changes its settings, deletes it, grants teams access to it (HCP's admin).
    pub manage: bool,
    pub lock: bool,
    pub force_unlock: bool,
    pub read_state_outputs: bool,
    pub read_state: bool,
    pub write_state: bool,
    pub read_variables: bool,
    pub write_variables: bool,
    /// Reads its runs, plans, applies and their logs.
    pub read_runs: bool,
    /// Queues plans (HCP's runs `plan`).
    pub queue_run: bool,
    /// Queues applies, and applies, discards and cancels runs (HCP's runs `apply`).
    pub apply_run: bool,
}

impl WorkspacePermissions {
    /// Everything: owners, the site admin, teams that manage the organization's workspaces.
    pub const ALL: Self = Self {
        see: true,
        manage: true,
        lock: true,
        force_unlock: true,
        read_state_outputs: true,
        read_state: true,
        write_state: true,
        read_variables: true,
        write_variables: true,
        read_runs: true,
        queue_run: true,
        apply_run: true,
    };

    /// What `principal` may do with any workspace of `org_id` by its organization-level access
    /// alone: everything where it manages workspaces, else nothing (a team's access to one
    /// workspace is read by [`WorkspacePermissions::of`]).
    pub fn org_wide(principal: &Principal, org_id: &str) -> Self {
        match principal.can(org_id, Permission::ManageWorkspaces) {
            true => Self::ALL,
            false => Self::default(),
        }
    }

    /// What a run's job token may do: in its own workspace, read the state and variables, and
    /// write the state in an apply; elsewhere nothing.
    fn of_job(job: &crate::auth::JobGrant, org_id: &str, workspace_id: &str) -> Self {
        if job.org_id != org_id || job.workspace_id != workspace_id {
            return Self::default();
        }
        Self {
            see: true,
            read_state_outputs: true,
            read_state: true,
            write_state: job.applies(),
            read_variables: true,
            ..Self::default()
        }
    }

    /// What a team's access grants.
    pub fn granted(access: &TeamAccess) -> Self {
        let grants = &access.grants;
        let admin = access.access == Access::Admin;
        Self {
            see: true,
            manage: admin,
            lock: grants.workspace_locking,
            force_unlock: admin,
            read_state_outputs: grants.state_versions >= StateVersions::ReadOutputs,
            read_state: grants.state_versions >= StateVersions::Read,
            write_state: grants.state_versions == StateVersions::Write,
            read_variables: grants.variables >= Variables::Read,
            write_variables: grants.variables == Variables::Write,
            read_runs: true,
            queue_run: grants.runs >= Runs::Plan,
            apply_run: grants.runs == Runs::Apply,
        }
    }

    /// What `principal` may do with the workspace `workspace_id` of `org_id`: one read by key
    /// for a team that does not manage the organization's workspaces, none for the others.
    pub async fn of(store: &dyn ItemStore, principal: &Principal, org_id: &str, workspace_id: &str) -> Result<Self> {
        if principal.can(org_id, Permission::ManageWorkspaces) {
            return Ok(Self::org_wide(principal, org_id));
        }
        if let Principal::Job(job) = principal {
            return Ok(Self::of_job(job, org_id, workspace_id));
        }
        let Principal::Team(grant) = principal else { return Ok(Self::default()) };
        if grant.org_id != org_id {
            return Ok(Self::default());
        }
        Ok(of_team(store, org_id, workspace_id, &grant.team_id).await?.map(|a| Self::granted(&a)).unwrap_or_default())
    }
}
