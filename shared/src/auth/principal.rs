//! Who a request acts as, and what that lets it do.

use serde::{Deserialize, Serialize};

/// The organization-level permissions a team can be granted (HCP Terraform's
/// `organization-access`). The owners team holds all of them implicitly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct OrganizationAccess {
    #[serde(default)]
    pub manage_modules: bool,
    #[serde(default)]
    pub manage_providers: bool,
    #[serde(default)]
    pub manage_agent_pools: bool,
    #[serde(default)]
    pub manage_workspaces: bool,
}

/// One permission inside an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See the organization and what it holds.
    Read,
    ManageModules,
    /// Private providers and the GPG keys that sign them.
    ManageProviders,
    ManageAgentPools,
    ManageWorkspaces,
    /// What only owners may do: teams, tokens, settings, deleting modules.
    Own,
    /// Read the registry's modules and providers (the protocol `terraform init` speaks): part of
    /// `Read`, and all a run's job token reads in its organization beside its workspace.
    ReadRegistry,
    /// Find a workspace (what may be done there is the workspace's own grant): part of `Read`,
    /// and what lets a run's job token reach its one workspace.
    FindWorkspaces,
}

/// What a team token carries: copied from the team when the token is made, and rewritten
/// whenever the team changes, so a request needs only the token's item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamGrant {
    pub org_id: String,
    pub team_id: String,
    pub owners: bool,
    pub access: OrganizationAccess,
}

/// What an agent token carries: it lets an agent of one pool register and report, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentGrant {
    pub org_id: String,
    pub pool_id: String,
    pub token_id: String,
}

/// What a run's job token carries: the run's workspace, for the length of one job (a plan or an
/// apply) on one agent. It reads that workspace's configuration, state and variables, writes its
/// logs (and, for an apply, its state), and reads its organization's registry; nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobGrant {
    pub org_id: String,
    pub workspace_id: String,
    pub run_id: String,
    /// `plan` or `apply`.
    pub phase: String,
    pub agent_id: String,
}

impl JobGrant {
    pub fn applies(&self) -> bool {
        self.phase == "apply"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Principal {
    SiteAdmin,
    Team(TeamGrant),
    /// Only the agent gateway accepts these; the management API answers them with 401.
    Agent(AgentGrant),
    /// A run's job token: what the agent running the job, and Terraform there, act as.
    Job(JobGrant),
}

impl Principal {
    /// The id of the user a principal acts as (what `created-by` and `locked-by` relationships
    /// name), and its username: a service account for a team token.
    pub fn user_identity(&self) -> (String, String) {
        match self {
            Principal::SiteAdmin => ("user-site-admin".to_owned(), "site-admin".to_owned()),
            Principal::Team(grant) => {
                let suffix = grant.team_id.trim_start_matches("team-");
                (format!("user-{suffix}"), format!("api-team_{suffix}"))
            }
            // Never reached by the management API: its extractor refuses agent tokens.
            Principal::Agent(grant) => (format!("user-{}", grant.token_id), format!("api-agent_{}", grant.token_id)),
            // The run itself: what holds its workspace's lock, so its state writes pass the lock check.
            Principal::Job(grant) => (grant.run_id.clone(), format!("api-run_{}", grant.run_id)),
        }
    }

    /// The user id of [`Principal::user_identity`].
    pub fn user_id(&self) -> String {
        self.user_identity().0
    }

    pub fn is_site_admin(&self) -> bool {
        matches!(self, Principal::SiteAdmin)
    }

    /// Whether the principal may do `permission` in the organization with this id.
    pub fn can(&self, org_id: &str, permission: Permission) -> bool {
        match self {
            Principal::SiteAdmin => true,
            Principal::Agent(_) => false,
            Principal::Job(grant) => {
                grant.org_id == org_id && matches!(permission, Permission::ReadRegistry | Permission::FindWorkspaces)
            }
            Principal::Team(grant) if grant.org_id != org_id => false,
            Principal::Team(grant) if grant.owners => true,
            Principal::Team(grant) => match permission {
                Permission::Read | Permission::ReadRegistry | Permission::FindWorkspaces => true,
                Permission::ManageModules => grant.access.manage_modules,
                Permission::ManageProviders => grant.access.manage_providers,
                Permission::ManageAgentPools => grant.access.manage_agent_pools,
                Permission::ManageWorkspaces => grant.access.manage_workspaces,
                Permission::Own => false,
            },
        }
    }

    /// The organization a team token belongs to (`None` for the site admin).
    pub fn org_id(&self) -> Option<&str> {
        match self {
            Principal::SiteAdmin => None,
            Principal::Team(grant) => Some(&grant.org_id),
            Principal::Agent(grant) => Some(&grant.org_id),
            Principal::Job(grant) => Some(&grant.org_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(owners: bool, access: OrganizationAccess) -> Principal {
        Principal::Team(TeamGrant { org_id: "org-a".into(), team_id: "team-1".into(), owners, access })
    }

    #[test]
    fn permissions_follow_owners_flags_and_organization() {
        let modules = team(false, OrganizationAccess { manage_modules: true, ..Default::default() });
        assert!(modules.can("org-a", Permission::Read));
        assert!(modules.can("org-a", Permission::ManageModules));
        assert!(!modules.can("org-a", Permission::ManageAgentPools));
        assert!(!modules.can("org-a", Permission::Own));
        assert!(!modules.can("org-b", Permission::Read));
        assert!(team(true, OrganizationAccess::default()).can("org-a", Permission::Own));
        assert!(!team(true, OrganizationAccess::default()).can("org-b", Permission::Read));
        assert!(Principal::SiteAdmin.can("org-b", Permission::Own));
    }
}
