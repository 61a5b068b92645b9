//! An organization's entitlement set (`GET /organizations/:org/entitlement-set`): which of HCP
//! Terraform's features this Hangar serves. Clients decide what to call from it: the Terraform
//! CLI's `remote` backend runs operations locally unless `operations` is true, and go-tfe, pytfe
//! and the tfe provider read it before they use a feature.

use super::access::{visible, Organization};
use super::error::Result;
use crate::auth::Principal;
use crate::store::ItemStore;

/// The features an organization has, by HCP's names. Every organization of one Hangar has the
/// same: a flag is true once Hangar serves the feature's API, and never as a promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entitlements {
    /// Agent pools and agents (`/agent-pools`).
    pub agents: bool,
    /// The private module registry (`/registry-modules`, the registry protocol).
    pub private_module_registry: bool,
    /// Teams and their tokens (`/teams`).
    pub teams: bool,
    /// VCS connections (`/oauth-clients`) that publish modules.
    pub vcs_integrations: bool,
    /// Workspaces that hold Terraform state (`/state-versions`).
    pub state_storage: bool,
    /// Remote plans and applies (`/runs`), on agents: the CLI runs them there unless the
    /// workspace's execution mode is `local`.
    pub operations: bool,
}

/// What this Hangar serves.
pub const SERVED: Entitlements = Entitlements {
    agents: true,
    private_module_registry: true,
    teams: true,
    vcs_integrations: true,
    state_storage: true,
    operations: true,
};

/// The entitlement set of the organization called `name`, for a principal that may read it.
pub async fn of(store: &dyn ItemStore, principal: &Principal, name: &str) -> Result<(Organization, Entitlements)> {
    Ok((visible(store, principal, name).await?, SERVED))
}
