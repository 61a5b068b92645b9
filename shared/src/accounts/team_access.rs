//! Team access to workspaces (HCP Terraform's `team-workspaces`): granting a team one of HCP's
//! permission sets (`read`, `plan`, `write`, `admin`) or `custom` fine-grained permissions on one
//! workspace. Whoever has admin access to the workspace manages who else has access. A record
//! and its entry in the team's index are written together, with checks that the workspace and
//! the team are still there; each goes with its workspace (as the workspace's data) and with its
//! team ([`forget_team`]).

use super::error::{AccountsError, Result};
use super::grants::{Access, Grants, TeamAccess};
use super::teams::Team;
use super::workspaces::{self, WorkspaceAt};
use crate::api::Field;
use crate::auth::Principal;
use crate::ids::new_id;
use crate::store::{
    keys, pointer, query_all_as, Condition, Item, ItemStore, Transaction, Write, MAX_TRANSACTION_WRITES,
};

/// A request's fine-grained permissions, each `None` when not sent.
#[derive(Debug, Clone, Default)]
pub struct CustomGrants {
    pub runs: Option<super::grants::Runs>,
    pub variables: Option<super::grants::Variables>,
    pub state_versions: Option<super::grants::StateVersions>,
    pub sentinel_mocks: Option<super::grants::SentinelMocks>,
    pub workspace_locking: Option<bool>,
    pub run_tasks: Option<bool>,
}

impl CustomGrants {
    fn is_empty(&self) -> bool {
        self.runs.is_none()
            && self.variables.is_none()
            && self.state_versions.is_none()
            && self.sentinel_mocks.is_none()
            && self.workspace_locking.is_none()
            && self.run_tasks.is_none()
    }

    /// The grants `access` gives, with these over them when it is `custom`; refused otherwise.
    fn over(&self, access: Access, current: Option<Grants>) -> Result<Grants> {
        if access != Access::Custom {
            if !self.is_empty() {
                return Err(AccountsError::invalid(
                    Field::Attribute("access"),
                    "fine-grained permissions are set only with `custom` access",
                ));
            }
            return Ok(access.grants());
        }
        let base = current.unwrap_or_else(|| access.grants());
        Ok(Grants {
            runs: self.runs.unwrap_or(base.runs),
            variables: self.variables.unwrap_or(base.variables),
            state_versions: self.state_versions.unwrap_or(base.state_versions),
            sentinel_mocks: self.sentinel_mocks.unwrap_or(base.sentinel_mocks),
            workspace_locking: self.workspace_locking.unwrap_or(base.workspace_locking),
            run_tasks: self.run_tasks.unwrap_or(base.run_tasks),
        })
    }
}

pub struct NewTeamAccess {
    pub workspace_id: String,
    pub team_id: String,
    pub access: Access,
    pub custom: CustomGrants,
}

/// The writes that store `access` and its index entry, on `condition`.
fn writes(access: &TeamAccess, condition: Condition) -> Result<[Write; 2]> {
    let item =
        Item::from_value(access.key(), access)?.with_satellites(&[keys::id_pointer(&access.id), access.index_key()]);
    let index = Item::from_value(access.index_key(), access)?;
    Ok([Write::Put { item, condition }, Write::Put { item: index, condition: Condition::Always }])
}

/// Grants a team access to a workspace, for a principal with admin access to the workspace.
pub async fn create(store: &dyn ItemStore, principal: &Principal, new: NewTeamAccess) -> Result<TeamAccess> {
    let workspace = workspaces::find(store, principal, WorkspaceAt::Id(&new.workspace_id))
        .await?
        .requiring(|may| may.manage, "manage team access")?
        .workspace;
    let team: Team =
        pointer::resolve(store, &new.team_id).await?.filter(|team: &Team| team.org_id == workspace.org_id).ok_or_else(
            || AccountsError::invalid(Field::RelationshipId("team"), "no such team in the workspace's organization"),
        )?;
    let access = TeamAccess {
        id: new_id("tws"),
        org_id: workspace.org_id.clone(),
        workspace_id: workspace.id.clone(),
        team_id: team.id.clone(),
        access: new.access,
        grants: new.custom.over(new.access, None)?,
        created_at: crate::api::timestamp(chrono::Utc::now()),
        revision: 0,
    };
    let mut transaction = Transaction::new();
    let [record, index] = writes(&access, Condition::NotExists)?;
    let claim = transaction.add(record);
    transaction.add(index);
    transaction.add(pointer::create(&access.id, &access.key())?);
    let present = transaction.extend([
        Write::Check { key: workspace.key(), condition: Condition::equals("id", workspace.id.as_str()) },
        Write::Check { key: team.key(), condition: Condition::equals("id", team.id.as_str()) },
    ]);
    match transaction.commit(store).await {
        Err(e) if e.failed_on(claim) => Err(AccountsError::taken(Field::RelationshipId("team"))),
        Err(e) if e.failed_on(present) => {
            Err(AccountsError::Conflict("The workspace or team is changing; retry.".into()))
        }
        other => other.map(|()| access).map_err(AccountsError::from),
    }
}

/// The accesses to the workspace `workspace_id`, for a principal with admin access to it.
pub async fn list(store: &dyn ItemStore, principal: &Principal, workspace_id: &str) -> Result<Vec<TeamAccess>> {
    let workspace = workspaces::find(store, principal, WorkspaceAt::Id(workspace_id))
        .await?
        .requiring(|may| may.manage, "manage team access")?
        .workspace;
    Ok(query_all_as(store, keys::team_accesses(&workspace.org_id, &workspace.id)).await?)
}

/// An access by id, for a principal with admin access to its workspace; else not found.
pub async fn get(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<TeamAccess> {
    let access: TeamAccess = pointer::resolve(store, id).await?.ok_or(AccountsError::NotFound)?;
    let found = workspaces::find(store, principal, WorkspaceAt::Id(&access.workspace_id)).await?;
    if !found.may.manage {
        return Err(AccountsError::NotFound);
    }
    Ok(access)
}

/// Changes an access's permission set (`access`, and with `custom` the fine-grained ones).
pub async fn update(
    store: &dyn ItemStore,
    principal: &Principal,
    id: &str,
    access: Option<Access>,
    custom: CustomGrants,
) -> Result<TeamAccess> {
    let current = get(store, principal, id).await?;
    let level = access.unwrap_or(current.access);
    let carried = (current.access == Access::Custom).then_some(current.grants);
    let next = TeamAccess {
        access: level,
        grants: custom.over(level, carried)?,
        revision: current.revision + 1,
        ..current.clone()
    };
    let [record, index] = writes(&next, Condition::equals("revision", current.revision))?;
    match store.transact(vec![record, index]).await {
        Err(e) if e.is_condition_failed() => Err(AccountsError::Conflict("The access is changing; retry.".into())),
        other => other.map(|()| next).map_err(AccountsError::from),
    }
}

/// Takes a team's access to a workspace away.
pub async fn delete(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<()> {
    let access = get(store, principal, id).await?;
    store.transact(removal(&access)).await?;
    Ok(())
}

fn removal(access: &TeamAccess) -> Vec<Write> {
    vec![
        Write::Delete { key: access.key(), condition: Condition::Always },
        Write::Delete { key: access.index_key(), condition: Condition::Always },
        pointer::remove(&access.id),
    ]
}

/// Removes every access a deleted team had. Safe to run again; an access a crash leaves behind
/// names a team that no longer exists, whose tokens are gone, so it grants nothing.
pub async fn forget_team(store: &dyn ItemStore, org_id: &str, team_id: &str) -> Result<()> {
    let accesses: Vec<TeamAccess> = query_all_as(store, keys::team_workspaces(org_id, team_id)).await?;
    let writes: Vec<Write> = accesses.iter().flat_map(removal).collect();
    for chunk in writes.chunks(MAX_TRANSACTION_WRITES / 3 * 3) {
        store.transact(chunk.to_vec()).await?;
    }
    Ok(())
}
