//! Where a principal may act on modules: the organization it acts in, if it holds the permission
//! there, and the edition's rule on public (curated) modules.

use super::record::Address;
use crate::accounts::access::{self, Organization};
use crate::auth::{Permission, Principal};
use crate::config::Edition;
use crate::registry::error::{RegistryError, Result};
use crate::registry::names::RegistryName;
use crate::state::AppState;
use crate::store::ItemStore;

/// The organization, if the principal holds `permission` there; else 404.
pub(in crate::registry) async fn organization(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    permission: Permission,
) -> Result<Organization> {
    Ok(access::authorized(store, principal, org_name, permission).await?)
}

/// The organization where the principal changes a private module's versions, if it holds
/// `permission` there; a public module has no versions, so its are 404.
pub(in crate::registry) async fn managing_versions(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    permission: Permission,
) -> Result<Organization> {
    let org = organization(state.store.as_ref(), principal, org_name, permission).await?;
    check_curation(state, address.registry)?;
    if address.registry == RegistryName::Public {
        return Err(RegistryError::NotFound);
    }
    Ok(org)
}

/// Public modules exist only where the edition allows their curation.
pub(in crate::registry) fn check_curation(state: &AppState, registry: RegistryName) -> Result<()> {
    if registry == RegistryName::Public && state.config.edition == Edition::SelfHosted {
        return Err(RegistryError::CurationDisabled);
    }
    Ok(())
}
