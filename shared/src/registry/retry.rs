//! Retrying a failed version (the `can-retry` HCP Terraform advertises): the version goes back
//! to `pending` with a new upload link, and ingest runs again on whatever lands there, without
//! deleting the version or its module. Publishing adds a new fetch from the repository for a
//! VCS module's version.

use super::error::{RegistryError, Result};
use super::modules::{self, load, Address, Module};
use super::status::{FAILED, PENDING};
use super::version_index;
use super::versions::{upload_url, CreatedVersion, ModuleVersion, PendingUpload};
use crate::api::Field;
use crate::auth::{Permission, Principal};
use crate::blobs::ObjectId;
use crate::state::AppState;
use crate::store::{keys, Condition, Item, Transaction, UpdateOp, Write};

/// The failed version `version` of a private module the principal manages, with its module.
pub async fn accept(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    version: &str,
) -> Result<(Module, ModuleVersion)> {
    let store = state.store.as_ref();
    let org = modules::managing_versions(state, principal, org_name, address, Permission::ManageModules).await?;
    let module = load(store, &address.key(&org, provider)?).await?;
    let key = keys::module_version(&org.id, &address.name, provider, version);
    let found: ModuleVersion = store.get(&key).await?.ok_or(RegistryError::NotFound)?.parse()?;
    if found.status != FAILED {
        return Err(RegistryError::invalid(
            Field::Document,
            format!("only a failed version can be retried; version {} is {}", found.version, found.status),
        ));
    }
    Ok((module, found))
}

/// Puts a failed version back to `pending`, waiting for an archive at `upload`, in one
/// transaction with `extra` (publishing's fetch); conditional on the version still being
/// failed, so that of two racing retries one wins and the other is told.
pub async fn reopen(
    state: &AppState,
    module: Module,
    failed: ModuleVersion,
    upload: &ObjectId,
    extra: Vec<Write>,
) -> Result<CreatedVersion> {
    let before = failed.status_entry();
    let mut version = failed;
    version.status = PENDING.into();
    version.error = None;
    version.upload = Some(upload.to_string());
    version.updated_at = crate::api::timestamp(chrono::Utc::now());
    let bump = vec![UpdateOp::Add("revision".into(), 1), UpdateOp::set("updated_at", version.updated_at.clone())];
    let pending = PendingUpload { module: module.key(), version: version.key() };
    let mut transaction = Transaction::new();
    let module_exists = transaction.add(Write::Update { key: module.key(), ops: bump, condition: Condition::Exists });
    let still_failed =
        transaction.add(Write::Put { item: version.to_item()?, condition: Condition::equals("status", FAILED) });
    transaction.add(Write::Put { item: version.status_item()?, condition: Condition::Always });
    transaction.add(Write::Put {
        item: Item::from_value(keys::pending_upload(upload.as_str()), &pending)?,
        condition: Condition::NotExists,
    });
    transaction.extend(extra);
    transaction.add(version_index::change(module.version_index_key(), Some(&before), &version.status_entry())?);
    match version_index::transact(state.store.as_ref(), transaction).await {
        Ok(()) => {}
        Err(e) if e.failed_on(module_exists) => return Err(RegistryError::NotFound),
        Err(e) if e.failed_on(still_failed) => {
            return Err(RegistryError::Conflict(format!(
                "version {} is no longer failed: another retry or a delete came first",
                version.version
            )))
        }
        Err(e) => return Err(e.into()),
    }
    let upload_url = upload_url(state.blobs.as_ref(), &version).await?;
    Ok(CreatedVersion { version, module, upload_url })
}
