//! The actions HCP Terraform's `permissions.can-resync` and `can-retry` advertise: a resync reads
//! a VCS module's tags (or its branch) again now, through the job that webhooks feed; a retry
//! puts a failed version back to `pending` with a new upload link and, for a VCS module, fetches
//! its archive from the repository again.

use super::sync::{fetch_writes, resync_work};
use crate::accounts::access::Organization;
use crate::api::Field;
use crate::auth::{Permission, Principal};
use crate::blobs::ObjectId;
use crate::registry::error::{RegistryError, Result};
use crate::registry::modules::{self, modify_or_refused, Address, Refused, Shown};
use crate::registry::names::RegistryName;
use crate::registry::retry;
use crate::registry::versions::CreatedVersion;
use crate::state::AppState;

/// Statuses a resync starts over from: the module waits for the job again.
const SETTLED_WITHOUT_VERSIONS: [&str; 2] = ["setup_failed", "no_version_tags"];

/// Records a resync of a VCS module for the job, at most one waiting at a time (a second
/// request while one waits changes nothing), and clears the reason a failure left.
pub async fn resync(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<(Shown, Organization)> {
    let store = state.store.as_ref();
    let org = modules::organization(store, principal, org_name, Permission::ManageModules).await?;
    if address.registry != RegistryName::Private {
        return Err(RegistryError::NotFound);
    }
    let key = address.key(&org, provider)?;
    let recorded = modify_or_refused(store, &key, |module, transaction| {
        let Some(repo) = module.vcs_repo.as_mut() else {
            return Err(RegistryError::invalid(
                Field::Document,
                "only a module published from a VCS repository can be resynced",
            ));
        };
        repo.setup_error = None;
        if SETTLED_WITHOUT_VERSIONS.contains(&module.status.as_str()) {
            module.status = "pending".into();
        }
        Ok(transaction.add(resync_work(module)?))
    })
    .await?;
    let module = match recorded {
        Ok((module, _)) => module,
        // A resync already waits for the job: this one is that one.
        Err(Refused { error, named: resync_absent }) if error.failed_on(resync_absent) => {
            modules::load(store, &key).await?
        }
        Err(refused) => return Err(refused.error.into()),
    };
    state.work.notify_one();
    Ok((Shown::read(store, module).await?, org))
}

/// Retries a failed version: a new upload link and, for a version fetched from a repository at
/// a known commit, a new fetch of that commit in the same write.
pub async fn retry(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    version: &str,
) -> Result<CreatedVersion> {
    let (module, failed) = retry::accept(state, principal, org_name, address, provider, version).await?;
    let upload = ObjectId::generate();
    let commit = failed.commit_sha.clone().filter(|_| module.vcs_repo.is_some());
    // A repository's version is fetched again from its commit, never uploaded by hand.
    if commit.is_none() && failed.source != crate::registry::versions::API_SOURCE {
        return Err(RegistryError::invalid(
            Field::Document,
            format!("version {} came from a repository at no recorded commit: resync the module", failed.version),
        ));
    }
    let extra = match &commit {
        Some(commit) => fetch_writes(&module, &upload, commit)?,
        None => Vec::new(),
    };
    let created = retry::reopen(state, module, failed, &upload, extra).await?;
    if commit.is_some() {
        state.work.notify_one();
    }
    Ok(created)
}
